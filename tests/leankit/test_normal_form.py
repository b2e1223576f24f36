"""The normal form decontamination compares statements with: equal up to bound variable and hypothesis names and
the binder/arrow spelling of hypotheses, spacing and comments; different whenever the mathematics differs."""

from __future__ import annotations

import pytest

from leankit.normal_form import state_up_to_names, statement_normal_form, tokenize


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # hypothesis names and binder vs arrow (miniF2F's declaration form against the bundled ∀ form)
        ("∀ (x : ℝ) (h₀ : 2 * x + 3 = 11), x = 4", "∀ (y : ℝ), 2*y + 3 = 11 → y = 4"),
        # grouped and bare binders, implicit brackets
        ("∀ (a b : ℕ) (h : a = b), b = a", "∀ {m : ℕ} (n : ℕ), m = n → n = m"),
        ("∀ x y : ℕ, x = y → y = x", "∀ (p q : ℕ), p = q → q = p"),
        # names bound inside the statement, `in` against `∈`, a comment, line breaks
        ("(∑ x in Finset.range 10, (x + 1) ^ 2) % 10 = 5", "(∑ k ∈ Finset.range 10,\n  (k + 1) ^ 2) % 10 = 5 -- sum"),
        ("∀ (f : ℝ → ℝ) (h₀ : ∀ x, f x = 3 * x + 2), f 4 = 14", "∀ (g : ℝ → ℝ), (∀ t, g t = 3 * t + 2) → g 4 = 14"),
        ("∀ (n : ℕ) (h₀ : n ! = 6), ∃ k, n = k + 3", "∀ (m : ℕ), m ! = 6 → ∃ j, m = j + 3"),
        ("∀ (S : Set ℝ) (h : S = {x : ℝ | 0 < x}), π ∈ S", "∀ (T : Set ℝ), T = {y : ℝ | 0 < y} → π ∈ T"),
        # projections of a renamed hypothesis; ASCII spellings
        ("∀ (a : ℝ) (h : 0 < a ∧ a < 1), a ≤ 1 ∧ h.1.le = h.1.le",
         "∀ (b : ℝ) (k : 0 < b ∧ b < 1), b <= 1 ∧ k.1.le = k.1.le"),
        ("(29 * 79 + 31 * 81) % 10 = 2", "(29*79 + 31*81) % 10 = 2"),
        # parentheses Lean's precedences make redundant; `Real.pi` is `π`
        ("(2 ^ 2010) % 10 = 4", "2 ^ 2010 % 10 = 4"),
        ("(1 * 3 * 5) % 10 = 5", "1 * 3 * 5 % 10 = 5"),
        ("∀ (n : ℕ) (h₁ : 101 ∣ (123456 - n)), n = 34", "∀ (n : ℕ), 101 ∣ 123456 - n → n = 34"),
        ("∀ (m b : ℝ), m * (-1) + b = 7 → m + b = 5", "∀ (m b : ℝ), m * -1 + b = 7 → m + b = 5"),
        ("∀ (x y : ℕ), x ^ (y ^ 2) = y ^ x → x = 1", "∀ (x y : ℕ), x ^ y ^ 2 = y ^ x → x = 1"),
        ("(∑ k ∈ (Finset.range 101), k) % 6 = 4", "(∑ k in Finset.range 101, k) % 6 = 4"),
        ("∀ (u : ℕ → ℚ), (∑ k in Finset.range 98, u k) = 137 → True",
         "∀ (v : ℕ → ℚ), ∑ j ∈ Finset.range 98, v j = 137 → True"),
        ("Real.cos (Real.pi / 3) = 1 / 2", "Real.cos (π / 3) = 1 / 2"),
    ],
)
def test_statements_equal_up_to_renaming_share_a_normal_form(first: str, second: str) -> None:
    assert statement_normal_form(first) == statement_normal_form(second)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("∀ (x : ℝ), 2 * x + 3 = 11 → x = 4", "∀ (x : ℝ), 2 * x + 3 = 11 → x = 5"),  # another value
        ("∀ (x : ℕ), 2 * x + 3 = 11 → x = 4", "∀ (x : ℝ), 2 * x + 3 = 11 → x = 4"),  # another type
        ("∀ (x y : ℕ), x = y → y = x", "∀ (x y : ℕ), y = x → y = x"),  # the variables' roles swapped
        ("∀ (a b : ℝ), a < b", "∀ (a b : ℝ), b < a"),
        ("Real.sqrt 2 < 2", "Real.sqrt 3 < 2"),
        ("∀ (x : ℝ), 0 < x → 0 < π * x", "∀ (x : ℝ), 0 < x → 0 < e * x"),  # free names are not renamed
        # an arrow inside ∃ is no premise, and `↔` binds looser than `→`
        ("∀ (p q : Prop), (∃ (n : ℕ), p) → q", "∀ (p q : Prop), ∃ (n : ℕ), p → q"),
        ("∀ (p q r : Prop), (p ↔ q) → r", "∀ (p q r : Prop), p ↔ q → r"),
        # parentheses that change what binds to what
        ("(-1) ^ n = 1", "-1 ^ n = 1"),
        ("(x ^ y) ^ 2 = 1", "x ^ y ^ 2 = 1"),
        ("a - (b + c) = 0", "a - b + c = 0"),
        ("(a + b) * c = 0", "a + b * c = 0"),
        ("f (g x) = 1", "f g x = 1"),
        ("(n - 1) ! = 6", "n - 1 ! = 6"),
        ("x = (∑ n ∈ s, f n) / 2", "x = ∑ n ∈ s, f n / 2"),
    ],
)
def test_different_statements_keep_different_normal_forms(first: str, second: str) -> None:
    assert statement_normal_form(first) != statement_normal_form(second)


def test_tokens_keep_dotted_names_and_factorials_and_read_ascii_as_lean() -> None:
    assert tokenize("Real.sqrt x <= h₀.1 -> n ! = n! /- c -/") == [
        "Real.sqrt", "x", "≤", "h₀.1", "→", "n", "!", "=", "n!"]
    assert statement_normal_form("∀ (x : ℝ) (h₀ : 0 < x), x ^ 2 > 0") == "∀ ( #0 : ℝ ) , 0 < #0 → #0 ^ 2 > 0"


# ------------------------------------------------------------------------------------------------- states

RENAMED_PAIRS = [
    # `intro h₀ h₁` against `intro h₁ h₃`: the same hypotheses under other names, used in the target too
    ("x : ℝ\nh₀ : 2 * x + 3 = 11\nh₁ : 0 < x\n⊢ x = 4 ∧ 0 < x",
     "x : ℝ\nh₁ : 2 * x + 3 = 11\nh₃ : 0 < x\n⊢ x = 4 ∧ 0 < x"),
    # grouped names, projections of a renamed hypothesis, several goals each with its own context
    ("A B : Set ℕ\nm : ℕ\nh₀ : m ∈ A ∩ B\n⊢ m ∈ A ∪ B ∧ h₀.1 = h₀.1\n\nn : ℕ\nh₀ : 8 ∣ n\n⊢ 8 ∣ n + 32",
     "A B : Set ℕ\nm : ℕ\nhm : m ∈ A ∩ B\n⊢ m ∈ A ∪ B ∧ hm.1 = hm.1\n\nn : ℕ\nh : 8 ∣ n\n⊢ 8 ∣ n + 32"),
    # variables renamed too; an inaccessible name stays inaccessible; a case tag is kept
    ("case h\ny : ℝ\nh₂✝ : 0 ≤ y\n⊢ ∃ z, y + z = y", "case h\nt : ℝ\nh✝ : 0 ≤ t\n⊢ ∃ z, t + z = t"),
]


@pytest.mark.parametrize(("first", "second"), RENAMED_PAIRS)
def test_states_equal_up_to_names_share_a_form(first: str, second: str) -> None:
    assert state_up_to_names(first) == state_up_to_names(second)
    assert state_up_to_names(first) != first


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # another type, the hypotheses in another order, an accessible name against an inaccessible one
        ("x : ℝ\nh₀ : 2 * x = 4\n⊢ x = 2", "x : ℝ\nh₀ : 2 * x = 6\n⊢ x = 2"),
        ("x : ℝ\nh₀ : 0 < x\nh₁ : x < 1\n⊢ x ≠ 2", "x : ℝ\nh₀ : x < 1\nh₁ : 0 < x\n⊢ x ≠ 2"),
        ("x : ℝ\nh₀ : 0 < x\n⊢ 0 < x", "x : ℝ\nh₀✝ : 0 < x\n⊢ 0 < x"),
        # another case tag; one goal against two; a name that is not bound in the context keeps its spelling
        ("case inl\nx : ℝ\n⊢ x = x", "case inr\nx : ℝ\n⊢ x = x"),
        ("x : ℝ\n⊢ x = x", "x : ℝ\n⊢ x = x\n\nx : ℝ\n⊢ x = x"),
        ("x : ℝ\n⊢ Real.sqrt x = x", "x : ℝ\n⊢ Real.cos x = x"),
    ],
)
def test_states_that_differ_beyond_names_keep_different_forms(first: str, second: str) -> None:
    assert state_up_to_names(first) != state_up_to_names(second)


def test_state_form_names_in_order_of_introduction_and_leaves_qualified_names() -> None:
    assert state_up_to_names("x y : ℝ\nh₀ : x < y\nh₁✝ : 0 < Nat.x\n⊢ h₀.le = h₀.le") == (
        "#0 #1 : ℝ\n#2 : #0 < #1\n#3✝ : 0 < Nat.x\n⊢ #2.le = #2.le")

"""minilean's tactics: Lean's behaviour and messages, branching search trees, trap theorems that look provable,
and the generated world's recorded proofs and failures checked (not looked up)."""

from __future__ import annotations

import pytest

from minilean.goals import pp_goal
from minilean.parser import parse
from minilean.syntax import pp
from tests.minilean.helpers import Prover, TacticError

POS = "∀ (x y : ℝ), 0 < x → 0 < y → 0 < x * y + x"


def test_parse_and_print_like_lean():
    cases = {
        "∀ (x y : ℝ), x + y = 10 → x - y = 2 → x = 6 ∧ y = 4": "∀ (x y : ℝ), x + y = 10 → x - y = 2 → x = 6 ∧ y = 4",
        "∀ x ∈ {y : ℝ | 0 < y}, 0 < x ^ 2": "∀ x ∈ {y | 0 < y}, 0 < x ^ 2",
        "¬(a = b)": "¬a = b",
        "(-x) ^ 2 - -x ^ 2": "(-x) ^ 2 - -x ^ 2",
        "a - (b - c) * (d + e)": "a - (b - c) * (d + e)",
        "(p ∧ q) ∧ r ∨ (p → q) → r": "(p ∧ q) ∧ r ∨ (p → q) → r",
        "x ∈ A ∩ (B ∪ C)": "x ∈ A ∩ (B ∪ C)",
        "(2 : ℝ) + 3 = 5": "2 + 3 = 5",
        "|x - 1| < 2": "|x - 1| < 2",
    }
    for source, printed in cases.items():
        assert pp(parse(source)) == printed
        assert pp(parse(printed)) == printed


def test_goals_print_as_lean_groups_them():
    prover = Prover()
    goals = prover.run(prover.start("∀ (p q : Prop), p ∨ q → q ∨ p"), "intro p q h")
    goals = prover.run(goals, "cases h")
    assert [g.case for g in goals] == ["inl", "inr"]
    assert pp_goal(goals[0]) == "case inl\np q : Prop\nh✝ : p\n⊢ q ∨ p"
    goals = prover.run(goals, "apply Or.inr")
    assert goals[0].case == "inl.h" and pp(goals[0].target) == "p"
    assert goals[1].case == "inr"


def test_branching_several_first_tactics_succeed_with_different_states_and_some_fail():
    prover = Prover()
    root = prover.start(POS)
    # different introductions, different states
    one = prover.run(root, "intro x")
    assert pp(one[0].target) == "∀ (y : ℝ), 0 < x → 0 < y → 0 < x * y + x"
    every = prover.run(root, "intro x y hx hy")
    assert pp_goal(every[0]) == "x y : ℝ\nhx : 0 < x\nhy : 0 < y\n⊢ 0 < x * y + x"
    inaccessible = prover.run(root, "intros")
    assert [h.name for h in inaccessible[0].hyps] == ["x✝", "y✝", "a✝¹", "a✝"]
    # from the introduced goal: closing tactics, a step that leaves a goal, a dead end, and failures
    assert prover.run(every, "positivity") == ()
    assert prover.run(every, "nlinarith [mul_pos hx hy]") == ()
    have = prover.run(every, "have h := mul_pos hx hy")
    assert pp(have[0].hyps[-1].ty) == "0 < x * y" and pp(have[0].target) == "0 < x * y + x"
    assert prover.run(have, "linarith") == ()
    dead_end = prover.run(every, "exfalso")
    assert pp(dead_end[0].target) == "False"
    assert prover.error(dead_end, "linarith").startswith("linarith failed to find a contradiction")
    # Mathlib's text: the goal `0 < x * y + x` negated through `not_lt` (`x * y + x ≤ 0`), then its oracle's `failed`.
    assert prover.error(every, "linarith") == (
        "linarith failed to find a contradiction\nx y : ℝ\nhx : 0 < x\nhy : 0 < y\na✝ : x * y + x ≤ 0\n⊢ False\n"
        "failed")
    assert prover.error(every, "exact h") == "unknown identifier 'h'"
    assert prover.error(every, "rfl").startswith("The rfl tactic failed. Possible reasons:")
    assert prover.error(every, "intro z").startswith("tactic 'introN' failed, insufficient number of binders")
    assert prover.error(every, "exact hx") == (
        "type mismatch\n  hx\nhas type\n  0 < x : Prop\nbut is expected to have type\n  0 < x * y + x : Prop")
    assert prover.error(every, "decide").startswith("Expected type must not contain free variables")
    assert prover.error(every, "constructor").startswith("tactic 'constructor' failed")


def test_linarith_asks_z3_once_a_problem_and_an_atoms_type_is_part_of_the_problem(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`x < 0` is refuted over ℕ (its atoms are non-negative) and not over ℤ: the same comparisons, other atoms'
    types. Asked again (a fresh goal, fresh atoms), the ℕ problem is answered without z3."""
    from minilean import procedures

    asked: list[int] = []
    z3 = procedures._z3

    def counted() -> object:
        asked.append(1)
        return z3()

    procedures._linear_unsat_of.cache_clear()
    monkeypatch.setattr(procedures, "_z3", counted)
    prover = Prover()
    for _ in range(2):
        assert prover.run(prover.run(prover.start("∀ (x : ℕ), x < 0 → False"), "intro x h"), "linarith") == ()
    assert len(asked) == 1
    integer = prover.run(prover.start("∀ (x : ℤ), x < 0 → False"), "intro x h")
    assert prover.error(integer, "linarith").startswith("linarith failed")
    assert len(asked) == 2


def test_decision_tactics_keep_their_scope():
    prover = Prover()
    # over ℤ, 2x = 1 is impossible: omega knows, linarith (rational relaxation) does not
    integer = prover.run(prover.start("∀ (x : ℤ), 2 * x = 1 → False"), "intro x h")
    assert prover.run(integer, "omega") == ()
    assert prover.error(integer, "linarith").startswith("linarith failed")
    # nonlinear: linarith treats x * y as an atom, nlinarith multiplies hypotheses
    square = prover.run(prover.start("∀ (a b : ℝ), 2 * a * b ≤ a ^ 2 + b ^ 2"), "intro a b")
    assert prover.error(square, "linarith").startswith("linarith failed")
    assert prover.error(square, "nlinarith [sq_nonneg (a + b)]").startswith("linarith failed")
    assert prover.run(square, "nlinarith [sq_nonneg (a - b)]") == ()
    # omega ignores real facts and fails on goals outside ℕ/ℤ
    real = prover.run(prover.start("∀ (x : ℝ), x = 2 → x + 1 = 3"), "intro x h")
    assert prover.error(real, "omega").startswith("omega could not prove the goal")
    assert prover.run(real, "linarith") == ()
    assert prover.run(real, "rw [h]; norm_num") == ()
    # positivity is syntactic: a sum of squares is nonnegative, not positive
    nonneg = prover.run(prover.start("∀ (x : ℝ), 0 < x ^ 2 + 1"), "intro x")
    assert prover.run(nonneg, "positivity") == ()
    weak = prover.run(prover.start("∀ (x : ℝ), 0 < x ^ 2"), "intro x")
    assert prover.error(weak, "positivity").startswith("failed to prove positivity, but it would be possible")
    assert prover.error(prover.start("∀ (x : ℝ), x = x + 0 ∨ x < 0"), "positivity") == "not a positivity goal"


def test_structural_tactics():
    prover = Prover()
    assert prover.closes("∀ (p q : Prop), p ∧ q → q ∧ p", ["intro p q h", "obtain ⟨hp, hq⟩ := h", "exact ⟨hq, hp⟩"])
    assert prover.closes("∀ (p q : Prop), p ∧ q → q ∧ p", ["rintro p q ⟨hp, hq⟩", "constructor", "exact hq",
                                                           "exact hp"])
    assert prover.closes("∀ (p q : Prop), p ∨ q → q ∨ p", ["intro p q h", "rcases h with hp | hq",
                                                           "· right; exact hp", "· left; exact hq"])
    assert prover.closes("∀ (x : ℝ), x = 3 ∨ x = 4 → x ^ 2 - 7 * x + 12 = 0",
                         ["intro x h", "rcases h with h | h <;> subst h <;> norm_num"])
    assert prover.closes("∃ n, n * n = 49", ["use 7"])
    assert prover.closes("∃ n, n * n = 49", ["exact ⟨7, by norm_num⟩"])
    assert prover.closes("∀ (B C : Set ℤ), B ∩ C ⊆ C", ["intro B C x h", "exact h.2"])
    assert prover.closes("∀ (B C : Set ℤ), B ∩ C ⊆ C", ["intro B C", "exact Set.inter_subset_right"])
    assert prover.closes("∀ (A B : Set ℕ), A ∪ B = B ∪ A", ["intro A B", "ext x", "simp only [Set.mem_union]",
                                                            "tauto"])
    assert prover.closes("∀ (n : ℕ), n % 4 = 3 → (n + 8) % 4 = 3", ["intro n h", "omega"])
    assert prover.closes("∀ (k n : ℕ), 3 ∣ n → 3 ∣ n + 6", ["intro k n h", "apply Nat.dvd_add h", "norm_num"])
    assert prover.closes("∀ (x y : ℝ), x = 2 → y = x + 1 → y = 3", ["intro x y h₀ h₁", "subst h₀", "linarith"])
    assert prover.closes("∀ (x y : ℝ), x + y = 10 → x - y = 2 → x = 6 ∧ y = 4",
                         ["intro x y h₀ h₁", "exact ⟨by linarith, by linarith⟩"])
    assert prover.closes("∀ (x y : ℝ), x + y = 10 → x - y = 2 → x = 6 ∧ y = 4",
                         ["intro x y h₀ h₁", "refine ⟨?_, ?_⟩", "linarith", "linarith"])
    assert prover.closes("∀ (a b : ℝ), a * b = 0 → b ≠ 0 → a = 0",
                         ["intro a b h hb", "rcases mul_eq_zero.mp h with h | h", "exact h", "exact absurd h hb"])
    assert prover.closes("∀ (p : Prop), ¬¬p → p", ["intro p h", "by_contra hn", "exact h hn"])
    assert prover.closes("∀ (x : ℝ), ¬(x < 0) → 0 ≤ x", ["intro x h", "push_neg at h", "exact h"])


def test_lemma_classes_are_respected():
    prover = Prover()
    # `sub_nonneg` holds in ordered groups only; on ℕ it would prove `0 ≤ a - b → b ≤ a`, which is false
    nat = prover.run(prover.start("∀ (a b : ℕ), 0 ≤ a - b → b ≤ a"), "intro a b h")
    assert "failed to synthesize" in prover.error(nat, "exact sub_nonneg.mp h")
    assert prover.error(nat, "rw [sub_nonneg] at h").startswith("tactic 'rewrite' failed")
    real = prover.run(prover.start("∀ (a b : ℝ), 0 ≤ a - b → b ≤ a"), "intro a b h")
    assert prover.run(real, "exact sub_nonneg.mp h") == ()


TRAPS = [
    # (false statement, why it is false)
    ("∀ (n : ℕ), n - 1 + 1 = n", "n = 0"),
    ("∀ (a b : ℕ), a - b + b = a", "a = 0, b = 1"),
    ("∀ (x : ℝ), x / x = 1", "x = 0"),
    ("∀ (x : ℝ), 0 < x ^ 2", "x = 0"),
    ("∀ (n : ℤ), n / 2 * 2 = n", "n = 1"),
    ("∀ (x y : ℝ), x < y → x ^ 2 < y ^ 2", "x = -2, y = 1"),
    ("∀ (n : ℕ), n % 2 = 0 ∨ n % 2 = 1 → n % 2 = 0", "n = 1"),
    ("∀ (p q : Prop), (p → q) → q → p", "p false, q true"),
    ("∀ (x : ℝ), 2 * x = 1 → False", "x = 1/2"),
    ("∀ (A B : Set ℕ), A ∪ B ⊆ A", "A = ∅, B = {0}"),
    ("∃ n, n * n = 50", "50 is no square"),
    ("(7 : ℤ) - 10 = 0", "-3"),
    ("∀ (x : ℝ), |x| = x", "x = -1"),
    ("∀ (a b : ℝ), a * b = 0 → a = 0", "a = 1, b = 0"),
    ("∀ (x : ℝ), x ^ 2 = 4 → x = 2", "x = -2"),
    ("∀ (n : ℕ), 2 ∣ n * (n + 1) → 4 ∣ n * (n + 1)", "n = 1"),
    ("∀ (x y : ℝ), x * y ≤ x ^ 2 + y ^ 2 - 1", "x = y = 0"),
    ("∀ (x : ℤ), x ^ 2 ≥ x + 1", "x = 0"),
    ("∀ (x : ℕ), x / 2 + x / 2 = x", "x = 1"),
    ("∀ (B C : Set ℤ) (x : ℤ), x ∈ B ∪ C → x ∈ B ∩ C", "x only in B"),
]

ATTEMPTS = [
    "linarith", "nlinarith", "nlinarith [sq_nonneg x]", "positivity", "omega", "decide", "norm_num", "simp", "tauto",
    "ring", "rfl", "assumption", "contradiction", "constructor", "left", "right", "use 7", "trivial",
    "exact Set.subset_union_left", "norm_num [Nat.add_mul_mod_self_right]", "nlinarith [sq_nonneg (x - y)]",
]
AFTER_INTRO = [
    "linarith", "nlinarith", "nlinarith [sq_nonneg x, sq_nonneg (x - 2), sq_nonneg (x + 2)]", "positivity", "omega",
    "norm_num", "simp", "tauto", "ring", "field_simp", "exact h", "assumption", "contradiction", "simp at h",
    "norm_num at h", "rcases h with h | h <;> omega", "exact h.1", "exact h.elim", "nlinarith [h, sq_nonneg (x + y)]",
    "exact Or.inl h", "subst h", "rw [h]", "omega", "decide", "simp [h]", "exact fun hx => hx",
]


@pytest.mark.slow
@pytest.mark.parametrize(("statement", "why"), TRAPS, ids=[t[0] for t in TRAPS])
def test_trap_theorems_are_not_provable(statement: str, why: str):
    prover = Prover()
    root = prover.start(statement)
    for tactic in ATTEMPTS:
        assert not prover.closes(statement, [tactic]), (tactic, why)
    intros = ["intro x h", "intro n h", "intro a b h", "intro x y h", "intro A B x h", "intro p q h hq",
              "intro B C x h", "intro x", "intro n", "intro a b", "intros"]
    for intro in intros:
        try:
            introduced = prover.run(root, intro)
        except TacticError:
            continue
        for tactic in AFTER_INTRO:
            try:
                left = prover.run(introduced, tactic)
            except TacticError:
                continue
            assert left, (intro, tactic, why)
            for finisher in ("linarith", "nlinarith", "omega", "norm_num", "tauto", "decide", "simp"):
                assert not _closes_from(prover, left, finisher), (intro, tactic, finisher, why)


def _closes_from(prover: Prover, goals, tactic: str) -> bool:
    try:
        return not prover.run(goals, tactic)
    except TacticError:
        return False


def test_new_names_never_capture_old_ones():
    prover = Prover()
    # `fun x => …` under a local `x`: the old one becomes `x✝`, so the goal is not `x = x`
    goal = prover.run(prover.start("∀ (x : ℝ), ∀ (y : ℝ), y = x → y = x"), "intro x")
    assert prover.run(goal, "exact fun y h => h") == ()
    shadow = prover.start("∀ (x : ℝ), ∀ (y : ℝ), y = x")
    shadow = prover.run(shadow, "intro x")
    assert "type mismatch" in prover.error(shadow, "exact fun x => rfl")
    # an existential witness named like a local the body mentions
    ex = prover.run(prover.start("∀ (a b : ℤ), (∃ c, b = a * c) → b = a * a"), "intro a b h")
    obtained = prover.run(ex, "obtain ⟨a, ha⟩ := h")
    assert [f"{h.name} : {pp(h.ty)}" for h in obtained[0].hyps][-1] == "ha : b = a✝ * a"
    assert pp(obtained[0].target) == "b = a✝ * a✝"
    assert prover.error(obtained, "exact ha").startswith("type mismatch")
    # `have x : …` mentioning the old `x`
    have = prover.run(prover.run(prover.start("∀ (x : ℝ), x = 1 → x ≤ 1"), "intro x h"), "have x : x = 1 := h")
    assert pp(have[0].hyps[-1].ty) == "x✝ = 1"


def test_calc_chains_compose_and_are_checked():
    prover = Prover()
    goals = prover.run(prover.start("∀ (a b : ℝ), a < b → a + 1 < b + 2"), "intro a b h")
    assert prover.run(goals, "calc a + 1 < b + 1 := by linarith\n  _ ≤ b + 2 := by norm_num") == ()
    wrong = prover.error(goals, "calc a + 1 < b + 1 := by linarith\n  _ ≤ b + 3 := by linarith")
    assert "type mismatch" in wrong
    bad_step = prover.error(goals, "calc a + 1 ≤ a + 1 := le_refl _\n  _ < b + 2 := by nlinarith [h]\n"
                                   "  _ = b + 1 := by ring")
    assert bad_step.startswith("ring failed")
    mixed = prover.error(goals, "calc a + 1 < b + 1 := by linarith\n  _ ≥ b := by linarith")
    assert "Trans" in mixed


def test_more_of_mathlib_by_name_and_field_notation():
    prover = Prover()
    assert prover.closes("∀ (p q : Prop), p ∨ q → ¬p → q", ["intro p q h hp", "exact h.resolve_left hp"])
    assert not prover.closes("∀ (p q : Prop), p ∨ q → ¬q → q", ["intro p q h hq", "exact h.resolve_left hq"])
    assert prover.closes("∀ (x y : ℝ), 0 < x → 0 < y → 0 < x / y", ["intro x y hx hy", "exact div_pos hx hy"])
    assert prover.closes("∀ (n : ℕ), n % 5 < 5", ["intro n", "exact Nat.mod_lt n (by norm_num)"])
    assert prover.closes("∀ (a b : ℝ), (a - b) ^ 2 = a ^ 2 - 2 * a * b + b ^ 2", ["intro a b", "exact sub_sq a b"])
    # `sub_sq` is a ring lemma: on ℕ (truncated subtraction) it is false and refused
    assert not prover.closes("∀ (a b : ℕ), (a - b) ^ 2 = a ^ 2 - 2 * a * b + b ^ 2", ["intro a b", "exact sub_sq a b"])
    goals = prover.run(prover.start("∀ (p q r : Prop), (q → r) → q → r"), "intro p q r h hq")
    applied = prover.run(goals, "apply h")
    assert applied[0].case is None and pp(applied[0].target) == "q"


def test_decide_evaluates_closed_statements_and_bounded_quantifiers():
    prover = Prover()
    assert prover.closes("(29 * 79 + 31 * 81) % 10 = 2", ["decide"])
    assert prover.closes("∀ n < 10, n ^ 2 < 100", ["decide"])
    assert not prover.closes("∀ n < 11, n ^ 2 < 100", ["decide"])
    assert prover.closes("∃ n < 10, n * n = 49", ["decide"])
    assert not prover.closes("∃ n < 7, n * n = 49", ["decide"])
    assert prover.closes("(7 : ℕ) - 10 = 0", ["decide"]) and not prover.closes("(7 : ℤ) - 10 = 0", ["decide"])
    assert prover.error(prover.start("∃ n, n * n = 49"), "decide").startswith("failed to synthesize\n  Decidable")
    assert prover.error(prover.start("(2 : ℝ) + 2 = 4"), "decide").startswith("failed to synthesize")


def test_structured_cases_alternatives_name_fields_and_must_close():
    prover = Prover()
    goals = prover.run(prover.start("∀ (p q : Prop), p ∨ q → q ∨ p"), "intro p q h")
    assert prover.run(goals, "cases h with\n| inl hp => exact Or.inr hp\n| inr hq => exact Or.inl hq") == ()
    assert prover.error(goals, "cases h with\n| inl hp => exact Or.inr hp") == "alternative 'inr' has not been provided"
    assert prover.error(goals, "cases h with\n| inl hp => exact Or.inl hp\n| inr hq => exact Or.inl hq").startswith(
        "type mismatch")
    assert prover.error(goals, "cases h with\n| inl hp => skip\n| inr hq => exact Or.inl hq").startswith(
        "unsolved goals")


def test_constructor_applies_the_first_constructor_that_fits():
    prover = Prover()
    disjunction = prover.run(prover.start("∀ (p q : Prop), q → q ∨ p"), "intro p q hq")
    (left,) = prover.run(disjunction, "constructor")  # Or.inl, like Lean's `constructor`
    assert left.case == "h" and pp(left.target) == "q"
    assert prover.error(prover.start("(2 : ℕ) = 3"), "constructor").startswith(
        "tactic 'constructor' failed, no applicable constructor found")
    assert prover.error(prover.run(prover.start("∀ (p : Prop), p → p"), "intro p hp"), "constructor").startswith(
        "tactic 'constructor' failed, target is not an inductive datatype")


def test_a_have_nested_in_a_have_s_by_block_reads_its_own_lines_as_lean_does():
    prover = Prover()
    every = prover.run(prover.start(POS), "intro x y hx hy")
    nested = ("have hxy : 0 < x * y := by\n  have hpx : 0 < x := by\n    exact hx\n  have hpy : 0 < y := by\n"
              "    exact hy\n  nlinarith [hpx, hpy]")
    after = prover.run(every, nested)
    assert pp(after[0].hyps[-1].ty) == "0 < x * y" and prover.run(after, "nlinarith [hxy, hx]") == ()
    # the inner block's tactics run on the inner goal: one that does not close it fails the have
    with pytest.raises(TacticError):
        prover.run(every, nested.replace("    exact hy", "    exact hx"))

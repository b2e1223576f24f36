"""Declarations as text: header, name, ∀-statement, binder intro, proof detection, the sorry word."""

from __future__ import annotations

import pytest

from leankit.declaration import (
    binder_names,
    body_tactics,
    declaration_in,
    parse_declaration,
    proof_tactics,
    uses_sorry,
)
from leankit.text import mask_comments
from tests.putnambench import COUNT, putnam_names, putnam_text

WORKBOOK_STYLE = """import Mathlib
import Aesop
set_option maxHeartbeats 400000
open BigOperators Real Nat Topology Rat

/-- Prove that $x = 4$ (no sorry here). -/
theorem lean_workbook_7 (x y : ℝ) {n : ℕ} [Fintype α] [inst : Foo α] (h₀ : 2 * x + 3 = 11) :
    x = 4 := by
  -- sorry in a comment does not count
  have h : 2 * x = 8 := by linarith
  linarith
"""


def test_a_binder_style_theorem_becomes_a_forall_statement_with_its_intro_and_tactics() -> None:
    decl = parse_declaration(WORKBOOK_STYLE)
    assert decl is not None
    assert decl.header == (
        "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat")
    assert decl.name == "lean_workbook_7"
    assert decl.binders == "(x y : ℝ) {n : ℕ} [Fintype α] [inst : Foo α] (h₀ : 2 * x + 3 = 11)"
    assert decl.type == "x = 4"
    assert decl.statement == "∀ (x y : ℝ) {n : ℕ} [Fintype α] [inst : Foo α] (h₀ : 2 * x + 3 = 11), x = 4"
    assert decl.binder_names == ["x", "y", "n", "_", "inst", "h₀"]
    assert decl.has_proof
    # The theorem starts as written (binders in context): the body's tactics, no intro before them.
    assert proof_tactics(decl) == ["have h : 2 * x = 8", "linarith", "linarith"]


@pytest.mark.parametrize(
    ("text", "has_proof"),
    [
        ("theorem t : 1 + 1 = 2 := by sorry", False),
        ("theorem t : 1 + 1 = 2 := by\n  sorry\n", False),
        ("theorem t : 1 + 1 = 2 := by\n", False),
        ("theorem t : 1 + 1 = 2 := sorry", False),
        ("theorem t : 1 + 1 = 2", False),
        ("theorem t : 1 + 1 = 2 := by norm_num", True),
        ("theorem t : 1 + 1 = 2 := rfl", True),
    ],
)
def test_placeholder_bodies_are_no_proof(text: str, has_proof: bool) -> None:
    decl = parse_declaration(text)
    assert decl is not None and decl.statement == "1 + 1 = 2"
    assert decl.has_proof is has_proof


def test_a_term_proof_and_a_statement_without_binders() -> None:
    decl = parse_declaration("theorem t : 1 + 1 = 2 := rfl")
    assert decl is not None and decl.binder_names == []
    assert proof_tactics(decl) == ["exact rfl"]


def test_the_named_declaration_is_chosen_after_auxiliary_lemmas() -> None:
    text = ("lemma aux (a : ℕ) : a + 0 = a := by simp\n\n"
            "theorem main (b : ℕ) (h : b = 1) : b + 0 = 1 := by\n  rw [aux]\n  exact h\n")
    decl = parse_declaration(text, "main")
    assert decl is not None
    assert (decl.name, decl.statement) == ("main", "∀ (b : ℕ) (h : b = 1), b + 0 = 1")
    assert proof_tactics(decl) == ["rw [aux]", "exact h"]
    first = parse_declaration(text)
    assert first is not None and first.name == "aux" and proof_tactics(first) == ["simp"]


def test_nested_brackets_and_colons_inside_binders() -> None:
    decl = parse_declaration("theorem t (f : ℕ → ℕ) (h : ∀ x : ℕ, f x = (x : ℕ)) : f 2 = 2 := by simp [h]")
    assert decl is not None
    assert decl.statement == "∀ (f : ℕ → ℕ) (h : ∀ x : ℕ, f x = (x : ℕ)), f 2 = 2"
    assert decl.binder_names == ["f", "h"]


def test_no_declaration_or_no_type_is_none() -> None:
    assert parse_declaration("nlinarith [sq_nonneg (a - b)]") is None
    assert parse_declaration("def f := 3") is None
    assert parse_declaration("theorem broken := by simp") is None


@pytest.mark.parametrize(("text", "type_", "body"), [
    ("theorem t (n : ℕ) : let x := n; x = n := by\n  intro x\n  rfl", "let x := n; x = n", "by intro x rfl"),
    ("theorem t : letI : Fact (1 < 2) := ⟨by norm_num⟩\n  True := trivial",
     "letI : Fact (1 < 2) := ⟨by norm_num⟩; True", "trivial"),
    ("theorem t : let rec f : ℕ → ℕ := id; f 0 = 0 := rfl", "let rec f : ℕ → ℕ := id; f 0 = 0", "rfl"),
    ("theorem t : ∃! p : ℤ × ℤ, let (a, b) := p; a = b ∧ let c := a; c = 0 := sorry",
     "∃! p : ℤ × ℤ, let (a, b) := p; a = b ∧ let c := a; c = 0", "sorry"),
    ("theorem t : have h : 1 = 1 := rfl; haveI : Nonempty ℕ := ⟨0⟩; h = h := rfl",
     "have h : 1 = 1 := rfl; haveI : Nonempty ℕ := ⟨0⟩; h = h", "rfl"),
    ("theorem t : show 1 = 1 from let x := 1; rfl = rfl := rfl", "show 1 = 1 from let x := 1; rfl = rfl", "rfl"),
    ("theorem t : suffices h : 0 = 0 from h; True := trivial", "suffices h : 0 = 0 from h; True", "trivial"),
    ("theorem t (p : ℕ × ℕ := (1, 2)) : ({ fst := 1, snd := 2 } : ℕ × ℕ) = p := rfl",
     "({ fst := 1, snd := 2 } : ℕ × ℕ) = p", "rfl"),
    ("theorem t (hlet : 0 = 0) (have' : True) : hlet = hlet := rfl", "hlet = hlet", "rfl"),
])
def test_a_let_or_have_of_the_statement_owns_its_assign(text: str, type_: str, body: str) -> None:
    decl = parse_declaration(text)
    assert decl is not None and (decl.type, " ".join((decl.body or "").split())) == (type_, body)


def test_a_statement_with_a_let_replays_its_proof_from_the_declarations_assign() -> None:
    decl = parse_declaration("theorem t (n : ℕ) : let x := n; x = n := by\n  intro x\n  rfl")
    assert decl is not None and proof_tactics(decl) == ["intro x", "rfl"]
    indented = declaration_in("  theorem u : let y := 1; y = 1 := by\n    intro y\n    rfl")
    assert indented is not None and proof_tactics(indented) == ["intro y", "rfl"]


@pytest.mark.parametrize(("text", "type_"), [
    # the next line at the let's column: the value ends there (Lean reads no argument of it left of the `let`)
    ("theorem t (f : ℕ → ℕ) :\n    let y := f 0\n    (y = y) ∧ True := sorry", "let y := f 0; (y = y) ∧ True"),
    ("theorem t :\n    letI := 1\n    have h : True := trivial\n    h = h := sorry",
     "letI := 1; have h : True := trivial; h = h"),
    # indented further: the value goes on; ended by `;` or a bracket: nothing to write
    ("theorem t :\n    let x := f\n      a\n    x = x := sorry", "let x := f a; x = x"),
    ("theorem t :\n    let x :=\n      a\n    x = x := sorry", "let x := a; x = x"),
    ("theorem t : let x := 1;\n  x = 1 := sorry", "let x := 1; x = 1"),
    ("theorem t : (let x := 1\n  x) = 1 := sorry", "(let x := 1; x) = 1"),
    ("theorem t : ∀ n, (fun m =>\n  m) n = n := sorry", "∀ n, (fun m => m) n = n"),
])
def test_a_line_break_that_ends_a_let_value_is_written_as_a_semicolon(text: str, type_: str) -> None:
    decl = parse_declaration(text)
    assert decl is not None and decl.type == type_


@pytest.mark.slow
def test_every_putnambench_statement_is_read_whole() -> None:
    """Each file's signature and type as indexed are its text between the name and the theorem's `:=` (the
    file's last, before its `sorry`), comments and whitespace aside, but for the `;` written where a line break ends
    a `let` value: no `let`/`letI` of a statement cuts it."""
    names = putnam_names()
    assert len(names) == COUNT
    written_semicolons: list[str] = []
    for name in names:
        masked = mask_comments(putnam_text(name))
        assign = masked.rindex(":=")
        assert masked[assign + 2 :].split() in (["sorry"], ["by", "sorry"]), name
        written = masked[masked.index(f"theorem {name}") + len(f"theorem {name}") : assign].split()
        decl = parse_declaration(putnam_text(name), name)
        assert decl is not None, name
        indexed = decl.signature.split()
        assert len(indexed) == len(written), name
        for ours, theirs in zip(indexed, written, strict=True):
            assert ours in (theirs, theirs + ";"), name
            if ours != theirs:
                written_semicolons.append(name)
    assert sorted(set(written_semicolons)) == ["putnam_1965_b4", "putnam_1969_b4", "putnam_1987_b4", "putnam_1995_b4",
                                               "putnam_2023_a4"]
    assert len(written_semicolons) == 9  # 1969_b4 three (two letI, one inner), 2023_a4 three letI in a binder


def test_binder_names_of_every_binder_kind() -> None:
    names = binder_names("(a b : ℝ) {n : ℕ} ⦃m : ℕ⦄ [Fintype α] [inst : Foo] x")
    assert names == ["a", "b", "n", "m", "_", "inst", "x"]
    assert binder_names("") == []


def test_a_bare_body_is_its_tactics() -> None:
    assert body_tactics("nlinarith [sq_nonneg (a - b), sq_nonneg (a + b)]") == [
        "nlinarith [sq_nonneg (a - b), sq_nonneg (a + b)]"]
    assert body_tactics("by\n  simp\n  ring") == ["simp", "ring"]
    assert body_tactics("-- nothing") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sorry", True),
        ("exact sorry", True),
        ("  admit", True),
        ("cheat", True),
        ("simp -- sorry", False),
        ("/- admit -/ simp", False),
        ("exact sorry_free_lemma", False),
        ("exact Foo.sorry", False),
        ('exact "sorry"', True),
    ],
)
def test_the_sorry_word(text: str, expected: bool) -> None:
    assert uses_sorry(text) is expected


def test_the_docstring_before_a_declaration_or_its_attribute_is_its_own() -> None:
    decl = parse_declaration(WORKBOOK_STYLE)
    assert decl is not None and decl.docstring == "Prove that $x = 4$ (no sorry here)."
    attributed = parse_declaration("open Nat\n\n/-- Twice\n  over. -/\n@[simp]\nprivate lemma two (n : ℕ) -- n\n"
                                   "    : n + n = 2 * n := by omega")
    assert attributed is not None
    assert (attributed.docstring, attributed.signature, attributed.header) == (
        "Twice\n  over.", "(n : ℕ) : n + n = 2 * n", "open Nat")
    assert attributed.source.startswith("@[simp]\nprivate lemma two")
    for text in ("theorem t : 1 = 1 := rfl", "/-- Not attached. -/\nopen Nat\ntheorem t : 1 = 1 := rfl",
                 "/-- Not attached. -/\n-- a comment between\ntheorem t : 1 = 1 := rfl"):
        found = parse_declaration(text)
        assert found is not None and found.docstring is None, text

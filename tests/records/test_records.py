"""The theorem record's declaration: the binder form a Lean user writes and the prototype's ∀ form, from a given
signature or from the statement's leading ∀ binders."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from burnqed.records.enums import DeclarationForm
from burnqed.records.theorem import Theorem, TheoremIndex
from leankit.text import split_leading_binders


@pytest.mark.parametrize(("statement", "binders", "rest"), [
    ("∀ (x y : ℝ) (h : 0 < x), x ^ 2 > 0", "(x y : ℝ) (h : 0 < x)", "x ^ 2 > 0"),
    ("∀ a b : ℕ, ∀ c, a + b + c = c + b + a", "(a b : ℕ) (c)", "a + b + c = c + b + a"),
    ("∀ {α : Type} [Fintype α] (s : Finset α), s.card ≤ Fintype.card α", "{α : Type} [Fintype α] (s : Finset α)",
     "s.card ≤ Fintype.card α"),
    # An implication's hypothesis has no name: it stays in the type.
    ("∀ (f : ℕ → ℕ), (∀ n, f n = n) → f 0 = 0", "(f : ℕ → ℕ)", "(∀ n, f n = n) → f 0 = 0"),
    ("forall (n : ℕ), n + 0 = n", "(n : ℕ)", "n + 0 = n"),
    # No leading ∀, or a binder predicate (`∀ x ∈ S`, `∀ x > 0`) that is no binder list: the statement as it is.
    ("1 + 1 = 2", "", "1 + 1 = 2"),
    ("∀ x ∈ S, p x", "", "∀ x ∈ S, p x"),
    ("∀ x > 0, p x", "", "∀ x > 0, p x"),
    ("∀ (x : ℝ)", "", "∀ (x : ℝ)"),  # no comma: not a statement we can split
    ("∀ h₀ x', True", "(h₀) (x')", "True"),
])
def test_leading_binders_become_the_signature(statement: str, binders: str, rest: str) -> None:
    assert split_leading_binders(statement) == (binders, rest)


def test_declaration_forms_of_a_forall_statement() -> None:
    theorem = Theorem(name="t", statement="∀ (x : ℝ) (h₀ : 0 < x), x ^ 2 > 0")
    assert theorem.declaration() == "theorem t (x : ℝ) (h₀ : 0 < x) : x ^ 2 > 0"
    assert theorem.declaration(DeclarationForm.BINDER) == theorem.declaration()
    assert theorem.declaration(DeclarationForm.FORALL) == "theorem t : ∀ (x : ℝ) (h₀ : 0 < x), x ^ 2 > 0"
    assert Theorem(name="u", statement="1 + 1 = 2").declaration() == "theorem u : 1 + 1 = 2"


def test_a_signature_as_written_is_kept_and_gives_the_statement() -> None:
    theorem = Theorem(name="mathd_1", signature="(x : ℝ) (h₀ : x ≠ 0)\n    (h₁ : 2 * x = 3) : x = 3 / 2")
    assert theorem.statement == "∀ (x : ℝ) (h₀ : x ≠ 0) (h₁ : 2 * x = 3), x = 3 / 2"
    assert theorem.declaration() == "theorem mathd_1 (x : ℝ) (h₀ : x ≠ 0) (h₁ : 2 * x = 3) : x = 3 / 2"
    # A signature whose hypotheses differ from the statement's ∀ binders wins for the binder form.
    named = Theorem(name="n", statement="∀ (x : ℝ), 0 < x → 0 < x ^ 2", signature="(x : ℝ) (hx : 0 < x) : 0 < x ^ 2")
    assert named.declaration() == "theorem n (x : ℝ) (hx : 0 < x) : 0 < x ^ 2"
    assert named.declaration(DeclarationForm.FORALL) == "theorem n : ∀ (x : ℝ), 0 < x → 0 < x ^ 2"
    assert Theorem(name="c", signature=": 1 + 1 = 2").statement == "1 + 1 = 2"


def test_a_theorem_without_statement_has_no_declaration() -> None:
    assert Theorem(name="Nat.add_zero").declaration() is None


@pytest.mark.parametrize("signature", ["(x : ℝ) (h : 0 < x)", "(x : ℝ) :", "   "])
def test_a_signature_without_a_type_is_refused(signature: str) -> None:
    with pytest.raises(ValidationError, match="signature"):
        Theorem(name="t", signature=signature)


def test_an_index_round_trips_the_signature() -> None:
    index = TheoremIndex(name="b", theorems=[Theorem(name="t", signature="(n : ℕ) : 0 < n !", header="open Nat")])
    again = TheoremIndex.model_validate_json(index.model_dump_json())
    assert again.theorems[0].signature == "(n : ℕ) : 0 < n !"
    assert again.theorems[0].declaration() == "theorem t (n : ℕ) : 0 < n !"


# ------------------------------------------------------------------------------- statements as users write them

COMMUTES = "∀ (a b : Nat), a + b = b + a"


@pytest.mark.parametrize(("written", "statement", "declaration"), [
    (f"{COMMUTES}  -- copy 0", COMMUTES, "theorem t (a b : Nat) : a + b = b + a"),
    ("∀ (a b : Nat), a + /- the middle -/ b = b + a", COMMUTES, "theorem t (a b : Nat) : a + b = b + a"),
    ("∀ (a b : Nat), a + b = /- outer /- inner -/ -/ b + a", COMMUTES, "theorem t (a b : Nat) : a + b = b + a"),
    ("∀ (a : Nat) /- between -/ (b : Nat), a + b = b + a", "∀ (a : Nat) (b : Nat), a + b = b + a",
     "theorem t (a : Nat) (b : Nat) : a + b = b + a"),
    ("∀ (a : Nat)\n    (b : Nat),\n  a + b =\n    b + a", "∀ (a : Nat)\n    (b : Nat),\n  a + b =\n    b + a",
     "theorem t (a : Nat) (b : Nat) : a + b =\n    b + a"),
    ('∀ (s : String), s ++ "--" = s ++ "--"  -- a string', '∀ (s : String), s ++ "--" = s ++ "--"',
     'theorem t (s : String) : s ++ "--" = s ++ "--"'),
])
def test_a_statement_is_held_without_its_comments(written: str, statement: str, declaration: str) -> None:
    theorem = Theorem(name="t", statement=written)
    assert (theorem.statement, theorem.docstring, theorem.declaration()) == (statement, None, declaration)


def test_a_docstring_opening_a_statement_is_kept_and_restated_on_its_own_line() -> None:
    theorem = Theorem(name="t", statement=f"/-- The sum commutes. -/\n{COMMUTES} -- copy 0")
    assert (theorem.statement, theorem.docstring) == (COMMUTES, "The sum commutes.")
    assert theorem.declaration() == "/-- The sum commutes. -/\ntheorem t (a b : Nat) : a + b = b + a"
    assert theorem.declaration(DeclarationForm.FORALL) == f"/-- The sum commutes. -/\ntheorem t : {COMMUTES}"
    signed = Theorem(name="s", signature="/-- Doc. -/ (a b : Nat) -- binders\n  : a + b = b + a")
    assert (signed.signature, signed.statement, signed.docstring) == (
        "(a b : Nat)\n  : a + b = b + a", COMMUTES, "Doc.")
    # A given docstring wins over one in the statement; loading the record again changes nothing.
    given = Theorem(name="g", statement=f"/-- Other. -/ {COMMUTES}", docstring="  Given.  ")
    assert given.docstring == "Given."
    for read in (theorem, signed, given):
        assert Theorem.model_validate(read.model_dump()) == read


def test_a_statement_without_comments_is_kept_byte_for_byte() -> None:
    written = "  ∀ (x : ℝ),\r\n  x ^ 2 ≥ 0  "
    assert Theorem(name="t", statement=written).statement == written  # earlier runs' digests stay


@pytest.mark.parametrize(("fields", "message"), [
    ({"statement": "-- only a comment"}, "statement '-- only a comment' holds only comments"),
    ({"statement": "p /- never closed"}, "statement 'p /- never closed' ends inside an unterminated block comment"),
    ({"statement": 'p = "open'}, "statement 'p = \"open' ends inside an unterminated string literal"),
    ({"signature": "(a : Nat) -- : a = a"}, "signature '(a : Nat) -- : a = a' has no `: TYPE` after its binders"),
    ({"statement": "p", "docstring": "ends -/ early"}, "cannot be written as a `/-- … -/` doc comment: it holds a"),
    ({"statement": "p", "header": "open Nat\n/- a licence never closed"},
     "header 'open Nat\\n/- a licence never closed' ends inside an unterminated block comment"),
])
def test_a_statement_lean_would_refuse_is_refused(fields: dict[str, str], message: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        Theorem(name="t", **fields)

"""Lean source as Lean's parser splits it (`leankit.commands`): tokens, command keywords wherever they stand, the
commands of a file and what makes a value one term."""

from __future__ import annotations

import pytest

from leankit.commands import (
    IDENT,
    KEYWORD,
    command_starts,
    command_tokens,
    commands,
    lexical_problem,
    term_problem,
    tokens,
)
from tests.putnambench import putnam_names, putnam_text

ATTACK = (
    "abbrev putnam_mock_a_solution : ℕ := 1\n"
    "  instance(priority:=high)evil:HAdd ℕ ℕ ℕ:=⟨fun a b=>a*b⟩\n"
    "\n"
    "theorem putnam_mock_a : 1 + 1 = putnam_mock_a_solution := by\n"
    "  decide\n"
)


def test_names_are_read_with_leans_classes_and_escapes() -> None:
    read = [(t.kind, t.text, t.name) for t in tokens("def«x» foo.«bar».baz h.def def' «def» x₁ 2open")]
    assert read == [
        (KEYWORD, "def", "def"), (IDENT, "«x»", "x"), (IDENT, "foo.«bar».baz", "foo.bar.baz"),
        (IDENT, "h.def", "h.def"), (IDENT, "def'", "def'"), (IDENT, "«def»", "def"), (IDENT, "x₁", "x₁"),
        ("number", "2", ""), (KEYWORD, "open", "open"),
    ]


def test_comments_and_literals_hide_keywords_but_doc_comments_are_tokens() -> None:
    text = '-- instance\n/- axiom /- def -/ -/ "open" /-- doc -/ x'
    assert [(t.kind, t.text) for t in tokens(text)] == [("string", '"open"'), ("doc", "/-- doc -/"), (IDENT, "x")]


@pytest.mark.parametrize(("text", "expected"), [
    ("1\n  instance(priority:=high)evil:HAdd ℕ ℕ ℕ:=⟨fun a b=>a*b⟩", ["instance"]),
    ('infixl:65 (priority := high) " + " => HMul.hMul', ["infixl"]),
    ("axiom«x» : False", ["axiom"]),
    ("2 open Real", ["open"]),
    ("1 -- c\n  notation3 \"x\" => 1", ["notation3"]),
    ("x /- c -/ def«y» := 1", ["def"]),
    ("instance: Foo := ⟨⟩", ["instance"]),
    ("#eval 1", ["#eval"]),
    ("@[simp] lemma", ["@[", "lemma"]),
    ("/-! module -/", ["/-! module -/"]),
    ("deriving instance Repr for S", ["deriving", "instance"]),
    ("exact foo.def; exact inferInstance; show P from h", []),
    ("structure S where x : ℕ deriving Repr", ["structure"]),
    ("exact #[1, 2]", []),
])
def test_command_tokens_are_found_at_any_column_and_spelling(text: str, expected: list[str]) -> None:
    assert [t.text for t in command_tokens(text)] == expected


def test_the_attack_is_three_commands_where_a_line_reader_sees_two() -> None:
    assert [c.keyword for c in commands(ATTACK)] == ["abbrev", "instance", "theorem"]
    assert [ATTACK[c.start : c.end] for c in commands(ATTACK)][:2] == [
        "abbrev putnam_mock_a_solution : ℕ := 1",
        "instance(priority:=high)evil:HAdd ℕ ℕ ℕ:=⟨fun a b=>a*b⟩",
    ]


def test_prefixes_and_combinators_belong_to_their_command() -> None:
    text = ("open Foo in\n/-- d -/\n@[simp] private theorem x : T := by simp\n"
            "structure S where\n  /-- f -/\n  x : ℕ\n  deriving Repr\n"
            "deriving instance Repr for S\nattribute [local instance] foo in\ntheorem y : 1 = 1 := rfl\n"
            "open scoped BigOperators\nnoncomputable section\nclass inductive C | a\n"
            "mutual\ndef a := 1\ndef b := 2\nend\n#eval 1\n/-! mod -/\nend")
    assert [c.keyword for c in commands(text)] == [
        "open", "structure", "deriving", "attribute", "open", "section", "class", "mutual", "#eval", "/-!", "end"]
    assert command_starts("open Real\nabbrev s : ℝ := sorry\n") == [0, 10]
    assert commands("") == []


# Where one command ends and the next starts after a bracketed prefix, a `mutual … end`, an `… in`, text before any
# keyword; and text that ends inside a command's prefix or right after `deriving` or `mutual` (a header cut short:
# the reader answers, it does not fail).
@pytest.mark.parametrize(("text", "expected"), [
    ("@[simp] theorem a : True := trivial\ntheorem b : True := trivial", [(0, "theorem"), (36, "theorem")]),
    ("attribute [simp] foo\ntheorem b : True := trivial", [(0, "attribute"), (21, "theorem")]),
    ("mutual\ntheorem a : True := trivial\nend\ntheorem b : True := trivial", [(0, "mutual"), (39, "theorem")]),
    ("open Foo in theorem a : True := trivial\ntheorem b : True := trivial", [(0, "open"), (40, "theorem")]),
    ("x\ntheorem a : True := trivial", [(0, ""), (2, "theorem")]),
    ("in theorem a : True := trivial", [(0, "")]),
    ("mutual\ntheorem a : True := trivial", [(0, "mutual")]),
    ("@[simp", [(0, "")]),
    ("@[simp] private", [(0, "")]),
    ("private", [(0, "")]),
    ("/-- doc -/", [(0, "")]),
    ("deriving", [(0, "")]),
    ("deriving instance", [(0, "deriving")]),
    ("@[simp, inline] theorem a : True := trivial", [(0, "theorem")]),
    ("@[instance] foo", [(0, "")]),
    ("mutual\ndef a := f 1\nend\ntheorem b : True := trivial", [(0, "mutual"), (24, "theorem")]),
    ("open Foo in section\nend", [(0, "open"), (20, "end")]),
])
def test_command_boundaries_at_the_edges(text: str, expected: list[tuple[int, str]]) -> None:
    assert [(c.start, c.keyword) for c in commands(text)] == expected


def test_deriving_opens_a_command_only_before_instance() -> None:
    assert command_tokens("exact deriving") == []
    assert [t.text for t in command_tokens("deriving instance Repr for S")] == ["deriving", "instance"]
    assert [t.text for t in command_tokens("deriving instance")] == ["deriving", "instance"]


@pytest.mark.parametrize(("text", "problem"), [
    ("→oopen X", "has a name glued to a symbol at '→oopen': a notation token may end in it, before a command"),
    ("h →oopen Real", "has a name glued to a symbol at '→oopen': a notation token may end in it, before a command"),
    ("exact h →xend", "has a name glued to a symbol at '→xend': a notation token may end in it, before a command"),
    ("hopen x →", None),  # a name at the text's start is glued to nothing
    ("exact 1opened", "has a numeral glued to a name at '1open': Lean's numeral may end elsewhere"),
    ("exact 0b12", "has a numeral glued to a name at '0b12': Lean's numeral may end elsewhere"),
    ("exact 5.eopen Foo", "has a numeral glued to a name at '5.eopen': Lean reads an exponent there"),
    ("exact 5.E+x", "has a numeral glued to a name at '5.E+x': Lean reads an exponent there"),
    ("[1..5.eopen]", "has a numeral glued to a name at '5.eopen': Lean reads an exponent there"),
    ("exact 1_!", "has a numeral ending in `_` at '1_!': Lean's numeral needs a digit after it"),
    ("exact 0x_ !", "has a numeral ending in `_` at '0x_ !': Lean's numeral needs a digit after it"),
    # Mathlib's factorial `n !` (`Nat.factorial`): no numeral reader of Lean takes `!`, so `5!` is `5` then `!`
    ("exact 5!", None),
    ("norm_num [Nat.factorial] at h ⊢; exact 2 * 3! + 10! / 7!", None),
    ("have : (n)! * n ! = (n + 1)! := by simp", None),
    ("exact 5!!", None),
    ("exact 0x1F! + 0b1! + 2.5? + 2₁", None),
    ("exact h.2.elim", None),  # a field index, read by Lean's `fieldIdx` (digits only): no exponent
    ("h.2.elim", None),  # its name two characters from the text's start
    ("exact (f x).1.eq_def", None),
    ("exact ⟨a, b⟩.1.elim", None),
    ("exact 5.e3 + 5.x", None),  # `5.e3` a scientific literal, `5.x` the literal `5.` and `x`: nothing hides
    ("<--xyz", "has a quote or comment opener glued to a symbol at '<--x': Lean reads it by the notation tokens in "
     "scope (put a space before it)"),
    ("exact h <--x", "has a quote or comment opener glued to a symbol at ' <--x': Lean reads it by the notation "
     "tokens in scope (put a space before it)"),
])
def test_lexical_problem_names_the_place(text: str, problem: str | None) -> None:
    assert lexical_problem(text) == problem


def test_every_putnambench_file_splits_at_its_column_0_commands_and_ends_with_its_theorem() -> None:
    for name in putnam_names():
        text = putnam_text(name)
        found = commands(text)
        assert found[-1].keyword == "theorem", name
        assert all(c.start == 0 or text[c.start - 1] == "\n" for c in found), name
        assert found[0].keyword == "import", name


@pytest.mark.parametrize(("value", "problem"), [
    ("1 + 1", None),
    ("(1 : ℝ) / 2", None),
    ("fun x => x ^ 2", None),
    ("Classical.choose h", None),
    ('"a)"', None),
    ("«x)»", None),
    ("1 -- a comment", None),
    ("", "it is empty"),
    ("1) (2", "it closes a bracket ')' it never opened (character 1)"),
    ("(1", "it leaves '(' open (character 0)"),
    ("⟨1, 2)", "it closes '⟨' (character 0) with ')' (character 5)"),
    ('"a', "it leaves a string or name literal open at character 0"),
    ("1 /- open", "it leaves a block comment open at character 2"),
    ("1\n  instance(priority:=high)e : Foo := ⟨⟩",
     "it holds the command keyword 'instance' (Lean ends the term there and runs a command)"),
    ("2 open Real", "it holds the command keyword 'open' (Lean ends the term there and runs a command)"),
    ("/-- d -/ 1", "it holds a doc comment (no part of a term)"),
    ("@[simp] 1", "it holds the command keyword '@[' (Lean ends the term there and runs a command)"),
])
def test_term_problem(value: str, problem: str | None) -> None:
    assert term_problem(value) == problem

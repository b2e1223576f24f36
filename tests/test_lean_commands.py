"""Lean source as Lean's parser splits it (`leankit.commands`): tokens, command keywords wherever they stand, the
commands of a file and what makes a value one term."""

from __future__ import annotations

import pytest

from leankit.commands import IDENT, KEYWORD, command_starts, command_tokens, commands, term_problem, tokens
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

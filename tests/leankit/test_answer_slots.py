"""leankit.answer on PutnamBench's files as published and on made-up problems in their form; records.theorem.Theorem's
answer slot; an answer completion read back (`text.completion.answer_file`, `search.answer.read_attempt`): one term
or refused before Lean (issue 67)."""

from __future__ import annotations

import pytest

from burnqed.config import LeanConfig
from burnqed.lean.guard import TacticGuard
from burnqed.records.theorem import Answer, AnswerTask, Theorem
from burnqed.search.answer import read_attempt
from burnqed.text.completion import answer_file
from burnqed.text.prompt import PromptFormat, answer_prime
from leankit.answer import answer_slot, drop_slot, fill_slot, find_slots, inline_answer, reference_answer, split_at_slot
from tests.putnambench import putnam_names, putnam_text

EASY = "abbrev putnam_easy_solution : ℕ := sorry\n-- 2\n"


def test_every_putnambench_slot_is_found_with_its_reference_answer() -> None:
    slotted = {name: find_slots(putnam_text(name)) for name in putnam_names()}
    with_slot = {name: slots for name, slots in slotted.items() if slots}
    assert len(with_slot) == 346
    assert all(len(slots) == 1 for slots in with_slot.values())
    assert all(reference_answer(putnam_text(name), slots[0].name) for name, slots in with_slot.items())
    # `def tetration : ℕ → ℕ → ℕ` with equations is no slot, and no later `:= sorry` is read as its value
    assert find_slots(putnam_text("putnam_1997_b5")) == []


def test_a_slot_its_reference_and_the_three_forms() -> None:
    slot = answer_slot(EASY, "1 + 1 = putnam_easy_solution")
    assert slot is not None and (slot.name, slot.type, slot.keyword) == ("putnam_easy_solution", "ℕ", "abbrev")
    assert reference_answer(EASY, slot.name) == "2"
    assert fill_slot(EASY, slot.name, "2") == "abbrev putnam_easy_solution : ℕ := (2)\n-- 2\n"
    assert split_at_slot(EASY, slot.name) == ("abbrev putnam_easy_solution : ℕ :=", "\n-- 2\n")
    assert drop_slot("open Real\n" + EASY + "def f : ℕ := 1", slot.name) == "open Real\ndef f : ℕ := 1"
    assert inline_answer("1 + 1 = putnam_easy_solution ∧ putnam_easy_solution' = 0", slot, "2") == \
        "1 + 1 = ((2) : ℕ) ∧ putnam_easy_solution' = 0"
    assert answer_slot(EASY, "1 + 1 = 2") is None  # a slot the statement does not use is no answer


def test_a_value_of_several_lines_is_indented_under_its_definition() -> None:
    assert fill_slot(EASY, "putnam_easy_solution", "fun n =>\nn + 1") == \
        "abbrev putnam_easy_solution : ℕ := (fun n =>\n  n + 1)\n-- 2\n"


@pytest.mark.parametrize(("value", "written"), [
    ("2 -- two", "(2 -- two\n  )"),  # the comment would swallow a `)` on its line
    ("fun n => -- the successor\nn + 1", "(fun n => -- the successor\n  n + 1)"),  # the last line is code
    ("2 /- two -/", "(2 /- two -/)"),
    ('"a -- b"', '("a -- b")'),  # no comment inside a string
])
def test_the_closer_is_written_where_no_comment_can_eat_it(value: str, written: str) -> None:
    assert fill_slot(EASY, "putnam_easy_solution", value) == f"abbrev putnam_easy_solution : ℕ := {written}\n-- 2\n"


@pytest.mark.parametrize("value", [
    "1\n  instance(priority:=high)evil:HAdd ℕ ℕ ℕ:=⟨fun a b=>a*b⟩",  # issue 67: Lean ends the value at `instance`
    '2\ninfixl:65 (priority := high) " + " => HMul.hMul',
    "2 axiom«x» : False",
    "2 open Real",
    "2) + (3",  # closed before opened: `(2) + (3)` would still be one term, but not the one written
    "(2",
    "2 /- open",
    "",
])
def test_a_value_that_is_no_single_term_is_never_written(value: str) -> None:
    with pytest.raises(ValueError, match="putnam_easy_solution"):
        fill_slot(EASY, "putnam_easy_solution", value)


def test_every_putnambench_reference_answer_is_one_term_and_fills_its_slot() -> None:
    filled = 0
    for name in putnam_names():
        text = putnam_text(name)
        for slot in find_slots(text):
            value = reference_answer(text, slot.name)
            assert value is not None
            written = fill_slot(text, slot.name, value)
            assert f":= ({value.strip()}" in written, name
            filled += 1
    assert filled == 346


def test_a_theorem_is_filled_once() -> None:
    theorem = Theorem(name="putnam_easy", signature=": 1 + 1 = putnam_easy_solution", header=EASY.strip(),
                      answer=Answer(name="putnam_easy_solution", type="ℕ", task=AnswerTask.PRODUCED, reference="2"))
    assert theorem.answer_open
    filled = theorem.with_answer(" 2 ")
    assert filled.header == "abbrev putnam_easy_solution : ℕ := (2)\n-- 2"
    assert filled.answer is not None and filled.answer.value == "2" and not filled.answer_open
    with pytest.raises(ValueError, match="no open answer slot"):
        filled.with_answer("3")
    with pytest.raises(ValueError, match="is not one term: it holds the command keyword 'instance'"):
        theorem.with_answer("2\n  instance : Add ℕ := ⟨(· * ·)⟩")


# Issue 67, read as whole mode and the hybrid forest read an answer completion (`search.answer.read_attempt`): a made-up
# problem in PutnamBench's form, whose false statement a redefined `+` (or an axiom) would "prove".
MOCK = Theorem(name="putnam_mock_a", signature=": 1 + 1 = putnam_mock_a_solution",
               header="abbrev putnam_mock_a_solution : ℕ := sorry\n-- 2",
               answer=Answer(name="putnam_mock_a_solution", type="ℕ", task=AnswerTask.PRODUCED, reference="2"))
MOCK_PROOF = "\n\ntheorem putnam_mock_a : 1 + 1 = putnam_mock_a_solution := by\n  decide\n```"
KEYWORD = "it holds the command keyword {!r} (Lean ends the term there and runs a command)"


@pytest.mark.parametrize(("value", "shown", "problem"), [
    ("1\n  instance(priority:=high)evil:HAdd ℕ ℕ ℕ:=⟨fun a b=>a*b⟩",
     "1 instance(priority:=high)evil:HAdd ℕ ℕ ℕ:=⟨fun a b=>a*b⟩", KEYWORD.format("instance")),
    ('1 infixl:65 (priority := high) " + " => HMul.hMul', '1 infixl:65 (priority := high) " + " => HMul.hMul',
     KEYWORD.format("infixl")),
    ("1\n  axiom«x» : 1 + 1 = 1", "1 axiom«x» : 1 + 1 = 1", KEYWORD.format("axiom")),
    ("2 open Real", "2 open Real", KEYWORD.format("open")),
])
@pytest.mark.parametrize("fmt", [PromptFormat.DEEPSEEK_WHOLE, PromptFormat.PLAIN_WHOLE])
def test_an_answer_followed_by_a_command_is_refused_before_lean(value: str, shown: str, problem: str,
                                                                fmt: PromptFormat) -> None:
    guard = TacticGuard.from_config(LeanConfig())
    attempt = read_attempt(MOCK, fmt, f" {value}{MOCK_PROOF}", guard)
    assert (attempt.theorem, attempt.refusal) == (None, f"the answer {shown!r} is not one term: {problem}")
    assert read_attempt(MOCK, fmt, f" {value}{MOCK_PROOF}", TacticGuard([])).refusal == attempt.refusal
    honest = read_attempt(MOCK, fmt, f" 2{MOCK_PROOF}", guard)
    assert (honest.answer, honest.refusal, honest.tactics) == ("2", None, ["decide"])
    assert honest.theorem is not None and honest.theorem.header == "abbrev putnam_mock_a_solution : ℕ := (2)\n-- 2"


# Issue 67, point 8: a completion of a non-CoT answer prompt that restates the whole file in a block of its own.
RESTATED = ("\n```lean4\nimport Mathlib\n\nabbrev putnam_mock_a_solution : ℕ := 2\n\n"
            "theorem putnam_mock_a : 1 + 1 = putnam_mock_a_solution := by\n  decide\n```")


@pytest.mark.parametrize("fmt", [PromptFormat.DEEPSEEK_WHOLE, PromptFormat.PLAIN_WHOLE])
def test_a_completion_that_restates_the_file_is_read_by_its_own_slot(fmt: PromptFormat) -> None:
    prime = answer_prime(MOCK.header or "", "putnam_mock_a_solution")
    assert answer_file(fmt, RESTATED, prime) == (
        "import Mathlib\n\nabbrev putnam_mock_a_solution : ℕ := 2\n\n"
        "theorem putnam_mock_a : 1 + 1 = putnam_mock_a_solution := by\n  decide\n")
    attempt = read_attempt(MOCK, fmt, RESTATED, TacticGuard.from_config(LeanConfig()))
    assert (attempt.answer, attempt.refusal, attempt.tactics) == ("2", None, ["decide"])
    # One that restates the file without the slot gives no answer, said so (never `import Mathlib` as the answer).
    without = RESTATED.replace("abbrev putnam_mock_a_solution : ℕ := 2\n\n", "")
    assert read_attempt(MOCK, fmt, without, TacticGuard([])).refusal == (
        "no answer: the completion gives putnam_mock_a_solution no value")
    # A completion that writes the value after the primed `:=` is read as before.
    assert answer_file(fmt, " 2\n```", prime) == "abbrev putnam_mock_a_solution : ℕ := 2\n"

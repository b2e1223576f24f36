"""The prompts of a theorem whose answer is open, byte for byte, in every whole and repair format, and how a
completion of one is read back (docs/search.md, "Prompt formats" and "Answers"). Made-up problems in PutnamBench's
form; the reference answer written under the slot is never shown."""

from __future__ import annotations

import pytest

from burnqed.config import LeanConfig
from burnqed.lean.guard import TacticGuard
from burnqed.records.theorem import Answer, AnswerTask, Theorem
from burnqed.search.answer import read_attempt
from burnqed.text.completion import answer_file, read_answer_file
from burnqed.text.feedback import Feedback, FeedbackMessage
from burnqed.text.prompt import (
    PromptFormat,
    answer_header,
    answer_prime,
    build_repair_prompt,
    build_statement_prompt,
)

HEADER = "open Real\nabbrev putnam_easy_solution : ℕ := sorry\n-- 2\ndef helper : ℕ := 1"
SLOT = "putnam_easy_solution"
DECLARATION = "/-- What is 1 + 1 -/\ntheorem putnam_easy : 1 + 1 = putnam_easy_solution"
FILE = ("```lean4\nopen Real\nabbrev putnam_easy_solution : ℕ := sorry\ndef helper : ℕ := 1\n\n/-- What is 1 + 1 -/\n"
        "theorem putnam_easy : 1 + 1 = putnam_easy_solution := by\n  sorry\n```")
PRIME = "```lean4\nopen Real\nabbrev putnam_easy_solution : ℕ :="
COT = ("Before producing the Lean 4 code to formally prove the given theorem, provide a detailed proof plan outlining "
       "the main proof steps and strategies.\nThe plan should highlight key ideas, intermediate lemmas, and proof "
       "structures that will guide the construction of the final formal proof.")
THEOREM = Theorem(name="putnam_easy", signature=": 1 + 1 = putnam_easy_solution", docstring="What is 1 + 1",
                  header=HEADER, answer=Answer(name=SLOT, type="ℕ", task=AnswerTask.PRODUCED, reference="2"))
GUARD = TacticGuard.from_config(LeanConfig())


def test_the_shown_header_keeps_the_slot_open_and_drops_the_reference_answer() -> None:
    assert answer_header(HEADER, SLOT) == "open Real\nabbrev putnam_easy_solution : ℕ := sorry\ndef helper : ℕ := 1"
    assert answer_prime(HEADER, SLOT) == PRIME
    with pytest.raises(ValueError, match="no answer slot 'other'"):
        answer_header(HEADER, "other")


@pytest.mark.parametrize(("fmt", "expected"), [
    (PromptFormat.DEEPSEEK_WHOLE,
     f"<｜User｜>Complete the following Lean 4 code:\n\n{FILE}<｜Assistant｜>{PRIME}"),
    (PromptFormat.DEEPSEEK_WHOLE_COT,
     f"<｜User｜>Complete the following Lean 4 code:\n\n{FILE}\n\n{COT}<｜Assistant｜>"),
    (PromptFormat.PLAIN_WHOLE, f"Complete the following Lean 4 code:\n\n{FILE}\n{PRIME}"),
])
def test_every_whole_format_shows_the_file_and_starts_the_answer_at_the_slot(fmt: PromptFormat, expected: str) -> None:
    assert build_statement_prompt(fmt, DECLARATION, HEADER, slot=SLOT) == expected
    assert build_statement_prompt(fmt, DECLARATION, HEADER, slot=SLOT, bos=True) == "<｜begin▁of▁sentence｜>" + expected


FEEDBACK = Feedback("norm_num", (FeedbackMessage("error", "unsolved goals", 1, 0),))
FAILED = ("```lean4\nopen Real\nabbrev putnam_easy_solution : ℕ := (3)\ndef helper : ℕ := 1\n\n/-- What is 1 + 1 -/\n"
          "theorem putnam_easy : 1 + 1 = putnam_easy_solution := by\n  norm_num\n```")
GOEDEL = ("<｜User｜>The proof (Round 0) is not correct. Following is the compilation error message, where we use "
          "<error></error> to signal the position of the error.\n\n\nError 1 (line 7, column 2):\n\n"
          "Corresponding Code:\n```lean4\n  <error>norm_num</error>\n```\n\nError Message: unsolved goals\n")


@pytest.mark.parametrize(("fmt", "expected"), [
    (PromptFormat.DEEPSEEK_REPAIR,
     f"<｜User｜>Complete the following Lean 4 code:\n\n{FILE}<｜Assistant｜>{FAILED}<｜end▁of▁sentence｜>{GOEDEL}"
     f"<｜Assistant｜>{PRIME}"),
    (PromptFormat.DEEPSEEK_REPAIR_COT,
     f"<｜User｜>Complete the following Lean 4 code:\n\n{FILE}\n\n{COT}<｜Assistant｜>{FAILED}<｜end▁of▁sentence｜>"
     f"{GOEDEL}\n\nBefore producing the Lean 4 code to formally prove the given theorem, provide a detailed "
     "analysis of the error message.<｜Assistant｜>"),
    (PromptFormat.PLAIN_REPAIR,
     f"This Lean 4 proof does not compile:\n{FAILED}\nLean's messages:\n7:2: error: unsolved goals\n"
     f"Complete the following Lean 4 code:\n\n{FILE}\n{PRIME}"),
])
def test_a_repair_shows_the_failed_file_with_its_answer_and_starts_at_the_slot_again(fmt: PromptFormat,
                                                                                     expected: str) -> None:
    assert build_repair_prompt(fmt, DECLARATION, HEADER, FEEDBACK, slot=SLOT, answer="3") == expected


def test_the_completion_is_read_as_the_primed_file_or_the_last_block() -> None:
    raw = (" 2 -- the sum\n\ndef helper : ℕ := 5\n\n/-- What is 1 + 1 -/\ntheorem putnam_easy : 1 + 1 =\n"
           "    putnam_easy_solution := by\n  norm_num [putnam_easy_solution]\n```")
    text = answer_file(PromptFormat.DEEPSEEK_WHOLE, raw, PRIME)
    assert text == ("open Real\nabbrev putnam_easy_solution : ℕ := 2 -- the sum\n\ndef helper : ℕ := 5\n\n"
                    "/-- What is 1 + 1 -/\ntheorem putnam_easy : 1 + 1 =\n    putnam_easy_solution := by\n"
                    "  norm_num [putnam_easy_solution]\n")
    read = read_answer_file(text, SLOT, "putnam_easy")
    assert (read.answer, read.signature, read.body) == ("2", ": 1 + 1 =\n    putnam_easy_solution",
                                                        "norm_num [putnam_easy_solution]")
    cot = f"Plan: 2.\n```lean4\nabbrev {SLOT} : ℕ → ℕ := fun n =>\n    n + 1\n```\nthen\n```lean4\n{text}```"
    assert answer_file(PromptFormat.DEEPSEEK_WHOLE_COT, cot, "") == text
    value = read_answer_file(f"abbrev {SLOT} : ℕ → ℕ := fun n =>\n    n + 1\ntheorem putnam_easy : T := rfl", SLOT,
                             "putnam_easy")
    assert (value.answer, value.signature, value.body) == ("fun n =>\nn + 1", ": T", "exact rfl")


def test_an_attempt_is_the_theorem_filled_with_its_answer_the_helpers_it_restates_unread() -> None:
    raw = " 2\ndef helper : ℕ := 5\n\ntheorem putnam_easy : 1 + 1 = putnam_easy_solution := by\n  norm_num\n```"
    attempt = read_attempt(THEOREM, PromptFormat.PLAIN_WHOLE, raw, GUARD)
    assert attempt.refusal is None and attempt.answer == "2" and attempt.tactics == ["norm_num"]
    assert attempt.theorem is not None and attempt.theorem.header == (
        "open Real\nabbrev putnam_easy_solution : ℕ := (2)\n-- 2\ndef helper : ℕ := 1")
    renamed = " 2\n\ntheorem putnam_easy (n : ℕ) (h : n = 1) : n + n = putnam_easy_solution := by\n  omega\n```"
    binder = THEOREM.model_copy(update={"signature": "(m : ℕ) (hm : m = 1) : m + m = putnam_easy_solution",
                                        "statement": "∀ (m : ℕ) (hm : m = 1), m + m = putnam_easy_solution"})
    assert read_attempt(binder, PromptFormat.PLAIN_WHOLE, renamed, GUARD).refusal is None  # up to renaming
    kept = read_attempt(THEOREM, PromptFormat.DEEPSEEK_REPAIR_COT,
                        "```lean4\ntheorem putnam_easy : 1 + 1 = putnam_easy_solution := by\n  simp\n```", GUARD,
                        kept="3")
    assert (kept.answer, kept.refusal, kept.tactics) == ("3", None, ["simp"])

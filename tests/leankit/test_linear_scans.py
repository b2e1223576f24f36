"""The guard's readers cost a bounded number of steps per character of model text (issue 87.2): steps counted, not
timed (a run of `'` once cost a walk over the whole name per quote). The times from 1 KB to 1 MB, and the cap, are
benchmarks/guard_cost.py's; the cap's refusals are tested here."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import burnqed
import leankit
from burnqed.config import DEFAULT_DENY
from burnqed.lean.guard import OFF_LOOP_CHARS, TacticGuard, builtin_refusal, read_off_loop
from burnqed.lean.soundness import Verdict, check_answer, check_path
from burnqed.records.theorem import Answer, AnswerTask, Theorem
from burnqed.search.answer import read_attempt
from burnqed.search.whole import read_whole
from burnqed.text.prompt import PromptFormat
from leankit.text import _Names, literal_problem, regions

_SOURCES = (str(Path(leankit.__file__).parent), str(Path(burnqed.__file__).parent))
GUARD = TacticGuard(DEFAULT_DENY, max_chars=10**9, max_text_chars=10**9)


def steps(read: Callable[[str], object], text: str) -> int:
    """The Python lines burnqed's and leankit's code runs while `read` reads `text`. A regular expression or a str
    method is one step: what they cost inside (`read_as_lean`'s `«` search, a hole's pattern) is benchmarks/
    guard_cost.py's to show."""
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        count += event == "line"
        return local

    def called(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename.startswith(_SOURCES) else None

    sys.settrace(called)
    try:
        read(text)
    finally:
        sys.settrace(None)
    return count


# The worst shapes found (each at n and 2n characters): a run of primes after a name, a numeral's digits before
# quotes, subscripts and quotes, Mathlib's `''`, a name glued to a symbol, configurations one after another and
# nested, `+opt` items, comments nested and strings, `«»` left open.
SHAPES: dict[str, Callable[[int], str]] = {
    "primes": lambda n: "exact h" + "'" * n,
    "digits then quotes": lambda n: "1" * (n // 2) + "'" * (n // 2),
    "subscripts and quotes": lambda n: "x" + "₀'" * (n // 2),
    "image quotes": lambda n: "''" * (n // 2),
    "glued name": lambda n: "→" + "o" * n + " x",
    "glued primes": lambda n: "→o" + "'" * n,  # each quote asked twice: where a token starts, and its glue
    "configurations": lambda n: "simp " + "(a := 1) " * (n // 9),
    "nested configurations": lambda n: "simp " + "(a.b := " * (n // 9) + ")" * (n // 9),
    "options": lambda n: "simp " + "+a " * (n // 3) + "(a := 1)",
    "nested comments": lambda n: "/- " * (n // 6) + "-/ " * (n // 6),
    "strings": lambda n: '"a" ' * (n // 4),
    "open escapes": lambda n: "«" * n,
}
READERS: dict[str, Callable[[str], object]] = {
    "builtin_refusal": builtin_refusal,
    "regions": lambda text: list(regions(text)),
    "literal_problem": literal_problem,
    "check_sketch": lambda text: GUARD.check_sketch(f"have h : P := by sorry\n{text}"),
}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("shape", SHAPES)
def test_twice_the_text_is_at_most_about_twice_the_steps(shape: str, reader: str) -> None:
    """Linear: doubling the text doubles the steps (plus what a fixed prefix costs); quadratic would give four."""
    once, twice = (steps(READERS[reader], SHAPES[shape](n)) for n in (400, 800))
    assert twice <= 2.4 * once + 50, (once, twice)


def test_the_step_count_sees_a_quadratic_walk() -> None:
    """The measure is not blind: a walk back over the name per quote, as the readers once took, counts quadratically."""
    def walk_back_per_quote(text: str) -> None:
        for index, char in enumerate(text):
            start = index
            while char == "'" and start > 0 and text[start - 1] in "'h":
                start -= 1

    walk_back_per_quote.__code__ = walk_back_per_quote.__code__.replace(co_filename=f"{_SOURCES[0]}/walk.py")
    once, twice = (steps(walk_back_per_quote, "h" + "'" * n) for n in (400, 800))
    assert twice > 3.5 * once


def test_names_asked_out_of_order_answer_as_a_fresh_scan() -> None:
    """`_Names` walks each character once for a scan from left to right; asked about an earlier place, it starts
    again from the text's start and answers as a new scanner would (asked where quotes stand)."""
    text = "ab'c 12'x h'' →o'p 0x1'"
    quotes = [2, 7, 11, 12, 16, 22]
    expected = [(False, False, 0), (True, False, 5), (False, False, 10), (False, False, 10), (None, True, 15),
                (True, False, 19)]
    assert [(_Names(text).token_start(i, 0), _Names(text).glued_name(i, 0), _Names(text).name_start(i, 0))
            for i in quotes] == expected
    for order in (quotes, quotes[::-1], [22, 2, 16, 7, 12, 11]):
        names = _Names(text)
        asked = {i: (names.token_start(i, 0), names.glued_name(i, 0), names.name_start(i, 0)) for i in order}
        assert [asked[i] for i in quotes] == expected, order
    names = _Names(text)
    assert [names.name_start(22, 0), names.name_start(7, 0), names.name_start(7, 6)] == [19, 5, 6]


def test_a_numeral_read_once_answers_every_quote_after_it() -> None:
    """The numerals opening a name are read once for all the quotes in it: `12'` starts a token after `12`, the
    quote after `12'a` is in the name `'a'`'s run from `12` (a symbol `'` opens it), and `1x'` is a name from `x`."""
    names = _Names("12'a'1x'")
    assert [names.token_start(index, 0) for index in (2, 4, 7)] == [True, None, None]
    assert _Names("1x'").token_start(2, 0) is False
    assert _Names("12'").token_start(2, 2) is True


MOCK = Theorem(name="putnam_mock_a", signature=": 1 + 1 = putnam_mock_a_solution",
               header="abbrev putnam_mock_a_solution : ℕ := sorry\n-- 2",
               answer=Answer(name="putnam_mock_a_solution", type="ℕ", task=AnswerTask.PRODUCED, reference="2"))
PROOF = "\n\ntheorem putnam_mock_a : 1 + 1 = putnam_mock_a_solution := by\n  decide\n```"
CAPPED = TacticGuard(DEFAULT_DENY, max_chars=40, max_text_chars=60)


def test_model_text_over_the_cap_is_refused_with_its_length_before_any_reader() -> None:
    long_value = "1 + " * 20 + "1"  # 81 characters
    assert CAPPED.check("exact h" + "'" * 40) == "47 characters, over the cap of 40 (lean.max_tactic_chars)"
    assert CAPPED.over_cap("x" * 60) is None
    assert CAPPED.over_cap("x" * 61) == "61 characters, over the cap of 60 (lean.max_text_chars)"
    assert check_answer(long_value, CAPPED).reason == "the answer has 81 characters, over the cap of 60 " \
                                                      "(lean.max_text_chars)"
    assert CAPPED.check_sketch("have h : P := by sorry\n" + "simp\n" * 10) == \
        "the sketch has 73 characters, over the cap of 60 (lean.max_text_chars)"
    raw = " 2" + PROOF
    attempt = read_attempt(MOCK, PromptFormat.PLAIN_WHOLE, raw, CAPPED)
    assert (attempt.answer, attempt.tactics, attempt.theorem, attempt.refusal) == (
        None, [], None, f"the completion has {len(raw)} characters, over the cap of 60 (lean.max_text_chars)")
    whole = read_whole(MOCK.model_copy(update={"answer": None}), PromptFormat.PLAIN_WHOLE, "decide\n" * 9, CAPPED)
    assert (whole.body, whole.tactics, whole.refusal) == (
        "", [], "the completion has 63 characters, over the cap of 60 (lean.max_text_chars)")
    # at the cap, read as before
    assert read_attempt(MOCK, PromptFormat.PLAIN_WHOLE, raw, GUARD).refusal is None


def test_a_whole_proofs_tactics_are_bounded_by_the_text_cap_not_the_tactic_cap() -> None:
    """A tactic sent alone is capped at lean.max_tactic_chars; a whole proof's top-level tactic is not (a long `have
    … := by` block), the proof as a whole is at lean.max_text_chars, and every other rule reads each tactic."""
    block = "have h : True := by\n  " + "\n  ".join(["trivial"] * 3)  # 49 characters
    assert CAPPED.check(block) == "49 characters, over the cap of 40 (lean.max_tactic_chars)"
    assert CAPPED.check_in_proof(block) is None
    assert check_path([block, "exact h"], CAPPED) == Verdict(True)
    assert check_path([block, "exact h", "simp"], CAPPED) == Verdict(
        False, "the proof has 62 characters, over the cap of 60 (lean.max_text_chars)")
    assert CAPPED.check_in_proof("x" * 61) == "61 characters, over the cap of 60 (lean.max_text_chars)"
    assert check_path([block.replace("trivial", "native_decide", 1)], CAPPED) == Verdict(
        False, f"tactic {block.replace('trivial', 'native_decide', 1)!r} on the path is denied: matches deny "
        "pattern '\\\\bnative_decide\\\\b'")
    whole = read_whole(MOCK.model_copy(update={"answer": None}), PromptFormat.PLAIN_WHOLE, f"{block}\nexact h", CAPPED)
    assert (whole.tactics, whole.refusal) == ([block, "exact h"], None)
    huge = "have h : True := by\n  " + "'" * 1_000_000
    guard = TacticGuard(DEFAULT_DENY)
    assert steps(lambda text: check_path([text], guard), huge) < 10  # one length check: no reader runs


def test_the_cap_is_checked_before_the_readers() -> None:
    """A text over the cap reaches no reader: a million primes cost one length check."""
    huge = "exact h" + "'" * 1_000_000
    guard = TacticGuard(DEFAULT_DENY)
    assert steps(guard.check, huge) < 10
    assert steps(lambda text: check_answer(text, guard), huge) < 10
    assert steps(guard.check_sketch, huge) < 10
    assert steps(lambda text: read_attempt(MOCK, PromptFormat.PLAIN_WHOLE, text, guard), huge) < 10


def test_a_long_text_is_read_off_the_event_loop_while_other_coroutines_run() -> None:
    """A text over OFF_LOOP_CHARS is read in a worker thread: here the read waits until another coroutine has run,
    which it never could if the read held the event loop (it would wait out its timeout and say False)."""
    async def run(text: str) -> tuple[bool, int]:
        ran = threading.Event()
        ticks = 0

        def read() -> bool:
            return ran.wait(timeout=5)

        async def tick() -> None:
            nonlocal ticks
            for _ in range(3):
                await asyncio.sleep(0)
                ticks += 1
            ran.set()

        read_result, _ = await asyncio.gather(read_off_loop(text, read), tick())
        return read_result, ticks

    assert asyncio.run(run("'" * (OFF_LOOP_CHARS + 1))) == (True, 3)
    # a short text is read at once, in the loop's thread
    assert asyncio.run(read_off_loop("'" * OFF_LOOP_CHARS, threading.get_ident)) == threading.get_ident()
    assert asyncio.run(read_off_loop("'" * (OFF_LOOP_CHARS + 1), threading.get_ident)) != threading.get_ident()


def test_a_restated_theorem_far_longer_than_the_statement_is_refused_before_its_normal_form() -> None:
    """The statement's normal form drops parentheses in more than linear time: a restatement with more than half
    again the statement's tokens and 64 more is refused unread by it (`1 + 1 = …` has 5 tokens: 71 pass)."""
    from burnqed.search.answer import statement_problem

    def restated(extra: int) -> str:
        return ": 1 + 1 = putnam_mock_a_solution" + " + 0" * (extra // 2)

    def problem(text: str) -> str | None:
        return statement_problem(MOCK, text)

    assert steps(problem, restated(66)) > 5 * steps(problem, restated(68))  # 71 tokens normalised, 73 not
    assert problem(restated(66)) == problem(restated(68)) is not None
    nested = ": " + "(" * 2000 + "1 + 1 = putnam_mock_a_solution" + ")" * 2000  # quadratic in its normal form
    assert steps(problem, nested) < 10_000
    assert statement_problem(MOCK, ": ((1 + 1)) = (putnam_mock_a_solution)") is None


@pytest.mark.parametrize("read", [lambda text: list(regions(text)), literal_problem],
                         ids=["regions", "literal_problem"])
def test_a_run_of_quotes_inside_a_name_is_passed_in_one_step(read: Callable[[str], object]) -> None:
    """`h'''…` is one name: after its first quote is read as inside it, the rest of the run is passed at once."""
    assert steps(read, "exact h" + "'" * 801 + " x") == steps(read, "exact h" + "'" * 3 + " x")

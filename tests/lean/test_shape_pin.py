"""The compiled file's pinned shape (docs/lean.md, "Soundness", rule 4): the units Lean reports are exactly the index
header's commands (count and start, in UTF-8 bytes), the theorem, `#print axioms` and the recheck; an answer filled
into a slot moves the starts after it by its length and adds no unit. Hand-written offsets; made-up problems in
PutnamBench's form."""

from __future__ import annotations

import asyncio

import pytest

from burnqed.lean.soundness import (
    CompileText,
    Verdict,
    check_compile,
    check_header,
    check_proof_text,
    check_shape,
    compile_text,
    pinned_starts,
    verify_proof,
)
from burnqed.records.replies import CompileMessage, CompileResult, CompileUnit
from burnqed.records.theorem import Theorem
from tests.lean.test_guard_soundness import DONE, GUARD, ROOT_OK, ScriptedEnv

SLOT = "putnam_mock_a_solution"
INDEX = f"abbrev {SLOT} : ℕ := sorry\n-- 2"  # 42 characters, 44 bytes (ℕ is 3)
THEOREM = f"theorem putnam_mock_a : 1 + 1 = {SLOT} := by\n  decide\n"
ATTACK = "1\n  instance(priority:=high)evil:HAdd ℕ ℕ ℕ:=⟨fun a b=>a*b⟩"  # the example


def filled(value: str) -> str:
    return f"abbrev {SLOT} : ℕ := {value}\n-- 2"


def proof(value: str) -> str:
    return f"{filled(value)}\n\n{THEOREM}"


def test_the_shape_of_a_filled_answer_is_the_index_headers_with_its_starts_moved_past_the_value() -> None:
    honest = compile_text(proof("2"), "putnam_mock_a", INDEX, filled("2"))
    # `abbrev … := 2\n-- 2` is 38 + 5 characters, 45 bytes; the theorem follows the blank line at byte 47.
    assert honest.unit_starts == (0, 47, honest.print_start, honest.recheck_start)
    assert honest.problem is None and honest.print_start == 47 + len(THEOREM.encode()) + 1
    # The attack's value is 58 characters (68 bytes) longer: the theorem moves, the count stays the index header's.
    attack = compile_text(proof(ATTACK), "putnam_mock_a", INDEX, filled(ATTACK))
    assert attack.unit_starts == (0, 47 + 68, attack.print_start, attack.recheck_start)
    assert (len(ATTACK) - 1, len(ATTACK.encode()) - 1) == (58, 68)


def units(*starts: int) -> CompileResult:
    report = CompileMessage("information", "'putnam_mock_a' depends on axioms: [propext]")
    checked = CompileMessage("information", "burnqed kernel recheck: putnam_mock_a ok (2 constants)")
    messages: list[tuple[CompileMessage, ...]] = [()] * (len(starts) - 2) + [(report,), (checked,)]
    declared: list[tuple[str, ...]] = [()] * (len(starts) - 3) + [("putnam_mock_a",), (), ()]
    return CompileResult(tuple(CompileUnit(start, end, message, constants) for start, end, message, constants in
                               zip(starts, [*starts[1:], starts[-1] + 10], messages, declared, strict=True)))


def test_an_answer_that_runs_a_command_of_its_own_is_refused_by_the_units_lean_reports() -> None:
    attack = compile_text(proof(ATTACK), "putnam_mock_a", INDEX, filled(ATTACK))
    # What Lean reports for it: the abbrev, the instance (at byte 43: `abbrev … := 1\n  `), the theorem, …
    reported = units(0, 43, 115, attack.print_start, attack.recheck_start)
    assert check_compile(reported, attack).reason == (
        "Lean reports 5 compilation units where the file's pinned shape has 4 (the index header's 1 commands, the "
        "theorem, `#print axioms` and the kernel recheck): a command the header does not have was run")
    # The same count with a boundary elsewhere (a command swallowed, another smuggled) is refused too.
    assert check_compile(units(0, 43, attack.print_start, attack.recheck_start), attack).reason == (
        "Lean's unit 2 starts at byte 43, where the pinned shape starts the theorem at byte 115: the text was not "
        "split as written")
    assert check_compile(units(0, 115, attack.print_start, attack.recheck_start), attack).ok  # the pin alone


def test_the_first_unit_may_start_at_the_files_start_or_at_its_first_token_and_nowhere_else() -> None:
    header = "-- a note\nopen Real"
    text = compile_text(f"{header}\n\ntheorem t : p := by\n  simp\n", "t", header)
    assert text.unit_starts[:2] == (10, 21)  # `open` after the 10-character comment line; the theorem after it
    for first in (0, 10):
        assert check_shape(units(first, 21, text.print_start, text.recheck_start), text).ok
    assert check_shape(units(5, 21, text.print_start, text.recheck_start), text).reason.startswith(
        "Lean's unit 1 starts at byte 5, where the pinned shape starts the header's command 1 at byte 10")


def test_a_header_ending_with_open_in_is_one_unit_with_the_theorem() -> None:
    header = "open Nat\nopen Real in"
    text = compile_text(f"{header}\n\ntheorem t : p := by\n  simp\n", "t", header)
    assert text.unit_starts == (0, 9, text.print_start, text.recheck_start)


def test_a_header_that_is_not_the_index_s_has_no_shape_and_is_refused_before_lean() -> None:
    other = f"open Real\n{filled('2')}"  # a command before the slot: not the index's header filled
    text = compile_text(f"{other}\n\n{THEOREM}", "putnam_mock_a", INDEX, other)
    assert text.problem == "the header compiled is not the index's header, nor it with an answer slot filled"
    assert check_shape(units(0, 1, 2), text) == Verdict(False, (
        "the compiled file's shape cannot be pinned: the header compiled is not the index's header, nor it with an "
        "answer slot filled"))
    # The compile's own check says the same, before it reads the reply (here one with no units at all).
    assert check_compile(CompileResult(()), text) == check_shape(units(0, 1, 2), text)
    env = ScriptedEnv(ROOT_OK, units(0, 1, 2))
    verdict = asyncio.run(check_proof_text(env, "putnam_mock_a", f"{other}\n\n{THEOREM}", index_header=INDEX,
                                           header=other))
    assert (verdict.ok, verdict.compiled, env.texts) == (False, False, [])
    # A step search's proof under that header: refused by its shape, Lean's compile never asked.
    theorem = Theorem(name="putnam_mock_a", statement=f"1 + 1 = {SLOT}", header=other)
    env = ScriptedEnv(ROOT_OK, units(0, 1, 2))
    verdict = asyncio.run(verify_proof(env, theorem, ["decide"], DONE, GUARD, index_header=INDEX))
    assert (verdict.ok, verdict.compiled, verdict.reason, env.texts) == (False, False, (
        "the compiled file's shape cannot be pinned: the header compiled is not the index's header, nor it with an "
        "answer slot filled"), [])
    # A file that does not begin with the header it claims, either.
    assert compile_text(f"open X\n\n{THEOREM}", "putnam_mock_a", "open Y").problem == (
        "the compiled file does not begin with the header it was assembled under")


@pytest.mark.parametrize(("value", "reason"), [
    ("2", ""),
    ("(2 : ℕ)", ""),
    (ATTACK, "the header holds 2 commands where the index's has 1: a command the index's header does not have would "
     "run"),
    ("2 open Real", "the header holds 2 commands where the index's has 1: a command the index's header does not have "
     "would run"),
    ("2\n  axiom«x» : False", "the header holds 2 commands where the index's has 1: a command the index's header does "
     "not have would run"),
    ('2\n  infixl:65 (priority := high) " + " => HMul.hMul', "the header holds 2 commands where the index's has 1: "
     "a command the index's header does not have would run"),
])
def test_the_header_alone_as_the_hybrid_forest_checks_it_before_starting_a_filled_theorem(value: str,
                                                                                          reason: str) -> None:
    verdict = check_header(INDEX, filled(value))
    assert (verdict.ok, verdict.reason) == (reason == "", reason)


def test_with_two_slots_the_starts_move_past_the_one_filled() -> None:
    index = "abbrev a_solution : ℕ := sorry\nabbrev b_solution : ℕ := sorry\nopen Real"
    head = "abbrev a_solution : ℕ := sorry\nabbrev b_solution : ℕ := 10\nopen Real"
    assert check_header(index, head).ok
    text = compile_text(f"{head}\n\ntheorem t : p := by\n  simp\n", "t", index, head)
    # `abbrev a_solution : ℕ := sorry\n` is 31 characters (33 bytes), `abbrev b_solution : ℕ := 10\n` 28 (30 bytes),
    # `open Real\n\n` 11
    assert text.unit_starts[:4] == (0, 33, 63, 74)
    assert isinstance(text, CompileText)


@pytest.mark.parametrize(("body", "pinned"), [
    ("open Real\ntheorem t : True := trivial", [0, 10]),  # one newline after the header is enough
    ("open Real\n\ntheorem t : True := trivial", [0, 11]),
    ("open RealX\ntheorem t : True := trivial",
     "the compiled file does not begin with the header it was assembled under"),
    ("open Real", "the compiled file has nothing after its header: no theorem"),
    ("open Real -- only a comment\n", "the compiled file has nothing after its header: no theorem"),
])
def test_the_theorem_starts_at_the_first_token_after_the_header_and_must_be_there(body: str,
                                                                                   pinned: list[int] | str) -> None:
    assert pinned_starts(body, "open Real", "open Real") == pinned


def test_a_header_whose_commands_are_as_many_as_the_indexs_but_start_elsewhere_is_refused() -> None:
    # `open Nat` after the value, then a comment left open that swallows the index's own `open Real`: two commands
    # as in the index's header, the second where the index has none.
    verdict = check_header("abbrev s : ℕ := sorry\nopen Real", "abbrev s : ℕ := 1 open Nat /-\nopen Real")
    assert verdict == Verdict(False, "the header's command 2 starts at character 18, where the index's starts at 30")
    assert check_header("abbrev s : ℕ := sorry\nopen Real", "open Nat") == Verdict(
        False, "the header compiled is not the index's header, nor it with an answer slot filled")


@pytest.mark.parametrize("head", [
    "abbrev s : ℕ \nopen Real",  # `:= sorry` cut out, nothing in its place
    "abbrev s : ℕ := \nopen Real",  # `sorry` cut out: no value
    "abbrev s : ℕ := sorry\n",  # the index's `open Real` gone
])
def test_a_header_whose_slot_holds_no_value_is_not_a_filled_slot(head: str) -> None:
    # `fill_slot` keeps the `:=` and writes a value; anything else is not the index's header with its slot filled,
    # so no start of it is trusted.
    assert check_header("abbrev s : ℕ := sorry\nopen Real", head) == Verdict(
        False, "the header compiled is not the index's header, nor it with an answer slot filled")

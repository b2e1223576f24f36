"""A produced answer judged against the reference (`burnqed.search.answer_check`; docs/search.md, "Answers"), on
made-up problems in PutnamBench's form only: minilean (the embedded Lean, which decides these statements as Lean does)
judges `100` for `3 ≤ SOL` (reference 5) `different`, `1 + 1` against `2` `equal`, and on ℝ `5 / 2` against the
scientific literal `2.5` `equal` and `3` against it `different` (minilean reads `2.5` as Lean does, the exact
rational `OfScientific.ofScientific 25 true 1`, which `norm_num` evaluates; on ℕ it is Lean's `failed to synthesize
OfScientific ℕ`). The strict Pantograph double has no semantics (it compiles any honest text): there the check shows
the file compiled and the path, not Lean's decision. The rules are pure and tested alone; the answer passes
`soundness.check_answer` before any Lean; a theorem with no reference is `no reference`, never `equal`.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from burnqed.config import LeanConfig
from burnqed.lean.client import LeanWorker
from burnqed.lean.guard import TacticGuard
from burnqed.lean.soundness import Verdict
from burnqed.records.replies import CompileResult
from burnqed.records.theorem import Answer, AnswerTask, Theorem
from burnqed.search.answer_check import (
    CHECK_NAME,
    AnswerCheck,
    AnswerJudgement,
    check_file,
    check_statement,
    judge_answer,
    verdict_of,
)
from tests.conftest import double_argv

GUARD = TacticGuard.from_config(LeanConfig())
SLOT = "putnam_mock_solution"


def mock(statement: str, type_: str, reference: str | None, header: str = "") -> Theorem:
    """A made-up problem in PutnamBench's form: `abbrev putnam_mock_solution : T := sorry` with the reference on the
    comment line under it, the theorem using the slot."""
    comment = f"\n-- {reference}" if reference is not None else ""
    return Theorem(name="putnam_mock", signature=f": {statement}", header=f"{header}abbrev {SLOT} : {type_} := sorry"
                   f"{comment}", source="putnam",
                   answer=Answer(name=SLOT, type=type_, task=AnswerTask.PRODUCED, reference=reference))


AT_LEAST_THREE = mock(f"3 ≤ {SLOT}", "ℕ", "5")
ONE_PLUS_ONE = mock(f"1 + 1 = {SLOT}", "ℕ", "2")
HALF = mock(f"{SLOT} = 5 / 2", "ℝ", "2.5")
HALF_ON_NAT = mock(f"{SLOT} ≤ 3", "ℕ", "2.5")  # a reference Lean cannot elaborate: no `OfScientific ℕ`
HALF_AS_FRACTION = mock(f"{SLOT} = 5 / 2", "ℝ", "10 / 4")


class NoLean:
    """A LeanEnv that fails the test when asked anything: what is refused before Lean never reaches it."""

    async def compile(self, text: str, timeout_s: float | None = None) -> CompileResult:
        raise AssertionError(f"Lean was asked to compile {text!r}")


def judge_all(argv: Sequence[str], cases: Sequence[tuple[Theorem, str]]) -> list[AnswerJudgement]:
    async def go() -> list[AnswerJudgement]:
        async with LeanWorker(list(argv), tactic_timeout_s=10, watchdog_grace_s=1, ready_timeout_s=20) as lean:
            return [await judge_answer(lean, theorem, answer, GUARD) for theorem, answer in cases]

    return asyncio.run(go())


def test_the_check_is_the_header_without_the_slot_then_a_fixed_tactic_list() -> None:
    theorem = mock(f"π < {SLOT}", "ℝ", "4", header="open Real\n\n")
    theorem = theorem.model_copy(update={"header": f"{theorem.header}\n\ndef helper : ℕ := 1"})
    assert check_file(theorem, "100", "5", "≠") == (
        "open Real\ndef helper : ℕ := 1\n\n"
        f"theorem {CHECK_NAME} : ((100) : ℝ) ≠ ((5) : ℝ) := by\n  first\n  | decide\n  | norm_num\n  | simp\n")
    assert check_file(AT_LEAST_THREE, "1 + 1", "2", "=") == (
        f"theorem {CHECK_NAME} : ((1 + 1) : ℕ) = ((2) : ℕ) := by\n  first\n  | rfl\n  | decide\n  | norm_num\n"
        "  | simp\n  | (ext <;> simp)\n  | (funext <;> simp)\n")
    # a comment is dropped: it would swallow the rest of the statement's line
    assert check_statement("5 -- five )", "5", "ℕ", "=") == "((5) : ℕ) = ((5) : ℕ)"
    # a value of several lines keeps its lines, indented under the statement
    assert check_statement("if 2 < 3\nthen 1 else 0", "5", "ℕ", "=") == \
        "((if 2 < 3\n      then 1 else 0) : ℕ) = ((5) : ℕ)"
    with pytest.raises(ValueError, match="no open answer slot"):
        check_file(AT_LEAST_THREE.with_answer("5"), "5", "5", "=")


def test_the_rule_equal_first_then_different_else_undecided() -> None:
    proved, failed, no_verdict = Verdict(True, compiled=True), Verdict(False, "x", compiled=True), Verdict(False, "y")
    assert verdict_of(proved, None) is AnswerCheck.EQUAL
    assert verdict_of(proved, proved) is AnswerCheck.EQUAL
    assert verdict_of(failed, proved) is AnswerCheck.DIFFERENT
    assert verdict_of(failed, failed) is AnswerCheck.UNDECIDED
    assert verdict_of(failed, None) is AnswerCheck.UNDECIDED
    # ok but not compiled is no evidence (an unverified proof): neither side counts
    assert verdict_of(Verdict(True), Verdict(True)) is AnswerCheck.UNDECIDED
    assert verdict_of(no_verdict, no_verdict) is AnswerCheck.UNDECIDED


@pytest.mark.parametrize(("theorem", "answer", "reason"), [
    (AT_LEAST_THREE, "sorry", "the answer is not checked: the answer is left `sorry`"),
    (AT_LEAST_THREE, "by native_decide", "the answer is not checked: the answer 'by native_decide' is denied: "),
    (mock(f"3 ≤ {SLOT}", "ℕ", "(sorry : ℕ)"), "5", "the reference is not checked: the answer is left `sorry`"),
    # out of its parentheses, the statement would be `100 = 100 ∨ 100 = 5`, which `simp` proves (minilean: `equal`)
    # (refused by soundness.check_answer's one-term rule, before this module's own bracket rule)
    (AT_LEAST_THREE, "100) : ℕ) = ((100) : ℕ) ∨ ((100",
     "the answer is not checked: the answer '100) : ℕ) = ((100) : ℕ) ∨ ((100' is not one term: it closes a bracket "
     "')' it never opened (character 3)"),
    (AT_LEAST_THREE, "(5 : ℕ", "the answer is not checked: the answer '(5 : ℕ' is not one term: it leaves '(' open "
     "(character 0)"),
    (mock(f"3 ≤ {SLOT}", "ℕ", "[5)"), "5",
     "the reference is not checked: the answer '[5)' is not one term: it closes '[' (character 0) with ')' "
     "(character 2)"),
])
def test_a_refused_answer_or_reference_is_undecided_before_lean(theorem: Theorem, answer: str, reason: str) -> None:
    judged = asyncio.run(judge_answer(NoLean(), theorem, answer, GUARD))  # type: ignore[arg-type]
    assert (judged.verdict, judged.answer) == (AnswerCheck.UNDECIDED, answer)
    assert judged.reason.startswith(reason)


def test_no_reference_is_its_own_verdict_never_equal_and_asks_no_lean() -> None:
    judged = asyncio.run(judge_answer(NoLean(), mock(f"3 ≤ {SLOT}", "ℕ", None), "5", GUARD))  # type: ignore[arg-type]
    assert judged == AnswerJudgement(AnswerCheck.NO_REFERENCE, "5", None,
                                     f"the benchmark records no reference answer for {SLOT}")
    assert not judged.equal
    with pytest.raises(ValueError, match="no open answer slot"):
        asyncio.run(judge_answer(NoLean(), AT_LEAST_THREE.with_answer("5"), "5", GUARD))  # type: ignore[arg-type]


def test_on_minilean_lean_decides_equal_and_different() -> None:
    judged = judge_all([sys.executable, "-m", "minilean", "--pantograph-version", "0.3.4"], [
        (AT_LEAST_THREE, "100"),  # proves 3 ≤ 100, but 100 ≠ 5
        (AT_LEAST_THREE, "5"),
        (ONE_PLUS_ONE, "1 + 1"),
        (HALF_AS_FRACTION, "5 / 2"),  # on ℝ: 5 / 2 = 10 / 4 (norm_num)
        (HALF_AS_FRACTION, "3"),
        (HALF, "5 / 2"),  # `2.5` is the rational 5 / 2 on ℝ: `norm_num` proves `5 / 2 = 2.5`
        (HALF, "3"),  # and `3 ≠ 2.5`
        (HALF_ON_NAT, "2"),  # neither side elaborates: `2.5` is no natural number
        (ONE_PLUS_ONE, SLOT),  # the answer naming its own slot: the check's header has no slot
        (AT_LEAST_THREE, "5 -- the least value above 3 )"),
    ])
    assert [(j.answer, j.reference, j.verdict) for j in judged] == [
        ("100", "5", AnswerCheck.DIFFERENT), ("5", "5", AnswerCheck.EQUAL), ("1 + 1", "2", AnswerCheck.EQUAL),
        ("5 / 2", "10 / 4", AnswerCheck.EQUAL), ("3", "10 / 4", AnswerCheck.DIFFERENT),
        ("5 / 2", "2.5", AnswerCheck.EQUAL), ("3", "2.5", AnswerCheck.DIFFERENT),
        ("2", "2.5", AnswerCheck.UNDECIDED), (SLOT, "2", AnswerCheck.UNDECIDED),
        ("5 -- the least value above 3 )", "5", AnswerCheck.EQUAL)]
    assert judged[0].reason == "Lean proved the answer different from the reference"
    assert judged[1].reason == "Lean proved the answer equal to the reference"
    assert judged[5].reason == "Lean proved the answer equal to the reference"
    assert judged[6].reason == "Lean proved the answer different from the reference"
    # the reason keeps each error's first line; tests/minilean/test_scientific.py pins the whole `OfScientific ℕ`
    assert judged[7].reason == ("neither side proved: `=`: the proof text does not compile: failed to synthesize; "
                                "`≠`: the proof text does not compile: failed to synthesize")
    assert judged[8].reason.startswith(f"neither side proved: `=`: the proof text does not compile: unknown "
                                       f"identifier '{SLOT}'")
    assert all(j.answered for j in judged)


def test_on_the_strict_double_the_check_compiles_through_the_soundness_path_under_the_headers_opens(
        tmp_path: Path) -> None:
    log = tmp_path / "log"
    pi = mock(f"π < {SLOT}", "ℝ", "4", header="open Real\n")
    judged = judge_all(double_argv("--pantograph-version", "0.3.4", "--log", str(log)), [
        (HALF, "5 / 2"),
        (pi, "π + 1"),  # `π` needs `open Real`, which the header without its slot keeps
        (mock(f"π < {SLOT}", "ℝ", "4"), "π + 1"),  # no `open Real`: `π` is unknown, as in Lean
    ])
    assert [j.verdict for j in judged] == [AnswerCheck.EQUAL, AnswerCheck.EQUAL, AnswerCheck.UNDECIDED]
    assert judged[2].reason.startswith("neither side proved: `=`: the proof text does not compile: unknown identifier "
                                       "'π'")
    sent = [json.loads(line.split(" ", 1)[1])["file"] for line in log.read_text(encoding="utf-8").splitlines()
            if line.startswith("frontend.process ")]
    # each side is the check file, then `#print axioms` and the kernel recheck: the compile every proof takes
    assert [file.split("\n\n#print axioms")[0] + "\n" for file in sent] == [
        check_file(HALF, "5 / 2", "2.5", "="), check_file(pi, "π + 1", "4", "="),
        check_file(mock(f"π < {SLOT}", "ℝ", "4"), "π + 1", "4", "="),
        check_file(mock(f"π < {SLOT}", "ℝ", "4"), "π + 1", "4", "≠")]
    assert all(f"#print axioms {CHECK_NAME}\n" in file for file in sent)

"""A produced answer judged against the reference (`burnqed.search.answer_check`; docs/search.md, "Answers"), on
made-up problems in PutnamBench's form only: the check compiles the header the proof compiled under (its slot filled
with the answer, byte for byte) and proves `(SLOT : T) = ((REFERENCE) : T)`, so the value is elaborated once. minilean
(the embedded Lean, which decides these statements as Lean does, `decl_name%` included) judges `100` for `3 ≤ SOL`
(reference 5) `different`, and so `if decl_name% == `SOL then 100 else 5` (100 in the slot, 5 in any other
declaration, which the check's old file judged `equal`), `1 + 1` against `2` `equal`, and on ℝ `5 / 2` against the
scientific literal `2.5` `equal` and `3` against it `different` (minilean reads `2.5` as Lean does, the exact rational
`OfScientific.ofScientific 25 true 1`, which `norm_num` evaluates; on ℕ it is Lean's `failed to synthesize
OfScientific ℕ`). The strict Pantograph double has no semantics (it compiles any honest text): there the check shows
the file compiled and the path, not Lean's decision. The rules are pure and tested alone; the answer passes
`soundness.check_answer` before any Lean; a header other than the proof's is `undecided` before Lean, both digests
named; a theorem with no reference is `no reference`, never `equal`.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from burnqed.config import LeanConfig
from burnqed.errors import LeanTimeoutError
from burnqed.lean.client import LeanWorker
from burnqed.lean.guard import TacticGuard
from burnqed.lean.soundness import Verdict, assemble_proof, check_proof_text
from burnqed.lean.stored_proof import assembled_header
from burnqed.records.replies import CompileResult
from burnqed.records.theorem import Answer, AnswerTask, Theorem
from burnqed.search.answer_check import (
    CHECK_NAME,
    AnswerCheck,
    AnswerJudgement,
    check_file,
    check_statement,
    header_digest,
    judge_answer,
    judged_header,
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
            return [await judge_answer(lean, theorem, answer, GUARD, compiled_under=judged_header(theorem, answer))
                    for theorem, answer in cases]

    return asyncio.run(go())


def test_the_check_is_the_header_the_proof_compiled_under_then_a_theorem_about_the_slots_constant() -> None:
    theorem = mock(f"π < {SLOT}", "ℝ", "4", header="open Real\n\n")
    theorem = theorem.model_copy(update={"header": f"{theorem.header}\n\ndef helper : ℕ := 1"})
    # the header byte for byte as the proof's compile has it: the slot filled (Theorem.with_answer), nothing dropped
    assert judged_header(theorem, "100") == (theorem.with_answer("100").header or "").rstrip() == (
        f"open Real\n\nabbrev {SLOT} : ℝ := (100)\n-- 4\n\ndef helper : ℕ := 1")
    assert check_file(theorem, "100", "≠") == (
        f"open Real\n\nabbrev {SLOT} : ℝ := (100)\n-- 4\n\ndef helper : ℕ := 1\n\n"
        f"theorem {CHECK_NAME} : ({SLOT} : ℝ) ≠ ((4) : ℝ) := by\n  try unfold {SLOT}\n  first\n  | decide\n"
        "  | norm_num\n  | simp\n")
    assert check_file(AT_LEAST_THREE, "1 + 1", "=") == (
        f"abbrev {SLOT} : ℕ := (1 + 1)\n-- 5\n\ntheorem {CHECK_NAME} : ({SLOT} : ℕ) = ((5) : ℕ) := by\n"
        f"  try unfold {SLOT}\n  first\n  | rfl\n  | decide\n  | norm_num\n  | simp\n  | (ext <;> simp)\n"
        "  | (funext <;> simp)\n")
    # the value's text is written once, where the proof's compile has it: a value of several lines keeps its lines
    value = "if 2 < 3\nthen 1 else 0"
    assert check_file(AT_LEAST_THREE, value, "=").count("then 1 else 0") == 1
    assert judged_header(AT_LEAST_THREE, value) == f"abbrev {SLOT} : ℕ := (if 2 < 3\n  then 1 else 0)\n-- 5"
    # a reference's comment is dropped: it would swallow the rest of the statement's line
    assert check_statement(SLOT, "5 -- five )", "ℕ", "=") == f"({SLOT} : ℕ) = ((5) : ℕ)"
    assert check_statement(SLOT, "if 2 < 3\nthen 5 else 0", "ℕ", "≠") == \
        f"({SLOT} : ℕ) ≠ ((if 2 < 3\n      then 5 else 0) : ℕ)"
    assert header_digest(f"abbrev {SLOT} : ℕ := (5)\n\n") == header_digest(f"abbrev {SLOT} : ℕ := (5)") == (
        "fc692fc2d4b7e45d4cc1141de8435067e1f46ad7b964d104f59ca69afb34dfb8")
    closed = "theorem putnam_mock has no open answer slot: there is no produced answer to check"
    with pytest.raises(ValueError, match=f"^{closed}$"):
        check_file(AT_LEAST_THREE.with_answer("5"), "5", "=")
    with pytest.raises(ValueError, match=f"^{closed}$"):
        judged_header(AT_LEAST_THREE.with_answer("5"), "5")
    with pytest.raises(ValueError, match=r"^theorem putnam_mock records no reference answer to check against$"):
        check_file(mock(f"3 ≤ {SLOT}", "ℕ", None), "5", "=")


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
    # a reference naming the slot would be the answer itself: `SOL = SOL` holds whatever the answer
    (mock(f"3 ≤ {SLOT}", "ℕ", f"{SLOT} + 0"), "100",
     f"the reference is not checked: it names the answer slot {SLOT} (it would be the answer)"),
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
    judged = asyncio.run(judge_answer(NoLean(), theorem, answer, GUARD,  # type: ignore[arg-type]
                                      compiled_under=theorem.header or ""))
    assert (judged.verdict, judged.answer) == (AnswerCheck.UNDECIDED, answer)
    assert judged.reason.startswith(reason)


def test_no_reference_is_its_own_verdict_never_equal_and_asks_no_lean() -> None:
    judged = asyncio.run(judge_answer(NoLean(), mock(f"3 ≤ {SLOT}", "ℕ", None), "5", GUARD,  # type: ignore[arg-type]
                                      compiled_under=""))
    assert judged == AnswerJudgement(AnswerCheck.NO_REFERENCE, "5", None,
                                     f"the benchmark records no reference answer for {SLOT}")
    assert not judged.equal
    with pytest.raises(ValueError, match=r"^theorem putnam_mock has no open answer slot: there is no produced answer "
                       r"to check$"):
        asyncio.run(judge_answer(NoLean(), AT_LEAST_THREE.with_answer("5"), "5", GUARD,  # type: ignore[arg-type]
                                 compiled_under=""))


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
        (ONE_PLUS_ONE, SLOT),  # the answer naming its own slot: the slot's own value, which does not elaborate
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


def test_on_the_strict_double_the_check_compiles_the_proofs_header_through_the_soundness_path(tmp_path: Path) -> None:
    log = tmp_path / "log"
    pi = mock(f"π < {SLOT}", "ℝ", "4", header="open Real\n")
    judged = judge_all(double_argv("--pantograph-version", "0.3.4", "--log", str(log)), [
        (HALF, "5 / 2"),
        (pi, "π + 1"),  # `π` needs `open Real`, which the header keeps
    ])
    assert [j.verdict for j in judged] == [AnswerCheck.EQUAL, AnswerCheck.EQUAL]
    sent = [json.loads(line.split(" ", 1)[1])["file"] for line in log.read_text(encoding="utf-8").splitlines()
            if line.startswith("frontend.process ")]
    # each side is the check file, then `#print axioms` and the kernel recheck: the compile every proof takes
    assert [file.split("\n\n#print axioms")[0] + "\n" for file in sent] == [
        check_file(HALF, "5 / 2", "="), check_file(pi, "π + 1", "=")]
    assert all(f"#print axioms {CHECK_NAME}\n" in file for file in sent)
    # the header compiled is the one a proof giving that answer compiles under, byte for byte, and so recorded
    proof = assemble_proof(pi.with_answer("π + 1"), ["norm_num"])
    assert proof is not None and assembled_header(proof, pi, ["norm_num"]) == judged_header(pi, "π + 1")
    assert sent[1].startswith(f"{assembled_header(proof, pi, ['norm_num'])}\n\ntheorem {CHECK_NAME} : ({SLOT} : ℝ)")
    assert judged[1].header_sha256 == judged[1].compiled_sha256 == header_digest(judged_header(pi, "π + 1"))


def test_a_header_the_proof_did_not_compile_under_is_undecided_before_lean() -> None:
    compiled = judged_header(AT_LEAST_THREE, "5")  # the proof compiled with 5; the check is asked about 100
    judged = asyncio.run(judge_answer(NoLean(), AT_LEAST_THREE, "100", GUARD,  # type: ignore[arg-type]
                                      compiled_under=compiled))
    wanted = header_digest(judged_header(AT_LEAST_THREE, "100"))
    assert (judged.verdict, judged.header_sha256, judged.compiled_sha256) == (
        AnswerCheck.UNDECIDED, wanted, header_digest(compiled))
    assert judged.reason == (f"the header judged (sha256 {wanted}) is not the header the proof compiled under "
                             f"(sha256 {header_digest(compiled)})")
    assert not judged.equal and judged.answered


# 100 in the slot's own declaration (`decl_name%` is the slot), 5 in any other: a value that reads the reference only
# where it does not count
NAMED = f"if decl_name% == `{SLOT} then 100 else 5"
# a `by` block whose next line, 39 columns in, is a new tactic under the slot's layout (its first tactic stands at
# column 41 after `abbrev putnam_mock_solution : ℕ := (by `) and would be a function argument one statement further
BY_BLOCK = "by exact 100\n" + " " * 39 + "rfl"


def test_on_minilean_the_check_judges_the_constant_the_proof_compiled_not_the_values_text() -> None:
    argv = [sys.executable, "-m", "minilean", "--pantograph-version", "0.3.4"]

    async def proof_compiles() -> bool:
        async with LeanWorker(argv, tactic_timeout_s=10, watchdog_grace_s=1, ready_timeout_s=20) as lean:
            filled = AT_LEAST_THREE.with_answer(NAMED)
            proof = assemble_proof(filled, ["decide"])
            assert proof is not None
            verdict = await check_proof_text(lean, AT_LEAST_THREE.name, proof, index_header=AT_LEAST_THREE.header,
                                             header=filled.header)
            return verdict.verified

    assert asyncio.run(proof_compiles())  # `decide` proves `3 ≤ SOL` with it: the proof counts
    judged = judge_all(argv, [(AT_LEAST_THREE, NAMED), (AT_LEAST_THREE, "100"), (AT_LEAST_THREE, "5")])
    assert [(j.verdict, j.reason) for j in judged] == [
        (AnswerCheck.DIFFERENT, "Lean proved the answer different from the reference"),
        (AnswerCheck.DIFFERENT, "Lean proved the answer different from the reference"),
        (AnswerCheck.EQUAL, "Lean proved the answer equal to the reference")]
    assert [j.header_sha256 for j in judged] == [j.compiled_sha256 for j in judged] == [
        header_digest(judged_header(AT_LEAST_THREE, answer)) for answer in (NAMED, "100", "5")]


@pytest.mark.parametrize("value", [NAMED, BY_BLOCK])
def test_the_values_text_is_compiled_once_where_the_proof_compiled_it(value: str) -> None:
    """The check file holds the value only inside the slot, laid out as `fill_slot` lays it out for the proof's
    compile; the check's statement names the constant."""
    header = (AT_LEAST_THREE.with_answer(value).header or "").rstrip()
    for relation in ("=", "≠"):
        file = check_file(AT_LEAST_THREE, value, relation)
        assert file.startswith(f"{header}\n\ntheorem {CHECK_NAME} : ({SLOT} : ℕ) {relation} ((5) : ℕ) := by\n")
        assert value.split("\n", maxsplit=1)[0] not in file[len(header):]  # nowhere after the slot
    assert judged_header(AT_LEAST_THREE, BY_BLOCK) == (
        f"abbrev {SLOT} : ℕ := (by exact 100\n" + " " * 41 + "rfl)\n-- 5")


class HalfAnswered:
    """A LeanEnv whose first compile comes back with no units (Lean's reply, no proof: its shape is not the file's)
    and whose second times out (no reply of Lean's)."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def compile(self, text: str, timeout_s: float | None = None) -> CompileResult:
        self.sent.append(text)
        if len(self.sent) == 1:
            return CompileResult(())
        raise LeanTimeoutError("the compile took longer than 10 s")


def test_a_side_lean_gave_no_verdict_on_leaves_the_check_unanswered() -> None:
    """`undecided` with `answered` false when either side came back without Lean's verdict (the reward does not cache
    it, eval shows it): the `=` side answered, the `≠` side timed out."""
    lean = HalfAnswered()
    judged = asyncio.run(judge_answer(lean, AT_LEAST_THREE, "5", GUARD,  # type: ignore[arg-type]
                                      compiled_under=judged_header(AT_LEAST_THREE, "5")))
    assert [text.split("\n\n#print axioms")[0] + "\n" for text in lean.sent] == [
        check_file(AT_LEAST_THREE, "5", "="), check_file(AT_LEAST_THREE, "5", "≠")]
    assert (judged.verdict, judged.answered) == (AnswerCheck.UNDECIDED, False)
    assert judged.reason == ("neither side proved: `=`: the compile reply has no compilation units: nothing was shown "
                             "to be declared; `≠`: verification failed: the compile took longer than 10 s")

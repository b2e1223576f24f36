"""`eval.judging.judge_passes` read directly, with the comparator double (tests/doubles/comparator_double.py): in
every pass, the proof comparator refuses is un-counted (no proof, tactics, depth nor budget, the reason in its
detail) and every other result stays as it was; each theorem's record is its first refusal (an alarm) or the
kernels that accepted it, and a theorem with nothing judged keeps the bare record. With burnqed as the judge, or the
judge deferred, nothing changes but the records. Exact values where the mutation run (scripts/mutation.py,
docs/results.md) found no test reading them."""

from __future__ import annotations

import asyncio

import pytest

from burnqed.errors import ConfigError
from burnqed.lean.comparator import ComparatorSettings, JudgeCase, JudgeRecord
from burnqed.records.results import FailureReason, TheoremResult
from burnqed.records.theorem import Theorem
from burnqed.search.judge import PENDING_WHY, JudgeSettings, check_definition_holes, judge_case, judge_passes
from tests.eval.test_judge import COMPARATOR, SLOT, THEOREMS
from tests.eval.test_judge_step import PROOFS, _proof

HONEST, FALSE, PUTNAM = THEOREMS


def result(theorem: Theorem, proved: bool = True) -> TheoremResult:
    return TheoremResult(name=theorem.name, proved=proved, proof=_proof(theorem) if proved else None,
                         tactics=[PROOFS[theorem.name]] if proved else [], budget_at_proof=1 if proved else None,
                         depth=1 if proved else None, answer="5" if theorem.answer else None)


def test_a_refused_proof_is_uncounted_in_its_pass_and_each_theorem_keeps_its_record(
        caplog: pytest.LogCaptureFixture) -> None:
    comparator = ComparatorSettings(tuple(COMPARATOR))
    attempts = [[result(HONEST), result(FALSE), result(PUTNAM)],
                [result(HONEST), result(FALSE, proved=False), result(PUTNAM, proved=False)]]
    judged, records = asyncio.run(judge_passes(THEOREMS, attempts, JudgeSettings(comparator=comparator,
                                                                                  toolchain="v")))
    refused = result(FALSE).model_copy(update={
        "proved": False, "failure_reason": FailureReason.JUDGE_REFUSED, "proof": None, "tactics": [], "depth": None,
        "budget_at_proof": None, "detail": "comparator refused it (run): Child exited with 1"})
    assert judged == [[attempts[0][0], refused, attempts[0][2]], attempts[1]]
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [
        "soundness alarm: false_claim: burnqed counted the proof, comparator refused it (Child exited with 1)"]
    base = comparator.record("v")
    assert records == {
        HONEST.name: base.model_copy(update={"accepted": True, "kernels": ["lean"]}),
        FALSE.name: base.model_copy(update={"accepted": False, "category": "run", "reason": "Child exited with 1",
                                            "alarm": True}),
        PUTNAM.name: base.model_copy(update={"accepted": True, "kernels": ["lean"]})}
    unjudged, bare = asyncio.run(judge_passes(THEOREMS[:1], [[result(HONEST, proved=False)]],
                                              JudgeSettings(comparator=comparator)))
    assert (unjudged, bare) == ([[result(HONEST, proved=False)]], {HONEST.name: comparator.record(None)})
    # a proof of a theorem not among those given is not judged (nor counted out); an unproved result never is
    elsewhere = [[result(HONEST, proved=False), result(FALSE)]]
    assert asyncio.run(judge_passes(THEOREMS[:1], elsewhere, JudgeSettings(comparator=comparator))) == (
        elsewhere, {HONEST.name: comparator.record(None)})


def test_with_burnqed_as_the_judge_or_the_judge_deferred_the_passes_are_unchanged() -> None:
    attempts = [[result(HONEST), result(FALSE)]]
    for settings, record in ((JudgeSettings(why="lean.judge = 'burnqed'"),
                              JudgeRecord(judge="burnqed", why="lean.judge = 'burnqed'")),
                             (JudgeSettings(why=PENDING_WHY, deferred=True),
                              JudgeRecord(judge="pending", why=PENDING_WHY))):
        judged, records = asyncio.run(judge_passes(THEOREMS[:2], attempts, settings))
        assert (judged, records) == (attempts, {HONEST.name: record, FALSE.name: record})


def test_the_answer_slots_refused_to_a_comparator_without_holes_are_the_open_ones_six_named_as_five_and_one() -> None:
    settings = JudgeSettings(comparator=ComparatorSettings(command=("comparator", "{config}")))
    slots = [PUTNAM.model_copy(update={"name": f"p{i}"}) for i in range(6)]
    assert PUTNAM.answer is not None
    filled = PUTNAM.model_copy(update={"name": "given", "answer": PUTNAM.answer.model_copy(update={"value": "5"})})
    check_definition_holes([filled], settings, "v4.29.1")  # a given answer is no open slot: nothing to refuse
    for count, named in ((6, "p0, p1, p2, p3, p4 and 1 more"), (5, "p0, p1, p2, p3, p4")):
        with pytest.raises(ConfigError) as caught:
            check_definition_holes([filled, *slots[:count]], settings, "v4.29.1")
        assert str(caught.value).startswith(f"lean.judge = 'comparator': {count} theorem(s) carry an answer slot "
                                            f"({named}), and the comparator for Lean v4.29.1 ")


def test_a_case_splits_the_assembled_proof_at_its_header_and_judges_any_other_file_alone() -> None:
    assert judge_case(PUTNAM, result(PUTNAM)) == JudgeCase(
        "putnam_judged", f"abbrev {SLOT} : Nat := sorry", f"theorem putnam_judged : 3 ≤ {SLOT}",
        f"abbrev {SLOT} : Nat := (5)", f"theorem putnam_judged : 3 ≤ {SLOT} := by\n  decide\n", SLOT)
    other = result(HONEST).model_copy(update={"proof": "theorem other : True := trivial"})
    assert judge_case(HONEST, other) == JudgeCase(
        "honest_sum", "", "theorem honest_sum : (2 : Nat) + 2 = 4", "theorem other : True := trivial", "", None)
    assert PUTNAM.answer is not None
    given = PUTNAM.model_copy(update={"answer": PUTNAM.answer.model_copy(update={"value": "5"})})
    assert judge_case(given, result(PUTNAM)) == JudgeCase(
        "putnam_judged", f"abbrev {SLOT} : Nat := sorry", f"theorem putnam_judged : 3 ≤ {SLOT}",
        f"abbrev {SLOT} : Nat := (5)", f"theorem putnam_judged : 3 ≤ {SLOT} := by\n  decide\n", None)
    assert judge_case(HONEST, result(HONEST).model_copy(update={"proof": None})) is None
    assert judge_case(Theorem(name="no_statement"), result(HONEST)) is None

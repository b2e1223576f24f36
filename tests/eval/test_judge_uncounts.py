"""A refused proof un-counts its theorem (`eval.judge_step.uncounted`) at the budgets it counted at and no other,
read with exact values where the mutation run (scripts/mutation.py, docs/results.md) found no test reading it: a
proof found at the larger budget, a refused name that counted nothing, an empty refusal."""

from __future__ import annotations

from burnqed.eval.judge_step import counted_proof, pending, uncounted
from burnqed.eval.pass_at import build_eval_result
from burnqed.eval.result import EvalResult
from burnqed.lean.comparator import JudgeRecord
from burnqed.records.results import FailureReason, TheoremResult
from burnqed.search.answer_check import AnswerCheck, AnswerJudgement
from burnqed.search.judge import PENDING_WHY
from tests.eval.test_judge import THEOREMS
from tests.eval.test_judge_step import PROOFS, _proof

AT = {"honest_sum": 1, "false_claim": None, "putnam_judged": 2}  # the budget each proof counted at (None: unproved)


def result() -> EvalResult:
    """honest_sum proved at budget 1, false_claim not proved, putnam_judged (its answer equal to the reference) at 2."""
    attempts = [[TheoremResult(name=t.name, proved=AT[t.name] is not None,
                               proof=_proof(t) if AT[t.name] is not None else None,
                               tactics=[PROOFS[t.name]] if AT[t.name] is not None else [],
                               budget_at_proof=AT[t.name], nodes_expanded=1, answer="5" if t.answer else None)
                 for t in THEOREMS]]
    check = AnswerJudgement(AnswerCheck.EQUAL, "5", "5", "Lean proved the answer equal to the reference")
    return build_eval_result(
        attempts, [1, 2], benchmark="judge-made-up", model="m", ebm=None, lean_backend="pantograph", iteration=0,
        config_digest="c", git_commit=None, theorem_names=[t.name for t in THEOREMS],
        theorem_sources={t.name: t.source for t in THEOREMS},
        theorem_tasks={t.name: "answer produced" if t.answer else "no answer" for t in THEOREMS},
        answer_checks={("putnam_judged", "5"): check})


def test_a_proof_refused_at_the_larger_budget_is_uncounted_there_only_and_an_unproved_name_changes_nothing() -> None:
    before = result()
    assert [(r.budget, r.solved) for r in before.budgets] == [(1, 1), (2, 2)]
    after = uncounted(before, {"putnam_judged": "refused: x", "false_claim": "refused: y"})
    assert (after.cumulative_solved, after.solved_names) == (1, ["honest_sum"])
    assert [(r.budget, r.solved, r.rate) for r in after.budgets] == [(1, 1, 1 / 3), (2, 1, 1 / 3)]
    assert [(r.group, r.budget, r.solved, r.rate) for r in after.groups] == [
        ("made-up", 1, 1, 0.5), ("made-up", 2, 1, 0.5), ("putnam", 1, 0, 0.0), ("putnam", 2, 0, 0.0)]
    assert [(r.group, r.budget, r.solved) for r in after.tasks] == [
        ("no answer", 1, 1), ("no answer", 2, 1), ("answer produced", 1, 0), ("answer produced", 2, 0),
        ("answer produced (reference answer)", 1, 0), ("answer produced (reference answer)", 2, 0)]
    rows = {row.name: row for row in after.per_theorem}
    assert rows["false_claim"] == next(r for r in before.per_theorem if r.name == "false_claim")
    putnam = rows["putnam_judged"]
    assert (putnam.proved, putnam.budget_at_proof, putnam.attempts_proved, putnam.revision_at_proof,
            putnam.answer_check, putnam.answer_check_detail, putnam.answer_check_header, putnam.proof_header,
            putnam.failure_reason, putnam.detail) == (
        False, None, 0, None, None, None, None, None, FailureReason.JUDGE_REFUSED, "refused: x")
    assert before.failure_reasons == {"unknown": 1}
    assert list(after.failure_reasons.items()) == [("judge_refused", 1), ("unknown", 1)]  # most first, then by name
    assert uncounted(before, {}) == before


def test_a_row_counts_a_proof_to_judge_only_when_proved_with_its_proof_and_budget() -> None:
    rows = {row.name: row for row in result().per_theorem}
    by_name = {t.name: t for t in THEOREMS}
    assert counted_proof(rows["false_claim"], by_name["false_claim"]) is None
    honest = rows["honest_sum"]
    found = counted_proof(honest, by_name["honest_sum"])
    assert found == TheoremResult(name="honest_sum", proved=True, proof=honest.proof, tactics=["decide"],
                                  budget_at_proof=1)
    for update in ({"proved": False}, {"proof": None}, {"budget_at_proof": None}):
        assert counted_proof(honest.model_copy(update=update), by_name["honest_sum"]) is None


def test_pending_names_the_rows_whose_judge_is_pending_and_no_other() -> None:
    before = result()
    marked = [row.model_copy(update={"judge": judge}) for row, judge in zip(before.per_theorem, (
        JudgeRecord(judge="pending", why=PENDING_WHY), None, JudgeRecord(judge="burnqed")), strict=True)]
    assert pending(before.model_copy(update={"per_theorem": marked})) == [marked[0].name]

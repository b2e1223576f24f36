"""The judge step (`burnqed judge`; docs/cluster.md, "The judge step"): a finished eval's counted proofs judged by
Lean's comparator after the eval, in a process (a pod, in the workflows) of its own. The eval ran with
`--defer-judge`: it searched and counted as burnqed counts and recorded each theorem's judge as `pending`; this step
judges the proof eval.json records for each proved theorem (`per_theorem[].proof`) and writes the result again with
comparator's verdict: a proof it refuses is a soundness alarm, and its theorem is not counted at any budget.

    result = load_eval_result(unjudged, store=store)
    judged = await judge_result(result, index.theorems, settings)     # settings: search.judge.JudgeSettings
    write_eval_result(judged, output, store=store)

What this step knows is what eval.json keeps: one proof a theorem (the winning attempt's). Where `burnqed eval` judges
in process, every attempt's proof is judged and a theorem another pass proved with an accepted proof still counts;
here a refused proof un-counts its theorem (stricter, never looser). The cost figures (nodes, time, tokens, Lean
calls at each budget) stay those the search measured: it spent them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TypeVar

from burnqed.eval.pass_at import PRODUCED, WITH_REFERENCE
from burnqed.eval.result import BudgetRow, EvalResult, GroupRow, PerTheorem
from burnqed.lean.comparator import JudgeRecord
from burnqed.lean.start import START_FORM
from burnqed.records.results import FailureReason, TheoremResult
from burnqed.records.theorem import Theorem
from burnqed.search.judge import REFUSED, JudgeSettings, judge_passes
from burnqed.text.prompt import BLOCK_INDENT
from leankit.text import append_code


def pending(result: EvalResult) -> list[str]:
    """The theorems of `result` whose judge is still `pending` (an eval run with --defer-judge)."""
    return [row.name for row in result.per_theorem if row.judge is not None and row.judge.judge == "pending"]


def counted_proof(row: PerTheorem, theorem: Theorem) -> TheoremResult | None:
    """`row`'s recorded proof as the search result comparator judges (`search.judge.judge_case` reads its header
    from its tactics: the text after the theorem's declaration); None when `row` counts no proof."""
    declaration = theorem.declaration(START_FORM)
    if not row.proved or row.proof is None or row.budget_at_proof is None:
        return None
    return TheoremResult(name=row.name, proved=True, proof=row.proof, tactics=_tactics(row.proof, declaration),
                         budget_at_proof=row.budget_at_proof)


def _tactics(proof: str, declaration: str | None) -> list[str]:
    """The proof's body after `declaration := by` as one tactic block (`join_tactics` of it gives the body back),
    where the proof is the header, a blank line, the declaration and the body; [] otherwise (then comparator judges
    the file alone in its batch)."""
    if declaration is None:
        return []
    opening = f"{append_code(declaration, ':= by')}\n"
    at = 0 if proof.startswith(opening) else proof.find(f"\n\n{opening}") + 2
    if at < 2 and not proof.startswith(opening):
        return []
    lines = proof[at + len(opening):].rstrip("\n").split("\n")
    if not all(line.startswith(BLOCK_INDENT) or not line for line in lines):
        return []
    return ["\n".join(line.removeprefix(BLOCK_INDENT) for line in lines)]


async def judge_result(result: EvalResult, theorems: Sequence[Theorem], settings: JudgeSettings) -> EvalResult:
    """`result` with each proof it counts judged (`settings.comparator`; with burnqed as the judge, each theorem's
    record says so and nothing else changes): the theorems whose proof comparator refused un-counted (`uncounted`),
    every theorem's judge record. `ValueError` naming them when a counted theorem is not among `theorems` (another
    benchmark than the eval's)."""
    by_name = {t.name: t for t in theorems}
    missing = [row.name for row in result.per_theorem if row.proved and row.name not in by_name]
    if missing:
        raise ValueError(f"{', '.join(missing[:5])}{' …' if len(missing) > 5 else ''}: proved in the eval and not "
                         "among the theorems given (--theorems, --split): judge the eval against its own benchmark")
    asked = [found for row in result.per_theorem if row.name in by_name
             if (found := counted_proof(row, by_name[row.name])) is not None]
    known = [by_name[row.name] for row in result.per_theorem if row.name in by_name]
    judged, records = await judge_passes(known, [asked], settings)
    refused = {r.name: r.detail or REFUSED for r in judged[0] if not r.proved}
    rows = [row.model_copy(update={"judge": records.get(row.name) or _unjudged(settings)})
            for row in result.per_theorem]
    return uncounted(result.model_copy(update={"per_theorem": rows}), refused)


def _unjudged(settings: JudgeSettings) -> JudgeRecord:
    """The record of a theorem with no proof to judge: its judge, nothing judged."""
    if settings.comparator is None:
        return JudgeRecord(judge="burnqed", why=settings.why)
    return settings.comparator.record(settings.toolchain)


def uncounted(result: EvalResult, refused: dict[str, str]) -> EvalResult:
    """`result` with the theorems `refused` names (name → why) counted as not proved at any budget: their rows
    (failure `judge_refused`, the detail why, no proof nor answer), the budget, group and task rows, the solved names
    and the failure counts."""
    if not refused:
        return result
    before = {row.name: row for row in result.per_theorem if row.name in refused and row.proved}
    rows = [row if row.name not in before else _refused_row(row, refused[row.name]) for row in result.per_theorem]
    solved = [name for name in result.solved_names if name not in before]
    reasons = dict(result.failure_reasons)
    reasons[FailureReason.JUDGE_REFUSED.value] = reasons.get(FailureReason.JUDGE_REFUSED.value, 0) + len(before)
    return result.model_copy(update={
        "per_theorem": rows, "solved_names": solved, "cumulative_solved": len(solved),
        "budgets": [_less(row, _at(before.values(), row.budget), result.total) for row in result.budgets],
        "groups": [_less(row, _at([t for t in before.values() if (t.source or "none") == row.group], row.budget),
                         row.total) for row in result.groups],
        "tasks": [_less(row, _task_at(before.values(), row), row.total) for row in result.tasks],
        "failure_reasons": dict(sorted(reasons.items(), key=lambda item: (-item[1], item[0])))})


def _refused_row(row: PerTheorem, why: str) -> PerTheorem:
    return row.model_copy(update={
        "proved": False, "budget_at_proof": None, "failure_reason": FailureReason.JUDGE_REFUSED, "detail": why,
        "proof": None, "attempts_proved": 0, "revision_at_proof": None, "answer_check": None,
        "answer": None if row.task == PRODUCED else row.answer,
        "answer_check_detail": None, "answer_check_header": None, "proof_header": None, "reference_at_proof": None})


def _at(rows: Collection[PerTheorem], budget: int) -> int:
    """How many of `rows` were proved within `budget`."""
    return sum(1 for row in rows if row.budget_at_proof is not None and row.budget_at_proof <= budget)


def _task_at(rows: Collection[PerTheorem], group: GroupRow) -> int:
    """How many of `rows` the task row `group` counted at its budget."""
    if group.group == WITH_REFERENCE:
        return sum(1 for row in rows if row.task == PRODUCED and row.reference_at_proof is not None
                   and row.reference_at_proof <= group.budget)
    return _at([row for row in rows if row.task == group.group], group.budget)


R = TypeVar("R", BudgetRow, GroupRow)


def _less(row: R, fewer: int, total: int) -> R:
    solved = row.solved - fewer
    return row.model_copy(update={"solved": solved, "rate": solved / total if total else 0.0})


__all__ = ["counted_proof", "judge_result", "pending", "uncounted"]

"""Pass@N scoring: an `EvalResult` (`eval.result`) from the search's per-attempt `TheoremResult`s. An eval runs
`pass_n` independent search attempts per theorem with the largest budget; this module only scores what they found
(no search, no Lean, no files).

    result = build_eval_result(attempts, [10, 30, 60], benchmark="minif2f-test", model="tiny", ebm=None,
                               lean_backend="replay", iteration=0, config_digest=config_digest(cfg),
                               git_commit=git_commit(), theorem_names=names)

The N attempts are read as a race run side by side: the first proof ends it. What solved, the winner, nodes, time
and tokens at a budget mean: docs/search.md, "How pass@N is scored".
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

from burnqed import __version__
from burnqed.eval.result import UNKNOWN_REASON, BudgetRow, EvalResult, GroupRow, PerTheorem, budget_unit
from burnqed.eval.settings import EvalSettings
from burnqed.records.enums import EXPANSION_MODES, SearchMode
from burnqed.records.replies import first_line
from burnqed.records.results import FailureReason, TheoremResult, UsageCurve
from burnqed.records.theorem import AnswerTask, Theorem
from burnqed.search.answer_check import AnswerJudgement


def _proves_within(attempt: TheoremResult, budget: int) -> bool:
    return attempt.proved and attempt.budget_at_proof is not None and attempt.budget_at_proof <= budget


def _attempt_nodes(attempt: TheoremResult, budget: int) -> int:
    if _proves_within(attempt, budget):
        assert attempt.budget_at_proof is not None
        return attempt.budget_at_proof
    return min(budget, attempt.spent())


def _attempt_time(attempt: TheoremResult, budget: int) -> float:
    if _proves_within(attempt, budget) or attempt.spent() <= budget:
        return attempt.time_s
    return attempt.time_s * budget / attempt.spent()


def _attempt_cost(attempt: TheoremResult, budget: int) -> tuple[int, int]:
    """(tokens, Lean requests) of an attempt at `budget`, per the module doc."""
    recorded = next((usage for usage in attempt.usage if usage.budget == budget), None)
    if recorded is not None:
        return recorded.tokens, recorded.lean_calls
    if attempt.curve is not None:
        return attempt.curve.at(budget, (attempt.tokens, attempt.lean_calls))
    spent = attempt.spent()
    if spent <= budget or spent == 0:
        return attempt.tokens, attempt.lean_calls
    return round(attempt.tokens * budget / spent), round(attempt.lean_calls * budget / spent)


def _theorem_curve(attempts: Sequence[TheoremResult], largest: int) -> UsageCurve | None:
    """The attempts' curves summed (an ended attempt adds its totals), up to where the last one ended within
    `largest`; None when an attempt recorded none."""
    curves = [attempt.curve for attempt in attempts]
    if any(curve is None for curve in curves):
        return None
    length = min(largest, max(len(curve.tokens) for curve in curves if curve is not None))
    costs = [[_attempt_cost(attempt, b) for attempt in attempts] for b in range(1, length + 1)]
    return UsageCurve(tokens=[sum(t for t, _ in at) for at in costs],
                      lean_calls=[sum(c for _, c in at) for at in costs])


def _winner(attempts: Sequence[TheoremResult], budget: int) -> TheoremResult | None:
    proving = [(a.budget_at_proof or 0, a.time_s, k, a) for k, a in enumerate(attempts) if _proves_within(a, budget)]
    return min(proving, key=lambda item: item[:3])[3] if proving else None


def _nodes_and_time(attempts: Sequence[TheoremResult], budget: int) -> tuple[TheoremResult | None, int, float]:
    """(winner, nodes_used, time) of one theorem at one budget, per the module doc."""
    winner = _winner(attempts, budget)
    if winner is not None:
        return winner, _attempt_nodes(winner, budget), winner.time_s
    nodes = max(_attempt_nodes(a, budget) for a in attempts)
    time_s = max(_attempt_time(a, budget) for a in attempts)
    return None, nodes, time_s


def _failure_reason(attempts: Sequence[TheoremResult], budget: int) -> FailureReason | None:
    reasons: list[FailureReason] = []
    for attempt in attempts:
        if attempt.proved:  # proved, but only beyond the budget
            reasons.append(FailureReason.MAX_NODES if attempt.mode in EXPANSION_MODES else FailureReason.MAX_PROOFS)
        elif attempt.failure_reason is not None:
            reasons.append(attempt.failure_reason)
    if not reasons:
        return None
    counts = Counter(reasons)
    best = max(counts.values())
    return next(reason for reason in reasons if counts[reason] == best)  # ties: the earlier pass


def _detail(attempts: Sequence[TheoremResult], reason: FailureReason) -> str:
    """What happened in the first attempt that failed for `reason` (an attempt proving beyond the budget counts as
    the budget reached)."""
    for attempt in attempts:
        if attempt.proved and reason in (FailureReason.MAX_NODES, FailureReason.MAX_PROOFS):
            return f"proved only after {attempt.budget_at_proof} {budget_unit(attempt.mode)}, beyond the largest budget"
        if attempt.failure_reason is reason:
            return failure_detail(attempt)
    return reason.value


def failure_detail(attempt: TheoremResult) -> str:
    """One sentence on why `attempt` ended without a proof (its failure reason, made concrete)."""
    reason = attempt.failure_reason
    extra = first_line(attempt.detail) if attempt.detail else ""
    if reason is FailureReason.START_ERROR:
        return f"Lean could not start the goal: {extra or 'no message'}"
    if reason is FailureReason.EXHAUSTED:
        if attempt.edges == 0 and attempt.proofs_sampled == 0:
            return "the policy proposed nothing: no tactic or proof to try"
        tried = f"{attempt.edges} tactics" if attempt.edges else f"{attempt.proofs_sampled} proofs"
        return f"nothing left to try: {tried} tried, none led to a proof" + (f" ({extra})" if extra else "")
    if reason is FailureReason.MAX_NODES:
        return f"budget reached: {attempt.nodes_expanded} expansions, {attempt.edges} tactics tried"
    if reason is FailureReason.MAX_PROOFS:
        return f"budget reached: {attempt.proofs_sampled} proofs sampled, none verified"
    if reason is FailureReason.MAX_ROUNDS:
        return f"round limit reached: {attempt.nodes_expanded} rounds (search.max_rounds)"
    if reason is FailureReason.TIMEOUT:
        return f"time limit reached after {attempt.time_s:.1f} s (search.timeout_s), {attempt.edges} tactics tried"
    if reason is FailureReason.LEAN_ERROR:
        return f"the Lean worker failed: {extra or 'no message'}"
    if reason is None:
        return "no proof and no reason recorded"
    return extra or reason.value


NO_ANSWER = "no answer"
PRODUCED = "answer produced"
# The produced task counted a second time: proved, and the proof's answer Lean showed equal to the reference
# (`search.answer_check`, verdict `equal`).
WITH_REFERENCE = "answer produced (reference answer)"
AnswerChecks = Mapping[tuple[str, str], AnswerJudgement]  # (theorem name, answer as given) → its judgement


def answer_task(theorem: Theorem) -> str:
    """The answer task of a benchmark theorem, as `PerTheorem.task` and the per-task rows name it."""
    if theorem.answer is None:
        return NO_ANSWER
    return PRODUCED if theorem.answer.task is AnswerTask.PRODUCED else "answer given"


def _judgement(attempt: TheoremResult, checks: AnswerChecks) -> AnswerJudgement | None:
    """The check of the answer `attempt` proved its theorem with; None when it gave none or it was not checked."""
    return None if attempt.answer is None else checks.get((attempt.name, attempt.answer))


def _reference_at_proof(attempts: Sequence[TheoremResult], budget: int, checks: AnswerChecks) -> int | None:
    """The smallest budget_at_proof, within `budget`, of an attempt whose answer the check found `equal`."""
    found = [a.budget_at_proof for a in attempts if _proves_within(a, budget) and a.budget_at_proof is not None
             and (judged := _judgement(a, checks)) is not None and judged.equal]
    return min(found) if found else None


def _reference_rows(table: Mapping[str, Sequence[TheoremResult]], rungs: Sequence[int], produced: Sequence[str],
                    checks: AnswerChecks) -> list[GroupRow]:
    """pass@N of the produced task counted with the reference answer (`WITH_REFERENCE`): a theorem counts at a budget
    when an attempt proved it within that budget with an answer the check found `equal`."""
    rows = []
    for budget in rungs:
        solved = sum(1 for name in produced if _reference_at_proof(table[name], budget, checks) is not None)
        rows.append(GroupRow(group=WITH_REFERENCE, budget=budget, solved=solved, total=len(produced),
                             rate=solved / len(produced)))
    return rows


def _group_rows(table: Mapping[str, Sequence[TheoremResult]], rungs: Sequence[int],
                group_of: Mapping[str, str]) -> list[GroupRow]:
    """pass@N of each group of theorems (`group_of`: name → group, first seen first) at every budget."""
    members: dict[str, list[str]] = {}
    for name in table:
        members.setdefault(group_of[name], []).append(name)
    rows = []
    for group, names in members.items():
        for budget in rungs:
            solved = sum(1 for name in names if _winner(table[name], budget) is not None)
            rows.append(GroupRow(group=group, budget=budget, solved=solved, total=len(names),
                                 rate=solved / len(names)))
    return rows


def _checked(name: str, winner: TheoremResult | None, attempts: Sequence[TheoremResult], largest: int,
             tasks: Mapping[str, str] | None, checks: AnswerChecks | None) -> dict[str, Any]:
    """The answer check's fields of an answer-produced theorem's `PerTheorem` (none for another theorem, or without
    checks): the winning answer's verdict and why, the reference beside it, where an `equal` answer first proved it."""
    if checks is None or tasks is None or tasks.get(name) != PRODUCED:
        return {}
    judged = None if winner is None else _judgement(winner, checks)
    if judged is None:
        return {"reference_at_proof": _reference_at_proof(attempts, largest, checks)}
    return {"answer_check": judged.verdict.value, "answer_check_detail": judged.reason, "reference": judged.reference,
            "answer_check_header": judged.header_sha256, "proof_header": judged.compiled_sha256,
            "reference_at_proof": _reference_at_proof(attempts, largest, checks)}


def validate_budgets(budgets: Sequence[int]) -> list[int]:
    """`budgets` as a list; ValueError unless non-empty, positive, unique and ascending."""
    values = list(budgets)
    if not values:
        raise ValueError("budgets is empty: give at least one expansion budget")
    if any(b <= 0 for b in values):
        raise ValueError(f"budgets must be positive, got {values}")
    if any(later <= earlier for earlier, later in pairwise(values)):
        raise ValueError(f"budgets must be unique and ascending, got {values}")
    return values


def _by_theorem(
    attempts: Sequence[Sequence[TheoremResult]], theorem_names: Sequence[str]
) -> dict[str, list[TheoremResult]]:
    """name → its attempts in pass order; ValueError unless each name appears exactly once per pass."""
    if not attempts:
        raise ValueError("no attempts: pass_n must be at least 1")
    names = list(theorem_names)
    duplicates = sorted(name for name, count in Counter(names).items() if count > 1)
    if duplicates:
        raise ValueError(f"theorem_names has duplicates: {duplicates}")
    table: dict[str, list[TheoremResult]] = {name: [] for name in names}
    for k, results in enumerate(attempts):
        seen: Counter[str] = Counter(r.name for r in results)
        unknown = sorted(set(seen) - set(table))
        missing = [name for name in names if name not in seen]
        repeated = sorted(name for name, count in seen.items() if count > 1)
        if unknown or missing or repeated:
            problems = [
                f"{label} {values[:5]}{' …' if len(values) > 5 else ''}"
                for label, values in (("missing", missing), ("repeated", repeated), ("not in the benchmark", unknown))
                if values
            ]
            raise ValueError(f"pass {k}: each theorem must appear exactly once: " + "; ".join(problems))
        for result in results:
            if result.proved and result.budget_at_proof is None:
                raise ValueError(f"pass {k}: {result.name} is proved but has no budget_at_proof")
            table[result.name].append(result)
    return table


def _budget_rows(table: Mapping[str, Sequence[TheoremResult]], rungs: Sequence[int]) -> list[BudgetRow]:
    """One row per budget: solved, mean and median cost, tokens and Lean calls of every attempt."""
    total = len(table)
    rows: list[BudgetRow] = []
    for budget in rungs:
        scored = [_nodes_and_time(tries, budget) for tries in table.values()]
        solved = sum(1 for winner, _, _ in scored if winner is not None)
        nodes = [float(n) for _, n, _ in scored]
        times = [t for _, _, t in scored]
        costs = [_attempt_cost(attempt, budget) for tries in table.values() for attempt in tries]
        tokens = sum(t for t, _ in costs)
        rows.append(
            BudgetRow(
                budget=budget,
                solved=solved,
                total=total,
                rate=solved / total if total else 0.0,
                avg_nodes=statistics.fmean(nodes) if nodes else 0.0,
                avg_time_s=statistics.fmean(times) if times else 0.0,
                median_time_s=statistics.median(times) if times else 0.0,
                tokens=tokens,
                lean_calls=sum(c for _, c in costs),
                avg_tokens=tokens / total if total else 0.0,
            )
        )
    return rows


def _theorem_rows(
    table: Mapping[str, Sequence[TheoremResult]],
    largest: int,
    theorem_sources: Mapping[str, str | None] | None,
    theorem_tasks: Mapping[str, str] | None,
    answer_checks: AnswerChecks | None,
) -> tuple[list[PerTheorem], Counter[str]]:
    """Each theorem's row at the largest budget, and the unsolved ones counted by failure reason."""
    per_theorem: list[PerTheorem] = []
    reasons: Counter[str] = Counter()
    for name, tries in table.items():
        winner, nodes_used, time_s = _nodes_and_time(tries, largest)
        reason = None if winner is not None else _failure_reason(tries, largest)
        if winner is None:
            reasons[reason.value if reason is not None else UNKNOWN_REASON] += 1
        per_theorem.append(
            PerTheorem(
                name=name,
                proved=winner is not None,
                budget_at_proof=winner.budget_at_proof if winner is not None else None,
                nodes_used=nodes_used,
                time_s=time_s,
                failure_reason=reason,
                proof=winner.proof if winner is not None else None,
                attempts=len(tries),
                attempts_proved=sum(1 for a in tries if _proves_within(a, largest)),
                tokens=sum(_attempt_cost(a, largest)[0] for a in tries),
                lean_calls=sum(_attempt_cost(a, largest)[1] for a in tries),
                detail=None if reason is None else _detail(tries, reason),
                edges=sum(a.edges for a in tries),
                policy_s=sum(a.policy_s for a in tries),
                lean_s=sum(a.lean_s for a in tries),
                value_s=sum(a.value_s for a in tries),
                source=None if theorem_sources is None else theorem_sources.get(name) or "none",
                repaired=sum(a.repaired for a in tries),
                revisions=sum(a.revisions for a in tries),
                revision_at_proof=winner.revision_at_proof if winner is not None else None,
                curve=_theorem_curve(tries, largest),
                task=None if theorem_tasks is None else theorem_tasks.get(name, NO_ANSWER),
                answer=winner.answer if winner is not None else None,
                lemma_graph=(winner or tries[0]).lemma_graph if tries else None,
                **_checked(name, winner, tries, largest, theorem_tasks, answer_checks),
            )
        )
    return per_theorem, reasons


def _task_rows(table: Mapping[str, Sequence[TheoremResult]], rungs: Sequence[int],
               theorem_tasks: Mapping[str, str] | None, answer_checks: AnswerChecks | None) -> list[GroupRow]:
    """The per-task rows when some theorem has an answer slot, with the `WITH_REFERENCE` rows after `answer
    produced` when answers were checked; none otherwise."""
    tasks: list[GroupRow] = []
    if theorem_tasks is not None and any(task != NO_ANSWER for task in theorem_tasks.values()):
        tasks = _group_rows(table, rungs, {name: theorem_tasks.get(name, NO_ANSWER) for name in table})
        produced = [name for name in table if theorem_tasks.get(name) == PRODUCED]
        if answer_checks is not None and produced:
            at = next(k for k, row in enumerate(tasks) if row.group == PRODUCED) + len(rungs)
            tasks[at:at] = _reference_rows(table, rungs, produced, answer_checks)
    return tasks


def build_eval_result(
    attempts: Sequence[Sequence[TheoremResult]],
    budgets: Sequence[int],
    *,
    benchmark: str,
    model: str,
    ebm: str | None,
    lean_backend: str,
    iteration: int,
    config_digest: str,
    git_commit: str | None,
    theorem_names: Sequence[str],
    timestamp: datetime | None = None,
    theorem_sources: Mapping[str, str | None] | None = None,
    seed: int | None = None,
    settings: EvalSettings | None = None,
    mode: SearchMode = SearchMode.STEP,
    wall_s: float | None = None,
    resumed: int = 0,
    pantograph_version: str | None = None,
    theorem_tasks: Mapping[str, str] | None = None,
    answer_checks: AnswerChecks | None = None,
) -> EvalResult:
    """Score `attempts` (attempts[k] = the k-th pass's results, one per theorem) at every budget.

    Raises ValueError when a pass misses, repeats or adds a theorem, when a proved result has no
    budget_at_proof, or when budgets are not positive, unique and ascending. `timestamp` defaults to now.
    `theorem_sources` (name → source) gives the per-group rows and each theorem's `source`; `theorem_tasks` (name →
    answer task, `answer_task`) each theorem's `task` and, when some theorem has an answer slot, the per-task rows;
    `answer_checks` ((name, answer) → `search.answer_check.AnswerJudgement`, for the answers proofs of answer-produced
    theorems gave) each such theorem's `answer_check`, `reference` and `reference_at_proof`, and the per-task rows
    `WITH_REFERENCE` beside `answer produced`; `seed`, `settings` and `pantograph_version` (what the Lean workers
    spoke) are recorded, with this burnqed's version.
    """
    rungs = validate_budgets(budgets)
    table = _by_theorem(attempts, theorem_names)
    total = len(table)
    rows = _budget_rows(table, rungs)
    per_theorem, reasons = _theorem_rows(table, rungs[-1], theorem_sources, theorem_tasks, answer_checks)
    solved_names = sorted(t.name for t in per_theorem if t.proved)
    groups = [] if theorem_sources is None else _group_rows(
        table, rungs, {name: theorem_sources.get(name) or "none" for name in table})
    tasks = _task_rows(table, rungs, theorem_tasks, answer_checks)
    return EvalResult(
        iteration=iteration,
        timestamp=timestamp if timestamp is not None else datetime.now(UTC),
        git_commit=git_commit,
        config_digest=config_digest,
        model=model,
        ebm=ebm,
        lean_backend=lean_backend,
        benchmark=benchmark,
        total=total,
        pass_n=len(attempts),
        mode=mode,
        budget_unit=budget_unit(mode),
        budgets=rows,
        cumulative_solved=len(solved_names),
        solved_names=solved_names,
        per_theorem=per_theorem,
        failure_reasons=dict(sorted(reasons.items(), key=lambda item: (-item[1], item[0]))),
        groups=groups,
        tasks=tasks,
        seed=seed,
        settings=settings,
        wall_s=wall_s,
        resumed=resumed,
        burnqed_version=__version__,
        pantograph_version=pantograph_version,
    )


"""Compare eval results (iteration 0 vs 1, LLM-only vs LLM+EBM, step vs whole vs hybrid vs sketch) at the budgets they
share and at equal cost: equal generated tokens, and equal Lean calls, per theorem (docs/search.md, "`burnqed
compare`").

    comparison = compare_results([("iter0", load_eval_result(a, store=store)),
                                 ("iter1", load_eval_result(b, store=store))])
    print(render_comparison(comparison))
    write_comparison(comparison, "comparison.json", store=store)     # burnqed compare --output comparison.json

The first result is the baseline and the last the candidate: the Δ is last minus first, at each common budget with
its 95 % interval paired over the theorems (Newcombe's hybrid score interval). Only like is compared with
like: results on other theorem sets, pass_n or Lean backends are shown side by side with no Δ and a warning
(`unlike`); results with neither a budget in common nor tokens cannot be compared (InputError).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from burnqed import storage
from burnqed.errors import InputError
from burnqed.eval.judging import judges_of
from burnqed.eval.rendering import to_text
from burnqed.eval.result import BudgetRow, EvalResult, paired_interval

MAX_NAMES = 20  # names listed per section of the rendering before "… and N more"
WITHIN = 0.05  # an entry whose cost is within this fraction below the level is read exactly there
Measure = Literal["tokens", "lean_calls"]


class CompareEntry(BaseModel):
    """One result at one budget."""

    model_config = ConfigDict(extra="forbid")

    label: str = Field(description="The result's label (e.g. its file name or iteration).")
    solved: int = Field(ge=0, description="Theorems solved at this budget.")
    total: int = Field(ge=0, description="Theorems in that result's benchmark.")
    rate: float = Field(ge=0.0, le=1.0, description="solved / total, a fraction.")


class TaskComparison(BaseModel):
    """Every result's pass@N of one answer task at one budget (`EvalResult.tasks`: 'answer produced' and, counted
    again, 'answer produced (reference answer)', 'answer given', 'no answer'), and the change from the first to the
    last."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(description="The answer task (`EvalResult.tasks`' group).")
    entries: list[CompareEntry] = Field(description="One entry per result, in the order given.")
    delta_solved: int | None = Field(description="Last minus first (None: not comparable).")
    delta_rate_points: float | None = Field(description="Last minus first, in percentage points (None: not "
                                            "comparable).")


class BudgetComparison(BaseModel):
    """Every result at one budget they all have, and the change from the first to the last."""

    model_config = ConfigDict(extra="forbid")

    budget: int = Field(gt=0, description="Expansion budget.")
    entries: list[CompareEntry] = Field(description="One entry per result, in the order given.")
    delta_solved: int | None = Field(
        description="Solved by the last result minus solved by the first (None: the results are not comparable).")
    delta_rate_points: float | None = Field(
        description="Rate of the last minus rate of the first, in percentage points (None: not comparable).")
    tasks: list[TaskComparison] = Field(
        default_factory=list, description="Per answer task, each task every result counts at this budget, in the "
        "first result's order (empty when a result has no per-task rows).")
    delta_interval_points: tuple[float, float] | None = Field(
        default=None, description="The 95 % interval of delta_rate_points, in percentage points: paired over the "
        "theorems both results ran (Newcombe's hybrid score interval, eval.result.paired_interval); None when not "
        "comparable, or in a comparison written before intervals.")


class CostEntry(BaseModel):
    """One result read at one cost level (the module docstring's rule)."""

    model_config = ConfigDict(extra="forbid")

    label: str = Field(description="The result's label.")
    total: int = Field(ge=0, description="Theorems in that result's benchmark.")
    measured: bool = Field(description="False: not measured at this level (its first budget already costs more, or "
                           "it spent less in all); the fields below are then None.")
    budget: int | None = Field(default=None, description="Its largest budget whose cost per theorem is at most the "
                               "level.")
    cost: float | None = Field(default=None, description="Its own cost per theorem at `budget`.")
    solved: int | None = Field(default=None, description="Theorems it solved within `budget`.")
    rate: float | None = Field(default=None, ge=0.0, le=1.0, description="Its solve rate at the level: at `budget` "
                               "when exact, interpolated between `budget` and `next_budget` when not.")
    interpolated: bool = Field(default=False, description="`cost` is below 95 % of the level: `rate` is interpolated "
                               "linearly between `budget` and `next_budget` at the level.")
    next_budget: int | None = Field(default=None, description="Interpolated: the budget after `budget` (its cost is "
                                    "above the level).")
    next_cost: float | None = Field(default=None, description="Interpolated: its own cost per theorem at next_budget.")


class CostLevel(BaseModel):
    """Every result at one level of cost per theorem (generated tokens, or Lean calls)."""

    model_config = ConfigDict(extra="forbid")

    level: float = Field(ge=0.0, description="The level: tokens (or Lean calls) per theorem.")
    entries: list[CostEntry] = Field(description="One entry per result, in the order given.")
    delta_rate_points: float | None = Field(
        description="Rate of the last minus rate of the first, in percentage points (None: not comparable, or the "
        "first or the last result not measured at this level).")
    interpolated: bool = Field(default=False, description="Some entry is interpolated (so is a Δ that reads it).")


class Comparison(BaseModel):
    """Results side by side at their common budgets and at equal tokens."""

    model_config = ConfigDict(extra="forbid")

    labels: list[str] = Field(description="The results' labels, first = baseline, last = candidate.")
    modes: list[str] = Field(default_factory=list, description="Each result's search mode (`+repair` when its "
                             "search revised failed proofs: EvalResult.search_label).")
    budgets: list[BudgetComparison] = Field(description="One block per common budget, ascending (same units only).")
    common_budget: int | None = Field(
        gt=0, description="The largest budget every result has (None when units differ or none is shared)."
    )
    token_levels: list[CostLevel] = Field(
        default_factory=list, description="The results at equal generated tokens per theorem, ascending."
    )
    call_levels: list[CostLevel] = Field(
        default_factory=list, description="The results at equal Lean calls per theorem, ascending."
    )
    compared_at: str = Field(default="", description="Where newly_solved and lost were taken (a budget or a level; "
                             "empty when no level reads the first and the last result exactly).")
    newly_solved: list[str] = Field(description="Solved by the last result but not the first (see compared_at).")
    lost: list[str] = Field(description="Solved by the first result but not the last (see compared_at).")
    warnings: list[str] = Field(description="What differs between the results; the first reasons `unlike` gives "
                                "make them not comparable.")
    comparable: bool = Field(default=True, description="False when the results measure different things (`unlike`): "
                             "then there is no Δ and no newly solved or lost theorem.")


def _differs(values: Sequence[object]) -> bool:
    return len(set(values)) > 1


def _listing(results: Sequence[tuple[str, EvalResult]], values: Sequence[object]) -> str:
    return ", ".join(f"{label}: {value}" for (label, _), value in zip(results, values, strict=True))


def unlike(results: Sequence[tuple[str, EvalResult]], *, budgets: bool = False) -> list[str]:
    """Why `results` (label, result) are not the same measurement, so that no gain may be read between them; empty
    when they are: different theorem sets (compared by name), pass_n or Lean backends, and with `budgets` also
    different search modes, largest budgets or per-theorem time limits (where both record one)."""
    reasons = []
    name_sets = [frozenset(t.name for t in r.per_theorem) for _, r in results]
    if _differs(name_sets):
        common = len(frozenset.intersection(*name_sets))
        reasons.append(f"different theorem sets ({_listing(results, [len(s) for s in name_sets])} theorems; "
                       f"{common} in common)")
    for what, values in (("pass_n", [r.pass_n for _, r in results]),
                         ("Lean backends", [r.lean_backend for _, r in results])):
        if _differs(values):
            reasons.append(f"different {what} ({_listing(results, values)})")
    if not budgets:
        return reasons
    modes = [r.mode.value for _, r in results]
    if _differs(modes):
        reasons.append(f"different search modes ({_listing(results, modes)})")
    largest = [f"{r.budgets[-1].budget} {r.budget_unit}" for _, r in results]
    if _differs(largest):
        reasons.append(f"different largest budgets ({_listing(results, largest)})")
    limits = [r.settings.timeout_s for _, r in results if r.settings is not None]
    if len(limits) == len(results) and _differs(limits):
        reasons.append(f"different time limits per theorem ({_listing(results, [f'{t:g} s' for t in limits])})")
    return reasons


def _warnings(results: Sequence[tuple[str, EvalResult]]) -> list[str]:
    warnings = []
    benchmarks = [r.benchmark for _, r in results]
    if _differs(benchmarks):
        warnings.append(f"different benchmarks ({_listing(results, benchmarks)})")
    reasons = unlike(results)
    if reasons:
        warnings += [*reasons, "not compared: no Δ and no newly solved or lost theorems across different theorem "
                     "sets, pass_n or Lean backends"]
    units = [r.budget_unit for _, r in results]
    if _differs(units):
        warnings.append(f"budgets are in different units ({_listing(results, units)}): compared at equal tokens "
                        "only")
        return warnings
    all_budgets = [{row.budget for row in r.budgets} for _, r in results]
    common = set.intersection(*all_budgets)
    partial = sorted(set.union(*all_budgets) - common)
    if partial:
        warnings.append(f"budgets {partial} are not in every result and are left out")
    return warnings


def _with_tokens(results: Sequence[tuple[str, EvalResult]]) -> bool:
    """Every result records tokens, and some budget cost any (zero everywhere says nothing)."""
    return all(r.has_tokens for _, r in results) and any(row.tokens for _, r in results for row in r.budgets)


def _rung_cost(row: BudgetRow, measure: Measure) -> float | None:
    if measure == "tokens":
        return row.avg_tokens
    return None if row.lean_calls is None or not row.total else row.lean_calls / row.total


@dataclass(frozen=True, slots=True)
class CostLadder:
    """The budgets one result can be read at, ascending, with its cost per theorem and its solves there."""

    budgets: list[int]
    costs: list[float]
    solved: list[int]
    total: int


def cost_ladder(result: EvalResult, measure: Measure) -> CostLadder | None:
    """Every budget up to the largest with per-theorem curves (from one past where the last attempt ended the cost
    holds: only the largest budget stands for those), else the rungs; None when a rung does not record `measure`."""
    if not result.total or any(_rung_cost(row, measure) is None for row in result.budgets):
        return None
    if not result.has_curves:
        return CostLadder([row.budget for row in result.budgets], [_rung_cost(row, measure) or 0.0
                                                                    for row in result.budgets],
                          [row.solved for row in result.budgets], result.total)
    costs = result.mean_curve(measure)
    budgets = list(range(1, len(costs) + 1))
    largest = result.budgets[-1].budget
    budgets[-1] = max(budgets[-1], largest)  # past where every attempt ended: the same cost and solves up to it
    found = sorted(t.budget_at_proof for t in result.per_theorem if t.proved and t.budget_at_proof is not None)
    return CostLadder(budgets, costs, [bisect.bisect_right(found, b) for b in budgets], result.total)


def read_at_level(label: str, ladder: CostLadder, level: float) -> CostEntry:
    """`ladder`'s result at `level` per theorem (the module docstring's rule): exact within `WITHIN` of the level,
    else interpolated towards the next budget, else not measured."""
    slack = 1e-9 * max(1.0, level)
    i = bisect.bisect_right(ladder.costs, level + slack) - 1
    if i < 0:
        return CostEntry(label=label, total=ladder.total, measured=False)
    budget, cost, solved = ladder.budgets[i], ladder.costs[i], ladder.solved[i]
    exact = CostEntry(label=label, total=ladder.total, measured=True, budget=budget, cost=cost, solved=solved,
                      rate=solved / ladder.total)
    if cost >= (1 - WITHIN) * level - slack:
        return exact
    if i + 1 == len(ladder.budgets):
        return CostEntry(label=label, total=ladder.total, measured=False)
    after, above = ladder.solved[i + 1], ladder.costs[i + 1]
    weight = (level - cost) / (above - cost)
    rate = (solved + weight * (after - solved)) / ladder.total
    return exact.model_copy(update={"rate": rate, "interpolated": True, "next_budget": ladder.budgets[i + 1],
                                    "next_cost": above})


def _cost_levels(results: Sequence[tuple[str, EvalResult]], measure: Measure, comparable: bool) -> list[CostLevel]:
    ladders = [cost_ladder(result, measure) for _, result in results]
    if any(ladder is None for ladder in ladders):
        return []
    rungs = [[_rung_cost(row, measure) or 0.0 for row in result.budgets] for _, result in results]
    ceiling = min(max(costs) for costs in rungs)
    levels = sorted({cost for costs in rungs for cost in costs if cost <= ceiling + 1e-9 * max(1.0, ceiling)})
    blocks = []
    for level in levels:
        entries = [read_at_level(label, ladder, level)
                   for (label, _), ladder in zip(results, ladders, strict=True) if ladder is not None]
        first, last = entries[0], entries[-1]
        delta = 100 * (last.rate - first.rate) if (
            comparable and first.rate is not None and last.rate is not None) else None
        blocks.append(CostLevel(level=level, entries=entries, delta_rate_points=delta,
                                interpolated=any(e.interpolated for e in entries)))
    return blocks


def _task_comparisons(results: Sequence[tuple[str, EvalResult]], budget: int,
                      comparable: bool) -> list[TaskComparison]:
    """Each answer task every result counts at `budget`, every result's solves of it, and the Δ."""
    by_result = [{row.group: row for row in result.tasks if row.budget == budget} for _, result in results]
    shared = [task for task in by_result[0] if all(task in rows for rows in by_result[1:])]
    comparisons = []
    for task in shared:
        entries = [CompareEntry(label=label, solved=rows[task].solved, total=rows[task].total, rate=rows[task].rate)
                   for (label, _), rows in zip(results, by_result, strict=True)]
        first, last = entries[0], entries[-1]
        comparisons.append(TaskComparison(
            task=task, entries=entries, delta_solved=last.solved - first.solved if comparable else None,
            delta_rate_points=100 * (last.rate - first.rate) if comparable else None))
    return comparisons


def _paired_points(first: EvalResult, last: EvalResult, budget: int) -> tuple[float, float]:
    """The 95 % interval of last − first in solve rate at `budget`, in points, theorem by theorem: the two results
    ran the same theorems (`unlike` is empty), so each theorem is a pair (`paired_interval`)."""
    before, after = first.solved_at(budget), last.solved_at(budget)
    both, new, lost = len(before & after), len(after - before), len(before - after)
    low, high = paired_interval(both, new, lost, max(0, first.total - both - new - lost))
    return 100 * low, 100 * high


def compare_results(results: Sequence[tuple[str, EvalResult]]) -> Comparison:
    """Compare `results` (label, result) at every budget they all have and at equal cost; see the module doc.

    Raises InputError with fewer than two results, repeated labels, or neither a budget in common nor tokens.
    """
    if len(results) < 2:
        raise InputError(f"comparing needs at least two eval results, got {len(results)}")
    labels = [label for label, _ in results]
    if len(set(labels)) != len(labels):
        raise InputError(f"eval result labels must be distinct, got {labels}")
    judges = [(label, judges_of(result)) for label, result in results]
    if len(set().union(*(found for _, found in judges))) > 1:
        listing = "; ".join(f"{label}: {', '.join(sorted(found))}" for label, found in judges)
        raise InputError(f"the eval results were counted by different judges ({listing}): compare results counted "
                         "by one judge (lean.judge, docs/search.md)")
    same_units = len({r.budget_unit for _, r in results}) == 1
    common = sorted(set.intersection(*({row.budget for row in r.budgets} for _, r in results))) if same_units else []
    tokens = _with_tokens(results)
    comparable = not unlike(results)
    if not common and not tokens:
        listing = "; ".join(f"{label}: {[row.budget for row in r.budgets]} {r.budget_unit}" for label, r in results)
        raise InputError(f"the eval results have no budget in common ({listing}) and do not all record tokens; "
                         "re-run them with a shared budget (or with this burnqed, which records tokens)")
    blocks = []
    for budget in common:
        entries = []
        for label, result in results:
            row = result.budget_row(budget)
            assert row is not None  # budget is common to all
            entries.append(CompareEntry(label=label, solved=row.solved, total=row.total, rate=row.rate))
        first, last = entries[0], entries[-1]
        blocks.append(BudgetComparison(
            budget=budget, entries=entries, delta_solved=last.solved - first.solved if comparable else None,
            delta_rate_points=100 * (last.rate - first.rate) if comparable else None,
            tasks=_task_comparisons(results, budget, comparable),
            delta_interval_points=_paired_points(results[0][1], results[-1][1], budget) if comparable else None,
        ))
    levels = _cost_levels(results, "tokens", comparable) if tokens else []
    calls = _cost_levels(results, "lean_calls", comparable) if tokens else []
    warnings = _warnings(results)
    if common:
        compared_at = f"budget {common[-1]}"
        before = results[0][1].solved_at(common[-1])
        after = results[-1][1].solved_at(common[-1])
    else:
        exact = [level for level in levels if all(
            e.measured and not e.interpolated for e in (level.entries[0], level.entries[-1]))]
        compared_at = f"≤ {cost_text(exact[-1].level)} tokens per theorem" if exact else ""
        before, after = (results[k][1].solved_at(exact[-1].entries[k].budget or 0) if exact else set()
                         for k in (0, -1))
        if not exact and comparable:
            warnings.append(f"no token level reads {labels[0]} and {labels[-1]} both exactly: no newly solved or "
                            "lost theorems listed")
    if not comparable:
        before = after = set()
    return Comparison(
        labels=labels,
        modes=[r.search_label for _, r in results],
        budgets=blocks,
        common_budget=common[-1] if common else None,
        token_levels=levels,
        call_levels=calls,
        compared_at=compared_at if comparable else "",
        newly_solved=sorted(after - before),
        lost=sorted(before - after),
        warnings=warnings,
        comparable=comparable,
    )


def _names(title: str, names: Sequence[str]) -> list[str]:
    lines = [f"{title} ({len(names)}):"]
    lines += [f"  {name}" for name in names[:MAX_NAMES]]
    if len(names) > MAX_NAMES:
        lines.append(f"  … and {len(names) - MAX_NAMES} more")
    return lines


def cost_text(value: float) -> str:
    """A cost per theorem as the tables show it: whole from 100 on, up to two decimals below (`3.75`, `52.5`, `6`)."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.2f}".rstrip("0").rstrip(".")


def entry_text(entry: CostEntry) -> str:
    """`45.0 % @16 · 1,702`: the rate, the budget read and the result's own cost there; `≈` and both budgets and
    costs when interpolated; `not measured`."""
    if not entry.measured or entry.rate is None or entry.cost is None:
        return "not measured"
    if entry.interpolated and entry.next_cost is not None:
        return (f"≈{100 * entry.rate:.1f} % @{entry.budget}–{entry.next_budget} · "
                f"{cost_text(entry.cost)}–{cost_text(entry.next_cost)}")
    return f"{100 * entry.rate:.1f} % @{entry.budget} · {cost_text(entry.cost)}"


def delta_text(level: CostLevel) -> str:
    """The level's Δ in points (`≈` when it reads an interpolated entry), `–` when it has none."""
    if level.delta_rate_points is None:
        return "–"
    return f"{'≈' if level.interpolated else ''}{level.delta_rate_points:+.1f} pts"


LEGEND = ("@b · c: the largest budget b whose cost per theorem c is at most the level, within 5 % of it;\n"
          "≈ … @b–b' · c–c': none within 5 %, the rate interpolated between b and b' at the level;\n"
          "not measured: its first budget costs more, or it spent less in all (no Δ)")


def _cost_table(comparison: Comparison, levels: Sequence[CostLevel], title: str, unit: str, width: int) -> str:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    table.add_column(unit, justify="right")
    for label, mode in zip(comparison.labels, comparison.modes or [""] * len(comparison.labels), strict=True):
        table.add_column(f"{label} ({mode})" if mode else label, justify="right")
    if comparison.comparable:
        table.add_column("Δ", justify="right")
    for level in levels:
        delta = [delta_text(level)] if comparison.comparable else []
        table.add_row(cost_text(level.level), *(entry_text(e) for e in level.entries), *delta)
    return to_text(table, width)


def _task_line(task: TaskComparison) -> str:
    """`answer produced (reference answer): a 0/2 (0.0 %), b 1/2 (50.0 %), Δ +1 (+50.0 pts)`."""
    shown = ", ".join(f"{e.label} {e.solved}/{e.total} ({100 * e.rate:.1f} %)" for e in task.entries)
    delta = (f", Δ {task.delta_solved:+d} ({task.delta_rate_points:+.1f} pts)"
             if task.delta_solved is not None and task.delta_rate_points is not None else "")
    return f"{task.task}: {shown}{delta}\n"


def delta_row_text(block: BudgetComparison) -> str:
    """A budget's Δ in points with its paired 95 % interval: `+8.5 pts (95 %: +1.4 to +15.5)`."""
    text = f"{block.delta_rate_points:+.1f} pts"
    if block.delta_interval_points is not None:
        low, high = block.delta_interval_points
        text += f" (95 %: {low:+.1f} to {high:+.1f})"
    return text


def render_comparison(comparison: Comparison, width: int = 100) -> str:
    """Plain text: the warnings, one table per common budget (a row per result and a Δ row; then a line per answer
    task, the produced task twice: proved, and proved with the reference answer), the tables at equal
    tokens and at equal Lean calls (when they are recorded) with their legend, then the newly solved and lost theorem
    names (at most MAX_NAMES each)."""
    from rich.table import Table

    out = [f"warning: {warning}\n" for warning in comparison.warnings]
    first, last = comparison.labels[0], comparison.labels[-1]
    for block in comparison.budgets:
        table = Table(title=f"budget {block.budget}", title_justify="left")
        table.add_column("result")
        table.add_column("solved", justify="right")
        table.add_column("rate", justify="right")
        for entry in block.entries:
            table.add_row(entry.label, f"{entry.solved}/{entry.total}", f"{100 * entry.rate:.1f} %")
        if block.delta_solved is not None and block.delta_rate_points is not None:
            table.add_section()
            table.add_row(f"Δ {last} − {first}", f"{block.delta_solved:+d}", delta_row_text(block))
        out.append(to_text(table, width))
        out += [_task_line(task) for task in block.tasks]
    if comparison.token_levels:
        out.append(_cost_table(comparison, comparison.token_levels, "at equal generated tokens per theorem",
                               "tokens/thm", width))
    if comparison.call_levels:
        out.append(_cost_table(comparison, comparison.call_levels, "at equal Lean calls per theorem", "calls/thm",
                               width))
    if comparison.token_levels or comparison.call_levels:
        out.append(f"{LEGEND}\n")
    if not comparison.comparable:
        return "".join(out)
    if not comparison.compared_at:
        return "".join(out)
    lines = [f"at {comparison.compared_at}, {last} vs {first}:"]
    lines += _names("newly solved", comparison.newly_solved)
    lines += _names("lost", comparison.lost)
    out.append("\n".join(lines) + "\n")
    return "".join(out)


def write_comparison(comparison: Comparison, uri: str, *, store: storage.Store) -> None:
    """Write `comparison` as indented JSON (a path or URI), atomically: what `render_comparison` prints."""
    store.write_bytes(uri, (comparison.model_dump_json(indent=2) + "\n").encode())

"""Compare eval results (e.g. iteration 0 vs 1, or LLM-only vs LLM+EBM) at the budgets they share.

    comparison = compare_results([("iter0", load_eval_result(a)), ("iter1", load_eval_result(b))])
    print(render_comparison(comparison))

The first result is the baseline and the last the candidate: the Δ row is last minus first, "newly
solved" are theorems the last solves and the first does not at the largest common budget, "lost" the
reverse. Results on different benchmarks, theorem sets, pass_n or Lean backends are still compared,
with a warning saying so; results with no budget in common cannot be compared (InputError).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from burnqed.errors import InputError
from burnqed.eval.results import EvalResult, to_text

MAX_NAMES = 20  # names listed per section of the rendering before "… and N more"


class CompareEntry(BaseModel):
    """One result at one budget."""

    model_config = ConfigDict(extra="forbid")

    label: str = Field(description="The result's label (e.g. its file name or iteration).")
    solved: int = Field(ge=0, description="Theorems solved at this budget.")
    total: int = Field(ge=0, description="Theorems in that result's benchmark.")
    rate: float = Field(ge=0.0, le=1.0, description="solved / total, a fraction.")


class BudgetComparison(BaseModel):
    """Every result at one budget they all have, and the change from the first to the last."""

    model_config = ConfigDict(extra="forbid")

    budget: int = Field(gt=0, description="Expansion budget.")
    entries: list[CompareEntry] = Field(description="One entry per result, in the order given.")
    delta_solved: int = Field(description="Solved by the last result minus solved by the first.")
    delta_rate_points: float = Field(description="Rate of the last minus rate of the first, in percentage points.")


class Comparison(BaseModel):
    """Results side by side at their common budgets."""

    model_config = ConfigDict(extra="forbid")

    labels: list[str] = Field(description="The results' labels, first = baseline, last = candidate.")
    budgets: list[BudgetComparison] = Field(description="One block per common budget, ascending.")
    common_budget: int = Field(gt=0, description="The largest budget every result has; newly_solved/lost use it.")
    newly_solved: list[str] = Field(description="Solved by the last result but not the first at common_budget.")
    lost: list[str] = Field(description="Solved by the first result but not the last at common_budget.")
    warnings: list[str] = Field(description="Why the results may not be comparable (they are compared anyway).")


def _differs(values: Sequence[object]) -> bool:
    return len(set(values)) > 1


def _warnings(results: Sequence[tuple[str, EvalResult]]) -> list[str]:
    warnings = []

    def listing(values: Sequence[object]) -> str:
        return ", ".join(f"{label}: {value}" for (label, _), value in zip(results, values, strict=True))

    benchmarks = [r.benchmark for _, r in results]
    if _differs(benchmarks):
        warnings.append(f"different benchmarks ({listing(benchmarks)})")
    name_sets = [frozenset(t.name for t in r.per_theorem) for _, r in results]
    if _differs(name_sets):
        warnings.append(f"different theorem sets ({listing([len(s) for s in name_sets])} theorems)")
    pass_ns = [r.pass_n for _, r in results]
    if _differs(pass_ns):
        warnings.append(f"different pass_n ({listing(pass_ns)})")
    backends = [r.lean_backend for _, r in results]
    if _differs(backends):
        warnings.append(f"different Lean backends ({listing(backends)})")
    all_budgets = [{row.budget for row in r.budgets} for _, r in results]
    common = set.intersection(*all_budgets)
    partial = sorted(set.union(*all_budgets) - common)
    if partial:
        warnings.append(f"budgets {partial} are not in every result and are left out")
    return warnings


def compare_results(results: Sequence[tuple[str, EvalResult]]) -> Comparison:
    """Compare `results` (label, result) at every budget they all have; see the module doc.

    Raises InputError with fewer than two results, repeated labels or no budget in common.
    """
    if len(results) < 2:
        raise InputError(f"comparing needs at least two eval results, got {len(results)}")
    labels = [label for label, _ in results]
    if len(set(labels)) != len(labels):
        raise InputError(f"eval result labels must be distinct, got {labels}")
    common = sorted(set.intersection(*({row.budget for row in r.budgets} for _, r in results)))
    if not common:
        listing = "; ".join(f"{label}: {[row.budget for row in r.budgets]}" for label, r in results)
        raise InputError(f"the eval results have no budget in common ({listing}); re-run them with a shared budget")
    blocks = []
    for budget in common:
        entries = []
        for label, result in results:
            row = result.budget_row(budget)
            assert row is not None  # budget is common to all
            entries.append(CompareEntry(label=label, solved=row.solved, total=row.total, rate=row.rate))
        first, last = entries[0], entries[-1]
        blocks.append(
            BudgetComparison(
                budget=budget,
                entries=entries,
                delta_solved=last.solved - first.solved,
                delta_rate_points=100 * (last.rate - first.rate),
            )
        )
    largest = common[-1]
    before = results[0][1].solved_at(largest)
    after = results[-1][1].solved_at(largest)
    return Comparison(
        labels=labels,
        budgets=blocks,
        common_budget=largest,
        newly_solved=sorted(after - before),
        lost=sorted(before - after),
        warnings=_warnings(results),
    )


def _names(title: str, names: Sequence[str]) -> list[str]:
    lines = [f"{title} ({len(names)}):"]
    lines += [f"  {name}" for name in names[:MAX_NAMES]]
    if len(names) > MAX_NAMES:
        lines.append(f"  … and {len(names) - MAX_NAMES} more")
    return lines


def render_comparison(comparison: Comparison, width: int = 100) -> str:
    """Plain text: the warnings, one table per common budget (a row per result and a Δ row), then the
    newly solved and lost theorem names (at most MAX_NAMES each)."""
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
        table.add_section()
        table.add_row(
            f"Δ {last} − {first}", f"{block.delta_solved:+d}", f"{block.delta_rate_points:+.1f} pts"
        )
        out.append(to_text(table, width))
    lines = [f"at budget {comparison.common_budget}, {last} vs {first}:"]
    lines += _names("newly solved", comparison.newly_solved)
    lines += _names("lost", comparison.lost)
    out.append("\n".join(lines) + "\n")
    return "".join(out)

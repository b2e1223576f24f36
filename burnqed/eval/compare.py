"""Compare eval results (iteration 0 vs 1, LLM-only vs LLM+EBM, step vs whole vs hybrid) at the budgets they
share and at equal generated tokens.

    comparison = compare_results([("iter0", load_eval_result(a, store=store)),
                                 ("iter1", load_eval_result(b, store=store))])
    print(render_comparison(comparison))

The first result is the baseline and the last the candidate: the Δ is last minus first, "newly solved" are
theorems the last solves and the first does not, "lost" the reverse.

- At common budgets: only when every result counts budgets in the same unit (expansions for step mode, proofs
  sampled for whole and hybrid): 60 expansions and 60 proofs are not the same budget.
- At equal tokens: whenever every result records its tokens (eval results from before token counting do not).
  The levels are the results' own per-theorem token costs at their budgets, up to the smallest result's largest;
  at a level each result shows its largest budget that cost at most that many tokens per theorem (never credited
  with tokens it did not spend).
- newly solved / lost: at the largest common budget when there is one, else at the largest token level.

Only like is compared with like: results on different theorem sets (by name: the same count is not the same
benchmark), with different pass_n or from different Lean backends are shown side by side with no Δ, no newly
solved and no lost theorems, and a warning saying why (`unlike`; `comparable` is False). The report adds the
budgets to that (`unlike(…, budgets=True)`: the same search mode, largest budget and time limit), since it compares
one solve rate with another. Results with neither a budget in common nor tokens cannot be compared (InputError).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from burnqed.errors import InputError
from burnqed.eval.rendering import to_text
from burnqed.eval.schema import BudgetRow, EvalResult

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
    delta_solved: int | None = Field(
        description="Solved by the last result minus solved by the first (None: the results are not comparable).")
    delta_rate_points: float | None = Field(
        description="Rate of the last minus rate of the first, in percentage points (None: not comparable).")


class TokenEntry(BaseModel):
    """One result at one token level: its largest budget that cost at most that many tokens per theorem."""

    model_config = ConfigDict(extra="forbid")

    label: str = Field(description="The result's label.")
    budget: int | None = Field(description="The budget used (None: even its smallest budget cost more).")
    solved: int = Field(ge=0, description="Theorems solved at that budget (0 without one).")
    total: int = Field(ge=0, description="Theorems in that result's benchmark.")
    rate: float = Field(ge=0.0, le=1.0, description="solved / total at that budget.")
    avg_tokens: float | None = Field(description="Tokens per theorem that budget cost.")


class TokenComparison(BaseModel):
    """Every result at one level of generated tokens per theorem."""

    model_config = ConfigDict(extra="forbid")

    tokens: float = Field(ge=0.0, description="The level: generated tokens per theorem.")
    entries: list[TokenEntry] = Field(description="One entry per result, in the order given.")
    delta_rate_points: float | None = Field(
        description="Rate of the last minus rate of the first, in percentage points (None: not comparable).")


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
    token_levels: list[TokenComparison] = Field(
        default_factory=list, description="The results at equal generated tokens per theorem, ascending."
    )
    compared_at: str = Field(default="", description="Where newly_solved and lost were taken (a budget or a level).")
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


def budget_within_tokens(result: EvalResult, level: float) -> BudgetRow | None:
    """The result's largest budget that cost at most `level` tokens per theorem (None: even its smallest cost more)."""
    fitting = [row for row in result.budgets if row.avg_tokens is not None and row.avg_tokens <= level + 1e-9]
    return max(fitting, key=lambda row: row.budget) if fitting else None


def _token_levels(results: Sequence[tuple[str, EvalResult]], comparable: bool) -> list[TokenComparison]:
    ceiling = min(max(row.avg_tokens or 0.0 for row in r.budgets) for _, r in results)
    levels = sorted({row.avg_tokens for _, r in results for row in r.budgets
                     if row.avg_tokens is not None and row.avg_tokens <= ceiling + 1e-9})
    blocks = []
    for level in levels:
        entries = []
        for label, result in results:
            row = budget_within_tokens(result, level)
            entries.append(TokenEntry(
                label=label, budget=row.budget if row else None, solved=row.solved if row else 0, total=result.total,
                rate=row.rate if row else 0.0, avg_tokens=row.avg_tokens if row else None,
            ))
        blocks.append(TokenComparison(tokens=level, entries=entries, delta_rate_points=100 * (
            entries[-1].rate - entries[0].rate) if comparable else None))
    return blocks


def compare_results(results: Sequence[tuple[str, EvalResult]]) -> Comparison:
    """Compare `results` (label, result) at every budget they all have and at equal tokens; see the module doc.

    Raises InputError with fewer than two results, repeated labels, or neither a budget in common nor tokens.
    """
    if len(results) < 2:
        raise InputError(f"comparing needs at least two eval results, got {len(results)}")
    labels = [label for label, _ in results]
    if len(set(labels)) != len(labels):
        raise InputError(f"eval result labels must be distinct, got {labels}")
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
        ))
    levels = _token_levels(results, comparable) if tokens else []
    if common:
        compared_at = f"budget {common[-1]}"
        before = results[0][1].solved_at(common[-1])
        after = results[-1][1].solved_at(common[-1])
    else:
        top = levels[-1]
        compared_at = f"≤ {top.tokens:.0f} tokens per theorem"
        before, after = (_solved_within(results[k][1], top.entries[k].budget) for k in (0, -1))
    if not comparable:
        before = after = set()
    return Comparison(
        labels=labels,
        modes=[r.search_label for _, r in results],
        budgets=blocks,
        common_budget=common[-1] if common else None,
        token_levels=levels,
        compared_at=compared_at if comparable else "",
        newly_solved=sorted(after - before),
        lost=sorted(before - after),
        warnings=_warnings(results),
        comparable=comparable,
    )


def _solved_within(result: EvalResult, budget: int | None) -> set[str]:
    return result.solved_at(budget) if budget is not None else set()


def _names(title: str, names: Sequence[str]) -> list[str]:
    lines = [f"{title} ({len(names)}):"]
    lines += [f"  {name}" for name in names[:MAX_NAMES]]
    if len(names) > MAX_NAMES:
        lines.append(f"  … and {len(names) - MAX_NAMES} more")
    return lines


def _token_table(comparison: Comparison, width: int) -> str:
    from rich.table import Table

    table = Table(title="at equal generated tokens per theorem (largest budget within the level)",
                  title_justify="left")
    table.add_column("tokens/thm", justify="right")
    for label, mode in zip(comparison.labels, comparison.modes or [""] * len(comparison.labels), strict=True):
        table.add_column(f"{label} ({mode})" if mode else label, justify="right")
    if comparison.comparable:
        table.add_column("Δ", justify="right")
    for block in comparison.token_levels:
        cells = [f"{100 * e.rate:.1f} % @{e.budget}" if e.budget is not None else "–" for e in block.entries]
        delta = [] if block.delta_rate_points is None else [f"{block.delta_rate_points:+.1f} pts"]
        table.add_row(f"{block.tokens:.0f}", *cells, *delta)
    return to_text(table, width)


def render_comparison(comparison: Comparison, width: int = 100) -> str:
    """Plain text: the warnings, one table per common budget (a row per result and a Δ row), the table at equal
    tokens (when there are tokens to compare), then the newly solved and lost theorem names (at most MAX_NAMES
    each)."""
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
            table.add_row(f"Δ {last} − {first}", f"{block.delta_solved:+d}", f"{block.delta_rate_points:+.1f} pts")
        out.append(to_text(table, width))
    if comparison.token_levels:
        out.append(_token_table(comparison, width))
    if not comparison.comparable:
        return "".join(out)
    lines = [f"at {comparison.compared_at}, {last} vs {first}:"]
    lines += _names("newly solved", comparison.newly_solved)
    lines += _names("lost", comparison.lost)
    out.append("\n".join(lines) + "\n")
    return "".join(out)

"""Eval results as plain-text tables (rich, rendered without a terminal): `render_eval_table` prints one row per
budget, `to_text` turns any rich renderable into text. The per-theorem table is `eval.per_theorem`.

    print(render_eval_table(load_eval_result(path, store=store)))
"""

from __future__ import annotations

from burnqed.eval.result import BudgetRow, EvalResult


def render_eval_table(result: EvalResult, width: int = 100) -> str:
    """A plain-text table titled with the search (`whole+repair` for a repair arm): one row per budget (solved/total,
    rate and its 95 % Wilson score interval in %, budget used, times, tokens per theorem, Lean requests), then a
    footer line with the cumulative count and the failure reasons, and, when some of the benchmark's declarations
    were not evaluated, how many (`eval.per_theorem.render_not_evaluated` lists them), and the settings line (seed,
    search, `repair_rounds N` for a repair arm, sampling)."""
    from rich.table import Table

    ebm = f" + EBM {result.ebm}" if result.ebm else ""
    table = Table(
        title=f"{result.benchmark} · {result.model}{ebm} · {result.search_label} (budget in {result.budget_unit}) · "
        f"pass@{result.pass_n} · iter {result.iteration} · {result.lean_backend}",
        title_justify="left",
    )
    figures = BudgetRow.figures()  # every per-budget figure the result declares (eval.result.figure)
    used = "avg nodes" if result.budget_unit == "expansions" else "avg proofs"
    for header in ("budget", "solved", "rate", "95% CI", *(used if name == "avg_nodes" else header
                                                          for name, header in figures)):
        table.add_column(header, justify="right")
    for row in result.budgets:
        table.add_row(
            str(row.budget),
            f"{row.solved}/{row.total}",
            f"{100 * row.rate:.1f} %",
            "{:.1f}–{:.1f}".format(*(100 * end for end in row.interval)),
            *(BudgetRow.shown(name, getattr(row, name)) for name, _ in figures),
        )
    reasons = ", ".join(f"{reason} {count}" for reason, count in result.failure_reasons.items()) or "none"
    footer = f"cumulative solved: {result.cumulative_solved}/{result.total}; failures: {reasons}\n"
    if result.not_evaluated:
        footer += (f"of {result.declarations} declarations: {result.total} evaluated (every rate is of these), "
                   f"{len(result.not_evaluated)} not evaluated (listed below)\n")
    largest = result.budgets[-1].budget
    by_group = [row for row in result.groups if row.budget == largest]
    if len(by_group) > 1:
        footer += "by source at budget {}: {}\n".format(
            largest, ", ".join(f"{row.group} {row.solved}/{row.total} ({100 * row.rate:.1f} %)" for row in by_group))
    by_task = [row for row in result.tasks if row.budget == largest]
    if by_task:
        footer += "by answer task at budget {}: {}\n".format(
            largest, ", ".join(f"{row.group} {row.solved}/{row.total} ({100 * row.rate:.1f} %)" for row in by_task))
    if result.settings is not None:
        s = result.settings
        repair = (f"repair_rounds {s.repair_rounds} (Lean's messages cut at {s.repair_message_tokens} tokens) · "
                  if s.repair_rounds else "")
        footer += (f"seed {result.seed if result.seed is not None else 'random'} · {result.search_label} search · "
                   f"{repair}{s.num_candidates} candidates at T {s.temperature:g} · top_p {s.top_p:g}\n")
    return to_text(table, width) + footer


def to_text(renderable: object, width: int) -> str:
    """Render a rich renderable to plain text (no colour, no terminal needed)."""
    import io

    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, force_terminal=False, legacy_windows=False)
    console.print(renderable)
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())

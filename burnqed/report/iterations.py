"""The report's learning curve across iterations (docs/pipeline.md, "Start of an iteration"): each iteration's solve
rate at every budget for the policy alone (LLM only) and with its value model (LLM+EBM), with Wilson 95 % intervals,
and what the next iteration starts from under pipeline.start (`eval.best_so_far.choose_start`: the best policy and
value model so far; the base model and the best value model under "base"; iteration i's models under "previous").

    section = iterations_section(Layout(root), iteration=4, setting="base", store=store)   # None at iteration 0
    lines = iterations_markdown(section)          # a table per arm and budget, and the next start
    plot_iterations(section, folder)              # learning_curve.png: one plot, both arms, intervals

A section of its own (`ReportSection`): reads the published evals of iterations 0..i, nothing else.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from burnqed import storage
from burnqed.config.pipeline import SearchValueModel, StartSetting
from burnqed.errors import InputError
from burnqed.eval.best_so_far import EBM, LLM, StartRecord, choose_start, load_results
from burnqed.eval.result import wilson_interval
from burnqed.layout import Layout
from burnqed.report.section import ReportSection

ARM_NAMES = {LLM: "policy alone (LLM only)", EBM: "with the value model (LLM+EBM)"}


class CurveRow(BaseModel):
    """One arm of one iteration at one budget."""

    iteration: int = Field(ge=0)
    arm: str = Field(description="'llm' (the policy alone) or 'llm+ebm' (with the iteration's value model).")
    budget: int = Field(ge=0)
    solved: int = Field(ge=0)
    total: int = Field(ge=0)
    low: float = Field(description="Lower end of the Wilson 95 % interval of the rate.")
    high: float = Field(description="Upper end of the Wilson 95 % interval of the rate.")


class IterationsSection(BaseModel):
    """The curve of iterations 0..`iteration` and what iteration `iteration`+1 starts from."""

    iteration: int = Field(ge=1)
    rows: list[CurveRow]
    setting: StartSetting = Field(default="best", description="pipeline.start.")
    next_start: StartRecord | None = Field(description="What the next iteration starts from (None: pipeline.start "
                                           "= 'previous', which chooses nothing, or the last iteration has no "
                                           "LLM-only eval to judge it by).")


def iterations_section(at: Layout, iteration: int, *, rl: bool = False,
                       setting: StartSetting = "best", search: SearchValueModel = "helped", store: storage.Store
                       ) -> IterationsSection | None:
    """The curve of iterations 0..`iteration`; None at iteration 0 (no curve yet). `rl`: the policies are the rl
    stage's outputs; `setting` and `search`: pipeline.start and pipeline.search_value_model, what the next start is
    chosen under."""
    if iteration < 1:
        return None
    results = load_results(at, iteration + 1, store)
    rows = []
    for (j, arm), result in sorted(results.items()):
        for budget in result.budgets:
            low, high = wilson_interval(budget.solved, result.total)
            rows.append(CurveRow(iteration=j, arm=arm, budget=budget.budget, solved=budget.solved,
                                 total=result.total, low=low, high=high))
    start: StartRecord | None = None
    if setting != "previous":
        try:
            start = choose_start(results, iteration + 1, at, rl=rl, setting=setting, search=search)
        except InputError:
            start = None
    return IterationsSection(iteration=iteration, rows=rows, setting=setting, next_start=start)


def iterations_markdown(section: IterationsSection | None) -> list[str]:
    """The section's report.md lines: per budget, each arm's rate per iteration; then the next iteration's start."""
    if section is None:
        return []
    iterations = sorted({row.iteration for row in section.rows})
    lines = ["## Learning across iterations", "",
             "Each iteration's solve rate (95 % Wilson interval) for the policy alone and with its value model; "
             "plot: `learning_curve.png`.", "",
             "![learning curve](learning_curve.png)", "",
             "| budget | arm | " + " | ".join(f"iter {j}" for j in iterations) + " |",
             "|---|---|" + "---|" * len(iterations)]
    by_key = {(row.budget, row.arm, row.iteration): row for row in section.rows}
    for budget in sorted({row.budget for row in section.rows}):
        for arm in (LLM, EBM):
            cells = [by_key.get((budget, arm, j)) for j in iterations]
            if not any(cells):
                continue
            shown = ["–" if c is None else f"{c.solved}/{c.total} ({100 * c.low:.0f}–{100 * c.high:.0f} %)"
                     for c in cells]
            lines.append(f"| {budget} | {ARM_NAMES[arm]} | " + " | ".join(shown) + " |")
    lines.append("")
    start = section.next_start
    if section.setting == "previous":
        lines += [f"Iteration {section.iteration + 1} starts from iteration {section.iteration}'s policy and value "
                  "model (pipeline.start = \"previous\").", ""]
    elif start is None:
        lines += [f"Iteration {section.iteration + 1}'s start: not decided (iteration {section.iteration} has no "
                  "LLM-only eval).", ""]
    else:
        lines += [f"Iteration {start.iteration} starts from (pipeline.start = \"{start.setting}\"):", "",
                  *(f"- {reason}" for reason in start.reasons), ""]
    return lines


def plot_iterations(section: IterationsSection | None, folder: Path) -> None:
    """`learning_curve.png`: the rate at the largest budget per iteration, both arms, with their intervals (not
    written without a curve)."""
    if section is None or not section.rows:
        return
    import matplotlib.pyplot as plt

    largest = max(row.budget for row in section.rows)
    fig, ax = plt.subplots(figsize=(7, 4))
    for arm, offset, style in ((LLM, -0.05, "o-"), (EBM, 0.05, "s--")):
        mine = sorted((row for row in section.rows if row.arm == arm and row.budget == largest),
                      key=lambda row: row.iteration)
        if not mine:
            continue
        xs = [row.iteration + offset for row in mine]
        rates = [row.solved / row.total if row.total else 0.0 for row in mine]
        ax.errorbar(xs, rates, yerr=[[r - row.low for r, row in zip(rates, mine, strict=True)],
                                     [row.high - r for r, row in zip(rates, mine, strict=True)]],
                    fmt=style, capsize=3, label=ARM_NAMES[arm])
    ax.set_xlabel("iteration")
    ax.set_ylabel(f"solved at budget {largest}")
    ax.set_xticks(sorted({row.iteration for row in section.rows}))
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    ax.set_title("Learning across iterations (95 % Wilson intervals)", fontsize="medium")
    fig.tight_layout()
    fig.savefig(folder / "learning_curve.png", dpi=100)
    plt.close(fig)


ITERATIONS_SECTION: ReportSection[IterationsSection | None] = ReportSection(
    field="learning_curve", build=lambda got: iterations_section(
        got.at, got.iteration, rl=got.rl, setting=got.pipeline.start, search=got.pipeline.search_value_model,
        store=got.store),
    markdown=iterations_markdown, plots=plot_iterations)

__all__ = ["ITERATIONS_SECTION", "CurveRow", "IterationsSection", "iterations_markdown", "iterations_section",
           "plot_iterations"]

"""The iteration report's plots (matplotlib, Agg backend; `eval.report.write_report` calls them).

    plot_solve_rate(report, folder / "solve_rate.png")      # solve rate (%) against budget, a line per iteration × arm
    plot_trajectories(report, folder / "trajectories.png")  # theorem counts and edge counts, on separate axes

The solve-rate curve is cumulative over each theorem's `budget_at_proof`, so a budget-10 rung is a point on the same
line as the budget-50 one instead of a separate series; the eval's rungs are marked on it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from burnqed.eval.report import Report

ARM_STYLES = {"base": ":", "llm": "-", "llm+ebm": "--"}


def plot_solve_rate(report: Report, path: Path) -> None:
    """Solve rate (0–100 %) against budget: one step line per (iteration, arm), its eval rungs marked."""
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    fig, ax = plt.subplots(figsize=(7, 4.5))
    keys = list(dict.fromkeys((point.iteration, point.arm) for point in report.curves))
    iterations = sorted({iteration for iteration, _ in keys})
    colours = plt.get_cmap("viridis")
    for iteration, arm in keys:
        points = [p for p in report.curves if (p.iteration, p.arm) == (iteration, arm)]
        shade = 0.0 if arm == "base" else 0.25 + 0.6 * (iterations.index(iteration) / max(1, len(iterations) - 1))
        colour = "grey" if arm == "base" else colours(shade)
        label = "base policy" if arm == "base" else f"iteration {iteration}, {arm}"
        ax.step([p.budget for p in points], [100 * p.rate for p in points], where="post",
                linestyle=ARM_STYLES.get(arm, "-"), color=colour, label=label,
                linewidth=3.5 if arm == "llm+ebm" else 1.5, alpha=0.55 if arm == "llm+ebm" else 1.0)
        rungs = [r for r in report.rows if (r.iteration, r.arm) == (iteration, arm)]
        ax.plot([r.budget for r in rungs], [100 * r.rate for r in rungs], "o", color=colour)
    units = {row.unit for row in report.costs}
    ax.set_xlabel(f"budget ({units.pop() if len(units) == 1 else 'expansions or proofs'} per theorem)")
    ax.set_ylabel("solved (%)")
    ax.set_ylim(0, 100)
    # Most proofs come within the first few expansions: a log scale past 1 shows them, and still starts at 0.
    ax.set_xscale("symlog", linthresh=1)
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    ax.set_title("Solve rate against budget (dots: the eval's budgets)")
    if keys:
        ax.legend(fontsize="small", loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_trajectories(report: Report, path: Path) -> None:
    """Per iteration: theorems searched and proved (left), edges and positive edges (right)."""
    import matplotlib.pyplot as plt

    facts = report.iterations
    its = [f.iteration for f in facts]
    fig, (counts, edges) = plt.subplots(1, 2, figsize=(9, 4))
    width = 0.38
    counts.bar([i - width / 2 for i in its], [f.theorems_searched or 0 for f in facts], width=width,
               label="theorem searches")
    counts.bar([i + width / 2 for i in its], [f.theorems_proved or 0 for f in facts], width=width, label="proved")
    counts.set_title("Theorems")
    counts.set_ylabel("theorems")
    edges.bar([i - width / 2 for i in its], [f.edges or 0 for f in facts], width=width, label="edges",
              color="tab:green")
    edges.bar([i + width / 2 for i in its], [f.positives or 0 for f in facts], width=width,
              label="positive edges", color="tab:red")
    edges.set_title("Edges (tactics applied)")
    edges.set_ylabel("edges")
    for ax in (counts, edges):
        ax.set_xlabel("iteration")
        ax.set_xticks(its)
        ax.legend(fontsize="small")
    fig.suptitle("Search trajectories per iteration")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)

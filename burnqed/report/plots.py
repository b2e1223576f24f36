"""The iteration report's plots (matplotlib, Agg backend; `report.build.write_report` calls them). Each is drawn
from the rows of a `report.document.Report`, labels its axes with their units, and gives n and the 95 % Wilson
interval of every solve rate it shows; a plot with nothing to show is not written (report.md links only those that
exist).

    plot_solve_rate(report.curves, report.rows, report.costs, folder / "solve_rate.png")  # every arm
    plot_outcomes_by_depth(report.depth_outcomes, report.iterations, report.learning, report.iteration,
                           folder / "outcomes_by_depth.png")          # where search spends and where it proves
    plot_training(report.training, folder / "training.png")          # SFT and value-model loss against step
    plot_mode_tokens(report.modes, report.iteration, folder / "modes_tokens.png")  # the evals at equal tokens

The solve-rate curve is cumulative over each theorem's `budget_at_proof`, so a budget-10 rung is a point on the same
line as the budget-50 one instead of a separate series; the eval's rungs are marked on it with their intervals.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from burnqed.records.results import EdgeOutcome
from burnqed.report.tables import (
    ArmRow,
    CostRow,
    CurvePoint,
    DepthOutcomes,
    IterationFacts,
    LearningRow,
    ModeRow,
    RateRow,
    TrainingPoint,
)

ARM_STYLES = {"base": ":", "llm": "-", "llm+ebm": "--"}
OUTCOME_COLOURS = {EdgeOutcome.OK.value: "tab:blue", EdgeOutcome.CLOSED.value: "tab:green",
                   EdgeOutcome.ERROR.value: "tab:red", EdgeOutcome.TIMEOUT.value: "tab:orange",
                   EdgeOutcome.REFUSED.value: "tab:purple", EdgeOutcome.PROMPT_REJECTED.value: "tab:gray"}


def _error_bars(rows: Sequence[RateRow]) -> list[list[float]]:
    """matplotlib's `yerr` (below, above) in percentage points: each row's Wilson interval around its rate. At a rate
    of 0 or 1 the interval's end is the rate up to rounding (a difference of about -1e-17), which matplotlib from
    3.10 refuses as a negative error: each is at least 0."""
    return [[max(0.0, 100 * (row.rate - row.interval[0])) for row in rows],
            [max(0.0, 100 * (row.interval[1] - row.rate)) for row in rows]]


def _save(fig: Any, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_solve_rate(curves: list[CurvePoint], rows: list[ArmRow], costs: list[CostRow], path: Path) -> None:
    """Solve rate (0–100 %) against budget: one step line per (iteration, arm), its eval rungs marked with their
    95 % Wilson intervals; the legend gives each eval's n."""
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    if not curves:
        return
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    keys = list(dict.fromkeys((point.iteration, point.arm) for point in curves))
    iterations = sorted({iteration for iteration, _ in keys})
    colours = plt.get_cmap("viridis")
    for k, (iteration, arm) in enumerate(keys):
        points = [p for p in curves if (p.iteration, p.arm) == (iteration, arm)]
        shade = 0.0 if arm == "base" else 0.25 + 0.6 * (iterations.index(iteration) / max(1, len(iterations) - 1))
        colour = "grey" if arm == "base" else colours(shade)
        name = "base policy" if arm == "base" else f"iteration {iteration}, {arm}"
        ax.step([p.budget for p in points], [100 * p.rate for p in points], where="post",
                linestyle=ARM_STYLES.get(arm, "-"), color=colour, label=f"{name} (n = {points[0].total})",
                linewidth=3.5 if arm == "llm+ebm" else 1.5, alpha=0.55 if arm == "llm+ebm" else 1.0)
        rungs: list[RateRow] = [r for r in rows if (r.iteration, r.arm) == (iteration, arm)]
        # Arms side by side at each rung, a few percent apart on the log axis, so their intervals do not overlap.
        dodge = 1 + 0.06 * (k - (len(keys) - 1) / 2)
        ax.errorbar([r.budget * dodge for r in rungs], [100 * r.rate for r in rungs], yerr=_error_bars(rungs),
                    fmt="o", color=colour, capsize=4)
    units = {row.unit for row in costs}
    ax.set_xlabel(f"budget ({units.pop() if len(units) == 1 else 'expansions or proofs'} per theorem)")
    ax.set_ylabel("theorems solved (%)")
    ax.set_ylim(0, 100)
    # Most proofs come within the first few expansions: a log scale past 1 shows them, and still starts at 0.
    ax.set_xscale("symlog", linthresh=1)
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    ax.set_title("Solve rate against budget\n(dots: the eval's budgets, bars: 95% Wilson interval)", fontsize="medium")
    ax.legend(fontsize="small", loc="upper left")
    _save(fig, path)


def plot_outcomes_by_depth(depth_outcomes: list[DepthOutcomes], facts: list[IterationFacts],
                           learning: list[LearningRow], iteration: int, path: Path) -> None:
    """For this iteration's training searches and its main eval, side by side: the edges at each depth stacked by
    outcome (where search spends its tactics), and below them the edges on a verified proof path (where it proves)."""
    import matplotlib.pyplot as plt

    sources = [source for source in ("search", "eval") if any(r.source == source for r in depth_outcomes)]
    if not sources:
        return
    fig, axes = plt.subplots(2, len(sources), figsize=(5.5 * len(sources), 6.5), sharex="col", squeeze=False,
                             gridspec_kw={"height_ratios": [2, 1]})
    for column, source in enumerate(sources):
        rows = [r for r in depth_outcomes if r.source == source]
        spend, prove = axes[0][column], axes[1][column]
        depths = [r.depth for r in rows]
        bottom = [0] * len(rows)
        outcomes = [o for o in OUTCOME_COLOURS if any(r.outcomes.get(o) for r in rows)]
        for outcome in outcomes:
            counts = [r.outcomes.get(outcome, 0) for r in rows]
            spend.bar(depths, counts, bottom=bottom, color=OUTCOME_COLOURS[outcome], label=outcome)
            bottom = [b + c for b, c in zip(bottom, counts, strict=True)]
        edges = sum(bottom)
        what = (f"training searches ({_searched(facts, iteration)} theorem searches)" if source == "search" else
                f"main eval ({_benchmark(learning, iteration)} benchmark theorems)")
        spend.set_title(f"Iteration {iteration}, {what}: {edges} edges", fontsize="medium")
        spend.set_ylabel("edges (tactics applied)")
        spend.legend(fontsize="small", title="outcome", title_fontsize="small")
        spend.grid(axis="y", alpha=0.3)
        prove.bar(depths, [r.on_path for r in rows], color="tab:green")
        prove.set_ylabel("edges on a proof path")
        prove.set_xlabel("depth of the state the tactic leads to")
        prove.set_xticks(depths)
        prove.grid(axis="y", alpha=0.3)
    fig.suptitle("Where search spends (top) and where it proves (bottom)")
    _save(fig, path)


def _searched(facts: list[IterationFacts], iteration: int) -> str:
    fact = next((f for f in facts if f.iteration == iteration), None)
    return "?" if fact is None or fact.theorems_searched is None else str(fact.theorems_searched)


def _benchmark(learning: list[LearningRow], iteration: int) -> str:
    row = next((r for r in learning if r.step == f"iteration {iteration}" and r.group == "all"), None)
    return "?" if row is None else str(row.total)


def plot_training(training: list[TrainingPoint], path: Path) -> None:
    """Loss against optimizer step, a line per iteration: the policy's SFT loss (left) and the value model's
    InfoNCE loss (right, when any iteration trained one); training solid, held out dashed."""
    import matplotlib.pyplot as plt

    if not training:
        return
    models = [model for model in ("policy", "value") if any(p.model == model for p in training)]
    fig, axes = plt.subplots(1, len(models), figsize=(5.5 * len(models), 4), squeeze=False)
    colours = plt.get_cmap("viridis")
    iterations = sorted({p.iteration for p in training})
    for ax, model in zip(axes[0], models, strict=True):
        for iteration in iterations:
            colour = colours(0.15 + 0.7 * iterations.index(iteration) / max(1, len(iterations) - 1))
            for split, style in (("train", "-"), ("held-out", "--")):
                points = sorted((p.step, p.loss) for p in training
                                if (p.model, p.iteration, p.split) == (model, iteration, split))
                if points:
                    ax.plot([s for s, _ in points], [loss for _, loss in points], style, marker=".", color=colour,
                            label=f"iteration {iteration}, {split}")
        ax.set_xlabel("optimizer step")
        if model == "policy":
            ax.set_title("Policy (SFT)", fontsize="medium")
            ax.set_ylabel("loss (nats per supervised token)")
        else:
            ax.set_title("Value model", fontsize="medium")
            ax.set_ylabel("InfoNCE loss (nats)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle("Training curves")
    _save(fig, path)


def plot_mode_tokens(modes: list[ModeRow], iteration: int, path: Path) -> None:
    """This iteration's evals (search modes, arms) side by side: solve rate against generated tokens per theorem, a
    line per eval through its budgets, each point labelled with its budget and drawn with its 95 % Wilson interval.
    Drawn only with two evals or more: one eval's budgets are the solve-rate plot's."""
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    rows = [row for row in modes if row.iteration == iteration and row.avg_tokens is not None]
    labels = list(dict.fromkeys(row.label for row in rows))
    if len(labels) < 2:
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label in labels:
        mine = sorted((row for row in rows if row.label == label), key=lambda row: row.budget)
        tokens = [row.avg_tokens or 0.0 for row in mine]
        line = ax.errorbar(tokens, [100 * row.rate for row in mine], yerr=_error_bars(mine), marker="o", capsize=4,
                           label=f"{label} (n = {mine[0].total})")
        for x, row in zip(tokens, mine, strict=True):
            ax.annotate(f"{row.budget}", (x, 100 * row.rate), textcoords="offset points", xytext=(4, 4),
                        fontsize="x-small", color=line.lines[0].get_color())
    if all(row.avg_tokens for row in rows):
        ax.set_xscale("log")
        plain = ticker.FuncFormatter(lambda value, _: f"{value:g}")
        ax.xaxis.set_major_formatter(plain)
        ax.xaxis.set_minor_formatter(plain)
    ax.set_xlabel("generated tokens per theorem (labels: the budget)")
    ax.set_ylabel("theorems solved (%)")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.set_title(f"Iteration {iteration}: solve rate against generated tokens\n(bars: 95% Wilson interval)",
                 fontsize="medium")
    ax.legend(fontsize="small")
    _save(fig, path)

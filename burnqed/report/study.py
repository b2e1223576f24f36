"""The report's `joint_study` section: the joint study's three configurations (`burnqed.eval.joint_study`, the
stage that measures them) side by side with their evals and the attributions A→B, B→C and A→C.

    study = load_joint_study(root, 1, store=store)      # None without a study
    lines = study_markdown(study); study_plots(study, folder)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from burnqed import storage
from burnqed.ebm.formats import DEPTH_BUCKETS, EmbeddingHealth, depth_bucket
from burnqed.errors import InputError
from burnqed.eval.joint_study import (
    ATTRIBUTIONS,
    CONFIGURATIONS,
    DESCRIPTIONS,
    STUDY_FILE,
    StudyMetrics,
    ValueHealth,
    study_evals,
)
from burnqed.eval.result import EvalResult, SolveRate, rate_text
from burnqed.layout import Layout
from burnqed.report.section import ReportSection


class SolveRow(SolveRate):
    """One budget of one configuration's eval."""

    model_config = ConfigDict(extra="forbid")

    avg_tokens: float | None = Field(description="Generated tokens per theorem at this budget.")


class StudyEntry(BaseModel):
    """One configuration in report.json's `joint_study`."""

    model_config = ConfigDict(extra="forbid")

    description: str
    policy: str
    ebm: str
    eval: str = Field(description="Its eval result (URI).")
    solve: list[SolveRow] = Field(description="Solve rate per budget (the same budgets for A, B and C).")
    embedding: EmbeddingHealth
    value: ValueHealth
    projection: list[tuple[float, float, int, bool]]
    explained: list[float]


class Attribution(BaseModel):
    """The difference of every headline metric between two configurations (to − from)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="'A→B', 'B→C' or 'A→C'.")
    question: str
    deltas: dict[str, float | None] = Field(description="Metric → to − from (None: unmeasured on one side).")


class JointStudy(BaseModel):
    """report.json's `joint_study`: A, B and C side by side with the attributions."""

    model_config = ConfigDict(extra="forbid")

    iteration: int
    budget: int = Field(description="The largest budget, at which solve rates and tokens are compared.")
    configurations: dict[str, StudyEntry]
    attributions: list[Attribution]


def _headline(entry: StudyEntry, budget: int) -> dict[str, float | None]:
    """The metrics compared across configurations (rows of the side-by-side table)."""
    row = next((r for r in entry.solve if r.budget == budget), None)
    e, v = entry.embedding, entry.value
    return {
        "solve_rate": None if row is None else row.rate, "avg_tokens": None if row is None else row.avg_tokens,
        "centroid_l2": e.centroid_l2, "linear_probe": e.linear_probe, "sibling_l2": e.sibling_l2,
        "norm_gap": e.norm_gap, "effective_rank": e.effective_rank,
        "top_variance_share": e.spectrum[0] if e.spectrum else None,
        "rank1": v.rank1, "energy_gap": v.energy_gap, "sibling_accuracy": v.sibling_accuracy,
        "sibling_lift": (None if v.sibling_accuracy is None or v.sibling_chance is None
                         else round(v.sibling_accuracy - v.sibling_chance, 6)),
    }


LABELS = {
    "solve_rate": "solve rate", "avg_tokens": "tokens / theorem", "centroid_l2": "centroid L2",
    "linear_probe": "linear probe", "sibling_l2": "sibling L2", "norm_gap": "norm gap",
    "effective_rank": "effective rank", "top_variance_share": "top variance share", "rank1": "rank-1",
    "energy_gap": "energy gap", "sibling_accuracy": "sibling accuracy", "sibling_lift": "sibling lift over chance",
}


def _solve_rows(result: EvalResult) -> list[SolveRow]:
    return [SolveRow(budget=r.budget, solved=r.solved, total=r.total, rate=r.rate, avg_tokens=r.avg_tokens)
            for r in result.budgets]


def _number(value: float | None) -> float:
    assert value is not None
    return float(value)


def load_joint_study(root: str, iteration: int, *, store: storage.Store) -> JointStudy | None:
    """The study of `iteration` under `root`; None when it has none (sft.joint off or iteration 0).
    `InputError` when the study ran but one of its evals is missing or their budgets differ."""
    at = Layout(root)
    folder = at.study(iteration, "metrics")
    if iteration < 1 or not store.is_done(folder):
        return None
    metrics = store.read_model(storage.join(folder, STUDY_FILE), StudyMetrics, "joint study")
    evals = study_evals(at, iteration)
    entries: dict[str, StudyEntry] = {}
    budgets: set[tuple[int, ...]] = set()
    for name in CONFIGURATIONS:
        if name not in metrics.configurations:
            raise InputError(f"{folder}/{STUDY_FILE} has no configuration {name}")
        if not store.exists(evals[name]):
            raise InputError(f"configuration {name}'s eval {evals[name]} is missing: finish the iteration's "
                             "study-eval stages before the report")
        result = store.read_model(evals[name], EvalResult, "eval result")
        budgets.add(tuple(r.budget for r in result.budgets))
        m = metrics.configurations[name]
        entries[name] = StudyEntry(description=m.description, policy=m.policy, ebm=m.ebm, eval=evals[name],
                                   solve=_solve_rows(result), embedding=m.embedding, value=m.value,
                                   projection=m.projection, explained=m.explained)
    if len(budgets) != 1:
        raise InputError(f"the study's evals ran at different budgets ({sorted(budgets)}): not comparable")
    budget = max(next(iter(budgets)))
    heads = {name: _headline(entry, budget) for name, entry in entries.items()}
    attributions = [
        Attribution(name=label, question=question, deltas={
            key: None if heads[a][key] is None or heads[b][key] is None
            else round(_number(heads[b][key]) - _number(heads[a][key]), 6)
            for key in LABELS})
        for label, a, b, question in ATTRIBUTIONS
    ]
    return JointStudy(iteration=iteration, budget=budget, configurations=entries, attributions=attributions)


def _fmt(value: float | None, key: str = "") -> str:
    if value is None:
        return "–"
    if key == "solve_rate":
        return f"{value:.1%}"
    if key == "avg_tokens":
        return f"{value:.0f}"
    return f"{value:.3f}"


def _delta(value: float | None, key: str) -> str:
    if value is None:
        return "–"
    if key == "solve_rate":
        return f"{100 * value:+.1f} pt"
    return f"{value:+.0f}" if key == "avg_tokens" else f"{value:+.3f}"


def study_markdown(study: JointStudy) -> list[str]:
    """The report's section: the A/B/C table with the attributions, then the by-depth tables."""
    names = list(study.configurations)
    heads = {name: _headline(study.configurations[name], study.budget) for name in names}
    lines = [f"## Joint training study (iteration {study.iteration})", ""]
    lines += [f"- **{name}**: {study.configurations[name].description}" for name in names]
    lines += ["", f"Solve rate (solved/n, rate, 95% Wilson interval) and tokens at budget {study.budget} (the same "
              "eval for all three); embedding and value-model metrics on every trajectory state of the earlier "
              "iterations.", ""]
    lines.append("| metric | " + " | ".join(names) + " | " + " | ".join(a.name for a in study.attributions) + " |")
    lines.append("|---" * (1 + len(names) + len(study.attributions)) + "|")
    rates = {n: next((r for r in study.configurations[n].solve if r.budget == study.budget), None) for n in names}
    for key, label in LABELS.items():
        values = [rate_text(rate.solved, rate.total) if key == "solve_rate" and (rate := rates[n]) is not None
                  else _fmt(heads[n][key], key) for n in names]
        lines.append(f"| {label} | " + " | ".join(values) + " | "
                     + " | ".join(_delta(a.deltas[key], key) for a in study.attributions) + " |")
    lines += ["", "Attributions: " + "; ".join(f"{a.name} — {a.question}" for a in study.attributions) + ".", ""]

    def by_depth(title: str, get: Callable[[StudyEntry, str], float | None]) -> list[str]:
        out = [f"{title} by depth:", "", "| depth | " + " | ".join(names) + " |", "|---" * (1 + len(names)) + "|"]
        for bucket in DEPTH_BUCKETS:
            cells = [get(study.configurations[n], bucket) for n in names]
            if any(c is not None for c in cells):
                out.append(f"| {bucket} | " + " | ".join(_fmt(c) for c in cells) + " |")
        return [*out, ""]

    def health(field: str) -> Callable[[StudyEntry, str], float | None]:
        def get(entry: StudyEntry, bucket: str) -> float | None:
            depth = entry.embedding.by_depth.get(bucket)
            return None if depth is None else getattr(depth, field)
        return get

    for field, title in (("centroid_l2", "Centroid L2"), ("linear_probe", "Linear probe"),
                         ("sibling_l2", "Sibling L2"), ("norm_gap", "Norm gap"),
                         ("effective_rank", "Effective rank")):
        lines += by_depth(title, health(field))
    lines += by_depth("Rank-1", lambda e, b: e.value.rank1_by_depth.get(b))
    lines += by_depth("Sibling accuracy", lambda e, b: e.value.sibling_by_depth.get(b))
    lines += ["Variance spectrum (share of the leading components):", "",
              "| component | " + " | ".join(names) + " |", "|---" * (1 + len(names)) + "|"]
    width = max(len(study.configurations[n].embedding.spectrum) for n in names)
    for k in range(min(width, 8)):
        cells = [study.configurations[n].embedding.spectrum[k] if k < len(study.configurations[n].embedding.spectrum)
                 else None for n in names]
        lines.append(f"| {k + 1} | " + " | ".join(_fmt(c) for c in cells) + " |")
    lines += ["", "![embedding spectrum](joint_spectrum.png) ![2-D projection](joint_projection.png)", ""]
    return lines


def study_plots(study: JointStudy, folder: Path) -> None:
    """joint_spectrum.png (variance shares, log scale) and joint_projection.png (PCA by depth and label)."""
    import matplotlib.pyplot as plt

    names = list(study.configurations)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for name in names:
        spectrum = study.configurations[name].embedding.spectrum
        ax.semilogy(range(1, len(spectrum) + 1), spectrum, marker="o", label=f"{name}: {DESCRIPTIONS[name][:40]}…")
    ax.set_xlabel("component")
    ax.set_ylabel("share of the variance")
    ax.set_title(f"Embedding variance spectrum, iteration {study.iteration}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(folder / "joint_spectrum.png", dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 4), squeeze=False)
    colours = plt.get_cmap("viridis")
    for ax, name in zip(axes[0], names, strict=True):
        entry = study.configurations[name]
        for positive, marker in ((False, "x"), (True, "o")):
            points = [p for p in entry.projection if p[3] == positive]
            if points:
                ax.scatter([p[0] for p in points], [p[1] for p in points], s=14 if positive else 10, marker=marker,
                           c=[colours(DEPTH_BUCKETS.index(depth_bucket(p[2])) / (len(DEPTH_BUCKETS) - 1))
                              for p in points],
                           label="on a proof path" if positive else "off")
        share = " + ".join(f"{v:.0%}" for v in entry.explained)
        ax.set_title(f"{name} (PC1/PC2: {share} of variance)", fontsize=9)
        ax.legend(fontsize=7, title="colour: depth 1 → 4+", title_fontsize=7)
    fig.tight_layout()
    fig.savefig(folder / "joint_projection.png", dpi=110)
    plt.close(fig)


STUDY_SECTION: ReportSection[JointStudy | None] = ReportSection(
    field="joint_study", build=lambda got: load_joint_study(got.root, got.iteration, store=got.store),
    markdown=lambda study: [] if study is None else study_markdown(study),
    plots=lambda study, folder: None if study is None else study_plots(study, folder))

__all__ = ["STUDY_SECTION", "JointStudy", "load_joint_study", "study_markdown", "study_plots"]

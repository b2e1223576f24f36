"""The iteration report's sections over what the iterations ran (`report.document.SECTIONS` places them in
report.md's order): training, search outcomes by depth, costs per arm and per stage, the models each iteration
made, and each eval's provenance; built from what the report read (`report.reading`), drawn by `report.plots`.
The sections over the evals are `report.core`'s.

    lines = TRAINING_SECTION.markdown(TRAINING_SECTION.shown(report))
"""

from __future__ import annotations

from burnqed.records.results import EdgeOutcome
from burnqed.report.core import _base, _cell, _main_arm, _seconds
from burnqed.report.plots import plot_outcomes_by_depth, plot_training
from burnqed.report.reading import (
    _base_arm,
    _cost,
    _depth_outcomes,
    _ebm_evidence,
    _ebm_metrics,
    _export_facts,
    _provenance,
    _stage_costs,
    _training,
    _trajectory_facts,
)
from burnqed.report.section import ReportInputs, ReportSection
from burnqed.report.tables import (
    BaseArm,
    CostRow,
    DepthOutcomes,
    IterationCost,
    IterationFacts,
    LearningRow,
    Provenance,
    StageCost,
    TrainingPoint,
    TrainingSummary,
)

SCALAR_METRICS = ("rank1", "rank1_accuracy", "energy_gap", "temperature", "centroid_l2", "probe_accuracy",
                  "linear_probe_accuracy", "loss")


def _first_last(points: list[TrainingPoint], split: str) -> str:
    mine = sorted((p for p in points if p.split == split), key=lambda p: p.step)
    if not mine:
        return "–"
    return f"{mine[0].loss:.3f} → {mine[-1].loss:.3f} (step {mine[0].step} → {mine[-1].step})"


def _training_markdown(points: list[TrainingPoint], summaries: list[TrainingSummary]) -> list[str]:
    """How each iteration's policy and value model trained: the first and last logged losses, what they trained on."""
    shown = [s for s in summaries if s.sft_steps is not None or s.ebm_steps is not None
             or any(p.iteration == s.iteration for p in points)]
    if not shown:
        return []
    lines = ["## Training curves", "",
             "Policy: SFT cross-entropy per supervised token (nats), on the training examples and the held-out ones. "
             "Value model: its InfoNCE loss (ln(K+1) is chance with K negatives) and, held out, the share of groups "
             "whose proof-path state has the lowest energy (rank-1).", "",
             "| iteration | policy training | policy loss, train | policy loss, held out | value model training | "
             "value loss, train | value loss, held out | held-out rank-1, last |",
             "|---|---|---|---|---|---|---|---|"]
    for s in shown:
        mine = [p for p in points if p.iteration == s.iteration]
        policy = [p for p in mine if p.model == "policy"]
        value = [p for p in mine if p.model == "value"]
        trained = "–" if s.sft_steps is None else (
            f"{s.sft_method}, {s.sft_steps} steps on {s.sft_examples} examples ({s.sft_positives} positives from "
            f"trajectories), {_seconds(s.sft_seconds)}")
        value_trained = "–" if s.ebm_steps is None else (
            f"{s.ebm_steps} steps on {s.ebm_positives} positive states, {_seconds(s.ebm_seconds)}")
        held = sorted((p for p in value if p.split == "held-out" and p.rank1 is not None), key=lambda p: p.step)
        rank1 = "–" if not held or held[-1].rank1 is None else f"{held[-1].rank1:.1%} (step {held[-1].step})"
        lines.append(f"| {s.iteration} | {trained} | {_first_last(policy, 'train')} | "
                     f"{_first_last(policy, 'held-out')} | {value_trained} | {_first_last(value, 'train')} | "
                     f"{_first_last(value, 'held-out')} | {rank1} |")
    lines.append("")
    if points:
        lines += ["![training curves](training.png)", ""]
    return lines


SHOWN_OUTCOMES = (EdgeOutcome.OK, EdgeOutcome.CLOSED, EdgeOutcome.ERROR, EdgeOutcome.TIMEOUT, EdgeOutcome.REFUSED)


def _search_markdown(facts: list[IterationFacts], depths: list[DepthOutcomes], iteration: int) -> list[str]:
    """The training searches' counts per iteration, then where this iteration's searches spent and proved by depth."""
    lines = ["## Where search spends and where it proves", "",
             "Training searches per iteration (train and pool theorems; the benchmark is never searched):", "",
             "| iteration | theorem searches | proved | edges | positive edges |", "|---|---|---|---|---|"]
    for fact in facts:
        lines.append(f"| {fact.iteration} | {_cell(fact.theorems_searched)} | {_cell(fact.theorems_proved)} | "
                     f"{_cell(fact.edges)} | {_cell(fact.positives)} |")
    lines.append("")
    for source in ("search", "eval"):
        rows = [row for row in depths if row.source == source]
        if not rows:
            continue
        what = "training searches" if source == "search" else "main eval (the benchmark)"
        lines += [f"Edges (tactics applied) of iteration {iteration}'s {what} by the depth of the state they lead "
                  "to, by outcome, and how many lie on a verified proof path:", "",
                  "| depth | edges | " + " | ".join(o.value for o in SHOWN_OUTCOMES) + " | other | on a proof path |",
                  "|---|---|" + "---|" * len(SHOWN_OUTCOMES) + "---|---|"]
        for row in rows:
            total = sum(row.outcomes.values())
            shown = [row.outcomes.get(o.value, 0) for o in SHOWN_OUTCOMES]
            lines.append(f"| {row.depth} | {total} | " + " | ".join(str(n) for n in shown)
                         + f" | {total - sum(shown)} | {row.on_path} |")
        lines.append("")
    if depths:
        lines += ["![edges by depth and outcome](outcomes_by_depth.png)", ""]
    return lines


def _cost_markdown(costs: list[CostRow]) -> list[str]:
    """What each eval arm cost: wall time, where the search time went, tokens and edges."""
    if not costs:
        return []
    lines = ["## Time and tokens", "",
             "At each eval's largest budget. Search time is summed over theorems (which may search concurrently, "
             "so it can exceed the wall time); the policy/Lean/value columns are where it went.", "",
             "| iteration | arm | wall | search (Σ theorems) | policy | Lean | value model | tokens | edges |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in costs:
        lines.append(f"| {row.iteration} | {row.arm} | {_seconds(row.wall_s)} | {_seconds(row.search_s)} | "
                     f"{_seconds(row.policy_s)} | {_seconds(row.lean_s)} | {_seconds(row.value_s)} | "
                     f"{_cell(row.tokens)} | {_cell(row.edges)} |")
    return [*lines, ""]


def _stage_markdown(stage_costs: list[StageCost], iteration_costs: list[IterationCost], iteration: int) -> list[str]:
    """Per-stage wall and CPU time of this iteration and the totals of every iteration, from `stages.json`."""
    lines = ["## Stage times", ""]
    stages = [cost for cost in stage_costs if cost.iteration == iteration]
    recorded = [cost for cost in iteration_costs if cost.recorded]
    if not recorded:
        return [*lines, "Not recorded: the local runner (`burnqed iterate`) writes each stage run's wall and CPU time "
                "to `iter_i/stages.json`; on a cluster Argo records each step's start and end (`argo get WORKFLOW`, "
                "or the Argo UI), and the eval's own wall time is under Time and tokens.", ""]
    if stages:
        lines += ["Wall time from each stage process's start to its exit and its CPU time (user + system, with the "
                  "Lean workers it ran), summed over shards and over the runs an interrupted stage took. Stages run "
                  "side by side, so the sum exceeds the time the iteration took (its span).", "",
                  "| stage | runs | wall | CPU |", "|---|---|---|---|"]
        for cost in stages:
            failed = f" ({cost.failed} stopped or failed)" if cost.failed else ""
            lines.append(f"| {cost.stage} | {cost.runs}{failed} | {_seconds(cost.wall_s)} | {_seconds(cost.cpu_s)} |")
        lines.append("")
    for total in iteration_costs:
        if total.recorded:
            lines.append(f"- iteration {total.iteration}: {_seconds(total.wall_s)} of stage time over "
                         f"{total.stage_runs} stage runs, {_seconds(total.cpu_s)} CPU; span {_seconds(total.span_s)} "
                         "(first start to last end, pauses between interrupted runs included)")
        else:
            lines.append(f"- iteration {total.iteration}: not recorded (no stages.json)")
    return [*lines, "", "The report stage writing this report is not in it (it is still running); a report stage "
            "that finished earlier is.", ""]


def _value_markdown(facts: list[IterationFacts]) -> list[str]:
    metrics = [fact for fact in facts if fact.ebm_metrics]
    if not metrics:
        return []
    lines = ["## Value model", ""]
    keys = [k for k in metrics[-1].ebm_metrics if k.rsplit(".", 1)[-1] in SCALAR_METRICS][:12]
    keys = keys or list(metrics[-1].ebm_metrics)[:12]
    lines.append("| iteration | " + " | ".join(keys) + " |")
    lines.append("|---|" + "---|" * len(keys))
    for fact in metrics:
        cells = " | ".join(_cell(fact.ebm_metrics.get(k), "{:.4g}") for k in keys)
        lines.append(f"| {fact.iteration} | {cells} |")
    return [*lines, ""]


def _evidence_markdown(facts: list[IterationFacts]) -> list[str]:
    """What decides whether the value model helps: rank accuracy among siblings by depth, calibration, and the
    energy by depth on the proof path and off it."""
    shown = [fact for fact in facts if fact.ebm_evidence is not None]
    if not shown:
        return []
    lines = ["## Value model: does it pick the proof path?", "",
             "Among an expanded node's children (one on a verified proof path, one off it at least): how often the "
             "lowest energy is on the path, against the policy's most likely tactic and a random child. "
             "Calibration: the proof-path rate of equal-count energy bins, lowest energy first (it should fall), "
             "and the chance that a positive state of a theorem has a lower energy than a negative one (AUC). "
             "Energy by depth: the mean energy of the states of each depth, minus their goal's own as step search "
             "scores them, on the proof path / off it (it should be lower on the path, and fall with depth there; "
             "rising with depth, it holds the search near the root).", "",
             "| iteration | split | decisions | lowest energy | policy's pick | random | by depth (energy / policy, "
             "nodes) | AUC | path rate by energy bin | energy by depth (path / off) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for fact in shown:
        ev = fact.ebm_evidence
        assert ev is not None
        rank, cal = ev.siblings, ev.calibration
        depths = "; ".join(f"{bucket}: {row.accuracy:.0%} / {_cell(row.policy, '{:.0%}')} ({row.decisions})"
                           for bucket, row in rank.by_depth.items())
        bins = " → ".join(f"{b.rate:.0%}" for b in cal.bins)
        energies = "; ".join(f"{bucket}: {_cell(row.positive, '{:+.2f}')} / {_cell(row.negative, '{:+.2f}')}"
                             for bucket, row in ev.by_depth.items()) or "–"
        lines.append(f"| {fact.iteration} | {ev.split} | {rank.decisions} | {rank.accuracy:.1%} | "
                     f"{_cell(rank.policy, '{:.1%}')} | {rank.chance:.1%} | {depths} | {_cell(cal.auc, '{:.3f}')} | "
                     f"{bins} | {energies} |")
    lines.append("")
    return lines


def _provenance_markdown(provenance: list[Provenance], summaries: list[TrainingSummary]) -> list[str]:
    """Where every eval's figures come from: its model, data, settings digest and software."""
    if not provenance:
        return []
    lines = ["## Provenance", "", "Each eval result records what produced it (its eval.json; the inputs' digests are "
             "in report.json, `inputs`).", "",
             "| eval | model | value model | benchmark | pass@N, mode | seed | config digest | commit | burnqed | Lean "
             "| written |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in provenance:
        lean = p.lean_backend + (f" (Pantograph {p.pantograph_version})" if p.pantograph_version else "")
        lean += f"; judge: {p.judge}" if p.judge else ""
        lines.append(f"| iteration {p.iteration} {p.arm} | `{p.model}` | {_cell(p.ebm and f'`{p.ebm}`')} | "
                     f"{p.benchmark} ({p.total}) | {p.pass_n}, {p.mode} | {_cell(p.seed)} | `{p.config_digest}` | "
                     f"{_cell(p.git_commit and p.git_commit[:12])} | {_cell(p.burnqed_version)} | {lean} | "
                     f"{p.timestamp:%Y-%m-%d %H:%M} UTC |")
    lines.append("")
    for p in provenance:
        lines += [f"**iteration {p.iteration} {p.arm}: {alarm}**" for alarm in p.alarms] + ([""] if p.alarms else [])
    trained = [s for s in summaries if s.sft_method is not None]
    if trained:
        lines += ["Policies trained (sft.json): " + "; ".join(
            f"iteration {s.iteration}: {s.sft_method} from "
            + (f"`{s.sft_init}`" if s.sft_init else s.sft_base_model or "the tiny embedded model")
            + f", seed {s.sft_seed}" for s in trained) + ".", ""]
    return lines


def _exports_markdown(facts: list[IterationFacts]) -> list[str]:
    """Each iteration's policy export, as its record describes it."""
    exports = [fact for fact in facts if fact.export]
    if not exports:
        return []
    return ["## Policy exports", ""] + [f"- iteration {fact.iteration}: {fact.export}" for fact in exports] + [""]


# -- builds: each section's fields from what the report read (`ReportInputs`) ----------------------------------------

def _build_training(inputs: ReportInputs) -> tuple[list[TrainingPoint], list[TrainingSummary], BaseArm | None]:
    points: list[TrainingPoint] = []
    summaries: list[TrainingSummary] = []
    for j in range(inputs.iteration + 1):
        mine, summary = _training(inputs.at, j, inputs.store)
        points += mine
        summaries.append(summary)
    return points, summaries, _base_arm(_base(inputs), summaries)


def _build_stages(inputs: ReportInputs) -> tuple[list[StageCost], list[IterationCost]]:
    stages: list[StageCost] = []
    totals: list[IterationCost] = []
    for j in range(inputs.iteration + 1):
        mine, total = _stage_costs(inputs.at, j, inputs.store)
        stages += mine
        totals.append(total)
    return stages, totals


def _build_facts(inputs: ReportInputs) -> list[IterationFacts]:
    """What each iteration produced: its evals, training searches, export and value model, as far as published."""
    at, load, store = inputs.at, inputs.load, inputs.store
    facts: list[IterationFacts] = []
    for j in range(inputs.iteration + 1):
        main_uri, ablation_uri = at.eval_result(j), at.eval_result(j, with_ebm=False)
        main = load(main_uri)
        ablation = load(ablation_uri) if j >= 1 else None
        main_arm = "llm+ebm" if main is not None and main.ebm else "llm"
        fact = IterationFacts(
            iteration=j,
            eval_llm=ablation_uri if ablation is not None else (main_uri if main_arm == "llm" and main else None),
            eval_ebm=main_uri if main is not None and main_arm == "llm+ebm" else None,
            eval_base=at.eval_base() if j == 0 and load(at.eval_base()) is not None else None,
        )
        _trajectory_facts(fact, at.trajectories(j), store)
        fact.export = _export_facts(at.export(j), store)
        if j >= 1:
            fact.ebm_metrics = _ebm_metrics(at.ebm(j), store)
            fact.ebm_evidence = _ebm_evidence(at.ebm(j), store)
        facts.append(fact)
    return facts


# -- the sections, in report.md's order (`report.document.SECTIONS` places these among the others) ----------------

TRAINING_SECTION: ReportSection[tuple[list[TrainingPoint], list[TrainingSummary], BaseArm | None]] = ReportSection(
    field=("training", "training_summaries", "base_arm"), build=_build_training,
    markdown=lambda shown: _training_markdown(shown[0], shown[1]),
    plots=lambda shown, folder: plot_training(shown[0], folder / "training.png"))


SEARCH_SECTION: ReportSection[list[DepthOutcomes],
                              tuple[list[DepthOutcomes], list[IterationFacts], int, list[LearningRow]]] = ReportSection(
    field="depth_outcomes", build=lambda inputs: _depth_outcomes(inputs.at, inputs.iteration, _main_arm(inputs),
                                                                 inputs.store),
    reads=("iterations", "iteration", "learning"),
    markdown=lambda shown: _search_markdown(shown[1], shown[0], shown[2]),
    plots=lambda shown, folder: plot_outcomes_by_depth(shown[0], shown[1], shown[3], shown[2],
                                                       folder / "outcomes_by_depth.png"))


COSTS_SECTION: ReportSection[list[CostRow]] = ReportSection(
    field="costs", build=lambda inputs: [_cost(read.result, read.iteration, read.arm) for read in inputs.read],
    markdown=_cost_markdown)


STAGES_SECTION: ReportSection[tuple[list[StageCost], list[IterationCost]],
                              tuple[list[StageCost], list[IterationCost], int]] = ReportSection(
    field=("stage_costs", "iteration_costs"), build=_build_stages, reads=("iteration",),
    markdown=lambda shown: _stage_markdown(*shown))


MODELS_SECTION: ReportSection[list[IterationFacts]] = ReportSection(
    field="iterations", build=_build_facts,
    markdown=lambda facts: _exports_markdown(facts) + _value_markdown(facts) + _evidence_markdown(facts))


PROVENANCE_SECTION: ReportSection[list[Provenance], tuple[list[Provenance], list[TrainingSummary]]] = ReportSection(
    field="provenance", build=lambda inputs: [_provenance(read.uri, read.result, read.iteration, read.arm)
                                              for read in inputs.read],
    reads=("training_summaries",), markdown=lambda shown: _provenance_markdown(*shown))

"""What the iteration report's sections are built from (`report.core` and `report.runs` build them with these): the
eval results read once each (`EvalFiles`), and from them and the run's published files the rows of each section —
solve rates and curves, learning, new and lost theorems, proofs, unsolved theorems and the reachable ceiling,
training curves, stage times, search depth, provenance, the modes, decontamination and what is not compared.

    load = EvalFiles(store)
    rows = arm_rows(load(uri), iteration=0, arm="llm")
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from itertools import pairwise

from pydantic import ValidationError

from burnqed import storage
from burnqed.config import PipelineConfig
from burnqed.data.data_report import decontamination_lines, read_report
from burnqed.data.pairs import REPORT_FILE
from burnqed.ebm.formats import ValueEvidence
from burnqed.errors import InputError
from burnqed.eval.compare import Comparison, compare_results, unlike
from burnqed.eval.judging import alarm_lines, judge_line
from burnqed.eval.result import UNKNOWN_REASON, EvalResult
from burnqed.layout import Layout, StageTimes
from burnqed.report.tables import (
    ArmRow,
    BaseArm,
    CeilingRow,
    Change,
    CostRow,
    CurvePoint,
    DepthOutcomes,
    Gate,
    IterationCost,
    IterationFacts,
    LearningRow,
    ModeRow,
    OverlapRow,
    ProofRow,
    Provenance,
    StageCost,
    TrainingPoint,
    TrainingSummary,
    UnsolvedRow,
)

EBM_METRICS_FILE = "metrics.json"
Step = tuple[str, str, EvalResult]  # (step: 'base' or 'iteration i', arm, its main eval)
Load = Callable[[str], EvalResult | None]  # the report's reader of eval results (`EvalFiles`)


class EvalFiles:
    """The eval results one report reads, each read once: an eval may rewrite its result while the report runs
    (the file is replaced atomically, so a read sees one whole version); reading it once means that every figure of
    one eval in the report comes from the same version, and `digests` records which (sha256 of the bytes read)."""

    def __init__(self, store: storage.Store) -> None:
        self.store = store
        self.digests: dict[str, str] = {}
        self._read: dict[str, EvalResult | None] = {}

    def __call__(self, uri: str) -> EvalResult | None:
        """The eval result at `uri` (None when there is none), as first read."""
        if uri not in self._read:
            self._read[uri] = self._load(uri)
        return self._read[uri]

    def _load(self, uri: str) -> EvalResult | None:
        try:
            data = self.store.read_bytes(uri)
        except InputError:
            if self.store.exists(uri):
                raise
            return None
        try:
            result = EvalResult.model_validate_json(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "top level"
            raise InputError(f"eval result {uri}: {where}: {first['msg']} (format: docs/search.md)") from None
        self.digests[uri] = "sha256:" + hashlib.sha256(data).hexdigest()
        return result


def _arm_rows(result: EvalResult, iteration: int, arm: str) -> list[ArmRow]:
    return [ArmRow(iteration=iteration, arm=arm, budget=row.budget, solved=row.solved, total=row.total,
                   rate=row.rate, figures=row.figure_values()) for row in result.budgets]


def solve_curve(result: EvalResult, iteration: int, arm: str) -> list[CurvePoint]:
    """Solved theorems against budget, from 0 to the largest: a step at each distinct `budget_at_proof`."""
    largest = result.budgets[-1].budget
    found = sorted(t.budget_at_proof for t in result.per_theorem
                   if t.proved and t.budget_at_proof is not None and t.budget_at_proof <= largest)
    steps: dict[int, int] = {0: 0}
    for count, budget in enumerate(found, start=1):
        steps[budget] = count
    steps[largest] = len(found)
    total = result.total
    return [CurvePoint(iteration=iteration, arm=arm, budget=budget, solved=solved, total=total,
                       rate=solved / total if total else 0.0) for budget, solved in sorted(steps.items())]


def _cost(result: EvalResult, iteration: int, arm: str) -> CostRow:
    theorems = result.per_theorem
    recorded = bool(theorems) and all(t.policy_s is not None for t in theorems)

    def total(name: str) -> float | None:
        return sum(float(getattr(t, name) or 0.0) for t in theorems) if recorded else None

    edges = sum(t.edges or 0 for t in theorems) if recorded else None
    return CostRow(iteration=iteration, arm=arm, unit=result.budget_unit, wall_s=result.wall_s,
                   search_s=sum(t.time_s for t in theorems), policy_s=total("policy_s"), lean_s=total("lean_s"),
                   value_s=total("value_s"), tokens=result.budgets[-1].tokens, edges=edges)


def _step_differences(steps: list[tuple[str, str, EvalResult]]) -> list[list[str]]:
    """For each step, why its eval is not the same measurement as the step before's (`unlike` with budgets; empty
    for the first step and for a like one)."""
    return [[] if k == 0 else unlike([(steps[k - 1][0], steps[k - 1][2]), (step, result)], budgets=True)
            for k, (step, _, result) in enumerate(steps)]


def _changes(steps: Sequence[Step]) -> list[Change]:
    """For each step after the first, the theorems it solves and the step before did not, and the reverse: the two
    main evals through `compare_results` (at their largest budget, the same for both), or, when they are not the
    same measurement (`unlike` with budgets), why not."""
    changes: list[Change] = []
    for k, differences in enumerate(_step_differences(list(steps))):
        if k == 0:
            continue
        (before, _, earlier), (after, _, later) = steps[k - 1], steps[k]
        if differences:
            changes.append(Change(before=before, after=after, compared_at="", new=[], lost=[],
                                  unlike="; ".join(differences)))
            continue
        comparison = compare_results([(before, earlier), (after, later)])
        changes.append(Change(before=before, after=after, compared_at=comparison.compared_at,
                              new=comparison.newly_solved, lost=comparison.lost))
    return changes


def _proofs(steps: Sequence[Step], changes: Sequence[Change]) -> list[ProofRow]:
    """The proofs of every iteration's main eval, each marked new when its step's change names it."""
    rows: list[ProofRow] = []
    for step, arm, result in steps:
        if step == "base":
            continue
        new = next((set(change.new) for change in changes if change.after == step), set())
        iteration = int(step.rsplit(" ", 1)[-1])
        rows += [ProofRow(iteration=iteration, arm=arm, theorem=t.name, budget_at_proof=t.budget_at_proof,
                          proof=t.proof, answer=t.answer, answer_check=t.answer_check, reference=t.reference,
                          new=t.name in new)
                 for t in result.per_theorem if t.proved]
    return rows


def _unsolved(result: EvalResult, known_false: set[str]) -> list[UnsolvedRow]:
    """The theorems `result` did not prove, by source, then reason, then name; those in `known_false` marked."""
    largest = result.budgets[-1].budget
    rows = [UnsolvedRow(group=t.source or "unknown", theorem=t.name,
                        reason=t.failure_reason.value if t.failure_reason is not None else UNKNOWN_REASON,
                        detail=t.detail, budget_used=t.nodes_used, budget=largest, unit=result.budget_unit,
                        known_false=t.name in known_false, time_s=t.time_s, edges=t.edges)
            for t in result.per_theorem if not t.proved]
    return sorted(rows, key=lambda row: (row.group, row.reason, row.theorem))


def known_false(result: EvalResult) -> set[str]:
    """The theorems of `result` known to be false: the generated world's traps, by name (`world.checked.trap_names`:
    a world theorem's name and role are the same for every seed)."""
    from leankit.world.checked import trap_names

    return {t.name for t in result.per_theorem} & trap_names()


def _ceiling(result: EvalResult, false: set[str]) -> list[CeilingRow]:
    """Per group ('all', then each source when there are several) the theorems, the known-false ones among them
    and how many of the others were solved, at `result`'s largest budget."""
    groups: dict[str, list[str]] = {"all": []}
    solved = result.solved_at(result.budgets[-1].budget)
    for t in result.per_theorem:
        groups["all"].append(t.name)
        groups.setdefault(t.source or "unknown", []).append(t.name)
    if len(groups) == 2:  # one source: its row is the 'all' row
        groups = {"all": groups["all"]}
    return [CeilingRow(group=group, total=len(names), known_false=sorted(set(names) & false),
                       solved=len((set(names) - false) & solved)) for group, names in groups.items()]


def _base_arm(base: EvalResult | None, summaries: Sequence[TrainingSummary]) -> BaseArm | None:
    """What the base arm evaluated, beside what iteration 0's SFT started from (its sft.json). They differ on positive
    evidence only: SFT recorded no base model (it started from the tiny embedded model) while the base eval recorded
    the model it was given (`made_from`'s model input: policy.model or --model; none for the tiny model). With
    sft.base_model set, eval-base is given `--model sft.base_model`: the same model by construction."""
    if base is None:
        return None
    sft = next((s for s in summaries if s.iteration == 0 and s.sft_method is not None), None)
    if sft is None:
        return BaseArm(model=base.model)
    given = base.made_from.inputs.get("model") if base.made_from is not None else None
    differs = sft.sft_base_model is None and given is not None and given.uri is not None
    return BaseArm(model=base.model, sft_base_model=sft.sft_base_model or "the tiny embedded model", differs=differs)


def _trajectory_facts(facts: IterationFacts, uri: str, store: storage.Store) -> None:
    from burnqed.trajectory.reader import is_complete, read_edges, read_marker

    if not is_complete(uri, store=store):
        return
    marker = read_marker(uri, store=store)
    if marker is None:
        return
    facts.theorems_searched, facts.theorems_proved, facts.edges = marker.theorems, marker.proved, marker.rows
    labels = read_edges(uri, columns=["label"], store=store).column("label").to_pylist()
    facts.positives = sum(1 for label in labels if label == "positive")


def _ebm_metrics(uri: str, store: storage.Store) -> dict[str, float]:
    path = storage.join(uri, EBM_METRICS_FILE)
    if not store.exists(path):
        return {}
    try:
        raw = json.loads(store.read_bytes(path))
    except json.JSONDecodeError:
        return {}
    flat: dict[str, float] = {}
    stack: list[tuple[str, object]] = [("", raw)]
    while stack:  # flatten nested metric objects into dotted keys, keeping numbers only
        prefix, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{prefix}.{k}" if prefix else str(k), v) for k, v in value.items())
        elif isinstance(value, int | float) and not isinstance(value, bool):
            flat[prefix] = float(value)
    return dict(sorted(flat.items()))


def _ebm_evidence(uri: str, store: storage.Store) -> ValueEvidence | None:
    """The evidence section of a published value model's metrics.json (None when absent or unreadable)."""
    path = storage.join(uri, EBM_METRICS_FILE)
    if not store.exists(path):
        return None
    try:
        evidence = json.loads(store.read_bytes(path)).get("evidence")
        return None if evidence is None else ValueEvidence.model_validate(evidence)
    except (ValueError, AttributeError):  # not JSON, not an object, or no valid evidence: the flat metrics still show
        return None


def _export_facts(uri: str, store: storage.Store) -> str | None:
    """One line from a published export's record: how it was merged and, for QLoRA, the held-out loss gap."""
    from burnqed.sft.manifests import EXPORT_RECORD, ExportRecord

    path = storage.join(uri, EXPORT_RECORD)
    if not store.is_done(uri) or not store.exists(path):
        return None
    record = store.read_model(path, ExportRecord, "export record")
    gap = f"; QLoRA gap: {record.qlora_gap.summary}" if record.qlora_gap is not None else ""
    return f"{record.method}, {record.dtype}, {record.params:,} params{gap}"


def _training(at: Layout, iteration: int, store: storage.Store) -> tuple[list[TrainingPoint], TrainingSummary]:
    """The loss curves of iteration `iteration`'s policy (its sft.json history) and value model (its metrics.jsonl
    snapshots), and how each was trained; what is not published (yet) is left out."""
    from burnqed.ebm.formats import METRICS_LOG_FILE, Snapshot
    from burnqed.sft.manifests import SFT_RECORD, SftRecord

    points: list[TrainingPoint] = []
    summary = TrainingSummary(iteration=iteration)
    if store.is_done(at.sft(iteration)) and store.exists(storage.join(at.sft(iteration), SFT_RECORD)):
        sft = store.read_model(storage.join(at.sft(iteration), SFT_RECORD), SftRecord, "SFT record")
        for point in sft.history:
            points += [TrainingPoint(iteration=iteration, model="policy", split=split, step=point.step, loss=loss)
                       for split, loss in (("train", point.loss), ("held-out", point.eval_loss)) if loss is not None]
        summary = summary.model_copy(update={
            "sft_method": sft.method, "sft_base_model": sft.base_model, "sft_init": sft.init, "sft_seed": sft.seed,
            "sft_steps": sft.steps,
            "sft_examples": sft.data_counts.train_examples, "sft_positives": sft.data_counts.positives,
            "sft_seconds": sft.train_seconds})
    ebm = at.ebm(iteration)
    if iteration < 1 or not store.is_done(ebm):
        return points, summary
    log = storage.join(ebm, METRICS_LOG_FILE)
    if store.exists(log):
        for number, line in enumerate(store.read_bytes(log).decode("utf-8", errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                snap = Snapshot.model_validate_json(line)
            except ValidationError as exc:
                raise InputError(f"value-model metrics log {log}, line {number}: {exc.errors()[0]['msg']} (written "
                                 "by `burnqed train-ebm`, docs/ebm.md)") from None
            points.append(TrainingPoint(iteration=iteration, model="value",
                                        split="train" if snap.split == "train" else "held-out", step=snap.step,
                                        loss=snap.loss, rank1=snap.rank1))
    flat = _ebm_metrics(ebm, store)  # read leniently, like the value-model table: a joint head's has other keys
    if "steps" in flat:
        positives = flat.get("counts.train_positives")
        seconds = flat.get("train_seconds")
        summary = summary.model_copy(update={"ebm_steps": int(flat["steps"]),
                                             "ebm_positives": None if positives is None else int(positives),
                                             "ebm_seconds": seconds})
    return points, summary


def _stage_costs(at: Layout, iteration: int, store: storage.Store) -> tuple[list[StageCost], IterationCost]:
    """Per-stage and total time of iteration `iteration` from the local runner's `stages.json`; unrecorded (a
    cluster run, or one from before the runner recorded it) when there is none."""
    uri = at.stage_times(iteration)
    if not store.exists(uri):
        return [], IterationCost(iteration=iteration, recorded=False)
    runs = store.read_model(uri, StageTimes, "stage times").runs
    costs: list[StageCost] = []
    for stage in dict.fromkeys(run.stage for run in runs):
        mine = [run for run in runs if run.stage == stage]
        cpu = [run.cpu_s for run in mine]
        costs.append(StageCost(iteration=iteration, stage=stage, runs=len(mine),
                               failed=sum(run.status != "ran" for run in mine), wall_s=sum(run.wall_s for run in mine),
                               cpu_s=None if None in cpu else sum(c or 0.0 for c in cpu)))
    cpu_total = [cost.cpu_s for cost in costs]
    span = (max(run.finished_at for run in runs) - min(run.started_at for run in runs)).total_seconds() if runs else 0.0
    return costs, IterationCost(iteration=iteration, recorded=True, stage_runs=len(runs),
                                wall_s=sum(cost.wall_s for cost in costs),
                                cpu_s=None if None in cpu_total else sum(c or 0.0 for c in cpu_total), span_s=span)


def _depth_outcomes(at: Layout, iteration: int, main_arm: str | None, store: storage.Store) -> list[DepthOutcomes]:
    """Edges by depth and outcome of the iteration's training searches and of its main eval, where published."""
    from burnqed.stages.summary import outcomes_by_depth
    from burnqed.trajectory.reader import is_complete

    rows: list[DepthOutcomes] = []
    sources = [("search", at.trajectories(iteration))]
    if main_arm is not None:
        sources.append(("eval", at.eval_trajectories(iteration)))
    for source, uri in sources:
        if not is_complete(uri, store=store):
            continue
        for depth, (outcomes, on_path) in outcomes_by_depth(uri, store=store).items():
            rows.append(DepthOutcomes(iteration=iteration, source="search" if source == "search" else "eval",
                                      depth=depth, outcomes=dict(sorted(outcomes.items())), on_path=on_path))
    return rows


def _provenance(uri: str, result: EvalResult, iteration: int, arm: str) -> Provenance:
    return Provenance(iteration=iteration, arm=arm, uri=uri, timestamp=result.timestamp, model=result.model,
                      ebm=result.ebm, benchmark=result.benchmark, total=result.total, pass_n=result.pass_n,
                      mode=str(result.mode), seed=result.seed, config_digest=result.config_digest,
                      git_commit=result.git_commit, burnqed_version=result.burnqed_version,
                      lean_backend=result.lean_backend, pantograph_version=result.pantograph_version,
                      judge=(said := judge_line(result)) and said.removeprefix("judge: "),
                      alarms=alarm_lines(result))


def _learning(steps: list[tuple[str, str, EvalResult]]) -> list[LearningRow]:
    """base → iteration 0 → … at each result's largest budget, for all theorems and per group; no gain where a
    step's eval is not the same measurement as the step before's (the reason instead)."""
    rows: list[LearningRow] = []
    previous: dict[str, float] = {}
    for (step, arm, result), differences in zip(steps, _step_differences(steps), strict=True):
        largest = result.budgets[-1]
        cells = [("all", largest.solved, largest.total, largest.rate)]
        groups = [g for g in result.groups if g.budget == largest.budget]
        if len(groups) > 1:
            cells += [(g.group, g.solved, g.total, g.rate) for g in groups]
        cells += [(g.group, g.solved, g.total, g.rate) for g in result.tasks if g.budget == largest.budget]
        for group, solved, total, rate in cells:
            before = previous.get(group)
            gain = None if before is None or differences else rate - before
            rows.append(LearningRow(step=step, arm=arm, group=group, budget=largest.budget, solved=solved,
                                    total=total, rate=rate, gain=gain, unlike="; ".join(differences) or None))
            previous[group] = rate
    return rows


def _not_compared(learning: list[LearningRow], gates: list[Gate], modes: list[tuple[str, EvalResult]],
                  iteration: int) -> list[str]:
    """One line per pair of evals shown side by side but not compared, with why."""
    notes: list[str] = []
    steps = list(dict.fromkeys(row.step for row in learning))
    for before, step in pairwise(steps):
        reason = next((row.unlike for row in learning if row.step == step and row.unlike), None)
        if reason:
            notes.append(f"{step} vs {before}: {reason}")
    notes += [f"gate {gate.name}: {gate.detail}" for gate in gates if not gate.measured]
    differences = unlike(modes) if len(modes) > 1 else []
    if differences:
        notes.append(f"the evals of iteration {iteration} at equal tokens: {'; '.join(differences)}")
    return notes


def _decontamination(at: Layout, load: Load, read: Sequence[str],
                     store: storage.Store) -> tuple[list[OverlapRow], list[str]]:
    """`Report.overlaps` and `Report.decontamination`: the training theorems the run's prepared data dropped as
    restating a benchmark theorem (its report.json, every route), and those each eval of `read` (URIs, in the order the
    report read them) found in the training data of the model it evaluated (`EvalResult.training_check`, route
    `eval`), each named once (the first that lists it)."""
    overlaps: dict[tuple[str, str, bool], OverlapRow] = {}
    lines: list[str] = []
    data_report = storage.join(at.data(), REPORT_FILE)
    if store.exists(data_report):
        report = read_report(data_report, store=store)
        said = [line.strip().removeprefix("decontamination: ") for line in decontamination_lines(report)]
        lines += [f"prepared data {at.data()}: {'; '.join(said)}"] if said else []
        for overlap in report.overlaps:
            overlaps.setdefault((overlap.benchmark, overlap.training, True), OverlapRow(
                **overlap.model_dump(), dropped=True, listed_in=data_report))
    for uri in read:  # every eval the report read, in the order read
        result = load(uri)
        if result is None or result.training_check is None:
            continue
        check = result.training_check
        lines.append(f"eval {uri}: {len(check.overlaps)} of the {check.training_theorems} training theorems of "
                     f"{check.data} (the model's training data) restate a theorem of {result.benchmark}")
        for overlap in check.overlaps:
            overlaps.setdefault((overlap.benchmark, overlap.training, False), OverlapRow(
                **overlap.model_dump(), dropped=False, listed_in=uri))
    return list(overlaps.values()), lines


def _mode_evals(
    at: Layout, iteration: int, pipeline: PipelineConfig, load: Load
) -> list[tuple[str, str, EvalResult]]:
    """(label, URI, result) of every published eval of `iteration`: the main eval, its ablation and the eval_modes."""
    found: list[tuple[str, str, EvalResult]] = []
    uris = [at.eval_result(iteration), at.eval_result(iteration, with_ebm=False)]
    uris += [at.eval_result(iteration, mode=mode) for mode in dict.fromkeys(pipeline.eval_modes)]
    for uri in uris:
        result = load(uri)
        if result is not None:
            label = f"{result.search_label}+ebm" if result.ebm else result.search_label
            if all(label != seen for seen, _, _ in found):  # a mode eval may repeat the main one: keep the first
                found.append((label, uri, result))
    return found


def _mode_results(
    at: Layout, iteration: int, pipeline: PipelineConfig, load: Load
) -> list[tuple[str, EvalResult]]:
    """(label, result) of every published eval of `iteration` (`_mode_evals`)."""
    return [(label, result) for label, _, result in _mode_evals(at, iteration, pipeline, load)]


def _mode_rows(at: Layout, iteration: int, pipeline: PipelineConfig, load: Load) -> list[ModeRow]:
    rows: list[ModeRow] = []
    for j in range(iteration + 1):
        for label, result in _mode_results(at, j, pipeline, load):
            rows += [ModeRow(iteration=j, label=label, mode=result.mode, budget=row.budget, unit=result.budget_unit,
                             solved=row.solved, total=row.total, rate=row.rate, avg_tokens=row.avg_tokens,
                             lean_calls=row.lean_calls) for row in result.budgets]
    return rows


def _mode_comparison(results: list[tuple[str, EvalResult]]) -> Comparison | None:
    """This iteration's evals at equal tokens; None with fewer than two, without tokens, or when they are not the
    same measurement (`unlike`: another theorem set, pass_n or Lean backend; their modes and budgets differ by
    design)."""
    if len(results) < 2 or not all(result.has_tokens for _, result in results) or unlike(results):
        return None
    comparison = compare_results(results)
    return comparison if comparison.token_levels else None

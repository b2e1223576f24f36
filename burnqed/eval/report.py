"""The iteration report (docs/pipeline.md): solve rate per budget across iterations with and without the value
model, trajectory and proof counts, the value model's metrics, the search modes side by side at equal generated
tokens, and the go/no-go gates.

    report = build_report(root="file://./runs", iteration=1, pipeline=cfg.pipeline, store=store)
    write_report(report, folder)      # report.md, report.json, solve_rate.png, trajectories.png, modes_tokens.png

Per eval arm it also shows the solve rate against budget (cumulative over each theorem's `budget_at_proof`, so every
budget up to the largest is a point, not only the eval's rungs), what the eval cost (wall time, where the theorems'
search time went, generated tokens, edges) and the proofs found, marking those the previous iteration had not found.

Reads only published artifacts under the run root (eval results, trajectory markers, EBM metrics); a
missing eval of an earlier iteration is listed as missing, never invented. `report.json` is what
`burnqed run-all` reads to decide whether to go on.
"""

from __future__ import annotations

import hashlib
import json
from itertools import pairwise
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from burnqed import storage
from burnqed.config import PipelineConfig
from burnqed.ebm.records import ValueEvidence
from burnqed.errors import InputError
from burnqed.eval.compare import Comparison, compare_results, unlike
from burnqed.eval.joint_study import JointStudy, load_joint_study, study_markdown, study_plots
from burnqed.eval.report_repair import RepairRow, repair_markdown, repair_rows
from burnqed.eval.schema import EvalResult
from burnqed.layout import Layout

EBM_METRICS_FILE = "metrics.json"
SCALAR_METRICS = ("rank1", "rank1_accuracy", "energy_gap", "temperature", "centroid_l2", "probe_accuracy",
                  "linear_probe_accuracy", "loss")


class ArmRow(BaseModel):
    """One eval arm of one iteration at one budget."""

    iteration: int
    arm: str = Field(
        description="'base' (the untrained policy, iteration 0), 'llm' (log-prob ordering) or 'llm+ebm'."
    )
    budget: int
    solved: int
    total: int
    rate: float


class LearningRow(BaseModel):
    """One step of base → iteration 0 → iteration 1 …: the solve rate at the largest budget of one group of
    the benchmark ('all', or a theorem source such as the generated world), with the gain over the step before."""

    step: str = Field(description="'base' or 'iteration i'.")
    arm: str = Field(description="The arm shown: the iteration's main eval (llm+ebm when it has a value model).")
    group: str = Field(description="'all' or a theorem source.")
    budget: int
    solved: int
    total: int
    rate: float
    gain: float | None = Field(description="rate minus the previous step's rate (None for the first step, and when "
                               "the two evals are not the same measurement: see `unlike`).")
    unlike: str | None = Field(default=None, description="Why no gain is shown: how this step's eval differs from "
                               "the step before's (theorem set, pass_n, Lean backend, mode, largest budget, time "
                               "limit).")


class ModeRow(BaseModel):
    """One eval of one iteration at one budget, with what it cost: the rows of the modes-at-equal-tokens view."""

    iteration: int
    label: str = Field(description="Which eval: 'MODE' or 'MODE+ebm' ('llm'/'llm+ebm' arms are the main eval).")
    mode: str = Field(description="The eval's search mode.")
    budget: int
    unit: str = Field(description="What the budget counts: expansions or proofs.")
    solved: int
    total: int
    rate: float
    avg_tokens: float | None = Field(description="Generated tokens per theorem at this budget (None: not recorded).")
    lean_calls: int | None


class CurvePoint(BaseModel):
    """One point of an arm's solve-rate-against-budget curve: theorems whose proof came within `budget`."""

    iteration: int
    arm: str = Field(description="'base', 'llm' or 'llm+ebm'.")
    budget: int = Field(ge=0, description="Budget in the eval's unit (expansions or proofs sampled).")
    solved: int
    total: int
    rate: float = Field(description="solved / total, a fraction in [0, 1].")


class CostRow(BaseModel):
    """What one eval arm cost at its largest budget."""

    iteration: int
    arm: str
    unit: str = Field(description="The eval's budget unit.")
    wall_s: float | None = Field(description="Wall time of the eval command (None in results before schema 3).")
    search_s: float = Field(description="Search time summed over theorems (theorems run concurrently).")
    policy_s: float | None = Field(description="Time the searches waited for the policy, summed.")
    lean_s: float | None = Field(description="Time the searches waited for Lean, summed.")
    value_s: float | None = Field(description="Time the searches waited for the value model, summed.")
    tokens: int | None = Field(description="Generated tokens at the largest budget, summed.")
    edges: int | None = Field(description="Tactics applied, summed.")


class ProofRow(BaseModel):
    """A proof an iteration's main eval found."""

    iteration: int
    arm: str
    theorem: str
    budget_at_proof: int | None
    proof: str | None
    new: bool = Field(description="The previous step (base, or the previous iteration's main eval) did not solve it.")


class IterationFacts(BaseModel):
    """What iteration i produced, as far as it is published."""

    iteration: int
    eval_llm: str | None = Field(description="URI of the LLM-only eval result, if published.")
    eval_ebm: str | None = Field(description="URI of the LLM+EBM eval result, if published.")
    eval_base: str | None = Field(
        default=None, description="URI of the base policy's eval (iteration 0), if published."
    )
    theorems_searched: int | None = None
    theorems_proved: int | None = None
    edges: int | None = None
    positives: int | None = None
    ebm_metrics: dict[str, float] = Field(default_factory=dict)
    ebm_evidence: ValueEvidence | None = Field(
        default=None, description="The value model's sibling ranking and calibration (its metrics.json), if recorded."
    )
    export: str | None = Field(
        default=None, description="The policy export: method, dtype, the QLoRA merge gap (export.json), if published."
    )


class Gate(BaseModel):
    """One go/no-go check; a failed blocking gate stops `run-all`."""

    name: str
    passed: bool
    blocking: bool
    detail: str
    measured: bool = Field(default=True, description="False when the evals the gate compares are not the same "
                           "measurement: the gate is not passed, and a blocking one leaves no decision.")


class Report(BaseModel):
    """Everything report.md shows, machine-readable."""

    root: str
    iteration: int
    rows: list[ArmRow]
    iterations: list[IterationFacts]
    gates: list[Gate]
    learning: list[LearningRow] = Field(default_factory=list, description="base → iteration 0 → … per group.")
    modes: list[ModeRow] = Field(default_factory=list, description="Every eval at every budget with its cost.")
    mode_comparison: Comparison | None = Field(
        default=None, description="This iteration's evals compared at equal tokens (when two or more record tokens)."
    )
    curves: list[CurvePoint] = Field(default_factory=list, description="Solve rate against budget per arm.")
    costs: list[CostRow] = Field(default_factory=list, description="What each eval arm cost.")
    proofs: list[ProofRow] = Field(default_factory=list, description="Proofs found by each iteration's main eval.")
    repairs: list[RepairRow] = Field(
        default_factory=list, description="What repair revised and proved, per source (burnqed.eval.report_repair).")
    joint_study: JointStudy | None = Field(
        default=None, description="Configurations A, B, C of the joint-training study (sft.joint; eval.joint_study).")
    not_compared: list[str] = Field(
        default_factory=list, description="Pairs of evals the report shows side by side but does not compare (no "
        "gain, no gate, no 'new' proofs), each with why.")
    inputs: dict[str, str] = Field(
        default_factory=dict, description="Every eval result the report read (URI → sha256 of the bytes read): each "
        "file is read once, so every figure of one eval comes from one version of it.")

    @property
    def go(self) -> bool:
        return all(gate.passed or not gate.blocking for gate in self.gates)

    @property
    def decided(self) -> bool:
        """Every blocking gate could be measured: the report states go or no-go (else no decision at all)."""
        return all(gate.measured or not gate.blocking for gate in self.gates)


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
                   rate=row.rate) for row in result.budgets]


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


def _proofs(steps: list[tuple[str, str, EvalResult]]) -> list[ProofRow]:
    rows: list[ProofRow] = []
    before: set[str] | None = None
    for (step, arm, result), differences in zip(steps, _step_differences(steps), strict=True):
        solved = {t.name for t in result.per_theorem if t.proved}
        if step != "base":
            iteration = int(step.rsplit(" ", 1)[-1])
            rows += [ProofRow(iteration=iteration, arm=arm, theorem=t.name, budget_at_proof=t.budget_at_proof,
                              proof=t.proof, new=before is not None and not differences and t.name not in before)
                     for t in result.per_theorem if t.proved]
        before = solved
    return rows


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


def _export_facts(uri: str, store: storage.Store) -> str | None:
    """One line from a published export's record: how it was merged and, for QLoRA, the held-out loss gap."""
    from burnqed.sft.records import EXPORT_RECORD, ExportRecord

    path = storage.join(uri, EXPORT_RECORD)
    if not store.is_done(uri) or not store.exists(path):
        return None
    record = store.read_model(path, ExportRecord, "export record")
    gap = f"; QLoRA gap: {record.qlora_gap.summary}" if record.qlora_gap is not None else ""
    return f"{record.method}, {record.dtype}, {record.params:,} params{gap}"


def _best_rate(rows: list[ArmRow], iteration: int, arm: str) -> float | None:
    rates = [row for row in rows if row.iteration == iteration and row.arm == arm]
    if not rates:
        return None
    return max(rates, key=lambda row: row.budget).rate


def _gates(rows: list[ArmRow], iteration: int, cfg: PipelineConfig,
           results: dict[tuple[int, str], EvalResult]) -> list[Gate]:
    gates: list[Gate] = []
    # The raw baseline is the untrained policy's eval; runs without one fall back to iteration 0's.
    raw = _best_rate(rows, 0, "base")
    base, who = (raw, "the base policy") if raw is not None else (_best_rate(rows, 0, "llm"), "iteration 0")
    if base is None:
        gates.append(Gate(name="baseline", passed=False, blocking=True, detail="iteration 0 has no eval result"))
    else:
        gates.append(Gate(
            name="baseline", passed=base >= cfg.gate_min_rate, blocking=True,
            detail=f"{who} solves {base:.1%} at its largest budget (gate: ≥ {cfg.gate_min_rate:.1%})",
        ))
    if iteration >= 1:
        now = _best_rate(rows, iteration, "llm+ebm") or _best_rate(rows, iteration, "llm")
        before_ebm = _best_rate(rows, iteration - 1, "llm+ebm")
        before = before_ebm if before_ebm is not None else _best_rate(rows, iteration - 1, "llm")
        differences = _unlike_arms(results, (iteration - 1, _main_arm(rows, iteration - 1)),
                                   (iteration, _main_arm(rows, iteration)))
        if now is None or before is None:
            gates.append(Gate(name="gain", passed=False, blocking=True,
                              detail=f"missing eval result of iteration {iteration if now is None else iteration - 1}"))
        elif differences:
            gates.append(Gate(name="gain", passed=False, blocking=True, measured=False,
                              detail=f"not measured: the evals of iterations {iteration - 1} and {iteration} are not "
                              f"the same measurement ({'; '.join(differences)}); evaluate both on the same theorems "
                              "with the same budgets and settings"))
        else:
            gain = now - before
            gates.append(Gate(
                name="gain", passed=gain >= cfg.gate_min_gain, blocking=True,
                detail=f"iteration {iteration} vs {iteration - 1}: {before:.1%} → {now:.1%} ({gain:+.1%}; "
                f"gate: ≥ {cfg.gate_min_gain:+.1%})",
            ))
        with_ebm = _best_rate(rows, iteration, "llm+ebm")
        without = _best_rate(rows, iteration, "llm")
        differences = _unlike_arms(results, (iteration, "llm"), (iteration, "llm+ebm"))
        if with_ebm is not None and without is not None and differences:
            gates.append(Gate(name="ebm-helps", passed=False, blocking=False, measured=False,
                              detail=f"not measured: LLM+EBM and LLM only are not the same measurement "
                              f"({'; '.join(differences)})"))
        elif with_ebm is not None and without is not None:
            gates.append(Gate(
                name="ebm-helps", passed=with_ebm > without, blocking=False,
                detail=f"LLM+EBM {with_ebm:.1%} vs LLM only {without:.1%} at the largest budget"
                + ("" if with_ebm > without else ": the value model does not help; keep log-prob ordering"),
            ))
    return gates


def _main_arm(rows: list[ArmRow], iteration: int) -> str:
    """The arm the gates read for `iteration`: llm+ebm when it has one (`_best_rate`'s order), else llm."""
    return "llm+ebm" if _best_rate(rows, iteration, "llm+ebm") is not None else "llm"


def _unlike_arms(results: dict[tuple[int, str], EvalResult], first: tuple[int, str], second: tuple[int, str]
                 ) -> list[str]:
    """`unlike` (with budgets) of two arms' evals; empty when either is missing."""
    if first not in results or second not in results:
        return []
    return unlike([(f"iteration {first[0]} {first[1]}", results[first]),
                   (f"iteration {second[0]} {second[1]}", results[second])], budgets=True)


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


def build_report(root: str, iteration: int, pipeline: PipelineConfig, *, store: storage.Store) -> Report:
    """Collect iterations 0..`iteration` under `root` (and the base policy's eval, when published). `InputError`
    (before anything is written) when `root` holds no `iter_{iteration}` folder or no eval result at all: a
    report of nothing would read as a complete no-go."""
    at = Layout(root)
    if not store.exists(at.iter_dir(iteration)):
        held = [j for j in range(iteration) if store.exists(at.iter_dir(j))]
        found = f"it holds iterations {held}" if held else "it holds no iteration"
        raise InputError(f"report --iter {iteration}: {at.iter_dir(iteration)} does not exist ({found}): check "
                         "--root / storage.root and --iter, or run `burnqed iterate` first")
    rows: list[ArmRow] = []
    facts: list[IterationFacts] = []
    steps: list[tuple[str, str, EvalResult]] = []
    curves: list[CurvePoint] = []
    costs: list[CostRow] = []
    results: dict[tuple[int, str], EvalResult] = {}
    load = EvalFiles(store)
    base = load(at.eval_base())
    if base is not None:
        rows += _arm_rows(base, 0, "base")
        steps.append(("base", "base", base))
        curves += solve_curve(base, 0, "base")
        costs.append(_cost(base, 0, "base"))
    if base is None and not any(store.exists(at.eval_result(j)) for j in range(iteration + 1)):
        raise InputError(f"report --iter {iteration}: no eval result under {root} (neither {at.eval_base()} nor "
                         f"iter_N/eval/eval.json): run the eval stages first")
    for j in range(iteration + 1):
        main_uri = at.eval_result(j)
        ablation_uri = at.eval_result(j, with_ebm=False)
        main = load(main_uri)
        ablation = load(ablation_uri) if j >= 1 else None
        main_arm = "llm+ebm" if main is not None and main.ebm else "llm"
        if main is not None:
            results[(j, main_arm)] = main
            rows += _arm_rows(main, j, main_arm)
            steps.append((f"iteration {j}", main_arm, main))
            curves += solve_curve(main, j, main_arm)
            costs.append(_cost(main, j, main_arm))
        if ablation is not None:
            results[(j, "llm")] = ablation
            rows += _arm_rows(ablation, j, "llm")
            curves += solve_curve(ablation, j, "llm")
            costs.append(_cost(ablation, j, "llm"))
        fact = IterationFacts(
            iteration=j,
            eval_llm=ablation_uri if ablation is not None else (main_uri if main_arm == "llm" and main else None),
            eval_ebm=main_uri if main is not None and main_arm == "llm+ebm" else None,
            eval_base=at.eval_base() if j == 0 and base is not None else None,
        )
        _trajectory_facts(fact, at.trajectories(j), store)
        fact.export = _export_facts(at.export(j), store)
        if j >= 1:
            fact.ebm_metrics = _ebm_metrics(at.ebm(j), store)
            fact.ebm_evidence = _ebm_evidence(at.ebm(j), store)
        facts.append(fact)
    gates = _gates(rows, iteration, pipeline, results)
    learning = _learning(steps)
    modes = _mode_results(at, iteration, pipeline, load)
    return Report(root=root, iteration=iteration, rows=rows, iterations=facts, gates=gates, learning=learning,
                  modes=_mode_rows(at, iteration, pipeline, load), mode_comparison=_mode_comparison(modes),
                  curves=curves, costs=costs, proofs=_proofs(steps),
                  repairs=repair_rows(at, iteration, modes, store=store),
                  joint_study=load_joint_study(root, iteration, store=store),
                  not_compared=_not_compared(learning, gates, modes, iteration),
                  inputs=dict(sorted(load.digests.items())))


def _mode_results(
    at: Layout, iteration: int, pipeline: PipelineConfig, load: EvalFiles
) -> list[tuple[str, EvalResult]]:
    """(label, result) of every published eval of `iteration`: the main eval, its ablation and the eval_modes."""
    found: list[tuple[str, EvalResult]] = []
    uris = [at.eval_result(iteration), at.eval_result(iteration, with_ebm=False)]
    uris += [at.eval_result(iteration, mode=mode) for mode in dict.fromkeys(pipeline.eval_modes)]
    for uri in uris:
        result = load(uri)
        if result is not None:
            label = f"{result.search_label}+ebm" if result.ebm else result.search_label
            if all(label != seen for seen, _ in found):  # a mode eval may repeat the main one: keep the first
                found.append((label, result))
    return found


def _mode_rows(at: Layout, iteration: int, pipeline: PipelineConfig, load: EvalFiles) -> list[ModeRow]:
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


def _mode_section(report: Report) -> list[str]:
    """report.md's modes section: every eval of the iteration at each budget with its cost, then the evals at equal
    generated tokens per theorem."""
    rows = [row for row in report.modes if row.iteration == report.iteration]
    if not rows:
        return []
    lines = ["## Search modes at equal tokens", "",
             "| eval | budget | solved | tokens/theorem | Lean calls |", "|---|---|---|---|---|"]
    for row in rows:
        tokens = "–" if row.avg_tokens is None else f"{row.avg_tokens:.0f}"
        lines.append(f"| {row.label} | {row.budget} {row.unit} | {row.solved}/{row.total} ({row.rate:.1%}) | "
                     f"{tokens} | {_cell(row.lean_calls)} |")
    lines.append("")
    comparison = report.mode_comparison
    if comparison is not None:
        labels = comparison.labels
        lines += ["At equal generated tokens per theorem (each eval at its largest budget within the level):", "",
                  "| tokens/theorem | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
        for level in comparison.token_levels:
            cells = [f"{e.rate:.1%} @{e.budget}" if e.budget is not None else "–" for e in level.entries]
            lines.append(f"| {level.tokens:.0f} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["![solve rate vs generated tokens](modes_tokens.png)", ""]
    return lines


def _mode_plot(report: Report, folder: Path) -> None:
    """modes_tokens.png: solve rate against generated tokens per theorem, a line per eval and iteration."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    keys = sorted({(row.iteration, row.label) for row in report.modes if row.avg_tokens is not None})
    for iteration, label in keys:
        points = sorted((row.avg_tokens or 0.0, row.rate) for row in report.modes
                        if (row.iteration, row.label) == (iteration, label) and row.avg_tokens is not None)
        style = "-" if iteration == report.iteration else ":"
        ax.plot([p[0] for p in points], [100 * p[1] for p in points], style, marker="o",
                label=f"iter {iteration} {label}")
    if keys and all(row.avg_tokens for row in report.modes if row.avg_tokens is not None):
        ax.set_xscale("log")
    ax.set_xlabel("generated tokens per theorem")
    ax.set_ylabel("solved (%)")
    ax.set_title("Solve rate against generated tokens")
    if keys:
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(folder / "modes_tokens.png", dpi=100)
    plt.close(fig)


def _cell(value: float | int | None, fmt: str = "{}") -> str:
    return "–" if value is None else fmt.format(value)


def render_markdown(report: Report) -> str:
    """report.md."""
    lines = [f"# burnqed report: iteration {report.iteration}", "", f"Run root: `{report.root}`", ""]
    if report.not_compared:
        lines += ["## Not compared", "", "These evals are shown side by side but are not the same measurement, so no "
                  "gain, gate or new proof is read between them:", ""]
        lines += [f"- {note}" for note in report.not_compared] + [""]
    budgets = sorted({row.budget for row in report.rows})
    lines += ["## Solve rate per budget", ""]
    if not report.rows:
        lines += ["No eval results are published yet.", ""]
    else:
        lines.append("| iteration | arm | " + " | ".join(f"budget {b}" for b in budgets) + " |")
        lines.append("|---|---|" + "---|" * len(budgets))
        for key in sorted({(row.iteration, row.arm) for row in report.rows}):
            cells = []
            for budget in budgets:
                row = next((r for r in report.rows if (r.iteration, r.arm) == key and r.budget == budget), None)
                cells.append("–" if row is None else f"{row.solved}/{row.total} ({row.rate:.1%})")
            lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
        lines += ["", "![solve rate against budget](solve_rate.png)", ""]
    if report.learning:
        lines += _learning_markdown(report.learning)
    lines += _cost_markdown(report.costs)
    lines += ["## Trajectories", "", "| iteration | theorem searches | proved | edges | positive edges |",
              "|---|---|---|---|---|"]
    for fact in report.iterations:
        lines.append(f"| {fact.iteration} | {_cell(fact.theorems_searched)} | {_cell(fact.theorems_proved)} | "
                     f"{_cell(fact.edges)} | {_cell(fact.positives)} |")
    lines += ["", "![trajectories](trajectories.png)", ""]
    exports = [fact for fact in report.iterations if fact.export]
    if exports:
        lines += ["## Policy exports", ""] + [f"- iteration {fact.iteration}: {fact.export}" for fact in exports] + [""]
    lines += _proofs_markdown(report.proofs, report.iteration, report.learning)
    metrics = [fact for fact in report.iterations if fact.ebm_metrics]
    if metrics:
        lines += ["## Value model", ""]
        keys = [k for k in metrics[-1].ebm_metrics if k.rsplit(".", 1)[-1] in SCALAR_METRICS][:12]
        keys = keys or list(metrics[-1].ebm_metrics)[:12]
        lines.append("| iteration | " + " | ".join(keys) + " |")
        lines.append("|---|" + "---|" * len(keys))
        for fact in metrics:
            lines.append(f"| {fact.iteration} | "
                         + " | ".join(_cell(fact.ebm_metrics.get(k), "{:.4g}") for k in keys) + " |")
        lines.append("")
    lines += _evidence_markdown(report.iterations)
    lines += _mode_section(report)
    lines += repair_markdown(report.repairs)
    lines += study_markdown(report.joint_study) if report.joint_study else []
    lines += _gates_markdown(report)
    return "\n".join(lines)


def _gates_markdown(report: Report) -> list[str]:
    """The gates and the decision: go, no-go, or none when a blocking gate could not be measured."""
    lines = ["## Go / no-go", ""]
    for gate in report.gates:
        mark = "PASS" if gate.passed else ("NOT MEASURED" if not gate.measured else "STOP" if gate.blocking else "WARN")
        lines.append(f"- **{mark}** {gate.name}: {gate.detail}")
    if report.decided:
        return [*lines, "", f"Decision: **{'go' if report.go else 'no-go'}**", ""]
    unmeasured = ", ".join(gate.name for gate in report.gates if gate.blocking and not gate.measured)
    return [*lines, "", f"Decision: **none**: the {unmeasured} gate could not be measured (`run-all` stops here)", ""]


def _seconds(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.1f} s" if value < 600 else f"{value / 60:.1f} min"


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


def _proofs_markdown(proofs: list[ProofRow], iteration: int, learning: list[LearningRow]) -> list[str]:
    """The proofs iteration `iteration`'s main eval found (new ones first), one line each; none is marked new when
    the step before is not the same measurement (`learning`'s rows say)."""
    from burnqed.eval.theorems import one_line

    rows = [row for row in proofs if row.iteration == iteration]
    if not rows:
        return []
    rows.sort(key=lambda row: (not row.new, row.theorem))
    new = sum(row.new for row in rows)
    unlike_before = next((row.unlike for row in learning if row.step == f"iteration {iteration}" and row.unlike), None)
    versus = (f"not compared with the step before ({unlike_before})" if unlike_before
              else f"{new} the step before did not prove (marked new)")
    lines = [f"## Proofs found by iteration {iteration}", "",
             f"{len(rows)} theorems proved by the main eval ({rows[0].arm}); {versus}.", "",
             "| theorem | budget at proof | proof |", "|---|---|---|"]
    for row in rows:
        mark = " **new**" if row.new else ""
        proof = one_line(row.proof or "", limit=160).replace("|", "\\|")
        lines.append(f"| `{row.theorem}`{mark} | {_cell(row.budget_at_proof)} | `{proof}` |")
    return [*lines, ""]


def _learning_markdown(rows: list[LearningRow]) -> list[str]:
    steps = list(dict.fromkeys(row.step for row in rows))
    groups = list(dict.fromkeys(row.group for row in rows))
    budget = rows[-1].budget
    lines = ["## Learning", "", f"Solve rate at the largest budget ({budget}); each iteration's main eval "
             "(LLM+EBM when it has a value model), the change from the step before in brackets.", "",
             "| theorems | " + " | ".join(steps) + " |", "|---|" + "---|" * len(steps)]
    for group in groups:
        cells = []
        for step in steps:
            row = next((r for r in rows if r.step == step and r.group == group), None)
            if row is None:
                cells.append("–")
                continue
            gain = " (not compared)" if row.unlike else "" if row.gain is None else f" ({100 * row.gain:+.1f})"
            cells.append(f"{row.solved}/{row.total} ({row.rate:.1%}){gain}")
        lines.append(f"| {group} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _plots(report: Report, folder: Path) -> None:
    try:
        import matplotlib
    except ImportError:  # plots are optional; the markdown says where they would be
        return
    matplotlib.use("Agg")
    from burnqed.eval.report_plots import plot_solve_rate, plot_trajectories

    plot_solve_rate(report, folder / "solve_rate.png")
    plot_trajectories(report, folder / "trajectories.png")
    if report.joint_study is not None:
        study_plots(report.joint_study, folder)


def write_report(report: Report, folder: Path) -> None:
    """report.md, report.json and the PNG plots into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.md").write_text(render_markdown(report), encoding="utf-8")
    (folder / "report.json").write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    _plots(report, folder)
    if report.modes:
        try:
            import matplotlib
        except ImportError:  # plots are optional, like the others
            return
        matplotlib.use("Agg")
        _mode_plot(report, folder)


def load_report(uri: str, *, store: storage.Store) -> Report:
    """A published report folder's report.json."""
    return store.read_model(storage.join(uri, "report.json"), Report, "report")

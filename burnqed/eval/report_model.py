"""What an iteration report holds (`report.json`, docs/pipeline.md): the pydantic models that `eval.report` builds,
`eval.report_markdown` writes as report.md and `eval.report_plots` draws, so that neither of those imports the other.

    report = Report.model_validate_json(path.read_text())      # or eval.report.load_report(uri, store=store)
    for row in report.rows: print(row.iteration, row.arm, row.budget, row.solved, row.total, row.interval)

Every solve rate is a `RateRow`: the per-budget fields of `eval.result.SolveRate`, declared once there, with the 95 %
Wilson score interval beside them. Two evals of the same theorems are compared theorem by theorem as a
`PairedChange` (new, lost, and the 95 % interval of the difference, `paired_interval`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, Field, computed_field, field_validator

from burnqed.data.data_report import BenchmarkOverlap
from burnqed.ebm.formats import ValueEvidence
from burnqed.eval.compare import Comparison
from burnqed.eval.joint_study import STUDY_SECTION, JointStudy
from burnqed.eval.report_iterations import ITERATIONS_SECTION, IterationsSection
from burnqed.eval.report_repair import REPAIR_SECTION, RepairRow
from burnqed.eval.report_rl import RL_SECTION, RlSection
from burnqed.eval.report_section import ReportSection
from burnqed.eval.report_sketch import SKETCH_SECTION, SketchRow
from burnqed.eval.result import SolveRate, paired_interval, rate_text
from burnqed.records import SkippedDeclaration


class RateRow(SolveRate):
    """A solve rate as the report shows it: solved of total at a budget, with its 95 % Wilson score interval."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def interval_low(self) -> float:
        """Lower end of the 95 % Wilson score interval of `rate`."""
        return self.interval[0]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def interval_high(self) -> float:
        """Upper end of the 95 % Wilson score interval of `rate`."""
        return self.interval[1]

    @property
    def text(self) -> str:
        """How report.md and the headline show it: `5/10 (50.0%, 23.7–76.3%)`, n and the interval included."""
        return rate_text(self.solved, self.total)


class PairedChange(BaseModel):
    """One eval against an earlier one on the same theorems (same names, pass@N, budgets and settings: `unlike` is
    empty), theorem by theorem at their largest budget: what the go/no-go gain gate reads."""

    before: str = Field(description="The earlier step: 'base' or 'iteration i'.")
    after: str = Field(description="The later step: 'iteration i'.")
    total: int = Field(ge=0, description="Theorems both evals ran (the same ones).")
    before_solved: int = Field(ge=0, description="Solved by the earlier eval.")
    after_solved: int = Field(ge=0, description="Solved by the later eval.")
    new: int = Field(ge=0, description="Solved by the later eval only.")
    lost: int = Field(ge=0, description="Solved by the earlier eval only.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def difference(self) -> float:
        """after − before in solve rate, (new − lost) / total, as a fraction."""
        return (self.new - self.lost) / self.total if self.total else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        """The 95 % interval of `difference` (`paired_interval`)."""
        both = self.after_solved - self.new
        return paired_interval(both, self.new, self.lost, self.total - both - self.new - self.lost)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def interval_low(self) -> float:
        """Lower end of the 95 % paired interval of `difference` (Newcombe's hybrid score, `paired_interval`)."""
        return self.interval[0]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def interval_high(self) -> float:
        """Upper end of the 95 % paired interval of `difference`."""
        return self.interval[1]

    @property
    def text(self) -> str:
        """`1 theorem lost and no gain (6/7 → 5/7; difference -14.3 pts, 95% interval -48.7 to +21.2)`."""
        if not self.new and not self.lost:
            what = "no theorem gained or lost"
        elif not self.new:
            what = f"{self.lost} theorem{'s' if self.lost != 1 else ''} lost and no gain"
        elif not self.lost:
            what = f"{self.new} theorem{'s' if self.new != 1 else ''} gained and none lost"
        else:
            what = f"{self.new} gained and {self.lost} lost"
        low, high = self.interval
        return (f"{what} ({self.before_solved}/{self.total} → {self.after_solved}/{self.total}; difference "
                f"{100 * self.difference:+.1f} pts, 95% interval {100 * low:+.1f} to {100 * high:+.1f})")


class ArmRow(RateRow):
    """One eval arm of one iteration at one budget."""

    iteration: int
    arm: str = Field(
        description="'base' (the untrained policy, iteration 0), 'llm' (log-prob ordering) or 'llm+ebm'."
    )
    figures: dict[str, float | int | None] = Field(
        default_factory=dict, description="The eval's per-budget figures at this budget, by field name "
        "(`eval.result.BudgetRow.figures`: every figure an eval result declares).")


class LearningRow(RateRow):
    """One step of base → iteration 0 → iteration 1 …: the solve rate at the largest budget of one group of
    the benchmark ('all', or a theorem source such as the generated world), with the gain over the step before."""

    step: str = Field(description="'base' or 'iteration i'.")
    arm: str = Field(description="The arm shown: the iteration's main eval (llm+ebm when it has a value model).")
    group: str = Field(description="'all' or a theorem source.")
    gain: float | None = Field(description="rate minus the previous step's rate (None for the first step, and when "
                               "the two evals are not the same measurement: see `unlike`).")
    unlike: str | None = Field(default=None, description="Why no gain is shown: how this step's eval differs from "
                               "the step before's (theorem set, pass_n, Lean backend, mode, largest budget, time "
                               "limit).")


class ModeRow(RateRow):
    """One eval of one iteration at one budget, with what it cost: the rows of the modes-at-equal-tokens view."""

    iteration: int
    label: str = Field(description="Which eval: 'MODE' or 'MODE+ebm' ('llm'/'llm+ebm' arms are the main eval).")
    mode: str = Field(description="The eval's search mode.")
    unit: str = Field(description="What the budget counts: expansions or proofs.")
    avg_tokens: float | None = Field(description="Generated tokens per theorem at this budget (None: not recorded).")
    lean_calls: int | None


class CurvePoint(RateRow):
    """One point of an arm's solve-rate-against-budget curve: theorems whose proof came within `budget`."""

    iteration: int
    arm: str = Field(description="'base', 'llm' or 'llm+ebm'.")


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
    answer: str | None = Field(default=None, description="The answer the proof gives its theorem's answer slot, or "
                               "the one written in (`eval.result.PerTheorem.answer`).")
    answer_check: str | None = Field(default=None, description="What Lean showed of a produced answer against the "
                                     "reference (`eval.result.PerTheorem.answer_check`).")
    reference: str | None = Field(default=None, description="The reference answer beside it "
                                  "(`eval.result.PerTheorem.reference`).")
    new: bool = Field(description="The previous step (base, or the previous iteration's main eval) did not solve it.")


class Change(BaseModel):
    """The theorems one step solves that the step before did not, and the reverse (`eval.compare.compare_results`
    of the two main evals), or why the two are not compared."""

    before: str = Field(description="The earlier step: 'base' or 'iteration i'.")
    after: str = Field(description="The later step.")
    compared_at: str = Field(description="Where the sets were taken (the largest budget), empty when not compared.")
    new: list[str] = Field(description="Solved by `after`, not by `before`.")
    lost: list[str] = Field(description="Solved by `before`, not by `after`.")
    unlike: str | None = Field(default=None, description="Why the two evals are not the same measurement (then no "
                               "new and no lost theorem is named).")


class UnsolvedRow(BaseModel):
    """A benchmark theorem the iteration's main eval did not prove: why, and what its search spent."""

    group: str = Field(description="The theorem's source ('unknown' in eval results before schema 4).")
    theorem: str
    reason: str = Field(description="The failure reason (`records.FailureReason`), 'unknown' when none was given.")
    detail: str | None = Field(description="What happened (Lean's message, the budget or time limit reached).")
    budget_used: int = Field(description="Budget spent at the eval's largest budget (nodes_used), in `unit`: less "
                             "than `budget` when the search ended before it (exhausted: no node left to expand, or "
                             "the time limit); docs/pipeline.md, 'The report'.")
    budget: int | None = Field(default=None, description="The eval's largest budget, what `budget_used` is of.")
    unit: str = Field(description="The eval's budget unit.")
    known_false: bool = Field(default=False, description="The statement is known to be false: one of the generated "
                              "world's traps (false by construction, with a recorded counterexample; "
                              "`burnqed world stats`). No sound search proves it.")
    time_s: float = Field(description="Search time, seconds.")
    edges: int | None = Field(description="Tactics applied (None in results before schema 3).")


class CeilingRow(BaseModel):
    """How many theorems of one group of the benchmark can be proved at all: the known-false ones (the world's traps)
    cannot, so the reachable ceiling is the rest."""

    group: str = Field(description="'all' or a theorem source.")
    total: int = Field(ge=0, description="Theorems of the group in the iteration's main eval.")
    known_false: list[str] = Field(description="Those known to be false (the generated world's traps).")
    solved: int = Field(ge=0, description="Those not known to be false that the main eval proved.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def reachable(self) -> int:
        """Theorems not known to be false: the most a sound prover can solve."""
        return self.total - len(self.known_false)


class BaseArm(BaseModel):
    """What the report's base arm is: the model iteration 0's eval-base evaluated, and the one its SFT started from."""

    model: str = Field(description="The model the base eval evaluated (its eval.json's `model`).")
    sft_base_model: str | None = Field(default=None, description="The model iteration 0's SFT started from "
                                       "(sft.json's base_model; 'the tiny embedded model' when unset there), None when "
                                       "iteration 0's SFT record is not published.")
    differs: bool = Field(default=False, description="The base eval evaluated another model than SFT started from, "
                          "so base → iteration 0 is not what training added to the base arm's model.")


class TrainingPoint(BaseModel):
    """One logged point of a training curve: the policy's SFT loss (sft.json) or the value model's (metrics.jsonl)."""

    iteration: int
    model: Literal["policy", "value"] = Field(description="'policy': SFT; 'value': the value model (train-ebm).")
    split: Literal["train", "held-out"]
    step: int = Field(ge=0, description="Optimizer step.")
    loss: float = Field(description="policy: cross-entropy per supervised token (nats); value: InfoNCE (+ the "
                        "weighted depth loss).")
    rank1: float | None = Field(default=None, description="value: share of groups whose positive has the lowest "
                                "energy.")


class TrainingSummary(BaseModel):
    """How one iteration's policy and value model were trained, from their records (None: not recorded)."""

    iteration: int
    sft_method: str | None = None
    sft_base_model: str | None = Field(default=None, description="sft.base_model (None: the tiny embedded model).")
    sft_init: str | None = Field(default=None, description="The SFT output it warm-started from (--init), if any.")
    sft_seed: int | None = None
    sft_steps: int | None = None
    sft_examples: int | None = Field(default=None, description="Training examples (upsampled positives counted).")
    sft_positives: int | None = Field(default=None, description="Distinct trajectory positives trained on.")
    sft_seconds: float | None = None
    ebm_steps: int | None = None
    ebm_positives: int | None = Field(default=None, description="Positive states the value model trained on (each "
                                      "the anchor of a group with its negatives).")
    ebm_seconds: float | None = None


class StageCost(BaseModel):
    """The time one stage took in one iteration, over its shards and runs (`iter_i/stages.json`)."""

    iteration: int
    stage: str
    runs: int = Field(description="Process runs: shards × attempts.")
    failed: int = Field(description="Of those, runs that did not end with exit 0 (stopped or failed).")
    wall_s: float = Field(description="Wall time summed over the runs.")
    cpu_s: float | None = Field(description="CPU time (user + system, with the processes it waited for) summed; None "
                                "when a run's could not be read.")


class IterationCost(BaseModel):
    """One iteration's total time, as far as the local runner recorded it."""

    iteration: int
    recorded: bool = Field(description="False: no stages.json (a cluster run: Argo records its step times).")
    stage_runs: int = 0
    wall_s: float = Field(default=0.0, description="Wall time summed over every stage run (stages running side by "
                          "side add up).")
    cpu_s: float | None = Field(default=None, description="CPU time summed over every stage run.")
    span_s: float | None = Field(default=None, description="From the first stage's start to the last one's end, "
                                 "pauses between interrupted runs included.")


class DepthOutcomes(BaseModel):
    """The edges of one trajectory at one depth, by outcome: where a search spends, and where it proves."""

    iteration: int
    source: Literal["search", "eval"] = Field(description="'search': the iteration's training searches (merged "
                                              "trajectories); 'eval': its main eval's trajectories.")
    depth: int = Field(ge=1, description="Depth of the edge's child (a tactic applied to a depth-0 root is depth 1).")
    outcomes: dict[str, int] = Field(description="Edges by outcome (ok, closed, error, timeout, refused, "
                                     "prompt_rejected).")
    on_path: int = Field(description="Edges on a verified proof path.")


class Provenance(BaseModel):
    """Where one eval's figures come from: its inputs and the software that produced them (its eval.json)."""

    iteration: int
    arm: str
    uri: str
    timestamp: AwareDatetime
    model: str
    ebm: str | None
    benchmark: str
    total: int
    pass_n: int
    mode: str
    seed: int | None
    config_digest: str
    git_commit: str | None
    burnqed_version: str | None
    lean_backend: str
    pantograph_version: str | None


class OverlapRow(BenchmarkOverlap):
    """A training theorem that restates a benchmark theorem (decontamination, `burnqed.data.decontaminate`): one the
    run's data preparation dropped, or one an eval found in the training data of the model it evaluated."""

    dropped: bool = Field(description="True: prepare-data dropped it from training (its report.json lists it); False: "
                          "the model was trained on it (an eval's training_check found it).")
    listed_in: str = Field(description="The file that lists it: the prepared data's report.json or an eval result.")


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
    change: PairedChange | None = Field(default=None, description="gain: the iteration's main eval against the step "
                                        "before's (the base eval for iteration 0), theorem by theorem.")


class Report(BaseModel):
    """Everything report.md shows, machine-readable."""

    root: str
    iteration: int
    rows: list[ArmRow]
    iterations: list[IterationFacts]
    gates: list[Gate]
    learning: list[LearningRow] = Field(default_factory=list, description="base → iteration 0 → … per group.")
    changes: list[Change] = Field(default_factory=list, description="New and lost theorems of each step of "
                                  "`learning` against the step before.")
    unsolved: list[UnsolvedRow] = Field(default_factory=list, description="The theorems this iteration's main eval "
                                        "did not prove, by group and reason.")
    not_evaluated: list[SkippedDeclaration] = Field(
        default_factory=list, description="The benchmark's declarations this iteration's main eval did not evaluate, "
        "each with its file, line and reason (`eval.result.EvalResult.not_evaluated`).")
    ceiling: list[CeilingRow] = Field(default_factory=list, description="This iteration's main eval: per group "
                                      "('all', then each source) the theorems, the known-false ones and the reachable "
                                      "ceiling (the rest).")
    base_arm: BaseArm | None = Field(default=None, description="What the base arm is (when the base eval is "
                                     "published): its model, and the one iteration 0's SFT started from.")
    modes: list[ModeRow] = Field(default_factory=list, description="Every eval at every budget with its cost.")
    mode_comparison: Comparison | None = Field(
        default=None, description="This iteration's evals compared at equal tokens and Lean calls (when two or more "
        "record tokens). A report.json whose levels have no `level` (the rung-only format, which read an eval at a "
        "rung below the level) loads with None here; `burnqed report --force` writes it anew."
    )
    curves: list[CurvePoint] = Field(default_factory=list, description="Solve rate against budget per arm.")
    costs: list[CostRow] = Field(default_factory=list, description="What each eval arm cost.")
    proofs: list[ProofRow] = Field(default_factory=list, description="Proofs found by each iteration's main eval.")
    training: list[TrainingPoint] = Field(default_factory=list, description="SFT and value-model loss curves.")
    training_summaries: list[TrainingSummary] = Field(default_factory=list, description="How each iteration's "
                                                      "models were trained.")
    stage_costs: list[StageCost] = Field(default_factory=list, description="Per-stage wall and CPU time.")
    iteration_costs: list[IterationCost] = Field(default_factory=list, description="Per-iteration totals.")
    depth_outcomes: list[DepthOutcomes] = Field(default_factory=list, description="This iteration's edges by depth "
                                                "and outcome, in its search and its main eval.")
    provenance: list[Provenance] = Field(default_factory=list, description="Every main eval's inputs and software.")
    made_by: str = Field(default="", description="The burnqed (version, commit) that wrote this report (when: its "
                         "_SUCCESS.json; the report holds no time of its own, so a re-run writes the same bytes).")
    repairs: list[RepairRow] = Field(
        default_factory=list, description="What repair revised and proved, per source (burnqed.eval.report_repair).")
    sketches: list[SketchRow] = Field(
        default_factory=list, description="What sketch search's sketches, subgoals and subgoal cache did, per source "
        "(burnqed.eval.report_sketch).")
    rl: RlSection | None = Field(
        default=None, description="What the iteration's rl stage did, per step and in all, or why its output could "
        "not be read; None when its plan has no rl stage (burnqed.eval.report_rl).")
    learning_curve: IterationsSection | None = Field(
        default=None, description="Both arms' solve rates across iterations 0..i and what iteration i+1 starts from; "
        "None at iteration 0 (burnqed.eval.report_iterations).")
    joint_study: JointStudy | None = Field(
        default=None, description="Configurations A, B, C of the joint-training study (sft.joint; eval.joint_study).")
    not_compared: list[str] = Field(
        default_factory=list, description="Pairs of evals the report shows side by side but does not compare (no "
        "gain, no gate, no 'new' proofs), each with why.")
    overlaps: list[OverlapRow] = Field(
        default_factory=list, description="Training theorems that restate a benchmark theorem: those the run's data "
        "preparation dropped and those an eval found in its model's training data (benchmark theorem ↔ training "
        "theorem, with the route the benchmark came by).")
    decontamination: list[str] = Field(
        default_factory=list, description="What was compared, one line each: the prepared data's benchmarks by route "
        "and each eval's check of its model's training data (nothing listed: nothing was compared).")
    inputs: dict[str, str] = Field(
        default_factory=dict, description="Every eval result the report read (URI → sha256 of the bytes read): each "
        "file is read once, so every figure of one eval comes from one version of it.")

    @field_validator("mode_comparison", mode="before")
    @classmethod
    def _without_rung_readings(cls, value: object) -> object:
        levels = value.get("token_levels") if isinstance(value, dict) else None
        if isinstance(levels, list) and levels and isinstance(levels[0], dict) and "level" not in levels[0]:
            return None
        return value

    @property
    def go(self) -> bool:
        return all(gate.passed or not gate.blocking for gate in self.gates)

    @property
    def decided(self) -> bool:
        """Every blocking gate could be measured: the report states go or no-go (else no decision at all)."""
        return all(gate.measured or not gate.blocking for gate in self.gates)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def decision(self) -> str:
        """go, no-go or none, and the gate that decided it: `no-go by the gain gate: iteration 0 vs base: 1 theorem
        lost and no gain (6/7 → 5/7; …)`; a go names every blocking gate it passed."""
        blocking = [gate for gate in self.gates if gate.blocking]
        unmeasured = [gate for gate in blocking if not gate.measured]
        if unmeasured:
            return f"none: the {', '.join(gate.name for gate in unmeasured)} gate could not be measured (`run-all` " \
                "stops here)"
        failed = [gate for gate in blocking if not gate.passed]
        if failed:
            also = f" (also failed: {', '.join(gate.name for gate in failed[1:])})" if failed[1:] else ""
            return f"no-go by the {failed[0].name} gate: {failed[0].detail}{also}"
        names = [gate.name for gate in blocking]
        if not names:
            return "go: no blocking gate"
        passed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        return f"go: the {passed} gate{'s' if len(names) > 1 else ''} passed"


# The sections that stand on their own (`eval.report_section`), in report.md's order after the search modes: each fills
# the `Report` field it names.
SECTIONS: tuple[ReportSection[Any], ...] = (REPAIR_SECTION, SKETCH_SECTION, RL_SECTION, STUDY_SECTION,
                                             ITERATIONS_SECTION)

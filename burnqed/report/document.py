"""What an iteration report holds (`report.json`, docs/pipeline.md): `Report`, one field per section's rows (their
models in `report.tables` and in the self-contained sections' modules), and `SECTIONS`, every section in
report.md's order, which `report.build` builds, `report.markdown` writes as report.md and `report.build` draws.

    report = Report.model_validate_json(path.read_text())      # or report.build.load_report(uri, store=store)
    for row in report.rows: print(row.iteration, row.arm, row.budget, row.solved, row.total, row.interval)
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, computed_field, field_validator

from burnqed.eval.compare import Comparison
from burnqed.records.theorem import SkippedDeclaration
from burnqed.report.core import (
    CHANGES_SECTION,
    DECONTAMINATION_SECTION,
    GATES_SECTION,
    LEARNING_SECTION,
    MODES_SECTION,
    NOT_COMPARED_SECTION,
    NOT_EVALUATED_SECTION,
    PROOFS_SECTION,
    RATES_SECTION,
    UNSOLVED_SECTION,
)
from burnqed.report.iterations import ITERATIONS_SECTION, IterationsSection
from burnqed.report.repairs import REPAIR_SECTION, RepairRow
from burnqed.report.rl_steps import RL_SECTION, RlSection
from burnqed.report.runs import (
    COSTS_SECTION,
    MODELS_SECTION,
    PROVENANCE_SECTION,
    SEARCH_SECTION,
    STAGES_SECTION,
    TRAINING_SECTION,
)
from burnqed.report.section import ReportSection
from burnqed.report.sketches import SKETCH_SECTION, SketchRow
from burnqed.report.study import STUDY_SECTION, JointStudy
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
    decision,
)


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
        default_factory=list, description="What repair revised and proved, per source (burnqed.report.repairs).")
    sketches: list[SketchRow] = Field(
        default_factory=list, description="What sketch search's sketches, subgoals and subgoal cache did, per source "
        "(burnqed.report.sketches).")
    rl: RlSection | None = Field(
        default=None, description="What the iteration's rl stage did, per step and in all, or why its output could "
        "not be read; None when its plan has no rl stage (burnqed.report.rl_steps).")
    learning_curve: IterationsSection | None = Field(
        default=None, description="Both arms' solve rates across iterations 0..i and what iteration i+1 starts from; "
        "None at iteration 0 (burnqed.report.iterations).")
    joint_study: JointStudy | None = Field(
        default=None, description="Configurations A, B, C of the joint-training study (sft.joint; report.study).")
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
        return decision(self.gates)


# Every section of report.md, in its order under the report's head (`report.markdown`): each fills the `Report`
# field(s) it names (`report.section`).
SECTIONS: tuple[ReportSection[Any, Any], ...] = (
    NOT_COMPARED_SECTION, RATES_SECTION, LEARNING_SECTION, CHANGES_SECTION, UNSOLVED_SECTION, NOT_EVALUATED_SECTION,
    PROOFS_SECTION, TRAINING_SECTION, SEARCH_SECTION, COSTS_SECTION, STAGES_SECTION, MODELS_SECTION, MODES_SECTION,
    REPAIR_SECTION, SKETCH_SECTION, RL_SECTION, STUDY_SECTION, ITERATIONS_SECTION, DECONTAMINATION_SECTION,
    PROVENANCE_SECTION, GATES_SECTION,
)

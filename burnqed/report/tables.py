"""The rows of the iteration report's sections (`report.document.Report` holds them; `report.core` and `report.runs`
build and show them, `report.plots` draws them), apart from `Report` so that the sections can import them.

    row = ArmRow(iteration=0, arm="llm", budget=10, solved=5, total=10, rate=0.5)
    print(row.text)                                             # 5/10 (50.0%, 23.7–76.3%)

Every solve rate is a `RateRow`: the per-budget fields of `eval.result.SolveRate`, declared once there, with the 95 %
Wilson score interval beside them. Two evals of the same theorems are compared theorem by theorem as a
`PairedChange` (new, lost, and the 95 % interval of the difference, `paired_interval`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field, computed_field

from burnqed.data.data_report import BenchmarkOverlap
from burnqed.ebm.formats import ValueEvidence
from burnqed.eval.result import SolveRate, paired_interval, rate_text


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
    reason: str = Field(description="The failure reason (`records.results.FailureReason`), 'unknown' when none was "
                        "given.")
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
    judge: str | None = Field(default=None, description="Who counted its proofs (`eval.judging.judge_line`: burnqed "
                              "and why, or comparator and its toolchain); None for results before the judge was "
                              "recorded.")
    alarms: list[str] = Field(default_factory=list, description="Its soundness alarms (`eval.judging.alarm_lines`): "
                              "proofs burnqed counted and comparator refused, not counted.")


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


def decision(gates: Sequence[Gate]) -> str:
    """go, no-go or none, and the gate that decided it (`Report.decision`): a blocking gate that could not be measured
    leaves none, a failed one is a no-go, and a go names every blocking gate it passed."""
    blocking = [gate for gate in gates if gate.blocking]
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

"""The `[pipeline]` section: one expert iteration, its evals and its go/no-go gates (docs/pipeline.md)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator

from burnqed.config.identity import recorded, shapes
from burnqed.config.search import MAX_BUDGET
from burnqed.config.section import Section
from burnqed.records.enums import SearchMode

MAX_PASS_N = 10_000  # eval attempts per theorem: each is a whole search of the benchmark with a prefix of its own
MAX_SHARDS = 10_000  # search shards: each is a process (a pod in the cluster)
StartSetting = Literal["best", "previous", "base"]  # pipeline.start: what iteration i ≥ 1 starts from
SearchValueModel = Literal["helped", "always"]  # pipeline.search_value_model: when search orders by the value model
Budget = Annotated[int, Field(ge=1, le=MAX_BUDGET)]


class PipelineConfig(Section):
    """One expert iteration (`burnqed iterate`, the Argo `iteration` workflow; docs/pipeline.md)."""

    search_theorems: str | None = Field(
        default=None,
        description="Theorem index (path or URI) searched for training data; unset = the train split of the "
        "prepared data's index ({root}/iter_0/data/theorems.json).",
        json_schema_extra=recorded("search's --theorems: its theorem set, by content"),
    )
    search_splits: list[str] = Field(
        default_factory=lambda: ["train", "pool"], min_length=1,
        description="Splits of the prepared data's index that search covers when search_theorems is unset: 'train' "
        "(theorems with training proofs) and 'pool' (statements only, whose proofs only search can find); a split "
        "the index lacks is skipped.",
        json_schema_extra=recorded("search's theorem set, by content"),
    )
    benchmark: str | None = Field(
        default=None,
        description="What the evals evaluate, as `eval --theorems` reads it: a theorem index, a prepared-data folder "
        "or a benchmark file or folder (a miniF2F-style .lean, a DeepSeek jsonl) read on the fly; unset = the test "
        "split of the embedded corpus (the generated world's test theorems and the bundled hand-written ones). "
        "`data prepare` drops the training theorems that restate one of its theorems; `iterate` and `data prepare` "
        "refuse a benchmark that is missing or holds no theorem before any work.",
        json_schema_extra=recorded("eval's --theorems and what data prepare decontaminates against: a theorem set "
                                   "or a file, by content", reaches=("prepare-data", "eval")),
    )
    eval_base: bool = Field(
        default=True,
        description="Iteration 0 also evaluates the untrained base policy (sft.base_model, else policy.model, with a "
        "warning before work since SFT then starts from another model, else the tiny embedded model) into "
        "iter_0/eval-base/eval.json: the raw baseline the report, the baseline gate and iteration 0's gain gate "
        "start from.",
        json_schema_extra=shapes("report"),
    )
    search_shards: int = Field(default=2, ge=1, le=MAX_SHARDS, description="Search shards (pods in the cluster); "
                               "more shards than theorems leaves the extra shards empty.",
                               json_schema_extra=recorded("search's --shard"))
    noise_temperature: float | None = Field(
        default=1.2, gt=0, description="Iteration 0: also search at this temperature for diversity (unset = no).",
        json_schema_extra=recorded("the noise search's policy.temperature"),
    )
    eval_budgets: list[Budget] = Field(
        default_factory=lambda: [10, 50], min_length=1,
        description="Eval budgets per benchmark run, in the unit of search.mode (step: node expansions; sketch: "
        "planner requests and subgoal expansions or rounds; whole and hybrid: proofs sampled); each 1 to 1e9, "
        "sorted and deduplicated when read ([50, 10, 10] is [10, 50]). The "
        "iteration's evals use them, and so does `burnqed eval` without --budgets.",
        json_schema_extra=recorded("eval's --budgets", reaches=("eval",)),
    )
    eval_modes: list[SearchMode] = Field(
        default_factory=list,
        description="Also evaluate the benchmark in these search modes (an eval-MODE stage each, with --set "
        "search.mode=MODE, into eval/eval-MODE.json, with the iteration's value model where the mode uses one); the "
        "report puts them beside the main eval at equal generated tokens. E.g. ['step', 'whole', 'hybrid'].",
        json_schema_extra=shapes("report", reaches=("eval",)),
    )
    eval_proof_budgets: list[Budget] | None = Field(
        default=None, min_length=1,
        description="Budgets (proofs sampled) of the eval_modes stages in whole or hybrid mode, sorted and "
        "deduplicated like eval_budgets; unset = search.max_proofs / 4, / 2 and all of it (`proof_ladder`).",
        json_schema_extra=recorded("the mode evals' --budgets", reaches=("eval",)),
    )
    eval_pass_n: int = Field(default=1, ge=1, le=MAX_PASS_N, description="Eval attempts per theorem (pass@N).",
                             json_schema_extra=recorded("eval's --pass-n", reaches=("eval",)))
    start: StartSetting = Field(
        default="base",
        description="What iteration i ≥ 1 starts from (docs/pipeline.md, 'Start of an iteration'). 'base': SFT "
        "trains the base model afresh on the data and every verified proof so far (the field's practice; with "
        "sft.proofs_per_theorem and sft.later_epochs' defaults the loop that kept learning over five iterations, "
        "docs/results.md); from iteration 2 a start stage reads the evals of iterations 0..i-1 and writes "
        "iter_i/start.json: train-ebm warm-starts from the best value model among those that helped (none: afresh), "
        "and search uses the value model only when it helped at the last eval. 'best': the start stage from "
        "iteration 1, and SFT warm-starts from the policy whose LLM-only eval is the best so far (ties: the "
        "later). 'previous': SFT and train-ebm warm-start from iteration i-1 whatever its eval said. Under 'base' "
        "and 'best' a worse iteration is not the next one's start, so the gain gate of iteration i ≥ 1 is shown, not "
        "a stop.",
        json_schema_extra=recorded("sft's --start/--init, train-ebm's --start/--init and search's --start, which "
                                   "the plan builds from it"),
    )
    search_value_model: SearchValueModel = Field(
        default="helped",
        description="Under pipeline.start 'best' and 'base': whether the training search of an iteration the start "
        "stage chose for orders by its value model only when the last measured one helped (LLM+EBM above LLM only "
        "at the last eval: 'helped') or always ('always'; the main eval uses it either way, and eval-noebm measures "
        "the policy alone). 'previous' always uses it (docs/pipeline.md, 'Start of an iteration').",
        json_schema_extra=recorded("search's --start, which the plan builds from it"),
    )
    gate_min_rate: float = Field(
        default=0.05, ge=0, le=1,
        description="Go/no-go: stop when the raw baseline (the base policy's eval, else iteration 0's) solves less "
        "than this at its largest budget.",
        json_schema_extra=shapes("report"),
    )
    gate_min_gain: float = Field(
        default=0.0, ge=-1, le=1,
        description="Go/no-go: stop when an iteration's main eval gains less than this (a fraction: 0.05 is 5 points) "
        "over the step before on the same theorems: iteration i-1's main eval, or for iteration 0 the base "
        "policy's eval (eval-base). The gain is (newly solved - lost) / theorems, the difference of the two solve "
        "rates; 0 stops an iteration that got worse. With start = 'base' or 'best' the gain of iteration i ≥ 1 is "
        "shown, not a stop: a worse iteration is not the next one's start.",
        json_schema_extra=shapes("report"),
    )
    gate_max_lost: int | None = Field(
        default=None, ge=0,
        description="Go/no-go: stop when an iteration loses more than this many theorems the step before solved, "
        "whatever it gains; unset = as many as its gain makes up for (gate_min_gain).",
        json_schema_extra=shapes("report"),
    )
    gate_gain_interval: bool = Field(
        default=False,
        description="Go/no-go: the gain gate reads the lower end of the 95 % interval of the gain (Newcombe's paired "
        "interval over the same theorems) instead of the gain itself, so an iteration goes on only when its gain "
        "over gate_min_gain is not chance. Off by default: on 71 theorems the interval spans about ±6 to ±11 "
        "points, so it stops any iteration that gains less than that.",
        json_schema_extra=shapes("report"),
    )

    @field_validator("benchmark")
    @classmethod
    def _named(cls, benchmark: str | None) -> str | None:
        """An empty benchmark (an unset variable) is refused, never read as the embedded one."""
        if benchmark is not None and not benchmark.strip():
            raise ValueError("is empty: give a benchmark file, folder or theorem index, or leave it unset for the "
                             "embedded test split")
        return benchmark

    @field_validator("gate_min_rate", "gate_min_gain", mode="before")
    @classmethod
    def _fraction(cls, value: object, info: ValidationInfo) -> object:
        """A gate's threshold is a fraction of the theorems, which the report prints as percent or points: a value
        out of its range is refused naming the unit (20 meant as 20 points is 0.2)."""
        low = 0 if info.field_name == "gate_min_rate" else -1
        if isinstance(value, int | float) and not isinstance(value, bool) and not low <= value <= 1:
            unit = "a solve rate" if low == 0 else "a gain in solve rate"
            raise ValueError(f"is {unit} as a fraction of the theorems, {low} to 1 (0.05 is 5 points, which the "
                             f"report prints as 5.0%); {value:g} is out of range" + (
                                 f": for {value:g} points give {value / 100:g}" if low * 100 <= value <= 100 else ""))
        return value

    @field_validator("eval_budgets", "eval_proof_budgets")
    @classmethod
    def _ascending(cls, budgets: list[int] | None) -> list[int] | None:
        """Budgets are rungs of one search (eval scores each at its mark): their order and repeats carry nothing."""
        return None if budgets is None else sorted(set(budgets))


def proof_ladder(max_proofs: int) -> list[int]:
    """The budgets of an eval in whole or hybrid mode when `pipeline.eval_proof_budgets` is unset: a quarter, half
    and all of `search.max_proofs` proofs."""
    return sorted({max(1, max_proofs // 4), max(1, max_proofs // 2), max_proofs})

"""The eval result document (docs/search.md): one JSON file per eval, pass@N over a ladder of budgets. A budget is in
the unit of the search mode (`budget_unit`: expansions for step and sketch, proofs sampled for whole and hybrid);
every budget row also says what it cost in generated tokens and Lean requests, the unit-free yardstick `compare` uses.

    write_eval_result(result, "results/iter_0.json", store=store)
    result = load_eval_result("results/iter_0.json", store=store)   # InputError naming the file on any problem

This module is the schema and its files; the provenance a result records is `eval.metadata` (`config_digest`,
`git_commit`) and `lean.backend.lean_backend_label`; how the numbers are computed is `eval.pass_at`, how they are
printed `eval.rendering`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

from burnqed import storage
from burnqed.data.data_report import TrainingDataCheck
from burnqed.eval.migrations import EVAL_MIGRATIONS
from burnqed.eval.settings import EvalSettings
from burnqed.lean.comparator import JudgeRecord
from burnqed.provenance import StageInputs
from burnqed.records.enums import EXPANSION_MODES, SearchMode
from burnqed.records.results import FailureReason, LemmaGraph, UsageCurve
from burnqed.records.theorem import SkippedDeclaration
from burnqed.storage import read_json_model, write_text_atomic

UNKNOWN_REASON = "unknown"  # failure_reasons key of an unsolved theorem whose attempts gave no reason
BudgetUnit = Literal["expansions", "proofs"]


def budget_unit(mode: SearchMode) -> BudgetUnit:
    """What a budget counts in `mode`."""
    return "expansions" if mode in EXPANSION_MODES else "proofs"


Z95 = 1.959963984540054  # the standard normal's 97.5 % quantile: a two-sided 95 % interval
SCHEMA_VERSION = EVAL_MIGRATIONS.current  # of the eval result file (eval.migrations: what each version changed)


def wilson_interval(solved: int, total: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of the rate solved/total (95 % with the default `z`), as fractions in [0, 1].

    Unlike the normal approximation p ± z·√(p(1-p)/n), it stays inside [0, 1] and is not zero-wide at 0 or n solved,
    where small benchmarks often are; (0, 1) when total is 0 (nothing was measured)."""
    if total <= 0:
        return 0.0, 1.0
    p = solved / total
    spread = z * z / total
    centre = (p + spread / 2) / (1 + spread)
    half = z / (1 + spread) * math.sqrt(p * (1 - p) / total + spread / (4 * total))
    return max(0.0, centre - half), min(1.0, centre + half)


def paired_interval(both: int, new: int, lost: int, neither: int, z: float = Z95) -> tuple[float, float]:
    """The 95 % interval (default `z`) of the difference later − earlier in solve rate, (new − lost) / n, of two evals
    of the same n theorems: `both` solved by both, `new` by the later only, `lost` by the earlier only, `neither`.

    Newcombe's hybrid score interval for paired proportions (Newcombe 1998, Statistics in Medicine 17:2635, method
    10; "square-and-add" in Fagerland, Lydersen and Laake, *Statistical Analysis of Contingency Tables*, 2017, ch.
    8): the two rates' Wilson score intervals combined, corrected for their correlation over the theorems (the phi
    coefficient of the 2×2 table, continuity-corrected as Newcombe's). Unlike an interval from the discordant pairs
    alone (new against lost, given new + lost), it does not shrink to nothing when no theorem changed (6/7 → 6/7 is
    not a measured difference of exactly 0), it stays inside [−1, 1], it is close to 95 % coverage on a few dozen
    theorems, and it is built from the Wilson intervals the report shows beside every rate. (−1, 1) for no
    theorems."""
    n = both + new + lost + neither
    if n <= 0:
        return -1.0, 1.0
    later, earlier = (both + new) / n, (both + lost) / n
    low_later, high_later = wilson_interval(both + new, n, z)
    low_earlier, high_earlier = wilson_interval(both + lost, n, z)
    margins = (both + new) * (lost + neither) * (both + lost) * (new + neither)
    phi = 0.0  # the correlation of the two evals' outcomes; 0 when a margin is empty (one eval solved all or none)
    if margins:
        cross = both * neither - new * lost
        phi = (cross - n / 2) / math.sqrt(margins) if cross > n / 2 else min(cross, 0) / math.sqrt(margins)
    down_later, up_earlier = later - low_later, high_earlier - earlier
    up_later, down_earlier = high_later - later, earlier - low_earlier
    difference = later - earlier
    low = difference - math.sqrt(max(0.0, down_later**2 + up_earlier**2 - 2 * phi * down_later * up_earlier))
    high = difference + math.sqrt(max(0.0, down_earlier**2 + up_later**2 - 2 * phi * down_earlier * up_later))
    return max(-1.0, low), min(1.0, high)


def rate_text(solved: int, total: int) -> str:
    """`solved/total (rate, 95 % Wilson interval)`, e.g. `5/10 (50.0%, 23.7–76.3%)`: how the report and the joint
    study write a solve rate, n and interval included."""
    low, high = wilson_interval(solved, total)
    rate = solved / total if total else 0.0
    return f"{solved}/{total} ({rate:.1%}, {100 * low:.1f}–{100 * high:.1f}%)"


class SolveRate(BaseModel):
    """solved of total at one budget: the fields every per-budget row shares (the eval result's budgets and groups,
    the report's rows and curves, the joint study's rows). A new per-budget figure of an eval goes in `BudgetRow`,
    marked with `figure`."""

    budget: int = Field(ge=0, description="Budget per attempt, in the eval's budget_unit.")
    solved: int = Field(ge=0, description="Theorems some attempt proved with budget_at_proof <= budget.")
    total: int = Field(ge=0, description="Theorems counted (the benchmark, or the group).")
    rate: float = Field(ge=0.0, le=1.0, description="solved / total, a fraction in [0, 1] (0 when total is 0).")

    @property
    def interval(self) -> tuple[float, float]:
        """The 95 % Wilson score interval of `rate` (`wilson_interval`)."""
        return wilson_interval(self.solved, self.total)


def figure(header: str, shown: str) -> dict[str, Any]:
    """The mark of a per-budget figure (`BudgetRow.figures`): its column `header` and how it is `shown`
    (`FIGURE_FORMATS`). A field of BudgetRow with this mark is computed by `eval.pass_at` and shown, with no other
    change, in the eval's table (`eval.rendering`), its result file, and the report's per-budget figures."""
    return {"figure": header, "shown": shown}


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 100 else f"{value:.0f} s"


# How a figure is shown, by the name its mark gives (`figure`); None is shown as "–" (not recorded).
FIGURE_FORMATS: dict[str, Callable[[Any], str]] = {
    "count": str,
    "decimal": lambda value: f"{value:.1f}",
    "whole": lambda value: f"{value:.0f}",
    "seconds": _seconds,
}


class BudgetRow(SolveRate):
    """pass@N at one budget: the solve rate and the per-budget figures (fields marked with `figure`)."""

    model_config = ConfigDict(extra="forbid")

    avg_nodes: float = Field(ge=0.0, description="Mean nodes_used at this budget over all theorems (see module doc).",
                             json_schema_extra=figure("avg used", "decimal"))
    avg_time_s: float = Field(ge=0.0, description="Mean time at this budget over all theorems, seconds.",
                              json_schema_extra=figure("avg time", "seconds"))
    median_time_s: float = Field(ge=0.0, description="Median time at this budget over all theorems, seconds.",
                                 json_schema_extra=figure("median time", "seconds"))
    tokens: int | None = Field(
        default=None, ge=0,
        description="Tokens generated at this budget, summed over theorems and attempts (None: not recorded).",
    )
    avg_tokens: float | None = Field(
        default=None, ge=0.0, description="tokens / total: generated tokens per theorem at this budget.",
        json_schema_extra=figure("tokens/thm", "whole"),
    )
    lean_calls: int | None = Field(
        default=None, ge=0, description="Lean requests at this budget, summed over theorems and attempts.",
        json_schema_extra=figure("Lean calls", "count"),
    )

    @classmethod
    def figures(cls) -> list[tuple[str, str]]:
        """(field, column header) of every per-budget figure, in the order declared."""
        return [(name, str(info.json_schema_extra["figure"])) for name, info in cls.model_fields.items()
                if isinstance(info.json_schema_extra, dict) and "figure" in info.json_schema_extra]

    def figure_values(self) -> dict[str, float | int | None]:
        """This row's figures by field name."""
        return {name: getattr(self, name) for name, _ in self.figures()}

    @classmethod
    def shown(cls, name: str, value: float | int | None) -> str:
        """A figure's value as tables show it ("–" when not recorded)."""
        extra = cls.model_fields[name].json_schema_extra
        assert isinstance(extra, dict)
        return "–" if value is None else FIGURE_FORMATS[str(extra["shown"])](value)


class PerTheorem(BaseModel):
    """One theorem's outcome at the largest budget."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Theorem name.")
    proved: bool = Field(description="Some attempt proved it within the largest budget.")
    budget_at_proof: int | None = Field(description="Smallest budget_at_proof over the attempts, when proved.")
    nodes_used: int = Field(ge=0, description="nodes_used at the largest budget (see module doc).")
    time_s: float = Field(ge=0.0, description="Time at the largest budget, seconds (see module doc).")
    failure_reason: FailureReason | None = Field(description="Most frequent failure reason, when not proved.")
    proof: str | None = Field(description="The verified proof text of the winning attempt, when proved.")
    attempts: int = Field(ge=1, description="Search attempts run on this theorem (pass_n).")
    attempts_proved: int = Field(ge=0, description="Attempts that proved it within the largest budget.")
    tokens: int | None = Field(default=None, ge=0, description="Tokens its attempts generated (largest budget).")
    lean_calls: int | None = Field(default=None, ge=0, description="Lean requests of its attempts (largest budget).")
    detail: str | None = Field(
        default=None,
        description="When not proved, what happened (see eval.pass_at.failure_detail): Lean's message for a start "
        "error, 'the policy proposed nothing', the budget or the time limit reached. None in results before schema 3.",
    )
    edges: int | None = Field(default=None, ge=0, description="Tactics applied (trajectory rows) over its attempts.")
    policy_s: float | None = Field(default=None, ge=0.0, description="Time its attempts waited for the policy.")
    lean_s: float | None = Field(default=None, ge=0.0, description="Time its attempts waited for Lean.")
    value_s: float | None = Field(default=None, ge=0.0, description="Time its attempts waited for the value model.")
    source: str | None = Field(
        default=None, description="The theorem's source in the benchmark index, its group in `groups` ('none' when "
        "unset there). None in results before schema 4.")
    repaired: int | None = Field(
        default=None, ge=0, description="Failed proofs its attempts revised with Lean's messages "
        "(search.repair_rounds; None in results written before repair)."
    )
    revisions: int | None = Field(default=None, ge=0, description="Revisions its attempts sampled.")
    revision_at_proof: int | None = Field(
        default=None, ge=0,
        description="Where the winning proof stands in its repair chain: 0 a fresh attempt, k its k-th revision.",
    )
    curve: UsageCurve | None = Field(
        default=None,
        description="Tokens and Lean calls of its attempts together within each budget 1, 2, … (each attempt's own "
        "curve, summed), up to where the last attempt ended; beyond it `tokens` and `lean_calls` hold. None when an "
        "attempt did not record one, and in results before schema 5.",
    )
    task: str | None = Field(
        default=None, description="Its answer task, its group in `tasks`: 'answer produced' (its answer slot is open: "
        "the proof writes the answer), 'answer given' (the answer is written into the statement), 'no answer'. None "
        "in results before schema 6.")
    answer: str | None = Field(
        default=None, description="The answer beside the proof: the one the winning proof gives the slot (answer "
        "produced; `proof` holds the file with it filled in), the one written in (answer given); None otherwise.")
    answer_check: str | None = Field(
        default=None, description="Answer produced: what Lean showed of `answer` against the reference answer "
        "(`search.answer_check`): 'equal', 'different', 'undecided' (neither shown: `answer` and `reference` side by "
        "side for a person to judge), 'no reference'. None for other tasks, an unproved theorem, and results before "
        "schema 7.")
    answer_check_detail: str | None = Field(
        default=None, description="Why `answer_check` says what it says (each side's failure when undecided).")
    answer_check_header: str | None = Field(
        default=None, description="Answer produced: the sha256 (hex) of the header the answer check compiled: the "
        "theorem's header with its slot filled with `answer`, byte for byte the one the proof compiled under, else the "
        "check is 'undecided'. None where no header was compiled (no reference, a value refused before Lean), and in "
        "results before schema 9.")
    proof_header: str | None = Field(
        default=None, description="Answer produced: the sha256 (hex) of the header the proof compiled under (its "
        "text up to its declaration), which `answer_check_header` must equal. None as for `answer_check_header`.")
    reference: str | None = Field(
        default=None, description="Answer produced: the benchmark's reference answer, beside `answer` (never shown to "
        "the model).")
    reference_at_proof: int | None = Field(
        default=None, ge=0, description="Answer produced: the smallest budget_at_proof of an attempt whose answer the "
        "check found 'equal' (proved with the reference answer); None when none did.")
    judge: JudgeRecord | None = Field(
        default=None, description="Who had the last word on its proofs (lean.judge): burnqed (and why) or "
        "comparator (toolchain, --paranoid, the kernels that replayed, its verdict; `alarm` when it refused a proof "
        "burnqed counted). None in results written before the judge was recorded.")
    lemma_graph: LemmaGraph | None = Field(
        default=None, description="Sketch mode with search.sketch_depth above 1: the lemma graph of the attempt that "
        "proved it (else its first attempt): its goals, sketches and which proof closed what (docs/search.md, "
        "'Recursive sketches'). None otherwise, and in results before schema 12.")


class GroupRow(SolveRate):
    """pass@N of one group of the benchmark's theorems (their `source`, e.g. the generated world vs the bundled
    hand-written theorems) at one budget."""

    model_config = ConfigDict(extra="forbid")

    group: str = Field(description="The theorems' source in the benchmark index ('none' when unset).")


class EvalResult(BaseModel):
    """One eval: a benchmark × budgets × pass@N (docs/search.md)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = Field(
        default_factory=lambda: EVAL_MIGRATIONS.current, ge=1,
        description="Version of this file format. A file of an earlier version is read through the migrations of "
        "`eval.migrations` (one step per version: 2 added mode, budget_unit, tokens and lean_calls; 3 wall_s, resumed "
        "and per theorem detail, edges and the time split; 4 burnqed_version, pantograph_version and per theorem "
        "source; 5 per theorem curve, training_check and not_evaluated; 6 tasks and per theorem task and answer; 7 "
        "the answer check; 8 settings recorded every configuration key of eval's identity; 9 per theorem "
        "answer_check_header and proof_header; 10 settings record those keys in their `section.key` map, `config`), "
        "so that the record read is always of the current version.",
    )
    iteration: int = Field(ge=0, description="Expert-iteration index of the evaluated model.")
    timestamp: AwareDatetime = Field(description="When the result was built, ISO 8601 in UTC.")
    git_commit: str | None = Field(description="Commit of the burnqed checkout that ran the eval, if known.")
    config_digest: str = Field(min_length=1, description="config_digest() of the configuration used.")
    model: str = Field(min_length=1, description="The policy model (folder or served name).")
    ebm: str | None = Field(description="The value model (EBM) used to order the search; None = LLM only.")
    lean_backend: str = Field(
        min_length=1, description="Which Lean answered: 'pantograph', 'replay' for the replay server or 'minilean'."
    )
    benchmark: str = Field(min_length=1, description="Name of the theorem index evaluated.")
    total: int = Field(ge=0, description="Theorems evaluated: the benchmark's theorems, the denominator of every rate "
                       "(its declarations that are none of them are `not_evaluated`).")
    pass_n: int = Field(ge=1, description="Independent search attempts per theorem.")
    mode: SearchMode = Field(default=SearchMode.STEP, description="The search mode (search.mode) of every attempt.")
    budget_unit: BudgetUnit = Field(
        default="expansions", description="What a budget counts: node expansions (step; sketch: planner requests and "
        "subgoal expansions or rounds) or proofs sampled."
    )
    budgets: list[BudgetRow] = Field(min_length=1, description="One row per budget, ascending.")
    cumulative_solved: int = Field(ge=0, description="Theorems solved at any budget (= at the largest).")
    solved_names: list[str] = Field(description="Names solved at the largest budget, sorted.")
    per_theorem: list[PerTheorem] = Field(description="One entry per theorem, in benchmark order.")
    failure_reasons: dict[str, int] = Field(
        description="Unsolved theorems counted by failure reason ('unknown' when no attempt gave one)."
    )
    groups: list[GroupRow] = Field(
        default_factory=list,
        description="pass@N per theorem source and budget (empty in results written before groups existed).",
    )
    tasks: list[GroupRow] = Field(
        default_factory=list,
        description="pass@N per answer task and budget ('answer produced', 'answer given', 'no answer': "
        "`PerTheorem.task`), when some theorem of the benchmark has an answer slot; empty otherwise, and in results "
        "before schema 6. The produced task is counted twice: 'answer produced' (proved, whatever the answer) and "
        "'answer produced (reference answer)' (proved with an answer Lean showed equal to the reference; from schema "
        "7).",
    )
    seed: int | None = Field(default=None, description="policy.seed (None: a random seed, or an older result).")
    settings: EvalSettings | None = Field(
        default=None, description="The effective search and sampling settings (None in older results)."
    )
    wall_s: float | None = Field(
        default=None, ge=0.0, description="Wall time of the eval command that built this result, seconds (a resumed "
        "eval counts its own run only; None in older results)."
    )
    resumed: int = Field(
        default=0, ge=0, description="Theorem attempts taken from an interrupted earlier run (eval --resume)."
    )
    burnqed_version: str | None = Field(
        default=None, description="Version of the burnqed that ran the eval (None in results before schema 4)."
    )
    pantograph_version: str | None = Field(
        default=None, description="The Pantograph protocol version the Lean workers spoke, as their `--version` "
        "answered or lean.pantograph_version set it (`X.Y.Z`, or `X.Y.Z/vLEAN` for a build that names its Lean "
        "toolchain); minilean and the replay server answer the version they emulate. None when no worker started, "
        "and in results before schema 4."
    )
    not_evaluated: list[SkippedDeclaration] = Field(
        default_factory=list, description="The benchmark's declarations that were not evaluated, each with its file, "
        "line and reason (a statement that does not parse, a second declaration of one name or statement: "
        "`records.theorem.SkippedDeclaration`); `total` + these are the benchmark file's declarations. Filled when the "
        "benchmark is read from its files (`--theorems x.lean`); empty for a theorem index, and in results before "
        "schema 5.")
    made_from: StageInputs | None = Field(
        default=None, description="What this eval is made from: the theorem set, budgets and effective settings, the "
        "policy and value models with their stamps (burnqed.runner.reuse; None in older results)."
    )
    training_check: TrainingDataCheck | None = Field(
        default=None, description="Decontamination: the training theorems of the data the model was trained on (its "
        "export's and SFT output's completion markers name it) that restate a theorem of this eval "
        "(burnqed.data.decontaminate); None when the model names no training data, and in older results."
    )

    @model_validator(mode="before")
    @classmethod
    def _upgraded(cls, data: Any) -> Any:
        """A document as read, of an earlier schema version, made a current one (`eval.migrations`)."""
        return EVAL_MIGRATIONS.upgrade(data) if isinstance(data, dict) else data

    @field_validator("schema_version")
    @classmethod
    def _known(cls, value: int) -> int:
        if value > EVAL_MIGRATIONS.current:
            raise ValueError(f"version {value} is newer than this burnqed reads (up to {EVAL_MIGRATIONS.current}): "
                             "read it with the burnqed that wrote it")
        return value

    @field_validator("timestamp")
    @classmethod
    def _in_utc(cls, value: datetime) -> datetime:
        return value.astimezone(UTC)

    @property
    def search_label(self) -> str:
        """The search mode's label (`Mode.label`), `+repair` when failed proofs were revised with Lean's messages
        (search.repair_rounds)."""
        from burnqed.search.modes import MODES  # the search machinery: not loaded by a reader of eval.json

        repaired = self.settings is not None and bool(self.settings.repair_rounds)
        label = MODES[self.mode].label
        return f"{label}+repair" if repaired else label

    @property
    def declarations(self) -> int:
        """The benchmark's declarations: the theorems evaluated and those not evaluated."""
        return self.total + len(self.not_evaluated)

    @property
    def has_tokens(self) -> bool:
        """Every row records its tokens (results from before token counting do not)."""
        return all(row.tokens is not None for row in self.budgets)

    @property
    def has_curves(self) -> bool:
        """Every theorem records its curve (`PerTheorem.curve`): its cost can be read at any budget up to the largest,
        not only at the rungs (results before schema 5 do not)."""
        return bool(self.per_theorem) and all(
            t.curve is not None and t.tokens is not None and t.lean_calls is not None for t in self.per_theorem)

    def mean_curve(self, measure: Literal["tokens", "lean_calls"]) -> list[float]:
        """Generated tokens (or Lean calls) per theorem, all attempts together, within each budget 1, 2, … (entry
        b - 1), from the per-theorem curves, up to one past where the longest ended (beyond that, up to the largest
        budget, the last entry holds: every attempt had ended); ValueError without curves (`has_curves`)."""
        if not self.has_curves:
            raise ValueError("this eval result records no per-theorem curves (written before schema 5)")
        which = 0 if measure == "tokens" else 1
        curves = [(t.curve, (t.tokens, t.lean_calls)) for t in self.per_theorem
                  if t.curve is not None and t.tokens is not None and t.lean_calls is not None]
        length = min(self.budgets[-1].budget, max(len(curve.tokens) for curve, _ in curves) + 1)
        return [sum(curve.at(b, totals)[which] for curve, totals in curves) / self.total for b in range(1, length + 1)]

    def budget_row(self, budget: int) -> BudgetRow | None:
        """The row of `budget`, if this result has one."""
        return next((row for row in self.budgets if row.budget == budget), None)

    def solved_at(self, budget: int) -> set[str]:
        """Names solved within `budget` (any budget, not only the rungs: read from per_theorem)."""
        return {
            t.name for t in self.per_theorem if t.budget_at_proof is not None and t.budget_at_proof <= budget
        }


# -------------------------------------------------------------------------------------------- files


def load_eval_result(path: Path | str, *, store: storage.Store) -> EvalResult:
    """Read an eval result JSON file (a path or URI); InputError naming the file on any problem."""
    hint = "format: docs/search.md, `burnqed eval`"
    if isinstance(path, Path):
        return read_json_model(path, EvalResult, "eval result", hint=hint)
    return store.read_model(path, EvalResult, "eval result", hint=hint)


def write_eval_result(result: EvalResult, path: Path | str, *, store: storage.Store) -> None:
    """Write `result` as indented JSON (to a path or URI), atomically."""
    text = result.model_dump_json(indent=2) + "\n"
    if isinstance(path, Path):
        write_text_atomic(path, text)
    else:
        store.write_bytes(path, text.encode())

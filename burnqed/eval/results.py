"""Eval results (docs/search.md): pass@N over a ladder of budgets, from the search's per-attempt `TheoremResult`s, as
one JSON document per eval. A budget is in the unit of the search mode (`budget_unit`): node expansions for step
mode, proofs sampled for whole and hybrid modes; every budget row also says what it cost in generated tokens and
Lean requests, the unit-free yardstick that `compare` uses across modes.

An eval runs `pass_n` independent search attempts per theorem with the largest budget; this module
only scores what they found (no search, no Lean):

    result = build_eval_result(attempts, [10, 30, 60], benchmark="minif2f-test", model="tiny", ebm=None,
                               lean_backend="replay", iteration=0, config_digest=config_digest(cfg),
                               git_commit=git_commit(), theorem_names=names)
    write_eval_result(result, path, store=store)
    print(render_eval_table(load_eval_result(path, store=store)))

Definitions (for theorem t, budget b; an attempt "proves t within b" when it proved t with
`budget_at_proof <= b`). The N attempts are read as a race run side by side: the first proof ends it,
otherwise it lasts until the last attempt gives up.

- solved(t, b): some attempt proves t within b (pass@N, union over attempts). Monotone in b.
- winner(t, b): among the attempts proving t within b, the one with the smallest `budget_at_proof`
  (ties: smaller `time_s`, then the earlier pass). Its proof is the one reported.
- an attempt's nodes at b: `budget_at_proof` if it proves t within b, else `min(b, nodes_expanded)`
  (what it had spent when it stopped or when it crossed the budget).
- an attempt's time at b: `time_s` if it proves t within b or stopped within b expansions, else the
  pro-rata estimate `time_s * b / nodes_expanded` (the search reports its wall time only at its end).
- nodes_used(t, b): the winner's `budget_at_proof` if solved, else the largest attempt's nodes at b.
  Always <= b and non-decreasing in b, so `avg_nodes` is on the scale of the budget at every rung. ("nodes" is
  budget spent in the mode's unit: expansions, or proofs sampled.)
- an attempt's tokens (Lean requests) at b: what its search had generated (sent) when it had spent b or ended,
  whichever came first (the search records this at each budget: `TheoremResult.usage`; results without that
  record fall back to its totals, pro rata beyond b). tokens(t, b) sums the attempts: every attempt ran.
- time(t, b): the winner's `time_s` if solved (with `search.stop_at_first`, the default, a search
  ends at its proof, so this is the time to the proof), else the largest attempt's time at b.
- avg_nodes, avg_time_s, median_time_s: mean/median over all theorems of the benchmark, solved or not.
- per_theorem describes the largest budget; `failure_reason` is the most frequent reason across the
  attempts (an attempt that proved only beyond the budget counts as `max_nodes`; ties go to the reason
  seen in the earlier pass), `detail` says what happened in the first attempt with that reason (Lean's message
  for a start error, "the policy proposed nothing", the budget or time limit reached: `eval.theorems`). Edges,
  policy/Lean/value time and tokens sum the attempts. `failure_reasons` counts the unsolved theorems by reason.
"""

from __future__ import annotations

import statistics
import subprocess
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from burnqed import storage
from burnqed.config import digest as digests
from burnqed.prompt import SearchMode
from burnqed.records import FailureReason, TheoremResult
from burnqed.storage import read_json_model, write_text_atomic

UNKNOWN_REASON = "unknown"  # failure_reasons key of an unsolved theorem whose attempts gave no reason
REPLAY_MODULE = "burnqed.lean.replay"
MINILEAN_MODULE = "minilean"
BudgetUnit = Literal["expansions", "proofs"]


def budget_unit(mode: SearchMode) -> BudgetUnit:
    """What a budget counts in `mode`."""
    return "expansions" if mode is SearchMode.STEP else "proofs"


class BudgetRow(BaseModel):
    """pass@N at one budget."""

    model_config = ConfigDict(extra="forbid")

    budget: int = Field(gt=0, description="Budget per attempt, in the result's budget_unit.")
    solved: int = Field(ge=0, description="Theorems some attempt proved with budget_at_proof <= budget.")
    total: int = Field(ge=0, description="Theorems in the benchmark.")
    rate: float = Field(ge=0.0, le=1.0, description="solved / total, a fraction in [0, 1] (0 when total is 0).")
    avg_nodes: float = Field(ge=0.0, description="Mean nodes_used at this budget over all theorems (see module doc).")
    avg_time_s: float = Field(ge=0.0, description="Mean time at this budget over all theorems, seconds.")
    median_time_s: float = Field(ge=0.0, description="Median time at this budget over all theorems, seconds.")
    tokens: int | None = Field(
        default=None, ge=0,
        description="Tokens generated at this budget, summed over theorems and attempts (None: not recorded).",
    )
    lean_calls: int | None = Field(
        default=None, ge=0, description="Lean requests at this budget, summed over theorems and attempts."
    )
    avg_tokens: float | None = Field(
        default=None, ge=0.0, description="tokens / total: generated tokens per theorem at this budget."
    )


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
        description="When not proved, what happened (see eval.theorems.failure_detail): Lean's message for a start "
        "error, 'the policy proposed nothing', the budget or the time limit reached. None in results before schema 3.",
    )
    edges: int | None = Field(default=None, ge=0, description="Tactics applied (trajectory rows) over its attempts.")
    policy_s: float | None = Field(default=None, ge=0.0, description="Time its attempts waited for the policy.")
    lean_s: float | None = Field(default=None, ge=0.0, description="Time its attempts waited for Lean.")
    value_s: float | None = Field(default=None, ge=0.0, description="Time its attempts waited for the value model.")


class GroupRow(BaseModel):
    """pass@N of one group of the benchmark's theorems (their `source`, e.g. the generated world vs the bundled
    hand-written theorems) at one budget."""

    model_config = ConfigDict(extra="forbid")

    group: str = Field(description="The theorems' source in the benchmark index ('none' when unset).")
    budget: int = Field(gt=0, description="Expansion budget.")
    solved: int = Field(ge=0, description="Theorems of the group solved within the budget.")
    total: int = Field(ge=0, description="Theorems in the group.")
    rate: float = Field(ge=0.0, le=1.0, description="solved / total.")


class EvalSettings(BaseModel):
    """The effective search and sampling settings of an eval: with the seed and the model, what a rerun needs."""

    model_config = ConfigDict(extra="forbid")

    backend: str = Field(description="policy.backend: 'local' (in-process) or 'sglang'.")
    prompt_format: str = Field(description="policy.prompt_format.")
    num_candidates: int = Field(
        description="Completions per policy request: tactics per expanded node (step), proofs per request (whole), "
        "proofs per round at the root (hybrid)."
    )
    temperature: float = Field(description="Sampling temperature.")
    top_p: float = Field(description="Nucleus sampling mass.")
    max_new_tokens: int = Field(description="Token limit per completion (hybrid: at the root).")
    max_nodes: int | None = Field(
        default=None, description="Expansion budget of each attempt (step mode: the largest eval budget)."
    )
    max_proofs: int | None = Field(
        default=None, description="Proofs-sampled budget of each attempt (whole and hybrid: the largest eval budget)."
    )
    max_depth: int | None = Field(default=None, description="search.max_depth (step and hybrid).")
    timeout_s: float = Field(description="search.timeout_s per theorem.")
    alpha: float | None = Field(default=None, description="search.alpha, length normalisation of log-probs (step).")
    expand_batch: int | None = Field(default=None, description="search.expand_batch (step).")
    probe_tactics: list[str] = Field(default_factory=list, description="search.probe_tactics (step).")
    verify: bool = Field(description="search.verify (proofs compiled with frontend.process).")
    stop_at_first: bool = Field(description="search.stop_at_first.")
    value_weight: float | None = Field(
        default=None, description="search.value_weight (step; used only with a value model)."
    )
    value_ramp_depth: int | None = Field(default=None, description="search.value_ramp_depth (step).")
    concurrency: int = Field(description="Theorems searched at once.")


class EvalResult(BaseModel):
    """One eval: a benchmark × budgets × pass@N (docs/search.md)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1, 2, 3] = Field(
        default=3, description="Version of this file format (2 added mode, budget_unit, tokens and lean_calls; 3 "
        "added wall_s, resumed and per theorem detail, edges and the time split)."
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
    total: int = Field(ge=0, description="Theorems in the benchmark.")
    pass_n: int = Field(ge=1, description="Independent search attempts per theorem.")
    mode: SearchMode = Field(default=SearchMode.STEP, description="The search mode (search.mode) of every attempt.")
    budget_unit: BudgetUnit = Field(
        default="expansions", description="What a budget counts: node expansions (step) or proofs sampled."
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

    @field_validator("timestamp")
    @classmethod
    def _in_utc(cls, value: datetime) -> datetime:
        return value.astimezone(UTC)

    @property
    def has_tokens(self) -> bool:
        """Every row records its tokens (results from before token counting do not)."""
        return all(row.tokens is not None for row in self.budgets)

    def budget_row(self, budget: int) -> BudgetRow | None:
        """The row of `budget`, if this result has one."""
        return next((row for row in self.budgets if row.budget == budget), None)

    def solved_at(self, budget: int) -> set[str]:
        """Names solved within `budget` (any budget, not only the rungs: read from per_theorem)."""
        return {
            t.name for t in self.per_theorem if t.budget_at_proof is not None and t.budget_at_proof <= budget
        }


# ------------------------------------------------------------------------------------------- scoring


def _proves_within(attempt: TheoremResult, budget: int) -> bool:
    return attempt.proved and attempt.budget_at_proof is not None and attempt.budget_at_proof <= budget


def _attempt_nodes(attempt: TheoremResult, budget: int) -> int:
    if _proves_within(attempt, budget):
        assert attempt.budget_at_proof is not None
        return attempt.budget_at_proof
    return min(budget, attempt.spent())


def _attempt_time(attempt: TheoremResult, budget: int) -> float:
    if _proves_within(attempt, budget) or attempt.spent() <= budget:
        return attempt.time_s
    return attempt.time_s * budget / attempt.spent()


def _attempt_cost(attempt: TheoremResult, budget: int) -> tuple[int, int]:
    """(tokens, Lean requests) of an attempt at `budget`, per the module doc."""
    recorded = next((usage for usage in attempt.usage if usage.budget == budget), None)
    if recorded is not None:
        return recorded.tokens, recorded.lean_calls
    spent = attempt.spent()
    if spent <= budget or spent == 0:
        return attempt.tokens, attempt.lean_calls
    return round(attempt.tokens * budget / spent), round(attempt.lean_calls * budget / spent)


def _winner(attempts: Sequence[TheoremResult], budget: int) -> TheoremResult | None:
    proving = [(a.budget_at_proof or 0, a.time_s, k, a) for k, a in enumerate(attempts) if _proves_within(a, budget)]
    return min(proving, key=lambda item: item[:3])[3] if proving else None


def _nodes_and_time(attempts: Sequence[TheoremResult], budget: int) -> tuple[TheoremResult | None, int, float]:
    """(winner, nodes_used, time) of one theorem at one budget, per the module doc."""
    winner = _winner(attempts, budget)
    if winner is not None:
        return winner, _attempt_nodes(winner, budget), winner.time_s
    nodes = max(_attempt_nodes(a, budget) for a in attempts)
    time_s = max(_attempt_time(a, budget) for a in attempts)
    return None, nodes, time_s


def _failure_reason(attempts: Sequence[TheoremResult], budget: int) -> FailureReason | None:
    reasons: list[FailureReason] = []
    for attempt in attempts:
        if attempt.proved:  # proved, but only beyond the budget
            reasons.append(FailureReason.MAX_NODES if attempt.mode is SearchMode.STEP else FailureReason.MAX_PROOFS)
        elif attempt.failure_reason is not None:
            reasons.append(attempt.failure_reason)
    if not reasons:
        return None
    counts = Counter(reasons)
    best = max(counts.values())
    return next(reason for reason in reasons if counts[reason] == best)  # ties: the earlier pass


def _detail(attempts: Sequence[TheoremResult], reason: FailureReason) -> str:
    """What happened in the first attempt that failed for `reason` (an attempt proving beyond the budget counts as
    the budget reached)."""
    from burnqed.eval.theorems import failure_detail

    for attempt in attempts:
        if attempt.proved and reason in (FailureReason.MAX_NODES, FailureReason.MAX_PROOFS):
            return f"proved only after {attempt.budget_at_proof} {budget_unit(attempt.mode)}, beyond the largest budget"
        if attempt.failure_reason is reason:
            return failure_detail(attempt)
    return reason.value


def validate_budgets(budgets: Sequence[int]) -> list[int]:
    """`budgets` as a list; ValueError unless non-empty, positive, unique and ascending."""
    values = list(budgets)
    if not values:
        raise ValueError("budgets is empty: give at least one expansion budget")
    if any(b <= 0 for b in values):
        raise ValueError(f"budgets must be positive, got {values}")
    if any(later <= earlier for earlier, later in pairwise(values)):
        raise ValueError(f"budgets must be unique and ascending, got {values}")
    return values


def _by_theorem(
    attempts: Sequence[Sequence[TheoremResult]], theorem_names: Sequence[str]
) -> dict[str, list[TheoremResult]]:
    """name → its attempts in pass order; ValueError unless each name appears exactly once per pass."""
    if not attempts:
        raise ValueError("no attempts: pass_n must be at least 1")
    names = list(theorem_names)
    duplicates = sorted(name for name, count in Counter(names).items() if count > 1)
    if duplicates:
        raise ValueError(f"theorem_names has duplicates: {duplicates}")
    table: dict[str, list[TheoremResult]] = {name: [] for name in names}
    for k, results in enumerate(attempts):
        seen: Counter[str] = Counter(r.name for r in results)
        unknown = sorted(set(seen) - set(table))
        missing = [name for name in names if name not in seen]
        repeated = sorted(name for name, count in seen.items() if count > 1)
        if unknown or missing or repeated:
            problems = [
                f"{label} {values[:5]}{' …' if len(values) > 5 else ''}"
                for label, values in (("missing", missing), ("repeated", repeated), ("not in the benchmark", unknown))
                if values
            ]
            raise ValueError(f"pass {k}: each theorem must appear exactly once: " + "; ".join(problems))
        for result in results:
            if result.proved and result.budget_at_proof is None:
                raise ValueError(f"pass {k}: {result.name} is proved but has no budget_at_proof")
            table[result.name].append(result)
    return table


def build_eval_result(
    attempts: Sequence[Sequence[TheoremResult]],
    budgets: Sequence[int],
    *,
    benchmark: str,
    model: str,
    ebm: str | None,
    lean_backend: str,
    iteration: int,
    config_digest: str,
    git_commit: str | None,
    theorem_names: Sequence[str],
    timestamp: datetime | None = None,
    theorem_sources: Mapping[str, str | None] | None = None,
    seed: int | None = None,
    settings: EvalSettings | None = None,
    mode: SearchMode = SearchMode.STEP,
    wall_s: float | None = None,
    resumed: int = 0,
) -> EvalResult:
    """Score `attempts` (attempts[k] = the k-th pass's results, one per theorem) at every budget.

    Raises ValueError when a pass misses, repeats or adds a theorem, when a proved result has no
    budget_at_proof, or when budgets are not positive, unique and ascending. `timestamp` defaults to now.
    `theorem_sources` (name → source) gives the per-group rows; `seed` and `settings` are recorded.
    """
    rungs = validate_budgets(budgets)
    table = _by_theorem(attempts, theorem_names)
    total = len(table)
    rows: list[BudgetRow] = []
    for budget in rungs:
        scored = [_nodes_and_time(tries, budget) for tries in table.values()]
        solved = sum(1 for winner, _, _ in scored if winner is not None)
        nodes = [float(n) for _, n, _ in scored]
        times = [t for _, _, t in scored]
        costs = [_attempt_cost(attempt, budget) for tries in table.values() for attempt in tries]
        tokens = sum(t for t, _ in costs)
        rows.append(
            BudgetRow(
                budget=budget,
                solved=solved,
                total=total,
                rate=solved / total if total else 0.0,
                avg_nodes=statistics.fmean(nodes) if nodes else 0.0,
                avg_time_s=statistics.fmean(times) if times else 0.0,
                median_time_s=statistics.median(times) if times else 0.0,
                tokens=tokens,
                lean_calls=sum(c for _, c in costs),
                avg_tokens=tokens / total if total else 0.0,
            )
        )
    largest = rungs[-1]
    per_theorem: list[PerTheorem] = []
    reasons: Counter[str] = Counter()
    for name, tries in table.items():
        winner, nodes_used, time_s = _nodes_and_time(tries, largest)
        reason = None if winner is not None else _failure_reason(tries, largest)
        if winner is None:
            reasons[reason.value if reason is not None else UNKNOWN_REASON] += 1
        per_theorem.append(
            PerTheorem(
                name=name,
                proved=winner is not None,
                budget_at_proof=winner.budget_at_proof if winner is not None else None,
                nodes_used=nodes_used,
                time_s=time_s,
                failure_reason=reason,
                proof=winner.proof if winner is not None else None,
                attempts=len(tries),
                attempts_proved=sum(1 for a in tries if _proves_within(a, largest)),
                tokens=sum(_attempt_cost(a, largest)[0] for a in tries),
                lean_calls=sum(_attempt_cost(a, largest)[1] for a in tries),
                detail=None if reason is None else _detail(tries, reason),
                edges=sum(a.edges for a in tries),
                policy_s=sum(a.policy_s for a in tries),
                lean_s=sum(a.lean_s for a in tries),
                value_s=sum(a.value_s for a in tries),
            )
        )
    solved_names = sorted(t.name for t in per_theorem if t.proved)
    groups: list[GroupRow] = []
    if theorem_sources is not None:
        members: dict[str, list[str]] = {}
        for name in table:
            members.setdefault(theorem_sources.get(name) or "none", []).append(name)
        for group, names in members.items():
            for budget in rungs:
                solved = sum(1 for name in names if _winner(table[name], budget) is not None)
                groups.append(GroupRow(group=group, budget=budget, solved=solved, total=len(names),
                                       rate=solved / len(names)))
    return EvalResult(
        iteration=iteration,
        timestamp=timestamp if timestamp is not None else datetime.now(UTC),
        git_commit=git_commit,
        config_digest=config_digest,
        model=model,
        ebm=ebm,
        lean_backend=lean_backend,
        benchmark=benchmark,
        total=total,
        pass_n=len(attempts),
        mode=mode,
        budget_unit=budget_unit(mode),
        budgets=rows,
        cumulative_solved=len(solved_names),
        solved_names=solved_names,
        per_theorem=per_theorem,
        failure_reasons=dict(sorted(reasons.items(), key=lambda item: (-item[1], item[0]))),
        groups=groups,
        seed=seed,
        settings=settings,
        wall_s=wall_s,
        resumed=resumed,
    )


# ------------------------------------------------------------------------------------------ metadata


def config_digest(config: BaseModel) -> str:
    """The configuration's digest as results record it: `burnqed.config.digest.config_digest` (one definition for
    eval results and the cluster's workflows)."""
    return digests.config_digest(config)


def git_commit(path: Path | None = None) -> str | None:
    """`git rev-parse HEAD` in `path` (default: the current directory); None when it is not a git
    checkout, git is missing or does not answer within 10 s. Never raises."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=path,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    if done.returncode != 0 or len(commit) != 40 or any(c not in "0123456789abcdef" for c in commit):
        return None
    return commit


def lean_backend_label(command: Sequence[str]) -> str:
    """The `lean_backend` of results produced with the Lean worker argv `command`: 'replay' for the
    embedded replay server, 'minilean' for minilean (`-m minilean`), else 'pantograph'."""
    if any(a == "-m" and b == MINILEAN_MODULE for a, b in pairwise(command)):
        return "minilean"  # also with the replay server as its fallback (minilean/fallback.py)
    if any(REPLAY_MODULE in part for part in command):
        return "replay"
    return "pantograph"


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


# ------------------------------------------------------------------------------------------- render


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 100 else f"{value:.0f} s"


def render_eval_table(result: EvalResult, width: int = 100) -> str:
    """A plain-text table: one row per budget (solved/total, rate, budget used, times, tokens per theorem, Lean
    requests), then a footer line with the cumulative count and the failure reasons."""
    from rich.table import Table

    ebm = f" + EBM {result.ebm}" if result.ebm else ""
    table = Table(
        title=f"{result.benchmark} · {result.model}{ebm} · {result.mode} (budget in {result.budget_unit}) · "
        f"pass@{result.pass_n} · iter {result.iteration} · {result.lean_backend}",
        title_justify="left",
    )
    used = "avg nodes" if result.budget_unit == "expansions" else "avg proofs"
    for header in ("budget", "solved", "rate", used, "avg time", "median time",
                   "tokens/thm", "Lean calls"):
        table.add_column(header, justify="right")
    for row in result.budgets:
        table.add_row(
            str(row.budget),
            f"{row.solved}/{row.total}",
            f"{100 * row.rate:.1f} %",
            f"{row.avg_nodes:.1f}",
            _seconds(row.avg_time_s),
            _seconds(row.median_time_s),
            "–" if row.avg_tokens is None else f"{row.avg_tokens:.0f}",
            "–" if row.lean_calls is None else str(row.lean_calls),
        )
    reasons = ", ".join(f"{reason} {count}" for reason, count in result.failure_reasons.items()) or "none"
    footer = f"cumulative solved: {result.cumulative_solved}/{result.total}; failures: {reasons}\n"
    largest = result.budgets[-1].budget
    by_group = [row for row in result.groups if row.budget == largest]
    if len(by_group) > 1:
        footer += "by source at budget {}: {}\n".format(
            largest, ", ".join(f"{row.group} {row.solved}/{row.total} ({100 * row.rate:.1f} %)" for row in by_group))
    if result.settings is not None:
        s = result.settings
        footer += (f"seed {result.seed if result.seed is not None else 'random'} · {result.mode} search · "
                   f"{s.num_candidates} candidates at T {s.temperature:g} · top_p {s.top_p:g}\n")
    return to_text(table, width) + footer


def to_text(renderable: object, width: int) -> str:
    """Render a rich renderable to plain text (no colour, no terminal needed)."""
    import io

    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, force_terminal=False, legacy_windows=False)
    console.print(renderable)
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())

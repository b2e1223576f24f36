"""The eval stage (`burnqed eval`): every theorem of a benchmark, `pass_n` independent searches with the largest budget,
scored at every budget (docs/search.md, "`burnqed eval` and `burnqed compare`").

    settings = EvalJobSettings.from_config(cfg, [100, 300, 600])     # at the command layer
    result = await eval_job(index, settings, pass_n=1, pool=pool, pool_size=4, policy=policy, store=store)

A search stopped at a smaller budget b would have found its proof iff it did within b, so one search per attempt
answers every budget. Every proof counted is compiled, whatever `search.verify` says; every answer a proof of an
answer-produced theorem gave is then judged against the reference (`check_answers`). With trajectories, each
finished theorem is committed as it goes and `resume=True` scores those (each committed proof compiled again first,
`recheck_committed`: a part is a file anyone can edit) and searches the rest; each pass prefix records the eval's
identity (`_EVAL.json`), which a resume must match, and a prefix that holds theorems is refused without `resume`
(`InputError`) before any search starts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from burnqed.base.progress import progress_bar
from burnqed.config import Config, PipelineConfig
from burnqed.config.identity import default_values, identity_values
from burnqed.config.search import MAX_BUDGET
from burnqed.errors import InputError
from burnqed.eval.judging import alarm_lines, judge_line, with_judges
from burnqed.eval.pass_at import AnswerChecks, answer_task, build_eval_result, validate_budgets
from burnqed.eval.rendering import render_eval_table
from burnqed.eval.result import (
    EvalResult,
    config_digest,
    git_commit,
    load_eval_result,
    write_eval_result,
)
from burnqed.eval.settings import ENGINE_FIELDS, EvalSettings, recorded_settings
from burnqed.layout import trajectories_beside
from burnqed.lean.backend import lean_backend_label
from burnqed.lean.comparator import ComparatorSettings, JudgeRecord
from burnqed.lean.env import WorkerPool
from burnqed.lean.guard import TacticGuard
from burnqed.lean.soundness import assembled_header, check_lemmas, check_path, check_proof_text, stored_lemmas
from burnqed.policy.base import Policy
from burnqed.provenance import StageInputs
from burnqed.records.enums import SearchMode
from burnqed.records.results import FailureReason, TheoremResult
from burnqed.records.theorem import SkippedDeclaration, Theorem, TheoremIndex
from burnqed.search.answer import AnswerSlot
from burnqed.search.answer_check import AnswerJudgement, judge_answer
from burnqed.search.judge import JudgeSettings, judge_passes
from burnqed.search.lemmas import STATS_KEY as LIBRARY_STATS
from burnqed.search.lemmas import LibrarySource
from burnqed.search.modes import MODES, SearchSettings, mode_of
from burnqed.search.monitor import SearchMonitor, SolveTally, render_throughput
from burnqed.search.subgoal_cache import record_stats
from burnqed.search.value import ValueFn
from burnqed.stages.search import JobSettings, new_run_id, search_into
from burnqed.storage import Store, is_remote, join, normalize
from burnqed.trajectory.reader import committed_parts, is_complete
from burnqed.trajectory.writer import TrajectoryWriter

log = logging.getLogger(__name__)
OPEN_ANSWER = "open_answer"  # a not-evaluated theorem's reason: its answer is open and the mode cannot produce it


def eval_settings(backend: str, settings: SearchSettings, concurrency: int) -> EvalSettings:
    """The effective settings an eval ran with (recorded in its result): every field of the engine's settings that
    `EvalSettings` declares under the same name (`ENGINE_FIELDS`; a tuple as a list), with the sampling, and the part
    its mode writes (`Mode.record`: the repair, a sketch's subgoal engine); fields of other modes stay unset."""
    sampling = settings.sampling
    common = {"backend": backend, "temperature": sampling.temperature, "top_p": sampling.top_p,
              "top_k": sampling.top_k, "min_p": sampling.min_p, "repetition_penalty": sampling.repetition_penalty,
              "frequency_penalty": sampling.frequency_penalty, "presence_penalty": sampling.presence_penalty,
              "concurrency": concurrency, "prompt_format": str(settings.fmt)}
    for field in dataclasses.fields(settings):
        if field.name in ENGINE_FIELDS:
            value = getattr(settings, field.name)
            common[field.name] = list(value) if isinstance(value, tuple) else value
    recorded = mode_of(settings).record(settings, common, lambda engine: eval_settings(
        backend, engine, concurrency).model_dump(exclude_unset=True))
    return EvalSettings(**recorded)


def pass_engine(engine: SearchSettings, k: int) -> SearchSettings:
    """The engine settings of pass `k`: its own seeds (`attempt`), and in sketch mode a subgoal cache and a lemma
    source (over the library frozen at the eval's start: `eval.lemma_library.attach_library`) of its own
    (`Mode.for_pass`), so the passes of pass@n stay independent searches."""
    settings: SearchSettings = mode_of(engine).for_pass(engine, k)
    return settings


@dataclass(frozen=True, slots=True)
class EvalJobSettings:
    """What the eval stage reads from the configuration, built once by the command layer
    (`EvalJobSettings.from_config`): the search job's settings at the eval's budgets, and the facts its result
    records."""

    budgets: tuple[int, ...]  # sorted, distinct (validated)
    job: JobSettings  # search settings with the largest budget, usage marked at every budget, verify=True
    backend: str  # policy.backend
    seed: int | None  # policy.seed (None: unseeded)
    lean_backend: str  # lean_backend_label(lean.command)
    config_digest: str  # of the whole configuration the eval ran with
    identity: dict[str, object]  # search_identity(config, "eval"): the keys that shape its results, by value
    judge: JudgeSettings = dataclasses.field(default_factory=JudgeSettings)  # who has the last word (lean.judge)

    @classmethod
    def from_config(cls, config: Config, budgets: Sequence[int], *, defer_judge: bool = False) -> EvalJobSettings:
        """The eval's settings; warns that search.verify=false does not apply here (eval compiles every proof it
        counts). `defer_judge`: comparator judges in a later step (`search.judge.JudgeSettings.of`). `ValueError`
        unless the budgets are non-empty, positive, unique and ascending."""
        budgets = validate_budgets(budgets)
        if not config.search.verify:
            log.warning("eval compiles every proof it counts: search.verify=false is ignored here")
        return cls(
            budgets=tuple(budgets),
            job=JobSettings.from_config(config.search, config.policy, config.lean, budgets[-1], marks=budgets,
                                        planner=config.planner,
                                        verify=True),
            backend=config.policy.backend,
            seed=config.policy.seed,
            lean_backend=lean_backend_label(config.lean.command),
            config_digest=config_digest(config),
            identity=search_identity(config, "eval"),
            judge=JudgeSettings.of(config.lean.judged_by(), ComparatorSettings.of(config.lean),
                                   lean_backend_label(config.lean.command), deferred=defer_judge),
        )


def pass_prefix(trajectories: str, pass_n: int, k: int) -> str:
    """The trajectory prefix of pass `k`: the prefix itself for pass@1, else `pass-K` under it."""
    return trajectories if pass_n == 1 else f"{trajectories.rstrip('/')}/pass-{k}"


@dataclass(frozen=True, slots=True)
class PassState:
    """What an earlier, interrupted run of one pass left under its trajectory prefix."""

    uri: str
    run_id: str | None  # the earlier run's id (its parts must keep it); None: nothing committed yet
    done: list[TheoremResult]  # results committed for theorems of the benchmark
    complete: bool  # the prefix carries its completion marker: the pass finished


def theorem_digest(theorems: Sequence[Theorem]) -> str:
    """SHA-256 of the theorems as the stage reads them, in order: a theorem set by content. Each entry is its index
    record as read (`records.theorem.Theorem.record`: name, statement, signature, header, docstring, source, split,
    answer slot), so a header, a docstring or an answer that changes changes the set."""
    digest = hashlib.sha256()
    for theorem in theorems:
        digest.update(theorem.record.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def evaluable(index: TheoremIndex, mode: SearchMode) -> TheoremIndex:
    """`index` less the theorems `mode` refuses (`Mode.refusal`: step and sketch mode, an open answer), each moved
    to `skipped` with its reason, so the eval lists it as not evaluated and leaves it out of every rate. The same
    index when the mode refuses none."""
    refused = [(theorem, why) for theorem in index.theorems if (why := MODES[mode].refusal(theorem)) is not None]
    if not refused:
        return index
    names = {theorem.name for theorem, _ in refused}
    skipped = [SkippedDeclaration(name=theorem.name, file=theorem.source or index.name, line=None,
                                  reason=OPEN_ANSWER, detail=why, split=theorem.split) for theorem, why in refused]
    return TheoremIndex(name=index.name, theorems=[t for t in index.theorems if t.name not in names],
                        skipped=[*index.skipped, *skipped])


def search_identity(config: Config, stage: Literal["search", "eval"]) -> dict[str, object]:
    """The configuration keys that shape what `stage` finds in `search.mode`, by value (`config.identity`: the keys
    whose mark names the stage and the mode), with `policy.prompt_format` as the format the mode sends."""
    identity = identity_values(config, stage, config.search.mode)
    return {**identity, "policy.prompt_format": str(MODES[config.search.mode].fmt(config.policy))}


def parse_budgets(text: str) -> list[int]:
    """`--budgets`: comma-separated whole numbers from 1 to `MAX_BUDGET` (ASCII digits; spaces around them are
    fine), returned sorted and without repeats (they are rungs of one search); InputError naming the bad part."""
    budgets = []
    for part in text.split(","):
        if re.fullmatch(r"\s*-?[0-9]+\s*", part) is None:
            shown = f"{part.strip()!r} is not a whole number" if part.strip() else "a budget is missing"
            raise InputError(f"--budgets {text!r}: {shown}; give comma-separated budgets, e.g. 100,300,600")
        budget = int(part)
        if not 1 <= budget <= MAX_BUDGET:
            raise InputError(f"--budgets {text!r}: {budget} is out of range; a budget is 1 to {MAX_BUDGET:,} "
                             "(expansions or proofs), e.g. 100,300,600")
        budgets.append(budget)
    return sorted(set(budgets))


def eval_budgets(text: str | None, pipeline: PipelineConfig) -> list[int]:
    """The budgets of `burnqed eval --budgets TEXT`; without it `pipeline.eval_budgets`, the budgets `burnqed
    iterate` evaluates at (one default for a user's eval and the iteration's)."""
    return parse_budgets(text) if text is not None else list(pipeline.eval_budgets)


IDENTITY_NAME = "_EVAL.json"  # in each pass prefix, written before its first search: what the eval is


class EvalIdentity(BaseModel):
    """What makes an eval's results comparable: the theorem set, the budgets and mode, and the settings that change
    what a search finds. Recorded in every pass prefix (`_EVAL.json`) before the first search; a resume must match
    it field by field (`describe_difference`). Worker counts and concurrency are not part of it: a resume may
    use more or fewer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    benchmark: str = Field(description="The theorem index' name.")
    theorems: int = Field(ge=0, description="How many theorems the benchmark has.")
    theorem_digest: str = Field(description="SHA-256 of the theorems' index records as read, in order "
                                "(`theorem_digest`).")
    mode: str = Field(description="search.mode.")
    budgets: list[int] = Field(description="The budgets scored.")
    pass_n: int = Field(ge=1, description="Independent searches per theorem.")
    iteration: int = Field(ge=0, description="--iter.")
    ebm: str | None = Field(description="The value model, if any.")
    seed: int | None = Field(description="policy.seed.")
    lean_backend: str = Field(description="The Lean backend label.")
    search: dict[str, object] = Field(description="The configuration keys that shape what the eval finds in its "
                                      "mode, by value (search_identity).")
    not_evaluated: list[str] = Field(default_factory=list, description="The benchmark's declarations that are none "
                                     "of its theorems, `WHERE: REASON` each (what the result lists as not evaluated; "
                                     "not compared on resume, where the result lists them afresh).")

    @classmethod
    def of(cls, index: TheoremIndex, settings: EvalJobSettings, *, pass_n: int, iteration: int,
           ebm: str | None) -> EvalIdentity:
        """The identity of an eval of `index` with `settings` (a value model at a local path as its absolute URI,
        so that the same folder named from another working folder is the same). The theorems the mode refuses
        (`evaluable`) are among the declarations not evaluated."""
        index = evaluable(index, settings.job.mode)
        return cls(benchmark=index.name, theorems=len(index.theorems), theorem_digest=theorem_digest(index.theorems),
                   mode=str(settings.job.mode), budgets=list(settings.budgets), pass_n=pass_n, iteration=iteration,
                   ebm=_recorded_path(ebm), seed=settings.seed, lean_backend=settings.lean_backend,
                   search=settings.identity,
                   not_evaluated=[f"{skipped.where}: {skipped.reason}" for skipped in index.skipped])

    def describe_difference(self, other: EvalIdentity) -> str | None:
        """The first field where `other` (this run) differs from `self` (the interrupted run), or None. A search key
        `self` lacks (recorded before it entered eval's identity) is compared with its default
        (`provenance.StageInputs.difference`)."""
        mine, theirs = self.model_dump(mode="json"), other.model_dump(mode="json")
        for key in ("benchmark", "theorems", "theorem_digest", "mode", "budgets", "pass_n", "iteration", "ebm",
                    "seed", "lean_backend"):
            if mine[key] != theirs[key]:
                if key == "theorem_digest":
                    return "the theorem set differs (same name and count, other theorems or statements)"
                return f"{key} was {mine[key]!r}, now {theirs[key]!r}"
        return StageInputs(settings=mine["search"]).difference(StageInputs(settings=theirs["search"],
                                                                           defaults=default_values(Config)))


def _refusing(index: TheoremIndex, mode: SearchMode) -> TheoremIndex:
    """`evaluable(index, mode)`, the theorems it leaves out named in one line before any work."""
    kept = evaluable(index, mode)
    refused = [str(skipped.name) for skipped in kept.skipped if skipped.reason == OPEN_ANSWER]
    if refused:
        log.warning("%s mode does not evaluate %d theorems whose answer is open (listed as not evaluated): %s",
                    mode, len(refused), ", ".join(refused))
    return kept


def _recorded_path(uri: str | None) -> str | None:
    """`uri` as an identity records it: a local path that exists as its absolute file:// URI, else as given."""
    if uri is None or is_remote(uri) or not Path(uri.removeprefix("file://")).expanduser().exists():
        return uri
    return normalize(uri)


def read_identity(uri: str, *, store: Store) -> EvalIdentity | None:
    """The identity recorded under the pass prefix `uri`, or None when there is none."""
    path = join(uri, IDENTITY_NAME)
    if not store.exists(path):
        return None
    return store.read_model(path, EvalIdentity, "eval identity")


def record_identity(uri: str, identity: EvalIdentity, *, store: Store) -> None:
    """Write `identity` under `uri` (after `resume_state` accepted it: the same as the one there, if any)."""
    store.write_bytes(join(uri, IDENTITY_NAME), identity.model_dump_json(indent=1).encode())


def resume_state(uri: str, theorems: Sequence[Theorem], budgets: Sequence[int], mode: str, iteration: int,
                 resume: bool, *, store: Store, identity: EvalIdentity | None = None) -> PassState:
    """Read what `uri` holds and check that this eval may continue it (see the module docstring): with `identity`,
    the one the interrupted run recorded must be the same, and every theorem it committed must be in this
    benchmark (an eval on another theorem set would otherwise publish its result over the interrupted one)."""
    parts = committed_parts(uri, store=store)
    recorded = read_identity(uri, store=store) if identity is not None else None
    if not parts:  # nothing committed: a fresh start (a recorded identity is replaced), unless resuming another eval
        if resume and recorded is not None and identity is not None and \
                (difference := recorded.describe_difference(identity)):
            raise InputError(f"--trajectories-out {uri} was started by an eval that differs from this one: "
                             f"{difference}; resume with the interrupted run's theorems and configuration")
        return PassState(uri, None, [], False)
    held = sum(len(p.theorems) for p in parts)
    if not resume:
        raise InputError(f"--trajectories-out {uri} already holds {held} finished theorems of an earlier eval: "
                         "pass --resume to continue it, --force to start it over, or choose another --trajectories-out "
                         "prefix")
    if parts[0].iteration != iteration:
        raise InputError(f"--trajectories-out {uri} holds iteration {parts[0].iteration}, not --iter {iteration}: "
                         "resume with the same --iter")
    names = {t.name for t in theorems}
    done = [r for p in parts for r in p.theorems if r.name in names]
    for result in done:
        marks = [usage.budget for usage in result.usage]
        if str(result.mode) != mode or marks != list(budgets):
            raise InputError(
                f"--trajectories-out {uri}: {result.name} was evaluated in {result.mode} mode at budgets {marks}, this "
                f"eval is in {mode} mode at budgets {list(budgets)}: resume with the same --budgets and search.mode"
            )
    if recorded is not None and identity is not None and (difference := recorded.describe_difference(identity)):
        raise InputError(f"--trajectories-out {uri} holds an eval that differs from this one: {difference}; resume "
                         "with the interrupted run's theorems and configuration, or choose another --trajectories-out")
    foreign = [r.name for p in parts for r in p.theorems if r.name not in names]
    if foreign:
        raise InputError(f"--trajectories-out {uri} holds {len(foreign)} theorems that are not in this benchmark "
                         f"(e.g. {foreign[0]!r}): resume with the interrupted run's --theorems and --split, or "
                         "choose another --trajectories-out")
    return PassState(uri, parts[0].run_id, done, is_complete(uri, store=store))


def _machinery(monitors: Sequence[SearchMonitor], pass_n: int) -> str:
    """The progress line's machinery (shown with -v): which pass runs, and what its search monitor sees."""
    return (f"pass {len(monitors)}/{pass_n} · " if pass_n > 1 else "") + monitors[-1].status()


def _pass_record(eval_name: str, k: int, pass_n: int, monitor: SearchMonitor, engine: SearchSettings
                 ) -> dict[str, Any]:
    """What pass `k`'s trajectory prefix records at its end: the pass, its throughput, and in sketch mode its subgoal
    cache's counters."""
    record: dict[str, Any] = {"eval": eval_name, "pass": k, "pass_n": pass_n,
                              "throughput": monitor.report().as_dict()}
    cache = mode_of(engine).cache(engine)
    if cache is not None:
        record_stats(record, cache.stats)
    lemmas = getattr(engine, "lemmas", None)
    if isinstance(lemmas, LibrarySource):
        record[LIBRARY_STATS] = lemmas.record()
    return record


NOT_RECHECKED = "the committed proof did not check again"  # a resumed result's detail when its recheck failed


async def recheck_committed(done: Sequence[TheoremResult], theorems: Sequence[Theorem], pool: WorkerPool,
                            guard: TacticGuard) -> list[TheoremResult]:
    """The results an interrupted eval committed (`PassState.done`), each proved one compiled again before it counts:
    a trajectory part is a file anyone can edit. A proved result stays as it is only when its stored proof is its
    theorem restated (`lean.soundness.assemble_proof` of the index's theorem, the result's answer filled into an open
    slot, with its tactics and the lemmas the file declares, `stored_lemmas`), the guard allows its answer, tactics
    and lemmas (`check_lemmas`), and `lean.soundness.check_proof_text` verifies it
    on a worker of `pool` (as whole mode's compile); else it is not proved (`recheck_failed`, the detail saying why).
    The checks' Lean calls are the eval's, as the answer checks' are, not the search's: the cost figures stay those the
    search recorded (an honest resume scores what an uninterrupted eval does). A Lean that cannot start raises."""
    by_name = {theorem.name: theorem for theorem in theorems}

    async def recheck(result: TheoremResult) -> TheoremResult:
        if not result.proved:
            return result
        theorem = by_name[result.name]
        reason = await _recheck_reason(result, theorem, pool, guard)
        if reason is None:
            return result
        log.warning("%s: %s (%s); counted as not proved", result.name, NOT_RECHECKED, reason)
        return result.model_copy(update={
            "proved": False, "failure_reason": FailureReason.RECHECK_FAILED, "detail": f"{NOT_RECHECKED}: {reason}",
            "proof": None, "tactics": [], "depth": None, "budget_at_proof": None, "revision_at_proof": None,
            "answer": AnswerSlot(theorem).dropped(result.answer)})

    checked = list(await asyncio.gather(*(recheck(result) for result in done)))
    if any(result.proved for result in done):
        log.info("resumed: %d committed proofs compiled again, %d of them counted", sum(r.proved for r in done),
                 sum(r.proved for r in checked))
    return checked


async def _recheck_reason(result: TheoremResult, theorem: Theorem, pool: WorkerPool, guard: TacticGuard
                          ) -> str | None:
    """Why the proof `result` holds does not count for `theorem` (`recheck_committed`), or None when it does."""
    if not result.proof:
        return "the result is marked proved but holds no proof text"
    compiled = AnswerSlot(theorem).compiled(result.answer, guard)
    if isinstance(compiled, str):
        return compiled
    lemmas = stored_lemmas(result.proof, compiled, result.tactics)  # () when the file declares none
    if lemmas is None:
        return ("its text does not restate this theorem: it is not the index's header" +
                (" (its answer filled in)" if compiled is not theorem else "") +
                " and declaration followed by the result's tactics")
    for allowed in (check_path(result.tactics, guard), check_lemmas(lemmas, compiled, guard)):
        if not allowed.ok:
            return allowed.reason
    async with pool.lease(f"{theorem.name} (recheck)", header=theorem.header) as lean:
        verdict = await check_proof_text(lean, theorem.name, result.proof, index_header=theorem.header,
                                         header=compiled.header, lemmas=lemmas)
    return None if verdict.verified else verdict.reason or "the compile did not verify it"


async def check_answers(theorems: Sequence[Theorem], attempts: Sequence[Sequence[TheoremResult]],
                        pool: WorkerPool, guard: TacticGuard) -> AnswerChecks:
    """Every distinct answer the proofs of `theorems` whose answer is open gave, judged against its theorem's reference
    (`search.answer_check.judge_answer`, on a worker of `pool`) under the header each proof compiled under
    (`lean.soundness.assembled_header` of its text; "" when its text is no assembly of the theorem, which no check
    header matches): (name, answer) → its judgement, the first not `equal` when proofs giving one answer compiled
    under several headers; empty when no such theorem was proved."""
    open_answers = {theorem.name: theorem for theorem in theorems if AnswerSlot(theorem).judged}
    headers: dict[tuple[str, str], set[str]] = {}
    for results in attempts:
        for result in results:
            if result.proved and result.answer is not None and result.name in open_answers:
                header = assembled_header(result.proof or "", open_answers[result.name], result.tactics)
                headers.setdefault((result.name, result.answer), set()).add(header or "")
    asked = sorted(headers)

    async def judge(name: str, answer: str) -> AnswerJudgement:
        theorem = open_answers[name]
        judged = []
        async with pool.lease(f"{name} (answer check)", header=theorem.header) as lean:
            for header in sorted(headers[(name, answer)]):
                judged.append(await judge_answer(lean, theorem, answer, guard, compiled_under=header))
        return next((j for j in judged if not j.equal), judged[0])

    judged = await asyncio.gather(*(judge(name, answer) for name, answer in asked))
    return dict(zip(asked, judged, strict=True))


def _check_passes(job: JobSettings, pass_n: int, *, resume: bool, trajectories: str | None) -> None:
    """`eval_job`'s arguments checked before any work: at least one pass (a warning when greedy passes repeat one
    search), and the trajectories `--resume` continues from."""
    if pass_n < 1:
        raise ValueError("pass_n must be at least 1")
    if pass_n > 1 and job.engine.sampling.temperature == 0:
        log.warning("pass@%d with temperature 0 repeats the same greedy search %d times", pass_n, pass_n)
    if resume and not trajectories:
        raise InputError("--resume continues an eval from its --trajectories-out: give the same --trajectories-out "
                         "prefix")


async def eval_job(
    index: TheoremIndex,
    settings: EvalJobSettings,
    *,
    pass_n: int,
    pool: WorkerPool,
    pool_size: int,
    policy: Policy,
    iteration: int = 0,
    value: ValueFn | None = None,
    ebm: str | None = None,
    trajectories: str | None = None,
    resume: bool = False,
    pantograph_version: str | None = None,
    planner: Policy | None = None,
    store: Store,
) -> EvalResult:
    """Run the benchmark and build its result (see the module docstring). `pantograph_version` is the version the
    pool's workers speak (`LeanPool.version`), recorded in the result; `planner` writes sketch mode's sketches (None:
    the policy)."""
    started = time.perf_counter()
    budgets = list(settings.budgets)
    job = settings.job
    index = _refusing(index, job.mode)
    _check_passes(job, pass_n, resume=resume, trajectories=trajectories)
    run_id = new_run_id()
    # Every pass' prefix is checked before the first search starts: a refusal costs nothing.
    identity = EvalIdentity.of(index, settings, pass_n=pass_n, iteration=iteration, ebm=ebm)
    states = [resume_state(pass_prefix(trajectories, pass_n, k), index.theorems, budgets, str(job.mode),
                           iteration, resume, store=store, identity=identity) if trajectories else None
              for k in range(pass_n)]
    for state in states:
        if state is not None and not state.complete:
            record_identity(state.uri, identity, store=store)
    attempts: list[list[TheoremResult]] = []
    concurrency = job.concurrency_for(pool_size)
    monitors = [SearchMonitor(concurrency=concurrency, pool=pool, policy=policy)]  # one per pass
    tally = SolveTally()  # distinct theorems solved by any pass so far

    def on_result(result: TheoremResult) -> None:
        tally.add(result)
        advance(1)

    with progress_bar("evaluating", total=len(index.theorems) * pass_n, status=tally.line,
                      detail=functools.partial(_machinery, monitors, pass_n)) as advance:
        for k, state in enumerate(states):
            if k:
                monitors.append(SearchMonitor(concurrency=concurrency, pool=pool, policy=policy))
            monitor = monitors[-1]
            writer = None
            done: list[TheoremResult] = []
            if state is not None:
                done = await recheck_committed(state.done, index.theorems, pool, job.guard)
                tally.add(*done)
                advance(len(done))
                if state.complete:
                    attempts.append(done)
                    continue
                # One prefix per pass: a trajectory prefix holds each theorem once. Every finished theorem is its own
                # part (not search.checkpoint_every of them): an eval killed outright (SIGKILL, OOM, a lost node)
                # resumes after its last finished theorem, as its help promises; a theorem's search costs far more
                # than its two small files.
                writer = TrajectoryWriter(state.uri, run_id=state.run_id or run_id, iteration=iteration,
                                          checkpoint_every=1, store=store)
            finished = {r.name for r in done}
            # Pass k searches with its own seeds (policy.base.sample_seed's attempt): pass@n is n independent searches.
            passed = dataclasses.replace(job, engine=pass_engine(job.engine, k))
            results = await search_into(
                writer, [t for t in index.theorems if t.name not in finished], pool, policy, passed,
                pool_size=pool_size, value=value, on_result=on_result, monitor=monitor, planner=planner,
            )
            if writer is not None:
                writer.finish(_pass_record(index.name, k, pass_n, monitor, passed.engine))
            attempts.append(done + results)
            log.info("pass %d: %s", k, render_throughput(monitor.report()))
    checks = await check_answers(index.theorems, attempts, pool, job.guard)
    attempts, judges = await judge_passes(index.theorems, attempts, settings.judge)  # the judge has the last word
    return _eval_result(index, settings, attempts, checks, concurrency=concurrency, model=policy.name, ebm=ebm,
                        iteration=iteration, wall_s=time.perf_counter() - started, judges=judges,
                        resumed=sum(len(s.done) for s in states if s), pantograph_version=pantograph_version)


def _eval_result(index: TheoremIndex, settings: EvalJobSettings, attempts: list[list[TheoremResult]],
                 checks: AnswerChecks, *, concurrency: int, model: str, ebm: str | None, iteration: int,
                 wall_s: float, resumed: int, pantograph_version: str | None,
                 judges: dict[str, JudgeRecord] | None = None) -> EvalResult:
    """The result of `eval_job`'s passes (`attempts`, one list a pass) with the answers judged (`checks`) and each
    theorem's judge (`judges`, `eval.judging`): a theorem the embedded Lean cannot start (Mathlib's names and
    notation) is no 0 %: counted apart, not in a rate, and listed among the declarations not evaluated."""
    job = settings.job
    apart = needs_real_lean(attempts, settings.lean_backend)
    attempts = [[r for r in passed if r.name not in apart] for passed in attempts]
    result = build_eval_result(
        attempts,
        list(settings.budgets),
        theorem_sources={t.name: t.source for t in index.theorems},
        theorem_tasks={t.name: answer_task(t) for t in index.theorems},
        answer_checks=checks if any(AnswerSlot(t).judged for t in index.theorems) else None,
        seed=settings.seed,
        settings=recorded_settings(eval_settings(settings.backend, job.engine, concurrency), settings.identity),
        benchmark=index.name,
        model=model,
        ebm=ebm,
        lean_backend=settings.lean_backend,
        iteration=iteration,
        config_digest=settings.config_digest,
        git_commit=git_commit(),
        theorem_names=[t.name for t in index.theorems if t.name not in apart],
        mode=job.mode,
        wall_s=wall_s,
        resumed=resumed,
        pantograph_version=pantograph_version,
    )
    cannot_start = [SkippedDeclaration(name=t.name, file=t.source or index.name, line=None, reason=NEEDS_REAL_LEAN,
                                       detail=f"{settings.lean_backend} cannot start it: {apart[t.name]}")
                    for t in index.theorems if t.name in apart]
    result = result.model_copy(update={"not_evaluated": [*index.skipped, *cannot_start]})
    return with_judges(result, judges) if judges is not None else result


NEEDS_REAL_LEAN = "needs_real_lean"  # SkippedDeclaration.reason of a theorem the embedded Lean cannot start
EMBEDDED_BACKENDS = ("minilean", "replay")  # `lean_backend_label`'s: the embedded Lean, no Mathlib
NOT_ELABORATED = "does not elaborate"  # what a start error that Lean (not burnqed) gave says (lean.protocol)


def needs_real_lean(attempts: Sequence[Sequence[TheoremResult]], backend: str) -> dict[str, str]:
    """The theorems every attempt of which could not start on the embedded Lean (`backend` minilean or replay: its
    statement or header "does not elaborate" there, as Mathlib's names and notation do not: `unknown identifier
    'Differentiable'`), each with the first attempt's message; none on another Lean, where a start error is the
    theorem's own."""
    if backend not in EMBEDDED_BACKENDS:
        return {}
    tries: dict[str, list[TheoremResult]] = {}
    for passed in attempts:
        for attempt in passed:
            tries.setdefault(attempt.name, []).append(attempt)
    return {name: (found[0].detail or "").removeprefix("Lean could not start the goal: ") for name, found in
            tries.items() if all(a.failure_reason is FailureReason.START_ERROR and NOT_ELABORATED in (a.detail or "")
                                 for a in found)}


def needs_real_lean_line(result: EvalResult) -> str | None:
    """The eval's line on the theorems it counted apart as needing a real Lean (`needs_real_lean`), with the most
    common of the embedded Lean's messages; None when there is none."""
    apart = [s for s in result.not_evaluated if s.reason == NEEDS_REAL_LEAN]
    if not apart:
        return None
    said = Counter(s.detail.split(": ", 1)[-1].removeprefix("the theorem does not elaborate: ") for s in apart)
    common = "; ".join(f"{text} ({n})" for text, n in said.most_common(3))
    return (f"needs a real Lean: {len(apart)} of the {result.total + len(apart)} theorems cannot start on "
            f"{result.lean_backend} (Mathlib's names and notation: {common}), counted apart, not in the rates: "
            f"{result.cumulative_solved}/{result.total} is of the others; run them on a Lean with Mathlib "
            "(lean.command, docs/lean.md)")


def untrained_planner(config: Config, *, store: Store) -> str | None:
    """A `warning:` line before a sketch-mode eval whose planner (the policy, or planner.model when a second model
    plans) was never trained on sketches: its records say so (no SFT of its chain trained a sketch example:
    sft.sketch_examples was off; `sft.manifests.trained_formats`), so its sketches come back empty or unreadable and
    every theorem fails without one elaborated. None in another mode, for a trained planner, and for a model that
    records no SFT (a hub model: nothing is known)."""
    from burnqed.sft.manifests import trained_formats

    if not MODES[config.search.mode].plans:
        return None
    served = config.planner.served
    model = config.planner.model if served else config.policy.model
    formats = trained_formats(model, store=store)
    if formats is None or formats.sketches:
        return None
    who = "planner.model" if served else "the policy"
    return (f"warning: sketch mode, but {who} {model} was never trained on sketches (no SFT of it trained a sketch "
            "example: sft.sketch_examples was off): expect empty or unreadable sketches and no theorem proved through "
            "one; train it with sft.sketch_examples = true")


# ---------------------------------------------------------------------------------- one `burnqed eval`, both arms


def ablation_output(output: str) -> str:
    """Where an ablation writes its arm without the value model: `OUTPUT-noebm.EXT` beside `OUTPUT` (a name
    without an extension gets `-noebm.json`)."""
    stem, dot, suffix = output.rpartition(".") if output.rpartition("/")[2].count(".") else (output, "", "")
    return f"{stem}-noebm.{suffix}" if dot else f"{output}-noebm.json"


@dataclass(frozen=True, slots=True)
class EvalArm:
    """One search of the benchmark within an eval: its result file, its trajectory prefix and its value model."""

    output: str
    trajectories: str | None
    ebm: str | None


@dataclass(frozen=True, slots=True)
class EvalRequest:
    """What one `burnqed eval` was asked: its result file and the arms it runs. Without `ablation` one arm (with
    the value model `ebm`, if any); with it a second arm without the value model, written to
    `ablation_output(output)`. Each arm keeps its trajectories: under `trajectories` (the second arm's under
    `TRAJECTORIES-noebm`), else beside its result file (`layout.trajectories_beside`: `R.json` → `R.trajectories`),
    unless `keep_trajectories` is off."""

    output: str
    pass_n: int = 1
    iteration: int = 0
    ebm: str | None = None
    ablation: bool = False
    trajectories: str | None = None
    resume: bool = False
    keep_trajectories: bool = True

    def arms(self) -> list[EvalArm]:
        """The arms in the order they run: the one with the value model first."""
        arms = [EvalArm(self.output, self._prefix(self.output, self.trajectories), self.ebm)]
        if self.ablation:
            given = f"{self.trajectories.rstrip('/')}-noebm" if self.trajectories is not None else None
            arms.append(EvalArm(ablation_output(self.output), self._prefix(ablation_output(self.output), given), None))
        return arms

    def _prefix(self, output: str, given: str | None) -> str | None:
        if given is not None or not self.keep_trajectories:
            return given
        return trajectories_beside(output)

    @property
    def outputs(self) -> list[str]:
        """The result files, one per arm."""
        return [arm.output for arm in self.arms()]

    @property
    def prefixes(self) -> list[str]:
        """The trajectory prefixes, one per arm (none with `keep_trajectories` off and no `trajectories`)."""
        return [arm.trajectories for arm in self.arms() if arm.trajectories is not None]


def check_eval_request(request: EvalRequest, *, store: Store) -> None:
    """Refuse, before anything starts, an ablation without a value model, a resume without trajectories and
    result files that cannot be written or that exist and are not eval results (`InputError`, `ConfigError`)."""
    if request.ablation and request.ebm is None:
        raise InputError("--ablation compares the search with and without a value model: give --ebm too")
    if request.trajectories is not None and not request.keep_trajectories:
        raise InputError("--no-trajectories-out and --trajectories-out contradict each other: give one of them")
    if request.resume and not request.prefixes:
        raise InputError("--resume continues an eval from its trajectories, which --no-trajectories-out does not keep: "
                         "drop --no-trajectories-out")
    for uri in request.outputs:
        store.check_writable(uri)
        store.check_replaceable_file(uri, EvalResult, "an eval result")


def finished_eval(request: EvalRequest, *, store: Store) -> list[EvalResult] | None:
    """The results of every arm when all of them exist already (a finished eval is not redone), else None."""
    if not all(store.exists(uri) for uri in request.outputs):
        return None
    return [load_eval_result(uri, store=store) for uri in request.outputs]


def check_resumable(request: EvalRequest, index: TheoremIndex, settings: EvalJobSettings, *, store: Store,
                    restart: bool = False) -> None:
    """Check every pass prefix of every arm (writable; resumable by this eval, `resume_state`) before the first
    search starts, so that a refusal of the second arm costs nothing either. With `restart` (`eval --force`) the
    command starts the prefixes over instead (`outputs.restart_trajectory_prefix`): only writable is checked."""
    index = evaluable(index, settings.job.mode)
    for arm in request.arms():
        if arm.trajectories is None:
            continue
        store.check_writable(arm.trajectories, what="--trajectories-out", folder=True)
        if restart:
            continue
        identity = EvalIdentity.of(index, settings, pass_n=request.pass_n, iteration=request.iteration, ebm=arm.ebm)
        for k in range(request.pass_n):
            resume_state(pass_prefix(arm.trajectories, request.pass_n, k), index.theorems, list(settings.budgets),
                         str(settings.job.mode), request.iteration, request.resume, store=store, identity=identity)


async def eval_arms(
    request: EvalRequest,
    index: TheoremIndex,
    settings: EvalJobSettings,
    *,
    pool: WorkerPool,
    pool_size: int,
    policy: Policy,
    value: ValueFn | None,
    pantograph_version: str | None = None,
    planner: Policy | None = None,
    store: Store,
) -> list[EvalResult]:
    """Run every arm of `request` on the same Lean pool and policy, one after the other (`eval_job`); the value
    model scores only the first arm. The results are in `request.arms()` order."""
    results = []
    for arm in request.arms():
        results.append(await eval_job(
            index, settings, pass_n=request.pass_n, pool=pool, pool_size=pool_size, policy=policy,
            iteration=request.iteration, trajectories=arm.trajectories, value=value if arm.ebm is not None else None,
            ebm=arm.ebm, resume=request.resume, pantograph_version=pantograph_version, planner=planner, store=store,
        ))
    return results


def publish_eval(request: EvalRequest, results: Sequence[EvalResult], *, made_from: Sequence[StageInputs],
                 store: Store, show_theorems: bool, echo: Callable[[str], None]) -> None:
    """Write each arm's result file, recording what it is made from (`made_from`, one per arm: `runner.reuse`), and
    `echo` its table as it is written (with `show_theorems`, the first arm's per-theorem table too); after an
    ablation, the two arms side by side."""
    from burnqed.eval.compare import compare_results, render_comparison
    from burnqed.eval.per_theorem import render_not_evaluated, render_theorem_table

    for arm in request.arms():  # again: a file may have taken the name while the eval ran; never replace it
        store.check_replaceable_file(arm.output, EvalResult, "an eval result")
    for k, (arm, found, made) in enumerate(zip(request.arms(), results, made_from, strict=True)):
        result = found.model_copy(update={"made_from": made})
        write_eval_result(result, arm.output, store=store)
        echo(render_eval_table(result))
        for line in judge_texts(result):
            echo(line)
        if k == 0 and result.not_evaluated:
            echo(render_not_evaluated(result))
        if k == 0 and (apart := needs_real_lean_line(result)) is not None:
            echo(apart)
        if show_theorems and k == 0:
            echo(render_theorem_table(result))
    if len(results) == 2:
        echo(render_comparison(compare_results([("llm", results[1]), ("llm+ebm", results[0])])))


def judge_texts(result: EvalResult) -> list[str]:
    """Who counted the result's proofs, then one line per soundness alarm (`eval.judging`)."""
    said = judge_line(result)
    return ([said] if said is not None else []) + alarm_lines(result)


def render_finished(results: Sequence[EvalResult], *, show_theorems: bool) -> list[str]:
    """The tables of an eval that had finished already: each arm's, with `show_theorems` its per-theorem one too."""
    from burnqed.eval.per_theorem import render_not_evaluated, render_theorem_table

    texts = []
    for k, result in enumerate(results):
        texts.append(render_eval_table(result))
        texts.extend(judge_texts(result))
        if k == 0 and result.not_evaluated:
            texts.append(render_not_evaluated(result))
        if k == 0 and (apart := needs_real_lean_line(result)) is not None:
            texts.append(apart)
        if show_theorems:
            texts.append(render_theorem_table(result))
    return texts

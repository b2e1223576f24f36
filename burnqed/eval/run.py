"""The eval stage (`burnqed eval`): every theorem of a benchmark, `pass_n` independent searches with the largest budget,
scored at every budget (docs/search.md, "`burnqed eval` and `burnqed compare`").

    settings = EvalJobSettings.from_config(cfg, [100, 300, 600])     # at the command layer
    result = await eval_job(index, settings, pass_n=1, pool=pool, pool_size=4, policy=policy, store=store)

A search stopped at a smaller budget b would have found its proof iff it did within b, so one search per attempt
answers every budget. Every proof counted is compiled, whatever `search.verify` says; every answer a proof of an
answer-produced theorem gave is then judged against the reference (`check_answers`). With trajectories, each
finished theorem is committed as it goes and `resume=True` scores those (each committed proof compiled again first,
`eval.resume.recheck_committed`: a part is a file anyone can edit) and searches the rest; each pass prefix records
the eval's identity (`_EVAL.json`, `eval.identity.EvalIdentity`), which a resume must match (`eval.resume`), and a
prefix that holds theorems is refused without `resume` (`InputError`) before any search starts. One `burnqed eval`,
both arms of an ablation, is `eval.arms`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from burnqed.base.progress import progress_bar
from burnqed.config import Config
from burnqed.errors import InputError
from burnqed.eval.identity import OPEN_ANSWER, EvalIdentity, EvalJobSettings, evaluable, record_identity
from burnqed.eval.judging import with_judges
from burnqed.eval.metadata import git_commit
from burnqed.eval.pass_at import AnswerChecks, answer_task, build_eval_result
from burnqed.eval.result import EvalResult
from burnqed.eval.resume import pass_prefix, recheck_committed, resume_state
from burnqed.eval.settings import ENGINE_FIELDS, EvalSettings, recorded_settings
from burnqed.lean.comparator import JudgeRecord
from burnqed.lean.env import WorkerPool
from burnqed.lean.guard import TacticGuard
from burnqed.lean.stored_proof import assembled_header
from burnqed.policy.base import Policy
from burnqed.records.enums import SearchMode
from burnqed.records.results import FailureReason, TheoremResult
from burnqed.records.theorem import SkippedDeclaration, Theorem, TheoremIndex
from burnqed.search.answer import AnswerSlot
from burnqed.search.answer_check import AnswerJudgement, judge_answer
from burnqed.search.judge import judge_passes
from burnqed.search.lemmas import STATS_KEY as LIBRARY_STATS
from burnqed.search.lemmas import LibrarySource
from burnqed.search.modes import MODES, SearchSettings, mode_of
from burnqed.search.monitor import SearchMonitor, SolveTally, render_throughput
from burnqed.search.subgoal_cache import record_stats
from burnqed.search.value import ValueFn
from burnqed.stages.search import JobSettings, new_run_id, search_into
from burnqed.storage import Store
from burnqed.trajectory.writer import TrajectoryWriter

log = logging.getLogger(__name__)


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


def _refusing(index: TheoremIndex, mode: SearchMode) -> TheoremIndex:
    """`evaluable(index, mode)`, the theorems it leaves out named in one line before any work."""
    kept = evaluable(index, mode)
    refused = [str(skipped.name) for skipped in kept.skipped if skipped.reason == OPEN_ANSWER]
    if refused:
        log.warning("%s mode does not evaluate %d theorems whose answer is open (listed as not evaluated): %s",
                    mode, len(refused), ", ".join(refused))
    return kept


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
    lemmas = mode_of(engine).lemmas(engine)
    if isinstance(lemmas, LibrarySource):
        record[LIBRARY_STATS] = lemmas.record()
    return record


async def check_answers(theorems: Sequence[Theorem], attempts: Sequence[Sequence[TheoremResult]],
                        pool: WorkerPool, guard: TacticGuard) -> AnswerChecks:
    """Every distinct answer the proofs of `theorems` whose answer is open gave, judged against its theorem's reference
    (`search.answer_check.judge_answer`, on a worker of `pool`) under the header each proof compiled under
    (`lean.stored_proof.assembled_header` of its text; "" when its text is no assembly of the theorem, which no check
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

"""The eval stage: every theorem of a benchmark, `pass_n` independent searches with the largest budget,
scored at every budget (`burnqed eval`). Budgets are in the unit of `search.mode` (expansions for step, proofs
sampled for whole and hybrid); each search records what it had spent (tokens, Lean requests) at every budget.

    settings = EvalJobSettings.from_config(cfg, [100, 300, 600])     # at the command layer
    result = await eval_job(index, settings, pass_n=1, pool=pool, pool_size=4, policy=policy, store=store)

A search with budget B finds its proof after some number of expansions; the same search stopped at any
smaller budget b would have found it iff that number is ≤ b (best-first search is deterministic given
the policy's samples), so one search per attempt answers every budget. Eval compiles every proof it counts
whatever `search.verify` says (an unverified proof is never counted). Trajectories are optional
(`trajectories=URI`; with pass_n > 1, one prefix per pass under it: `pass-0`, `pass-1`, …); eval's
job is the numbers.

Resume (`resume=True`, `burnqed eval --resume`): an eval with trajectories commits each finished theorem's
result to them as it goes, so an interrupted eval continues: the theorems committed under the prefixes are not
searched again, their recorded results (with what they had spent at each budget) are scored with the new ones.
They must come from the same search mode and budgets, or the eval is refused. Without `resume`, prefixes that
already hold theorems are refused (`InputError`) before any search starts.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from burnqed.config import Config
from burnqed.errors import InputError
from burnqed.eval.results import (
    EvalResult,
    EvalSettings,
    build_eval_result,
    config_digest,
    git_commit,
    lean_backend_label,
    validate_budgets,
)
from burnqed.policy.base import Policy
from burnqed.progress import progress_bar
from burnqed.records import Theorem, TheoremIndex, TheoremResult
from burnqed.search.job import JobSettings, new_run_id, search_into
from burnqed.search.modes import SearchSettings
from burnqed.search.monitor import SearchMonitor, render_throughput
from burnqed.search.runner import WorkerPool
from burnqed.search.step import StepSettings
from burnqed.search.value import ValueFn
from burnqed.search.whole import WholeSettings
from burnqed.storage import Store
from burnqed.trajectory.reader import committed_parts, is_complete
from burnqed.trajectory.writer import TrajectoryWriter

log = logging.getLogger(__name__)


def eval_settings(backend: str, settings: SearchSettings, concurrency: int) -> EvalSettings:
    """The effective settings an eval ran with (recorded in its result); fields of other modes stay unset."""
    sampling = settings.sampling
    common = {"backend": backend, "temperature": sampling.temperature, "top_p": sampling.top_p,
              "timeout_s": settings.timeout_s, "stop_at_first": settings.stop_at_first, "concurrency": concurrency}
    if isinstance(settings, StepSettings):
        return EvalSettings(
            **common, prompt_format=str(settings.fmt), num_candidates=sampling.n,
            max_new_tokens=sampling.max_new_tokens, max_nodes=settings.max_nodes, max_depth=settings.max_depth,
            alpha=settings.alpha, expand_batch=settings.expand_batch, probe_tactics=list(settings.probe_tactics),
            verify=settings.verify, value_weight=settings.value_weight, value_ramp_depth=settings.value_ramp_depth,
        )
    if isinstance(settings, WholeSettings):
        return EvalSettings(**common, prompt_format=str(settings.fmt), num_candidates=sampling.n,
                            max_new_tokens=sampling.max_new_tokens, max_proofs=settings.max_proofs, verify=True)
    return EvalSettings(**common, prompt_format=str(settings.fmt), num_candidates=settings.num_proofs,
                        max_new_tokens=settings.max_tokens, max_proofs=settings.max_proofs,
                        max_depth=settings.max_depth, verify=settings.verify)


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

    @classmethod
    def from_config(cls, config: Config, budgets: Sequence[int]) -> EvalJobSettings:
        """The eval's settings; warns that search.verify=false does not apply here (eval compiles every proof it
        counts). `ValueError` unless the budgets are non-empty, positive, unique and ascending."""
        budgets = validate_budgets(budgets)
        if not config.search.verify:
            log.warning("eval compiles every proof it counts: search.verify=false is ignored here")
        return cls(
            budgets=tuple(budgets),
            job=JobSettings.from_config(config.search, config.policy, config.lean, budgets[-1], marks=budgets,
                                        verify=True),
            backend=config.policy.backend,
            seed=config.policy.seed,
            lean_backend=lean_backend_label(config.lean.command),
            config_digest=config_digest(config),
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


def resume_state(uri: str, theorems: Sequence[Theorem], budgets: Sequence[int], mode: str, iteration: int,
                 resume: bool, *, store: Store) -> PassState:
    """Read what `uri` holds and check that this eval may continue it (see the module docstring)."""
    parts = committed_parts(uri, store=store)
    if not parts:
        return PassState(uri, None, [], False)
    held = sum(len(p.theorems) for p in parts)
    if not resume:
        raise InputError(f"--trajectories {uri} already holds {held} finished theorems of an earlier eval: pass "
                         "--resume to continue it, or choose another --trajectories prefix")
    if parts[0].iteration != iteration:
        raise InputError(f"--trajectories {uri} holds iteration {parts[0].iteration}, not --iter {iteration}: "
                         "resume with the same --iter")
    names = {t.name for t in theorems}
    done = [r for p in parts for r in p.theorems if r.name in names]
    for result in done:
        marks = [usage.budget for usage in result.usage]
        if str(result.mode) != mode or marks != list(budgets):
            raise InputError(
                f"--trajectories {uri}: {result.name} was evaluated in {result.mode} mode at budgets {marks}, this "
                f"eval is in {mode} mode at budgets {list(budgets)}: resume with the same --budgets and search.mode"
            )
    return PassState(uri, parts[0].run_id, done, is_complete(uri, store=store))


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
    store: Store,
) -> EvalResult:
    """Run the benchmark and build its result (see the module docstring)."""
    started = time.perf_counter()
    budgets = list(settings.budgets)
    job = settings.job
    if pass_n < 1:
        raise ValueError("pass_n must be at least 1")
    if pass_n > 1 and job.engine.sampling.temperature == 0:
        log.warning("pass@%d with temperature 0 repeats the same greedy search %d times", pass_n, pass_n)
    if resume and not trajectories:
        raise InputError("--resume continues an eval from its --trajectories: give the same --trajectories prefix")
    run_id = new_run_id()
    # Every pass' prefix is checked before the first search starts: a refusal costs nothing.
    states = [resume_state(pass_prefix(trajectories, pass_n, k), index.theorems, budgets, str(job.mode),
                           iteration, resume, store=store) if trajectories else None for k in range(pass_n)]
    attempts: list[list[TheoremResult]] = []
    concurrency = job.concurrency_for(pool_size)
    monitors = [SearchMonitor(concurrency=concurrency, pool=pool, policy=policy)]  # one per pass

    def status() -> str:
        return monitors[-1].status()

    with progress_bar("evaluating", total=len(index.theorems) * pass_n, status=status) as advance:
        for k, state in enumerate(states):
            if k:
                monitors.append(SearchMonitor(concurrency=concurrency, pool=pool, policy=policy))
            monitor = monitors[-1]
            writer = None
            done: list[TheoremResult] = []
            if state is not None:
                done = state.done
                advance(len(done))
                if state.complete:
                    attempts.append(done)
                    continue
                # One prefix per pass: a trajectory prefix holds each theorem once.
                writer = TrajectoryWriter(state.uri, run_id=state.run_id or run_id, iteration=iteration,
                                          checkpoint_every=job.checkpoint_every, store=store)
            finished = {r.name for r in done}
            # Pass k searches with its own seeds (policy.base.sample_seed's attempt): pass@n is n independent searches.
            passed = dataclasses.replace(job, engine=dataclasses.replace(job.engine, attempt=k))
            results = await search_into(
                writer, [t for t in index.theorems if t.name not in finished], pool, policy, passed,
                pool_size=pool_size, value=value, on_result=lambda _: advance(1), monitor=monitor,
            )
            if writer is not None:
                writer.finish({"eval": index.name, "pass": k, "pass_n": pass_n,
                               "throughput": monitor.report().as_dict()})
            attempts.append(done + results)
            log.info("pass %d: %s", k, render_throughput(monitor.report()))
    return build_eval_result(
        attempts,
        budgets,
        theorem_sources={t.name: t.source for t in index.theorems},
        seed=settings.seed,
        settings=eval_settings(settings.backend, job.engine, concurrency),
        benchmark=index.name,
        model=policy.name,
        ebm=ebm,
        lean_backend=settings.lean_backend,
        iteration=iteration,
        config_digest=settings.config_digest,
        git_commit=git_commit(),
        theorem_names=[t.name for t in index.theorems],
        mode=job.mode,
        wall_s=time.perf_counter() - started,
        resumed=sum(len(state.done) for state in states if state is not None),
    )

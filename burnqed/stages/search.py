"""The search stage: theorems in, a trajectory prefix out (`burnqed search`; docs/search.md).

    settings = JobSettings.from_config(cfg.search, cfg.policy, cfg.lean)      # at the command layer
    report = await search_job(theorems, "runs/iter_0/search/shard-0", pool=pool, pool_size=4, policy=policy,
                              settings=settings, shard=(0, 4), resume=True, store=store)

`JobSettings` are built from the `search`, `policy` and `lean` sections (`search.mode` picks the engine and, with
`policy.prompt_format`'s family, the prompt variant); the caller wires in the Lean pool and the policy. An output
holding finished theorems is refused unless `resume` is given (then they are skipped and the rest appended); hybrid
searches checkpoint every round under `{output}/_inflight/`, removed once the output is complete.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import time
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from burnqed.base.progress import progress_bar
from burnqed.config import LeanConfig, PlannerConfig, PolicyConfig, SearchConfig
from burnqed.config.search import MAX_BUDGET
from burnqed.errors import InputError
from burnqed.layout import subgoal_cache_beside
from burnqed.lean.env import WorkerPool
from burnqed.lean.guard import TacticGuard
from burnqed.policy.base import Policy
from burnqed.provenance import INPUTS_NAME, StageInputs
from burnqed.records.enums import SearchMode
from burnqed.records.results import TheoremResult
from burnqed.records.theorem import Theorem
from burnqed.search.journal import FileJournal
from burnqed.search.lemmas import STATS_KEY as LIBRARY_STATS
from burnqed.search.lemmas import LemmaWriter, LibrarySource, open_library, training_held, write_lemmas
from burnqed.search.mode import Sections
from burnqed.search.modes import MODES, SearchSettings, mode_of
from burnqed.search.monitor import SearchMonitor, SolveTally, ThroughputReport
from burnqed.search.runner import run_theorems, select_shard
from burnqed.search.sketch_settings import SketchSettings
from burnqed.search.subgoal_cache import SubgoalCache, cache_environment, record_stats
from burnqed.search.value import ValueFn
from burnqed.storage import Store, join
from burnqed.trajectory.reader import committed_parts, is_complete
from burnqed.trajectory.schema import PartManifest
from burnqed.trajectory.writer import TrajectoryWriter

log = logging.getLogger(__name__)


def settings_from_config(
    search: SearchConfig,
    policy: PolicyConfig,
    budget: int | None = None,
    *,
    marks: Sequence[int] = (),
    verify: bool | None = None,
    planner: PlannerConfig | None = None,
    max_text_chars: int = 100_000,
) -> SearchSettings:
    """The settings of `search.mode` from the config sections (`Mode.settings`). `budget` overrides the mode's budget
    (`Mode.budget`: eval's largest), `marks` are budgets to record usage at, `verify` overrides search.verify (eval
    always compiles), `planner` is the `[planner]` section (sketch mode's prompt format and sampling, its grammar
    capped by `max_text_chars`, lean.max_text_chars; None: its defaults). Hybrid settings come without a journal,
    sketch settings without a subgoal cache: `search_job` (and eval) attach them (`Mode.attach`)."""
    sections = Sections(search, policy, planner if planner is not None else PlannerConfig(), budget, tuple(marks),
                        verify, max_text_chars)
    settings: SearchSettings = MODES[search.mode].settings(sections)
    return settings


@dataclass(frozen=True, slots=True)
class LargerBudget:
    """`search.unsolved_budget_factor`: the theorems the previous iteration left unsolved, the larger budget they are
    searched at, and the engine's settings at that budget."""

    theorems: frozenset[str]
    budget: int
    engine: SearchSettings


@dataclass(frozen=True, slots=True)
class JobSettings:
    """What the search and eval stages read from the configuration, built once by the command layer
    (`JobSettings.from_config`): the engine's settings, the tactic guard, and how the run is paced and
    checkpointed."""

    mode: SearchMode  # search.mode
    engine: SearchSettings  # the settings of that mode's engine
    guard: TacticGuard  # lean.deny, lean.max_tactic_chars, lean.max_text_chars
    concurrency: int | None  # search.concurrency; None: every place the pool has
    theorems_per_worker: int  # search.theorems_per_worker
    checkpoint_every: int  # search.checkpoint_every: theorems per committed trajectory part
    lean: LeanConfig  # the [lean] section: the subgoal cache's environment (sketch mode)
    subgoal_cache: str | None = None  # search.subgoal_cache: where sketch search's cache persists; None: beside output
    lemma_library: str | None = None  # search.lemma_library: the lemma library sketch search reads and writes
    larger: LargerBudget | None = None  # search.unsolved_budget_factor: the theorems searched at a larger budget

    @classmethod
    def from_config(
        cls,
        search: SearchConfig,
        policy: PolicyConfig,
        lean: LeanConfig,
        budget: int | None = None,
        *,
        marks: Sequence[int] = (),
        verify: bool | None = None,
        planner: PlannerConfig | None = None,
    ) -> JobSettings:
        """The job's settings from its config sections; `budget`, `marks`, `verify` and `planner` as for
        `settings_from_config` (eval passes its largest budget, every budget and verify=True)."""
        return cls(
            mode=search.mode,
            engine=settings_from_config(search, policy, budget, marks=marks, verify=verify, planner=planner,
                                        max_text_chars=lean.max_text_chars),
            guard=TacticGuard.from_config(lean),
            concurrency=search.concurrency,
            theorems_per_worker=search.theorems_per_worker,
            checkpoint_every=search.checkpoint_every,
            lean=lean,
            subgoal_cache=search.subgoal_cache,
            lemma_library=search.lemma_library,
        )

    def with_unsolved(self, unsolved: Collection[str], search: SearchConfig, policy: PolicyConfig,
                      planner: PlannerConfig | None = None) -> JobSettings:
        """These settings with the theorems `unsolved` searched at `search.unsolved_budget_factor` × the mode's budget
        (`Mode.budget`), rounded up, at most MAX_BUDGET; these
        settings as they are at a factor of 1."""
        factor = search.unsolved_budget_factor
        if factor == 1.0:
            return self
        base = MODES[self.mode].budget(search)
        budget = min(MAX_BUDGET, math.ceil(base * factor))
        engine = settings_from_config(search, policy, budget, planner=planner, max_text_chars=self.lean.max_text_chars)
        return dataclasses.replace(self, larger=LargerBudget(frozenset(unsolved), budget, engine))

    def overrides(self) -> dict[str, SearchSettings]:
        """The engine settings of the theorems searched at the larger budget, by name (none without one)."""
        larger = self.larger
        return {name: larger.engine for name in larger.theorems} if larger is not None else {}

    def concurrency_for(self, pool_size: int) -> int:
        """Theorems searched at once: `search.concurrency`, else every place the pool has (workers × theorems per
        worker), so the policy sees as many theorems' expansions as the Lean workers can hold."""
        return self.concurrency or pool_size * self.theorems_per_worker


async def search_into(
    writer: TrajectoryWriter | None,
    theorems: Sequence[Theorem],
    pool: WorkerPool,
    policy: Policy,
    settings: JobSettings,
    *,
    pool_size: int,
    value: ValueFn | None,
    on_result: Callable[[TheoremResult], None],
    monitor: SearchMonitor | None = None,
    planner: Policy | None = None,
) -> list[TheoremResult]:
    """Search `theorems` (signals handled) into `writer`. On any failure or interruption the writer commits
    what finished and closes without a completion marker; on success the caller finishes it. With `monitor`,
    the run is sampled (theorems in flight, Lean workers, policy batches) while it goes. `planner` writes sketch
    mode's sketches (None: the policy)."""
    watch = monitor.watching() if monitor is not None else contextlib.nullcontext()
    try:
        async with watch:
            return await run_theorems(
                theorems,
                pool,
                policy,
                settings.engine,
                settings.guard,
                value=value,
                sink=writer,
                concurrency=settings.concurrency_for(pool_size),
                on_result=on_result,
                handle_signals=True,
                monitor=monitor,
                planner=planner,
                overrides=settings.overrides(),
            )
    except BaseException:
        if writer is not None:
            writer.close()
        raise


@dataclass(frozen=True, slots=True)
class SearchReport:
    """What `burnqed search` did."""

    output: str
    run_id: str
    selected: int  # theorems of this shard
    skipped: int  # already committed (resume)
    searched: int
    proved: int  # among the searched
    elapsed_s: float
    throughput: ThroughputReport | None = None  # None when the output was complete already (nothing run)
    larger: int = 0  # searched at the larger budget (search.unsolved_budget_factor): left unsolved last iteration
    larger_budget: int | None = None  # that budget; None without one


def unsolved_in(uri: str, *, store: Store) -> frozenset[str]:
    """The theorems the trajectories under `uri` searched and proved in none of their searches (`burnqed search
    --unsolved-from`); InputError when `uri` holds no trajectory."""
    from burnqed.trajectory.reader import require_trajectories

    searched: set[str] = set()
    proved: set[str] = set()
    for part in require_trajectories(uri, store=store):
        for result in part.theorems:
            searched.add(result.name)
            if result.proved:
                proved.add(result.name)
    return frozenset(searched - proved)


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S-", time.gmtime()) + uuid.uuid4().hex[:6]


def _refuse_unresumed(output: str, parts: list[PartManifest], journal: FileJournal, *, resume: bool) -> None:
    """`InputError` unless `resume`, when the prefix `output` holds finished theorems (its committed `parts`) or
    checkpoints of half-searched ones (`journal`): a search never writes over another run."""
    if parts and not resume:
        done = sum(len(p.theorems) for p in parts)
        raise InputError(
            f"output {output} already holds {done} finished theorems: pass --resume to continue that run, --force "
            "to search again from nothing, or choose another --output"
        )
    if not parts and not resume and journal.pending():
        raise InputError(
            f"output {output} holds checkpoints of {journal.pending()} half-searched theorems: pass --resume to "
            "continue that run, or choose another --output"
        )


async def search_job(
    theorems: Sequence[Theorem],
    output: str,
    *,
    pool: WorkerPool,
    pool_size: int,
    policy: Policy,
    settings: JobSettings,
    shard: tuple[int, int] | None = None,
    resume: bool = False,
    iteration: int = 0,
    run_id: str | None = None,
    value: ValueFn | None = None,
    made_from: StageInputs | None = None,
    planner: Policy | None = None,
    pantograph_version: str | None = None,
    store: Store,
) -> SearchReport:
    """Search the (shard's) theorems into the trajectory prefix `output` (the output rules: the module docstring).
    `made_from` is recorded in the prefix (`_INPUTS.json`) before the first search. In sketch mode `planner` writes
    the sketches (None: the policy), and the subgoal cache persists at `settings.subgoal_cache` (else beside
    `output`) for the Lean the pool speaks (`pantograph_version`)."""
    started = time.perf_counter()
    selected = select_shard(theorems, *shard) if shard else list(theorems)
    parts = committed_parts(output, store=store)
    journal = FileJournal(output, store=store)
    _refuse_unresumed(output, parts, journal, resume=resume)
    if parts:
        run_id = parts[0].run_id
        iteration = parts[0].iteration
    run_id = run_id or new_run_id()
    done_names = {r.name for p in parts for r in p.theorems}
    if is_complete(output, store=store):
        return SearchReport(output, run_id, len(selected), len(selected), 0, 0, time.perf_counter() - started)
    if made_from is not None:  # what the prefix is made from, before its first part (burnqed.runner.reuse reads it)
        store.write_bytes(join(output, INPUTS_NAME), made_from.model_dump_json(indent=1).encode())
    refused = {t.name: why for t in selected if (why := MODES[settings.mode].refusal(t)) is not None}
    if refused:  # said before any work, never searched (docs/search.md, "Answers")
        log.warning("%s mode does not search %d theorems: %s", settings.mode, len(refused),
                    "; ".join(f"{name}: {why}" for name, why in refused.items()))
    todo = [t for t in selected if t.name not in done_names and t.name not in refused]
    writer = TrajectoryWriter(output, run_id=run_id, iteration=iteration, checkpoint_every=settings.checkpoint_every,
                              store=store)
    proved = 0

    cache, lemmas = _sketch_stores(settings, output, selected, pantograph_version, store=store)
    settings = _attached(settings, journal, cache, lemmas)
    larger = len({theorem.name for theorem in todo} & settings.overrides().keys())
    monitor = SearchMonitor(concurrency=settings.concurrency_for(pool_size), pool=pool, policy=policy)
    tally = SolveTally()
    with progress_bar("searching", total=len(todo), status=tally.line, detail=monitor.status) as advance:

        def on_result(result: TheoremResult) -> None:
            nonlocal proved
            proved += result.proved
            tally.add(result)
            advance(1)

        results = await search_into(
            writer, todo, pool, policy, settings, pool_size=pool_size, value=value, on_result=on_result,
            monitor=monitor, planner=planner,
        )
    throughput = monitor.report()
    extra: dict[str, Any] = {"selected": len(selected), "shard": f"{shard[0]}/{shard[1]}" if shard else None,
                             "mode": settings.mode.value, "throughput": throughput.as_dict()}
    if cache is not None:
        record_stats(extra, cache.stats)
    if lemmas is not None and lemmas.library.uri is not None:  # what it served, then its training proofs' lemmas
        extra[LIBRARY_STATS] = {**lemmas.record(), "written": write_lemmas(
            LemmaWriter(store, lemmas.library.uri), results, {t.name: t for t in selected}, lemmas.environment,
            iteration)}
    if settings.larger is not None:
        extra["larger_budget"] = {"theorems": larger, "budget": settings.larger.budget}
    writer.finish(extra)
    journal.clear_all()  # every theorem is committed: nothing is half-searched any more
    return SearchReport(
        output, run_id, len(selected), len(selected) - len(todo), len(results), proved, time.perf_counter() - started,
        throughput, larger, settings.larger.budget if settings.larger is not None else None,
    )


def _sketch_stores(settings: JobSettings, output: str, theorems: Sequence[Theorem], pantograph_version: str | None,
                   *, store: Store) -> tuple[SubgoalCache | None, LibrarySource | None]:
    """The run's subgoal cache (shared by every job that names it) and its lemma library (`search.lemma_library`,
    frozen now, its entries held out by split or for restating a theorem searched), for a mode that caches subgoals
    (sketch); neither in another mode."""
    if not MODES[settings.mode].caches_subgoals:
        return None, None
    environment = cache_environment(settings.lean, pantograph_version)
    cache = SubgoalCache.open(store, settings.subgoal_cache or subgoal_cache_beside(output), environment)
    return cache, open_library(settings.lemma_library, store, environment, settings.guard,
                               lambda library: training_held(library, theorems))


def _attached(settings: JobSettings, journal: FileJournal, cache: SubgoalCache | None,
              lemmas: LibrarySource | None = None) -> JobSettings:
    """`settings` (and its larger budget's engine) with what its mode attaches (`Mode.attach`): hybrid's journal,
    whose rounds are checkpointed on the output, and sketch's subgoal cache; and sketch's lemma source."""

    def attach(engine: SearchSettings) -> SearchSettings:
        attached: SearchSettings = mode_of(engine).attach(engine, journal, cache)
        if lemmas is not None and isinstance(attached, SketchSettings):
            attached = dataclasses.replace(attached, lemmas=lemmas)
        return attached

    larger = settings.larger
    return dataclasses.replace(settings, engine=attach(settings.engine), larger=None if larger is None
                               else dataclasses.replace(larger, engine=attach(larger.engine)))

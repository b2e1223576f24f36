"""Search many theorems: concurrency on one event loop, shards, trajectory checkpoints, resume, signals
(docs/search.md, "Many theorems at once" and "`burnqed search`").

    results = await run_theorems(theorems, pool, policy, settings, guard, writer=writer)

Up to `concurrency` theorems search at once, each on one leased Lean worker, all sharing one (batching) policy;
theorems start in input order. A theorem is recorded only when its search finished, so a crash loses at most the
theorems in flight and the unflushed buffer. SIGTERM/SIGINT cancel the searches in flight, flush what finished and
raise `Interrupted`; infrastructure failures stop the run after flushing, domain failures are results.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import signal
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Protocol

from burnqed.errors import StoppedError
from burnqed.lean.env import WorkerPool
from burnqed.lean.guard import TacticGuard
from burnqed.policy.base import Policy
from burnqed.records.results import Edge, TheoremResult
from burnqed.records.theorem import Theorem
from burnqed.search.modes import SearchSettings, prove_theorem
from burnqed.search.monitor import SearchMonitor
from burnqed.search.step import SearchOutcome
from burnqed.search.value import ValueFn

log = logging.getLogger(__name__)


class Interrupted(StoppedError):
    """The run was stopped by SIGTERM/SIGINT after flushing the finished theorems (exit code 128 + the signal)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum, f"stopped by {signal.Signals(signum).name}; finished theorems were saved "
                         "(use --resume)")


class ResultSink(Protocol):
    """Where finished theorems go (the trajectory writer); called from a worker thread, one at a time."""

    def add(self, result: TheoremResult, edges: list[Edge]) -> None: ...

    def flush(self) -> object: ...


def select_shard(theorems: Sequence[Theorem], shard: int, shards: int) -> list[Theorem]:
    """The theorems of shard `shard` of `shards` (by position: i % shards == shard)."""
    if shards < 1 or not 0 <= shard < shards:
        raise ValueError(f"shard {shard}/{shards} is not valid: need 0 <= I < N")
    return [t for i, t in enumerate(theorems) if i % shards == shard]


def parse_shard(text: str, max_shards: int) -> tuple[int, int]:
    """`"I/N"` → (I, N): whole numbers in ASCII digits, 0 <= I < N <= `max_shards`; ValueError saying which."""
    match = re.fullmatch(r"([0-9]+)/([0-9]+)", text)
    if match is None:
        raise ValueError(f"--shard {text!r}: expected I/N, two whole numbers, e.g. 0/4")
    shard, shards = int(match.group(1)), int(match.group(2))
    if not 1 <= shards <= max_shards:
        raise ValueError(f"--shard {text!r}: N is the number of shards, 1 to {max_shards:,}")
    if shard >= shards:
        raise ValueError(f"--shard {text!r}: I counts from 0 to N - 1 ({shards - 1} here), e.g. 0/4")
    return shard, shards


@contextlib.asynccontextmanager
async def _signals_cancel(task: asyncio.Task[object], caught: list[int]) -> AsyncIterator[None]:
    """While inside, SIGTERM/SIGINT cancel `task` (and are remembered in `caught`)."""
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    # The handlers in place before (the command's `burnqed.base.signals.stop_on_signals`) come back afterwards:
    # `remove_signal_handler` alone would leave the default, which kills the process while the pool closes.
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}

    def handler(signum: int) -> None:
        if not caught:
            caught.append(signum)
            task.cancel()

    for signum in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(signum, handler, signum)
            installed.append(signum)
        except (NotImplementedError, RuntimeError, ValueError):
            continue  # not the main thread, or no signal support: Ctrl-C falls back to KeyboardInterrupt
    try:
        yield
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
            before = previous[signum]
            if before is not None:
                signal.signal(signum, before)


async def run_theorems(
    theorems: Sequence[Theorem],
    pool: WorkerPool,
    policy: Policy,
    settings: SearchSettings,
    guard: TacticGuard,
    *,
    value: ValueFn | None = None,
    sink: ResultSink | None = None,
    concurrency: int = 1,
    on_result: Callable[[TheoremResult], None] | None = None,
    handle_signals: bool = False,
    monitor: SearchMonitor | None = None,
    planner: Policy | None = None,
    overrides: Mapping[str, SearchSettings] | None = None,
) -> list[TheoremResult]:
    """Search every theorem; results come back in input order. See the module docstring. `planner` writes sketch
    mode's sketches (None: the policy); `overrides` gives the theorems it names other settings than `settings` (a
    larger budget: `search.unsolved_budget_factor`)."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    results: dict[str, TheoremResult] = {}
    queue: asyncio.Queue[Theorem] = asyncio.Queue()
    for theorem in theorems:
        queue.put_nowait(theorem)
    sink_lock = asyncio.Lock()

    async def one(theorem: Theorem) -> None:
        own = overrides.get(theorem.name, settings) if overrides else settings
        outcome = await _search_one(theorem, pool, policy, own, guard, value, monitor, planner)
        if sink is not None:
            async with sink_lock:
                await asyncio.to_thread(sink.add, outcome.result, outcome.edges)
        results[theorem.name] = outcome.result
        _log_result(theorem, outcome.result)
        if on_result is not None:
            on_result(outcome.result)

    async def worker() -> None:
        while True:
            try:
                theorem = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            await one(theorem)

    async def all_workers() -> None:
        async with asyncio.TaskGroup() as group:
            for _ in range(min(concurrency, len(theorems))):
                group.create_task(worker())

    main = asyncio.ensure_future(all_workers())
    caught: list[int] = []
    await _drive(main, caught, handle_signals, sink, sink_lock)
    if caught:
        raise Interrupted(caught[0])
    return [results[t.name] for t in theorems if t.name in results]


async def _search_one(
    theorem: Theorem,
    pool: WorkerPool,
    policy: Policy,
    settings: SearchSettings,
    guard: TacticGuard,
    value: ValueFn | None,
    monitor: SearchMonitor | None,
    planner: Policy | None = None,
) -> SearchOutcome:
    """Search one theorem on a leased worker, telling the monitor when it starts and finishes."""
    outcome: SearchOutcome | None = None
    if monitor is not None:
        monitor.theorem_started()
    try:
        async with pool.lease(theorem.name, header=theorem.header) as lean:
            # The one place a theorem is searched: the engine for search.mode runs here.
            outcome = await prove_theorem(theorem, lean, policy, settings, guard, value, planner=planner)
    finally:
        if monitor is not None:
            monitor.theorem_finished(
                outcome.result if outcome else None,
                outcome.speculated if outcome else 0,
                outcome.speculation_used if outcome else 0,
            )
    return outcome


def _log_result(theorem: Theorem, result: TheoremResult) -> None:
    log.info(
        "%s: %s after %d expansions, %d edges, %.1fs",
        theorem.name,
        "proved" if result.proved else (result.failure_reason or "not proved"),
        result.nodes_expanded,
        result.edges,
        result.time_s,
    )


async def _drive(
    main: asyncio.Task[None],
    caught: list[int],
    handle_signals: bool,
    sink: ResultSink | None,
    sink_lock: asyncio.Lock,
) -> None:
    """Await the workers (cancelled by a signal when `handle_signals`), then flush the sink whatever happened.

    A cancellation a signal caused returns normally (the caller raises `Interrupted`); one failure stops the
    run and surfaces the first infrastructure error as itself.
    """
    try:
        if handle_signals:
            async with _signals_cancel(main, caught):
                await main
        else:
            await main
    except asyncio.CancelledError:
        if not caught:
            raise
    except BaseExceptionGroup as group:
        first = _first_error(group)
        raise first from None
    finally:
        if sink is not None:
            async with sink_lock:
                await asyncio.to_thread(sink.flush)


def _first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            return _first_error(exc)
        if not isinstance(exc, asyncio.CancelledError):
            return exc
    return group.exceptions[0]

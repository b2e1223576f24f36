"""An async pool of Lean workers shared by many theorems: affinity without exclusivity (docs/lean.md, "Workers
shared by theorems").

    async with LeanPool.from_config(cfg.lean, theorems_per_worker=4) as pool:
        async with pool.lease(theorem.name) as lean:     # one worker for the whole search, shared with others
            state = await lean.start_goal(expr=...)

A theorem keeps ONE worker for its whole search (state ids live in one process); a worker serves up to
`theorems_per_worker` theorems, in turn on its pipe (fewer when memory is short). A worker due for recycling drains;
a crash loses the states of that worker's theorems only; compiles go to verifier workers of their own. A (re)start
that fails makes every later `lease()` raise the same `LeanStartError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

from burnqed.base.resources import check_workers_fit
from burnqed.config import LeanConfig
from burnqed.errors import LeanError, LeanStartError, PoolClosedError
from burnqed.lean import payloads
from burnqed.lean.client import LeanWorker
from burnqed.lean.lease import LeanLease, PoolWorker
from leankit.version import PantographVersion

log = logging.getLogger(__name__)

RSS_CACHE_S = 1.0  # a worker's RSS is read at most this often (psutil walks the process tree)


@dataclass(frozen=True, slots=True)
class PoolStats:
    """Counters for reports and logs."""

    acquired: int  # leases granted (theorems admitted)
    respawned: int  # workers found dead (crash, watchdog) and started again
    recycled: int  # healthy workers restarted by the recycling policy
    peak_leases: int  # most theorems held at once


@dataclass(frozen=True, slots=True)
class WorkerLoad:
    """One worker right now, for progress lines and the search report."""

    index: int
    pid: int | None
    generation: int
    theorems: int
    rss_mb: float
    requests: int
    draining: str | None  # why it admits no new theorem (recycling), or None


@dataclass(eq=False)
class _Slot:
    worker: PoolWorker
    index: int
    leases: set[LeanLease] = field(default_factory=set)
    busy: bool = False  # being reset/restarted: admits nobody meanwhile
    draining: str | None = None  # due for recycling: admits nobody until its last theorem leaves
    base_rss: float = 0.0  # RSS when it last held no theorem (r₀ of the admission rule)
    rss: float = 0.0
    rss_at: float = -1e9


def worker_from_config(config: LeanConfig) -> PoolWorker:
    """The worker `LeanPool.from_config` starts for `config`, searching and verifying alike: a `LeanWorker`, the
    process `lean.command` names. The one place a configured pool makes a worker, looked up at each start, so that
    a test may replace it (pytest's monkeypatch) to answer a command's Lean from its own process:

        monkeypatch.setattr(burnqed.lean.pool, "worker_from_config", lambda config: InProcessReplay(...))

    Nothing else reads it; the verdicts are the worker's replies, read by the same client code either way."""
    return LeanWorker.from_config(config)


class LeanPool:
    """`size` workers shared by up to `size × theorems_per_worker` theorems; see the module docstring."""

    def __init__(
        self,
        factory: Callable[[], PoolWorker],
        size: int,
        *,
        theorems_per_worker: int = 1,
        recycle_requests: int = 1000,
        recycle_seconds: float = 1800.0,
        recycle_rss_mb: int = 0,
        verifier_factory: Callable[[], PoolWorker] | None = None,
        verifiers: int = 0,
    ) -> None:
        if size < 1:
            raise ValueError("a pool needs at least one worker")
        if theorems_per_worker < 1:
            raise ValueError("theorems_per_worker must be at least 1")
        self.size = size
        self.theorems_per_worker = theorems_per_worker
        self.recycle_requests = recycle_requests
        self.recycle_seconds = recycle_seconds
        self.recycle_rss_mb = recycle_rss_mb
        self._factory = factory
        self._verifier_factory = verifier_factory if verifiers else None
        self._verifier_count = verifiers
        self._verifiers: list[PoolWorker] = []
        self._next_verifier = 0
        self._slots: list[_Slot] = []
        self._changed = asyncio.Condition()
        self._start_lock = asyncio.Lock()
        self._started = False
        self._failure: LeanStartError | None = None
        self._closed = False
        self._acquired = 0
        self._recycled = 0
        self._respawned = 0  # dead workers the pool itself restarted (the workers count the ones requests restarted)
        self._peak = 0
        self.version: PantographVersion | None = None  # known once start() returned

    @classmethod
    def from_config(cls, config: LeanConfig, size: int | None = None, *, theorems_per_worker: int = 1) -> LeanPool:
        # A verifier worker's one timeout is the compile's: Lean-side (options.set) and its watchdog.
        verifier = config.model_copy(update={"tactic_timeout_s": config.compile_timeout_s})
        if config.workers is not None:  # a count the user asked for (unset, it is what fits): check it
            check_workers_fit(config.workers, config.verifier_workers, config.worker_memory_mb)
        return cls(
            lambda: worker_from_config(config),
            size if size is not None else config.resolved_workers(),
            theorems_per_worker=theorems_per_worker,
            recycle_requests=config.recycle_requests,
            recycle_seconds=config.recycle_seconds,
            recycle_rss_mb=config.recycle_rss_mb,
            verifier_factory=lambda: worker_from_config(verifier),
            verifiers=config.verifier_workers,
        )

    @property
    def capacity(self) -> int:
        """Theorems the pool holds at once when memory allows: size × theorems_per_worker."""
        return self.size * self.theorems_per_worker

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Learn the Pantograph version, then start every worker concurrently; any failure closes the pool and
        is raised (an unsupported version is a ConfigError)."""
        async with self._start_lock:
            if self._started:
                return
            self._raise_if_unusable()
            workers = [self._factory() for _ in range(self.size)]
            self._slots = [_Slot(worker, index) for index, worker in enumerate(workers)]
            try:
                self.version = await workers[0].protocol_version()
            except BaseException:
                await self.close()
                raise
            if self._verifier_factory is not None:
                self._verifiers = [self._verifier_factory() for _ in range(self._verifier_count)]
            for worker in (*workers, *self._verifiers):
                worker.version = self.version
            try:
                results = await asyncio.gather(*(w.start() for w in workers), return_exceptions=True)
            except BaseException:  # cancelled (SIGTERM while the workers start): none of them may outlive us
                await asyncio.shield(self.close())
                raise
            failures = [r for r in results if isinstance(r, BaseException)]
            if failures:
                await self.close()
                first = failures[0]
                if isinstance(first, LeanError):
                    raise first
                raise LeanStartError(f"starting the Lean pool failed: {first!r}") from first
            for slot in self._slots:
                slot.base_rss = self._rss(slot, fresh=True)
            self._started = True

    async def close(self) -> None:
        """Kill every worker. Idempotent; later `lease()` calls raise `PoolClosedError` (`stats` stay readable)."""
        self._closed = True
        workers = [slot.worker for slot in self._slots] + self._verifiers
        await asyncio.gather(*(worker.close() for worker in workers), return_exceptions=True)
        async with self._changed:
            self._changed.notify_all()

    # ---------------------------------------------------------------------------------------------- leases

    @contextlib.asynccontextmanager
    async def lease(self, owner: str | None = None, *, header: str | None = None) -> AsyncIterator[LeanLease]:
        """Hold one worker, shared, for one theorem's search (`owner` names it in reports; `header`, the theorem's,
        picks a worker already in its scope when one has room). Its states are freed when the block ends."""
        if not self._started:
            await self.start()
        slot, lease = await self._admit(owner, payloads.header_text(header))
        cancelled = False
        try:
            yield lease
        except LeanStartError as exc:
            self._failure = self._failure or exc
            raise
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:
            await self._release(slot, lease, cancelled)

    # Kept for callers written when a theorem held a worker alone: the same shared lease.
    worker = lease

    async def _admit(self, owner: str | None, header: str = "") -> tuple[_Slot, LeanLease]:
        """A slot for a new theorem (waiting, FIFO, until one has room) and its lease, registered on the slot.
        An empty worker that is dead or due for recycling is restarted first, by the theorem that gets it."""
        async with self._changed:
            while True:
                self._raise_if_unusable()
                slot = self._pick(header)
                if slot is not None:
                    break
                await self._changed.wait()
            refresh = not slot.leases and (not slot.worker.alive or self._due_for_recycling(slot) is not None)
            lease = LeanLease(slot.worker, owner, header, self._verifier if self._verifiers else None)
            slot.leases.add(lease)
            slot.busy = slot.busy or refresh
            self._acquired += 1
            self._peak = max(self._peak, sum(len(s.leases) for s in self._slots))
        if not refresh:
            return slot, lease
        try:
            await self._refresh(slot)
        except BaseException as exc:
            if isinstance(exc, LeanStartError):
                self._failure = self._failure or exc
            async with self._changed:
                slot.leases.discard(lease)
                slot.busy = False
                self._changed.notify_all()
            raise
        async with self._changed:
            slot.busy = False
            self._changed.notify_all()
        return slot, lease

    async def _verifier(self) -> PoolWorker:
        """The next verifier worker, round robin (each serves its compiles one at a time, FIFO). One above the
        memory budget is stopped first, so the next compile starts it afresh: it holds no theorem's state."""
        worker = self._verifiers[self._next_verifier % len(self._verifiers)]
        self._next_verifier += 1
        if self.recycle_rss_mb and worker.alive and worker.rss_mb() > self.recycle_rss_mb:
            log.info("recycling Lean verifier (pid %s): rss above %d MiB", worker.pid, self.recycle_rss_mb)
            self._recycled += 1
            await worker.close()
        return worker

    def _pick(self, header: str = "") -> _Slot | None:
        best: _Slot | None = None
        best_key: tuple[bool, int] | None = None
        scope = payloads.scope_text(header)  # the REPL scope the header needs
        for slot in self._slots:
            if slot.busy:
                continue
            if slot.draining is None and slot.leases:
                reason = self._due_for_recycling(slot)
                if reason is not None:
                    slot.draining = reason
                    log.info("Lean worker %d (pid %s) drains for recycling: %s", slot.index, slot.worker.pid, reason)
            if slot.draining is not None or len(slot.leases) >= self._capacity(slot):
                continue
            same_scope = slot.worker.repl_scope == scope or any(payloads.scope_text(lease.header) == scope
                                                                for lease in slot.leases)
            key = (not same_scope, len(slot.leases))
            if best_key is None or key < best_key:
                best, best_key = slot, key
        return best

    def _capacity(self, slot: _Slot) -> int:
        """theorems_per_worker, or fewer when the memory budget would be exceeded (the rule: docs/lean.md,
        "Workers shared by theorems")."""
        held = len(slot.leases)
        if self.recycle_rss_mb and held:
            rss = self._rss(slot)
            if rss + max(0.0, rss - slot.base_rss) / held > self.recycle_rss_mb:
                return held
        return self.theorems_per_worker

    def _rss(self, slot: _Slot, *, fresh: bool = False) -> float:
        now = time.monotonic()
        if fresh or now - slot.rss_at >= RSS_CACHE_S:
            slot.rss, slot.rss_at = slot.worker.rss_mb(), now
        return slot.rss

    def _due_for_recycling(self, slot: _Slot) -> str | None:
        worker = slot.worker
        if worker.requests >= self.recycle_requests:
            return f"{worker.requests} requests"
        if worker.age_s >= self.recycle_seconds:
            return f"age {worker.age_s:.0f}s"
        if self.recycle_rss_mb and self._rss(slot) > self.recycle_rss_mb:
            return f"rss above {self.recycle_rss_mb} MiB"
        return None

    def _raise_if_unusable(self) -> None:
        if self._closed:
            raise PoolClosedError("the Lean pool is closed")
        if self._failure is not None:
            raise self._failure

    async def _refresh(self, slot: _Slot) -> None:
        """Restart an empty worker that is dead (respawn) or due for recycling."""
        worker = slot.worker
        if not worker.alive:
            log.warning("respawning Lean worker %d (generation %d died)", slot.index, worker.starts)
            self._respawned += 1
        else:
            log.info("recycling Lean worker %d (pid %s): %s", slot.index, worker.pid,
                     slot.draining or self._due_for_recycling(slot))
            self._recycled += 1
        await worker.restart()
        slot.base_rss = self._rss(slot, fresh=True)

    async def _release(self, slot: _Slot, lease: LeanLease, cancelled: bool) -> None:
        try:
            if not self._closed and not cancelled:
                await lease.free()
        finally:
            async with self._changed:
                slot.leases.discard(lease)
                last = not slot.leases and not self._closed and not cancelled
                slot.busy = slot.busy or last
                self._changed.notify_all()
        if not last:
            return
        try:
            await self._empty(slot)
        except LeanStartError as exc:
            self._failure = self._failure or exc
        finally:
            async with self._changed:
                slot.busy = False
                self._changed.notify_all()

    async def _empty(self, slot: _Slot) -> None:
        """The worker's last theorem left: restart it if dead or draining, else `reset` it (a safety net under
        the leases' `goal.delete`) and note its RSS as its empty baseline."""
        worker = slot.worker
        if worker.alive and slot.draining is None and self._due_for_recycling(slot) is None:
            try:
                await worker.request("reset", {})
                slot.base_rss = self._rss(slot, fresh=True)
                return
            except LeanError as exc:
                log.warning("Lean worker %d failed on reset: %s", slot.index, exc)
        if worker.alive or self._failure is None:
            await self._refresh(slot)
        slot.draining = None

    # ------------------------------------------------------------------------------------------ reports

    @property
    def stats(self) -> PoolStats:
        return PoolStats(
            acquired=self._acquired,
            respawned=self._respawned + sum(w.respawns for w in [*(slot.worker for slot in self._slots),
                                                                 *self._verifiers]),
            recycled=self._recycled,
            peak_leases=self._peak,
        )

    def loads(self) -> list[WorkerLoad]:
        """Every worker's load, memory and state now (RSS at most RSS_CACHE_S old)."""
        return [
            WorkerLoad(
                index=slot.index,
                pid=slot.worker.pid,
                generation=slot.worker.generation,
                theorems=len(slot.leases),
                rss_mb=round(self._rss(slot), 1),
                requests=slot.worker.requests,
                draining=slot.draining,
            )
            for slot in self._slots
        ]

    def holders(self, index: int) -> list[str]:
        """The theorems on worker `index` now (for tests and logs)."""
        return sorted(lease.owner or "?" for lease in self._slots[index].leases)

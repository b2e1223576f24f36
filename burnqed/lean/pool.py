"""An async pool of Lean workers: a theorem holds one worker for its whole search.

    async with LeanPool.from_config(cfg.lean) as pool:
        async with pool.worker() as lean:      # exclusive until the block ends
            state = await lean.start_goal(expr=...)

The Pantograph version is learnt once, before any worker starts (`lean.pantograph_version`, else the first
worker's command run with `--version`), and given to every worker: requests depend on it.
Between theorems a worker is `reset` (its states freed) and recycled when it has answered
`recycle_requests` requests, is older than `recycle_seconds` or uses more than `recycle_rss_mb`.
A worker that crashed or was killed by its watchdog is respawned when it is released, so the pool
keeps serving. If a (re)start fails — the command is wrong, `ready.` never came — the pool
fails fast: every later `worker()` raises the same `LeanStartError` instead of respawning in a loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Self

from burnqed.config import LeanConfig
from burnqed.errors import LeanError, LeanStartError, PoolClosedError
from burnqed.lean.client import LeanWorker
from burnqed.lean.version import PantographVersion

log = logging.getLogger(__name__)


@dataclass
class PoolStats:
    """Counters for reports and logs."""

    acquired: int = 0
    respawned: int = 0  # workers found dead (crash, watchdog) and started again
    recycled: int = 0  # healthy workers restarted by the recycling policy


class LeanPool:
    """A fixed number of `LeanWorker`s handed out one at a time."""

    def __init__(
        self,
        factory: Callable[[], LeanWorker],
        size: int,
        *,
        recycle_requests: int = 1000,
        recycle_seconds: float = 1800.0,
        recycle_rss_mb: int = 0,
    ) -> None:
        if size < 1:
            raise ValueError("a pool needs at least one worker")
        self.size = size
        self.recycle_requests = recycle_requests
        self.recycle_seconds = recycle_seconds
        self.recycle_rss_mb = recycle_rss_mb
        self.stats = PoolStats()
        self._factory = factory
        self._workers: list[LeanWorker] = []
        self._idle: asyncio.Queue[LeanWorker] = asyncio.Queue()
        self._failure: LeanStartError | None = None
        self._closed = False
        self.version: PantographVersion | None = None  # known once start() returned

    @classmethod
    def from_config(cls, config: LeanConfig, size: int | None = None) -> LeanPool:
        return cls(
            lambda: LeanWorker.from_config(config),
            size if size is not None else config.resolved_workers(),
            recycle_requests=config.recycle_requests,
            recycle_seconds=config.recycle_seconds,
            recycle_rss_mb=config.recycle_rss_mb,
        )

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
        self._workers = [self._factory() for _ in range(self.size)]
        try:
            self.version = await self._workers[0].protocol_version()
        except BaseException:
            await self.close()
            raise
        for worker in self._workers:
            worker.version = self.version
        results = await asyncio.gather(*(w.start() for w in self._workers), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            await self.close()
            first = failures[0]
            if isinstance(first, LeanError):
                raise first
            raise LeanStartError(f"starting the Lean pool failed: {first!r}") from first
        for worker in self._workers:
            self._idle.put_nowait(worker)

    async def close(self) -> None:
        """Kill every worker. Idempotent; later `worker()` calls raise `PoolClosedError`."""
        self._closed = True
        workers, self._workers = self._workers, []
        await asyncio.gather(*(w.close() for w in workers), return_exceptions=True)

    def _due_for_recycling(self, worker: LeanWorker) -> str | None:
        if worker.requests >= self.recycle_requests:
            return f"{worker.requests} requests"
        if worker.age_s >= self.recycle_seconds:
            return f"age {worker.age_s:.0f}s"
        if self.recycle_rss_mb and worker.rss_mb() > self.recycle_rss_mb:
            return f"rss above {self.recycle_rss_mb} MiB"
        return None

    async def _respawn(self, worker: LeanWorker) -> None:
        log.warning("respawning Lean worker (generation %d died)", worker.generation)
        self.stats.respawned += 1
        await worker.restart()

    async def _prepare(self, worker: LeanWorker) -> None:
        if not worker.alive:
            await self._respawn(worker)
            return
        reason = self._due_for_recycling(worker)
        if reason:
            log.info("recycling Lean worker pid %s: %s", worker.pid, reason)
            self.stats.recycled += 1
            await worker.restart()

    @contextlib.asynccontextmanager
    async def worker(self) -> AsyncIterator[LeanWorker]:
        """Hold one worker exclusively (one theorem's search). Its states are freed when released."""
        if self._closed:
            raise PoolClosedError("the Lean pool is closed")
        if self._failure is not None:
            raise self._failure
        worker = await self._idle.get()
        try:
            if self._failure is not None:
                raise self._failure
            try:
                await self._prepare(worker)
            except LeanStartError as exc:
                self._failure = exc
                raise
            self.stats.acquired += 1
            yield worker
        finally:
            await self._release(worker)

    async def _release(self, worker: LeanWorker) -> None:
        try:
            if self._closed:
                return
            if worker.alive:
                try:
                    await worker.reset()
                except LeanError as exc:
                    log.warning("Lean worker failed on reset: %s", exc)
            if not worker.alive and self._failure is None:
                # Replace it now: the theorem that lost it pays the start-up, not the next one.
                try:
                    await self._respawn(worker)
                except LeanStartError as exc:
                    self._failure = exc
        finally:
            self._idle.put_nowait(worker)

"""`BatchingPolicy`: coalesces the `generate` calls of many concurrent searches into few large requests.

    policy = BatchingPolicy(SGLangClient.from_config(cfg), max_batch_prompts=64, max_inflight=2)
    completions = await policy.generate(prompts, sampling)   # from many tasks at once

Asks queue, and whenever a request slot is free every queued prompt with the same sampling settings (up to
`max_batch_prompts`) goes as one request, so the batch size grows with the load with no timer (docs/search.md,
"Many theorems at once"). Seeded asks are batched with seeded asks only; a seeded sample depends on its prompt and
seed alone. A failed request fails every ask in it; a cancelled ask is dropped (or its answer discarded).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from burnqed.policy.base import AsyncClosing, Completion, Policy, Sampling, Seeds, check_seeds


@dataclass(slots=True)
class _Ask:
    prompts: Sequence[str]
    seeds: Seeds | None
    future: asyncio.Future[list[list[Completion]]]


@dataclass(slots=True)
class BatchStats:
    """What the batcher did: request count, prompts sent and time with at least one request in flight."""

    requests: int = 0
    prompts: int = 0
    busy_s: float = 0.0
    batch_sizes: list[int] = field(default_factory=list)

    @property
    def mean_batch(self) -> float:
        return self.prompts / self.requests if self.requests else 0.0


class BatchingPolicy(AsyncClosing):
    """A `Policy` that batches concurrent asks; see the module docstring."""

    def __init__(self, inner: Policy, *, max_batch_prompts: int = 64, max_inflight: int = 1) -> None:
        if max_batch_prompts < 1 or max_inflight < 1:
            raise ValueError("max_batch_prompts and max_inflight must be at least 1")
        self.inner = inner
        self.max_batch_prompts = max_batch_prompts
        self.max_inflight = max_inflight
        self.stats = BatchStats()
        self._queues: dict[tuple[Sampling, bool], list[_Ask]] = {}  # by (sampling, seeded)
        self._inflight = 0
        self._busy_since: float | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self._asking = 0

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def waiting(self) -> int:
        """Asks not answered yet (queued or in flight): how many searches are waiting for the policy now."""
        return self._asking

    async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
        check_seeds(prompts, sampling.n, seeds)
        if not prompts:
            return []
        if self._closed:
            raise RuntimeError("the batching policy is closed")
        future: asyncio.Future[list[list[Completion]]] = asyncio.get_running_loop().create_future()
        ask = _Ask(prompts, seeds, future)
        key = (sampling, seeds is not None)
        self._queues.setdefault(key, []).append(ask)
        self._asking += 1
        self._dispatch()
        try:
            return await future
        except asyncio.CancelledError:
            queue = self._queues.get(key)
            if queue is not None and ask in queue:
                queue.remove(ask)
            raise
        finally:
            self._asking -= 1

    async def close(self) -> None:
        """Cancel queued and in-flight asks (their callers see CancelledError), then close the inner policy."""
        self._closed = True
        for queue in self._queues.values():
            for ask in queue:
                ask.future.cancel()
        self._queues.clear()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.inner.close()

    def _dispatch(self) -> None:
        while not self._closed and self._inflight < self.max_inflight:
            batch = self._take()
            if batch is None:
                return
            sampling, asks = batch
            self._inflight += 1
            if self._busy_since is None:
                self._busy_since = time.perf_counter()
            task = asyncio.get_running_loop().create_task(self._send(sampling, asks))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _take(self) -> tuple[Sampling, list[_Ask]] | None:
        """The oldest sampling group's asks, up to max_batch_prompts prompts (an oversized ask goes alone)."""
        for key, queue in self._queues.items():
            if not queue:
                continue
            asks: list[_Ask] = []
            size = 0
            while queue and (not asks or size + len(queue[0].prompts) <= self.max_batch_prompts):
                ask = queue.pop(0)
                asks.append(ask)
                size += len(ask.prompts)
            if not queue:
                del self._queues[key]
            return key[0], asks
        return None

    async def _send(self, sampling: Sampling, asks: list[_Ask]) -> None:
        prompts = [p for ask in asks for p in ask.prompts]
        seeded = [list(row) for ask in asks if ask.seeds is not None for row in ask.seeds]
        try:
            if seeded:
                results = await self.inner.generate(prompts, sampling, seeded)
            else:
                results = await self.inner.generate(prompts, sampling)
            if len(results) != len(prompts):
                raise RuntimeError(f"policy returned {len(results)} prompt results for {len(prompts)} prompts")
        except BaseException as exc:
            _fail_asks(asks, exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
        else:
            _answer_asks(asks, results)
            self.stats.requests += 1
            self.stats.prompts += len(prompts)
            self.stats.batch_sizes.append(len(prompts))
        finally:
            self._inflight -= 1
            if self._inflight == 0 and self._busy_since is not None:
                self.stats.busy_s += time.perf_counter() - self._busy_since
                self._busy_since = None
            self._dispatch()


def _fail_asks(asks: list[_Ask], exc: BaseException) -> None:
    """Pass a failed request's exception to every waiting ask (a cancellation cancels them)."""
    for ask in asks:
        if not ask.future.done():
            if isinstance(exc, asyncio.CancelledError):
                ask.future.cancel()
            else:
                ask.future.set_exception(exc)


def _answer_asks(asks: list[_Ask], results: list[list[Completion]]) -> None:
    """Give every waiting ask its slice of the batch's results (one per prompt, in the asks' order)."""
    offset = 0
    for ask in asks:
        if not ask.future.done():
            ask.future.set_result(results[offset : offset + len(ask.prompts)])
        offset += len(ask.prompts)

"""BatchingPolicy: concurrent asks share requests; errors, cancellation and close behave."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from burnqed.errors import PolicyError
from burnqed.policy.base import AsyncClosing, Completion, Sampling, Seeds
from burnqed.policy.batching import BatchingPolicy


class Recorder(AsyncClosing):
    """Answers each prompt with one completion echoing it; records the prompts of every request."""

    name = "recorder"

    def __init__(self, delay_s: float = 0.02, fail: bool = False) -> None:
        self.delay_s = delay_s
        self.fail = fail
        self.requests: list[list[str]] = []
        self.closed = False

    async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
        self.requests.append(list(prompts))
        await asyncio.sleep(self.delay_s)
        if self.fail:
            raise PolicyError("server gave up")
        return [[Completion(f"{p}!", -1.0, 1)] for p in prompts]

    async def close(self) -> None:
        self.closed = True


def test_asks_made_while_a_request_is_in_flight_share_the_next_request() -> None:
    inner = Recorder()

    async def go() -> list[list[list[Completion]]]:
        policy = BatchingPolicy(inner, max_batch_prompts=64, max_inflight=1)
        return await asyncio.gather(*(policy.generate([f"p{i}a", f"p{i}b"], Sampling()) for i in range(5)))

    answers = asyncio.run(go())
    assert inner.requests == [["p0a", "p0b"], ["p1a", "p1b", "p2a", "p2b", "p3a", "p3b", "p4a", "p4b"]]
    assert [[c[0].text for c in a] for a in answers] == [[f"p{i}a!", f"p{i}b!"] for i in range(5)]


def test_batches_respect_the_prompt_cap_and_the_sampling_settings() -> None:
    inner = Recorder()

    async def go() -> None:
        policy = BatchingPolicy(inner, max_batch_prompts=3, max_inflight=1)
        await asyncio.gather(
            policy.generate(["first"], Sampling()),
            *(policy.generate([f"a{i}"], Sampling(n=2)) for i in range(4)),
            policy.generate(["b0"], Sampling(n=3)),
        )
        assert policy.stats.requests == len(inner.requests)

    asyncio.run(go())
    assert inner.requests == [["first"], ["a0", "a1", "a2"], ["a3"], ["b0"]]


def test_a_failed_request_fails_every_ask_in_it() -> None:
    async def go() -> list[object]:
        policy = BatchingPolicy(Recorder(fail=True), max_inflight=1)
        return await asyncio.gather(*(policy.generate([f"p{i}"], Sampling()) for i in range(3)),
                                    return_exceptions=True)

    assert all(isinstance(r, PolicyError) for r in asyncio.run(go()))


def test_a_cancelled_ask_leaves_the_queue() -> None:
    inner = Recorder()

    async def go() -> None:
        policy = BatchingPolicy(inner, max_inflight=1)
        first = asyncio.ensure_future(policy.generate(["first"], Sampling()))
        await asyncio.sleep(0)
        dropped = asyncio.ensure_future(policy.generate(["dropped"], Sampling()))
        kept = asyncio.ensure_future(policy.generate(["kept"], Sampling()))
        await asyncio.sleep(0)
        dropped.cancel()
        await asyncio.gather(first, kept)

    asyncio.run(go())
    assert inner.requests == [["first"], ["kept"]]


def test_close_cancels_queued_asks_and_sends_nothing_more() -> None:
    inner = Recorder(delay_s=0.2)

    async def go() -> tuple[bool, bool]:
        policy = BatchingPolicy(inner, max_inflight=1)
        in_flight = asyncio.ensure_future(policy.generate(["first"], Sampling()))
        await asyncio.sleep(0)
        queued = asyncio.ensure_future(policy.generate(["queued"], Sampling()))
        await asyncio.sleep(0.01)
        await policy.close()
        await asyncio.gather(in_flight, queued, return_exceptions=True)
        with pytest.raises(RuntimeError, match="closed"):
            await policy.generate(["late"], Sampling())
        return in_flight.cancelled(), queued.cancelled()

    assert asyncio.run(go()) == (True, True)
    assert inner.requests == [["first"]] and inner.closed

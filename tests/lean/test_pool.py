"""The worker pool over real subprocesses: concurrency, crash replacement, recycling, fail-fast starts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from burnqed.errors import LeanStartError, PoolClosedError
from burnqed.lean.client import LeanWorker
from burnqed.lean.pool import LeanPool
from burnqed.records import TacticKind
from tests.conftest import double_argv


def make_pool(size: int, *flags: str, timeout: float = 5.0, **recycle: float) -> LeanPool:
    def factory() -> LeanWorker:
        return LeanWorker(double_argv(*flags), tactic_timeout_s=timeout, watchdog_grace_s=0.2, ready_timeout_s=5)

    return LeanPool(factory, size, **recycle)  # type: ignore[arg-type]


async def prove(pool: LeanPool, tactic: str = "done") -> TacticKind:
    async with pool.worker() as lean:
        state = await lean.start_goal(expr="p")
        step = await lean.tactic(state, "intro x")
        assert step.state_id is not None
        return (await lean.tactic(step.state_id, tactic)).kind


@pytest.mark.slow
def test_many_theorems_share_the_pool_and_a_hang_does_not_stop_it():
    async def run() -> None:
        async with make_pool(2, timeout=0.3) as pool:
            tactics = ["done"] * 10 + ["hang"] + ["done"] * 10
            kinds = await asyncio.gather(*(prove(pool, t) for t in tactics))
            assert kinds.count(TacticKind.SUCCESS) == 20
            assert kinds.count(TacticKind.TIMEOUT) == 1
            # The hung worker was replaced and the pool keeps serving.
            assert await prove(pool) is TacticKind.SUCCESS
            assert pool.stats.respawned == 1
            assert pool.stats.acquired == 22

    asyncio.run(run())


def test_crash_mid_request_is_replaced():
    async def run() -> None:
        async with make_pool(1) as pool:
            assert await prove(pool, "crash") is TacticKind.CRASH
            assert await prove(pool) is TacticKind.SUCCESS
            assert pool.stats.respawned == 1

    asyncio.run(run())


def test_states_are_freed_between_theorems():
    async def run() -> None:
        async with make_pool(1) as pool:
            await prove(pool)
            async with pool.worker() as lean:
                assert await lean.stat() == 0

    asyncio.run(run())


@pytest.mark.slow
def test_start_failure_fails_fast_without_retry_storm(tmp_path: Path):
    starts = tmp_path / "starts"

    async def run() -> None:
        pool = make_pool(3, "--no-ready", "1", "--starts", str(starts))
        with pytest.raises(LeanStartError, match="exited with code 1"):
            await pool.start()
        with pytest.raises(PoolClosedError):
            async with pool.worker():
                pass

    asyncio.run(run())
    assert len(starts.read_text().splitlines()) == 3  # one attempt per worker, no respawn loop


@pytest.mark.slow
def test_respawn_failure_poisons_the_pool(tmp_path: Path):
    flag = tmp_path / "broken"

    def factory() -> LeanWorker:
        # A worker whose later starts fail: the command changes under it (e.g. a deleted toolchain).
        class Flaky(LeanWorker):
            async def start(self) -> None:
                if flag.exists():
                    self.argv = double_argv("--no-ready", "2")
                await super().start()

        return Flaky(double_argv(), tactic_timeout_s=5, ready_timeout_s=5)

    async def run() -> None:
        async with LeanPool(factory, 1) as pool:
            async with pool.worker() as lean:
                state = await lean.start_goal(expr="p")
                assert (await lean.tactic(state, "crash")).kind is TacticKind.CRASH
                flag.touch()
            for _ in range(2):
                with pytest.raises(LeanStartError, match="exited with code 2"):
                    await prove(pool)
            assert pool.stats.respawned == 1

    asyncio.run(run())


@pytest.mark.parametrize(
    "recycle",
    [{"recycle_requests": 3}, {"recycle_seconds": 0.01}, {"recycle_rss_mb": 1}],
    ids=["requests", "age", "rss"],
)
@pytest.mark.slow
def test_recycling(recycle: dict[str, float]):
    async def run() -> None:
        async with make_pool(1, **recycle) as pool:
            async with pool.worker() as lean:
                first_pid = lean.pid
                await lean.start_goal(expr="p")
                await lean.start_goal(expr="q")
            await asyncio.sleep(0.02)
            async with pool.worker() as lean:
                assert lean.pid != first_pid
                assert lean.generation >= 2  # rss > 1 MiB already at the first acquisition
            assert pool.stats.recycled >= 1

    asyncio.run(run())


def test_no_recycling_below_thresholds():
    async def run() -> None:
        async with make_pool(1, recycle_requests=1000, recycle_seconds=1000, recycle_rss_mb=100000) as pool:
            async with pool.worker() as lean:
                first_pid = lean.pid
            async with pool.worker() as lean:
                assert lean.pid == first_pid
            assert pool.stats.recycled == 0

    asyncio.run(run())

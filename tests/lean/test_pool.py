"""The worker pool: affinity without exclusivity (leases shared by several theorems), freeing states, reset only
when empty, draining for recycling, the memory rule, fairness, crash replacement, fail-fast starts. Real
subprocesses (the strict double) wherever a process matters; a scripted worker where only admission does."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from burnqed.config import LeanConfig
from burnqed.errors import LeanStartError, LeanStatesLostError, PoolClosedError
from burnqed.lean.client import LeanWorker
from burnqed.lean.lease import LeanLease
from burnqed.lean.pool import LeanPool
from burnqed.records.replies import CompileResult, TacticKind
from leankit.version import PantographVersion
from tests.conftest import double_argv


def make_pool(size: int, *flags: str, timeout: float = 5.0, per_worker: int = 1, **recycle: Any) -> LeanPool:
    def factory() -> LeanWorker:
        return LeanWorker(double_argv(*flags), tactic_timeout_s=timeout, watchdog_grace_s=0.2, ready_timeout_s=10)

    return LeanPool(factory, size, theorems_per_worker=per_worker, **recycle)


def requests(log: Path) -> list[tuple[str, dict[str, Any]]]:
    rows = []
    for line in log.read_text(encoding="utf-8").splitlines():
        command, _, body = line.partition(" ")
        rows.append((command, json.loads(body) if body.strip() else {}))
    return rows


async def prove(pool: LeanPool, tactic: str = "done") -> TacticKind | str:
    """One short theorem; "lost" when a neighbour's fault replaced the shared worker under it."""
    async with pool.lease("t") as lean:
        try:
            state = await lean.start_goal(expr="p")
            step = await lean.tactic(state, "intro x")
            assert step.state_id is not None
            return (await lean.tactic(step.state_id, tactic)).kind
        except LeanStatesLostError:
            return "lost"


# ------------------------------------------------------------------------------------ sharing and freeing


@pytest.mark.slow
def test_a_worker_serves_several_theorems_and_the_least_loaded_is_picked():
    async def run() -> None:
        async with make_pool(2, per_worker=2) as pool:
            assert pool.capacity == 4
            async with pool.lease("a") as a, pool.lease("b") as b, pool.lease("c") as c, pool.lease("d") as d:
                # a → worker 0, b → worker 1 (less loaded), c → 0 (tie: lowest index), d → 1.
                assert (a.worker, c.worker) == (pool._slots[0].worker, pool._slots[0].worker)
                assert (b.worker, d.worker) == (pool._slots[1].worker, pool._slots[1].worker)
                assert [load.theorems for load in pool.loads()] == [2, 2]
                assert pool.holders(0) == ["a", "c"] and pool.holders(1) == ["b", "d"]
                # Both theorems on worker 0 work on one process, each with its own states.
                sa, sc = await a.start_goal(expr="p"), await c.start_goal(expr="q")
                assert sa != sc and a.worker.pid == c.worker.pid
                assert (await a.tactic(sa, "done")).closed_all_goals
                assert (await c.tactic(sc, "intro y")).kind is TacticKind.SUCCESS
                # A fifth theorem waits for room, then gets the worker that freed a place.
                waiting = pool.lease("e")
                fifth = asyncio.ensure_future(waiting.__aenter__())
                await asyncio.sleep(0.2)
                assert not fifth.done()
            e = await asyncio.wait_for(fifth, 5)
            assert isinstance(e, LeanLease) and e.owner == "e"
            await waiting.__aexit__(None, None, None)
            assert pool.stats.acquired == 5 and pool.stats.peak_leases == 4

    asyncio.run(run())


def test_release_deletes_the_theorems_states_and_resets_only_an_empty_worker(tmp_path: Path):
    log = tmp_path / "requests.log"

    async def run() -> None:
        async with make_pool(1, "--log", str(log), per_worker=2) as pool:
            async with pool.lease("first") as first:
                async with pool.lease("second") as second:
                    s1 = await first.start_goal(expr="p")
                    t1 = await first.tactic(s1, "intro x")
                    s2 = await second.start_goal(expr="q")
                    assert await second.stat() == 3
                assert await first.stat() == 2  # only the second theorem's state went: no reset yet
                assert t1.state_id is not None
                assert (await first.tactic(t1.state_id, "done")).closed_all_goals
            async with pool.lease("third") as third:
                assert await third.stat() == 0
        sent = requests(log)
        deletes = [payload["stateIds"] for command, payload in sent if command == "goal.delete"]
        assert deletes == [[s2], [s1, t1.state_id, t1.state_id + 2]]
        resets = [i for i, (command, _) in enumerate(sent) if command == "reset"]
        last_delete = max(i for i, (command, _) in enumerate(sent) if command == "goal.delete")
        # A reset each time the worker became empty (after `first`, after `third`), never while one held it.
        assert resets == [last_delete + 1, len(sent) - 1]

    asyncio.run(run())


@pytest.mark.slow
def test_a_crash_loses_only_that_workers_states_and_stale_ids_are_never_sent(tmp_path: Path):
    log = tmp_path / "requests.log"

    async def run() -> None:
        async with make_pool(2, "--log", str(log), per_worker=2) as pool:
            async with pool.lease("a") as a, pool.lease("b") as b, pool.lease("c") as c:
                assert a.worker is c.worker and b.worker is not a.worker
                sa, sb, sc = [await lean.start_goal(expr="p") for lean in (a, b, c)]
                generation = c.generation
                assert (await a.tactic(sa, "crash")).kind is TacticKind.CRASH
                # c shares the crashed worker: its state is gone, and the request is refused unsent.
                assert c.generation != generation
                with pytest.raises(LeanStatesLostError):
                    await c.tactic(sc, "intro x")
                # b, on the other worker, is untouched.
                assert (await b.tactic(sb, "intro x")).kind is TacticKind.SUCCESS
                # c starts again on the respawned process and goes on.
                again = await c.start_goal(expr="p")
                assert (await c.tactic(again, "done")).closed_all_goals
                assert c.generation == generation + 1
            assert pool.stats.respawned == 1
        tactics = [payload["tactic"] for command, payload in requests(log) if command == "goal.tactic"]
        assert tactics.count("intro x") == 1  # c's stale request never reached the new process

    asyncio.run(run())


@pytest.mark.slow
def test_a_lease_refuses_reset_and_ids_it_did_not_make():
    async def run() -> None:
        async with make_pool(1, per_worker=2) as pool, pool.lease("a") as a, pool.lease("b") as b:
            sa = await a.start_goal(expr="p")
            with pytest.raises(LeanStatesLostError):
                await b.tactic(sa, "done")  # another theorem's state
            with pytest.raises(RuntimeError, match="shares its worker"):
                await b.reset()

    asyncio.run(run())


@pytest.mark.slow
def test_fifo_on_the_pipe_no_theorem_starves(tmp_path: Path):
    """Four theorems hammer one worker; the pipe serves them in turn: between two requests of one theorem at
    most the three others are served."""
    log = tmp_path / "requests.log"

    async def hammer(lean: LeanLease, name: str, count: int) -> None:
        state = await lean.start_goal(expr="p")
        for i in range(count):
            await lean.tactic(state, f"echo {name}{i}")

    async def run() -> None:
        async with make_pool(1, "--log", str(log), per_worker=4) as pool:
            leases = [pool.lease(name) for name in "abcd"]
            held = [await cm.__aenter__() for cm in leases]
            await asyncio.gather(*(hammer(lean, name, 12 if name == "a" else 3) for lean, name in
                                   zip(held, "abcd", strict=True)))
            for cm in leases:
                await cm.__aexit__(None, None, None)

    asyncio.run(run())
    order = [payload["tactic"][5] for command, payload in requests(log) if command == "goal.tactic"]
    assert sorted(order) == sorted("a" * 12 + "bcd" * 3)
    for name in "bcd":
        served = [i for i, who in enumerate(order) if who == name]
        assert all(later - earlier <= 4 for earlier, later in itertools.pairwise(served)), order


# ----------------------------------------------------------------------------- recycling and memory


@pytest.mark.parametrize(
    "recycle",
    [{"recycle_requests": 3}, {"recycle_seconds": 0.01}, {"recycle_rss_mb": 1}],
    ids=["requests", "age", "rss"],
)
@pytest.mark.slow
def test_recycling(recycle: dict[str, Any]):
    async def run() -> None:
        async with make_pool(1, **recycle) as pool:
            async with pool.lease() as lean:
                first_pid = lean.worker.pid
                await lean.start_goal(expr="p")
                await lean.start_goal(expr="q")
            await asyncio.sleep(0.02)
            async with pool.lease() as lean:
                assert lean.worker.pid != first_pid
                assert lean.generation >= 2  # rss > 1 MiB already at the first acquisition
            assert pool.stats.recycled >= 1

    asyncio.run(run())


def test_no_recycling_below_thresholds():
    async def run() -> None:
        async with make_pool(1, recycle_requests=1000, recycle_seconds=1000, recycle_rss_mb=100000) as pool:
            async with pool.lease() as lean:
                first_pid = lean.worker.pid
            async with pool.lease() as lean:
                assert lean.worker.pid == first_pid
            assert pool.stats.recycled == 0

    asyncio.run(run())


@pytest.mark.slow
def test_recycling_drains_a_shared_worker(tmp_path: Path):
    """A worker due for recycling admits no new theorem; its theorems finish on it; then it restarts."""
    starts = tmp_path / "starts"

    async def run() -> None:
        async with make_pool(2, "--starts", str(starts), per_worker=2, recycle_requests=4) as pool:
            held = {name: pool.lease(name) for name in "abcd"}
            a = await held["a"].__aenter__()
            state = await a.start_goal(expr="p")
            for _ in range(4):
                await a.tactic(state, "intro x")
            draining_pid = a.worker.pid
            b = await held["b"].__aenter__()  # worker 0 is due: b goes to worker 1 although 0 has room
            c = await held["c"].__aenter__()
            assert b.worker is not a.worker and c.worker is b.worker
            assert [load.draining is not None for load in pool.loads()] == [True, False]
            # A fourth theorem waits: worker 1 is full, worker 0 drains.
            fourth = asyncio.ensure_future(held["d"].__aenter__())
            await asyncio.sleep(0.2)
            assert not fourth.done()
            assert (await a.tactic(state, "done")).closed_all_goals  # the draining worker still serves a
            await held["a"].__aexit__(None, None, None)
            d = await asyncio.wait_for(fourth, 10)  # a left: worker 0 restarted and admits again
            assert d.worker is a.worker and d.worker.pid != draining_pid
            assert pool.stats.recycled == 1 and pool.loads()[0].draining is None
            for name in "dbc":
                await held[name].__aexit__(None, None, None)

    asyncio.run(run())
    assert len(starts.read_text().splitlines()) == 3


class ScriptedWorker:
    """A pool worker whose RSS the test sets: the admission rule without processes. More lenient than a
    `LeanWorker`: it never fails to start, answers no requests and has no process to kill (pid None), so only the
    pool's bookkeeping is tested with it; crashes, respawns and kills are tested with the strict double above."""

    def __init__(self) -> None:
        self.version: PantographVersion | None = PantographVersion.parse("0.3.4")
        self.starts = 1
        self.respawns = 0
        self.requests = 0
        self.rss = 1000.0
        self.alive = True
        self.repl_scope: str | None = ""

    @property
    def generation(self) -> int:
        return self.starts

    @property
    def pid(self) -> int | None:
        return None

    @property
    def age_s(self) -> float:
        return 0.0

    def rss_mb(self) -> float:
        return self.rss

    async def protocol_version(self) -> PantographVersion:
        assert self.version is not None
        return self.version

    async def start(self) -> None: ...

    async def restart(self) -> None:
        self.starts += 1

    async def close(self) -> None: ...

    async def request(
        self, command: str, payload: Mapping[str, Any], timeout_s: float | None = None, *,
        generation: int | None = None, scope: str | None = None,
    ) -> dict[str, Any]:
        return {"nGoals": 0}

    async def compile(self, text: str, timeout_s: float | None = None) -> CompileResult:
        raise AssertionError("not used: these tests compile nothing")


def test_memory_budget_admits_fewer_theorems():
    """r + (r − r₀)/k ≤ budget: at 1000 MiB empty and 1600 MiB with two theorems, a third would bring ~1900."""
    workers = [ScriptedWorker(), ScriptedWorker()]

    async def run() -> None:
        pool = LeanPool(iter(workers).__next__, 2, theorems_per_worker=4, recycle_rss_mb=1800)
        await pool.start()
        async with pool.lease("a"), pool.lease("b"), pool.lease("c"):
            assert [load.theorems for load in pool.loads()] == [2, 1]
            workers[0].rss = 1600.0
            for slot in pool._slots:
                slot.rss_at = -1e9  # forget the cached reading
            async with pool.lease("d") as d, pool.lease("e") as e:
                assert d.worker is workers[1] and e.worker is workers[1]  # worker 0 is near its budget
                workers[0].rss = 1500.0  # 1500 + 500/2 = 1750 fits again
                for slot in pool._slots:
                    slot.rss_at = -1e9
                async with pool.lease("f") as f:
                    assert f.worker is workers[0]

    asyncio.run(run())


# ------------------------------------------------------------------------------- faults and failures


@pytest.mark.slow
def test_many_theorems_share_the_pool_and_a_hang_does_not_stop_it():
    async def run() -> None:
        async with make_pool(2, timeout=0.3, per_worker=2) as pool:
            tactics = ["done"] * 10 + ["hang"] + ["done"] * 10
            kinds = await asyncio.gather(*(prove(pool, t) for t in tactics))
            assert kinds.count(TacticKind.TIMEOUT) == 1
            # A theorem that shared the hung worker may have lost its states with it (refused unsent: a search
            # rebuilds and asks again); nothing else failed.
            assert kinds.count(TacticKind.SUCCESS) + kinds.count("lost") == 20 and kinds.count("lost") <= 1
            assert await prove(pool) is TacticKind.SUCCESS
            assert pool.stats.respawned == 1
            assert pool.stats.acquired == 22

    asyncio.run(run())


@pytest.mark.slow
def test_crash_mid_request_is_replaced():
    async def run() -> None:
        async with make_pool(1) as pool:
            assert await prove(pool, "crash") is TacticKind.CRASH
            assert await prove(pool) is TacticKind.SUCCESS
            assert pool.stats.respawned == 1

    asyncio.run(run())


@pytest.mark.slow
def test_a_worker_past_its_memory_limit_fails_its_request_as_out_of_memory_and_is_replaced():
    """lean.worker_memory_limit_mb is the worker's RLIMIT_DATA: elaboration that allocates past it ends the process
    (as Lean's runtime does out of memory); the request is a crash naming the setting and the next theorem gets a
    fresh worker. Under the limit, the same worker serves on."""
    async def run() -> None:
        def factory() -> LeanWorker:
            return LeanWorker(double_argv(), tactic_timeout_s=5.0, watchdog_grace_s=0.2, ready_timeout_s=10,
                              memory_limit_mb=400)

        async with LeanPool(factory, 1) as pool:
            assert await prove(pool, "allocate:64") is TacticKind.SUCCESS
            async with pool.lease("t") as lean:
                state = await lean.start_goal(expr="p")
                result = await lean.tactic(state, "allocate:1000")
            assert result.kind is TacticKind.CRASH
            assert result.errors[0].startswith("Lean worker ran out of memory while answering `goal.tactic`: it may "
                                               "hold lean.worker_memory_limit_mb=400 MiB")
            assert "INTERNAL PANIC: out of memory" in result.errors[0]
            assert await prove(pool) is TacticKind.SUCCESS
            assert pool.stats.respawned == 1

    asyncio.run(run())


def test_a_worker_from_config_gets_the_configured_memory_limit():
    assert LeanWorker.from_config(LeanConfig(command=["repl"], worker_memory_limit_mb=1234)).memory_limit_mb == 1234
    assert LeanWorker.from_config(LeanConfig(command=["repl"])).memory_limit_mb == 16000


@pytest.mark.slow
def test_start_failure_fails_fast_without_retry_storm(tmp_path: Path):
    starts = tmp_path / "starts"

    async def run() -> None:
        pool = make_pool(3, "--no-ready", "1", "--starts", str(starts))
        with pytest.raises(LeanStartError, match="exited with code 1"):
            await pool.start()
        with pytest.raises(PoolClosedError):
            async with pool.lease():
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
            async with pool.lease() as lean:
                state = await lean.start_goal(expr="p")
                assert (await lean.tactic(state, "crash")).kind is TacticKind.CRASH
                flag.touch()
            for _ in range(2):
                with pytest.raises(LeanStartError, match="exited with code 2"):
                    await prove(pool)
            assert pool.stats.respawned == 1

    asyncio.run(run())

"""A Lean worker that hangs rather than dies (issue 49, item 2): the real worker process (the Pantograph double) is
stopped with SIGSTOP, as a frozen node or a debugger would leave it. A stopped process ignores SIGTERM until it is
continued, so only SIGKILL to its process group frees it: the client's watchdog kills the group, the request comes
back as a timeout with its states lost, the next request starts a new process, and the search goes on there. No
process is left behind (tests/conftest.py's `no_leaked_processes` checks every test)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Sequence

import psutil
import pytest

from burnqed.config import LeanConfig
from burnqed.lean.client import LeanWorker
from burnqed.lean.guard import TacticGuard
from burnqed.lean.pool import LeanPool
from burnqed.policy.base import Completion, Sampling, Seeds
from burnqed.records.replies import TacticKind
from burnqed.records.results import TheoremResult
from burnqed.records.theorem import Theorem
from burnqed.search.runner import run_theorems
from burnqed.search.step import StepSettings
from tests.conftest import double_argv
from tests.doubles.policy_double import ScriptedPolicy, state_of

TACTIC_TIMEOUT_S = 0.5
GRACE_S = 0.5  # the watchdog fires after tactic_timeout_s + watchdog_grace_s = 1 s


def _gone(pid: int) -> bool:
    """The process no longer exists (killed and reaped), or is a zombie nobody waits for."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def stop(pid: int) -> None:
    """SIGSTOP `pid` and wait until the kernel shows it stopped (signals are delivered asynchronously)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5.0
    while psutil.Process(pid).status() != psutil.STATUS_STOPPED:
        assert time.monotonic() < deadline, "the worker did not stop"
        time.sleep(0.01)


@pytest.mark.slow
def test_a_stopped_worker_is_killed_by_the_watchdog_and_the_next_request_gets_a_new_process():
    async def run() -> None:
        async with LeanWorker(double_argv(), tactic_timeout_s=TACTIC_TIMEOUT_S, watchdog_grace_s=GRACE_S) as worker:
            state = await worker.start_goal(expr="∀ (n : ℕ), n = n")
            stopped, generation = worker.pid, worker.generation
            assert stopped is not None
            stop(stopped)
            began = time.monotonic()
            result = await worker.tactic(state, "intro n")
            waited = time.monotonic() - began
            assert result.kind is TacticKind.TIMEOUT and result.states_lost
            assert result.errors == ("Lean did not answer `goal.tactic` within 1s; worker killed (it will be "
                                     "respawned)",)
            assert 1.0 <= waited < 5.0
            assert _gone(stopped) and worker.generation == generation + 1
            # The next request starts a new process, which answers.
            fresh = await worker.start_goal(expr="∀ (n : ℕ), n = n")
            assert (await worker.tactic(fresh, "intro n")).kind is TacticKind.SUCCESS
            assert worker.respawns == 1 and worker.pid not in (None, stopped)

    asyncio.run(run())


class StoppingPolicy(ScriptedPolicy):
    """Closes the theorem in two steps (`step` at the root, then `done` or `finish`); the first time the second
    state is asked, it stops the process of the worker holding the theorem with SIGSTOP, between two requests."""

    def __init__(self, pool: LeanPool) -> None:
        super().__init__(self.answer)
        self.pool = pool
        self.stopped: list[int] = []

    @staticmethod
    def answer(state: str) -> list[tuple[str, float]]:
        if "after step" in state:
            return [("done", -0.1), ("finish", -0.2)]
        return [("step", -0.1)]

    async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
        if not self.stopped and any("after step" in state_of(p) for p in prompts):
            worker = self.pool._slots[0].worker
            assert isinstance(worker, LeanWorker) and worker.pid is not None
            stop(worker.pid)
            self.stopped.append(worker.pid)
        return await super().generate(prompts, sampling, seeds)


@pytest.mark.slow
def test_a_worker_stopped_mid_search_is_replaced_and_the_search_goes_on():
    config = LeanConfig(command=double_argv("--closes", "finish"), workers=1, tactic_timeout_s=TACTIC_TIMEOUT_S,
                        watchdog_grace_s=GRACE_S)
    theorem = Theorem(name="stopped_mid_search", statement="∀ (n : ℕ), n + 0 = n")
    settings = StepSettings(sampling=Sampling(n=2), max_nodes=10, timeout_s=60.0)

    async def run() -> tuple[list[TheoremResult], StoppingPolicy, int]:
        async with LeanPool.from_config(config, 1) as pool:
            policy = StoppingPolicy(pool)
            results = await run_theorems([theorem], pool, policy, settings, TacticGuard.from_config(config))
            return results, policy, pool.stats.respawned

    results, policy, respawned = asyncio.run(run())
    assert len(policy.stopped) == 1 and _gone(policy.stopped[0])
    assert respawned == 1
    (result,) = results
    # `done` hung on the stopped process (timeout, states lost); the tree was rebuilt on the new process
    # (`step` replayed) and `finish` closed the theorem there, compiled and counted.
    assert result.proved, (result.failure_reason, result.detail)
    assert result.tactics == ["step", "finish"]

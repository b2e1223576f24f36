"""A compile that outruns `lean.compile_timeout_s` fails alone: the theorems sharing its search worker finish.

Against the strict double over real pipes, a pool of ONE search worker shared by three theorems and one verifier
worker (`lean.verifier_workers`): theorem A's proof compiles forever (`compilehang`). From 0.3.4 Pantograph's
`frontend.process` honours `options.set timeout`, so the verifier answers with every unit interrupted; before,
nothing bounds it in Lean and the client watchdog kills the verifier. Either way A is not counted, B and C (whose
compiles queue on the same verifier) are, and the search worker was never replaced: no state was lost.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from burnqed.config import LeanConfig
from burnqed.lean.guard import TacticGuard
from burnqed.lean.pool import LeanPool, WorkerLoad
from burnqed.policy.base import Sampling
from burnqed.records.theorem import Theorem
from burnqed.search.step import SearchOutcome, StepSettings, prove
from leankit.version import SUPPORTED, PantographVersion
from tests.conftest import double_argv
from tests.doubles.policy_double import ScriptedPolicy

GUARD = TacticGuard.from_config(LeanConfig())
SETTINGS = StepSettings(sampling=Sampling(n=1), max_nodes=4, timeout_s=60.0)
FRONTEND_TIMEOUT_FROM = PantographVersion(0, 3, 4)


def two_steps(last: str) -> ScriptedPolicy:
    """`intro x` first (a state that must survive on the shared worker), then `last`."""
    return ScriptedPolicy(lambda state: [(last, -0.1)] if "after intro x" in state else [("intro x", -0.1)])


def run(version: str, log: Path, verifiers: int) -> tuple[list[SearchOutcome], list[WorkerLoad]]:
    config = LeanConfig(command=double_argv("--pantograph-version", version, "--log", str(log)),
                        pantograph_version=version, tactic_timeout_s=5.0, compile_timeout_s=1.0,
                        watchdog_grace_s=0.5, ready_timeout_s=10.0, verifier_workers=verifiers)

    async def go() -> tuple[list[SearchOutcome], list[WorkerLoad]]:
        async with LeanPool.from_config(config, 1, theorems_per_worker=3) as pool:
            async def one(name: str, last: str) -> SearchOutcome:
                async with pool.lease(name) as lean:
                    return await prove(Theorem(name=name, statement="p"), lean, two_steps(last), SETTINGS, GUARD)

            outcomes = await asyncio.gather(one("a", "done compilehang"), one("b", "done"), one("c", "done"))
            return list(outcomes), pool.loads()

    return asyncio.run(go())


@pytest.mark.slow
@pytest.mark.parametrize("version", [str(version) for version in SUPPORTED])
def test_a_compile_that_runs_out_fails_alone(version: str, tmp_path: Path) -> None:
    log = tmp_path / "requests.log"
    (hung, *others), loads = run(version, log, verifiers=1)
    assert not hung.result.proved
    [reason] = [e.error for e in hung.edges if e.error is not None and e.error.startswith("not counted")]
    if PantographVersion.parse(version) >= FRONTEND_TIMEOUT_FROM:
        # Lean cut the compile short: nothing declared, so no positive evidence.
        assert "does not declare a" in reason
    else:
        assert "verification failed: Lean did not answer `frontend.process` within 1.5s" in reason
    for outcome in others:
        assert outcome.result.proved and outcome.result.tactics == ["intro x", "done"], outcome.result.detail
    # The shared search worker is the process it started as: no theorem lost a state to the compile.
    assert [(load.generation, load.theorems) for load in loads] == [(1, 0)]
    # The verifier runs under the compile's timeout, the search worker under the tactics' (where one is sent).
    timeouts = sorted({json.loads(line.split(" ", 1)[1]).get("timeout") for line in log.read_text().splitlines()
                       if line.startswith("options.set ")}, key=str)
    expected = [1000, 5000] if PantographVersion.parse(version) > PantographVersion(0, 2, 25) else [None]
    assert timeouts == expected


@pytest.mark.slow
def test_without_a_verifier_the_watchdog_takes_the_shared_worker(tmp_path: Path) -> None:
    # What the verifier lane prevents: on 0.3.2 a compile on the shared worker that Lean does not bound is cut
    # by the worker's watchdog, which kills the process the other theorems' states live in.
    (hung, *others), loads = run("0.3.2", tmp_path / "log", verifiers=0)
    assert not hung.result.proved
    assert loads[0].generation > 1
    assert all(outcome.result.proved for outcome in others)  # they rebuild their states on the new process

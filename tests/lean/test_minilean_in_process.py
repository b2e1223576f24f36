"""The `minilean_in_process` fixture (tests/conftest.py): a configured pool's minilean workers in the test's process
answer what the `{python} -m minilean` process answers, request for request, and only where the configured command
is that process; every other command keeps its process."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from typing import Any

import pytest

from burnqed.config import LeanConfig
from burnqed.lean import pool as lean_pool
from burnqed.lean.client import LeanWorker
from burnqed.lean.pool import LeanPool
from burnqed.records.replies import TacticKind, TacticResult
from leankit.corpus import bundled_corpus_path
from minilean.replay.replay_server import LATENCY_VARIABLE
from tests.conftest import double_argv
from tests.doubles.line_servers import MiniLeanWorker, minilean_worker

SUM = "∑ i ∈ Finset.range 101, i = 5050"  # outside minilean's fragment: the replay fallback answers it
HEADER = "import Mathlib"
CORPUS_DECL = "theorem algebra_2x_plus_3_eq_11 (x : ℝ) (h₀ : 2 * x + 3 = 11) : x = 4"


def _untimed(result: TacticResult) -> TacticResult:
    return dataclasses.replace(result, elapsed_ms=0.0)


async def _session(lean: Any) -> list[object]:
    """A search's requests and a compile, with what each answered (the replies as the client reads them)."""
    seen: list[object] = []
    inside = await lean.start_theorem(HEADER, "theorem t (x : ℝ) (h : 2 * x = 4) : x = 2 := by sorry")
    seen.append(await lean.goals(inside))
    seen.append(_untimed(await lean.tactic(inside, "linarith")))
    seen.append(_untimed(await lean.tactic(inside, "exact h")))
    outside = await lean.start_goal(expr=SUM)
    seen.extend([outside, _untimed(await lean.tactic(outside, "decide")),
                 _untimed(await lean.tactic(outside, "omega"))])
    seen.append(await lean.compile("theorem s : (2 : ℕ) + 2 = 4 := by\n  norm_num\n\n#print axioms s\n"))
    seen.append(await lean.compile("theorem u : (2 : ℕ) + 2 = 5 := by\n  norm_num\n"))
    seen.append(await lean.stat())
    seen.append(await lean.request("options.print", {}))  # the client's options.set after the start
    return seen


async def _replay_session(lean: Any) -> list[object]:
    """A search's requests on a theorem of the replay corpus (recorded in ∀ form, started in binder form), with
    what each answered."""
    seen: list[object] = []
    state = await lean.start_theorem(HEADER, f"{CORPUS_DECL} := by sorry")
    seen.append(await lean.goals(state))
    seen.extend([_untimed(await lean.tactic(state, "linarith")), _untimed(await lean.tactic(state, "exact h₀"))])
    seen.append(await lean.stat())
    seen.append(await lean.request("options.print", {}))
    return seen


async def _through_a_pool(config: LeanConfig) -> tuple[list[object], list[int | None]]:
    async with LeanPool.from_config(config, size=1) as pool, pool.lease("t", header=HEADER) as lean:
        return await _session(lean), [load.pid for load in pool.loads()]


@pytest.mark.slow  # minilean and its replay fallback as processes, once; the replay server as lean.command
@pytest.mark.parametrize("module", ["minilean", "minilean.replay"])
@pytest.mark.parametrize("version", ["0.3.4", "0.2.25"])
def test_the_in_process_worker_answers_as_the_process_does(version: str, module: str) -> None:
    command = [*LeanConfig().command] if module == "minilean" else ["{python}", "-m", module]
    config = LeanConfig(command=[*command, "--pantograph-version", version], tactic_timeout_s=7)

    session = _session if module == "minilean" else _replay_session

    async def both() -> tuple[list[object], list[object]]:
        async with LeanWorker.from_config(config) as process:
            by_process = await session(process)
        in_process = minilean_worker(config)
        assert in_process is not None
        try:
            return by_process, await session(in_process)
        finally:
            await in_process.close()

    by_process, in_process = asyncio.run(both())
    options = by_process[-1]
    assert len(by_process) == (10 if module == "minilean" else 5) and isinstance(options, dict)
    assert options.get("timeout") == (7000 if version == "0.3.4" else None)  # 0.2.25 has no timeout option
    assert in_process == by_process


def test_the_fixture_gives_a_configured_pool_minilean_in_this_process(minilean_in_process: list[object]) -> None:
    seen, pids = asyncio.run(_through_a_pool(LeanConfig(verifier_workers=1)))
    assert pids == [None]  # no process
    assert [type(worker) for worker in minilean_in_process] == [MiniLeanWorker, MiniLeanWorker]  # and a verifier
    closes, fails = seen[1], seen[2]
    assert isinstance(closes, TacticResult) and (closes.kind, closes.goals) == (TacticKind.SUCCESS, ())
    assert isinstance(fails, TacticResult) and fails.kind is not TacticKind.SUCCESS


@pytest.mark.parametrize("command, options", [
    ([sys.executable, "-m", "minilean"], {}),
    ([sys.executable, "-m", "minilean", "--pantograph-version", "0.3.0"], {"pantograph_version": "0.3.0"}),
    (["{python}", "-m", "minilean", "Mathlib", "--fallback-module", "minilean.replay"], {}),
    ([sys.executable, "-m", "minilean.replay"], {}),
    (["{python}", "-m", "minilean.replay", "--corpus", str(bundled_corpus_path()), "--pantograph-version", "0.3.16"],
     {}),
])
def test_minilean_as_configured_is_answered_in_process(command: list[str], options: dict[str, Any]) -> None:
    assert isinstance(minilean_worker(LeanConfig(command=command, **options)), MiniLeanWorker)


@pytest.mark.parametrize("command, options", [
    (double_argv(), {}),  # another peer
    (["python3", "-m", "minilean"], {}),  # another interpreter
    ([sys.executable, "-m", "minilean.replay", "--latency-ms", "5"], {}),  # a flag the double does not read
    ([sys.executable, "-m", "minilean.replay"], {"env": {LATENCY_VARIABLE: "5"}}),  # a slowed Lean
    ([sys.executable, "-m", "minilean.replay", "--corpus"], {}),
    ([sys.executable, "-m", "minilean.replay", "--pantograph-version", "0.1.0"], {}),
    ([sys.executable, "-m", "minilean", "--version"], {}),
    ([sys.executable, "-m", "minilean", "--pantograph-version=0.3.0"], {}),
    ([sys.executable, "-m", "minilean", "--pantograph-version", "0.3.16"], {}),  # not emulated: minilean refuses
    ([sys.executable, "-m", "minilean", "--pantograph-version"], {}),
    ([sys.executable, "-m", "minilean"], {"pantograph_version": "0.3.0"}),  # the client speaks another version
    ([sys.executable, "-m", "minilean"], {"run_as_uid": 12345}),
])
def test_anything_else_keeps_its_process(command: list[str], options: dict[str, Any]) -> None:
    assert minilean_worker(LeanConfig(command=command, **options)) is None


def test_the_fixture_leaves_other_commands_to_their_process(minilean_in_process: list[object],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(lean_pool.worker_from_config(LeanConfig(command=double_argv())), LeanWorker)
    assert minilean_in_process == []

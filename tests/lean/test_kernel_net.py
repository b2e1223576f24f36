"""Issue 24 end to end: nothing inside a proof can switch the kernel off, in any search mode, at any Pantograph
version the Lean edge speaks (`leankit.version.SUPPORTED`: a version added there joins these tables).

Against the strict double (over a real pipe where its process dies, in this process elsewhere), the `set_option
«debug».skipKernelTC true in decide +kernel` family (it closes ANY goal, with no sorry, no unsafe code and no axiom)
and the `set_option` resource routes never count and never label an edge positive (so never reach SFT or the value
model), with `search.verify` on or off, in step, hybrid and whole mode:
- the default guard refuses them before Lean sees them;
- with an open guard (as if the deny list missed a spelling) the kernel recheck of the compile rejects the
  kernel-off proofs, and with the compile skipped they stay unverified (or, before 0.3.1, rejected);
- the resource route that overflows Lean's stack (as the double emulates it: the process dies, in a tactic or
  in the compile) counts nothing. (The double checks no proof in a compile beyond its markers, so the
  routes that only lift a heartbeat bound are shown refused by the guard, not past it.)
The replay server (the embedded world) emulates the same route and the same recheck.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import pytest

from burnqed.config import LeanConfig
from burnqed.lean.client import LeanWorker
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay
from burnqed.policy.base import Sampling
from burnqed.records.results import EdgeOutcome, Label
from burnqed.records.theorem import Theorem
from burnqed.search.hybrid import prove_hybrid
from burnqed.search.hybrid_settings import HybridSettings
from burnqed.search.step import SearchOutcome, StepSettings, prove
from burnqed.search.whole import WholeSettings, prove_whole
from leankit.corpus import load_corpus
from leankit.version import SUPPORTED, PantographVersion
from minilean.replay.replay_server import ReplayServer
from tests.conftest import double_argv
from tests.doubles.line_servers import DoubleServer
from tests.doubles.policy_double import ScriptedPolicy

DEFAULT_GUARD = TacticGuard.from_config(LeanConfig())
OPEN_GUARD = TacticGuard([], builtin=False)  # as if every rule missed a spelling: only Lean's evidence is left
FALSE = Theorem(name="two_plus_two_is_five", statement="2 + 2 = 5", header="import Mathlib\nopen Nat")
VERSIONS = [str(version) for version in SUPPORTED]

KERNEL_OFF = (
    "set_option «debug».skipKernelTC true in decide +kernel",
    "exfalso; set_option «debug».skipKernelTC true in decide +kernel",
    "set_option «debug».«skipKernelTC» true in decide (config := { kernel := true })",
    "set_option debug.skipKernelTC true in decide!",
)
# Lifting the recursion bound lets a deep elaboration overflow the stack of the worker (and the double dies so).
STACK = (
    "set_option «maxRecDepth» 100000 in simp",
    "set_option maxRecDepth 100000 in decide",
)
RESOURCE = (*STACK, "set_option «maxHeartbeats» 0 in nlinarith [sq_nonneg x]",
            "set_option «synthInstance».maxHeartbeats 0 in infer_instance")
RECHECK_FAILS = ("does not compile: (kernel) declaration type mismatch, "
                 "'_burnqed_recheck.two_plus_two_is_five.proof_1'")


Runs = list[tuple[str, str, bool, SearchOutcome]]  # (tactic, mode, verify, outcome)


def searches(version: str, tactics: tuple[str, ...], modes: list[tuple[str, bool]], guard: TacticGuard, *,
             process: bool = False) -> Runs:
    """For each tactic and mode, one search of FALSE whose policy only ever proposes `tactic` (as a step or as a
    whole proof), all on one worker of the double at `version`: in this process, or with `process` the double's
    process (a crash respawns it, as in production)."""

    async def go() -> Runs:
        runs: Runs = []
        async with contextlib.AsyncExitStack() as stack:
            worker: LeanWorker | InProcessReplay = InProcessReplay(DoubleServer(version))
            if process:
                worker = await stack.enter_async_context(LeanWorker(
                    double_argv("--pantograph-version", version), tactic_timeout_s=5, watchdog_grace_s=1,
                    ready_timeout_s=10))
            assert await worker.protocol_version() == PantographVersion.parse(version)
            for tactic in tactics:
                for mode, verify in modes:
                    policy = ScriptedPolicy(proposing(tactic), key=lambda prompt: prompt)
                    runs.append((tactic, mode, verify, await search(worker, mode, verify, policy, guard)))
        return runs

    return asyncio.run(go())


def proposing(tactic: str) -> Callable[[str], list[tuple[str, float]]]:
    """A policy script that proposes `tactic` for every prompt."""
    return lambda _: [(tactic, -0.1)]


async def search(worker: LeanWorker | InProcessReplay, mode: str, verify: bool, policy: ScriptedPolicy,
                 guard: TacticGuard) -> SearchOutcome:
    theorem = FALSE
    if (await worker.protocol_version()) < PantographVersion(0, 3, 0):
        theorem = FALSE.model_copy(update={"header": None})  # no REPL scope before 0.3.0: a header is refused
    if mode == "step":
        settings = StepSettings(sampling=Sampling(n=1), max_nodes=3, timeout_s=30.0, verify=verify)
        return await prove(theorem, worker, policy, settings, guard)
    if mode == "hybrid":
        hybrid = HybridSettings(sampling=Sampling(n=1, stop=("```",)), num_proofs=1, min_proofs=1, max_proofs=2,
                                max_rounds=2, timeout_s=30.0, verify=verify)
        return await prove_hybrid(theorem, worker, policy, hybrid, guard)
    assert verify, "whole mode always compiles"
    whole = WholeSettings(sampling=Sampling(n=1, stop=("```",)), max_proofs=2, timeout_s=30.0)
    return await prove_whole(theorem, worker, policy, whole, guard)


def never_counted(outcome: SearchOutcome) -> None:
    result = outcome.result
    assert not result.proved and result.budget_at_proof is None
    # Only positive rows become SFT pairs and value-model positives: none may come from such a path.
    assert not any(e.label is Label.POSITIVE or e.proof_complete or e.on_proof_path for e in outcome.edges)


MODES = [("step", True), ("step", False), ("hybrid", True), ("hybrid", False), ("whole", True)]


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_the_default_guard_refuses_every_option_set_inside_a_proof(version: str) -> None:
    runs = searches(version, KERNEL_OFF + RESOURCE, MODES, DEFAULT_GUARD)
    assert len(runs) == len(KERNEL_OFF + RESOURCE) * len(MODES)
    for tactic, mode, verify, outcome in runs:
        never_counted(outcome)
        assert not outcome.result.unverified, (tactic, mode, verify)
        # Hybrid mode splits `exfalso; …` into its tactics: `exfalso` may run, the `set_option` step never does.
        optioned = [e for e in outcome.edges if "set_option" in e.tactic]
        assert optioned, (tactic, mode, verify)
        assert all(e.outcome is EdgeOutcome.REFUSED and "set_option" in (e.error or "") for e in optioned)


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_past_the_guard_the_kernel_recheck_rejects_the_kernel_off_route(version: str) -> None:
    runs = searches(version, KERNEL_OFF, MODES, OPEN_GUARD)
    flags = PantographVersion.parse(version) >= PantographVersion(0, 3, 1)
    for tactic, mode, verify, outcome in runs:
        never_counted(outcome)
        if not verify:
            # With sorry flags it passes every step-level rule (it looks honest to them): unverified, never
            # counted; without them nothing but a compile could count it.
            assert outcome.result.unverified is flags, (tactic, mode)
            closing = [e for e in outcome.edges if e.outcome is EdgeOutcome.CLOSED]
            assert closing, (tactic, mode)
            if flags:
                assert {e.error for e in closing} == {"not counted: unverified (compile skipped: search.verify=false)"}
            continue
        assert outcome.result.rejected_proofs >= 1 and not outcome.result.unverified, (tactic, mode)
        if mode == "whole":  # the same proof every time: checked once (the duplicate adds no row), rejected once
            assert outcome.result.rejected_proofs == 1 and len(outcome.edges) == 1
        # Lean closed the false goal (the double, like Lean, never consulted the kernel); only the recheck said no.
        rejected = [e for e in outcome.edges if e.error is not None and RECHECK_FAILS in e.error]
        assert rejected, (tactic, mode, [e.error for e in outcome.edges])
        assert mode == "whole" or all(e.outcome is EdgeOutcome.CLOSED for e in rejected)


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_past_the_guard_the_resource_routes_count_nothing(version: str) -> None:
    # The double dies of the overflow (in a tactic or in the compile) and the worker starts another: at 0.3.4 the
    # double's process (the client's crash, read off the pipe), at every other version in this process.
    for tactic, mode, verify, outcome in searches(version, STACK, MODES, OPEN_GUARD, process=version == "0.3.4"):
        never_counted(outcome)
        assert not outcome.result.unverified, (tactic, mode, verify)


# (The replay corpus records no `exfalso` on this goal: the route alone, in each spelling.)
@pytest.mark.parametrize("tactic", [tactic for tactic in KERNEL_OFF if not tactic.startswith("exfalso")])
def test_the_replay_server_emulates_the_route_and_the_recheck(tactic: str) -> None:
    # The embedded world: a corpus theorem closed by the kernel-off route passes every step-level rule, and the
    # compile's kernel recheck rejects it; the honest corpus proof still counts (test_strict_soundness).
    spec = load_corpus().by_name("algebra_2x_plus_3_eq_11")
    assert spec is not None
    for verify in (True, False):
        env = InProcessReplay(ReplayServer(load_corpus()))
        settings = StepSettings(sampling=Sampling(n=1), max_nodes=3, timeout_s=30.0, verify=verify)
        outcome = asyncio.run(prove(Theorem.from_recorded(spec), env, ScriptedPolicy(lambda _: [(tactic, -0.1)]),
                                    settings, OPEN_GUARD))
        never_counted(outcome)
        [closing] = [e for e in outcome.edges if e.outcome is EdgeOutcome.CLOSED]
        if verify:
            assert closing.error is not None
            assert "(kernel) declaration type mismatch, '_burnqed_recheck.algebra_2x_plus_3_eq_11.proof_1'" in (
                closing.error)
        else:
            assert outcome.result.unverified


def test_an_honest_whole_proof_counts_as_written_with_its_row() -> None:
    # The contrast to the routes above, on the same double: an honest whole proof counts, split as its author
    # wrote it (a `have … := by` block stays one tactic), in the first row, stamped now.
    honest = Theorem(name="two_plus_two", statement="2 + 2 = 4", header="import Mathlib")
    body = "intro x\nhave h : x = x := by\n  rfl\nexact h"
    before = time.time() * 1000

    policy = ScriptedPolicy(lambda _: [(body, -0.1)], key=lambda prompt: prompt)
    settings = WholeSettings(sampling=Sampling(n=1, stop=("```",)), max_proofs=1, timeout_s=30.0)
    outcome = asyncio.run(prove_whole(honest, InProcessReplay(DoubleServer("0.3.4")), policy, settings,
                                      DEFAULT_GUARD))
    assert outcome.result.proved and outcome.result.rejected_proofs == 0
    assert outcome.result.tactics == ["intro x", "have h : x = x := by\n  rfl", "exact h"]
    [row] = outcome.edges
    assert (row.node_id, row.parent_id, row.outcome, row.label) == (1, 0, EdgeOutcome.CLOSED, Label.POSITIVE)
    assert before - 1000 <= row.timestamp_ms <= time.time() * 1000 + 1000

"""Many theorems per Lean worker: a crash of a shared worker loses no theorem and searches none twice, with a
real subprocess killed mid-run and with the in-process replay; a neighbour's crashes do not use up a theorem's
restart allowance."""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from collections.abc import Sequence

import pytest

from burnqed.config import LeanConfig
from burnqed.errors import LeanStartError
from burnqed.lean.client import LeanWorker
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplayPool
from burnqed.lean.pool import LeanPool
from burnqed.policy.base import Completion, Sampling, Seeds
from burnqed.records.replies import pretty_state
from burnqed.records.results import Edge, EdgeOutcome, FailureReason, TheoremResult
from burnqed.records.theorem import Theorem
from burnqed.search.rebuild import MAX_RESTARTS
from burnqed.search.runner import run_theorems
from burnqed.search.step import StepSettings
from leankit.corpus import load_corpus
from minilean.replay.replay_server import ReplayServer
from tests.doubles.policy_double import ScriptedPolicy, corpus_oracle, state_of
from tests.search.helpers import as_forall_declaration

CORPUS = load_corpus()
GUARD = TacticGuard.from_config(LeanConfig())
SETTINGS = StepSettings(sampling=Sampling(n=8), max_nodes=50, timeout_s=60.0)
# Two-step proofs (intro, then a closer), so every theorem is mid-search when its worker goes.
NAMES = ["algebra_2x_plus_3_eq_11", "algebra_linear_system_sum_diff", "algebra_linear_function_value",
         "ineq_two_ab_le_sum_squares", "ineq_sum_of_squares_nonneg", "nt_prime_two_le"]
THEOREMS = [as_forall_declaration(spec) for spec in CORPUS.theorems if spec.name in NAMES]


class Sink:
    """Records what the runner hands over; a theorem must arrive exactly once."""

    def __init__(self) -> None:
        self.added: list[str] = []

    def add(self, result: TheoremResult, edges: list[Edge]) -> None:
        self.added.append(result.name)

    def flush(self) -> object:
        return None


class KillingPolicy(ScriptedPolicy):
    """The corpus oracle, slowed down; the first time a non-root state is asked while worker 0 holds two
    theorems or more, worker 0's process group is SIGKILLed (as the OOM killer would) before answering."""

    def __init__(self, pool: LeanPool, roots: set[str]) -> None:
        super().__init__(corpus_oracle(CORPUS), delay_s=0.05)
        self.pool = pool
        self.roots = roots
        self.victims: list[str] = []

    async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
        if not self.victims and any(state_of(p) not in self.roots for p in prompts):
            holders = self.pool.holders(0)
            worker = self.pool._slots[0].worker
            if len(holders) >= 2:
                assert isinstance(worker, LeanWorker) and worker.pid is not None
                self.victims = holders  # at once: other theorems ask the policy meanwhile
                # Under the worker's lock, so no request is on the pipe when it dies and none is written to the
                # dead pipe before the event loop has reaped it: then every holder sees the new generation.
                async with worker._lock:
                    assert worker._proc is not None
                    os.killpg(worker.pid, signal.SIGKILL)
                    await worker._proc.wait()
                    assert not worker.alive
        return await super().generate(prompts, sampling, seeds)


def roots() -> set[str]:
    async def read() -> set[str]:
        pool = InProcessReplayPool(lambda: ReplayServer(CORPUS), size=1)
        found = set()
        for th in THEOREMS:
            async with pool.lease() as lean:
                assert th.statement is not None
                found.add(pretty_state(await lean.goals(await lean.start_goal(expr=th.statement))))
        return found

    return asyncio.run(read())


def root_expansions(policy: ScriptedPolicy, root_states: set[str]) -> Counter[str]:
    return Counter(state for call in policy.calls for state in call if state in root_states)


@pytest.mark.slow
def test_a_shared_subprocess_worker_killed_mid_run_loses_no_theorem_and_searches_none_twice():
    root_states = roots()
    assert len(root_states) == len(THEOREMS) == 6
    sink = Sink()

    async def run() -> tuple[list[TheoremResult], KillingPolicy, LeanPool]:
        async with LeanPool.from_config(LeanConfig(workers=2), theorems_per_worker=3) as pool:
            policy = KillingPolicy(pool, root_states)
            results = await run_theorems(THEOREMS, pool, policy, SETTINGS, GUARD, sink=sink, concurrency=6)
            return results, policy, pool

    results, policy, pool = asyncio.run(run())
    assert len(policy.victims) >= 2, "the kill must hit a worker shared by several theorems"
    assert pool.stats.respawned == 1
    # Every theorem finished, proved, recorded once; the victims too, after rebuilding their trees.
    assert [r.name for r in results] == [t.name for t in THEOREMS]
    assert all(r.proved for r in results), [(r.name, r.failure_reason, r.detail) for r in results]
    assert sorted(sink.added) == sorted(NAMES)
    # Not searched twice: each root was expanded exactly once (a rebuild replays paths, it does not re-expand).
    assert set(root_expansions(policy, root_states).values()) == {1}


def test_a_tactic_that_crashes_a_shared_in_process_worker_costs_its_neighbours_nothing():
    root_states = roots()
    crasher = "algebra_2x_plus_3_eq_11"
    oracle = corpus_oracle(CORPUS)
    seen: dict[str, list[str]] = {}
    crashed: list[str] = []
    sink = Sink()

    def script(state: str) -> list[tuple[str, float]]:
        if "h₀ : 2 * x + 3 = 11" in state and not crashed:  # the crasher's second node: crash first, then go on
            crashed.append(state)
            return [("nlinarith CRASH", 0.0), *oracle(state)]
        return oracle(state)

    class Watching(ScriptedPolicy):
        async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
            if not seen and any("h₀ : 2 * x + 3 = 11" in state_of(p) for p in prompts):
                seen.update({str(i): pool.holders(i) for i in range(2)})
            return await super().generate(prompts, sampling, seeds)

    pool = InProcessReplayPool(lambda: ReplayServer(CORPUS), size=2, theorems_per_worker=3, crash_on="CRASH",
                               latency=lambda: 0.005)
    policy = Watching(script, delay_s=0.02)
    results = asyncio.run(run_theorems(THEOREMS, pool, policy, SETTINGS, GUARD, sink=sink, concurrency=6))
    shared = next(holders for holders in seen.values() if crasher in holders)
    assert len(shared) >= 2
    assert pool.stats.respawned == 1
    assert all(r.proved for r in results), [(r.name, r.failure_reason, r.detail) for r in results]
    assert sorted(sink.added) == sorted(NAMES)
    assert set(root_expansions(policy, root_states).values()) == {1}


def test_a_neighbours_crashes_do_not_use_up_a_theorems_restart_allowance():
    """B's tactics crash the shared worker MAX_RESTARTS + 1 times (B then ends as lean_error); A, on the same
    worker, is rebuilt each time and still proves: only B's own crashes count against B."""
    a = next(t for t in THEOREMS if t.name == "algebra_2x_plus_3_eq_11")
    b = CORPUS.by_name("logic_or_comm")
    assert b is not None
    oracle = corpus_oracle(CORPUS)

    class Policy(ScriptedPolicy):
        async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
            if any("h₀" in state_of(p) for p in prompts):
                await asyncio.sleep(0.3)  # A waits for the policy while B crashes the worker again and again
            return await super().generate(prompts, sampling, seeds)

    def script(state: str) -> list[tuple[str, float]]:
        if "p ∨ q → q ∨ p" in state:
            return [(f"simp CRASH{i}", -0.1) for i in range(8)]
        return oracle(state)

    pool = InProcessReplayPool(lambda: ReplayServer(CORPUS), size=1, theorems_per_worker=2, crash_on="CRASH")
    theorems: list[Theorem] = [a, as_forall_declaration(b)]
    results = asyncio.run(run_theorems(theorems, pool, Policy(script), SETTINGS, GUARD, concurrency=2))
    by_name = {r.name: r for r in results}
    assert by_name[b.name].failure_reason is FailureReason.LEAN_ERROR
    assert "crashed or hung the Lean worker" in (by_name[b.name].detail or "")
    assert pool.stats.respawned == MAX_RESTARTS + 1 > MAX_RESTARTS
    assert by_name[a.name].proved, (by_name[a.name].failure_reason, by_name[a.name].detail)


def test_edges_record_only_real_tries_after_a_neighbours_crash():
    """A request refused unsent because a neighbour replaced the worker is not an edge: it is tried again."""
    outcome_kinds: Counter[EdgeOutcome] = Counter()

    class CountingSink(Sink):
        def add(self, result: TheoremResult, edges: list[Edge]) -> None:
            super().add(result, edges)
            if result.name != "algebra_2x_plus_3_eq_11":
                outcome_kinds.update(e.outcome for e in edges)
                assert not any("replaced" in (e.error or "") or "crash" in (e.error or "") for e in edges), edges

    oracle = corpus_oracle(CORPUS)

    def script(state: str) -> list[tuple[str, float]]:
        if "h₀ : 2 * x + 3 = 11" in state:
            return [("nlinarith CRASH", 0.0), *oracle(state)]
        return oracle(state)

    pool = InProcessReplayPool(lambda: ReplayServer(CORPUS), size=1, theorems_per_worker=6, crash_on="CRASH",
                               latency=lambda: 0.003)
    sink = CountingSink()
    results = asyncio.run(run_theorems(THEOREMS, pool, ScriptedPolicy(script, delay_s=0.01), SETTINGS, GUARD,
                                       sink=sink, concurrency=6))
    assert all(r.proved for r in results)
    assert outcome_kinds[EdgeOutcome.CLOSED] == 5


def test_hybrid_search_shares_a_worker_too_a_neighbours_crashes_cost_it_nothing():
    """Hybrid mode on a shared worker: B's sampled proofs crash the worker MAX_RESTARTS + 1 times (B ends as
    lean_error, by its own crashes); A, between its rounds on the same worker, rebuilds its trie nodes each time
    and still proves: a neighbour's crashes neither fail A's requests nor use up A's allowance."""
    from burnqed.search.hybrid_settings import HybridSettings

    a = CORPUS.by_name("ineq_x_plus_reciprocal_ge_two")
    b = CORPUS.by_name("logic_or_comm")
    assert a is not None and b is not None
    table = {
        "⊢ ∀ (x : ℝ), 0 < x → x + 1 / x ≥ 2": [("intro x hx\nfield_simp\nlinarith", -1.0)],
        "⊢ x + 1 / x ≥ 2": [("field_simp\nlinarith", -1.0)],
        "⊢ 2 * x ≤ x * x + 1": [("nlinarith [sq_nonneg (x - 1)]", -1.0)],
    }

    def script(state: str) -> list[tuple[str, float]]:
        if "p ∨ q → q ∨ p" in state:
            return [(f"simp CRASH{i}", -0.1) for i in range(8)]
        return table.get(state.rsplit("\n", maxsplit=1)[-1], [])

    class Policy(ScriptedPolicy):
        async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
            if any(state_of(p).endswith("⊢ x + 1 / x ≥ 2") for p in prompts):
                await asyncio.sleep(0.3)  # A waits for the policy while B crashes the worker again and again
            return await super().generate(prompts, sampling, seeds)

    settings = HybridSettings(sampling=Sampling(stop=("```",)), num_proofs=8, min_proofs=2, decay_depth=2,
                              max_tokens=100, min_tokens=50, max_proofs=64, timeout_s=60.0)
    pool = InProcessReplayPool(lambda: ReplayServer(CORPUS), size=1, theorems_per_worker=2, crash_on="CRASH")
    theorems = [as_forall_declaration(a), as_forall_declaration(b)]
    results = asyncio.run(run_theorems(theorems, pool, Policy(script), settings, GUARD, concurrency=2))
    by_name = {r.name: r for r in results}
    assert by_name[b.name].failure_reason is FailureReason.LEAN_ERROR
    assert "crashed or hung the Lean worker" in (by_name[b.name].detail or "")
    assert pool.stats.respawned == MAX_RESTARTS + 1
    assert by_name[a.name].proved, (by_name[a.name].failure_reason, by_name[a.name].detail)


@pytest.mark.parametrize("mode", ["step", "whole", "hybrid"])
def test_a_worker_that_cannot_be_started_stops_the_run_in_every_mode(mode: str) -> None:
    """`LeanStartError` (the pool is poisoned) is infrastructure: it propagates instead of being recorded as the
    theorem's lean_error (which --resume would then skip)."""
    from burnqed.lean.inprocess import InProcessReplay
    from burnqed.search.hybrid_settings import HybridSettings
    from burnqed.search.modes import SearchSettings, prove_theorem
    from burnqed.search.whole import WholeSettings

    class Unstartable(InProcessReplay):
        async def start_goal(self, expr: str | None = None, copy_from: str | None = None) -> int:
            raise LeanStartError("the Lean worker exited with code 2 before `ready.`")

        async def start_theorem(self, header: str | None, declaration: str) -> int:
            raise LeanStartError("the Lean worker exited with code 2 before `ready.`")

    by_mode: dict[str, SearchSettings] = {"step": SETTINGS, "whole": WholeSettings(sampling=Sampling(n=2)),
                                          "hybrid": HybridSettings()}
    settings = by_mode[mode]
    theorem = next(t for t in THEOREMS if t.statement is not None)
    with pytest.raises(LeanStartError, match="code 2"):
        asyncio.run(prove_theorem(theorem, Unstartable(ReplayServer(CORPUS)), ScriptedPolicy(lambda _: []),
                                  settings, GUARD))

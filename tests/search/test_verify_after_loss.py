"""The worker is lost while a found proof is being verified: step and hybrid search close the goal again on the new
process and verify again; a closing step that does not replay there is never counted.

A shared worker can be replaced between the closing tactic and `goal.print rootExpr` (a neighbour's tactic crashed
it): the lease then refuses the root's state id unsent (`LeanStatesLostError`), and `verify_proof` raises it for
the engine to rebuild. The double below replaces the in-process replay worker right before the root is printed,
as such a crash does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from burnqed.config import LeanConfig
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay, InProcessReplayPool
from burnqed.lean.lease import LeanLease
from burnqed.policy.base import Sampling
from burnqed.records.replies import CompileResult, Goal, RootInfo, TacticKind, TacticResult
from burnqed.records.results import EdgeOutcome, Label
from burnqed.search.hybrid import prove_hybrid
from burnqed.search.hybrid_settings import HybridSettings
from burnqed.search.journal import FileJournal
from burnqed.search.step import SearchOutcome, StepSettings, prove
from burnqed.search.whole import WholeSettings, prove_whole
from burnqed.storage import Store
from leankit.corpus import load_corpus
from minilean.replay.replay_server import ReplayServer
from tests.doubles.policy_double import ScriptedPolicy
from tests.search.helpers import as_forall_declaration

CORPUS = load_corpus()
GUARD = TacticGuard.from_config(LeanConfig())
NAME = "algebra_2x_plus_3_eq_11"
CLOSING = "linarith"
NOT_REPLAYED = "not counted: the closing step did not replay after the Lean worker was replaced"


class LosesWorkerWhileVerifying:
    """A `LeanEnv` over a pool lease whose worker is replaced right before each of the first `losses` root prints;
    with `replay_fails`, the closing tactic fails once the worker was replaced (it timed out on the new process)."""

    def __init__(self, lease: LeanLease, worker: InProcessReplay, losses: int, replay_fails: bool = False,
                 slow_s: float = 0.0) -> None:
        self.lease, self.worker, self.losses, self.replay_fails = lease, worker, losses, replay_fails
        self.slow_s = slow_s  # each root print and compile takes this long (Lean time the search must book)
        self.lost = 0
        self.root_prints = 0
        self.compiles = 0
        spec = CORPUS.by_name(NAME)
        assert spec is not None and spec.statement is not None
        self.statement = spec.statement

    @property
    def generation(self) -> int:
        return self.lease.generation

    async def start_goal(self, expr: str | None = None, copy_from: str | None = None) -> int:
        return await self.lease.start_goal(expr=expr, copy_from=copy_from)

    async def start_theorem(self, header: str | None, declaration: str) -> int:
        return await self.lease.start_theorem(header, declaration)

    async def tactic(self, state_id: int, tactic: str, goal_id: int | None = None) -> TacticResult:
        if self.replay_fails and self.lost and tactic == CLOSING:
            return TacticResult(TacticKind.TIMEOUT, errors=("Lean did not answer within 30s",))
        return await self.lease.tactic(state_id, tactic, goal_id)

    async def goals(self, state_id: int) -> tuple[Goal, ...]:
        return await self.lease.goals(state_id)

    async def root_info(self, state_id: int) -> RootInfo:
        self.root_prints += 1
        await asyncio.sleep(self.slow_s)
        if self.lost < self.losses:
            self.lost += 1
            await self.worker.close()  # as a neighbour's crash: every state of the process is gone
            # and the neighbour goes on first on the new process: its state takes the ids this theorem's stale
            # ones had, so only the states rebuilt on the new process name this theorem's proof.
            await self.worker.start_goal(expr=self.statement)
        return await self.lease.root_info(state_id)

    async def delete(self, state_ids: Sequence[int]) -> None:
        await self.lease.delete(state_ids)

    async def compile(self, text: str, timeout_s: float | None = None) -> CompileResult:
        self.compiles += 1
        await asyncio.sleep(self.slow_s)
        return await self.lease.compile(text, timeout_s)


def search(mode: str, losses: int, replay_fails: bool = False, slow_s: float = 0.0,
           journal: FileJournal | None = None) -> tuple[SearchOutcome, LosesWorkerWhileVerifying]:
    spec = CORPUS.by_name(NAME)
    assert spec is not None

    async def go() -> tuple[SearchOutcome, LosesWorkerWhileVerifying]:
        pool = InProcessReplayPool(lambda: ReplayServer(CORPUS), size=1)
        async with pool, pool.lease(NAME) as lease:
            worker = lease.worker
            assert isinstance(worker, InProcessReplay)
            env = LosesWorkerWhileVerifying(lease, worker, losses, replay_fails, slow_s)
            if mode == "step":
                policy = ScriptedPolicy(lambda state: [("intro x h₀", -0.1)] if "h₀" not in state
                                        else [(CLOSING, -0.1)])
                settings = StepSettings(sampling=Sampling(n=1), max_nodes=5, timeout_s=30.0)
                return await prove(as_forall_declaration(spec), env, policy, settings, GUARD), env
            whole = ScriptedPolicy(lambda _: [(f"intro x h₀\n{CLOSING}", -0.1)], key=lambda prompt: prompt)
            if mode == "whole":
                once = WholeSettings(sampling=Sampling(n=1, stop=("```",)), max_proofs=1, timeout_s=30.0)
                return await prove_whole(as_forall_declaration(spec), env, whole, once, GUARD), env
            hybrid = HybridSettings(sampling=Sampling(n=1, stop=("```",)), num_proofs=1, min_proofs=1, max_proofs=2,
                                    max_rounds=2, timeout_s=30.0, journal=journal)
            return await prove_hybrid(as_forall_declaration(spec), env, whole, hybrid, GUARD), env

    return asyncio.run(go())


@pytest.mark.parametrize("mode", ["step", "hybrid"])
@pytest.mark.parametrize("losses", [1, 3])
def test_a_proof_found_before_the_worker_was_lost_is_verified_again_on_the_new_one(mode: str, losses: int) -> None:
    outcome, env = search(mode, losses)
    result = outcome.result
    assert result.proved and not result.unverified, [e.error for e in outcome.edges]
    assert result.tactics == ["intro x h₀", CLOSING] and result.rejected_proofs == 0
    # Each loss cost one root print and one respawn; the last print found the root on the live process.
    assert (env.lost, env.root_prints, env.worker.respawns) == (losses, losses + 1, losses)
    [closing] = [e for e in outcome.edges if e.outcome is EdgeOutcome.CLOSED]
    assert closing.label is Label.POSITIVE and closing.error is None


@pytest.mark.parametrize("mode", ["step", "hybrid"])
def test_a_closing_step_that_does_not_replay_on_the_new_worker_never_counts(mode: str, tmp_path: Path,
                                                                           store: Store) -> None:
    journal = FileJournal(str(tmp_path / "shard"), store=store)
    outcome, env = search(mode, losses=1, replay_fails=True, journal=journal)
    if mode == "hybrid":  # nor does the checkpoint a resumed search would start from
        records = journal.load(NAME)
        assert not [proof for record in records for proof in record.proofs]
        assert not [entry for record in records for entry in record.entries if entry.closed]
    result = outcome.result
    assert not result.proved and not result.unverified
    assert result.rejected_proofs == 1 and env.root_prints == 1
    [closing] = [e for e in outcome.edges if e.outcome is EdgeOutcome.CLOSED]
    assert closing.error == NOT_REPLAYED
    assert not any(e.label is Label.POSITIVE for e in outcome.edges)


@pytest.mark.parametrize("mode", ["step", "hybrid", "whole"])
def test_the_time_verification_waits_for_lean_is_lean_time(mode: str) -> None:
    slow = 0.2
    outcome, env = search(mode, losses=0, slow_s=slow)
    result = outcome.result
    assert result.proved and env.compiles == 1 and env.root_prints == (0 if mode == "whole" else 1)
    waited = slow * (env.compiles + env.root_prints)
    assert result.lean_s >= waited and result.time_s >= result.lean_s
    if mode == "whole":
        [closing] = [e for e in outcome.edges if e.outcome is EdgeOutcome.CLOSED]
        assert closing.lean_ms >= slow * 1000


def test_the_hybrid_checkpoint_keeps_a_proof_verified_again_after_a_loss(tmp_path: Path, store: Store) -> None:
    # What a resumed hybrid search rebuilds from: the proof (verified), and the closing entry marked closed.
    journal = FileJournal(str(tmp_path / "shard"), store=store)
    outcome, _ = search("hybrid", losses=1, journal=journal)
    assert outcome.result.proved
    records = journal.load(NAME)
    proofs = [proof for record in records for proof in record.proofs]
    assert [(proof.tactics, proof.verified) for proof in proofs] == [(["intro x h₀", CLOSING], True)]
    closed = [entry for record in records for entry in record.entries if entry.closed]
    assert [entry.key for entry in closed] == [CLOSING]


def test_a_whole_proofs_compile_time_is_booked_in_milliseconds(monkeypatch: pytest.MonkeyPatch) -> None:
    # A clock that advances one second per reading: the compile's row gets whole seconds, in milliseconds.
    ticks = iter(range(10**6))
    monkeypatch.setattr("burnqed.search.whole.time.perf_counter", lambda: float(next(ticks)))
    outcome, env = search("whole", losses=0)
    [closing] = [e for e in outcome.edges if e.outcome is EdgeOutcome.CLOSED]
    assert env.compiles == 1 and closing.lean_ms >= 1000.0 and closing.lean_ms % 1000.0 == 0.0

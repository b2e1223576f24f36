"""Replaying whole proofs through the Lean edge: states come from Lean's replies (root from goal.print, then
each reply's goals), never the state after as the state before; failures are values; shared prefixes are
sent once; a crashed worker restarts the theorem."""

from __future__ import annotations

import asyncio

import pytest

from burnqed.commands.edges import open_pool
from burnqed.config import LeanConfig
from burnqed.data.replay import ReplayJob, TheoremReplay, replay_all, replay_theorem
from burnqed.lean.inprocess import InProcessReplay
from burnqed.records.theorem import Theorem
from leankit.corpus import TheoremSpec, load_corpus
from minilean.replay.replay_server import ReplayServer
from tests.data.samples import GUARD

CORPUS = load_corpus()


def spec(name: str) -> TheoremSpec:
    found = CORPUS.by_name(name)
    assert found is not None
    return found


SYSTEM = spec("algebra_linear_system_sum_diff")
HYPS = "x y : ℝ\nh₀ : x + y = 10\nh₁ : x - y = 2"


def job(*proofs: tuple[str, ...], statement: str | None = SYSTEM.statement, name: str = SYSTEM.name) -> ReplayJob:
    """The theorem written as one ∀ statement (`theorem NAME : ∀ …`, no binders before the colon), so it starts at
    the recorded ∀ root its recorded proofs run from (binder-form starts: tests/data/test_prepare.py)."""
    signature = f": {statement}" if statement is not None else None
    return ReplayJob(Theorem(name=name, statement=statement, signature=signature), proofs)


def run(replay_job: ReplayJob, env: InProcessReplay | None = None) -> TheoremReplay:
    return asyncio.run(replay_theorem(env or InProcessReplay(ReplayServer(CORPUS)), replay_job, GUARD))


@pytest.mark.slow
def test_a_known_bundled_proof_records_leans_states_over_real_pipes() -> None:
    proof = ("intro x y h₀ h₁", "constructor", "linarith", "linarith")
    assert list(proof) in SYSTEM.proofs

    async def go() -> list[TheoremReplay]:
        async with open_pool(LeanConfig(workers=1)) as (pool, size):
            return await replay_all([job(proof)], pool, concurrency=size, guard=GUARD)

    [result] = asyncio.run(go())
    [replayed] = result.proofs
    assert replayed.ok and replayed.error is None
    assert [(s.depth, s.tactic, s.state_before) for s in replayed.steps] == [
        (0, "intro x y h₀ h₁", "⊢ ∀ (x y : ℝ), x + y = 10 → x - y = 2 → x = 6 ∧ y = 4"),
        (1, "constructor", f"{HYPS}\n⊢ x = 6 ∧ y = 4"),
        (2, "linarith", f"case left\n{HYPS}\n⊢ x = 6\n\ncase right\n{HYPS}\n⊢ y = 4"),
        (3, "linarith", f"case right\n{HYPS}\n⊢ y = 4"),
    ]
    steps = replayed.steps
    assert [s.state_after for s in steps[:-1]] == [s.state_before for s in steps[1:]]
    assert steps[-1].state_after == "no goals"
    assert all(s.state_before != s.state_after for s in steps)


def test_every_proof_of_a_theorem_replays_and_shared_prefixes_are_sent_once() -> None:
    env = InProcessReplay(ReplayServer(CORPUS))
    proofs = tuple(tuple(p) for p in SYSTEM.proofs)
    result = run(job(*proofs), env)
    assert [len(p.steps) for p in result.proofs] == [2, 2, 4, 4]
    assert all(p.ok for p in result.proofs)
    # goal.start + goal.print, then 1 + 1 + 1 + 3 + 3 tactics: `intro x y h₀ h₁` only once
    assert env.requests == 2 + 1 + 1 + 1 + 3 + 3
    assert result.proofs[2].steps[1].state_before == result.proofs[3].steps[1].state_before


def test_failures_are_values_with_the_step_and_leans_message() -> None:
    result = run(job(
        ("intro x y h₀ h₁", "linarith"),                       # Lean rejects the tactic
        ("intro x y h₀ h₁", "native_decide"),                  # the guard refuses it
        ("intro x y h₀ h₁", "constructor", "linarith"),        # a goal remains
        ("intro x y h₀ h₁", "constructor <;> linarith", "rfl"),  # a tactic after the proof closed
    ))
    rejected, refused, open_goal, extra = result.proofs
    assert (rejected.failed_step, rejected.failed_tactic) == (1, "linarith")
    assert rejected.error == "error: linarith failed to find a contradiction"
    assert rejected.steps == ()
    assert refused.failed_step == 1 and refused.error is not None and "refused by the tactic guard" in refused.error
    assert (open_goal.failed_step, open_goal.error) == (None, "1 goal(s) remain after the last tactic")
    assert (extra.failed_step, extra.error) == (2, "no goals left for this tactic")


def test_a_statement_lean_does_not_know_fails_every_proof_at_the_start() -> None:
    result = run(job(("simp",), ("rfl",), statement="1 = (2 ∧", name="nope"))
    errors = [p.error or "" for p in result.proofs]
    assert errors == ["start failed: elab: the theorem does not elaborate: replay: cannot parse this declaration "
                      "(unexpected end of input or unbalanced brackets)"] * 2
    by_name = run(job(("intro x y h₀ h₁", "constructor <;> linarith"), statement=None))
    assert by_name.proofs[0].ok  # goal.start copyFrom the theorem's name
    unknown = run(job(("simp",), statement=None, name="no_such_theorem"))
    assert unknown.proofs[0].error == "start failed: index: Symbol not found: no_such_theorem"


def test_a_crashed_worker_restarts_the_theorem_for_the_next_proof() -> None:
    env = InProcessReplay(ReplayServer(CORPUS), crash_on="boom")
    result = run(job(("intro x y h₀ h₁", "boom"), ("intro x y h₀ h₁", "constructor <;> linarith")), env)
    crashed, second = result.proofs
    assert crashed.error == "crash: simulated worker crash" and crashed.failed_step == 1
    assert second.ok and env.generation == 2

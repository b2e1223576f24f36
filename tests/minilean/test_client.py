"""burnqed's real Lean edge driving minilean as a subprocess, exactly as it drives Pantograph: `LeanWorker`
(version probe, `ready.`, options), the pool and lease, `burnqed.lean.protocol`'s parsers and the soundness
rules with the compile. (The separation, burnqed importing nothing of minilean and minilean nothing of the Lean
client, is tests/test_layers.py's.)"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from burnqed.config import LeanConfig
from burnqed.lean.client import LeanWorker
from burnqed.lean.guard import TacticGuard
from burnqed.lean.pool import LeanPool
from burnqed.lean.protocol import parse_goal
from burnqed.lean.soundness import verify_proof
from burnqed.lean.start import start_theorem
from burnqed.records.replies import TacticKind, TacticResult
from burnqed.records.theorem import Theorem
from leankit.version import PantographVersion

# Seconds, not milliseconds: many scripts with z3 calls / subprocesses (`pytest -m "not slow"` skips them).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ARGV = [sys.executable, "-m", "minilean"]
CONFIG = LeanConfig(command=["{python}", "-m", "minilean"], workers=1, cwd=str(ROOT))
GUARD = TacticGuard.from_config(CONFIG)


def test_worker_detects_the_version_and_parses_every_reply_kind():
    async def run() -> None:
        async with LeanWorker(ARGV, cwd=str(ROOT)) as worker:
            assert worker.version == PantographVersion(0, 3, 4)  # learnt from `python -m minilean --version`
            state = await worker.start_goal(expr="∀ (x y : ℝ), 0 < x → 0 < y → 0 < x * y + x")
            (root,) = await worker.goals(state)
            assert root.target == "∀ (x y : ℝ), 0 < x → 0 < y → 0 < x * y + x" and root.variables == ()
            intro = await worker.tactic(state, "intro x y hx hy")
            assert intro.kind is TacticKind.SUCCESS and intro.state_id is not None
            (goal,) = intro.goals
            assert [(v.name, v.type) for v in goal.variables] == [("x", "ℝ"), ("y", "ℝ"), ("hx", "0 < x"),
                                                                   ("hy", "0 < y")]
            failed = await worker.tactic(intro.state_id, "linarith")
            assert failed.kind is TacticKind.ERROR
            assert failed.errors[0].startswith("linarith failed to find a contradiction")
            unknown = await worker.tactic(intro.state_id, "exact h")
            assert unknown.errors == ("unknown identifier 'h'",)
            parse = await worker.tactic(intro.state_id, "exact (hx")
            assert parse.kind is TacticKind.PARSE_ERROR
            step = await worker.tactic(intro.state_id, "have h := mul_pos hx hy")
            assert step.kind is TacticKind.SUCCESS and len(step.goals) == 1
            assert step.state_id is not None
            done = await worker.tactic(step.state_id, "linarith")
            assert done.kind is TacticKind.SUCCESS and done.goals == () and not done.has_sorry
            info = await worker.root_info(done.state_id or 0)
            assert not info.has_sorry and not info.has_mvar and info.root is not None
            sorry = await worker.tactic(intro.state_id, "sorry")
            assert sorry.has_sorry
            compiled = await worker.compile("theorem t (x : ℝ) (h : 0 < x) : 0 < x ^ 2 := by\n  positivity\n\n"
                                            "#print axioms t\n")
            assert [u.new_constants for u in compiled.units] == [("t",), ()]
            assert compiled.units[1].messages[0].severity == "information"

    asyncio.run(run())


def test_a_sorry_start_under_a_header_goes_through_the_worker():
    async def run() -> None:
        async with LeanWorker(ARGV, cwd=str(ROOT), version=PantographVersion(0, 3, 4)) as worker:
            reply = await worker.request("frontend.process", {
                "file": "open Real Nat\n\ntheorem t (x : ℝ) (h₀ : 0 < x) : x ^ 2 > 0 := by sorry",
                "readHeader": False, "inheritEnv": False, "sorrys": True, "typeErrorsAsGoals": False,
                "newConstants": False})
            unit = reply["units"][-1]
            goal = parse_goal(unit["goals"][0])
            assert [(v.name, v.type) for v in goal.variables] == [("x", "ℝ"), ("h₀", "0 < x")]
            assert goal.target == "x ^ 2 > 0"
            result = await worker.tactic(unit["goalStateId"], "positivity")
            assert result.kind is TacticKind.SUCCESS and result.goals == ()

    asyncio.run(run())


async def _prove(pool: LeanPool, theorem: Theorem, tactics: list[str]) -> tuple[bool, str]:
    async with pool.lease(theorem.name, header=theorem.header) as lean:
        state, _ = await start_theorem(lean, theorem)  # as search starts it: binders in context
        result = TacticResult(TacticKind.ERROR)
        for tactic in tactics:
            result = await lean.tactic(state, tactic)
            if result.kind is not TacticKind.SUCCESS:
                return False, result.errors[0] if result.errors else "failed"
            assert result.state_id is not None
            state = result.state_id
        verdict = await verify_proof(lean, theorem, tactics, result, GUARD, compile=True,
                                     index_header=theorem.header)
        return verdict.ok, verdict.reason


def test_proofs_count_only_when_every_soundness_rule_passes_the_compile_included():
    theorems = {
        # Started as written: the leading ∀ binders are in context, the proofs introduce only the rest.
        "lin": (Theorem(name="lin", statement="∀ (x : ℝ), 2 * x + 3 = 11 → x = 4"), ["intro h₀", "linarith"]),
        "sets": (Theorem(name="sets", statement="∀ (B C : Set ℤ), B ∩ C ⊆ C"), ["intro x h", "exact h.2"]),
        "nat": (Theorem(name="nat", statement="∀ (n : ℕ), n % 3 = 2 → (n + 3 * 3) % 3 = 2"), ["intro h", "omega"]),
        "or": (Theorem(name="or", statement="∀ (p q : Prop), p ∨ q → q ∨ p"),
               ["intro h", "rcases h with hp | hq", "exact Or.inr hp", "exact Or.inl hq"]),
    }

    async def run() -> list[tuple[bool, str]]:
        async with LeanPool.from_config(CONFIG) as pool:
            good = [await _prove(pool, theorem, tactics) for theorem, tactics in theorems.values()]
            lin, tactics = theorems["lin"]
            incomplete = await _prove(pool, lin, tactics[:1])
            wrong = await _prove(pool, lin, ["intro h₀", "nlinarith [sq_nonneg x]", "exact h₀"])
            return [*good, incomplete, wrong]

    *good, incomplete, wrong = asyncio.run(run())
    assert all(ok for ok, _ in good), good
    assert not incomplete[0] and not wrong[0]

"""The production client and pool driving the replay server: every recorded proof of the bundled corpus
replays through `LeanWorker.tactic` and passes every soundness rule, the compile with its axiom check included."""

from __future__ import annotations

import asyncio
import json

import pytest

from burnqed.config import LeanConfig
from burnqed.lean.guard import TacticGuard
from burnqed.lean.pool import LeanPool
from burnqed.lean.soundness import Verdict, verify_proof
from burnqed.lean.start import start_theorem
from burnqed.records.replies import TacticKind, TacticResult
from burnqed.records.theorem import Theorem
from leankit.corpus import TheoremSpec, goal_pp, load_corpus
from tests.processes import cli

REPLAY = ["{python}", "-m", "minilean.replay"]  # the replay server itself, not the default (minilean before it)
CONFIG = LeanConfig(workers=2, command=REPLAY)
GUARD = TacticGuard.from_config(CONFIG)


async def replay(pool: LeanPool, spec: TheoremSpec, tactics: list[str]) -> Verdict:
    theorem = Theorem.from_recorded(spec)
    async with pool.lease(theorem.name, header=theorem.header) as lean:
        state, _ = await start_theorem(lean, theorem)  # as search starts it
        result = TacticResult(TacticKind.ERROR)
        for tactic in tactics:
            result = await lean.tactic(state, tactic)
            if result.kind is not TacticKind.SUCCESS:
                break
            assert result.state_id is not None
            state = result.state_id
        return await verify_proof(lean, theorem, tactics, result, GUARD, compile=True,
                                  index_header=theorem.header)


@pytest.mark.slow
def test_every_recorded_proof_counts_through_the_client():
    corpus = load_corpus()
    # Each proof as it runs from the theorem's binder-form start (how search starts it).
    jobs = [(spec, proof) for spec in corpus.theorems for proof in spec.binder_proofs()]
    assert len(jobs) >= 100

    async def run() -> list[Verdict]:
        async with LeanPool.from_config(CONFIG) as pool:
            return await asyncio.gather(*(replay(pool, spec, proof) for spec, proof in jobs))

    verdicts = asyncio.run(run())
    failed = [(spec.name, proof, v.reason) for (spec, proof), v in zip(jobs, verdicts, strict=True) if not v.ok]
    assert failed == []
    assert all(v.compiled and v.proof for v in verdicts)


@pytest.mark.slow
def test_incomplete_wrong_and_sorry_paths_never_count():
    spec = load_corpus().theorems[0]
    proof = spec.binder_proofs()[0]

    async def run() -> list[Verdict]:
        async with LeanPool.from_config(CONFIG) as pool:
            return [
                await replay(pool, spec, proof[:-1]) if len(proof) > 1 else Verdict(False, "single step"),
                await replay(pool, spec, [*proof[:-1], "exact foo_bar_baz"]),
                await replay(pool, spec, [*proof[:-1], "sorry"]),
            ]

    incomplete, wrong, sorry = asyncio.run(run())
    assert not incomplete.ok and not wrong.ok and not sorry.ok
    assert sorry.reason == "Lean reports sorry in the closing step"
    assert "did not close all goals" in wrong.reason


@pytest.mark.slow
def test_lean_check_starts_the_whole_bundled_corpus(tmp_path):
    report = tmp_path / "report.json"
    result = cli("lean", "check", "--output", str(report), "--set", f"lean.command={json.dumps(REPLAY)}")
    assert result.returncode == 0, result.stderr
    version, summary = result.stdout.splitlines()
    assert version.startswith("Pantograph 0.3.4 (from `") and version.endswith("-m minilean.replay --version`)")
    assert summary.startswith("started 51/51 (")
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["failures"] == []
    # Each starts as written: its one goal is the recorded goal its binder-form start reaches.
    specs = {spec.name: spec for spec in load_corpus().theorems}
    assert all(t["goals"] == 1 and t["state"] == goal_pp(specs[t["name"]].goals[specs[t["name"]].start_goal()])
               for t in data["theorems"])

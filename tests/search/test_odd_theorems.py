"""Odd theorem index entries searched end to end on real Lean worker processes (the Pantograph double): names Lean
declares as written but few indexes use, and a 200 KB statement. The index-level refusals (names Lean cannot
declare, duplicates, NUL bytes) are in tests/data/test_index.py and, through the CLI,
tests/commands/test_odd_inputs.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path

import pytest

from burnqed.commands.edges import open_policy
from burnqed.config import load_config
from burnqed.lean.pool import LeanPool
from burnqed.policy.base import Policy
from burnqed.records.results import EdgeOutcome, FailureReason
from burnqed.records.theorem import Theorem
from burnqed.stages.search import JobSettings, SearchReport, search_job
from burnqed.storage import Store
from burnqed.trajectory.reader import read_edges, read_results
from tests.conftest import double_argv
from tests.doubles.policy_double import ScriptedPolicy

# Identifier characters Lean takes beyond ASCII: subscripts, primes, Greek, `!`, `?`, letter-like symbols, dots.
ODD_NAMES = ["h₀'.α_1!", "ℕ_sum?", "Ω.ω₁.x'", "𝒜b.c_"]


def _search(tmp_path: Path, theorems: list[Theorem], *sets: str, policy: Policy | None = None) -> SearchReport:
    """`search_job` on one Lean double worker; `policy` or the configured one (`commands.edges.open_policy`)."""
    cfg = load_config(sets=["lean.workers=1", f"lean.command={json.dumps(double_argv())}", *sets])
    store = Store(cache_dir=tmp_path / "cache")

    async def go() -> SearchReport:
        async with LeanPool.from_config(cfg.lean, 1, theorems_per_worker=2) as pool, \
                contextlib.AsyncExitStack() as stack:
            used = policy if policy is not None else await stack.enter_async_context(open_policy(cfg.policy,
                                                                                                 store=store))
            settings = JobSettings.from_config(cfg.search, cfg.policy, cfg.lean)
            return await search_job(theorems, str(tmp_path / "out"), pool=pool, pool_size=1, policy=used,
                                    settings=settings, store=store)

    return asyncio.run(go())


@pytest.mark.slow
def test_names_lean_declares_as_written_are_proved_and_recorded_under_that_name(tmp_path: Path, store: Store):
    # The proof is compiled with `#print axioms NAME` and the kernel recheck naming the theorem; the double answers
    # them for the constants the file declares, as Lean does: a name mangled anywhere on the way is not proved.
    theorems = [Theorem(name=name, statement="∀ (n : ℕ), n + 0 = n") for name in ODD_NAMES]
    report = _search(tmp_path, theorems, policy=ScriptedPolicy(lambda state: [("done", -0.1)]))
    assert (report.searched, report.proved) == (4, 4)
    results = read_results(str(tmp_path / "out"), store=store)
    assert sorted(r.name for r in results) == sorted(ODD_NAMES)
    assert all(r.proved and r.proof is not None and r.proof.startswith(f"theorem {r.name} ") for r in results)
    rows = read_edges(str(tmp_path / "out"), columns=["theorem", "outcome"], store=store)
    assert sorted(rows.column("theorem").to_pylist()) == sorted(ODD_NAMES)
    assert set(rows.column("outcome").to_pylist()) == {"closed"}


@pytest.mark.slow
def test_a_200_kb_statement_starts_and_ends_prompt_rejected_on_the_tiny_model(tmp_path: Path, store: Store,
                                                                               tiny_model_dir: Path):
    # 12,000 hypotheses: Lean starts it (a flat statement, no deep nesting), the tiny model's 2,048-token context
    # cannot hold its prompt: the policy refuses it before generating, the theorem ends `prompt_rejected` with the
    # reason recorded, and its neighbour is proved as usual.
    binders = " ".join(f"(h{i} : {i} = {i})" for i in range(12_000))
    big = Theorem(name="big", statement=f"∀ (n : ℕ) {binders}, n + 0 = n")
    assert big.statement is not None and len(big.statement.encode()) > 200_000
    small = Theorem(name="small", statement="∀ (n : ℕ), n + 0 = n")
    report = _search(tmp_path, [big, small], f"policy.model={tiny_model_dir}", "search.max_nodes=3")
    assert report.searched == 2
    by_name = {r.name: r for r in read_results(str(tmp_path / "out"), store=store)}
    assert by_name["big"].failure_reason is FailureReason.PROMPT_REJECTED
    assert by_name["big"].detail is not None and "longer than the model's context length (2048 tokens)" in \
        by_name["big"].detail
    assert by_name["small"].failure_reason is not FailureReason.PROMPT_REJECTED
    rows = read_edges(str(tmp_path / "out"), columns=["theorem", "outcome", "state_before"], store=store).to_pylist()
    refused = [row for row in rows if row["theorem"] == "big"]
    assert [row["outcome"] for row in refused] == [EdgeOutcome.PROMPT_REJECTED.value]
    assert "h11999 : 11999 = 11999" in refused[0]["state_before"] and len(refused[0]["state_before"]) > 200_000

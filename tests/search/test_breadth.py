"""The trial mode `breadth` (burnqed/search/breadth.py): registered by one line, it runs through `prove_theorem` and
the search stage like any mode, and its search and eval identities are what its settings read, with no mark in
burnqed/config/ naming it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from burnqed.config import Config, LeanConfig, PolicyConfig, SearchConfig, load_config
from burnqed.config.identity import identity_keys
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay, InProcessReplayPool
from burnqed.records.enums import SearchMode
from burnqed.records.theorem import Theorem
from burnqed.search.breadth import BreadthSettings
from burnqed.search.mode import Sections
from burnqed.search.modes import MODES, prove_theorem
from burnqed.stages.search import JobSettings, search_job
from burnqed.storage import Store
from burnqed.trajectory.reader import read_results
from leankit.corpus import load_corpus
from minilean.replay.replay_server import ReplayServer
from tests.doubles.policy_double import ScriptedPolicy, corpus_oracle

CORPUS = load_corpus()
THEOREMS = [Theorem.from_recorded(spec) for spec in CORPUS.theorems][:4]


def test_breadth_mode_proves_through_prove_theorem_expanding_the_root_first() -> None:
    settings = MODES[SearchMode.BREADTH].settings(Sections(SearchConfig(max_nodes=5), PolicyConfig()))
    assert isinstance(settings, BreadthSettings) and settings.max_nodes == 5
    guard = TacticGuard.from_config(LeanConfig())
    outcome = asyncio.run(prove_theorem(THEOREMS[0], InProcessReplay(ReplayServer(CORPUS)),
                                        ScriptedPolicy(corpus_oracle(CORPUS)), settings, guard))
    assert outcome.result.mode is SearchMode.BREADTH and outcome.result.proved
    assert 1 <= outcome.units <= 5 and outcome.units == outcome.result.nodes_expanded
    assert [edge.depth for edge in outcome.edges] == sorted(edge.depth for edge in outcome.edges)  # shallowest first


def test_breadth_mode_runs_in_the_search_stage(tmp_path: Path, store: Store) -> None:
    cfg = load_config(sets=["search.mode=breadth"])
    settings = JobSettings.from_config(cfg.search, cfg.policy, cfg.lean)

    async def go() -> None:
        pool = InProcessReplayPool(lambda: ReplayServer(CORPUS), size=2)
        await search_job(THEOREMS, str(tmp_path / "out"), pool=pool, pool_size=2,
                         policy=ScriptedPolicy(corpus_oracle(CORPUS)), settings=settings, store=store)

    asyncio.run(go())
    results = read_results(str(tmp_path / "out"), store=store)
    assert sorted((r.name, r.mode, r.proved) for r in results) == sorted(
        (t.name, SearchMode.BREADTH, True) for t in THEOREMS)


def test_breadth_modes_identities_are_the_keys_its_settings_read() -> None:
    reads = MODES[SearchMode.BREADTH].reads()
    search, evaluated = set(identity_keys(Config, "search", reads)), set(identity_keys(Config, "eval", reads))
    assert {"search.max_depth", "policy.num_candidates", "policy.max_new_tokens", "search.timeout_s"} <= evaluated
    assert not {"search.revisits", "search.alpha", "search.num_proofs", "search.max_proofs"} & search  # not read
    assert {"search.max_nodes", "search.verify"} <= search - evaluated  # eval: its own budgets, always compiled

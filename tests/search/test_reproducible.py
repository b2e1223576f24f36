"""Reproducible at any concurrency: each theorem samples from its own seeds (`policy.base.sample_seed`), so a run's
solved set and trajectories do not depend on how many theorems search at once or on the shard count. The real
pieces: the tiny model in-process behind the batching policy (as `burnqed search` wires it), the embedded corpus'
replay workers, `search_job` with the configuration's settings."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from burnqed.config import Config, load_config
from burnqed.eval.identity import EvalJobSettings
from burnqed.eval.run import eval_job
from burnqed.lean.inprocess import InProcessReplayPool
from burnqed.policy.base import sample_seed
from burnqed.policy.batching import BatchingPolicy
from burnqed.policy.localmodel import LocalModel
from burnqed.policy.localpolicy import LocalPolicy
from burnqed.records.theorem import Theorem, TheoremIndex
from burnqed.stages.search import JobSettings, search_job
from burnqed.storage import Store
from burnqed.trajectory.reader import read_edges, read_results
from leankit.corpus import Corpus, load_corpus
from leankit.world import embedded_corpus
from minilean.replay.replay_server import ReplayServer
from tests.doubles.policy_double import ScriptedPolicy, corpus_oracle

POOL = 3
TIMING = {"lean_ms", "gen_ms", "timestamp_ms", "run_id", "iteration"}  # what may differ between identical runs


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return embedded_corpus()


@pytest.fixture(scope="module")
def theorems(corpus: Corpus) -> list[Theorem]:
    # Bundled theorems the tiny model was trained on and the world's held-out ones: a mix it proves and fails.
    trained = [spec for spec in corpus.theorems if spec.split == "train" and not spec.name.startswith("world_")]
    held_out = [spec for spec in corpus.theorems if spec.split == "test" and spec.name.startswith("world_")]
    return [Theorem.from_recorded(spec) for spec in [*trained[:12:2], *held_out[::max(1, len(held_out) // 4)][:4]]]


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path) -> LocalModel:
    # One model for every run: its own stream (reseeded or not) must not matter to a seeded run.
    return LocalModel.load(tiny_model_dir, device="cpu", seed=None)


def config(**sets: object) -> Config:
    base: dict[str, object] = {"search.max_nodes": 6, "policy.num_candidates": 4, "policy.max_new_tokens": 32,
                               "search.checkpoint_every": 100}
    return load_config(sets=[f"{k}={v}" for k, v in {**base, **sets}.items()])


def run(corpus: Corpus, theorems: list[Theorem], model: LocalModel, out: Path,
        shards: int = 1, **sets: object) -> tuple[set[str], list[dict[str, Any]]]:
    """Search `theorems` (in `shards` shards, one after the other); (solved names, edge rows sorted)."""
    cfg = config(**sets)
    settings = JobSettings.from_config(cfg.search, cfg.policy, cfg.lean)
    store = Store(cache_dir=out / "cache")

    async def go(shard: tuple[int, int] | None, output: str) -> None:
        pool = InProcessReplayPool(lambda: ReplayServer(corpus), size=POOL)
        policy = BatchingPolicy(LocalPolicy(model), max_batch_prompts=64)  # not closed: the model is shared
        try:
            await search_job(theorems, output, pool=pool, pool_size=POOL, policy=policy, settings=settings,
                             shard=shard, run_id="r", store=store)
        finally:
            await pool.close()

    outputs = []
    for index in range(shards):
        output = str(out / f"shard-{index}")
        asyncio.run(go((index, shards) if shards > 1 else None, output))
        outputs.append(output)
    solved = {r.name for output in outputs for r in read_results(output, store=store) if r.proved}
    rows = [{k: v for k, v in row.items() if k not in TIMING}
            for output in outputs for row in read_edges(output, store=store).to_pylist()]
    rows.sort(key=lambda row: (row["theorem"], row["node_id"]))
    return solved, rows


@pytest.mark.slow
@pytest.mark.timeout(600)  # four small runs of the tiny model on CPU
def test_the_same_seed_gives_the_same_run_at_any_concurrency_and_shard_count(
        corpus: Corpus, theorems: list[Theorem], model: LocalModel, tmp_path: Path) -> None:
    alone = run(corpus, theorems, model, tmp_path / "one", **{"search.concurrency": 1})
    model.reseed(12345)  # the model's own stream moved on: a seeded run must not care
    concurrent = run(corpus, theorems, model, tmp_path / "many")  # the default: every place of the pool
    sharded = run(corpus, theorems, model, tmp_path / "two", shards=2)
    solved, rows = alone
    assert rows, "the searches tried no tactic"
    assert concurrent == alone
    assert sharded == alone
    assert 0 < len(solved) < len(theorems), "a mix of solved and failed theorems makes the comparison telling"
    # The seed matters: another run seed samples other tactics.
    _, other_rows = run(corpus, theorems, model, tmp_path / "other", **{"policy.seed": 1})
    assert [r["tactic"] for r in other_rows] != [r["tactic"] for r in rows]


def test_each_eval_pass_searches_with_its_own_seeds(store: Store) -> None:
    """pass@n is n independent searches: pass k's seeds carry the attempt k (the policy double records them)."""
    bundled = load_corpus()
    theorems = [Theorem.from_recorded(spec) for spec in bundled.theorems[:2]]
    policy = ScriptedPolicy(corpus_oracle(bundled))

    async def go() -> None:
        pool = InProcessReplayPool(lambda: ReplayServer(bundled), size=2)
        try:
            await eval_job(TheoremIndex(name="some", theorems=theorems),
                           EvalJobSettings.from_config(config(**{"search.concurrency": 1}), [3]), pass_n=2,
                           pool=pool, pool_size=2, policy=policy, store=store)
        finally:
            await pool.close()

    asyncio.run(go())
    n = policy.samplings[0].n
    first = theorems[0].name
    asked = [seeds[0] for seeds in policy.seeds if seeds is not None]
    assert len(asked) == len(policy.seeds)  # every ask of a seeded run is seeded
    # The first ask of each pass is the first theorem's root (node 0), with pass k's seeds.
    roots = [row for row in asked if row == [sample_seed(0, first, 0, j, 0) for j in range(n)]
             or row == [sample_seed(0, first, 0, j, 1) for j in range(n)]]
    assert roots == [[sample_seed(0, first, 0, j, k) for j in range(n)] for k in (0, 1)]

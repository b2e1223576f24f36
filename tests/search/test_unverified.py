"""`search.verify = false`: proofs found without the compile are stored as unverified; they are never counted,
SFT and the value model never train on them, and eval compiles every proof it counts regardless."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from burnqed.config import Config, load_config
from burnqed.ebm.sampling import build_dataset, check_trainable
from burnqed.errors import InputError
from burnqed.eval.identity import EvalJobSettings
from burnqed.eval.run import eval_job
from burnqed.lean.inprocess import InProcessReplay, InProcessReplayPool
from burnqed.lean.soundness import check_proof_text
from burnqed.records.results import FailureReason
from burnqed.records.theorem import Theorem, TheoremIndex
from burnqed.sft.examples import read_positives
from burnqed.stages.search import JobSettings, SearchReport, search_job
from burnqed.stages.summary import summarize
from burnqed.storage import Store
from burnqed.trajectory.reader import read_edges, read_results
from leankit.corpus import load_corpus
from minilean.replay.replay_server import ReplayServer
from tests.doubles.policy_double import ScriptedPolicy, corpus_oracle

CORPUS = load_corpus()
THEOREMS = [Theorem.from_recorded(spec) for spec in CORPUS.theorems[:8]]


def config(verify: bool) -> Config:
    return load_config(sets=[f"search.verify={'true' if verify else 'false'}", "search.checkpoint_every=4"])


def settings(verify: bool) -> JobSettings:
    cfg = config(verify)
    return JobSettings.from_config(cfg.search, cfg.policy, cfg.lean)


def search(output: Path, verify: bool, *, store: Store) -> SearchReport:
    async def go() -> SearchReport:
        pool = InProcessReplayPool(lambda: ReplayServer(CORPUS), size=2)
        return await search_job(THEOREMS, str(output), pool=pool, pool_size=2,
                                policy=ScriptedPolicy(corpus_oracle(CORPUS)), settings=settings(verify), store=store)

    return asyncio.run(go())


@pytest.mark.slow
def test_unverified_proofs_are_recorded_but_never_counted_nor_trained_on(tmp_path: Path, store: Store) -> None:
    report = search(tmp_path / "off", verify=False, store=store)
    assert (report.searched, report.proved) == (8, 0)
    results = read_results(str(tmp_path / "off"), store=store)
    assert all(r.unverified and not r.proved and r.failure_reason is FailureReason.UNVERIFIED for r in results)
    assert all(r.proof and r.tactics and r.budget_at_proof is None for r in results)
    labels = read_edges(str(tmp_path / "off"), ["label", "proof_complete", "on_proof_path", "error"],
                        store=store).to_pydict()
    assert "positive" not in labels["label"]
    assert not any(labels["proof_complete"]) and not any(labels["on_proof_path"])
    assert labels["error"].count("not counted: unverified (compile skipped: search.verify=false)") == 8
    # Nothing to mine for SFT, no positive state for the value model.
    uri = f"file://{tmp_path / 'off'}"
    assert read_positives([uri], store=store) == []
    data = build_dataset([read_edges(uri, store=store)], valid_fraction=0.0)
    assert all(not t.positives for t in data.theorems.values())
    with pytest.raises(InputError, match="no positive state"):
        check_trainable(data, [uri])
    summary = summarize(uri, store=store)
    assert (summary.proved, summary.failure_reasons) == (0, {"unverified": 8})
    # The same search with the compile on: every proof is verified, positive, and counted.
    assert search(tmp_path / "on", verify=True, store=store).proved == 8
    assert read_positives([f"file://{tmp_path / 'on'}"], store=store)


def test_eval_compiles_every_proof_it_counts_even_with_verify_off(store: Store) -> None:
    async def go() -> None:
        pool = InProcessReplayPool(lambda: ReplayServer(CORPUS), size=2)
        result = await eval_job(TheoremIndex(name="some", theorems=THEOREMS), EvalJobSettings.from_config(
            config(False), [5, 20]), pass_n=1, pool=pool, pool_size=2, policy=ScriptedPolicy(corpus_oracle(CORPUS)),
            store=store)
        assert result.budgets[-1].solved == 8
        recheck = InProcessReplay(ReplayServer(CORPUS))
        for entry in result.per_theorem:
            assert entry.proved and entry.proof is not None
            header = next(t.header for t in THEOREMS if t.name == entry.name)
            verdict = await check_proof_text(recheck, entry.name, entry.proof, index_header=header)
            assert verdict.ok and verdict.compiled, (entry.name, verdict.reason)

    asyncio.run(go())

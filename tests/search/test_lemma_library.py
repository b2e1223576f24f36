"""The lemma library wired into the stages (docs/search.md, "The lemma library"): `burnqed search`'s job on training
theorems writes the lemmas of its counted proofs into `search.lemma_library` and a later job reads them frozen at its
start; an eval opens the library once, each pass gets a fresh source over it, and the library's listing is an input
of the eval's identity. Against minilean in this process."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from burnqed.config import Config, load_config
from burnqed.eval.identity import EvalIdentity, EvalJobSettings
from burnqed.eval.lemma_library import attach_library
from burnqed.eval.run import _pass_record, pass_engine
from burnqed.lean.inprocess import InProcessReplayPool
from burnqed.records.results import SubgoalSource
from burnqed.records.theorem import Theorem, TheoremIndex
from burnqed.runner.reuse import eval_inputs
from burnqed.search.lemmas import STATS_KEY as LIBRARY_STATS
from burnqed.search.lemmas import LemmaLibrary, LemmaWriter, LibrarySource
from burnqed.search.monitor import SearchMonitor
from burnqed.search.sketch_settings import SketchSettings
from burnqed.stages.search import JobSettings, search_job
from burnqed.storage import Store
from burnqed.trajectory.reader import read_results
from leankit.version import PantographVersion
from tests.doubles.line_servers import MiniLean
from tests.doubles.policy_double import ScriptedPolicy

pytestmark = pytest.mark.usefixtures("minilean_in_process")

THEOREM = Theorem(name="t", signature="(x y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) : 0 < x * y + x", split="train")
SKETCH = "have hxy : 0 < x * y := by sorry\nnlinarith [hxy, h₀]"


def config(library: Path | None, **sets: object) -> Config:
    given = {"search.mode": "sketch", "policy.prompt_format": "plain-tactic", "search.max_nodes": 4,
             "search.sketch_plans": 1, "search.sketch_rounds": 0, "policy.num_candidates": 1, "search.revisits": 0,
             **({} if library is None else {"search.lemma_library": str(library)}), **sets}
    return load_config(sets=[f"{key}={value}" for key, value in given.items()])


def policy(proves: bool) -> ScriptedPolicy:
    """The planner writes SKETCH; a subgoal prompt is answered with its proof when `proves`, else a new state."""

    def answer(prompt: str) -> list[tuple[str, float]]:
        if prompt.startswith("Sketch a proof"):
            return [(SKETCH, -0.5)]
        return [("nlinarith [h₀, h₁]" if proves else "have hq : (1 : ℝ) = 1 := by norm_num", -0.1)]

    return ScriptedPolicy(answer, key=lambda prompt: prompt, tokens=len)


def job(output: Path, cfg: Config, proves: bool) -> None:
    async def go() -> None:
        pool = InProcessReplayPool(lambda: MiniLean(version=PantographVersion.parse("0.3.4")), size=1)
        settings = JobSettings.from_config(cfg.search, cfg.policy, cfg.lean)
        await search_job([THEOREM], str(output), pool=pool, pool_size=1, policy=policy(proves),
                         settings=settings, iteration=2, store=Store(cache_dir=output.parent / "cache"))

    asyncio.run(go())


def test_a_search_writes_its_lemmas_and_a_later_search_is_served_them(tmp_path: Path, store: Store) -> None:
    library = tmp_path / "library"
    first = tmp_path / "first"
    job(first, config(library, **{"search.subgoal_cache": tmp_path / "cache-1"}), proves=True)
    [entry] = LemmaLibrary.open(store, str(library)).entries
    assert (entry.target, entry.tactics, entry.provenance.theorem, entry.provenance.split,
            entry.provenance.iteration) == ("0 < x * y", ["nlinarith [h₀, h₁]"], "t", "train", 2)
    recorded = json.loads((first / "_SUCCESS.json").read_text())["extra"]["lemma_library"]
    assert (recorded["entries"], recorded["lookups"], recorded["hits"], recorded["written"]) == (0, 1, 0, 1)
    # Another job (its own subgoal cache: only the library knows the proof), whose policy proves nothing itself.
    second = tmp_path / "second"
    job(second, config(library, **{"search.subgoal_cache": tmp_path / "cache-2"}), proves=False)
    [result] = read_results(str(second), store=store)
    assert result.proved, result.detail
    assert result.sketches[0].subgoals[0].source is SubgoalSource.LIBRARY
    assert result.lemmas_used() == [entry.origin]
    recorded = json.loads((second / "_SUCCESS.json").read_text())["extra"]["lemma_library"]
    assert (recorded["entries"], recorded["hits"], recorded["written"], recorded["digest"]) == (
        1, 1, 0, LemmaLibrary.of([entry]).digest)


def test_an_eval_freezes_the_library_once_each_pass_asks_a_fresh_source_and_its_listing_is_an_input(
        tmp_path: Path, store: Store) -> None:
    library = tmp_path / "library"
    job(tmp_path / "train", config(library, **{"search.subgoal_cache": tmp_path / "cache"}), proves=True)
    cfg = config(library)
    settings = EvalJobSettings.from_config(cfg, (4,))
    index = TheoremIndex(name="bench", theorems=[THEOREM.model_copy(update={"name": "u", "split": "test"})])
    attached = attach_library(settings, index, "0.3.4", store=store)
    engine = attached.job.engine
    assert isinstance(engine, SketchSettings) and isinstance(engine.lemmas, LibrarySource)
    frozen = engine.lemmas.library
    assert len(frozen.entries) == 1 and frozen.uri == str(library)
    passes = [pass_engine(engine, k) for k in range(2)]
    sources = [p.lemmas for p in passes if isinstance(p, SketchSettings)]
    assert len(sources) == 2 and sources[0] is not sources[1] and all(
        isinstance(s, LibrarySource) and s.library is frozen for s in sources)
    # Each pass's trajectory records its own source's counters (the mode's lemma source, `Mode.lemmas`).
    record = _pass_record("bench", 1, 2, SearchMonitor(concurrency=1), passes[1])
    assert isinstance(sources[1], LibrarySource) and record[LIBRARY_STATS] == sources[1].record()
    # In another mode nothing is attached.
    step = EvalJobSettings.from_config(config(library, **{"search.mode": "step"}), (4,))
    assert attach_library(step, index, "0.3.4", store=store) is step
    # The library's listing (its entries are named by their digests) is an input of the eval's identity: a lemma
    # added since is a difference.
    identity = EvalIdentity.of(index, settings, pass_n=1, iteration=0, ebm=None)
    before = eval_inputs(identity, cfg, store)
    assert before.inputs["search.lemma_library"].stamp.startswith("files:")
    assert LemmaWriter(store, str(library)).add(frozen.entries[0].model_copy(update={"tactics": ["positivity"]}))
    after = eval_inputs(identity, cfg, store)
    assert "search.lemma_library" in (before.difference(after) or "")
    assert "search.lemma_library" not in eval_inputs(identity, config(None),
                                                     store).inputs

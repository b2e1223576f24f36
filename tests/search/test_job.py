"""The search stage over many theorems: concurrency, batching, checkpoints, resume, failures."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from burnqed.config import Config, PolicyConfig, SearchConfig, load_config
from burnqed.errors import InputError, PolicyError
from burnqed.lean.inprocess import InProcessReplay, InProcessReplayPool
from burnqed.lean.start import start_theorem
from burnqed.policy.base import AsyncClosing, Completion, Sampling, Seeds
from burnqed.policy.batching import BatchingPolicy
from burnqed.records.enums import SearchMode
from burnqed.records.replies import pretty_state
from burnqed.records.results import Edge, EdgeOutcome
from burnqed.records.theorem import Theorem
from burnqed.search import modes
from burnqed.search.hybrid import HybridSearch
from burnqed.search.hybrid_settings import HybridSettings
from burnqed.search.journal import Counters, EntryRecord, FileJournal, NodeRecord, ProofRecord, RoundRecord
from burnqed.search.mode import ATTACHED, Sections, complete
from burnqed.search.modes import MODES
from burnqed.search.runner import parse_shard, select_shard
from burnqed.search.sketch_settings import SketchSettings
from burnqed.search.step import StepSettings
from burnqed.search.whole import WholeSettings
from burnqed.stages import search as stage
from burnqed.stages.search import JobSettings, SearchReport, search_job, unsolved_in
from burnqed.storage import Store
from burnqed.trajectory.reader import committed_parts, is_complete, read_edges, read_results
from leankit.corpus import load_corpus
from minilean.replay.replay_server import ReplayServer
from tests.doubles.policy_double import ScriptedPolicy, corpus_oracle
from tests.trajectory.factories import result, write_trajectory

CORPUS = load_corpus()
THEOREMS = [Theorem.from_recorded(spec) for spec in CORPUS.theorems]


def config(**sets: object) -> Config:
    return load_config(sets=[f"{k}={v}" for k, v in {"search.checkpoint_every": 10, **sets}.items()])


def job(output: Path, policy: object, cfg: Config | None = None, theorems: list[Theorem] = THEOREMS,
        settings: JobSettings | None = None, **kwargs: object) -> SearchReport:
    async def go() -> SearchReport:
        pool = InProcessReplayPool(lambda: ReplayServer(CORPUS), size=3)
        c = cfg or config()
        given = settings or JobSettings.from_config(c.search, c.policy, c.lean)
        return await search_job(theorems, str(output), pool=pool, pool_size=3, policy=policy,  # type: ignore[arg-type]
                                settings=given, store=Store(cache_dir=output.parent / "cache"),
                                **kwargs)  # type: ignore[arg-type]

    return asyncio.run(go())


@pytest.mark.slow
def test_a_search_run_proves_the_corpus_and_writes_checkpointed_trajectories(tmp_path: Path, store: Store) -> None:
    policy = BatchingPolicy(ScriptedPolicy(corpus_oracle(CORPUS), delay_s=0.001), max_batch_prompts=64)
    report = job(tmp_path / "out", policy)
    assert (report.selected, report.searched, report.proved, report.skipped) == (51, 51, 51, 0)
    parts = committed_parts(str(tmp_path / "out"), store=store)
    assert [len(p.theorems) for p in parts] == [10, 10, 10, 10, 10, 1]
    assert is_complete(str(tmp_path / "out"), store=store)
    results = read_results(str(tmp_path / "out"), store=store)
    assert sorted(r.name for r in results) == sorted(t.name for t in THEOREMS)
    edges = read_edges(str(tmp_path / "out"), columns=["theorem", "label", "on_proof_path"], store=store)
    assert edges.num_rows == sum(r.edges for r in results)
    positives = sum(1 for label in edges.column("label").to_pylist() if label == "positive")
    assert positives >= sum(r.depth or 0 for r in results)
    assert policy.stats.mean_batch > 1.0  # three concurrent searches shared requests


def test_an_existing_output_needs_resume_and_a_finished_one_is_left_alone(tmp_path: Path) -> None:
    out = tmp_path / "out"
    job(out, ScriptedPolicy(corpus_oracle(CORPUS)), theorems=THEOREMS[:3])
    with pytest.raises(InputError, match="--resume"):
        job(out, ScriptedPolicy(corpus_oracle(CORPUS)), theorems=THEOREMS[:3])
    again = job(out, ScriptedPolicy(corpus_oracle(CORPUS)), theorems=THEOREMS[:3], resume=True)
    assert (again.searched, again.skipped) == (0, 3)


class FailingAfter(AsyncClosing):
    """A policy that gives up (like the SGLang client after its retries) after `calls` requests."""

    name = "failing"

    def __init__(self, calls: int) -> None:
        self.inner = ScriptedPolicy(corpus_oracle(CORPUS))
        self.left = calls

    async def generate(self, prompts: list[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
        self.left -= 1
        if self.left < 0:
            raise PolicyError("policy at http://x gave up after 5 attempts: 503")
        return await self.inner.generate(prompts, sampling)

    async def close(self) -> None:
        pass


def test_an_infrastructure_failure_keeps_finished_theorems_and_resume_completes_without_duplicates(
    tmp_path: Path,
 store: Store) -> None:
    out = tmp_path / "out"
    with pytest.raises(PolicyError, match="gave up"):
        job(out, FailingAfter(40), cfg=config(**{"search.checkpoint_every": 4}))
    first = {r.name for r in read_results(str(out), store=store)}
    assert 0 < len(first) < 51 and not is_complete(str(out), store=store)
    run_id = committed_parts(str(out), store=store)[0].run_id
    report = job(out, ScriptedPolicy(corpus_oracle(CORPUS)), resume=True)
    assert report.skipped == len(first) and report.searched == 51 - len(first) and report.run_id == run_id
    names = [r.name for r in read_results(str(out), store=store)]  # the reader refuses duplicates outright
    assert sorted(names) == sorted(t.name for t in THEOREMS)
    assert set(read_edges(str(out), columns=["run_id"], store=store).column("run_id").to_pylist()) == {run_id}


def test_shards_partition_the_theorems() -> None:
    shards = [select_shard(THEOREMS, i, 4) for i in range(4)]
    assert sorted(t.name for s in shards for t in s) == sorted(t.name for t in THEOREMS)
    assert parse_shard("3/4", 10) == (3, 4)
    assert parse_shard("0/10", 10) == (0, 10)
    shape = "expected I/N, two whole numbers, e.g. 0/4"
    for bad, problem in [("4/4", "I counts from 0 to N - 1 (3 here), e.g. 0/4"), ("3/2", "I counts from 0 to N - 1 "
                         "(1 here), e.g. 0/4"), ("0/0", "N is the number of shards, 1 to 10"),
                         ("0/11", "N is the number of shards, 1 to 10"), ("x/2", shape), ("a/b", shape), ("1", shape),
                         ("-1/2", shape), ("+1/2", shape), (" 0/2", shape), ("1_0/20", shape), ("١/٢", shape),
                         ("0/2/3", shape), ("0x1/4", shape)]:
        with pytest.raises(ValueError) as caught:
            parse_shard(bad, 10)
        assert str(caught.value) == f"--shard {bad!r}: {problem}"


def test_a_shard_run_searches_only_its_share(tmp_path: Path, store: Store) -> None:
    report = job(tmp_path / "s1", ScriptedPolicy(corpus_oracle(CORPUS)), shard=(1, 4))
    assert report.selected == len(THEOREMS[1::4]) == report.searched
    assert {r.name for r in read_results(str(tmp_path / "s1"), store=store)} == {t.name for t in THEOREMS[1::4]}


def test_a_hybrid_run_writes_hybrid_results_and_removes_its_checkpoints_when_complete(tmp_path: Path,
                                                                                      store: Store) -> None:
    out = tmp_path / "out"
    cfg = config(**{"search.mode": "hybrid", "search.num_proofs": 16, "search.min_proofs": 16})
    policy = ScriptedPolicy(corpus_oracle(CORPUS))
    report = job(out, policy, cfg, theorems=THEOREMS[:6])
    assert (report.searched, report.proved) == (6, 6)
    results = read_results(str(out), store=store)
    assert {r.mode for r in results} == {"hybrid"} and all(r.proofs_sampled > 0 and r.tokens > 0 for r in results)
    assert all(s.max_new_tokens == cfg.search.proof_max_tokens for s in policy.samplings[:1])
    assert is_complete(str(out), store=store) and not (out / "_inflight").exists()

    # Checkpoints of a killed hybrid run without any committed theorem still need --resume.
    half = tmp_path / "half"
    counters = Counters(rounds=0, sampled=0, tokens=0, lean_calls=2, elapsed_s=0.1, policy_s=0.0, lean_s=0.1,
                        value_s=0.0, rejected=0, refusals=[], next_id=1)
    FileJournal(str(half),
                store=store).append("x", RoundRecord(theorem="x", round=0, fingerprint="f", counters=counters))
    with pytest.raises(InputError, match="half-searched"):
        job(half, policy, cfg, theorems=THEOREMS[:1])


@pytest.mark.parametrize("mode", ["step", "whole", "hybrid"])
def test_a_resumed_search_counts_no_proof_a_planted_journal_claims(mode: str, tmp_path: Path, store: Store) -> None:
    """A journal anyone could write, claiming a verified `sorry` proof: step and whole search never read one; hybrid
    search replays its path in Lean first, which the guard refuses. Nothing is counted, and hybrid says why."""
    out, theorem = tmp_path / "out", THEOREMS[0]
    cfg = config(**{"search.mode": mode, "search.max_nodes": 3, "search.max_proofs": 2, "search.max_rounds": 2,
                    "search.num_proofs": 1, "search.min_proofs": 1})
    settings = JobSettings.from_config(cfg.search, cfg.policy, cfg.lean)
    engine = settings.engine if isinstance(settings.engine, HybridSettings) else HybridSettings()
    lean = InProcessReplay(ReplayServer(CORPUS))
    fingerprint = HybridSearch(theorem, lean, ScriptedPolicy(lambda _: []), engine, settings.guard).fingerprint()
    root = asyncio.run(start_theorem(lean, theorem))[1]
    state = pretty_state(root)
    counters = Counters(rounds=1, sampled=1, tokens=1, lean_calls=1, elapsed_s=0.1, policy_s=0.0, lean_s=0.1,
                        value_s=0.0, rejected=0, refusals=[], next_id=2)
    row = Edge(node_id=1, parent_id=0, depth=1, state_before=state, tactic="sorry", state_after="",
               outcome=EdgeOutcome.CLOSED, error=None, logprob=-1.0, n_tokens=1, score=None, energy=None, lean_ms=0.0,
               gen_ms=0.0, timestamp_ms=0)
    FileJournal(str(out), store=store).append(theorem.name, RoundRecord(
        theorem=theorem.name, round=0, fingerprint=fingerprint, counters=counters,
        nodes=[NodeRecord(id=0, parent=None, depth=0, tactic=None, state=state, targets=[g.target for g in root],
                          prior=0.0, unchanged=0, haves=0)],
        entries=[EntryRecord(node=0, key="sorry", edge=1, child=None, closed=True, failure=None)], edges=[row],
        proofs=[ProofRecord(edge=1, proof=f"theorem {theorem.name} : True := by\n  sorry\n", tactics=["sorry"],
                            depth=1, budget=1, verified=True)]))
    report = job(out, ScriptedPolicy(lambda _: [("skip", -1.0)], key=str), cfg, theorems=[theorem], resume=True)
    (result,) = read_results(str(out), store=store)
    assert (report.searched, report.proved, result.proved, result.unverified, result.proof) == (1, 0, False, False,
                                                                                               None)
    if mode == "hybrid":
        assert result.rejected_proofs == 1 and result.detail == (
            "a proof its journal holds (row 1) did not check again: replayed from the theorem's start, its path does "
            "not close the goal in Lean")
    assert is_complete(str(out), store=store) and not (out / "_inflight").exists()


def test_job_settings_come_from_the_sections_and_pace_the_run_by_the_pool() -> None:
    cfg = config(**{"search.mode": "hybrid", "search.theorems_per_worker": 3, "lean.deny": '["omega"]'})
    settings = JobSettings.from_config(cfg.search, cfg.policy, cfg.lean)
    assert settings.mode == "hybrid" and isinstance(settings.engine, HybridSettings)
    assert settings.engine.journal is None  # search_job attaches one on its own output
    assert settings.checkpoint_every == 10
    assert settings.concurrency_for(4) == 12  # search.concurrency unset: workers × theorems per worker
    assert settings.guard.check("omega") is not None and settings.guard.check("simp") is None  # lean.deny
    pinned = config(**{"search.concurrency": 5})
    assert JobSettings.from_config(pinned.search, pinned.policy, pinned.lean).concurrency_for(4) == 5


def test_a_search_setting_reaches_each_engine_that_reads_it() -> None:
    search = SearchConfig(revisit_penalty=2.5, probe_tactics=["simp"], max_nodes=7, timeout_s=9.0, max_proofs=11)
    step = MODES[SearchMode.STEP].settings(Sections(search, PolicyConfig(), budget=3))
    assert (step.revisit_penalty, step.probe_tactics, step.timeout_s) == (2.5, ("simp",), 9.0)  # a list as a tuple
    assert step.max_nodes == 3  # the stage's budget wins over the section's
    whole = MODES[SearchMode.WHOLE].settings(Sections(search, PolicyConfig()))
    assert (whole.max_proofs, whole.timeout_s) == (11, 9.0)


def engine_sources(mode: str, subgoal_mode: str, monkeypatch: pytest.MonkeyPatch) -> dict[type, set[str]]:
    """Each engine settings class `settings_from_config` builds in `mode` (sketch: with its subgoals in
    `subgoal_mode`) → the fields its mode gives that class (`search.mode.complete`)."""
    given: dict[type, set[str]] = {}
    build = complete

    def recording(engine: type[Any], **fields: Any) -> Any:
        given.setdefault(engine, set()).update(fields)
        return build(engine, **fields)

    monkeypatch.setattr(modes, "complete", recording)
    stage.settings_from_config(SearchConfig(mode=mode, sketch_subgoal_mode=subgoal_mode), PolicyConfig())
    return given


@pytest.mark.parametrize(("mode", "subgoal_mode"), [("step", "step"), ("whole", "step"), ("hybrid", "step"),
                                                    ("sketch", "step"), ("sketch", "hybrid")])
def test_every_field_of_an_engines_settings_is_given_by_its_mode(
        mode: str, subgoal_mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A mode builds its engine's settings field by field from the sections (nothing copied by name): every field
    but the attached ones (`search.mode.ATTACHED`) is given, so none keeps its default whatever the configuration
    says."""
    given = engine_sources(mode, subgoal_mode, monkeypatch)
    built = {"step": {StepSettings}, "whole": {WholeSettings}, "hybrid": {HybridSettings},
             "sketch": {SketchSettings, StepSettings if subgoal_mode == "step" else HybridSettings}}[mode]
    assert set(given) == built
    assert not set(ATTACHED) & set().union(*given.values())  # attached: only so
    assert {engine.__name__: sorted({f.name for f in dataclasses.fields(engine)} - fields - set(ATTACHED))
            for engine, fields in given.items()} == {engine.__name__: [] for engine in built}


def test_an_engine_field_its_mode_does_not_give_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    given = engine_sources("step", "step", monkeypatch)[StepSettings]
    grown = dataclasses.make_dataclass("GrownStepSettings", [("max_tactics_tried", int, 0)], bases=(StepSettings,),
                                       frozen=True)
    fields = {name: getattr(StepSettings(), name) for name in given}
    with pytest.raises(TypeError, match="GrownStepSettings built without max_tactics_tried: each field comes from"):
        complete(grown, **fields)
    with pytest.raises(TypeError, match="StepSettings built without seed:"):
        complete(StepSettings, **{name: value for name, value in fields.items() if name != "seed"})
    every = {f.name for engine in (StepSettings, WholeSettings, HybridSettings, SketchSettings)
             for f in dataclasses.fields(engine)}
    assert sorted(set(ATTACHED) - every) == []  # no stale name in the list


def test_theorems_the_last_iteration_left_unsolved_are_searched_at_the_larger_budget(tmp_path: Path,
                                                                                       store: Store) -> None:
    """`search.unsolved_budget_factor` with the previous iteration's trajectories (`--unsolved-from`): a theorem
    they searched and never proved gets ceil(3 × 2.5) = 8 expansions; one they proved, or never searched, 3."""
    first, second, third = THEOREMS[:3]
    previous = f"file://{tmp_path}/iter_0"
    write_trajectory(previous, [(result(first.name, True), []), (result(second.name, False), [])], store=store)
    write_trajectory(previous + "-noise", [(result(second.name, False), []), (result(third.name, True), [])],
                     run_id="noise", store=store)
    assert unsolved_in(previous, store=store) == {second.name}
    cfg = config(**{"search.max_nodes": 3, "search.unsolved_budget_factor": 2.5})
    settings = JobSettings.from_config(cfg.search, cfg.policy, cfg.lean)
    assert settings.with_unsolved({second.name}, config().search, cfg.policy) is settings  # a factor of 1
    larger = settings.with_unsolved(unsolved_in(previous, store=store), cfg.search, cfg.policy)
    never = ScriptedPolicy(lambda _: [("exact no_such_lemma", -1.0)])
    report = job(tmp_path / "out", never, cfg, theorems=[first, second, third], settings=larger)
    assert (report.larger, report.larger_budget) == (1, 8)
    expanded = {r.name: r.nodes_expanded for r in read_results(str(tmp_path / "out"), store=store)}
    assert expanded == {first.name: 3, second.name: 8, third.name: 3}
    plain = job(tmp_path / "plain", never, cfg, theorems=[first, second, third])
    assert (plain.larger, plain.larger_budget) == (0, None)
    whole = config(**{"search.mode": "whole", "search.max_proofs": 5, "search.unsolved_budget_factor": 1.5})
    grown = JobSettings.from_config(whole.search, whole.policy, whole.lean).with_unsolved({"t"}, whole.search,
                                                                                         whole.policy)
    assert grown.larger is not None and grown.larger.budget == 8 and grown.overrides().keys() == {"t"}


def test_unsolved_from_needs_a_larger_budget_and_a_trajectory_before_any_search(tmp_path: Path) -> None:
    from tests.processes import cli

    out, previous = str(tmp_path / "out"), str(tmp_path / "previous")
    plain = cli("search", "--output", out, "--unsolved-from", previous)
    assert plain.returncode == 2 and "set search.unsolved_budget_factor above 1 (it is 1)" in plain.stderr
    missing = cli("search", "--output", out, "--unsolved-from", previous, "--set", "search.unsolved_budget_factor=2")
    assert missing.returncode == 2 and "no trajectory data" in missing.stderr
    assert not (tmp_path / "out").exists()

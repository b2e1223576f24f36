"""Throughput machinery of the search: speculative expansion (same search, asks ahead, nothing leaked), the
run monitor (theorems in flight, policy batches, Lean workers) and its report in the trajectory marker and
`burnqed summary`, fairness (theorems waiting for room on a worker are admitted in turn), the progress line."""

from __future__ import annotations

import asyncio
import io
import sys
import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest

from burnqed.base import progress
from burnqed.config import LeanConfig, load_config
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplayPool
from burnqed.lean.lease import LeanLease
from burnqed.policy.base import Completion, Sampling, Seeds
from burnqed.policy.batching import BatchingPolicy
from burnqed.records.results import Edge, FailureReason, TheoremResult
from burnqed.records.theorem import Theorem
from burnqed.search.monitor import SearchMonitor, ThroughputReport, render_throughput
from burnqed.search.runner import run_theorems
from burnqed.search.step import StepSettings
from burnqed.stages.search import JobSettings, search_job
from burnqed.stages.summary import render_summary, summarize
from burnqed.storage import Store
from burnqed.trajectory.reader import read_marker
from leankit.corpus import load_corpus
from minilean.replay.replay_server import ReplayServer
from tests.doubles.policy_double import ScriptedPolicy, corpus_oracle

CORPUS = load_corpus()
THEOREMS = [Theorem.from_recorded(spec) for spec in CORPUS.theorems]
GUARD = TacticGuard.from_config(LeanConfig())


class Sink:
    def __init__(self) -> None:
        self.rows: dict[str, tuple[TheoremResult, list[Edge]]] = {}

    def add(self, result: TheoremResult, edges: list[Edge]) -> None:
        assert result.name not in self.rows
        self.rows[result.name] = (result, edges)

    def flush(self) -> object:
        return None


class CountingPolicy(ScriptedPolicy):
    """The corpus oracle; counts asks that were cancelled before their answer."""

    def __init__(self, delay_s: float) -> None:
        super().__init__(corpus_oracle(CORPUS), delay_s=delay_s)
        self.cancelled = 0
        self.pending = 0

    async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
        self.pending += 1
        try:
            return await super().generate(prompts, sampling, seeds)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.pending -= 1


def search(theorems: list[Theorem], speculate: int, *, workers: int = 1, per_worker: int = 1,
           concurrency: int = 1, delay_s: float = 0.0) -> tuple[Sink, SearchMonitor, CountingPolicy]:
    settings = StepSettings(sampling=Sampling(n=8), max_nodes=40, timeout_s=60.0, speculate=speculate)
    policy = CountingPolicy(delay_s)
    sink = Sink()

    async def go() -> SearchMonitor:
        pool = InProcessReplayPool(lambda: ReplayServer(CORPUS), size=workers, theorems_per_worker=per_worker,
                                   latency=lambda: 0.002)
        monitor = SearchMonitor(concurrency=concurrency, pool=pool, policy=policy)
        async with monitor.watching(every_s=0.01):
            await run_theorems(theorems, pool, policy, settings, GUARD, sink=sink,
                               concurrency=concurrency, monitor=monitor)
        # Nothing the search started is still running: unused asks ahead were cancelled, not leaked.
        leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert leftover == []
        await pool.close()
        return monitor

    return sink, asyncio.run(go()), policy


def trace(sink: Sink) -> dict[str, tuple[object, ...]]:
    """What a search did, per theorem: its result's verdict and every edge in order."""
    return {
        name: (result.proved, result.nodes_expanded, result.proof,
               [(e.parent_id, e.node_id, e.tactic, e.outcome, e.state_after) for e in edges])
        for name, (result, edges) in sink.rows.items()
    }


# ------------------------------------------------------------------------------------------ speculation


@pytest.mark.slow
def test_speculative_expansion_asks_ahead_but_searches_exactly_as_without() -> None:
    theorems = THEOREMS[:12]
    plain, plain_monitor, _ = search(theorems, speculate=0)
    ahead, ahead_monitor, _ = search(theorems, speculate=2)
    assert trace(ahead) == trace(plain)
    assert sum(r.proved for r, _ in plain.rows.values()) >= 10
    assert plain_monitor.speculated == 0
    assert ahead_monitor.speculated > 0
    assert 0 < ahead_monitor.speculation_used <= ahead_monitor.speculated


@pytest.mark.slow
def test_asks_ahead_that_are_never_used_are_cancelled_when_the_search_ends() -> None:
    """The policy is slow, so a proof found while a child's ask is still on its way leaves it unused: the
    search cancels it (the runner's check that no task is left over is in `search`)."""
    _, monitor, policy = search(THEOREMS[:12], speculate=1, delay_s=0.02)
    unused = monitor.speculated - monitor.speculation_used
    assert unused > 0
    assert 0 < policy.cancelled <= unused  # those still on their way (the rest were answered already)
    assert policy.pending == 0


# -------------------------------------------------------------------------------------------- fairness


def test_theorems_waiting_for_room_on_a_worker_are_admitted_in_turn() -> None:
    """Concurrency well above the workers' room (2 workers x 2 theorems, 16 asking): theorems are admitted in
    input order (FIFO) as room frees up, and every one finishes."""
    admitted: list[str] = []

    class Recording(InProcessReplayPool):
        def lease(  # type: ignore[override]
            self, owner: str | None = None, *, header: str | None = None
        ) -> AbstractAsyncContextManager[LeanLease]:
            admitted.append(owner or "?")
            return super().lease(owner, header=header)

    theorems = THEOREMS[:16]
    settings = StepSettings(sampling=Sampling(n=8), max_nodes=40, timeout_s=60.0)
    finished: list[str] = []

    async def go() -> None:
        pool = Recording(lambda: ReplayServer(CORPUS), size=2, theorems_per_worker=2, latency=lambda: 0.002)
        await run_theorems(theorems, pool, ScriptedPolicy(corpus_oracle(CORPUS)), settings, GUARD,
                           concurrency=16, on_result=lambda r: finished.append(r.name))
        await pool.close()

    asyncio.run(go())
    assert sorted(finished) == sorted(t.name for t in theorems)
    assert admitted == [t.name for t in theorems]


# -------------------------------------------------------------------------------------------- monitor


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def result(name: str, time_s: float, policy_s: float, lean_s: float) -> TheoremResult:
    return TheoremResult(name=name, proved=False, failure_reason=FailureReason.EXHAUSTED, nodes_expanded=1,
                         edges=1, time_s=time_s, policy_s=policy_s, lean_s=lean_s)


def test_the_monitor_counts_theorems_in_flight_policy_batches_and_waits() -> None:
    clock = FakeClock()
    policy = BatchingPolicy(ScriptedPolicy(lambda state: []), max_batch_prompts=8)
    policy.stats.requests, policy.stats.prompts = 7, 30  # an earlier run's (e.g. eval's previous pass)
    monitor = SearchMonitor(concurrency=4, policy=policy, clock=clock)
    policy.stats.requests, policy.stats.prompts = 7 + 4, 30 + 10
    monitor.theorem_started()
    clock.now += 2.0
    monitor.theorem_started()
    clock.now += 2.0  # 1 in flight for 2 s, then 2 for 2 s
    monitor.theorem_finished(result("a", 4.0, 3.0, 1.0), speculated=3, speculation_used=2)
    monitor.theorem_finished(None)  # cancelled: nothing to count
    monitor.sample()
    assert monitor.status().startswith("in flight 0/4 · 0 asking the policy · 2.5 prompts/request · policy wait 75%")
    report = monitor.report()
    assert (report.theorems, report.peak_in_flight, report.mean_in_flight) == (1, 2, 1.5)
    assert (report.policy_requests, report.policy_prompts, report.mean_batch) == (4, 10, 2.5)
    assert (report.policy_wait, report.lean_wait) == (0.75, 0.25)
    assert (report.speculated, report.speculation_used) == (3, 2)
    assert report.respawned is None and report.workers == []
    assert ThroughputReport.from_dict(report.as_dict()) == report
    assert "speculative expansion: 3 nodes asked ahead, 2 used" in render_throughput(report)


def test_the_monitor_samples_each_lean_workers_load() -> None:
    sink, monitor, _ = search(THEOREMS[:8], speculate=0, workers=2, per_worker=4, concurrency=8, delay_s=0.01)
    report = monitor.report()
    assert len(sink.rows) == report.theorems == 8
    assert report.peak_in_flight == 8
    assert [w.index for w in report.workers] == [0, 1]
    assert max(w.peak_theorems for w in report.workers) >= 2  # the workers were shared
    assert report.respawned == 0 and report.recycled == 0
    assert "Lean workers: w0 ≤" in render_throughput(report)


@pytest.mark.slow
def test_a_search_run_reports_its_throughput_in_the_marker_and_the_summary(tmp_path: Path, store: Store) -> None:
    out = str(tmp_path / "out")
    cfg = load_config(sets=["search.checkpoint_every=10", "search.theorems_per_worker=3"])

    async def go() -> ThroughputReport | None:
        pool = InProcessReplayPool(lambda: ReplayServer(CORPUS), size=2, theorems_per_worker=3)
        policy = BatchingPolicy(ScriptedPolicy(corpus_oracle(CORPUS), delay_s=0.001), max_batch_prompts=64)
        report = await search_job(THEOREMS[:12], out, pool=pool, pool_size=2, policy=policy,
                                  settings=JobSettings.from_config(cfg.search, cfg.policy, cfg.lean), store=store)
        return report.throughput

    throughput = asyncio.run(go())
    assert throughput is not None
    assert (throughput.theorems, throughput.concurrency) == (12, 6)
    assert throughput.policy_requests > 0 and throughput.mean_batch >= 1.0
    marker = read_marker(out, store=store)
    assert marker is not None and marker.extra["throughput"] == throughput.as_dict()
    summary = summarize(out, store=store)
    assert summary.throughput == throughput.as_dict()
    assert "throughput: 12 theorems" in render_summary(summary, width=200)


# ------------------------------------------------------------------------------------------- progress


def test_the_log_progress_prints_the_status_line_even_while_nothing_finishes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.05)
    with progress.progress_bar("searching", total=3, status=lambda: "in flight 3/4") as advance:
        time.sleep(0.3)  # nothing finishes: the ticker still reports
        advance(3)
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 3
    assert lines[0].startswith("searching: 0/3") and lines[0].endswith(" · in flight 3/4")
    assert lines[-1].startswith("searching: 3/3") and "done" in lines[-1]

"""`burnqed eval --trajectories-out` killed outright (SIGKILL) and resumed, with real processes: every theorem that
finished before the kill is committed (the help's promise: an eval killed after 19 of 30 theorems had committed
none, its writer waiting for `search.checkpoint_every` = 50), no Lean worker outlives it, and `--resume` ends with
the result and rows of an eval that was never interrupted; in-process, an eval stopped by a failing policy resumes
to the usage curves of an uninterrupted one."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from burnqed.config import load_config
from burnqed.eval.identity import EvalJobSettings
from burnqed.eval.result import EvalResult, load_eval_result
from burnqed.eval.run import eval_job
from burnqed.lean.inprocess import InProcessReplayPool
from burnqed.policy.base import Completion, Sampling, Seeds
from burnqed.records.theorem import Theorem, TheoremIndex
from burnqed.storage import Store
from burnqed.trajectory.reader import committed_parts, is_complete, read_results
from leankit.corpus import Corpus, load_corpus
from minilean.replay.replay_server import ReplayServer
from tests.doubles.policy_double import ScriptedPolicy, corpus_oracle
from tests.processes import background, cli, descendants, survivors, wait_for
from tests.search.helpers import SLOWED, one_at_a_time, rows, small_index

TIMING_FIELDS = {"time_s", "policy_s", "lean_s", "value_s"}


def per_theorem(path: Path, store: Store) -> list[dict[str, Any]]:
    return [entry.model_dump(exclude=TIMING_FIELDS) for entry in load_eval_result(path, store=store).per_theorem]


@pytest.mark.slow
def test_an_eval_killed_outright_keeps_each_finished_theorem_and_resumes_to_the_uninterrupted_result(
    tiny_model_dir: Path, tmp_path: Path, store: Store
) -> None:
    index = small_index(tmp_path)
    common = ["--theorems", str(index), "--budgets", "2,4", *one_at_a_time(tiny_model_dir)]  # checkpoint_every: 50
    killed = ["eval", "--output", str(tmp_path / "r.json"), "--trajectories-out", str(tmp_path / "traj"), *common]
    whole = ["eval", "--output", str(tmp_path / "whole.json"), "--trajectories-out", str(tmp_path / "whole"),
             *common]
    with background(*killed, *SLOWED) as proc:
        wait_for(lambda: len(committed_parts(str(tmp_path / "traj"), store=store)) >= 2 or proc.poll() is not None)
        assert proc.poll() is None, "the eval finished before it could be killed; slow it down"
        workers = descendants(proc.pid)
        assert workers, "the eval runs no Lean worker"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert survivors(workers, grace=5.0) == []
    first = read_results(str(tmp_path / "traj"), store=store)
    # One part per finished theorem: what finished before the kill is there, nothing else.
    assert [len(part.theorems) for part in committed_parts(str(tmp_path / "traj"), store=store)] == [1] * len(first)
    assert 2 <= len(first) < 6 and not (tmp_path / "r.json").exists()
    # the resume and the uninterrupted reference in this process: what the killed process left is the subject
    resumed = cli(*killed, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    result = load_eval_result(tmp_path / "r.json", store=store)
    assert (result.total, result.resumed) == (6, len(first)) and is_complete(str(tmp_path / "traj"), store=store)
    assert cli(*whole).returncode == 0
    assert per_theorem(tmp_path / "r.json", store) == per_theorem(tmp_path / "whole.json", store)
    assert rows(str(tmp_path / "traj"), store) == rows(str(tmp_path / "whole"), store)


class FailingPolicy(ScriptedPolicy):
    """The corpus' oracle, until its `after`-th request, which fails as a policy server that went away would."""

    def __init__(self, corpus: Corpus, after: int | None = None) -> None:
        super().__init__(corpus_oracle(corpus))
        self.after = after

    async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
        if self.after is not None and len(self.calls) >= self.after:
            raise RuntimeError("the policy server went away")
        return await super().generate(prompts, sampling, seeds)


@pytest.mark.slow  # three small evals in-process
def test_a_resumed_eval_records_the_usage_curves_of_an_uninterrupted_one(tmp_path: Path, store: Store) -> None:
    corpus = load_corpus()
    index = TheoremIndex(name="some", theorems=[Theorem.from_recorded(spec) for spec in corpus.theorems[:4]])
    settings = EvalJobSettings.from_config(load_config(sets=["search.concurrency=1"]), [2, 4])

    def run(prefix: str, policy: FailingPolicy, resume: bool = False) -> EvalResult:
        async def go() -> EvalResult:
            pool = InProcessReplayPool(lambda: ReplayServer(corpus), size=1)
            try:
                return await eval_job(index, settings, pass_n=1, pool=pool, pool_size=1, policy=policy,
                                      trajectories=prefix, resume=resume, store=store)
            finally:
                await pool.close()

        return asyncio.run(go())

    counted = FailingPolicy(corpus)
    whole = run(str(tmp_path / "whole"), counted)
    with pytest.raises(RuntimeError, match="went away"):
        run(str(tmp_path / "cut"), FailingPolicy(corpus, after=len(counted.calls) // 2))
    resumed = run(str(tmp_path / "cut"), FailingPolicy(corpus), resume=True)
    assert 1 <= resumed.resumed < 4
    assert all(t.curve is not None and t.curve.tokens for t in whole.per_theorem)
    assert [t.curve for t in resumed.per_theorem] == [t.curve for t in whole.per_theorem]
    assert resumed.mean_curve("tokens") == whole.mean_curve("tokens")

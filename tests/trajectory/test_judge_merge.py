"""`merge-trajectories` with Lean's comparator as the judge (`lean.judge = "comparator"`; `burnqed.stages.judge_merge`,
docs/trajectories.md, "The judge"): a search on the made-up problem set of tests/eval/test_judge.py (the Pantograph
double lets `done` close the false statement), then the merge of its shard judged by the comparator double. The
proof the double refuses is no positive in the merged trajectories (its theorem un-proved, every row of its search
relabelled), the refusal is a soundness alarm in `_SUCCESS.json` and on the command's output, exit
SOUNDNESS_ALARM_EXIT; the honest proofs and the answer slot (a definition hole) stay positives. With burnqed as the
judge the merge copies the shard as it is. A comparator without definition holes (Lean before v4.30.0-rc2) is refused
before anything is copied, in eval, the judge step and the merge alike."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from burnqed.config import Config, load_config
from burnqed.records.theorem import TheoremIndex
from burnqed.runner.request_inputs import stage_verdict
from burnqed.runner.requests import MergeRequest
from burnqed.search.judge import SOUNDNESS_ALARM_EXIT
from burnqed.stages.summary import render_summary, summarize
from burnqed.storage import Store
from burnqed.trajectory.reader import read_edges, read_marker, read_results
from tests.conftest import double_argv
from tests.doubles.fault_server import FaultServer
from tests.eval.test_judge import THEOREMS, answer
from tests.eval.test_judge_holes import HOLES, JUDGE
from tests.processes import cli

ALARM = ("soundness alarm: false_claim: burnqed verified its proof in search judged, comparator refused it (run): "
         "Child exited with 1; no positive in the merge")


def search(tmp_path: Path, lean: tuple[str, ...]) -> tuple[Path, Path]:
    """The made-up problem set searched once (whole mode, one proof each) into `tmp_path/shard`; (index, shard)."""
    index = tmp_path / "index.json"
    index.write_text(TheoremIndex(name="judge-made-up", theorems=THEOREMS).model_dump_json(), encoding="utf-8")
    shard = tmp_path / "shard"
    with FaultServer(completions=answer) as server:
        done = cli("search", "--theorems", str(index), "--output", str(shard), "--run-id", "judged",
                   "--set", "policy.backend=sglang", "--set", f"policy.url={server.url}", "--set", "search.mode=whole",
                   "--set", "policy.prompt_format=deepseek-tactic", "--set", "search.num_proofs=1", "--set",
                   "search.min_proofs=1", "--set", "search.timeout_s=30", "--set", "lean.workers=1", *lean)
    assert done.returncode == 0, done.stdout + done.stderr
    return index, shard


def positives(uri: str, store: Store) -> dict[str, int]:
    """Per theorem, its rows labelled positive, on a proof path or a proof's end."""
    table = read_edges(uri, ["theorem", "label", "on_proof_path", "proof_complete"], store=store).to_pydict()
    counted: dict[str, int] = {}
    for name, label, path, complete in zip(table["theorem"], table["label"], table["on_proof_path"],
                                           table["proof_complete"], strict=True):
        counted[name] = counted.get(name, 0) + (label == "positive" or path or complete)
    return counted


@pytest.mark.slow
def test_a_proof_comparator_refuses_is_no_positive_in_the_merged_trajectories(tmp_path: Path, store: Store) -> None:
    lean = ("--set", f"lean.command={json.dumps(double_argv())}")
    index, shard = search(tmp_path, lean)
    assert positives(f"file://{shard}", store)["false_claim"] > 0  # the double's Lean let `done` close 1 = 2
    plain = tmp_path / "plain"
    done = cli("merge-trajectories", str(shard), "--output", str(plain), *lean)
    assert done.returncode == 0, done.stderr
    assert {r.name for r in read_results(f"file://{plain}", store=store) if r.proved} == {
        "honest_sum", "false_claim", "putnam_judged"}  # burnqed as the judge: copied as the search verified them

    merged = tmp_path / "merged"
    done = cli("merge-trajectories", str(shard), "--theorems", str(index), "--output", str(merged), *lean, *JUDGE)
    assert done.returncode == SOUNDNESS_ALARM_EXIT, done.stdout + done.stderr
    assert ALARM in done.stdout
    results = {r.name: r for r in read_results(f"file://{merged}", store=store)}
    refused = results["false_claim"]
    assert (refused.proved, refused.failure_reason, refused.proof, refused.tactics) == (
        False, "judge_refused", None, [])
    assert refused.detail == "comparator refused it (run): Child exited with 1"
    assert results["honest_sum"].proved and results["putnam_judged"].proved
    counted = positives(f"file://{merged}", store)
    assert counted["false_claim"] == 0 and counted["honest_sum"] > 0 and counted["putnam_judged"] > 0
    marker = read_marker(f"file://{merged}", store=store)
    assert marker is not None and marker.proved == 2
    judged = marker.extra["judge"]
    assert isinstance(judged, dict)
    assert {k: judged[k] for k in ("judge", "judged", "refused", "alarms", "not_judged")} == {
        "judge": "comparator", "judged": 3, "refused": 1, "alarms": [ALARM], "not_judged": []}
    assert summarize(f"file://{merged}", store=store).soundness_alarms == [ALARM]
    assert ALARM in render_summary(summarize(f"file://{merged}", store=store))
    assert summarize(f"file://{plain}", store=store).soundness_alarms == []
    # the local runner reads the judged merge as the command recorded it (its judge among its settings); the merge
    # burnqed judged is never taken for a judged one
    argv = ["merge-trajectories", str(shard), "--theorems", str(index), "--output", str(merged), *lean, *JUDGE]
    configured = [*lean, *JUDGE][1::2]  # the --sets the stage's process runs with

    def load(sets: Sequence[str]) -> Config:
        return load_config(sets=[*sets, *configured])

    asked = MergeRequest(inputs=(str(shard),), theorems=str(index), output=str(merged))
    verdict = stage_verdict(asked, load, store)
    assert (verdict.difference, verdict.recorded) == (None, True)
    verdict = stage_verdict(MergeRequest(inputs=(str(shard),), theorems=str(index), output=str(plain)), load, store)
    assert verdict.difference == "judge was not recorded (the output predates it: its default 'burnqed' then), now " \
        "'comparator'"
    # the finished merge reused: its alarm said again, the same exit
    again = cli(*argv)
    assert again.returncode == SOUNDNESS_ALARM_EXIT and "reusing" in again.stdout and ALARM in again.stdout

    # a merge interrupted without the judge, resumed with it: its copied part with the refused proof is refused
    interrupted = tmp_path / "interrupted"
    shutil.copytree(plain, interrupted)
    (interrupted / "_SUCCESS.json").unlink()
    resumed = cli("merge-trajectories", str(shard), "--theorems", str(index), "--output", str(interrupted), *lean,
                  *JUDGE)
    assert resumed.returncode == 2 and resumed.stderr.strip().splitlines()[-1] == (
        f"error: merge output {interrupted} holds part-000000.json, copied by an earlier merge without comparator's "
        "verdict, with a proof comparator refuses: merge again with --force"), resumed.stderr
    forced = cli("merge-trajectories", str(shard), "--theorems", str(index), "--output", str(interrupted), *lean,
                 *JUDGE, "--force")
    assert forced.returncode == SOUNDNESS_ALARM_EXIT and positives(f"file://{interrupted}", store)["false_claim"] == 0

    # a comparator without definition holes: refused before anything is copied, in one line
    old = ("--set", "lean.toolchain=leanprover/lean4:v4.29.1")
    holes = cli("merge-trajectories", str(shard), "--theorems", str(index), "--output", str(tmp_path / "old"),
                *lean, *JUDGE, *old)
    assert holes.returncode == 2 and f"error: {HOLES}" in holes.stderr, holes.stderr
    assert not (tmp_path / "old" / "_SUCCESS.json").exists()

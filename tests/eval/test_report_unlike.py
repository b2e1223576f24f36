"""The report compares only like with like: evals on other theorems (by name, not count), with other pass_n, Lean
backends, modes, largest budgets or time limits are shown side by side with no gain, no gate and no new proofs,
and say why, in the report and on stdout; a gain gate that cannot be measured leaves no decision (run-all stops).
And a report read while an eval rewrites its result takes every figure of one eval from one version of it."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from burnqed.config import PipelineConfig
from burnqed.eval.pass_at import build_eval_result
from burnqed.eval.result import EvalResult, write_eval_result
from burnqed.layout import Layout
from burnqed.records.results import FailureReason, TheoremResult
from burnqed.report.build import build_report
from burnqed.report.markdown import render_markdown
from burnqed.storage import Store
from tests.processes import cli

BENCH = [f"thm_{k}" for k in range(10)]
OTHER = [f"other_{k}" for k in range(6)]


def eval_result(names: list[str], solved: int, *, budgets: tuple[int, ...] = (10, 50), pass_n: int = 1,
                iteration: int = 0, ebm: str | None = None) -> EvalResult:
    """An eval of `names` proving the first `solved` of them at 3 expansions in every pass."""
    attempts = [[TheoremResult(name=name, proved=True, budget_at_proof=3, nodes_expanded=3, time_s=1.0, proof="p")
                 if k < solved else
                 TheoremResult(name=name, proved=False, failure_reason=FailureReason.EXHAUSTED, nodes_expanded=2,
                               time_s=1.0)
                 for k, name in enumerate(names)] for _ in range(pass_n)]
    return build_eval_result(attempts, list(budgets), benchmark="bench", model="tiny", ebm=ebm, lean_backend="replay",
                             iteration=iteration, config_digest="0" * 16, git_commit=None, theorem_names=names,
                             timestamp=datetime(2026, 1, 1, tzinfo=UTC), seed=0)


def publish(uri: str, result: EvalResult, store: Store) -> None:
    write_eval_result(result, uri, store=store)


def test_like_evals_keep_their_gains_and_the_decision(tmp_path: Path, store: Store) -> None:
    at = Layout(f"file://{tmp_path}")
    publish(at.eval_result(0), eval_result(BENCH, 2), store)
    publish(at.eval_result(1), eval_result(BENCH, 5, budgets=(20, 50), iteration=1), store)  # same largest budget
    report = build_report(at.root, 1, PipelineConfig(gate_min_rate=0.1, gate_min_gain=0.0), store=store)
    assert [(r.step, r.gain is not None and round(100 * r.gain, 1), r.unlike) for r in report.learning] == [
        ("iteration 0", False, None), ("iteration 1", 30.0, None)]
    assert (report.not_compared, report.decided, report.go) == ([], True, True)
    assert report.gates[1].detail.startswith("iteration 1 vs 0: 3 theorems gained and none lost (2/10 → 5/10; "
                                             "difference +30.0 pts")


@pytest.mark.parametrize(("iteration_1", "reason"), [
    (eval_result(OTHER, 5, iteration=1), "different theorem sets (iteration 0: 10, iteration 1: 6 theorems; 0 in "
                                         "common)"),
    (eval_result([f"renamed_{k}" for k in range(10)], 5, iteration=1),
     "different theorem sets (iteration 0: 10, iteration 1: 10 theorems; 0 in common)"),
    (eval_result(BENCH, 5, budgets=(10, 100), iteration=1),
     "different largest budgets (iteration 0: 50 expansions, iteration 1: 100 expansions)"),
    (eval_result(BENCH, 5, pass_n=4, iteration=1), "different pass_n (iteration 0: 1, iteration 1: 4)"),
], ids=["other-theorems", "same-count-other-names", "other-budget", "other-pass-n"])
def test_unlike_evals_show_no_gain_no_new_proof_and_no_decision(iteration_1: EvalResult, reason: str,
                                                                tmp_path: Path, store: Store) -> None:
    at = Layout(f"file://{tmp_path}")
    publish(at.eval_base(), eval_result(BENCH, 1), store)
    publish(at.eval_result(0), eval_result(BENCH, 2), store)
    publish(at.eval_result(1), iteration_1, store)
    report = build_report(at.root, 1, PipelineConfig(gate_min_rate=0.05), store=store)
    last = [row for row in report.learning if row.step == "iteration 1"]
    assert [(row.gain, row.unlike) for row in last] == [(None, reason)]
    gain = report.gates[1]
    assert (gain.name, gain.passed, gain.blocking, gain.measured) == ("gain", False, True, False)
    arms = reason.replace("iteration 0", "iteration 0 llm").replace("iteration 1", "iteration 1 llm")
    assert gain.detail == (f"not measured: the evals of iterations 0 and 1 are not the same measurement ({arms}); "
                           "evaluate both on the same theorems with the same budgets and settings")
    assert (report.decided, report.go) == (False, False)
    assert not any(proof.new for proof in report.proofs if proof.iteration == 1)
    assert report.not_compared[:1] == [f"iteration 1 vs iteration 0: {reason}"]
    markdown = render_markdown(report)
    assert f"- iteration 1 vs iteration 0: {reason}" in markdown.split("## Solve rate")[0]
    row = last[0]
    assert (f"| all | 1/10 (10.0%, 1.8–40.4%) | 2/10 (20.0%, 5.7–51.0%) (+10.0) | {row.text} (not compared) |"
            in markdown)
    assert f"not compared with the step before ({reason})" in markdown
    assert "- **NOT MEASURED** gain: not measured:" in markdown
    assert markdown.rstrip().endswith("Decision: **none**: the gain gate could not be measured (`run-all` stops here)")


def test_the_case_of_the_issue_a_base_eval_on_71_theorems_and_an_eval_on_6_others(tmp_path: Path,
                                                                                  store: Store) -> None:
    """It printed a +37.3-point gain: now no gain, the reason, the baseline gate on the base eval, and no decision:
    iteration 0's gain over the base cannot be measured."""
    at = Layout(f"file://{tmp_path}")
    publish(at.eval_base(), eval_result([f"b_{k}" for k in range(71)], 9), store)
    publish(at.eval_result(0), eval_result(OTHER, 3), store)
    report = build_report(at.root, 0, PipelineConfig(gate_min_rate=0.1), store=store)
    assert [(r.step, r.solved, r.total, r.gain) for r in report.learning] == [("base", 9, 71, None),
                                                                             ("iteration 0", 3, 6, None)]
    assert report.not_compared == [
        "iteration 0 vs base: different theorem sets (base: 71, iteration 0: 6 theorems; 0 in common)",
        "gate gain: not measured: the base eval and iteration 0's are not the same measurement (different theorem sets "
        "(base: 71, iteration 0 llm: 6 theorems; 0 in common)); evaluate both on the same theorems with the same "
        "budgets and settings"]
    assert [(g.name, g.passed, g.measured) for g in report.gates] == [("baseline", True, True), ("gain", False, False)]
    assert (report.decided, report.go) == (False, False)


def test_the_ebm_gate_is_not_measured_across_unlike_arms(tmp_path: Path, store: Store) -> None:
    at = Layout(f"file://{tmp_path}")
    publish(at.eval_result(0), eval_result(BENCH, 2), store)
    publish(at.eval_result(1), eval_result(BENCH, 5, iteration=1, ebm="ebm"), store)
    publish(at.eval_result(1, with_ebm=False), eval_result(OTHER, 1, iteration=1), store)
    report = build_report(at.root, 1, PipelineConfig(gate_min_rate=0.1, gate_min_gain=0.0, start="best"),
                          store=store)
    gates = {gate.name: gate for gate in report.gates}
    ebm = gates["ebm-helps"]
    assert (ebm.name, ebm.passed, ebm.blocking, ebm.measured) == ("ebm-helps", False, False, False)
    assert (gates["policy"].passed, gates["policy"].measured) == (False, False)  # nor the policy's against iter 0
    assert ebm.detail == ("not measured: LLM+EBM and LLM only are not the same measurement (different theorem sets "
                          "(iteration 1 llm: 6, iteration 1 llm+ebm: 10 theorems; 0 in common))")
    assert report.decided and report.go  # a warning gate: the gain gate decides


@pytest.mark.slow  # one command
def test_report_says_why_on_stdout_and_in_report_json(tmp_path: Path, store: Store) -> None:
    at = Layout(f"file://{tmp_path}/runs")
    publish(at.eval_result(0), eval_result(BENCH, 2), store)
    publish(at.eval_result(1), eval_result(OTHER, 5, iteration=1), store)
    out = tmp_path / "report"
    done = cli("report", "--root", str(tmp_path / "runs"), "--iter", "1", "--output", str(out))
    assert done.returncode == 0, done.stderr
    reason = "different theorem sets (iteration 0: 10, iteration 1: 6 theorems; 0 in common)"
    assert f"not compared: iteration 1 vs iteration 0: {reason}" in done.stdout
    assert f"  iteration 1 vs iteration 0: not compared ({reason})" in done.stdout
    assert done.stdout.endswith("  decision: none: the gain gate could not be measured (`run-all` stops here)\n")
    assert "## " not in done.stdout  # the headline, not report.md
    saved = json.loads((out / "report.json").read_text())
    assert saved["not_compared"][0] == f"iteration 1 vs iteration 0: {reason}"
    assert saved["learning"][1]["gain"] is None
    assert sorted(saved["inputs"]) == [at.eval_result(0), at.eval_result(1)]


# ------------------------------------------------------------------------------ a concurrent writer

WRITER = textwrap.dedent("""
    import os, sys, time
    target, first, second, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    versions = [open(first, "rb").read(), open(second, "rb").read()]
    deadline, k = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        tmp = f"{target}.{k}.tmp"
        with open(tmp, "wb") as handle:
            handle.write(versions[k % 2])
        os.replace(tmp, target)  # as the eval publishes its result: whole, by rename
        k += 1
    print(k)
""")


@pytest.mark.slow  # two processes for a few seconds
def test_a_report_read_while_an_eval_rewrites_its_result_takes_each_eval_from_one_version(
    tmp_path: Path, store: Store
) -> None:
    """A real writer process republishes iteration 1's eval.json over and over, alternating two versions (5 and 8
    of 10 solved); every report built meanwhile shows one version in all its figures (solve rates, learning row,
    mode rows, curves, costs, proofs) and records the digest of the version it read."""
    at = Layout(f"file://{tmp_path}/runs")
    publish(at.eval_result(0), eval_result(BENCH, 2), store)
    versions = {}
    for solved in (5, 8):
        path = tmp_path / f"v{solved}.json"
        publish(str(path), eval_result(BENCH, solved, iteration=1), store)
        versions["sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()] = solved
    target = Path(at.eval_result(1).removeprefix("file://"))
    publish(str(target), eval_result(BENCH, 5, iteration=1), store)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(target), str(tmp_path / "v5.json"),
                               str(tmp_path / "v8.json"), "4"], stdout=subprocess.PIPE, text=True)
    seen = set()
    try:
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            report = build_report(at.root, 1, PipelineConfig(), store=store)
            solved = versions[report.inputs[at.eval_result(1)]]
            seen.add(solved)
            figures = {
                *(row.solved for row in report.rows if row.iteration == 1),
                *(row.solved for row in report.learning if row.step == "iteration 1"),
                *(row.solved for row in report.modes if row.iteration == 1),
                max(point.solved for point in report.curves if point.iteration == 1),
                len([proof for proof in report.proofs if proof.iteration == 1]),
            }
            assert figures == {solved}, (solved, figures)
    finally:
        writes = int(writer.communicate(timeout=30)[0])
    assert writes > 100 and seen == {5, 8}  # the writer really rewrote it meanwhile, and both versions were read

"""Odd numbers and odd theorem indexes from the command line (issue 49, item 2): each is one line on stderr and exit
2 before any work, with nothing written, or a documented normalisation (budgets sorted, repeats dropped; a shard
with no theorem finishes empty). Budgets, pass@N and shards are parsed in this process (`burnqed.cli.app`); a bad
index runs through real `python -m burnqed.cli` processes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from burnqed.config import load_config
from burnqed.lean.inprocess import InProcessReplayPool
from burnqed.records.theorem import NAME_RULE, Theorem
from burnqed.runner.plan import build_iteration
from burnqed.stages.search import JobSettings, search_job
from burnqed.storage import Store
from burnqed.trajectory.reader import committed_parts, is_complete
from leankit.corpus import load_corpus
from minilean.replay.replay_server import ReplayServer
from tests.doubles.policy_double import ScriptedPolicy, corpus_oracle
from tests.processes import cli

BUDGET_RANGE = "is out of range; a budget is 1 to 1,000,000,000 (expansions or proofs), e.g. 100,300,600"
NOT_WHOLE = "is not a whole number; give comma-separated budgets, e.g. 100,300,600"
SHARD_SHAPE = "expected I/N, two whole numbers, e.g. 0/4"


def invoke(*args: str) -> tuple[int, str, list[str]]:
    """`burnqed ARGS` in this process: exit code, stdout and stderr lines."""
    done = cli(*args, env={"BURNQED_HOME": None})
    return done.returncode, done.stdout, done.stderr.strip().splitlines()


@pytest.mark.parametrize(("args", "line"), [
    (["eval", "--budgets", "0"], f"--budgets '0': 0 {BUDGET_RANGE}"),
    (["eval", "--budgets", "100,-5"], f"--budgets '100,-5': -5 {BUDGET_RANGE}"),
    (["eval", "--budgets", "1000000001"], f"--budgets '1000000001': 1000000001 {BUDGET_RANGE}"),
    (["eval", "--budgets", "99999999999999999999999"], f"--budgets '99999999999999999999999': "
                                                       f"99999999999999999999999 {BUDGET_RANGE}"),
    (["eval", "--budgets", "1.5"], f"--budgets '1.5': '1.5' {NOT_WHOLE}"),
    (["eval", "--budgets", "1e3"], f"--budgets '1e3': '1e3' {NOT_WHOLE}"),
    (["eval", "--budgets", "ten"], f"--budgets 'ten': 'ten' {NOT_WHOLE}"),
    (["eval", "--budgets", "+5"], f"--budgets '+5': '+5' {NOT_WHOLE}"),
    (["eval", "--budgets", "١٠"], f"--budgets '١٠': '١٠' {NOT_WHOLE}"),
    (["eval", "--budgets", "10,,50"], "--budgets '10,,50': a budget is missing; give comma-separated budgets, e.g. "
                                      "100,300,600"),
    (["eval", "--budgets", ""], "--budgets '': a budget is missing; give comma-separated budgets, e.g. 100,300,600"),
    (["eval", "--pass-n", "0"], "burnqed eval: Invalid value for '--pass-n': Input should be greater than or equal "
                                "to 1 (see burnqed eval -h)"),
    (["eval", "--pass-n", "-3"], "burnqed eval: Invalid value for '--pass-n': Input should be greater than or equal "
                                 "to 1 (see burnqed eval -h)"),
    (["eval", "--pass-n", "10001"], "burnqed eval: Invalid value for '--pass-n': Input should be less than or equal "
                                    "to 10000 (see burnqed eval -h)"),
    (["eval", "--pass-n", "2.5"], "burnqed eval: Invalid value for '--pass-n': Input should be a valid integer, "
                                  "unable to parse string as an integer (see burnqed eval -h)"),
    (["search", "--iter", "2147483648"], "burnqed search: Invalid value for '--iter': 2147483648 is above "
     "2,147,483,647, the largest iteration a trajectory row holds (see burnqed search -h)"),
    (["search", "--shard", "3/2"], "--shard '3/2': I counts from 0 to N - 1 (1 here), e.g. 0/4"),
    (["search", "--shard", "0/0"], "--shard '0/0': N is the number of shards, 1 to 10,000"),
    (["search", "--shard", "0/10001"], "--shard '0/10001': N is the number of shards, 1 to 10,000"),
    (["search", "--shard", "-1/2"], f"--shard '-1/2': {SHARD_SHAPE}"),
    (["search", "--shard", "a/b"], f"--shard 'a/b': {SHARD_SHAPE}"),
    (["search", "--shard", "1_0/20"], f"--shard '1_0/20': {SHARD_SHAPE}"),
    (["eval", "--set", "pipeline.eval_budgets=[0, 10]"], "invalid configuration: pipeline.eval_budgets.0: Input "
     "should be greater than or equal to 1; got 0 (from --set pipeline.eval_budgets)"),
    (["eval", "--set", "pipeline.eval_budgets=[]"], "invalid configuration: pipeline.eval_budgets: List should have "
     "at least 1 item after validation, not 0; got [] (from --set pipeline.eval_budgets)"),
    (["eval", "--set", "pipeline.eval_budgets=[2.5]"], "invalid configuration: pipeline.eval_budgets.0: Input should "
     "be a valid integer, got a number with a fractional part; got 2.5 (from --set pipeline.eval_budgets)"),
    (["eval", "--set", "pipeline.eval_proof_budgets=[2000000000]"], "invalid configuration: "
     "pipeline.eval_proof_budgets.0: Input should be less than or equal to 1000000000; got 2000000000 (from --set "
     "pipeline.eval_proof_budgets)"),
    (["eval", "--set", "pipeline.eval_pass_n=0"], "invalid configuration: pipeline.eval_pass_n: Input should be "
     "greater than or equal to 1; got 0 (from --set pipeline.eval_pass_n)"),
    (["eval", "--set", "pipeline.search_shards=-1"], "invalid configuration: pipeline.search_shards: Input should be "
     "greater than or equal to 1; got -1 (from --set pipeline.search_shards)"),
    (["eval", "--set", "pipeline.search_shards=10001"], "invalid configuration: pipeline.search_shards: Input should "
     "be less than or equal to 10000; got 10001 (from --set pipeline.search_shards)"),
    (["eval", "--set", "search.max_nodes=1e30"], "invalid configuration: search.max_nodes: Unable to parse input "
     "string as an integer, exceeded maximum size; got 1e+30 (from --set search.max_nodes)"),
    (["eval", "--set", "search.max_proofs=1000000001"], "invalid configuration: search.max_proofs: Input should be "
     "less than or equal to 1000000000; got 1000000001 (from --set search.max_proofs)"),
])
def test_an_odd_number_is_one_line_exit_2_before_any_work(tmp_path: Path, args: list[str], line: str) -> None:
    output = tmp_path / "out"
    code, stdout, stderr = invoke(*args, "--output", str(output))
    assert (code, stdout, stderr) == (2, "", [f"error: {line}"])
    assert not output.exists() and list(tmp_path.iterdir()) == []


def test_budgets_are_sorted_and_repeats_dropped_on_the_command_line_and_in_the_configuration() -> None:
    from burnqed.eval.identity import parse_budgets

    assert parse_budgets("600, 100,300,100") == [100, 300, 600]
    cfg = load_config(sets=["pipeline.eval_budgets=[50, 10, 10]", "pipeline.eval_proof_budgets=[8, 2, 8]"])
    assert (cfg.pipeline.eval_budgets, cfg.pipeline.eval_proof_budgets) == ([10, 50], [2, 8])
    stage = next(s for s in build_iteration(cfg.pipeline, "runs", 0).stages if s.name == "eval")
    assert stage.argv[stage.argv.index("--budgets") + 1] == "10,50"


def test_a_shard_with_no_theorem_finishes_empty(tmp_path: Path, store: Store) -> None:
    corpus = load_corpus()
    theorems = [Theorem.from_recorded(spec) for spec in corpus.theorems[:3]]
    cfg = load_config()
    output = tmp_path / "shard-5"

    async def run() -> int:
        pool = InProcessReplayPool(lambda: ReplayServer(corpus), size=1)
        report = await search_job(theorems, str(output), pool=pool, pool_size=1,
                                  policy=ScriptedPolicy(corpus_oracle(corpus)),
                                  settings=JobSettings.from_config(cfg.search, cfg.policy, cfg.lean), shard=(5, 10),
                                  store=store)
        return report.selected

    assert asyncio.run(run()) == 0
    # Merge-ready: complete, no parts; `merge-trajectories` takes it beside the shards that searched something.
    assert is_complete(str(output), store=store) and committed_parts(str(output), store=store) == []


@pytest.mark.slow
@pytest.mark.parametrize(("command", "entry", "problem"), [
    ("search", {"name": "numina-0001", "statement": "1 = 1"}, "theorems.1.name: Value error, theorem name "
     f"'numina-0001' contains '-', which Lean does not take in a name: {NAME_RULE}"),
    ("eval", {"name": "a", "statement": "1 = 1"}, "theorems: Value error, duplicate theorem name 'a': theorems.0 and "
     "theorems.1 both declare it (names are unique within an index)"),
    ("search", {"name": "b", "statement": "1 = 1\x00"}, "theorems.1: Value error, statement contains a NUL byte (\\x00 "
     "at character 5)"),
])
def test_an_index_lean_cannot_run_is_one_line_exit_2_before_any_work(tmp_path: Path, command: str,
                                                                      entry: dict[str, str], problem: str) -> None:
    index = tmp_path / "index.json"
    index.write_text(json.dumps({"name": "odd", "theorems": [{"name": "a", "statement": "p"}, entry]}),
                     encoding="utf-8")
    outputs = {"search": ["--output", str(tmp_path / "search")],
               "eval": ["--output", str(tmp_path / "eval.json"), "--trajectories-out", str(tmp_path / "t")]}
    done = cli(command, *outputs[command], "--theorems", str(index), env={"BURNQED_HOME": str(tmp_path / "home")})
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [f"error: theorem index {index}: {problem}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.json"]

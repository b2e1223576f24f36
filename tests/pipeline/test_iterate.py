"""`burnqed iterate` end to end on the embedded defaults (replay Lean server, tiny model) with a small generated
world in place of the default one (tests/pipeline/iteration.py): iteration 0 stopped by SIGTERM mid-search (one
line, 143, no process left, committed parts kept), resumed and SIGKILLed mid-search (its stages follow it), resumed
to the end; a re-run that does no work; iteration 1 with an EBM and the report of both iterations. Iteration 0
redone by --force on S3 is tests/pipeline/test_iterate_s3.py, a joint iteration 1 tests/sft/test_joint_iterate.py, the
run root's lease tests/pipeline/test_iterate_signals.py."""

from __future__ import annotations

import json
import math
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from burnqed.storage import Store
from burnqed.trajectory.reader import read_results
from tests.doubles.line_servers import lean_in_process
from tests.pipeline.iteration import RECORD, Interruptions, iterate_env, iterate_in_process
from tests.processes import PRINTED_PROGRAM, cli, forked_stages

# Whole iterations as subprocesses: minutes on a shared 2-core machine, beyond the default per-test timeout.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

# Iteration 1's SFT (from the base, pipeline.start's default) and EBM as small as what is asserted of them needs (a
# model trained on, an EBM search and eval score with): a tenth of an epoch in place of sft.later_epochs' 1, an EBM of
# 60 steps and one hidden layer of 32; its search in one shard (iteration 0's two are the sharded run's test) of 8
# expansions a theorem (iteration 0's 16): what is read of it is that it scored children with the EBM, which its
# first expansion of a theorem does.
REPO = Path(__file__).resolve().parents[2]  # where a user of a checkout types the printed commands
ITERATION_1 = {"BURNQED_SFT__LATER_EPOCHS": "0.1", "BURNQED_EBM__STEPS": "60", "BURNQED_EBM__HIDDEN_DIMS": "[32]",
               "BURNQED_PIPELINE__SEARCH_SHARDS": "1", "BURNQED_SEARCH__MAX_NODES": "8"}


@pytest.fixture(scope="module")
def stops(iteration_0: Path) -> Interruptions:
    return Interruptions.load(iteration_0 / RECORD)


def test_sigterm_mid_search_stops_iterate_in_one_line_and_keeps_the_committed_parts(iteration_0: Path,
                                                                                    stops: Interruptions) -> None:
    root = iteration_0 / "run"
    assert any("search" in line for line in stops.sigterm_children)  # the search stage was running
    assert stops.sigterm_orphans == []
    assert stops.sigterm_code == 128 + signal.SIGTERM
    errors = [line for line in stops.sigterm_stderr.splitlines() if line.startswith("error:")]
    # the stage shards running side by side when the signal came (--jobs: one per core), search[0] among them
    assert len(errors) == 1 and re.fullmatch(
        r"error: burnqed iterate \(stages? (\S+, )*search\[0\](, \S+)*\) stopped by SIGTERM; finished "
        rf"stages and committed search parts under file://{re.escape(str(root))} are kept: continue with "
        rf"`{PRINTED_PROGRAM} iterate --iter 0 --root {re.escape(str(root))}`", errors[0]), stops.sigterm_stderr[-3000:]
    assert "Traceback" not in stops.sigterm_stderr
    # committed parts kept, nothing published as finished, no lease left
    assert "search/shard-0/part-000000.json" in stops.kept_after_sigterm and not stops.sigterm_shard0_done
    assert stops.lease_left == []
    # every part committed before the signal is still there after the resumes
    assert set(stops.kept_after_sigterm) <= set(stops.parts_after_sigkill)


def test_sigkill_mid_search_takes_the_stages_with_it_and_publishes_nothing(stops: Interruptions) -> None:
    assert stops.killed_part not in stops.kept_after_sigterm  # the resumed run searched on before the kill
    assert stops.sigkill_orphans == [], "left behind by a SIGKILLed iterate"
    assert not stops.killed_shard_done  # killed mid-search


def test_the_stopped_iteration_finishes_on_rerun_without_searching_anything_twice(iteration_0: Path,
                                                                                   stops: Interruptions,
                                                                                   store: Store) -> None:
    assert stops.final_code == 0, stops.final_stderr[-3000:]
    # the killed search was resumed, not taken for done (stages run side by side, their lines prefixed)
    assert "search: done already, skipped" not in stops.final_stderr
    assert "search: finished in" in stops.final_stderr
    it0 = iteration_0 / "run" / "iter_0"
    names = [m.name for m in it0.glob("search/shard-0/part-*.json")]
    assert len(names) >= 2
    from burnqed.trajectory.reader import read_marker

    for shard in ("search/shard-0", "search/shard-1", "noise-search/shard-0", "noise-search/shard-1"):
        if (it0 / shard).exists():
            results = read_results(f"file://{it0}/{shard}", store=store)
            assert len({r.name for r in results}) == len(results), shard  # resumed: nothing searched twice
    index = json.loads((it0 / "data" / "theorems.json").read_text())
    searched = [t["name"] for t in index["theorems"] if t["split"] in ("train", "pool")]
    assert sum(1 for t in index["theorems"] if t["split"] == "pool") == 7  # the world's pool statements
    merged = read_marker(f"file://{it0}/trajectories", store=store)
    assert merged is not None and merged.theorems == 2 * len(searched)  # search + noise pass, each theorem once
    for stage in ("data", "sft", "export", "trajectories", "report"):
        assert (it0 / stage / "_SUCCESS.json").exists(), stage
    result = json.loads((it0 / "eval" / "eval.json").read_text())
    assert result["ebm"] is None and [b["budget"] for b in result["budgets"]] == [5, 10]
    assert {g["group"] for g in result["groups"]} == {"burnqed-world", "burnqed-bundled"}
    assert result["seed"] == 0 and result["settings"]["num_candidates"] == 8
    base = json.loads((it0 / "eval-base" / "eval.json").read_text())
    assert base["model"].endswith("tiny-v3") and base["total"] == result["total"] == 15 + 5


def test_rerunning_a_finished_iteration_does_no_work(iteration_0: Path, iterate_home: Path) -> None:
    root = iteration_0 / "run"
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}
    again = iterate_in_process(str(root), 0, iterate_env(iterate_home))  # no stage starts: in this process
    assert again.returncode == 0, again.stderr[-2000:]
    assert "nothing to do, all stages finished" in again.stdout
    assert again.stderr.count("done already, skipped") == 9
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()} == before


def test_plan_over_the_finished_iteration_with_another_world_says_what_iterate_does(
        iteration_0: Path, iterate_home: Path) -> None:
    """The audit's case: after iteration 0, `plan --set data.world_seed=1` showed prepare-data `done` while `iterate`
    with the same --set refused it. The world seed defines the run root's experiment (its data and benchmark): plan
    and iterate refuse it alike, in one line before any work, naming the difference; nothing under the run changes.
    (plan's `diff` of a stage finished with other inputs: tests/pipeline/test_plan_verdicts.py.)"""
    from tests.processes import cli

    root = iteration_0 / "run"
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}
    env, changed = {**iterate_env(iterate_home), "BURNQED_CONFIG": None}, ("--set", "data.world_seed=1")
    planned = cli("plan", "--iter", "0", "--root", str(root), *changed, env=env)
    refused = iterate_in_process(str(root), 0, iterate_env(iterate_home), *changed)
    assert (planned.returncode, refused.returncode, planned.stdout) == (2, 2, ""), planned.stderr + refused.stderr
    assert planned.stderr.replace("`burnqed plan ", "`burnqed iterate ") == refused.stderr
    assert refused.stderr.startswith(f"error: {root} holds one experiment, and this command changes it: "
                                     "data.world_seed: 0 → 1; leave these settings out (the root's are taken) or give "
                                     "the root's (--set data.world_seed=0), or start the new experiment under a new "
                                     f"root: `burnqed iterate --iter 0 --set data.world_seed=1 --root {root}-2`")
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()} == before


def test_iteration_1_trains_and_uses_an_ebm_and_reports_both_iterations(iteration_0: Path, iterate_home: Path,
                                                                        tmp_path: Path, store: Store) -> None:
    """Iteration 1 as iteration 0's `next:` line names it (printed by `python -m burnqed iterate` over the finished
    iteration 0, which does nothing), its arguments run on a copy of the run (the shared one stays as it is; in this
    process, its stages forks), with the benchmark iteration 0 was given (by env) left out: it is the run root's (its
    experiment.json). The `show` the line names runs in a shell as printed."""
    shared, run = iteration_0 / "run", tmp_path / "run"
    shutil.copytree(shared, run, symlinks=True)
    again = subprocess.run([sys.executable, "-m", "burnqed", "iterate", "--root", str(shared)], capture_output=True,
                           text=True, env=iterate_env(iterate_home), cwd=REPO, timeout=600, check=False)
    assert again.returncode == 0, again.stderr[-3000:]
    printed = re.findall(r"`([^`]+)`", again.stdout.splitlines()[-1])
    assert again.stdout.splitlines()[-1].startswith("next: ") and len(printed) == 2, again.stdout[-2000:]
    following, show = (shlex.split(command) for command in printed)
    program = following[:following.index("iterate")]
    assert program == show[:len(program)] and program[1:] == ["-m", "burnqed"]
    assert Path(REPO, program[0]).resolve() == Path(sys.executable).resolve()
    arguments = following[len(program):]
    assert arguments[:5] == ["iterate", "--iter", "1", "--root", str(shared)]
    drawn = subprocess.run(["bash", "-c", printed[1]], capture_output=True, text=True, cwd=REPO, timeout=300,
                           env=iterate_env(iterate_home), check=False)
    assert drawn.returncode == 0 and drawn.stdout.startswith(f"{show[len(program) + 1]}: "), drawn.stderr[-2000:]
    env = {**iterate_env(iterate_home, ITERATION_1), "BURNQED_PIPELINE__BENCHMARK": None}
    with forked_stages(), lean_in_process():
        done = cli(*arguments[:4], str(run), *arguments[5:], env={**env, "BURNQED_CONFIG": None})
    assert done.returncode == 0, done.stderr[-3000:]
    assert f'pipeline.benchmark="{iterate_home / "test.json"}"' in done.stderr  # the root's, said before any work
    it1 = run / "iter_1"
    assert (it1 / "ebm" / "_SUCCESS.json").exists()
    # the defaults' SFT: from the base, steps from the rows, the shortest proof of each theorem
    from burnqed.sft.manifests import read_sft_record

    sft = read_sft_record(it1 / "sft")
    assert sft.init is None and sft.steps == math.ceil(0.1 * sft.data_counts.rows / 4) and sft.data_counts.positives
    made = json.loads((it1 / "sft" / "_SUCCESS.json").read_text())["made_from"]["settings"]
    assert (made["sft.later_epochs"], made["sft.proofs_per_theorem"]) == (0.1, "shortest")
    with_ebm = json.loads((it1 / "eval" / "eval.json").read_text())
    without = json.loads((it1 / "eval" / "eval-noebm.json").read_text())
    first = json.loads((run / "iter_0" / "eval" / "eval.json").read_text())  # the same benchmark, from the root
    assert (with_ebm["benchmark"], with_ebm["total"]) == (first["benchmark"], 20)
    assert with_ebm["ebm"] == f"file://{it1}/ebm" and without["ebm"] is None
    from burnqed.trajectory.reader import read_edges

    energies = read_edges(f"file://{it1}/trajectories", columns=["energy"], store=store).column("energy").to_pylist()
    assert any(e is not None for e in energies)  # the search scored children with the EBM
    report = json.loads((it1 / "report" / "report.json").read_text())
    assert {(r["iteration"], r["arm"]) for r in report["rows"]} == {(0, "base"), (0, "llm"), (1, "llm"),
                                                                   (1, "llm+ebm")}
    learning = [(row["step"], row["group"]) for row in report["learning"]]
    assert learning == [(step, group) for step in ("base", "iteration 0", "iteration 1")
                        for group in ("all", "burnqed-bundled", "burnqed-world")]
    assert [g["name"] for g in report["gates"]] == ["baseline", "gain", "ebm-helps"]  # no policy gate: "base"
    markdown = (it1 / "report" / "report.md").read_text()
    assert "| 1 | llm+ebm |" in markdown and "| 0 | llm |" in markdown and "| 0 | base |" in markdown
    assert "## Learning" in markdown and "| burnqed-world |" in markdown
    assert "burnqed-world: base " in done.stdout  # the learning line after the iteration
    assert (it1 / "report" / "solve_rate.png").stat().st_size > 1000

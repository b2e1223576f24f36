"""A run root is one experiment (burnqed/runner/experiment.py; docs/pipeline.md, "One root, one experiment"): the
first `iterate` under a root records its base model, benchmark and settings; a later `iterate`, `run-all` or `plan`
given another model or benchmark is refused in one line before any work, naming each difference and the ways on, and
one given nothing continues with the root's. The two paths of issue 88, typed as a user types them, over a published
iteration 0 (tests/pipeline/test_gates.py `finished_iteration`): nothing runs."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from burnqed import storage
from burnqed.config import load_config
from burnqed.config.loader import given_keys
from burnqed.layout import Layout
from burnqed.runner.experiment import experiment_of, write_experiment
from burnqed.storage import Store
from tests.pipeline.test_gates import finished_iteration
from tests.processes import cli

pytestmark = pytest.mark.slow  # the whole command line in this process
BENCHMARK = Path(__file__).resolve().parents[1] / "fixtures" / "benchmark" / "MyBench.lean"


def files(root: Path) -> dict[Path, int]:
    return {path: path.stat().st_mtime_ns for path in root.rglob("*") if path.is_file()}


def test_another_model_after_iteration_0_is_refused_in_one_line_before_any_work(
        tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 88's first path: `iterate --iter 1 --root runs --model OTHER` after iteration 0 ran on the tiny model ran
    a whole iteration and reported the tiny model's baseline. Now iterate and plan refuse it, exit 2, one line."""
    monkeypatch.chdir(tmp_path)
    finished_iteration(storage.normalize(str(tmp_path / "runs")), go=True, store=store)
    first = cli("iterate", "--root", "runs")  # every stage finished: nothing runs, the experiment is recorded
    assert first.returncode == 0, first.stderr
    record = json.loads((tmp_path / "runs" / "experiment.json").read_text())
    assert (record["command"], record["given"], record["inputs"]) == ("burnqed iterate --root runs", [], {})
    assert (record["settings"]["sft.base_model"], record["settings"]["pipeline.benchmark"],
            record["settings"]["data.world_seed"]) == (None, None, 0)
    (tmp_path / "OTHER").mkdir()
    before = files(tmp_path / "runs")
    refused = cli("iterate", "--iter", "1", "--root", "runs", "--model", "OTHER")
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == (
        f"error: runs holds one experiment, and this command changes it: --model: the tiny embedded model → "
        f"{tmp_path}/OTHER; leave these settings out (the root's are taken), or start the new experiment under a new "
        "root: `burnqed iterate --iter 0 --model OTHER --root runs-2`\n")
    planned = cli("plan", "--iter", "1", "--root", "runs", "--model", "OTHER", "--set", "data.world_seed=1",
                  "--set", "sft.learning_rate=0.001")  # a setting of how iteration 1 trains is no difference
    assert (planned.returncode, planned.stdout) == (2, "")
    assert planned.stderr == (
        f"error: runs holds one experiment, and this command changes it: --model: the tiny embedded model → "
        f"{tmp_path}/OTHER; data.world_seed: 0 → 1; leave these settings out (the root's are taken) or give the "
        "root's (--set data.world_seed=0), or start the new experiment under a new root: `burnqed plan --iter 0 "
        "--model OTHER --set data.world_seed=1 --set sft.learning_rate=0.001 --root runs-2`\n")
    ran = cli("run-all", "--iters", "1-2", "--root", "runs", "--model", "OTHER")
    assert (ran.returncode, ran.stderr) == (2, refused.stderr.replace("iterate --iter 0", "run-all --iters 0-2"))
    reported = cli("report", "--root", "runs", "--set", "data.world_seed=1", "--force")  # a command reading the run
    assert (reported.returncode, reported.stderr) == (2, (
        "error: runs holds one experiment, and this command changes it: data.world_seed: 0 → 1; leave these settings "
        "out (the root's are taken) or give the root's (--set data.world_seed=0), or give --root a run root made with "
        "them\n"))
    assert files(tmp_path / "runs") == before and not (tmp_path / "runs" / "iter_1").exists()


def test_iter_1_alone_continues_with_the_model_and_benchmark_the_root_was_made_with(
        tmp_path: Path, store: Store, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 88's second path: `plan --iter 1 --root runs-mine` without the --model and --set pipeline.benchmark of
    iteration 0 planned the embedded benchmark on the tiny base. Now it takes both from the root, says so, and plans
    the evals of that benchmark; the benchmark edited in place is another benchmark, refused."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "M").symlink_to(tiny_model_dir, target_is_directory=True)
    shutil.copy(BENCHMARK, tmp_path / "B.lean")
    made = ['policy.model="M"', 'sft.base_model="M"', "pipeline.benchmark=B.lean"]  # --model M --set …=B.lean
    root = Layout(storage.normalize("runs-mine"))
    write_experiment(store, root, experiment_of(load_config(sets=made), given_keys(sets=made), store,
                                                command="burnqed iterate --root runs-mine --model M --set "
                                                        "pipeline.benchmark=B.lean"))
    planned = cli("plan", "--iter", "1", "--root", "runs-mine")
    assert planned.returncode == 0, planned.stderr
    assert planned.stderr.splitlines() == [
        f"runs-mine: its experiment's settings not given here are the root's ({root.experiment()}): "
        f'policy.model="{tmp_path}/M" sft.base_model="{tmp_path}/M" pipeline.benchmark="{tmp_path}/B.lean"']
    evals = [line for line in planned.stdout.splitlines() if line.startswith("todo  eval")]
    assert len(evals) == 2 and all(f" --theorems {tmp_path}/B.lean " in line for line in evals)
    # A stage's line runs as printed: the settings the run hands every stage through the environment before it
    [sft] = [line for line in planned.stdout.splitlines() if line.startswith("todo  sft ")]
    words = shlex.split(sft)[3:]  # past the state, the stage and its resource
    program = words.index("burnqed")
    assert f'BURNQED_SFT__BASE_MODEL="{tmp_path}/M"' in words[:program], sft
    assert words[program:program + 4] == ["burnqed", "sft", "--iter", "1"], sft
    base = cli("plan", "--iter", "0", "--root", "runs-mine")  # eval-base evaluates the root's base model
    assert base.returncode == 0, base.stderr
    [eval_base] = [line for line in base.stdout.splitlines() if line.startswith("todo  eval-base")]
    assert f" --theorems {tmp_path}/B.lean " in eval_base and f" --model {tmp_path}/M " in eval_base
    same = cli("plan", "--iter", "1", "--root", "runs-mine", "--model", "M", "--set", "pipeline.benchmark=B.lean")
    assert (same.returncode, same.stderr) == (0, "")  # the same flags: nothing to take
    (tmp_path / "M2").symlink_to(tiny_model_dir, target_is_directory=True)
    other = cli("plan", "--iter", "1", "--root", "runs-mine", "--model", "M2")  # another model: a new root keeps B
    new_root = shlex.join(["plan", "--iter", "0", "--model", "M2", "--root", "runs-mine-2", "--set",
                           f'pipeline.benchmark="{tmp_path}/B.lean"'])
    assert other.returncode == 2 and other.stderr.endswith(f"start the new experiment under a new root: `burnqed "
                                                           f"{new_root}`\n"), other.stderr
    (tmp_path / "B.lean").write_text((tmp_path / "B.lean").read_text() + "\n-- edited\n")
    edited = cli("plan", "--iter", "1", "--root", "runs-mine")
    assert edited.returncode == 2 and edited.stderr.startswith(
        f"error: runs-mine holds one experiment, and this command changes it: benchmark file://{tmp_path}/B.lean: it "
        "holds something else now (digest ")

"""`burnqed plan` says what `burnqed iterate` with the same options does with each stage: a finished stage made with
other inputs is `diff` with its first difference, and iterate's refusal is printed word for word (the local runner's
own verdict, `LocalRunner.shard_plans`); and plan refuses, before anything, what iterate refuses before its first
stage (docs/commands.md, "plan"). Nothing runs: the finished outputs are published by the test."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnqed.config import load_config
from burnqed.errors import ConfigError
from burnqed.layout import Layout
from burnqed.provenance import StageInputs
from burnqed.runner.local import LocalRunner
from burnqed.runner.plan import iteration_of
from burnqed.runner.reuse import export_inputs, prepare_inputs
from burnqed.storage import Store, normalize
from tests.processes import cli

pytestmark = pytest.mark.slow  # the whole command line in this process


def publish(store: Store, uri: str, stage: str, made_from: StageInputs) -> None:
    with store.staged_output(uri, stage, made_from=made_from) as folder:
        (folder / "file.txt").write_text("x")


@pytest.fixture
def finished_run(tmp_path: Path, store: Store) -> str:
    """A run root where iteration 0's prepare-data and export finished as the default settings make them (the export
    from an SFT output not there: what it records), and nothing else did."""
    root = str(tmp_path / "runs")
    at, cfg = Layout(f"file://{root}"), load_config()
    publish(store, at.data(), "prepare-data", prepare_inputs(cfg, store))
    publish(store, at.export(0), "export", export_inputs(cfg, store, sft=at.sft(0)))
    return root


def test_plan_shows_a_stage_finished_with_other_inputs_as_iterate_refuses_it(finished_run: str,
                                                                             store: Store) -> None:
    same = cli("plan", "--root", finished_run)
    assert same.returncode == 0, same.stderr
    assert same.stdout.splitlines()[0].startswith("done  prepare-data ")
    assert not any(line.startswith(("diff", "iterate refuses", " ")) for line in same.stdout.splitlines())

    changed = cli("plan", "--root", finished_run, "--set", "data.world_seed=1")
    assert changed.returncode == 0, changed.stderr
    lines = changed.stdout.splitlines()
    assert lines[0].startswith("diff  prepare-data ")
    assert lines[1] == "      finished with other inputs: data.world_seed was 0, now 1"
    export = next(k for k, line in enumerate(lines) if line.startswith(("done  export ", "diff  export ")))
    # made from what it records, but after SFT, which runs: iterate --force redoes it too
    assert lines[export].startswith("done  export ")
    assert lines[export + 1] == "      --force redoes it too: it comes after a stage that runs"
    # iterate's own refusal, from the same runner's verdict
    cfg = load_config(sets=["data.world_seed=1"])
    root_uri = f"file://{finished_run}"
    with pytest.raises(ConfigError) as refused:
        LocalRunner(sets=["data.world_seed=1", f"storage.root={root_uri}"], store=store,
                    echo=lambda _: None).run(iteration_of(cfg, root_uri, 0))
    assert lines[-1] == f"iterate refuses: {refused.value}"
    assert "data.world_seed was 0, now 1; run it as it was made, or --force redoes it" in lines[-1]


@pytest.mark.parametrize("given", ["--model", "--root"])
def test_plan_refuses_what_iterate_refuses_before_its_first_stage(tmp_path: Path, given: str) -> None:
    """A --model naming no folder, a --root that is a file: the same line and exit code as iterate's."""
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    args = (["--model", str(tmp_path / "nonexist"), "--root", str(tmp_path / "runs")] if given == "--model"
            else ["--root", str(a_file)])
    planned, iterated = (cli(command, *args) for command in ("plan", "iterate"))
    assert iterated.returncode == 2, iterated.stderr
    assert (planned.returncode, planned.stderr) == (iterated.returncode, iterated.stderr)
    assert planned.stdout == "" and not (tmp_path / "runs").exists()


def test_plan_says_iterate_refuses_an_iteration_whose_earlier_one_has_not_finished(tmp_path: Path) -> None:
    root = str(tmp_path / "runs")
    planned = cli("plan", "--iter", "1", "--root", root)
    iterated = cli("iterate", "--iter", "1", "--root", root)
    assert (planned.returncode, iterated.returncode) == (0, 2), planned.stderr + iterated.stderr
    assert planned.stdout.splitlines()[-1] == "iterate refuses: " + iterated.stderr.splitlines()[-1].removeprefix(
        "error: ")
    assert f"{normalize(root)} does not exist, so it holds no run" in planned.stdout.splitlines()[-1]
    (tmp_path / "runs" / "iter_0").mkdir(parents=True)  # a root whose iteration 0 has not finished
    planned = cli("plan", "--iter", "1", "--root", root)
    iterated = cli("iterate", "--iter", "1", "--root", root)
    assert planned.stdout.splitlines()[-1] == "iterate refuses: " + iterated.stderr.splitlines()[-1].removeprefix(
        "error: ")
    assert "iteration 0 has not finished under" in planned.stdout.splitlines()[-1]

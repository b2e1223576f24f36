"""`burnqed sft`, `burnqed export` and `burnqed train-ebm` into a finished output: reused when made from the same
inputs, refused naming the first difference when made from others, redone with --force (docs/pipeline.md, "Reused
or refused"). In process: the finished outputs are published here with what the commands record; the training a
--force starts is replaced by a recorder."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from burnqed.config import load_config
from burnqed.provenance import StageInputs, when
from burnqed.runner.reuse import sft_inputs, train_ebm_inputs
from burnqed.storage import Store
from tests.processes import cli
from tests.trajectory.factories import simple_theorem, write_trajectory


def publish(store: Store, uri: str, stage: str, made_from: StageInputs | None = None, content: str = "x") -> None:
    with store.staged_output(uri, stage, made_from=made_from) as folder:
        (folder / "file.txt").write_text(content)


def burnqed(*args: str) -> subprocess.CompletedProcess[str]:
    return cli(*args, env={"BURNQED_HOME": None})


def finished_at(store: Store, uri: str) -> str:
    marker = store.read_marker(uri)
    assert marker is not None
    return when(marker.written_at)


@pytest.fixture
def sft_run(tmp_path: Path, store: Store) -> tuple[str, str]:
    """A prepared-data folder and an SFT output made from it, as `burnqed sft --data DATA --output OUT` records."""
    data, out = str(tmp_path / "data"), str(tmp_path / "sft")
    publish(store, data, "prepare-data")
    publish(store, out, "sft", sft_inputs(load_config(), store, data=data, trajectories=(), init=None, iteration=0))
    return data, out


def test_sft_reuses_an_output_made_with_the_same_inputs(sft_run: tuple[str, str], store: Store) -> None:
    data, out = sft_run
    done = burnqed("sft", "--data", data, "--output", out)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"reusing {out} (finished {finished_at(store, out)}, same inputs); --force redoes it\n"
    # a cadence is not an input: logging more often makes the same weights
    assert burnqed("sft", "--data", data, "--output", out, "--set", "sft.logging_steps=1").returncode == 0


def test_sft_refuses_an_output_made_with_other_inputs_and_force_redoes_it(
    sft_run: tuple[str, str], store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, out = sft_run
    refused = burnqed("sft", "--data", data, "--output", out, "--set", "sft.learning_rate=0.01")
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == (f"error: {out} is a finished sft output made with other inputs: sft.learning_rate was "
                              "0.002, now 0.01; --force redoes it, or choose another --output\n")
    other_iteration = burnqed("sft", "--data", data, "--output", out, "--iter", "1", "--trajectories", data)
    assert other_iteration.returncode == 2 and f"--trajectories[0] was not given, now file://{data}" in (
        other_iteration.stderr)
    before = finished_at(store, data)
    publish(store, data, "prepare-data", content="other pairs")  # the data prepared again
    redone_data = burnqed("sft", "--data", data, "--output", out)
    assert redone_data.returncode == 2
    assert redone_data.stderr == (
        f"error: {out} is a finished sft output made with other inputs: --data file://{data} was made again since "
        f"(it was finished {before}, now {finished_at(store, data)}); --force redoes it, or choose another --output\n")

    calls: list[Any] = []

    def run_sft(request: Any, *args: Any, **kwargs: Any) -> SimpleNamespace:
        calls.append(request)
        return SimpleNamespace(summary="trained")

    monkeypatch.setattr("burnqed.sft.train.run_sft", run_sft)
    forced = burnqed("sft", "--data", data, "--output", out, "--set", "sft.learning_rate=0.01", "--force")
    assert (forced.returncode, forced.stdout) == (0, "trained\n"), forced.stderr
    [request] = calls  # trained again, recording what this run is made from
    assert request.force and request.made_from.settings["sft.learning_rate"] == 0.01


def test_export_follows_its_sft_output(sft_run: tuple[str, str], store: Store, tmp_path: Path) -> None:
    from burnqed.runner.reuse import export_inputs

    _, sft = sft_run
    out = str(tmp_path / "export")
    publish(store, out, "export", export_inputs(load_config(), store, sft=sft))
    assert burnqed("export", "--sft", sft, "--output", out).stdout.startswith(f"reusing {out} (finished ")
    before = finished_at(store, sft)
    publish(store, sft, "sft", content="retrained")  # SFT redone: the export is made from the old one
    refused = burnqed("export", "--sft", sft, "--output", out)
    assert refused.returncode == 2 and refused.stderr == (
        f"error: {out} is a finished export made with other inputs: --sft file://{sft} was made again since (it "
        f"was finished {before}, now {finished_at(store, sft)}); --force redoes it, or choose another --output\n")


@pytest.fixture
def ebm_run(tmp_path: Path, store: Store) -> tuple[str, str, str]:
    """Trajectories, a policy folder and a value model trained on them, as `burnqed train-ebm` records it."""
    trajectories, model, out = str(tmp_path / "traj"), tmp_path / "export", str(tmp_path / "ebm")
    write_trajectory(trajectories, [simple_theorem("t1", 2, proved=True)], store=store)
    model.mkdir()
    (model / "config.json").write_text("{}")
    publish(store, out, "train-ebm", train_ebm_inputs(load_config(), store, trajectories=[trajectories],
                                                      model=str(model), init=None, joint=None, iteration=1))
    return trajectories, str(model), out


def test_train_ebm_reuses_and_refuses(ebm_run: tuple[str, str, str], store: Store) -> None:
    trajectories, model, out = ebm_run
    args = ("train-ebm", "--trajectories", trajectories, "--model", model, "--iter", "1", "--output", out)
    same = burnqed(*args)
    assert same.returncode == 0, same.stderr
    assert same.stdout == f"reusing {out} (finished {finished_at(store, out)}, same inputs); --force redoes it\n"
    refused = burnqed(*args, "--set", "ebm.steps=5")
    assert refused.returncode == 2 and refused.stderr == (
        f"error: {out} is a finished train-ebm output made with other inputs: ebm.steps was 300, now 5; --force "
        "redoes it, or choose another --output\n")
    (Path(model) / "model.safetensors").write_bytes(b"other weights")  # another policy in the same folder
    other_model = burnqed(*args)
    assert other_model.returncode == 2
    assert f"--model file://{model} was made again since (its content differs)" in other_model.stderr


@pytest.mark.slow  # the stage module loads torch
def test_train_ebm_force_trains_again(ebm_run: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    trajectories, model, out = ebm_run
    calls: list[Any] = []

    def run_train_ebm(cfg: Any, request: Any, **kwargs: Any) -> SimpleNamespace:
        calls.append(request)
        return SimpleNamespace(skipped=True, metrics=None)

    monkeypatch.setattr("burnqed.stages.train_ebm.run_train_ebm", run_train_ebm)
    forced = burnqed("train-ebm", "--trajectories", trajectories, "--model", model, "--iter", "1", "--output", out,
                     "--set", "ebm.steps=5", "--force")
    assert forced.returncode == 0, forced.stderr
    [request] = calls
    assert request.force and request.made_from.settings["ebm.steps"] == 5


def test_settings_only_later_iterations_read_leave_iteration_0_reused_and_redo_iteration_1(
        sft_run: tuple[str, str], tmp_path: Path, store: Store) -> None:
    """`sft.later_epochs` and `sft.proofs_per_theorem` (marked `sft-later`) enter SFT's identity from iteration 1
    only: a variant that changes them reuses the defaults' iteration 0 and not their iteration 1."""
    from burnqed.config import Config
    from burnqed.config.identity import identity_keys

    assert identity_keys(Config, "sft-later") == ("sft.later_epochs", "sft.proofs_per_theorem")
    assert not set(identity_keys(Config, "sft-later")) & set(identity_keys(Config, "sft"))
    variant = ("--set", "sft.later_epochs=2", "--set", "sft.proofs_per_theorem=newest")
    data, out = sft_run
    reused = burnqed("sft", "--data", data, "--output", out, *variant)
    assert (reused.returncode, reused.stdout) == (
        0, f"reusing {out} (finished {finished_at(store, out)}, same inputs); --force redoes it\n")
    trajectories, later = f"file://{tmp_path}/traj", str(tmp_path / "sft-1")
    write_trajectory(trajectories, [simple_theorem("t", proved=True)], store=store)
    publish(store, later, "sft", sft_inputs(load_config(), store, data=data, trajectories=[trajectories], init=out,
                                            iteration=1))
    one = ("sft", "--iter", "1", "--data", data, "--trajectories", trajectories, "--init", out, "--output", later)
    assert burnqed(*one).returncode == 0
    for setting, what in ((variant[:2], "sft.later_epochs was 1.0, now 2.0"),
                          (variant[2:], "sft.proofs_per_theorem was 'shortest', now 'newest'")):
        refused = burnqed(*one, *setting)
        assert (refused.returncode, refused.stderr) == (
            2, f"error: {later} is a finished sft output made with other inputs: {what}; --force redoes it, or "
            "choose another --output\n")

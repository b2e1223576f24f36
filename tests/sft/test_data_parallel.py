"""Data-parallel SFT and joint training: 2 CPU processes (torchrun, gloo) follow the 1-process loss curve at the
same global batch, through `burnqed sft` with sft.processes = 2 (the command launches itself under torchrun, whose
two processes are the subject); a stop of the command ends torchrun and both processes before the command exits, and
the command its line names resumes; the one-process command's stop prints the same kind of line. The 1-process curves
are trained in the test's process (the joint one by `run_sft`, the plain one by the app through tests/processes.py
`cli`): what they are, not a process, is compared. The plain 1-process curve (`one_process_curve`) is trained once
for the module. The two-process plain curve is that of a run stopped by SIGTERM and resumed by the command its line
names, compared with the 1-process curve: one torchrun run pair for both claims (its points before the resumed step
are the stopped run's, the later ones the resumed run's, and a mismatch names which: `same_curve`). The command
SIGTERM stops is a `python -m burnqed.cli` process of its own; the commands that only launch torchrun (the joint run,
the resume) and the one-process command stopped by Ctrl-C are forks of the test's process presenting themselves as
`python -m burnqed.cli` (tests/sft/helpers.py `command_fork`): their stop lines, torchrun's processes and what they
train are the subject, not a process start (~0.9 CPU-s of imports a launcher, ~7 a one-process run)."""

from __future__ import annotations

import json
import os
import signal
import tempfile
from pathlib import Path

import pytest

from burnqed.base.cpu_kernels import cpu_threads
from burnqed.sft.checkpoints import CHECKPOINT_RE, STATE_FILE
from burnqed.sft.launch import launch_argv, needs_launch
from tests.processes import background, cli, survivors, wait_for
from tests.sft.helpers import command_fork, continue_command, forked_command, launched, write_data_folder
from tests.sft.joint_helpers import ebm_config, joint_config, joint_run


def sets(values: dict[str, object]) -> list[str]:
    return [arg for key, value in values.items() for arg in ("--set", f"{key}={json.dumps(value)}")]


# The plain SFT runs of this module: 8 steps, a checkpoint after each (where a stop test lands its signal).
STEPS = 8
STOP_AFTER = 3  # the step whose checkpoint the two-process SIGTERM test waits for
KEYS = {"sft.base_model": None, "sft.device": "cpu", "sft.method": "lora", "sft.lora_r": 4, "sft.lora_alpha": 8,
        "sft.lora_dropout": 0.0, "sft.batch_size": 4, "sft.max_steps": STEPS, "sft.warmup_steps": 0,
        "sft.save_steps": 1, "sft.logging_steps": 1, "sft.eval_steps": 100}


def plain_args(data: Path, tiny: Path, processes: int) -> list[str]:
    """`burnqed sft --iter 0` on `data` with the module's settings (KEYS) on `tiny`, in `processes` processes."""
    return ["sft", "--iter", "0", "--data", str(data),
            *sets({**KEYS, "sft.base_model": str(tiny), "sft.processes": processes})]


def loss_curve(output: Path) -> list[float]:
    return [point["loss"] for point in json.loads((output / "sft.json").read_text())["history"]
            if point["loss"] is not None]


def same_curve(curve: list[float], one: list[float], resumed_from: int) -> None:
    """`curve`, of a run resumed from step `resumed_from` (its points up to that step trained before the stop), is the
    uninterrupted 1-process curve `one`; a mismatch says whether it begins before the resume (the stopped run's
    points: with two processes, their training diverged from one process's) or after it (the resumed run's: the
    resume did not continue the curve)."""
    assert len(curve) == len(one) == STEPS
    wrong = [step for step, (a, b) in enumerate(zip(curve, one, strict=True), start=1) if abs(a - b) > 1e-4]
    where = "the stopped run's" if wrong and wrong[0] <= resumed_from else "the resumed run's"
    assert not wrong, (f"steps {wrong} of {curve} differ from the 1-process curve {one}: from {where} points "
                       f"(resumed from step {resumed_from})")


@pytest.fixture(scope="module")
def one_process_curve(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> list[float]:
    """The uninterrupted loss curve of the module's plain SFT run in one process, in this one (the app through
    `cli`, one torch thread as the tests have)."""
    folder = tmp_path_factory.mktemp("one-process")
    data = write_data_folder(folder / "data")
    with cpu_threads("cpu", 1):
        one = cli(*plain_args(data, tiny_model_dir, 1), "--output", str(folder / "one"), env={"WORLD_SIZE": None})
    assert one.returncode == 0, one.stderr[-3000:]
    return loss_curve(folder / "one")


def test_the_command_has_the_base_model_in_place_before_it_launches_torchrun(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # The default tiny model built by the processes themselves would be saved by process 0 only (tests/policy/
    # test_tiny.py): the command builds (or downloads) the base once, then launches.
    calls: list[tuple[str, object]] = []

    def resolve(base: str | None, *, store: object) -> Path:
        calls.append(("base", base))
        return tmp_path

    def launch(processes: int, args: list[str]) -> int:
        calls.append(("launch", processes))
        return 0

    monkeypatch.setattr("burnqed.sft.model.resolve_base_model", resolve)
    monkeypatch.setattr("burnqed.sft.launch.launch", launch)
    done = cli("sft", "--iter", "0", "--data", str(write_data_folder(tmp_path / "data")), "--output",
               str(tmp_path / "out"), *sets({"sft.processes": 2}), env={"WORLD_SIZE": None})
    assert done.returncode == 0, done.stderr[-3000:]
    assert calls == [("base", None), ("launch", 2)]


def test_the_launcher_runs_the_same_command_under_torchrun(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert needs_launch(2) and not needs_launch(1)
    assert launch_argv(4, ["sft", "--iter", "1"], "/tmp/logs")[1:] == [
        "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4", "--log-dir=/tmp/logs", "-m",
        "burnqed.cli", "sft", "--iter", "1"]
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert not needs_launch(4)  # inside a launched process


@pytest.mark.slow
@pytest.mark.timeout(600)  # a torchrun child of two processes, each loading torch and the tiny model
def test_two_processes_follow_the_one_process_joint_loss_curve(tmp_path: Path, tiny_model_dir: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = joint_config(tiny_model_dir, batch_size=4, warm_steps=4, max_steps=4, joint_groups=4, joint_log_every=1,
                       joint_probe_every=100, save_steps=100)
    ebm = ebm_config()
    joint_run(tmp_path, cfg, ebm)  # one process, in this one
    one = json.loads((tmp_path / "joint" / "joint" / "joint.json").read_text())
    keys = {f"sft.{k}": v for k, v in cfg.model_dump(mode="json").items() if v is not None}
    keys |= {f"ebm.{k}": v for k, v in ebm.model_dump(mode="json").items() if v is not None}
    # The two-process run's temporary directory is the test's (the launcher's, a fork, and torchrun's processes')
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    monkeypatch.setenv("TMPDIR", str(temporary))
    done = forked_command("sft", "--iter", "1", "--data", str(tmp_path / "data"), "--trajectories",
                           f"file://{tmp_path}/traj0", "--output", str(tmp_path / "two"),
                           *sets({**keys, "sft.processes": 2}))
    assert done.returncode == 0, done.stderr[-3000:]
    assert list(temporary.iterdir()) == []  # torchrun's folders (`--log-dir`) removed with the launch
    assert done.stdout.count("sft iteration 1 (lora)") == 1  # process 0 alone prints the summary
    two = json.loads((tmp_path / "two" / "joint" / "joint.json").read_text())
    assert (one["processes"], two["processes"]) == (1, 2)
    assert len(one["history"]) == len(two["history"]) == 4
    for a, b in zip(one["history"], two["history"], strict=True):
        assert b["sft_loss"] == pytest.approx(a["sft_loss"], abs=1e-4)
        assert b["infonce"] == pytest.approx(a["infonce"], abs=1e-4)
        assert b["temperature"] == pytest.approx(a["temperature"], abs=1e-5)


@pytest.mark.slow
@pytest.mark.timeout(900)  # two runs of torchrun's two processes, the one-process curve's in `one_process_curve`
def test_sigterm_to_the_command_alone_ends_torchrun_and_both_processes_and_its_line_resumes_the_one_process_curve(
        tmp_path: Path, tiny_model_dir: Path, one_process_curve: list[float]) -> None:
    # Two claims on one pair of torchrun runs: the two processes' curve is the one process's (the stopped run's
    # points), and the command the stop line names continues it (the resumed run's points); `same_curve` says which.
    args = plain_args(write_data_folder(tmp_path / "data"), tiny_model_dir, 2)
    stopped = tmp_path / "stopped"
    checkpoints = Path(f"{stopped}-checkpoints")
    with background(*args, "--output", str(stopped)) as proc:  # a process group of its own, as in a terminal
        # Stopped after step 3: two updates through the processes are in the stopped run's points (step 1's loss is
        # that of the initial weights in any case), and 5 steps are left to be stopped in.
        wait_for(lambda: any((c / STATE_FILE).is_file() for c in checkpoints.glob("checkpoint-*")
                             if (step := CHECKPOINT_RE.match(c.name)) and int(step.group(1)) >= STOP_AFTER)
                 or proc.poll() is not None, timeout=400)
        assert proc.poll() is None, "the run finished before it could be stopped"
        below = launched(proc.pid)
        os.kill(proc.pid, signal.SIGTERM)  # what Kubernetes sends: the command alone, not torchrun's sessions
        assert proc.wait(timeout=60) == 143
        # None outlives the command (before: torchrun was killed, both processes trained on and published).
        assert survivors(below, grace=0) == []
        assert proc.stderr is not None
        command = continue_command(proc.stderr.read(), "sft", "SIGTERM", stopped)
    assert not stopped.exists()
    resumed = forked_command(*command)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert resumed.stdout.count("sft iteration 0 (lora)") == 1  # process 0 alone prints the summary
    assert resumed.stderr.count("sft: resuming from checkpoint-") == 1  # and the resume line
    record = json.loads((stopped / "sft.json").read_text())
    assert STOP_AFTER <= record["resumed_from_step"] < STEPS
    same_curve(loss_curve(stopped), one_process_curve, record["resumed_from_step"])


@pytest.mark.slow
@pytest.mark.timeout(600)  # a fork's run and this process's, the uninterrupted one's in `one_process_curve`
def test_ctrl_c_to_the_one_process_command_prints_the_command_that_resumes_the_curve(
        tmp_path: Path, tiny_model_dir: Path, one_process_curve: list[float]) -> None:
    args = plain_args(write_data_folder(tmp_path / "data"), tiny_model_dir, 1)
    stopped = tmp_path / "stopped"
    checkpoints = Path(f"{stopped}-checkpoints")
    # A fork of this process (`command_fork`): its stop line and what the command it names makes are the subject,
    # not a process start; the two-process test stops a real `python -m burnqed.cli` process.
    with command_fork(*args, "--output", str(stopped), "--force") as proc:
        wait_for(lambda: any((c / STATE_FILE).is_file() for c in checkpoints.glob("checkpoint-*"))
                 or proc.poll() is not None, timeout=300)
        assert proc.poll() is None, "the run finished before it could be stopped"
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal
        assert proc.wait(timeout=60) == 130
        assert proc.stderr is not None
        # before: `error: stopped by SIGINT`, no command; now the line of the 1-process command, without --force
        command = continue_command(proc.stderr.read().decode(), "sft", "SIGINT", stopped, processes=1)
    assert command == [*args, "--output", str(stopped)]
    assert not stopped.exists()
    resumed = cli(*command, env={"WORLD_SIZE": None})
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert resumed.stderr.count("sft: resuming from checkpoint-") == 1
    resumed_from = json.loads((stopped / "sft.json").read_text())["resumed_from_step"]
    assert 1 <= resumed_from < STEPS
    same_curve(loss_curve(stopped), one_process_curve, resumed_from)

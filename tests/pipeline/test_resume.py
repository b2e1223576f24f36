"""Stop, continue and redo through the command line, as a user does (issue 68): `burnqed iterate` stopped by Ctrl-C or
kill -9 while SFT or RL writes its checkpoint continues with the command it printed (or the same command) to the very
output an uninterrupted run writes; a model that names nothing is refused before any stage (`iterate --force` with
another setting is tests/pipeline/test_iterate_s3.py's, on an S3 run root). The stopped `iterate` and its stage are
processes forked from the test's (tests/pipeline/iteration.py `fork_iterate`: the stop and what it leaves are the
subject, not a process start; real processes are stopped by tests/pipeline/test_iterate.py and
test_iterate_signals.py), the continue runs in the test's process with its stage a fork, on the small world of
tests/pipeline/iteration.py, starting from the shared iteration 0 (copied): its SFT ran
uninterrupted under the same settings and is SFT's reference; RL's is one uninterrupted `iterate --only rl` from a copy
of it (`rl_reference`), shared by the module's RL tests."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
from pathlib import Path

import psutil
import pytest

from tests.pipeline.iteration import (
    NO_ORPHAN_S,
    alive_after,
    fork_iterate,
    iterate_env,
    iterate_forked,
    wait_until,
)
from tests.processes import cli, forked_stages, printed_arguments

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

FIRST_CHECKPOINT = "checkpoint-20"  # sft.save_steps (20) of the 40 steps tests/pipeline/iteration.py trains
# What an interrupted SFT's record may say differently from an uninterrupted one's: where its data was, where it
# resumed, how long it took and when.
CIRCUMSTANCES = {"data", "resumed_from_step", "train_seconds", "tokens_per_second", "written_at"}
# RL after the shared iteration 0's SFT, as small as GRPO goes: 3 steps of 2 prompts × 2 completions, a checkpoint at
# every step (the trainer keeps the newest), one Lean worker. That SFT never trained whole proofs (the stage warns):
# every reward is 0 and the weights stay the SFT's, so the sampled rollouts, byte for byte, are what shows the same
# steps ran from the same state (torch's generator restored from the checkpoint, the rows read from the same place).
RL_RUN = ("--only", "rl", "--set", "rl.enabled=true", "--set", "rl.max_steps=3", "--set", "rl.save_steps=1",
          "--set", "rl.prompts_per_step=2", "--set", "rl.num_generations=2", "--set", "rl.max_completion_tokens=16",
          "--set", "lean.workers=1")
RL_STOP_AT = "checkpoint-2"  # interrupted while the trainer writes it: checkpoint-1 is complete beside it
# What an interrupted RL's output may say differently from an uninterrupted one's, by file: where it resumed, how long
# it took and when (the timings of each step in the step log, one JSON object a line); its run root is written ROOT.
RL_CIRCUMSTANCES = {
    "rl.json": {"resumed_from_step", "train_seconds", "written_at"},
    "rl-log.jsonl": {"lean_seconds", "wall_seconds", "generation_seconds"},
    "_SUCCESS.json": {"written_at"},
    "trajectories/_SUCCESS.json": {"written_at"},
    "trajectories/part-000000.json": {"written_at"},
}


def ctrl_c_when(ready: Path, what: str, root: Path, env: dict[str, str], *args: str) -> tuple[int, str]:
    """`burnqed iterate --iter 0 --root ROOT ARGS` stopped by Ctrl-C (SIGINT to its group: the terminal's foreground
    group; its stages have their own) once `ready` exists: its exit code and stderr, after checking that none of its
    processes outlives it. iterate and its stage are forks (`fork_iterate`): the stop and the resume are the subject."""
    proc = fork_iterate(root, env, *args)
    try:
        wait_until(ready.exists, proc, what)
        children = psutil.Process(proc.pid).children(recursive=True)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal's foreground group (iterate; stages have their own)
        code = proc.wait(timeout=NO_ORPHAN_S)
        assert proc.stderr is not None
        stderr = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
    assert alive_after(children, NO_ORPHAN_S) == []
    return code, stderr


def kill_9_when(ready: Path, what: str, root: Path, env: dict[str, str], *args: str) -> int:
    """`burnqed iterate --iter 0 --root ROOT ARGS` and the one stage it runs SIGKILLed together, as when the machine
    goes, once `ready` exists: the killed iterate's pid, after checking that none of its processes outlives it.
    iterate and its stage are forks (`fork_iterate`): what the kill leaves and the resume makes of it are the
    subject."""
    proc = fork_iterate(root, env, *args)
    try:
        wait_until(ready.exists, proc, what)
        processes = psutil.Process(proc.pid).children(recursive=True)
        [running] = psutil.Process(proc.pid).children()  # the stage `--only stage` runs, in a group of its own
        assert os.getpgid(running.pid) == running.pid
        os.killpg(proc.pid, signal.SIGKILL)  # everything at once, as when the machine goes: iterate and its stage
        os.killpg(running.pid, signal.SIGKILL)
        proc.wait(timeout=NO_ORPHAN_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
    assert alive_after(processes, NO_ORPHAN_S) == []
    return proc.pid


@pytest.fixture
def data_root(iteration_0: Path, tmp_path: Path) -> Path:
    """A run root holding a copy of iteration 0's prepared data and nothing else."""
    root = tmp_path / "run"
    shutil.copytree(iteration_0 / "run" / "iter_0" / "data", root / "iter_0" / "data")
    return root


def assert_same_sft(root: Path, iteration_0: Path) -> dict[str, object]:
    """The SFT output under `root` is the shared iteration 0's, byte for byte in its weights and figure for figure in
    its record; its record is returned."""
    ours, reference = root / "iter_0" / "sft", iteration_0 / "run" / "iter_0" / "sft"
    assert (ours / "model.safetensors").read_bytes() == (reference / "model.safetensors").read_bytes()
    record: dict[str, object] = json.loads((ours / "sft.json").read_text())
    expected: dict[str, object] = json.loads((reference / "sft.json").read_text())
    assert {k: v for k, v in record.items() if k not in CIRCUMSTANCES} == \
        {k: v for k, v in expected.items() if k not in CIRCUMSTANCES}
    assert not (root / "iter_0" / "sft-checkpoints").exists()  # deleted once the output is published
    return record


def trained_steps(stage: str, stderr: str) -> list[int]:
    """The steps a stage's training lines report (`sft: step N/M loss …` every sft.logging_steps, `rl: step N/M
    reward …` every step; not SFT's eval lines): a resumed run reports only those after its checkpoint, a run that
    started over (the same model: training is deterministic) every one."""
    return [int(step) for step in re.findall(rf"{stage}: step (\d+)/\d+ (?:loss|reward) ", stderr)]


def test_ctrl_c_while_sft_checkpoints_then_the_printed_command_trains_the_same_model(
    data_root: Path, iteration_0: Path, iterate_home: Path
) -> None:
    env = iterate_env(iterate_home)
    checkpoints = data_root / "iter_0" / "sft-checkpoints"
    code, stderr = ctrl_c_when(checkpoints / FIRST_CHECKPOINT / "trainer_state.json", "SFT's first checkpoint",
                               data_root, env, "--only", "sft")
    assert code == 128 + signal.SIGINT, stderr[-3000:]
    assert (checkpoints / "README.md").is_file()  # TRL's model card beside the checkpoint: what the continue refused
    printed = re.fullmatch(r"error: .* stopped by SIGINT; .*: continue with `(.+)`", stderr.splitlines()[-1])
    assert printed is not None, stderr[-3000:]
    assert printed_arguments(printed.group(1)) == ["iterate", "--iter", "0", "--root", str(data_root), "--only", "sft"]
    with forked_stages():  # the printed command in this process, its stage a fork of it
        done = cli(*printed_arguments(printed.group(1)), env={**env, "BURNQED_CONFIG": None})
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"sft: resuming from {FIRST_CHECKPOINT} in {checkpoints}" in done.stderr
    assert assert_same_sft(data_root, iteration_0)["resumed_from_step"] == 20
    assert trained_steps("sft", done.stderr) == [30, 40]  # steps 21-40 trained, not 1-40


def test_kill_9_while_sft_checkpoints_then_the_same_command_trains_the_same_model(
    data_root: Path, iteration_0: Path, iterate_home: Path
) -> None:
    env = iterate_env(iterate_home)
    checkpoint = data_root / "iter_0" / "sft-checkpoints" / FIRST_CHECKPOINT
    # the trainer has begun to write the checkpoint
    killed = kill_9_when(checkpoint, "SFT's first checkpoint", data_root, env, "--only", "sft")
    assert (checkpoint.parent / "README.md").is_file()  # written before the checkpoint at every save
    assert not (data_root / "iter_0" / "sft").exists()
    done = iterate_forked(str(data_root), 0, env, "--only", "sft")
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"taking over the lease of run root file://{data_root} from pid {killed}" in done.stderr
    # resumed from the checkpoint when the kill came after its last file, else started over: the same model
    record = assert_same_sft(data_root, iteration_0)
    assert record["resumed_from_step"] in (20, None)
    assert (f"sft: resuming from {FIRST_CHECKPOINT}" in done.stderr) == (record["resumed_from_step"] == 20)
    assert trained_steps("sft", done.stderr) == ([30, 40] if record["resumed_from_step"] else [10, 20, 30, 40])


@pytest.fixture(scope="module")
def rl_reference(iteration_0: Path, iterate_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run root of RL_RUN run uninterrupted on a copy of the shared iteration 0's data and SFT."""
    root = sft_root(iteration_0, tmp_path_factory.mktemp("rl-reference") / "run")
    done = iterate_forked(str(root), 0, iterate_env(iterate_home), *RL_RUN)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rl: resuming" not in done.stderr
    return root


def sft_root(iteration_0: Path, root: Path) -> Path:
    """`root`: a run root holding a copy of iteration 0's prepared data and SFT output and nothing else."""
    for name in ("data", "sft"):
        shutil.copytree(iteration_0 / "run" / "iter_0" / name, root / "iter_0" / name)
    return root


def rl_contents(root: Path) -> dict[str, object]:
    """The files of the RL output under the run root `root`: bytes, or for those in RL_CIRCUMSTANCES their JSON less
    the circumstances, `root` written ROOT."""
    folder = root / "iter_0" / "rl"
    contents: dict[str, object] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = str(path.relative_to(folder))
        left = RL_CIRCUMSTANCES.get(name)
        if left is None:
            contents[name] = path.read_bytes()
            continue
        text = path.read_text(encoding="utf-8").replace(str(root), "ROOT")
        values = [json.loads(line) for line in text.splitlines()] if name.endswith(".jsonl") else [json.loads(text)]
        if name == "_SUCCESS.json":  # its list of the files: the sizes of those above vary with their circumstances
            values[0]["files"] = {file: None if file in RL_CIRCUMSTANCES else size
                                  for file, size in values[0]["files"].items()}
        contents[name] = [{k: v for k, v in value.items() if k not in left} for value in values]
    return contents


def assert_same_rl(root: Path, reference: Path) -> dict[str, object]:
    """The RL output under `root` is the one under `reference` (a run root), file for file (RL_CIRCUMSTANCES aside);
    its record is returned."""
    ours = root / "iter_0" / "rl"
    assert rl_contents(root) == rl_contents(reference)
    rollouts = (ours / "rollouts.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["step"] for line in rollouts] == [1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3]
    assert not (root / "iter_0" / "rl-checkpoints").exists()  # deleted once the output is published
    record: dict[str, object] = json.loads((ours / "rl.json").read_text(encoding="utf-8"))
    return record


def test_ctrl_c_while_rl_checkpoints_then_the_printed_command_trains_the_same_model(
    iteration_0: Path, iterate_home: Path, rl_reference: Path, tmp_path: Path
) -> None:
    root = sft_root(iteration_0, tmp_path / "run")
    env = iterate_env(iterate_home)
    checkpoints = root / "iter_0" / "rl-checkpoints"
    # the trainer is writing RL_STOP_AT
    code, stderr = ctrl_c_when(checkpoints / RL_STOP_AT, "RL's second checkpoint", root, env, *RL_RUN)
    assert code == 128 + signal.SIGINT, stderr[-3000:]
    assert not (root / "iter_0" / "rl").exists()
    # one line says what stopped and how to continue: the stage, stopped by its runner, says nothing of its own
    assert [line for line in stderr.splitlines() if "error:" in line] == stderr.splitlines()[-1:]
    printed = re.fullmatch(r"error: .* stopped by SIGINT; .*: continue with `(.+)`", stderr.splitlines()[-1])
    assert printed is not None, stderr[-3000:]
    assert printed_arguments(printed.group(1)) == ["iterate", "--iter", "0", "--root", str(root), *RL_RUN]
    with forked_stages():  # the printed command in this process, its stage a fork of it
        done = cli(*printed_arguments(printed.group(1)), env={**env, "BURNQED_CONFIG": None})
    assert done.returncode == 0, done.stderr[-3000:]
    # checkpoint-1 was complete when the signal came, so the run resumes (from checkpoint-2 if its last file was in)
    record = assert_same_rl(root, rl_reference)
    assert record["resumed_from_step"] in (1, 2)
    assert f"rl: resuming from checkpoint-{record['resumed_from_step']} in {checkpoints}" in done.stderr
    assert trained_steps("rl", done.stderr) == list(range(int(str(record["resumed_from_step"])) + 1, 4))


def test_kill_9_while_rl_checkpoints_then_the_same_command_trains_the_same_model(
    iteration_0: Path, iterate_home: Path, rl_reference: Path, tmp_path: Path
) -> None:
    root = sft_root(iteration_0, tmp_path / "run")
    env = iterate_env(iterate_home)
    checkpoints = root / "iter_0" / "rl-checkpoints"
    # the trainer is writing RL_STOP_AT
    killed = kill_9_when(checkpoints / RL_STOP_AT, "RL's second checkpoint", root, env, *RL_RUN)
    assert not (root / "iter_0" / "rl").exists()
    done = iterate_forked(str(root), 0, env, *RL_RUN)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"taking over the lease of run root file://{root} from pid {killed}" in done.stderr
    # resumed from checkpoint-2 when the kill came after its last file, else from checkpoint-1: the same model
    record = assert_same_rl(root, rl_reference)
    assert record["resumed_from_step"] in (1, 2)
    assert f"rl: resuming from checkpoint-{record['resumed_from_step']} in {checkpoints}" in done.stderr
    assert trained_steps("rl", done.stderr) == list(range(int(str(record["resumed_from_step"])) + 1, 4))


def test_iterate_with_a_model_that_names_no_folder_is_refused_before_any_stage(iterate_home: Path,
                                                                              tmp_path: Path) -> None:
    (tmp_path / "tiny-model").mkdir()
    for given, error in (("./no-such-model", "error: model folder no-such-model does not exist; did you mean "
                          "tiny-model?\n"),
                         ("./models/none", "error: model folder models/none: no such folder (models does not "
                          "exist)\n"),
                         ("./tiny-model", f"error: model folder {tmp_path}/tiny-model is missing config.json, weights "
                          "(model.safetensors or model.safetensors.index.json or pytorch_model.bin), a tokenizer "
                          "(tokenizer.json or tokenizer.model); it is not a model folder\n")):
        done = cli("iterate", "--iter", "0", "--root", "run", "--model", given, cwd=tmp_path,
                   env={**iterate_env(iterate_home), "BURNQED_CONFIG": None})  # refused before any stage
        assert (done.returncode, done.stderr) == (2, error)
        assert not (tmp_path / "run").exists()  # no stage ran, nothing written

"""Data-parallel RL (docs/training.md, "Data-parallel RL"): `burnqed rl` with rl.processes = 2 runs itself under
torchrun (2 CPU processes, gloo) on the tiny policy of tests/rl/helpers.py, against the same run in one process at the
same global batch (2 prompts × 2 completions a step) and seed.

Where sampling does not depend on the sampler's seed (near-greedy, rl.temperature 0.001) the two give the same
rollouts and the same reward curve, step for step: the same prompts in the same order (the rows are read in order and
process k takes the k-th slice of each step's global batch), each process scoring its own completions on its own Lean
pool, TRL gathering the rewards before it normalises them per group, and process 0 writing rl-log.jsonl and
rollouts.jsonl with every process's rollouts in rank order. At temperature 1 the prompts and the global batch are the
same and the completions are another draw, so the reward curve differs (measured: 0.5, 0.5, 0.0 near-greedy in both;
0.0, 0.25, 0.0 for two processes at temperature 1). Why: TRL seeds each process's sampler with rl.seed + its rank
(`set_seed(seed, device_specific=True)`, so that processes never draw the same completions of one prompt), and even
process 0, seeded as the one process is, draws other tokens for its 2 rows than the one process draws for the first 2
of its 4 (torch's sampler draws over the whole batch, padded to its longest prompt); from step 2 on both halves also
sample from other weights. A Ctrl-C of the command, or its kill -9, ends torchrun and both processes with it, and the
run then resumes to the uninterrupted output.

The near-greedy two-process run is one stopped by Ctrl-C and continued by the command its line names, compared with
the one-process run: one torchrun run pair for both claims (its steps up to the resumed one are the stopped run's,
the later ones the continued run's, and a mismatch names which: `same_rollouts`). The killed run resumes at
temperature 1, to the uninterrupted two-process output byte for byte: the processes' sampler states restored."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import psutil
import pytest

from burnqed.config import RlConfig
from burnqed.rl.records import CHECKPOINT_MARK, RL_RECORD, ROLLOUTS, STEP_LOG
from burnqed.runner.requests import RlRequest
from burnqed.sft.launch import LOGS_PREFIX
from burnqed.sft.manifests import SftRecord
from tests.processes import background, burnqed_in_process, request_of, survivors, wait_for
from tests.rl.helpers import build_policy, write_index
from tests.sft.helpers import continue_command, forked_command, launched
from tests.shared import shared_artifact

# The Lean of the commands run in this process answers in it (tests/conftest.py); the killed and two-process runs
# keep their processes.
pytestmark = pytest.mark.usefixtures("minilean_in_process")


@pytest.fixture(scope="session")
def policy(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/rl/helpers.py's SFT output (the fixture of tests/rl/test_stage.py: one build per test run)."""
    return shared_artifact(tmp_path_factory, "rl-policy", lambda folder: build_policy(tiny_model_dir, folder / "sft"))


def test_several_processes_need_the_trainer_engine_and_a_global_batch_they_split() -> None:
    assert RlConfig(processes=2, prompts_per_step=1, num_generations=2).processes == 2
    with pytest.raises(ValueError, match=r"rl\.processes = 2 needs rl.rollout_engine = 'trainer', got 'served': one "
                                         r"server, whose weights a single trainer pushes"):
        RlConfig(processes=2, rollout_engine="served")
    with pytest.raises(ValueError, match=r"rl\.processes = 2 needs rl.rollout_engine = 'trainer', got 'continuous': "
                                         r"its paged cache is sized for the whole step in one process"):
        RlConfig(processes=2, rollout_engine="continuous")
    with pytest.raises(ValueError, match=r"rl.prompts_per_step × rl.num_generations = 9 completions a step must "
                                         r"divide by the 2 data-parallel processes \(rl.processes\)"):
        RlConfig(processes=2, prompts_per_step=3, num_generations=3)


def test_the_command_refuses_the_served_engine_on_two_processes_before_work(tmp_path: Path) -> None:
    index = write_index(tmp_path / "theorems.json")
    done = burnqed_in_process("rl", "--sft", str(tmp_path / "sft"), "--theorems", str(index), "--output",
                              str(tmp_path / "rl"), "--set", "rl.processes=2", "--set", "rl.rollout_engine=served")
    assert done.returncode == 2
    assert "rl.processes = 2 needs rl.rollout_engine = 'trainer', got 'served'" in done.stderr
    assert not (tmp_path / "rl").exists() and not (tmp_path / "rl-checkpoints").exists()


def test_the_command_has_the_base_in_place_before_it_launches_torchrun(policy: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # An adapter's base built by the processes themselves would be saved by process 0 only (tests/policy/
    # test_tiny.py): the command asks for the base folder (`rl.grpo.base_folder`) once, then launches.
    calls: list[tuple[str, object]] = []

    def base(source: Path, record: SftRecord, *, store: object) -> Path:
        calls.append(("base", record.method))
        return source

    def launch(processes: int, args: list[str]) -> int:
        calls.append(("launch", processes))
        lines.append(args)
        return 0

    lines: list[list[str]] = []
    monkeypatch.setattr("burnqed.rl.grpo.base_folder", base)
    monkeypatch.setattr("burnqed.sft.launch.launch", launch)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    index = write_index(tmp_path / "theorems.json")
    args = rl_args(policy, index, {**SETS, "rl.processes": 2})
    words = ["--iter", "1", "--trajectories", "t0", "--trajectories", "t1", "--force"]
    done = burnqed_in_process("rl", *args, *words, "--output", str(tmp_path / "rl"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert calls == [("base", "full"), ("launch", 2)]
    # the processes run the command as given: the same request as their command parses it, every --set kept
    (line,) = lines
    assert request_of(line) == RlRequest(iteration=1, sft=str(policy / "sft"), theorems=str(index),
                                         trajectories=("t0", "t1"), output=str(tmp_path / "rl"), force=True)
    sets = [word for key, value in {**SETS, "rl.processes": 2}.items() for word in ("--set", f"{key}={value}")]
    assert line[-len(sets):] == sets


def steps_of(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / STEP_LOG).read_text(encoding="utf-8").splitlines()]


def rollouts_of(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / ROLLOUTS).read_text(encoding="utf-8").splitlines()]


SETS = {"rl.max_steps": 3, "rl.save_steps": 1, "rl.prompts_per_step": 2, "rl.num_generations": 2,
        "rl.max_completion_tokens": 12, "lean.workers": 1, "rl.theorems": "all"}


def rl_args(policy: Path, index: Path, sets: dict[str, object]) -> list[str]:
    """The arguments of `burnqed rl` on the tiny policy's SFT and `index` with `sets`, but its --output."""
    return ["--sft", str(policy / "sft"), "--theorems", str(index),
            *(arg for key, value in sets.items() for arg in ("--set", f"{key}={value}"))]


def run(policy: Path, output: Path, index: Path, **keys: object) -> list[dict[str, Any]]:
    """`burnqed rl` for 3 steps of 2 prompts × 2 completions on the tiny policy (with `keys` set); its rollouts. One
    process runs in this process (`burnqed_in_process`); the command of two in a fork of it (tests/sft/helpers.py
    `forked_command`), whose stdout torchrun's processes inherit and print to (CliRunner captures none of theirs)."""
    sets = {**SETS, **keys}
    args = ["rl", *rl_args(policy, index, sets), "--output", str(output)]
    done = forked_command(*args) if sets.get("rl.processes", 1) != 1 else burnqed_in_process(*args)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("rl iteration 0 (full)") == 1  # process 0 alone prints the summary
    assert sum(line.startswith("rl: step 2/3") for line in done.stderr.splitlines()) == 1  # and the progress
    assert not Path(f"{output}-checkpoints").exists()
    return rollouts_of(output)


@pytest.fixture(scope="module")
def sampled(policy: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of two processes at temperature 1 (a checkpoint each step): the sampled run of the reward-curve test and
    the uninterrupted output the killed run resumes to (one run for both)."""
    folder = tmp_path_factory.mktemp("rl-two-processes")
    run(policy, folder / "sampled", write_index(folder / "theorems.json"), **{"rl.processes": 2})
    return folder / "sampled"


def same_rollouts(resumed: Path, one: Path) -> None:
    """The rollouts and step log of the 2-process run `resumed` (stopped, then resumed) are those of the 1-process
    run `one`; a mismatch says whether it begins at a step the stopped run trained (the processes diverged from one
    process) or one the resumed run trained (the resume did not continue the run)."""
    resumed_from = json.loads((resumed / RL_RECORD).read_text(encoding="utf-8"))["resumed_from_step"]
    assert resumed_from in (1, 2, 3)

    def where(steps: list[int]) -> str:
        whose = "the stopped run's" if steps and min(steps) <= resumed_from else "the resumed run's"
        return f"steps {sorted(set(steps))} differ, from {whose} (resumed from step {resumed_from})"

    def differ(ones: list[dict[str, Any]], twos: list[dict[str, Any]], *keys: str) -> list[int]:
        return [a["step"] for a, b in zip(ones, twos, strict=True) if [a[k] for k in keys] != [b[k] for k in keys]]

    assert [r["step"] for r in rollouts_of(resumed)] == [step for step in (1, 2, 3) for _ in range(4)]
    wrong = differ(rollouts_of(one), rollouts_of(resumed), "step", "prompt", "completion", "reward")
    assert not wrong, where(wrong)
    wrong = differ(steps_of(one), steps_of(resumed), "step", "mean_reward", "verified", "solved_share", "completions",
                   "tokens_generated")
    assert not wrong, where(wrong)


@pytest.mark.slow
@pytest.mark.timeout(900)  # a run in this process, two of torchrun's two processes (and `sampled`)
def test_two_processes_stopped_by_ctrl_c_end_with_the_command_and_resume_to_the_one_process_reward_curve(
        policy: Path, sampled: Path, tmp_path: Path) -> None:
    index = write_index(tmp_path / "theorems.json")
    # Near-greedy sampling (rl.temperature 0.001): the completions do not depend on the sampler's seed.
    run(policy, tmp_path / "one", index, **{"rl.temperature": 0.001})
    args = rl_args(policy, index, {**SETS, "rl.temperature": 0.001, "rl.processes": 2})
    two = tmp_path / "two"
    # Ctrl-C in a terminal: SIGINT to the command's process group, which torchrun's processes (each in a session of
    # its own) are not in. The command stops torchrun and both processes before it exits (before: torchrun passed
    # SIGINT on and was killed at once; both processes ran on for 5-15 s after the command's exit).
    with background("rl", *args, "--output", str(two)) as proc:  # a process group of its own, as in a terminal
        below = after_a_checkpoint(proc, two)
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=60) == 130
        assert survivors(below, grace=0) == []
        assert proc.stderr is not None
        command = continue_command(proc.stderr.read(), "rl", "SIGINT", two)
    assert not two.exists()
    continued = forked_command(*command)
    assert continued.returncode == 0, continued.stderr[-3000:]
    assert continued.stdout.count("rl iteration 0 (full)") == 1  # process 0 alone prints the summary
    assert continued.stderr.count("rl: resuming from checkpoint-") == 1  # and the resume line
    assert not Path(f"{two}-checkpoints").exists()
    same_rollouts(two, tmp_path / "one")
    assert json.loads((two / RL_RECORD).read_text(encoding="utf-8"))["settings"]["processes"] == 2
    # At temperature 1 the same prompts, the global batch of 4 a step, and the step log of every process's rollouts;
    # the completions and rewards are another draw (the module's docstring).
    drawn = rollouts_of(sampled)
    assert [(r["step"], r["prompt"]) for r in drawn] == [(r["step"], r["prompt"]) for r in rollouts_of(two)]
    for step in steps_of(sampled):
        rewards = [r["reward"] for r in drawn if r["step"] == step["step"]]
        assert step["completions"] == len(rewards) == 4
        assert step["mean_reward"] == pytest.approx(sum(rewards) / 4) and step["verified"] == rewards.count(1.0)
        assert step["tokens_generated"] == sum(r["tokens"] for r in drawn if r["step"] == step["step"])
    # The update through DDP moved the weights (a group held both rewards: step 2's mean 0.25 of 4, measured).
    trained = (sampled / "model.safetensors").read_bytes()
    assert trained != (policy / "sft" / "model.safetensors").read_bytes()


def after_a_checkpoint(proc: subprocess.Popen[str], output: Path) -> list[psutil.Process]:
    """Wait for the first sealed checkpoint of the 2-process run `proc` writes to `output`; torchrun and its processes
    (and their Lean workers) then."""
    checkpoints = Path(f"{output}-checkpoints")
    wait_for(lambda: any((c / CHECKPOINT_MARK).is_file() for c in checkpoints.glob("checkpoint-*"))
             or proc.poll() is not None, timeout=400)
    assert proc.poll() is None, "the run finished before it could be stopped"
    return launched(proc.pid)


def same_output(resumed: Path, whole: Path, stderr: str) -> None:
    """A run resumed from a checkpoint gave the uninterrupted run's weights and rollouts, byte for byte."""
    assert stderr.count("rl: resuming from checkpoint-") == 1  # process 0's line
    assert (resumed / "model.safetensors").read_bytes() == (whole / "model.safetensors").read_bytes()
    assert (resumed / ROLLOUTS).read_bytes() == (whole / ROLLOUTS).read_bytes()
    assert json.loads((resumed / RL_RECORD).read_text(encoding="utf-8"))["resumed_from_step"] in (1, 2, 3)


@pytest.mark.slow
@pytest.mark.timeout(900)  # two runs of torchrun's two processes (and the uninterrupted one: `sampled`)
def test_two_processes_killed_outright_end_with_the_command_and_resume_to_the_whole_output(
        policy: Path, sampled: Path, tmp_path: Path) -> None:
    args = rl_args(policy, write_index(tmp_path / "theorems.json"), {**SETS, "rl.processes": 2})
    whole, killed = sampled, tmp_path / "killed"
    assert [r["step"] for r in rollouts_of(whole)] == [step for step in (1, 2, 3) for _ in range(4)]
    # kill -9 of the command alone: Linux sends torchrun SIGKILL, and torchrun's death SIGKILLs both processes
    # (measured: all gone 0.8 s after the kill; before, torchrun and both trained on and published the output).
    temporary = tmp_path / "tmp"  # the killed command's (and torchrun's) temporary directory
    temporary.mkdir()
    with background("rl", *args, "--output", str(killed), env={"TMPDIR": str(temporary)}) as proc:
        below = after_a_checkpoint(proc, killed)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert survivors(below, grace=5) == []
    assert not killed.exists()
    # what the kill left there: the launch's folder for torchrun's (burnqed.sft.launch), nothing of torchrun's own
    assert [p.name.startswith(LOGS_PREFIX) for p in temporary.iterdir()] == [True]
    # Both processes' sampler states are in the sealed checkpoint (process 0 seals after a barrier).
    sealed = [c for c in Path(f"{killed}-checkpoints").glob("checkpoint-*") if (c / CHECKPOINT_MARK).is_file()]
    assert sealed and all({"rng_state_0.pth", "rng_state_1.pth"} <= {p.name for p in c.iterdir()} for c in sealed)
    resumed = forked_command("rl", *args, "--output", str(killed))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    same_output(killed, whole, resumed.stderr)


def test_the_clusters_rl_pod_asks_for_one_gpu_per_process() -> None:
    from burnqed.cluster.render import render_templates
    from burnqed.config import load_config
    from tests.cluster.conftest import ROOT, WORKFLOWS, by_name, template

    def gpus(*sets: str) -> tuple[str, str]:
        cfg = load_config(ROOT / "configs" / "deepseek-prover-v2-7b.toml", ["rl.enabled=true", *sets], {})
        main = template(by_name(render_templates(cfg, ["iteration"], WORKFLOWS), "burnqed-iteration-0"), "rl")
        resources = main["container"]["resources"]
        return resources["requests"]["nvidia.com/gpu"], resources["limits"]["nvidia.com/gpu"]

    assert gpus() == ("1", "1")
    assert gpus("rl.processes=4") == ("4", "4")  # its command is the same: `burnqed rl` launches the 4 processes

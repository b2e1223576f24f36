"""The GRPO stage (docs/training.md, "GRPO stage") on the tiny model and the embedded Lean (minilean, the default
lean.command): a few steps write a model folder that export reads, with the step log and the rollouts; kill -9 after
a checkpoint, then the re-run, gives the model folder of an uninterrupted run byte for byte (its rows holding repair
prompts too), under each rollout engine (served: its in-process `burnqed serve` killed with it); bad input is
refused before any work; the settings are in `config describe`; `iterate` places the stage between sft and export
only when rl.enabled (the cluster's rl step: tests/cluster/test_rl_step.py). Each rollout engine
(`rl.rollout_engine`) runs `burnqed rl` on CPU and is recorded; continuous batching is seeded by rl.seed; a completion
cut at rl.max_completion_tokens earns 0.0 unsent to the reward and is counted."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import math
import os
import signal
import tempfile
from pathlib import Path

import pytest

from burnqed.config import Config, PipelineConfig, RlConfig, SearchConfig
from burnqed.config.describe import describe
from burnqed.errors import InputError
from burnqed.lean.pool import LeanPool
from burnqed.records.theorem import Theorem
from burnqed.rl.grpo import RlRequest, RlSettings, check_model_folder, run_rl, select_theorems
from burnqed.rl.grpo_step import TRUNCATED
from burnqed.rl.grpo_trainer import DERIVED_FIELDS, GRPO_FIELDS, engine_args, grpo_fields
from burnqed.rl.records import CHECKPOINT_MARK, RL_RECORD, ROLLOUTS, STEP_LOG, TRAJECTORIES
from burnqed.rl.served import WEIGHTS_PREFIX
from burnqed.runner.plan import build_iteration
from burnqed.sft.export import ExportRequest, run_export
from burnqed.storage import Store
from burnqed.text.feedback import Feedback
from burnqed.trajectory.reader import read_edges, read_results
from tests.processes import burnqed, burnqed_in_process, forked, wait_for
from tests.rl.helpers import THEOREMS, build_policy, failed_search, write_index
from tests.shared import shared_artifact
from tests.trajectory.factories import write_trajectory

# The Lean of the commands run in this process answers in it (tests/conftest.py); the killed and two-process runs
# keep their processes.
pytestmark = pytest.mark.usefixtures("minilean_in_process")


@pytest.fixture(scope="session")
def policy(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/rl/helpers.py's SFT output: the tiny model taught to answer THEOREMS' whole prompts, sometimes right."""
    return shared_artifact(tmp_path_factory, "rl-policy", lambda folder: build_policy(tiny_model_dir, folder / "sft"))


def sft_of(shared: Path) -> Path:
    return shared / "sft"


def config(**rl: object) -> Config:
    return Config(rl=RlConfig(**{"max_steps": 2, "num_generations": 2, "max_completion_tokens": 12, "save_steps": 1,
                                 **rl}))


def kept(folder: Path) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """The rollouts' trajectory in `folder`: its theorem results and its rows (NaN, what a rollout does not record,
    written "NaN" so that equal rows compare equal)."""
    uri, store = str(folder / TRAJECTORIES), Store(cache_dir=folder.parent / "cache")
    rows = [{key: "NaN" if isinstance(value, float) and math.isnan(value) else value for key, value in row.items()}
            for row in read_edges(uri, store=store).to_pylist()]
    return [r.model_dump(mode="json") for r in read_results(uri, store=store)], rows


@pytest.mark.slow
def test_two_steps_write_a_model_folder_that_export_reads(policy: Path, tmp_path: Path, store: Store,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = config().model_copy(update={"search": SearchConfig(repair_rounds=1)})  # failures keep Lean's messages
    # A full SFT output is the whole model: its base (here unset: the default tiny model) is neither built nor read.
    monkeypatch.setattr("burnqed.rl.grpo.resolve_base_model", lambda *_, **__: pytest.fail("base model resolved"))
    output = str(tmp_path / "rl")
    lines: list[str] = []
    outcome = run_rl(RlRequest(iteration=0, sft=str(sft_of(policy)), output=output),
                     select_theorems(THEOREMS, "all", set()), RlSettings.from_config(cfg),
                     open_pool=lambda: LeanPool.from_config(cfg.lean, size=1), store=store, echo=lines.append)
    folder = Path(output)
    assert outcome.record.steps == 2 and outcome.record.method == "full" and outcome.record.theorems == 3
    assert outcome.record.repair_prompts == 0  # no trajectory of failed proofs given
    assert outcome.record.gpu_peak_gib is None  # on CPU
    assert [line.split(" reward")[0] for line in lines] == ["rl: step 1/2", "rl: step 2/2"]
    steps = [json.loads(line) for line in (folder / STEP_LOG).read_text(encoding="utf-8").splitlines()]
    assert [s["step"] for s in steps] == [1, 2] and all(s["completions"] == 4 for s in steps)
    assert set(steps[0]) == {"step", "mean_reward", "solved_share", "verified", "completions", "kl", "loss",
                             "tokens_generated", "lean_seconds", "wall_seconds", "generation_seconds", "truncated"}
    rollouts = [json.loads(line) for line in (folder / ROLLOUTS).read_text(encoding="utf-8").splitlines()]
    assert [r["step"] for r in rollouts] == [1, 1, 1, 1, 2, 2, 2, 2]
    assert {r["theorem"] for r in rollouts} <= {t.name for t in THEOREMS}
    assert all(r["reward"] in (0.0, 1.0) and (r["reason"] == "") == (r["reward"] == 1.0) for r in rollouts)
    assert all(0 < r["tokens"] <= 12 for r in rollouts)
    assert sum(r["tokens"] for r in rollouts) == sum(s["tokens_generated"] for s in steps)
    # With repair on, a rollout that failed with Lean's messages keeps them (whole search's row record).
    with_messages = [r for r in rollouts if r["feedback"] is not None]
    assert with_messages and [r["feedback"] is not None for r in rollouts] == [
        r["reason"].startswith("the proof text does not compile") for r in rollouts]
    assert all(Feedback.from_json(r["feedback"]).messages[0].severity == "error" for r in with_messages)
    assert sorted(p.name for p in folder.iterdir()) == [
        "_SUCCESS.json", "config.json", "generation_config.json", "model.safetensors", "rl-log.jsonl", RL_RECORD,
        "rollouts.jsonl", "sft.json", "tokenizer.json", "tokenizer_config.json", TRAJECTORIES]
    # The rollouts again as a whole-mode trajectory: per theorem its rollouts sampled, proved when one earned 1.0.
    results, rows = kept(folder)
    assert sorted((r["name"], r["mode"], r["proofs_sampled"], r["proved"]) for r in results) == sorted(
        (name, "whole", sum(1 for r in rollouts if r["theorem"] == name),
         any(r["reward"] == 1.0 for r in rollouts if r["theorem"] == name))
        for name in {r["theorem"] for r in rollouts})
    assert {row["feedback"] for row in rows} - {None} == {r["feedback"] for r in with_messages}
    assert not Path(f"{output}-checkpoints").exists()
    exported = run_export(ExportRequest(model=output, output=str(tmp_path / "export")), cfg.sft, store=store)
    assert exported.record.source == output and exported.record.method == "full"


def test_bad_input_is_refused_before_work(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="none of the 1 theorems has a statement"):
        select_theorems([Theorem(name="t")], "all", set())
    with pytest.raises(InputError, match="every one of the 3 theorems with a statement was proved by an earlier "
                                         "search"):
        select_theorems(THEOREMS, "unsolved", {t.name for t in THEOREMS})
    chosen = select_theorems([*THEOREMS, Theorem(name="t")], "unsolved", {"two_plus_two"})
    assert [t.name for t in chosen.theorems] == ["n_add_zero", "three_times_two"]
    assert (chosen.proved, chosen.without_statement) == (1, 1)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"has no sft\.json: it is not the output of `burnqed sft`"):
        check_model_folder(tmp_path / "empty", "empty")


@pytest.mark.slow
def test_the_command_refuses_a_folder_that_is_not_a_model_before_work(tmp_path: Path) -> None:
    index = write_index(tmp_path / "theorems.json")
    (tmp_path / "notamodel").mkdir()
    done = burnqed("rl", "--sft", str(tmp_path / "notamodel"), "--theorems", str(index), "--output",
                   str(tmp_path / "rl"))
    assert done.returncode == 2
    assert done.stderr.strip().endswith(f"--sft {tmp_path / 'notamodel'} has no sft.json: it is not the output of "
                                        "`burnqed sft`")
    assert not (tmp_path / "rl").exists() and not (tmp_path / "rl-checkpoints").exists()


@pytest.mark.slow
@pytest.mark.timeout(600)  # three runs of 8 steps and the session's tiny policy, on 2 shared cores
@pytest.mark.parametrize("engine", ["trainer", "continuous", "served"])
def test_killed_outright_after_a_checkpoint_the_rerun_gives_the_uninterrupted_model_folder(
        engine: str, policy: Path, tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    # The runs' temporary directory is the test's (the fork inherits this process's): a killed served run leaves
    # its pushed versions there, which a later run sweeps once stale (burnqed.rl.served.sweep_stale_weights).
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    index = write_index(tmp_path / "theorems.json")
    # An earlier search's failed proofs: with search.repair_rounds > 0 the rows hold their repair prompts too.
    failures = f"file://{tmp_path}/trajectories"
    write_trajectory(failures, [failed_search(t, ["simp", "rfl"]) for t in THEOREMS], store=store)
    args = ["--sft", str(sft_of(policy)), "--theorems", str(index), "--trajectories", failures,
            "--set", "search.repair_rounds=1", "--set", "rl.max_steps=8", "--set", "rl.save_steps=2",
            "--set", "rl.num_generations=2", "--set", "rl.max_completion_tokens=12", "--set", "lean.workers=1",
            "--set", f"rl.rollout_engine={engine}"]
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    # The uninterrupted reference and the resume in this process: what a process leaves behind is the subject of the
    # killed run alone, a fork of this one (tests/processes.py `forked`: killed as a process is, without a process
    # start's imports; the entry point's process: test_the_command_refuses_a_folder_that_is_not_a_model_before_work).
    # (8 steps: fewer hold no group with both rewards, measured at 3; a step after the first costs about a second.)
    reference = burnqed_in_process("rl", *args, "--output", str(whole))
    assert reference.returncode == 0, reference.stderr
    with forked("rl", *args, "--output", str(killed)) as proc:
        checkpoints = Path(f"{killed}-checkpoints")
        wait_for(lambda: any((c / CHECKPOINT_MARK).is_file() for c in checkpoints.glob("checkpoint-*"))
                 or proc.poll() is not None, timeout=400)  # a loaded machine: process start and steps 10x slower
        assert proc.poll() is None, "the run finished before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert not killed.exists()
    left = sorted(p.name for p in temporary.iterdir())
    assert [name.startswith(WEIGHTS_PREFIX) for name in left] == ([True] if engine == "served" else []), left
    resumed = burnqed_in_process("rl", *args, "--output", str(killed))
    assert resumed.returncode == 0, resumed.stderr
    assert "rl: resuming from checkpoint-" in resumed.stderr
    assert sorted(p.name for p in temporary.iterdir()) == left  # its own removed, the killed run's not yet stale
    assert (killed / "model.safetensors").read_bytes() == (whole / "model.safetensors").read_bytes()
    # The steps learned something (a group held both rewards), so equal weights are evidence of the same steps.
    assert (whole / "model.safetensors").read_bytes() != (sft_of(policy) / "model.safetensors").read_bytes()
    assert 1.0 in {json.loads(line)["reward"] for line in (whole / ROLLOUTS).read_text(encoding="utf-8").splitlines()}
    assert (killed / ROLLOUTS).read_bytes() == (whole / ROLLOUTS).read_bytes()
    prompts = {json.loads(line)["prompt"] for line in (whole / ROLLOUTS).read_text(encoding="utf-8").splitlines()}
    assert any(prompt.startswith("This Lean 4 proof does not compile:") for prompt in prompts)

    def untimed(folder: Path) -> list[dict[str, object]]:
        return [{k: v for k, v in json.loads(line).items()
                 if k not in ("wall_seconds", "lean_seconds", "generation_seconds")}
                for line in (folder / STEP_LOG).read_text(encoding="utf-8").splitlines()]

    assert untimed(killed) == untimed(whole) and len(untimed(whole)) == 8
    assert kept(killed) == kept(whole) and kept(whole)[0]
    assert json.loads((killed / RL_RECORD).read_text(encoding="utf-8"))["resumed_from_step"] in (2, 4, 6)
    assert json.loads((whole / RL_RECORD).read_text(encoding="utf-8"))["repair_prompts"] == len(THEOREMS)


def test_each_rl_setting_becomes_grpo_config_fields_by_one_table_of_existing_names() -> None:
    """GRPO_FIELDS names only fields GRPOConfig has (a rename to a name TRL lacks fails here), and every RlConfig
    field is in it or in DERIVED_FIELDS (a new setting is in one place or the other)."""
    pytest.importorskip("trl")
    from trl.trainer.grpo_config import GRPOConfig

    grpo = {field.name for field in dataclasses.fields(GRPOConfig)}
    assert sorted(name for names in GRPO_FIELDS.values() for name in names if name not in grpo) == []
    assert set(GRPO_FIELDS) | set(DERIVED_FIELDS) == set(RlConfig.model_fields)
    assert not set(GRPO_FIELDS) & set(DERIVED_FIELDS)
    rl = RlConfig(max_completion_tokens=33, seed=5, loss_type="grpo", save_steps=3)
    assert grpo_fields(rl) == {"num_generations": 4, "loss_type": "grpo", "beta": 0.0, "temperature": 1.0,
                               "max_completion_length": 33, "learning_rate": 1e-5, "max_steps": 20, "save_steps": 3,
                               "seed": 5, "data_seed": 5}


def test_the_settings_are_in_config_describe() -> None:
    keys = {key.path for key in describe("rl")}
    assert keys == {"rl.enabled", "rl.theorems", "rl.num_generations", "rl.prompts_per_step", "rl.loss_type",
                    "rl.beta", "rl.temperature", "rl.max_completion_tokens", "rl.max_prompt_tokens", "rl.learning_rate",
                    "rl.rollout_engine", "rl.server_url", "rl.max_steps", "rl.processes",
                    "rl.save_steps", "rl.seed"}
    described = {key.path: key for key in describe("rl")}
    assert "TRL's default 'dapo'" in described["rl.loss_type"].description
    assert "TRL's default 0.0" in described["rl.beta"].description


def test_iterate_has_an_rl_stage_between_sft_and_export_only_when_enabled() -> None:
    previous = PipelineConfig(start="previous")  # warm starts from iteration i-1 (the default trains the base)
    off = build_iteration(previous, "runs", 1)
    assert "rl" not in off.names and off.stage("export").argv == ("export", "--sft", "runs/iter_1/sft", "--output",
                                                                  "runs/iter_1/export")
    assert off.stage("sft").argv[-3:-2] == ("runs/iter_0/sft",)
    on = build_iteration(previous, "runs", 1, rl=True)
    assert on.names[on.names.index("sft") + 1:on.names.index("export") + 1] == ["rl", "export"]
    assert on.stage("rl").argv == (
        "rl", "--iter", "1", "--sft", "runs/iter_1/sft", "--theorems", "runs/iter_0/data/theorems.json", "--split",
        "train,pool", "--trajectories", "runs/iter_0/trajectories", "--output", "runs/iter_1/rl")
    assert on.stage("export").argv[:3] == ("export", "--sft", "runs/iter_1/rl")
    assert on.stage("sft").argv[-3:-2] == ("runs/iter_0/rl",)  # iteration 1 warm-starts from what 0 exported
    # and reads iteration 0's rollouts (kept as a trajectory in its rl output) after its search trajectories; the
    # value model reads the search trajectories alone (the rollouts hold no proof state)
    assert on.stage("sft").argv[5:9] == ("--trajectories", "runs/iter_0/trajectories", "--trajectories",
                                         "runs/iter_0/rl/trajectories")
    assert on.stage("sft").inputs == ("runs/iter_0/data", "runs/iter_0/trajectories", "runs/iter_0/rl/trajectories",
                                      "runs/iter_0/rl")
    assert on.stage("train-ebm").argv == off.stage("train-ebm").argv
    assert build_iteration(previous, "runs", 2, rl=True).stage("sft").argv[5:13] == (
        "--trajectories", "runs/iter_0/trajectories", "--trajectories", "runs/iter_0/rl/trajectories",
        "--trajectories", "runs/iter_1/trajectories", "--trajectories", "runs/iter_1/rl/trajectories")
    joint = build_iteration(previous, "runs", 1, joint=True, rl=True)
    assert joint.stage("study-sft-a").argv[5:9] == on.stage("sft").argv[5:9]  # the study's A trains on the same data
    assert "runs/iter_1/rl" in on.stage("report").inputs and "runs/iter_1/rl" not in off.stage("report").inputs
    assert [s for s in on.stages if s.name not in ("rl", "report")][3:] == [s for s in off.stages
                                                                         if s.name != "report"][3:]
    # pipeline.start = "best" names the rl outputs among what its start record may pick
    best = build_iteration(PipelineConfig(start="best"), "runs", 2, rl=True).stage("sft")
    assert best.inputs[-3:] == ("runs/iter_2/start.json", "runs/iter_0/rl", "runs/iter_1/rl")



def test_a_steps_prompts_and_solved_prompts_are_counted_by_prompt_not_by_theorem() -> None:
    """A theorem's whole prompt and its repair prompt in one step are two prompts; one solved, the other not."""
    from types import SimpleNamespace

    from burnqed.lean.soundness import Verdict
    from burnqed.rl.grpo_step import Journal, RecordingReward
    from burnqed.rl.reward import RewardStats

    rewards = (1.0, 0.0, 0.0, 0.0)

    class Judged:
        def __init__(self) -> None:
            self.settings = SimpleNamespace(fmt=None)
            self.guard = None
            self.theorems = {"t": Theorem(name="t"), "u": Theorem(name="u")}
            verdicts = (Verdict(ok=True), Verdict(ok=False), Verdict(ok=False), Verdict(ok=False))
            self.last = RewardStats(rewards, ("", "x", "x", "x"), 1, 0, 4, 0, 0, 0.5, 0.6, verdicts)

        async def judge(self, *_: object, **__: object) -> list[float]:
            return list(rewards)

    journal = Journal()
    recorder = RecordingReward(Judged(), journal)  # type: ignore[arg-type]
    assert asyncio.run(recorder(prompts=["whole t", "repair t", "whole u", "whole u"], completions=["a", "b", "c", "d"],
                                completion_ids=[[1], [1, 2], [3], []], theorem=["t", "t", "u", "u"],
                                trainer_state=SimpleNamespace(global_step=0))) == list(rewards)
    tally = journal.pending
    assert tally is not None and (tally.step, tally.prompts, tally.solved, tally.tokens) == (1, 3, 1, 4)


# ------------------------------------------------------------------------------------------------ rollout engines


@pytest.mark.slow
@pytest.mark.timeout(600)  # the tiny policy's fixture and a trainer on 2 shared cores
@pytest.mark.parametrize("engine", ["trainer", "continuous"])
def test_under_each_engine_burnqed_rl_samples_scores_cut_completions_zero_and_records_it(
        engine: str, policy: Path, tmp_path: Path, store: Store) -> None:
    from transformers import TrainerCallback

    class FrozenObjects(TrainerCallback):
        """gc's frozen objects at each step's start: what the stage lived on before training stays out of the
        collections (continuous batching's two gc.collect() a step read the step's objects alone)."""

        def __init__(self) -> None:
            self.counts: list[int] = []

        def on_step_begin(self, *_: object, **__: object) -> None:
            self.counts.append(gc.get_freeze_count())

    frozen = FrozenObjects()
    # 12 tokens: the taught proofs (`norm_num`, ...) end within them, a longer completion is cut
    cfg = config(rollout_engine=engine, max_completion_tokens=12)
    output = str(tmp_path / "rl")
    lines: list[str] = []
    outcome = run_rl(RlRequest(iteration=0, sft=str(sft_of(policy)), output=output),
                     select_theorems(THEOREMS, "all", set()), RlSettings.from_config(cfg),
                     open_pool=lambda: LeanPool.from_config(cfg.lean, size=1), store=store, echo=lines.append,
                     callbacks=[frozen])
    assert len(frozen.counts) == 2 and min(frozen.counts) > 100_000  # torch, transformers, TRL, the model
    assert gc.get_freeze_count() == 0  # unfrozen at the end: the caller's process collects as before
    folder = Path(output)
    record = json.loads((folder / RL_RECORD).read_text(encoding="utf-8"))
    assert record["rollout_engine"] == engine and record["settings"]["rollout_engine"] == engine
    steps = [json.loads(line) for line in (folder / STEP_LOG).read_text(encoding="utf-8").splitlines()]
    rollouts = [json.loads(line) for line in (folder / ROLLOUTS).read_text(encoding="utf-8").splitlines()]
    assert outcome.record.steps == 2 and len(rollouts) == 8
    assert all(0 < r["tokens"] <= 12 for r in rollouts)
    cut = [r for r in rollouts if r["truncated"]]
    # A cut completion earns 0.0 and is never compiled; every verified one ended before the bound.
    assert all(r["reward"] == 0.0 and r["reason"] == TRUNCATED and r["tokens"] == 12 and "```" not in r["completion"]
               for r in cut)
    assert all(not r["truncated"] for r in rollouts if r["reward"] == 1.0)
    assert record["truncated"] == len(cut) == sum(s["truncated"] for s in steps)
    assert all(0 <= s["generation_seconds"] <= s["wall_seconds"] for s in steps)
    assert [line.split(" reward")[0] for line in lines] == ["rl: step 1/2", "rl: step 2/2"]


@pytest.mark.slow
@pytest.mark.timeout(600)  # the tiny policy's fixture and a trainer on 2 shared cores
def test_continuous_batching_is_seeded_by_rl_seed_a_rerun_samples_the_same_rollouts(policy: Path, tmp_path: Path,
                                                                                     store: Store) -> None:
    lean = config().lean
    runs = []
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        cfg = config(rollout_engine="continuous", max_steps=1, seed=seed)
        run_rl(RlRequest(iteration=0, sft=str(sft_of(policy)), output=str(tmp_path / name)),
               select_theorems(THEOREMS, "all", set()), RlSettings.from_config(cfg),
               open_pool=lambda: LeanPool.from_config(lean, size=1), store=store, echo=lambda _: None)
        runs.append([(r["theorem"], r["completion"]) for r in map(
            json.loads, (tmp_path / name / ROLLOUTS).read_text(encoding="utf-8").splitlines())])
    assert runs[0] == runs[1] and len(runs[0]) == 4
    assert runs[2] != runs[0]


def test_the_engine_becomes_trls_settings_and_continuous_batchings_cache_holds_the_step() -> None:
    assert engine_args(RlConfig()) == {}
    # 2 × 4 sequences of 512 + 96 tokens: 3 pages of 256 each; a batch holds the step's 8 prompts of 512 tokens
    assert engine_args(RlConfig(rollout_engine="continuous")) == {
        "use_transformers_continuous_batching": True,
        "transformers_continuous_batching_config": {"num_blocks": 24, "max_memory_percent": 0.9,
                                                    "max_batch_tokens": 8 * 512}}
    long = RlConfig(rollout_engine="continuous", max_prompt_tokens=1024, max_completion_tokens=4096,
                    prompts_per_step=8, num_generations=8)
    # 64 prompts of 1024 tokens: transformers' default batch (8,192 tokens), never more
    assert engine_args(long)["transformers_continuous_batching_config"] == {"num_blocks": 64 * 20,
                                                                           "max_memory_percent": 0.9,
                                                                           "max_batch_tokens": 8192}
    assert engine_args(RlConfig(rollout_engine="served")) == {}  # TRL's rollout_func instead (tests/rl/test_served.py)


def test_a_completion_cut_at_the_bound_earns_zero_without_reaching_the_reward() -> None:
    """Cut = max_completion_tokens ids, the last no end-of-sequence token and the text without a stop string (the
    closing fence); the reward sees only the others, its per-completion column is spread back over the batch, and a
    batch of cut completions calls no reward at all."""
    from types import SimpleNamespace

    from burnqed.lean.soundness import Verdict
    from burnqed.rl.grpo_step import Journal, RecordingReward
    from burnqed.rl.reward import RewardStats

    seen: list[list[str]] = []

    class Judged:
        def __init__(self) -> None:
            self.settings = SimpleNamespace(fmt=None)
            self.guard = None
            self.theorems = {"t": Theorem(name="t")}
            self.last: RewardStats | None = None

        async def judge(self, prompts: list[str], completions: list[str], theorem: list[str], log_extra: object = None,
                        **_: object) -> list[float]:
            seen.append(completions)
            rewards = tuple(1.0 if c.startswith("proof") else 0.0 for c in completions)
            self.last = RewardStats(rewards, tuple("" if r else "x" for r in rewards), sum(map(int, rewards)), 0,
                                    len(rewards), 0, 0, 0.25, 0.3, tuple(Verdict(ok=bool(r)) for r in rewards))
            assert callable(log_extra)
            log_extra("lean_verdict", list(self.last.reasons))
            return list(rewards)

    journal = Journal()
    recorder = RecordingReward(Judged(), journal, cut_at=3, end_ids=[9], stops=["```"])  # type: ignore[arg-type]
    extra: list[tuple[str, list[str]]] = []
    metrics: dict[str, float] = {}
    state = SimpleNamespace(global_step=0)
    rewards = asyncio.run(recorder(
        prompts=["p"] * 6, completions=["proof a", "proof b", "proof c", "junk", "proof e", "proof f\n```\nmore"],
        completion_ids=[[1, 2, 9], [1, 2, 3], [1, 9], [1, 2, 3, 4], [1, 2], [1, 2, 3]], theorem=["t"] * 6,
        trainer_state=state, log_extra=lambda c, v: extra.append((c, v)), log_metric=metrics.__setitem__))
    # ended by 9 at the bound: finished; 3 ids without 9 nor the fence: cut (a proof's text or not); shorter:
    # finished; the fence and past it at the bound: finished where search stops (TRL sampled on)
    assert rewards == [1.0, 0.0, 1.0, 0.0, 1.0, 1.0]
    assert seen == [["proof a", "proof c", "proof e", "proof f\n```\nmore"]]
    assert extra == [("lean_verdict", ["", TRUNCATED, "", TRUNCATED, "", ""])]
    assert metrics == {"rollouts/truncated": 2.0}
    assert [(r.truncated, r.reason, r.feedback) for r in journal.rollouts] == [
        (False, "", None), (True, TRUNCATED, None), (False, "", None), (True, TRUNCATED, None), (False, "", None),
        (False, "", None)]
    assert journal.pending is not None
    assert (journal.pending.truncated, journal.pending.lean_s, journal.pending.tokens) == (2, 0.25, 17)
    assert asyncio.run(recorder(prompts=["p"], completions=["proof"], completion_ids=[[1, 2, 3]], theorem=["t"],
                                trainer_state=state)) == [0.0]
    assert len(seen) == 1 and journal.pending.lean_s == 0.0  # all cut: no reward call

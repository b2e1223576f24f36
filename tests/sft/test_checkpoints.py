"""Which settings decide whether an SFT run's checkpoints may resume: `TRAINING_KEYS`, one list for every trainer.
Changing a listed setting refuses the checkpoints with one line naming it; a setting added later (a new field of
any section, set or left unset) and every unlisted one keep them resumable; the head's settings and the joint keys
count only for joint runs; a run.json an older burnqed wrote (a fingerprint alone) is refused, not misread."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from burnqed.config import EbmConfig, SftConfig
from burnqed.errors import InputError
from burnqed.sft.checkpoints import RUN_FILE, STATE_FILE, TRAINING_KEYS, CheckpointStore, training_settings
from burnqed.storage import Store

ADVICE = "resume with the same ones, or pass --force to start over (deletes them)"
# A valid value other than the default for every listed key (the first test keeps this table complete).
CHANGED: dict[str, Any] = {
    "sft.method": "lora", "sft.lora_r": 8, "sft.lora_alpha": 16, "sft.target_modules": ["q_proj"],
    "sft.lora_dropout": 0.0, "sft.bf16": True, "sft.max_steps": 200, "sft.warm_steps": 20, "sft.scheduler": "linear",
    "sft.warmup_steps": 0, "sft.batch_size": 8, "sft.grad_accum": 2, "sft.max_length": 1024, "sft.packing": False,
    "sft.base_subsample": 100, "sft.positive_upsample": 10, "sft.eval_fraction": 0.2, "sft.weight_decay": 0.01,
    "sft.max_grad_norm": 0.5, "sft.seed": 1, "sft.joint_weight": 0.5, "sft.joint_groups": 4,
    "sft.later_epochs": 2.0, "sft.proofs_per_theorem": "shortest",
    "ebm.hidden_dims": [32], "ebm.dropout": 0.0, "ebm.spectral_norm": False, "ebm.first_layer_scale": 1.0,
    "ebm.init_temperature": 2.0, "ebm.negatives": 3, "ebm.sibling_ratio": 0.5, "ebm.same_theorem_ratio": 0.4,
    "ebm.other_theorem_ratio": 0.2, "ebm.farther_negatives": 0, "ebm.depth_loss_weight": 0.1,
    "ebm.valid_fraction": 0.3, "ebm.pooling": "last", "ebm.normalize": True, "ebm.encoder_max_tokens": 512,
    "ebm.seed": 1,
}
# Settings a resumed run may change, one of each kind: learning rates (what an abort asks to lower), cadences,
# devices, threads and processes, memory trades, abort bounds, export checks, the base model's path (its weights
# are an input), sft.proof_examples (its effective value is an input), and train-ebm's own settings.
UNLISTED: dict[str, Any] = {
    "sft.learning_rate": 1e-4, "sft.lr_decay_per_iter": 0.9, "sft.joint_head_learning_rate": 0.05,
    "sft.logging_steps": 7, "sft.eval_steps": 7, "sft.save_steps": 7, "sft.joint_log_every": 7,
    "sft.joint_probe_every": 7, "sft.keep_checkpoints": True, "sft.device": "cpu", "sft.cpu_threads": 2,
    "sft.processes": 2, "sft.gradient_checkpointing": True, "sft.attn_implementation": "eager",
    "sft.joint_min_centroid_l2": 0.1, "sft.joint_max_sft_loss": 5.0, "sft.joint_abort_after": 3,
    "sft.joint_max_embedding_diff": 0.1, "sft.export_dtype": "bfloat16", "sft.base_model": "/models/elsewhere",
    "sft.proof_examples": True, "ebm.temperature_min": 0.6, "ebm.learning_rate": 0.1, "ebm.steps": 7,
    "ebm.encode_batch_tokens": 1024, "ebm.device": "cpu",
}


def changed(key: str, value: Any) -> tuple[SftConfig, EbmConfig]:
    """The default sections with `key` (section.name) set to `value`, validated."""
    section, name = key.split(".", 1)
    sft, ebm = SftConfig(), EbmConfig()
    if section == "sft":
        return SftConfig.model_validate({**sft.model_dump(), name: value}), ebm
    return sft, EbmConfig.model_validate({**ebm.model_dump(), name: value})


def with_a_checkpoint(tmp_path: Path, settings: dict[str, Any]) -> CheckpointStore:
    """The checkpoint folder of a run of `settings` that saved step 4."""
    store = CheckpointStore.for_output(str(tmp_path / "sft"), store=Store(cache_dir=tmp_path / "cache"))
    store.prepare(settings, fresh=False)
    (store.local / "checkpoint-4").mkdir()
    (store.local / "checkpoint-4" / STATE_FILE).write_text("{}", encoding="utf-8")
    return store


def test_every_listed_key_and_no_other_has_a_changed_value_here() -> None:
    assert set(CHANGED) == set(TRAINING_KEYS)
    assert not set(UNLISTED) & set(TRAINING_KEYS)
    defaults = training_settings(SftConfig(), EbmConfig())
    assert [key for key in TRAINING_KEYS if defaults[key] == CHANGED[key]] == []


@pytest.mark.parametrize("key", TRAINING_KEYS)
def test_changing_a_listed_setting_refuses_the_checkpoints_in_one_line_naming_it(tmp_path: Path, key: str) -> None:
    before = training_settings(SftConfig(), EbmConfig())
    store = with_a_checkpoint(tmp_path, before)
    after = training_settings(*changed(key, CHANGED[key]))
    with pytest.raises(InputError) as caught:
        store.prepare(after, fresh=False)
    was = "unset" if before[key] is None else json.dumps(before[key])  # a setting left at None reads "unset"
    assert str(caught.value) == (f"checkpoints in {store.local} were written under other settings: {key} was "
                                 f"{was}, is {json.dumps(CHANGED[key])}; {ADVICE}")
    assert store.latest() == store.local / "checkpoint-4"  # refused, nothing deleted


@pytest.mark.parametrize("key", sorted(UNLISTED))
def test_changing_an_unlisted_setting_keeps_the_checkpoints(tmp_path: Path, key: str) -> None:
    store = with_a_checkpoint(tmp_path, training_settings(SftConfig(), EbmConfig()))
    store.prepare(training_settings(*changed(key, UNLISTED[key])), fresh=False)
    assert store.latest() == store.local / "checkpoint-4"


def test_a_setting_added_later_keeps_the_checkpoints_resumable(tmp_path: Path) -> None:
    class LaterSft(SftConfig):
        later_knob: int | None = None  # a field a later change adds, unset by default

    class LaterEbm(EbmConfig):
        later_head_knob: str = "on"

    store = with_a_checkpoint(tmp_path, {**training_settings(SftConfig(), EbmConfig()), "--data": "/d"})
    for sft in (LaterSft(), LaterSft(later_knob=3)):
        store.prepare({**training_settings(sft, LaterEbm(later_head_knob="off")), "--data": "/d"}, fresh=False)
        assert store.latest() == store.local / "checkpoint-4"
    # Its run.json records only the listed settings and the inputs: a run without the new fields resumes too.
    recorded = json.loads((store.local / RUN_FILE).read_text(encoding="utf-8"))["settings"]
    assert set(recorded) == {*TRAINING_KEYS, "--data"}
    store.prepare({**training_settings(SftConfig(), EbmConfig()), "--data": "/d"}, fresh=False)
    assert store.latest() == store.local / "checkpoint-4"


def test_an_input_that_differs_is_named_as_the_command_line_gives_it(tmp_path: Path) -> None:
    settings = {**training_settings(SftConfig(), None), "--data": "/runs/a/data", "--init": None}
    store = with_a_checkpoint(tmp_path, settings)
    with pytest.raises(InputError) as caught:
        store.prepare({**settings, "--data": "/runs/b/data", "--init": "/runs/a/sft"}, fresh=False)
    assert str(caught.value) == (f"checkpoints in {store.local} were written under other settings: --data was "
                                 '"/runs/a/data", is "/runs/b/data"; --init was unset, is "/runs/a/sft"; ' + ADVICE)
    store.prepare({**settings, "--data": "/runs/b/data"}, fresh=True)  # --force: starts over
    assert store.latest() is None


def test_the_head_and_joint_settings_count_only_for_joint_runs(tmp_path: Path) -> None:
    plain = training_settings(SftConfig(), None)
    assert [key for key in TRAINING_KEYS if key not in plain] == [
        key for key in TRAINING_KEYS if key.startswith(("ebm.", "sft.joint_"))]
    store = with_a_checkpoint(tmp_path, plain)
    store.prepare(training_settings(SftConfig(joint_groups=4, joint_weight=0.5), None), fresh=False)
    assert store.latest() == store.local / "checkpoint-4"


def test_a_run_file_without_settings_is_refused_as_an_older_run(tmp_path: Path) -> None:
    store = with_a_checkpoint(tmp_path, training_settings(SftConfig(), None))
    (store.local / RUN_FILE).write_text(json.dumps({"fingerprint": "sha256:0123"}) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        store.prepare(training_settings(SftConfig(), None), fresh=False)
    assert str(caught.value) == (f"checkpoints in {store.local} were written by a run with other settings or inputs "
                                 f"(an older burnqed recorded no list of them); {ADVICE}")


def test_a_checkpoint_under_a_mark_of_its_own_counts_once_sealed_and_sealing_drops_the_older_ones(
        tmp_path: Path) -> None:
    """A stage whose checkpoint holds files of its own after the trainer's (RL's journal) names its mark: the trainer's
    last file is not enough, `seal` writes the mark (renamed into place) and deletes the older checkpoints, never the
    sealed one nor a newer one."""
    store = CheckpointStore.for_output(str(tmp_path / "rl"), store=Store(cache_dir=tmp_path / "cache"),
                                       mark="complete.json")
    store.prepare({"a": 1}, fresh=False)
    for step in (2, 4, 6):
        (store.local / f"checkpoint-{step}").mkdir()
        (store.local / f"checkpoint-{step}" / STATE_FILE).write_text("{}", encoding="utf-8")
    assert store.latest() is None  # the trainer's files alone
    store.seal(store.local / "checkpoint-4")
    assert store.latest() == store.local / "checkpoint-4"
    assert sorted(p.name for p in store.local.iterdir()) == ["checkpoint-4", "checkpoint-6", RUN_FILE]
    assert sorted(p.name for p in (store.local / "checkpoint-4").iterdir()) == ["complete.json", STATE_FILE]
    assert json.loads((store.local / "checkpoint-4" / "complete.json").read_text(encoding="utf-8")) == {"step": 4}
    store.prepare({"a": 1}, fresh=False)  # a re-run: the unsealed checkpoint-6 is dropped
    assert sorted(p.name for p in store.local.iterdir()) == ["checkpoint-4", RUN_FILE]

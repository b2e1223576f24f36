"""SFT on the tiny model: the loss falls, a crashed run resumes where its checkpoint left off (locally and from a
remote copy), LoRA exports merge exactly, QLoRA trains on CPU, iteration 1 warm-starts from iteration 0, and
iteration 0 reads no setting that only later iterations read (`sft-later`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from transformers import TrainerCallback

from burnqed.config import SftConfig
from burnqed.data.pairs import THEOREMS_FILE, corpus_pairs
from burnqed.errors import InputError, ModelError
from burnqed.policy.base import Sampling
from burnqed.policy.localmodel import LocalModel
from burnqed.policy.modelfolder import describe, differences
from burnqed.records.results import EdgeOutcome
from burnqed.records.theorem import Theorem, TheoremIndex
from burnqed.sft.checkpoints import STATE_FILE
from burnqed.sft.export import ExportRequest, probe_ids, run_export
from burnqed.sft.manifests import SFT_RECORD, read_sft_record
from burnqed.sft.train import SftOutcome, SftRequest, run_sft
from burnqed.sft.trainer import is_checkpoint_folder, plan_training, scale_steps
from burnqed.storage import MARKER_NAME, Store
from burnqed.text.prompt import PromptFormat, build_prompt
from burnqed.trajectory.labels import label_edges
from leankit.corpus import load_corpus
from tests.sft.helpers import write_data_folder
from tests.trajectory.factories import edge, result, write_trajectory

FMT = PromptFormat.PLAIN_TACTIC


def config(tiny: Path, **overrides: Any) -> SftConfig:
    settings: dict[str, Any] = {"base_model": str(tiny), "device": "cpu", "batch_size": 2, "max_steps": 6,
                                "warmup_steps": 0, "logging_steps": 1, "eval_steps": 3, "save_steps": 3}
    return SftConfig(**{**settings, **overrides})


def sft(tmp_path: Path, cfg: SftConfig, name: str = "sft", proof_examples: bool = False,
        **request: Any) -> SftOutcome:
    data = tmp_path / "data"
    if not data.exists():
        write_data_folder(data)
    return run_sft(SftRequest(data=str(data), output=str(tmp_path / name), **{"iteration": 0, **request}),
                   cfg, FMT, echo=lambda _: None, store=Store(cache_dir=tmp_path / "cache"),
                   proof_examples=proof_examples)


class Steps(TrainerCallback):
    """Records the global step after every optimizer step; raises after the checkpoint at `crash_at` is saved."""

    def __init__(self, crash_at: int | None = None) -> None:
        self.steps: list[int] = []
        self.crash_at = crash_at

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.steps.append(int(state.global_step))

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step == self.crash_at:
            raise KeyboardInterrupt("simulated crash right after a checkpoint")


@pytest.mark.slow
def test_full_sft_loss_falls_and_the_output_is_a_loadable_model(tmp_path: Path, tiny_model_dir: Path,
                                                                store: Store) -> None:
    lines: list[str] = []
    write_data_folder(tmp_path / "data")
    request = SftRequest(iteration=0, data=str(tmp_path / "data"), output=str(tmp_path / "sft"))
    # 18 steps: the last logged loss is 0.69 of the first (30 steps: 0.61)
    cfg = config(tiny_model_dir, max_steps=18, batch_size=4, learning_rate=5e-3, logging_steps=6, eval_steps=9,
                 save_steps=9)
    outcome = run_sft(request, cfg, FMT, echo=lines.append, store=store)

    record = outcome.record
    assert not outcome.skipped and record.method == "full" and record.steps == 18
    assert record.first_train_loss is not None and record.train_loss is not None
    assert record.train_loss < 0.8 * record.first_train_loss  # the loss falls
    assert record.eval_loss is not None and record.data_counts.eval_source == "valid-split"
    assert [p.step for p in record.history if p.loss is not None] == [6, 12, 18]
    assert [p.step for p in record.history if p.eval_loss is not None] == [9, 18]
    assert record.tokens_per_second and record.tokens_per_second > 0
    assert record.prompt_format is FMT and record.base_model == str(tiny_model_dir)
    assert any("tokens/s" in line and "loss" in line and "lr" in line for line in lines)
    assert any("eval loss" in line for line in lines)
    names = {p.name for p in (tmp_path / "sft").iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", SFT_RECORD, MARKER_NAME} <= names
    assert not (tmp_path / "sft-checkpoints").exists()  # dropped once published
    model = LocalModel.load(tmp_path / "sft", device="cpu", seed=0)
    [[completion]] = model.generate([build_prompt(FMT, "x : ℕ\n⊢ x + 0 = x")], Sampling(n=1, temperature=0.0,
                                                                                     stop=("```",)))
    assert completion.n_tokens > 0
    model.close()
    # Done: a re-run does nothing.
    again = run_sft(request, cfg, FMT, echo=lines.append, store=store)
    assert again.skipped and again.record == record


@pytest.mark.slow
def test_a_crashed_run_resumes_from_its_last_checkpoint(tmp_path: Path, tiny_model_dir: Path, store: Store) -> None:
    cfg = config(tiny_model_dir, max_steps=8, save_steps=4, eval_steps=100)
    crash = Steps(crash_at=4)
    data = write_data_folder(tmp_path / "data")
    with pytest.raises(KeyboardInterrupt):
        run_sft(SftRequest(iteration=0, data=str(data), output=str(tmp_path / "sft")), cfg, FMT,
                echo=lambda _: None, callbacks=[crash], store=store)
    assert crash.steps == [1, 2, 3, 4]
    checkpoints = tmp_path / "sft-checkpoints"
    assert (checkpoints / "checkpoint-4" / STATE_FILE).is_file() and not (tmp_path / "sft").exists()

    # Checkpoints written under other training settings are refused in one line naming the setting, and kept.
    with pytest.raises(InputError) as refused:
        run_sft(SftRequest(iteration=0, data=str(data), output=str(tmp_path / "sft")),
                cfg.model_copy(update={"seed": 1}), FMT, echo=lambda _: None, store=store)
    assert str(refused.value) == (f"checkpoints in {checkpoints} were written under other settings: "
                                  "sft.seed was 0, is 1; resume with the same ones, or pass --force to start over "
                                  "(deletes them)")
    assert (checkpoints / "checkpoint-4" / STATE_FILE).is_file() and not (tmp_path / "sft").exists()

    # The re-run resumes under a configuration with a field added later and a lowered learning rate (neither is
    # in sft.checkpoints.TRAINING_KEYS): the optimizer continues, at the new peak rate from step 5 on.
    class Later(SftConfig):
        later_knob: int = 3

    lowered = Later(**{**cfg.model_dump(), "learning_rate": cfg.learning_rate / 4})
    resumed = Steps()
    outcome = run_sft(SftRequest(iteration=0, data=str(tmp_path / "data"), output=str(tmp_path / "sft")),
                      lowered, FMT, echo=lambda _: None, callbacks=[resumed], store=store)
    assert resumed.steps == [5, 6, 7, 8]  # continues, does not restart
    assert outcome.record.resumed_from_step == 4 and outcome.record.steps == 8
    assert [p.step for p in outcome.record.history if p.loss is not None] == list(range(1, 9))
    assert not checkpoints.exists()

    # --force redoes a finished output from scratch.
    forced = Steps()
    redone = run_sft(SftRequest(iteration=0, data=str(data), output=str(tmp_path / "sft"), force=True), cfg, FMT,
                     echo=lambda _: None, callbacks=[forced], store=store)
    assert forced.steps == list(range(1, 9)) and not redone.skipped and redone.record.resumed_from_step is None
    rates = {run: {p.step: p.learning_rate or 0.0 for p in record.history if p.loss is not None}
             for run, record in (("resumed", outcome.record), ("whole", redone.record))}
    assert [rates["resumed"][step] for step in range(1, 5)] == [rates["whole"][step] for step in range(1, 5)]
    assert [rates["resumed"][step] for step in range(5, 9)] == pytest.approx(
        [rates["whole"][step] / 4 for step in range(5, 9)], rel=1e-9)


def test_a_resumed_schedule_runs_at_the_configured_peaks_from_its_position_and_reports_them() -> None:
    """What StepRules does on train begin of a resumed run, after the trainer loaded the checkpoint's optimizer and
    schedule over ones made at the new peaks: each group's rate is the new peak × the schedule's factor at the
    checkpoint's position (exactly the rate an uninterrupted run at those peaks has there), `get_last_lr()` (what the
    trainer logs) says so, and the next step goes on from there."""
    import torch
    from transformers import get_scheduler

    from burnqed.sft.trainer import _restore_peaks

    def made(peaks: list[float]) -> tuple[Any, Any]:
        groups = [{"params": [torch.nn.Parameter(torch.ones(1))], "lr": peak} for peak in peaks]
        optimizer = torch.optim.AdamW(groups)
        return optimizer, get_scheduler("cosine", optimizer, num_warmup_steps=2, num_training_steps=10)

    optimizer, schedule = made([1e-3, 5e-2])
    for _ in range(4):
        optimizer.step()
        schedule.step()
    resumed, resumed_schedule = made([2.5e-4, 5e-2])
    resumed.load_state_dict(optimizer.state_dict())
    resumed_schedule.load_state_dict(schedule.state_dict())
    assert resumed_schedule.get_last_lr()[0] == 1e-3 * schedule.lr_lambdas[0](4)  # the checkpoint's peak
    _restore_peaks(resumed, resumed_schedule, [2.5e-4, 5e-2])
    factor = schedule.lr_lambdas[0]
    assert resumed_schedule.last_epoch == 4
    assert [group["lr"] for group in resumed.param_groups] == [2.5e-4 * factor(4), 5e-2 * factor(4)]
    assert resumed_schedule.get_last_lr() == [2.5e-4 * factor(4), 5e-2 * factor(4)]
    assert [group["initial_lr"] for group in resumed.param_groups] == [2.5e-4, 5e-2]
    resumed.step()
    resumed_schedule.step()
    assert resumed_schedule.get_last_lr() == [2.5e-4 * factor(5), 5e-2 * factor(5)]


@pytest.mark.slow
def test_a_remote_run_syncs_checkpoints_and_resumes_on_a_fresh_machine(tmp_path: Path, tiny_model_dir: Path) -> None:
    import fsspec

    memory = fsspec.filesystem("memory")
    output = "memory://bucket/run/iter_0/sft"
    data = write_data_folder(tmp_path / "data")
    cfg = config(tiny_model_dir, max_steps=6, save_steps=2, eval_steps=100)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_sft(SftRequest(iteration=0, data=str(data), output=output), cfg, FMT, echo=lambda _: None,
                    callbacks=[Steps(crash_at=4)], store=Store(cache_dir=tmp_path / "machine-1"))
        remote = [p.rsplit("/", 1)[1] for p in memory.ls("/bucket/run/iter_0/sft-checkpoints", detail=False)]
        assert sorted(remote) == ["checkpoint-4", "run.json"]  # the older checkpoint-2 was pruned
        shutil.rmtree(tmp_path / "machine-1")  # the pod is gone; only the bucket remains

        resumed = Steps()
        outcome = run_sft(SftRequest(iteration=0, data=str(data), output=output), cfg, FMT, echo=lambda _: None,
                          callbacks=[resumed], store=Store(cache_dir=tmp_path / "machine-2"))
        assert resumed.steps == [5, 6] and outcome.record.resumed_from_step == 4
        published = "/bucket/run/iter_0/sft"
        assert memory.exists(f"{published}/{SFT_RECORD}") and memory.exists(f"{published}/{MARKER_NAME}")
        assert not memory.exists("/bucket/run/iter_0/sft-checkpoints")
    finally:
        if memory.exists("/bucket"):
            memory.rm("/bucket", recursive=True)


@pytest.mark.slow
def test_lora_export_logits_equal_the_adapter_model(tmp_path: Path, tiny_model_dir: Path, store: Store,
                                                    transformers4_env: dict[str, str]) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cfg = config(tiny_model_dir, method="lora", lora_r=4, lora_alpha=8, max_steps=6, learning_rate=5e-2)
    outcome = sft(tmp_path, cfg)
    assert outcome.record.adapter_rank == 4 and outcome.record.trainable_params < outcome.record.total_params
    assert {"adapter_config.json", "adapter_model.safetensors", "tokenizer.json"} <= {
        p.name for p in (tmp_path / "sft").iterdir()}
    assert not (tmp_path / "sft" / "model.safetensors").exists()

    exported = run_export(ExportRequest(model=str(tmp_path / "sft"), output=str(tmp_path / "export")),
                          cfg.model_copy(update={"export_max_shard_size": "200kB"}), store=store)
    record = exported.record
    assert record.dtype == "float32" and record.max_logit_diff is not None and record.max_logit_diff < 1e-4
    shards = sorted(name for name in record.files if name.endswith(".safetensors"))
    assert len(shards) >= 2 and "model.safetensors.index.json" in record.files  # sharded at 200 kB
    assert record.params == sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(tiny_model_dir).parameters())

    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "export")
    probe = probe_ids(tokenizer, FMT)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    with torch.inference_mode():
        adapted = PeftModel.from_pretrained(base, tmp_path / "sft")  # inference mode: eval, adapter frozen
        expected = adapted(input_ids=probe).logits
        merged = AutoModelForCausalLM.from_pretrained(tmp_path / "export", dtype=torch.float32)
        got = merged(input_ids=probe).logits
        plain = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)(input_ids=probe).logits
    assert float((got - expected).abs().max()) < 1e-4
    assert float((plain - expected).abs().max()) > 1e-2  # the adapter changed something worth merging

    model = LocalModel.load(tmp_path / "export", device="cpu", seed=0)
    [[completion]] = model.generate([build_prompt(FMT, record.probe_state)],
                                    Sampling(n=1, temperature=0.0, max_new_tokens=48, stop=("```",)))
    model.close()
    assert completion.n_tokens > 0
    again = run_export(ExportRequest(model=str(tmp_path / "sft"), output=str(tmp_path / "export")), cfg, store=store)
    assert again.skipped and again.record == record

    # One model folder: transformers 4.57.1 (an older SGLang image) reads the export as this transformers does,
    # and its tokenizer probe is the one SFT trained with.
    from tests.policy.test_modelfolder import under_transformers4

    [there] = under_transformers4(transformers4_env, tmp_path / "export")
    assert differences(describe(tmp_path / "export"), there) == []
    assert record.tokenizer_probe == outcome.record.tokenizer_probe == there["tokenizer"]["probe"]
    assert record.tokenizer_probe is not None and record.tokenizer_probe[0] == tokenizer.bos_token_id
    # An SFT output whose recorded probe differs (another tokenization at training time) is refused.
    sft_json = tmp_path / "sft" / SFT_RECORD
    trained = read_sft_record(tmp_path / "sft")
    without_bos = record.tokenizer_probe[1:]
    sft_json.write_text(trained.model_copy(update={"tokenizer_probe": without_bos}).model_dump_json())
    with pytest.raises(ModelError, match=r"reads the probe prompt differently \(as SFT trained \(sft.json\): \["):
        run_export(ExportRequest(model=str(tmp_path / "sft"), output=str(tmp_path / "other-bos")), cfg, store=store)
    assert not (tmp_path / "other-bos").exists()
    sft_json.write_text(trained.model_dump_json())

    # A merge that moves the logits more than allowed is refused, and nothing is published.
    with pytest.raises(ModelError, match="the merge is broken"):
        run_export(ExportRequest(model=str(tmp_path / "sft"), output=str(tmp_path / "strict")),
                   cfg.model_copy(update={"export_max_logit_diff": 1e-12}), store=store)
    assert not (tmp_path / "strict").exists()


@pytest.mark.slow
def test_an_export_that_cannot_generate_fails_clearly(tmp_path: Path, tiny_model_dir: Path, store: Store) -> None:
    from safetensors.torch import load_file, save_file

    broken = tmp_path / "sft"
    shutil.copytree(tiny_model_dir, broken)
    weights = load_file(broken / "model.safetensors")
    save_file({name: tensor * float("nan") for name, tensor in weights.items()}, broken / "model.safetensors",
              metadata={"format": "pt"})
    outcome = sft(tmp_path, config(tiny_model_dir, max_steps=1), name="real")
    record = outcome.record.model_copy(update={"base_model": None})
    (broken / SFT_RECORD).write_text(record.model_dump_json(), encoding="utf-8")
    with pytest.raises(ModelError, match="its weights are broken"):
        run_export(ExportRequest(model=str(broken), output=str(tmp_path / "export")), config(tiny_model_dir),
                   store=store)
    assert not (tmp_path / "export").exists()
    with pytest.raises(InputError, match=r"has no sft\.json"):
        run_export(ExportRequest(model=str(tiny_model_dir), output=str(tmp_path / "export")), config(tiny_model_dir),
                   store=store)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_qlora_trains_on_cpu_with_bitsandbytes_and_its_export_measures_the_merge_gap(tmp_path: Path,
                                                                                     tiny_model_dir: Path) -> None:
    cfg = config(tiny_model_dir, method="qlora", lora_r=4, lora_alpha=8, max_steps=3, batch_size=1,
                 save_steps=100, eval_steps=100)
    outcome = sft(tmp_path, cfg)
    record = outcome.record
    assert record.method == "qlora" and record.steps == 3 and record.adapter_rank == 4
    assert record.train_loss is not None and 0 < record.train_loss < 10
    config_json = json.loads((tmp_path / "sft" / "adapter_config.json").read_text(encoding="utf-8"))
    assert config_json["r"] == 4 and config_json["peft_type"] == "LORA"
    # The export measures the merge gap: the adapter on its NF4 base vs the merged float model, held-out loss.
    store = Store(cache_dir=tmp_path / "cache")
    exported = run_export(ExportRequest(model=str(tmp_path / "sft"), output=str(tmp_path / "export")),
                          cfg.model_copy(update={"export_qlora_gap_examples": 8, "export_max_qlora_gap": None}),
                          store=store)
    gap = exported.record.qlora_gap
    assert gap is not None and gap.measured and gap.examples == 8 and "on cpu" in gap.reason
    assert gap.adapter_nf4_loss is not None and gap.merged_loss is not None
    assert 0 < gap.adapter_nf4_loss < 10 and 0 < gap.merged_loss < 10 and gap.merged_loss != gap.adapter_nf4_loss
    assert f"QLoRA gap: held-out loss adapter on NF4 {gap.adapter_nf4_loss:.4f}" in exported.summary
    print(exported.summary.splitlines()[-1])
    bound = gap.merged_loss - gap.adapter_nf4_loss - 1e-3  # just below the measured gap: refused with the figures
    with pytest.raises(ModelError, match=r"costs too much: held-out loss adapter on NF4 .*limit sft\.export_max_qlora"):
        run_export(ExportRequest(model=str(tmp_path / "sft"), output=str(tmp_path / "refused")),
                   cfg.model_copy(update={"export_qlora_gap_examples": 8, "export_max_qlora_gap": bound}), store=store)
    assert not (tmp_path / "refused").exists()


@pytest.mark.parametrize(("later_epochs", "iteration", "rows", "steps"), [
    (0.0, 1, 37, 40), (2.0, 0, 37, 300), (2.0, 1, 37, 10), (0.5, 2, 37, 3), (0.01, 1, 37, 1), (2.0, 1, 80, 20)])
def test_later_epochs_scale_the_steps_of_an_iteration_with_its_rows(later_epochs: float, iteration: int,
                                                                    rows: int, steps: int) -> None:
    """ceil(later_epochs × rows / (batch_size × grad_accum)) from iteration 1, at least one; warm_steps (40) at 0;
    iteration 0 keeps max_steps (300)."""
    cfg = SftConfig(device="cpu", batch_size=4, grad_accum=2, later_epochs=later_epochs)
    plan = plan_training(cfg, iteration, warm=iteration >= 1)
    assert scale_steps(plan, cfg, iteration, rows).steps == steps


@pytest.mark.slow
def test_iteration_one_warm_starts_from_iteration_zero_with_positives(tmp_path: Path, tiny_model_dir: Path,
                                                                      store: Store) -> None:
    cfg = config(tiny_model_dir, method="lora", lora_r=4, lora_alpha=8, max_steps=4, warm_steps=3,
                 learning_rate=1e-2, base_subsample=5, positive_upsample=4, later_epochs=0)  # 0: warm_steps
    sft(tmp_path, cfg, name="iter0")
    edges = [edge(1, 0, EdgeOutcome.CLOSED)]
    label_edges(edges, [1], proved=True)
    trajectories = f"file://{tmp_path}/traj0"
    write_trajectory(trajectories, [(result("searched_thm", True, edges=1, depth=1), edges)], store=store)

    # A different rank in the config does not matter: the warm start continues iteration 0's adapter.
    outcome = sft(tmp_path, cfg.model_copy(update={"lora_r": 8}), name="iter1", iteration=1,
                  trajectories=(trajectories,), init=str(tmp_path / "iter0"))
    record = outcome.record
    assert record.iteration == 1 and record.init == str(tmp_path / "iter0")
    assert record.steps == 3 and record.learning_rate == pytest.approx(1e-2 * 0.5)
    assert record.adapter_rank == 4
    counts = record.data_counts
    assert (counts.base_pairs, counts.positives, counts.positive_upsample) == (5, 1, 4)
    assert counts.train_examples == 5 + 4 and counts.proof_examples == 0
    assert read_sft_record(tmp_path / "iter1").trajectories == [trajectories]
    # With proof examples, the verified path also trains the proof-from-state format (upsampled alike).
    proofs = sft(tmp_path, cfg, name="iter1-proofs", iteration=1, trajectories=(trajectories,),
                 init=str(tmp_path / "iter0"), proof_examples=True).record.data_counts
    assert (proofs.positives, proofs.proof_examples, proofs.train_examples) == (1, 1, 5 + 4 + 4)
    # sft.later_epochs: the steps follow the data, 2 passes over 9 unpacked rows at 2 rows a step
    scaled = sft(tmp_path, cfg.model_copy(update={"later_epochs": 2.0, "packing": False}), name="iter1-epochs",
                 iteration=1, trajectories=(trajectories,), init=str(tmp_path / "iter0")).record
    assert (scaled.steps, scaled.data_counts.rows) == (9, 9)

    with pytest.raises(InputError, match="trained with method 'lora'"):
        sft(tmp_path, cfg.model_copy(update={"method": "full"}), name="iter1-full", iteration=1,
            trajectories=(trajectories,), init=str(tmp_path / "iter0"))


@pytest.mark.slow
def test_iteration_zero_with_proof_examples_trains_the_whole_format_on_the_datas_proofs(tmp_path: Path,
                                                                                          tiny_model_dir: Path) -> None:
    """With proof examples on, iteration 0 trains each train theorem's replayed proof in the whole format beside the
    tactic pairs (what the rl stage samples, so a policy RL starts from has seen it), counted in sft.json. The
    corpus' first six theorems: four train theorems with 9 pairs, one valid (held out), one test."""
    write_data_folder(tmp_path / "data", corpus_pairs(6))
    index = TheoremIndex(name="data", theorems=[Theorem(name=t.name, statement=t.statement, header=t.header)
                                                for t in load_corpus().theorems[:6]])
    (tmp_path / "data" / THEOREMS_FILE).write_text(index.model_dump_json(), encoding="utf-8")
    cfg = config(tiny_model_dir, max_steps=1)
    plain = sft(tmp_path, cfg, name="plain").record.data_counts
    assert (plain.train_examples, plain.proof_examples) == (9, 0)
    proofs = sft(tmp_path, cfg, name="proofs", proof_examples=True).record.data_counts
    assert (proofs.train_examples, proofs.base_pairs, proofs.proof_examples) == (9 + 4, 9, 4)


class Watched(SftConfig):
    """The SFT section, recording in `READ` the name of every field read from it as an attribute."""

    def __getattribute__(self, name: str) -> Any:
        if name in SftConfig.model_fields:
            READ.add(name)
        return super().__getattribute__(name)


READ: set[str] = set()


@pytest.mark.slow
def test_the_settings_only_later_iterations_read_are_not_read_at_iteration_0(tmp_path: Path, tiny_model_dir: Path,
                                                                            store: Store) -> None:
    """A field marked `sft-later` (`config.identity`) stays out of iteration 0's identity, so iteration 0 must not
    read it: a new one read there fails here (and iteration 1 reads each, so the watch sees reads)."""
    from burnqed.config import Config
    from burnqed.config.identity import identity_keys

    later = {key.removeprefix("sft.") for key in identity_keys(Config, "sft-later")}
    assert later == {"later_epochs", "proofs_per_theorem"}
    cfg = Watched(**config(tiny_model_dir, method="lora", lora_r=4, lora_alpha=8, max_steps=2, warm_steps=2,
                           later_epochs=1.0, proofs_per_theorem="shortest").model_dump())
    READ.clear()
    sft(tmp_path, cfg, name="iter0", proof_examples=True)
    assert "max_steps" in READ and READ & later == set()
    edges = [edge(1, 0, EdgeOutcome.CLOSED)]
    label_edges(edges, [1], proved=True)
    trajectories = f"file://{tmp_path}/traj0"
    write_trajectory(trajectories, [(result("searched_thm", True, edges=1, depth=1), edges)], store=store)
    READ.clear()
    sft(tmp_path, cfg, name="iter1", iteration=1, trajectories=(trajectories,), init=str(tmp_path / "iter0"),
        proof_examples=True)
    # `burnqed sft` reads sft.proofs_per_theorem with search.mode (`proofs_kept`) and hands run_sft the effective
    # value, which run_sft uses from iteration 1 only
    assert later - {"proofs_per_theorem"} <= READ


def test_a_checkpoint_folder_is_the_current_steps_in_the_output_dir_as_transformers_names_it(tmp_path: Path) -> None:
    out = str(tmp_path / "sft-checkpoints")
    assert is_checkpoint_folder(f"{out}/checkpoint-40", out, 40)
    assert is_checkpoint_folder(f"{out}/checkpoint-40/", out + "/", 40)
    assert not is_checkpoint_folder(f"{out}/checkpoint-39", out, 40)  # another step's
    assert not is_checkpoint_folder(str(tmp_path / "published"), out, 40)  # a model saved elsewhere (not a checkpoint)
    assert not is_checkpoint_folder(f"{out}/checkpoint-40", None, 40)
    # that transformers saves checkpoint N there, joint files included: test_joint.py's resumed run reads them

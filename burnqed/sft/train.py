"""`burnqed sft`: fine-tune the policy on tactic pairs (and, from iteration 1, trajectory positives) with TRL.

    burnqed sft --iter 0 --data runs/iter_0/data --output runs/iter_0/sft
    burnqed sft --iter 1 --data runs/iter_0/data --trajectories runs/iter_0/trajectories \\
                --init runs/iter_0/sft --output runs/iter_1/sft

    outcome = run_sft(SftRequest(iteration=0, data=..., output=...), cfg.sft, cfg.policy.prompt_format,
                     store=store)

Inputs, warm start, checkpoints and resume, and the published output: docs/training.md, "SFT". The trainer, TRL's
`SFTTrainer` on packed completion-only rows, is `burnqed.sft.trainer`'s; with `sft.joint` at an iteration ≥ 1 it
also trains the value model's head (`burnqed.sft.joint.JointObjective`).
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from burnqed.base.collector import frozen_heap
from burnqed.base.cpu_kernels import cpu_threads
from burnqed.config import EbmConfig, SftConfig
from burnqed.config.sft import ProofsPerTheorem
from burnqed.errors import InputError, TrainingError
from burnqed.policy.modelfolder import tokenizer_probe, write_config, write_tokenizer
from burnqed.provenance import StageInputs
from burnqed.records.enums import DeclarationForm
from burnqed.sft.checkpoints import CheckpointStore, training_settings
from burnqed.sft.data import (
    IGNORE_INDEX,
    base_sketches,
    build_dataset,
    encode_pairs,
    mix_pairs,
    read_base_pairs,
    read_base_proofs,
    read_declarations,
)
from burnqed.sft.examples import read_positives, read_proof_examples, read_sketch_examples
from burnqed.sft.joint import JointObjective, load_groups
from burnqed.sft.launch import World, barrier, process_group
from burnqed.sft.manifests import (
    SFT_RECORD,
    DataCounts,
    LogPoint,
    SftRecord,
    model_fingerprint,
    read_sft_record,
    share_files,
)
from burnqed.sft.model import (
    TrainablePolicy,
    load_for_training,
    quiet_imports,
    quiet_warnings,
    resolve_base_model,
    saved_dtype,
)
from burnqed.sft.trainer import (
    ProgressLog,
    TrainPlan,
    build_trainer,
    joint_callback,
    plan_training,
    scale_steps,
    stage_callback,
)
from burnqed.storage import Store
from burnqed.text.prompt import PromptFormat

Echo = Callable[[str], None]


def _silent(line: str) -> None:
    del line


def echo_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass(frozen=True, slots=True)
class SftRequest:
    """The command line of one `burnqed sft` run."""

    iteration: int
    data: str
    output: str
    trajectories: tuple[str, ...] = ()
    init: str | None = None
    force: bool = False
    made_from: StageInputs | None = None  # recorded in the output's completion marker (burnqed.runner.reuse)


@dataclass(frozen=True, slots=True)
class SftOutcome:
    """What a run did: `skipped` when the output was already done (its record is read back)."""

    output: str
    record: SftRecord
    skipped: bool

    @property
    def summary(self) -> str:
        r = self.record
        if self.skipped:
            return f"sft output {self.output} is done already ({r.method}, {r.steps} steps); pass --force to redo"
        eval_text = f", eval loss {r.eval_loss:.4f}" if r.eval_loss is not None else ""
        first = f"{r.first_train_loss:.4f}→" if r.first_train_loss is not None else ""
        loss = f"{first}{r.train_loss:.4f}" if r.train_loss is not None else "n/a"
        rate = f", {r.tokens_per_second:,.0f} tokens/s" if r.tokens_per_second else ""
        counts = r.data_counts
        mixed = f" ({counts.positives} positives ×{counts.positive_upsample})" if r.iteration else ""
        return (
            f"sft iteration {r.iteration} ({r.method}) -> {self.output}: {r.steps} steps on "
            f"{counts.train_examples} examples{mixed}, loss {loss}{eval_text}, {r.train_seconds:.1f}s{rate}"
        )


@dataclass(frozen=True, slots=True)
class JointInputs:
    """What joint training adds to a run's inputs: the value model's settings, the groups' trajectories and the salt
    of their theorem split (`data.split_salt`)."""

    ebm: EbmConfig
    groups: Any  # burnqed.ebm.sampling.EbmDataset
    salt: str


def check_request(request: SftRequest) -> None:
    """The iteration and the flags must agree: positives and warm starts belong to iterations ≥ 1."""
    if request.iteration < 0:
        raise InputError(f"--iter must be ≥ 0, got {request.iteration}")
    if request.iteration == 0 and request.trajectories:
        raise InputError("--trajectories is for iterations ≥ 1 (iteration 0 trains on the data's pairs only)")
    if request.iteration == 0 and request.init:
        raise InputError("--init is for iterations ≥ 1; set sft.base_model to start iteration 0 from another model")
    if request.iteration >= 1 and not request.trajectories:
        raise InputError(f"iteration {request.iteration} mixes in trajectory positives: give --trajectories "
                         "(the merged trajectories of every earlier iteration)")


# -------------------------------------------------------------------------------------------- stage


def run_sft(request: SftRequest, cfg: SftConfig, fmt: PromptFormat, *, echo: Echo = echo_stderr,
            callbacks: Sequence[Any] = (), proof_examples: bool = False, sketch_examples: bool = False,
            proofs_per_theorem: ProofsPerTheorem = "all", store: Store,
            form: DeclarationForm = DeclarationForm.BINDER, ebm: EbmConfig | None = None,
            salt: str = "burnqed") -> SftOutcome:
    """Run one SFT stage (see the module docstring). `callbacks` are extra `TrainerCallback`s; `proof_examples`
    also trains the proof formats of `fmt`'s family on the trajectories' verified proofs, and at iteration 0 the
    whole format on the prepared data's replayed proofs (`burnqed.sft.data`); `sketch_examples` also trains the sketch
    format on the sketches verified proofs are and the subgoals sketch searches proved as theorems of their own;
    `proofs_per_theorem` picks which verified proofs of a theorem iterations ≥ 1 train on (`config.sft.proofs_kept`);
    `form` is `policy.declaration_form`, how the search's prompts show a base pair's theorem. With `sft.joint` at
    an iteration ≥ 1 the run is joint training (`burnqed.sft.joint`: `ebm` gives the head, negatives and pooling,
    `salt` the value model's theorem split, `data.split_salt`)."""
    check_request(request)
    quiet_imports()
    if int(os.environ.get("RANK", "0")) != 0:
        echo = _silent  # data-parallel: one copy of every progress line, process 0's
    if store.is_done(request.output) and not request.force:
        return SftOutcome(request.output, read_sft_record(store.local_input(request.output)), skipped=True)
    joint = None
    if cfg.joint and request.iteration >= 1:
        head = ebm or EbmConfig()
        joint = JointInputs(head, load_groups(request.trajectories, head, salt=salt, store=store), salt)

    data_dir = store.local_input(request.data)
    base = read_base_pairs(data_dir)
    # iteration 0 has no trajectories (`check_request`) and reads no `sft-later` setting: it stays out of its identity
    keep = proofs_per_theorem if request.iteration >= 1 else "all"
    positives = read_positives(request.trajectories, store=store, keep=keep)
    if proof_examples:
        positives += read_proof_examples(request.trajectories, store=store, keep=keep)
    sketches = read_sketch_examples(request.trajectories if sketch_examples else (), store=store)
    positives += sketches.examples
    init_dir = store.local_input(request.init) if request.init else None
    base_dir = resolve_base_model(cfg.base_model, store=store)
    base_print = model_fingerprint(base_dir)
    if init_dir is not None:
        _check_init(init_dir, request.init or "", cfg, base_print)
    plan = plan_training(cfg, request.iteration, warm=init_dir is not None)

    replayed = (read_base_proofs(data_dir, base, form)
                if request.iteration == 0 and (proof_examples or sketch_examples) else [])
    mix = mix_pairs(
        base, positives, iteration=request.iteration, base_subsample=cfg.base_subsample,
        positive_upsample=cfg.positive_upsample, eval_fraction=cfg.eval_fraction, seed=cfg.seed,
        declarations=read_declarations(data_dir, form), base_proofs=replayed if proof_examples else (),
        base_sketch_examples=base_sketches(replayed) if sketch_examples else (),
    )
    mix = replace(mix, subgoals_skipped=sketches.subgoals_skipped)
    if not mix.train:
        raise InputError(
            f"no training pairs left after filtering ({len(base)} pairs in {request.data}, "
            f"{len(positives)} trajectory positives, {mix.positives_held_out} of them held out): the data "
            "has no train split, or base_subsample is 0 with no positives"
        )

    world = World.from_env()
    with process_group(world, plan.device):
        return _train_and_publish(request, cfg, fmt, echo, callbacks, (proof_examples, sketch_examples), store, plan,
                                  mix, base_dir, init_dir, base_print, world, joint)


def _train_and_publish(request: SftRequest, cfg: SftConfig, fmt: PromptFormat, echo: Echo, callbacks: Sequence[Any],
                       examples: tuple[bool, bool], store: Store, plan: TrainPlan, mix: Any, base_dir: Path,
                       init_dir: Path | None, base_print: str, world: World,
                       joint_inputs: JointInputs | None) -> SftOutcome:
    """Train with TRL and publish (process 0 only when data-parallel; the others wait for it). `examples`: whether
    proof and sketch examples train. With `joint_inputs` the trainer also trains the value model's head
    (`burnqed.sft.joint.JointObjective`)."""
    with cpu_threads(plan.device, cfg.cpu_threads), quiet_warnings():
        policy = load_for_training(plan.method, base_dir, init_dir, cfg, plan.device, plan.bf16)
        train_ds, train_stats, eval_ds = _datasets(policy, fmt, mix, cfg)
        plan = scale_steps(plan, cfg, request.iteration, train_stats.rows)
        checkpoints = CheckpointStore.for_output(request.output, store=store)
        joint = None
        if joint_inputs is not None:
            joint = JointObjective(policy.model, policy.tokenizer, joint_inputs.groups, cfg, joint_inputs.ebm, fmt,
                                   steps=plan.steps, learning_rate=plan.learning_rate, device=plan.device,
                                   world=world, echo=echo, checkpoints=checkpoints)
        if world.main:
            checkpoints.prepare(_run_settings(request, cfg, fmt, base_print, examples, joint_inputs),
                                fresh=request.force)
        barrier(world)
        resume = checkpoints.latest()
        progress = ProgressLog(echo)
        trainer = build_trainer(policy, train_ds, eval_ds, cfg=cfg, plan=plan, output_dir=checkpoints.local,
                                callbacks=[stage_callback(progress, checkpoints),
                                           *([joint_callback(joint)] if joint is not None else []), *callbacks],
                                joint=joint)
        progress.tokens = lambda: int(trainer.tokens_seen)
        if joint is not None:
            joint.start(init_dir, resume)  # the trainer has put the model on its device
        elif resume is not None:
            echo(f"sft: resuming from {resume.name} in {checkpoints.remote or checkpoints.local}")
        started = time.monotonic()
        with frozen_heap():  # the Trainer's own gc.collect() calls read what training made, not the process
            trainer.train(resume_from_checkpoint=str(resume) if resume is not None else None)
        seconds = time.monotonic() - started
        eval_loss = _final_eval(trainer) if eval_ds is not None else None
        if joint is not None:
            joint.finish()

    record = _record(request, cfg, fmt, plan, mix, base_dir, base_print, policy, trainer, train_stats, resume,
                     seconds, eval_loss, head_params=joint.head_params if joint is not None else 0)
    extra: dict[str, object] = {"method": record.method, "steps": record.steps, "eval_loss": record.eval_loss,
                                **(joint.marker() if joint is not None else {})}
    if world.main:
        with store.staged_output(request.output, "sft", extra, made_from=request.made_from) as folder:
            _save_output(trainer, init_dir or base_dir, folder)
            if joint is not None:
                joint.write_output(folder, request.trajectories, seconds)
            (folder / SFT_RECORD).write_text(record.model_dump_json(indent=2) + "\n", encoding="utf-8")
            share_files(folder, folder / SFT_RECORD)
        if not cfg.keep_checkpoints:
            checkpoints.clear()
    barrier(world)
    return SftOutcome(request.output, record, skipped=False)


def _datasets(policy: TrainablePolicy, fmt: PromptFormat, mix: Any, cfg: SftConfig) -> tuple[Any, Any, Any]:
    """The training rows, their statistics and the held-out rows (None when there are none)."""
    train_ds, train_stats = build_dataset(encode_pairs(policy.tokenizer, fmt, mix.train),
                                          max_length=cfg.max_length, packing=cfg.packing, seed=cfg.seed)
    if train_stats.examples == 0:
        raise InputError(f"all {train_stats.too_long} training pairs are longer than sft.max_length="
                         f"{cfg.max_length} tokens; raise it")
    eval_ds = None
    if mix.eval:
        eval_ds, _ = build_dataset(encode_pairs(policy.tokenizer, fmt, mix.eval),
                                   max_length=cfg.max_length, packing=cfg.packing, seed=cfg.seed)
        eval_ds = eval_ds if len(eval_ds) else None
    return train_ds, train_stats, eval_ds


def _record(request: SftRequest, cfg: SftConfig, fmt: PromptFormat, plan: TrainPlan, mix: Any, base_dir: Path,
            base_print: str, policy: TrainablePolicy, trainer: Any, train_stats: Any, resume: Path | None,
            seconds: float, eval_loss: float | None, *, head_params: int) -> SftRecord:
    """`sft.json` of a finished run (`head_params`: the value model's head of a joint run, counted as trained)."""
    history = _history(trainer.state.log_history)
    train_points = [p.loss for p in history if p.loss is not None]
    if train_points and not all(math.isfinite(loss) for loss in train_points):
        raise TrainingError(f"the training loss diverged (last {train_points[-1]}); lower sft.learning_rate")
    counts = DataCounts(
        train_examples=train_stats.examples, eval_examples=len(mix.eval), base_pairs=mix.base_pairs,
        positives=mix.positives, positive_upsample=mix.positive_upsample, positives_held_out=mix.positives_held_out,
        too_long=train_stats.too_long, eval_source=mix.eval_source, proof_examples=mix.proof_examples,
        repair_examples=mix.repair_examples, sketch_examples=mix.sketch_examples,
        subgoal_examples=mix.subgoal_examples, subgoals_skipped=mix.subgoals_skipped,
        rows=train_stats.rows, tokens=train_stats.tokens, supervised_tokens=train_stats.supervised_tokens,
    )
    return SftRecord(
        method=cfg.method, base_model=cfg.base_model, base_fingerprint=base_print, base_dtype=saved_dtype(base_dir),
        init=request.init, iteration=request.iteration, data=request.data, trajectories=list(request.trajectories),
        prompt_format=fmt, seed=cfg.seed, steps=int(trainer.state.global_step), learning_rate=plan.learning_rate,
        resumed_from_step=_step_of(resume), train_loss=train_points[-1] if train_points else None,
        first_train_loss=train_points[0] if train_points else None, eval_loss=eval_loss, data_counts=counts,
        adapter_rank=policy.adapter_rank, trainable_params=policy.trainable_params + head_params,
        total_params=policy.total_params + head_params, train_seconds=round(seconds, 3),
        tokens_per_second=round(trainer.tokens_seen / seconds, 1) if seconds > 0 and trainer.tokens_seen else None,
        device=plan.device, history=history, tokenizer_probe=tokenizer_probe(policy.tokenizer),
        written_at=datetime.now(UTC),
    )


def _check_init(init_dir: Path, init: str, cfg: SftConfig, base_print: str) -> None:
    previous = read_sft_record(init_dir, "--init")
    if previous.method != cfg.method:
        raise InputError(f"--init {init} was trained with method {previous.method!r}, but sft.method is "
                         f"{cfg.method!r}; a warm start continues the same method")
    if previous.method != "full" and previous.base_fingerprint != base_print:
        raise InputError(f"--init {init} holds an adapter for another base model than sft.base_model="
                         f"{cfg.base_model or '(tiny embedded model)'}; use the base it was trained on")


def _run_settings(request: SftRequest, cfg: SftConfig, fmt: PromptFormat, base_print: str,
                  examples: tuple[bool, bool], joint: JointInputs | None) -> dict[str, Any]:
    """What a run's checkpoints belong to: the training settings (`TRAINING_KEYS`) and the inputs, each named as the
    command line or the configuration gives it (`CheckpointStore.prepare` names the ones that differ); `examples`,
    whether proof and sketch examples train (the sketch examples named only when they do, so that the checkpoints of a
    run without them resume as they did before they existed)."""
    proof_examples, sketch_examples = examples
    inputs: dict[str, Any] = {
        "--iter": request.iteration, "--data": request.data, "--trajectories": list(request.trajectories),
        "--init": request.init, "prompt format": str(fmt), "base model weights": base_print,
        "proof examples": proof_examples, "joint training": joint is not None,
        **({"sketch examples": True} if sketch_examples else {}),
    }
    if joint is not None:
        inputs["data.split_salt"] = joint.salt  # which theorems' groups train
    return {**training_settings(cfg, joint.ebm if joint is not None else None), **inputs}


def _step_of(checkpoint: Path | None) -> int | None:
    return int(checkpoint.name.rsplit("-", 1)[1]) if checkpoint is not None else None


def _final_eval(trainer: Any) -> float | None:
    """The held-out loss at the last step: the trainer's own evaluation when it ran there, else one more."""
    step = trainer.state.global_step
    logged = [e for e in trainer.state.log_history if "eval_loss" in e and e.get("step") == step]
    if logged:
        return float(logged[-1]["eval_loss"])
    metrics = trainer.evaluate()
    value = metrics.get("eval_loss")
    return float(value) if value is not None else None


def _history(log_history: Sequence[dict[str, Any]]) -> list[LogPoint]:
    points = []
    for entry in log_history:
        if "loss" in entry or "eval_loss" in entry:
            points.append(LogPoint(step=int(entry.get("step", 0)), loss=_float(entry.get("loss")),
                                   eval_loss=_float(entry.get("eval_loss")),
                                   learning_rate=_float(entry.get("learning_rate"))))
    return points


def _float(value: Any) -> float | None:
    return float(value) if value is not None else None


def _save_output(trainer: Any, tokenizer_dir: Path, folder: Path) -> None:
    """full: the model folder (safetensors + config + tokenizer); lora/qlora: the adapter + tokenizer. The
    tokenizer is the one trained with (`tokenizer_dir`'s), written by `burnqed.policy.modelfolder` like every model
    folder burnqed writes, never this transformers' own save (which an older transformers may not load)."""
    model = trainer.model
    model.save_pretrained(folder)
    write_tokenizer(tokenizer_dir, folder)
    if (folder / "config.json").is_file():
        write_config(folder / "config.json")


__all__ = ["IGNORE_INDEX", "SftOutcome", "SftRequest", "run_sft"]

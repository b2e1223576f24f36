"""TRL's SFTTrainer as `burnqed sft` builds it (docs/training.md, "SFT"): the training plan (steps, rate, device,
processes, the variable-length kernel), the trainer on pre-tokenized rows with its checkpoint rules and, with
`sft.joint`, the value model's head trained beside the policy (`burnqed.sft.joint.JointObjective`), and the progress
line and checkpoint push of every step.

    plan = plan_training(cfg.sft, iteration=0, warm=False)
    trainer = build_trainer(policy, train_ds, eval_ds, cfg=cfg.sft, plan=plan, output_dir=folder,
                            callbacks=[stage_callback(ProgressLog(echo), checkpoints)])
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from burnqed.config import SftConfig
from burnqed.policy.localmodel import resolve_device
from burnqed.sft.checkpoints import CheckpointStore
from burnqed.sft.data import (
    PackedRowsCollator,
)
from burnqed.sft.joint import JointObjective
from burnqed.sft.launch import World, check_processes
from burnqed.sft.model import (
    TrainablePolicy,
)

Echo = Callable[[str], None]


# Attention kernels that take variable-length (flattened) batches: with them, packed batches go padding-free.
VARLEN_KERNELS = ("flash_attention", "flash-attn", "kernels-community/flash")


@dataclass(frozen=True, slots=True)
class TrainPlan:
    """Settings of one run derived from the config, the iteration and the warm start."""

    method: str
    steps: int
    learning_rate: float
    device: str
    bf16: bool
    varlen: bool  # flattened padding-free batches (flash-attention kernels) instead of per-row masks
    processes: int = 1  # data-parallel processes of this run (torchrun's WORLD_SIZE); each takes 1/processes of a batch


def plan_training(cfg: SftConfig, iteration: int, warm: bool) -> TrainPlan:
    """Steps and learning rate: a warm start at iteration i trains `warm_steps` at lr × decay^i."""
    world = World.from_env()
    check_processes(cfg, world.size)
    device = resolve_device(cfg.device)
    if device == "cuda" and world.size > 1:
        device = f"cuda:{world.local_rank}"  # one GPU per process
    return TrainPlan(
        method=cfg.method,
        steps=cfg.warm_steps if warm else cfg.max_steps,
        learning_rate=cfg.learning_rate * (cfg.lr_decay_per_iter**iteration if warm else 1.0),
        device=device,
        bf16=cfg.bf16 and device.startswith("cuda"),
        varlen=cfg.packing and any(kernel in (cfg.attn_implementation or "") for kernel in VARLEN_KERNELS),
        processes=world.size,
    )


def scale_steps(plan: TrainPlan, cfg: SftConfig, iteration: int, rows: int) -> TrainPlan:
    """`sft.later_epochs` at an iteration ≥ 1: the plan's steps become that many passes over the `rows` training rows
    (packed rows with packing), ceil(epochs × rows / (batch_size × grad_accum)), so that the steps grow with the
    data; at later_epochs = 0, and at iteration 0, the plan as it is (warm_steps or max_steps)."""
    if iteration == 0 or cfg.later_epochs == 0:  # iteration 0 does not read it (`sft-later`)
        return plan
    return replace(plan, steps=max(1, math.ceil(cfg.later_epochs * rows / (cfg.batch_size * cfg.grad_accum))))


# ------------------------------------------------------------------------------------------ trainer


def build_trainer(policy: TrainablePolicy, train_ds: Any, eval_ds: Any, *, cfg: SftConfig, plan: TrainPlan,
                  output_dir: Path, callbacks: Sequence[Any] = (), joint: JointObjective | None = None) -> Any:
    """TRL's SFTTrainer on pre-tokenized rows (`input_ids`, `labels`, `seq_lengths`; see `burnqed.sft.data`).

    Dataset preparation is skipped (labels are ours, built from the exact inference prompt); batches come
    from `PackedRowsCollator`, or with a variable-length attention kernel from TRL's padding-free collator.
    With `joint` the trainer also trains the value model's head: its loss term, its parameter group, its
    gradients' reduction and its checkpoint files come from the objective, and the rows come in its order
    (`JointObjective.row_order`, read sequentially); its monitoring callback is the caller's to list. A resumed
    run's peak rates and a joint run's clipping are `StepRules`' (a callback: transformers' public hooks).
    """
    from transformers import PrinterCallback, ProgressCallback
    from trl.trainer.sft_config import SFTConfig

    sampling = "random"
    if joint is not None:
        train_ds = train_ds.select(joint.row_order(len(train_ds)))
        sampling = "sequential"
    checkpointing: dict[str, Any] = {_checkpointing_argument(SFTConfig): cfg.gradient_checkpointing}
    args = SFTConfig(
        output_dir=str(output_dir),
        max_steps=plan.steps,
        per_device_train_batch_size=cfg.batch_size // plan.processes,  # the global batch is the same for every count
        per_device_eval_batch_size=cfg.batch_size // plan.processes,
        gradient_accumulation_steps=cfg.grad_accum,
        learning_rate=plan.learning_rate,
        lr_scheduler_type=cfg.scheduler,
        warmup_steps=cfg.warmup_steps,
        weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.max_grad_norm if joint is None else 0.0,  # joint: StepRules clips the head too
        logging_steps=cfg.logging_steps,
        eval_strategy="steps" if eval_ds is not None else "no",
        eval_steps=cfg.eval_steps,
        save_strategy="steps",
        save_steps=cfg.save_steps,
        save_total_limit=1,
        seed=cfg.seed,
        data_seed=cfg.seed,
        train_sampling_strategy=sampling,
        use_cpu=plan.device == "cpu",
        bf16=plan.bf16,
        **checkpointing,
        report_to="none",
        disable_tqdm=True,
        dataset_kwargs={"skip_prepare_dataset": True},
        packing=False,
        padding_free=plan.varlen,
        max_length=None if plan.varlen else cfg.max_length,
    )
    collator = None if plan.varlen else PackedRowsCollator(int(policy.tokenizer.pad_token_id))
    trainer = _trainer_class()(
        model=policy.model, args=args, train_dataset=train_ds, eval_dataset=eval_ds,
        processing_class=policy.tokenizer, data_collator=collator, callbacks=list(callbacks),
    )
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    trainer.joint = joint
    trainer.add_callback(_rules_class()(lambda: trainer.peaks, joint, cfg.max_grad_norm))
    if plan.method == "qlora" and not plan.bf16:
        import torch

        # TRL casts QLoRA adapters to bf16 (the paper's GPU recipe); training in float32 keeps them float32.
        for param in trainer.model.parameters():
            if param.requires_grad:
                param.data = param.data.to(torch.float32)
    return trainer


def _checkpointing_argument(config_class: Any) -> str:
    """The name of TrainingArguments' activation checkpointing switch: `gradient_checkpointing` up to transformers
    5.19 (the pinned one, SGLang 0.5.23's), `activation_checkpointing` later (the old name then warns)."""
    import dataclasses

    names = {field.name for field in dataclasses.fields(config_class)}
    return "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"


@cache
def _trainer_class() -> Any:
    """The one trainer: TRL's SFTTrainer counting the real (non-pad) tokens it trains on, with the hook points of
    joint training; built on first use (imports TRL)."""
    from trl.trainer.sft_trainer import SFTTrainer

    class BurnqedSFTTrainer(SFTTrainer):
        """TRL's SFTTrainer; `tokens_seen` counts training tokens (padding excluded) for throughput logs. With
        `joint` (a `JointObjective`), each optimizer step's first micro-batch also carries the head's loss term, the
        optimizer holds the head's parameter group, gradient clipping covers the head (after its gradients are
        summed over the processes: `StepRules`) and each checkpoint holds its files. `peaks`: the optimizer's
        groups' configured rates, which a resumed run trains at (`StepRules`)."""

        tokens_seen: int = 0
        joint: JointObjective | None = None
        peaks: list[float] | None = None

        def training_step(self, model: Any, inputs: dict[str, Any], num_items_in_batch: Any = None) -> Any:
            self.tokens_seen += _real_tokens(inputs, getattr(self.processing_class, "pad_token_id", None))
            parent: Any = super()  # transformers' training_step is untyped
            return parent.training_step(model, inputs, num_items_in_batch)

        def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                         num_items_in_batch: Any = None) -> Any:
            parent: Any = super()
            result = parent.compute_loss(model, inputs, return_outputs=return_outputs,
                                         num_items_in_batch=num_items_in_batch)
            if self.joint is None or not model.training:
                return result
            if return_outputs:
                return _with_joint_term(self, result[0], num_items_in_batch), result[1]
            return _with_joint_term(self, result, num_items_in_batch)

        def create_optimizer(self, model: Any = None) -> Any:
            parent: Any = super()
            optimizer = parent.create_optimizer(model)
            if self.joint is not None:
                self.joint.join(optimizer)
            self.peaks = [float(group["lr"]) for group in optimizer.param_groups]
            return optimizer

        def save_model(self, output_dir: str | None = None, *args: Any, **kwargs: Any) -> None:
            parent: Any = super()
            parent.save_model(output_dir, *args, **kwargs)  # the base's own arguments, passed on as they came
            if (self.joint is not None and output_dir is not None and self.args.should_save
                    and is_checkpoint_folder(output_dir, self.args.output_dir, int(self.state.global_step))):
                self.joint.save_checkpoint(Path(output_dir))  # before the checkpoint's trainer_state.json

    return BurnqedSFTTrainer


def is_checkpoint_folder(folder: str, output_dir: str | None, step: int) -> bool:
    """Whether `folder`, which the trainer saves its model into, is the checkpoint of step `step`: transformers saves
    checkpoint N as `checkpoint-N` in `TrainingArguments.output_dir` (`trainer_utils.PREFIX_CHECKPOINT_DIR`, the
    folder `StageCallback.on_save` pushes), the model first and `trainer_state.json` last, so the joint objective's
    files written on that save land before the checkpoint's mark."""
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    return output_dir is not None and Path(folder) == Path(output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{step}"


def _with_joint_term(trainer: Any, loss: Any, num_items_in_batch: Any) -> Any:
    """A training micro-batch's SFT loss with the joint objective's loss term added (the step's first micro-batch).
    TRL's loss is this process's share of the step's token mean, times the process count when the tokens are
    counted over every process (DDP then averages): the objective observes the share without that factor."""
    joint: JointObjective = trainer.joint
    counted = num_items_in_batch is not None
    scale = trainer.accelerator.num_processes if trainer.args.average_tokens_across_devices and counted else 1
    joint.observe_sft(float(loss.detach()) / scale, int(num_items_in_batch) if counted else 0)
    term = joint.loss_term(int(trainer.state.global_step) + 1)
    if term is None:
        return loss
    # One backward through both halves; the value (the step's logged loss) stays the SFT loss.
    return loss + (term - term.detach())


def _real_tokens(inputs: dict[str, Any], pad_id: int | None) -> int:
    """Tokens of a training batch that are not padding: a packed batch pads with lone pad tokens (position 0), a
    padded one marks them in its attention mask."""
    ids = inputs["input_ids"]
    positions = inputs.get("position_ids")
    pads = 0
    if positions is not None:
        pads = int(((ids == pad_id) & (positions == 0)).sum())
    elif "attention_mask" in inputs:
        pads = int((inputs["attention_mask"] == 0).sum())
    return int(ids.numel()) - pads


def _restore_peaks(optimizer: Any, scheduler: Any, peaks: Sequence[float] | None) -> None:
    """A resumed optimizer and schedule at the configured peak rates `peaks` (nothing to do without): the
    checkpoint's moments and step count stay, its peak rates (what a re-run after an abort may change) do not. The
    schedule steps back one and forward one: each group's rate at its position recomputed from the peaks, and
    `get_last_lr()` (what the trainer logs for the step) with them."""
    if peaks is None:
        return
    scheduler.base_lrs = list(peaks)
    for group, peak, _ in zip(optimizer.param_groups, peaks, scheduler.lr_lambdas, strict=True):
        group["initial_lr"] = peak
    scheduler.last_epoch -= 1
    scheduler.step()


@cache
def _rules_class() -> Any:
    from transformers import TrainerCallback

    class StepRules(TrainerCallback):
        """What the trainer's optimizer needs beyond its arguments, through transformers' public hooks: a resumed
        run trains at the configured peak rates (`peaks()`, the groups' rates when the optimizer was made: on train
        begin, after the checkpoint's optimizer and schedule were loaded); a joint run's head gradients are summed
        over the processes and clipped with the model's to `max_grad_norm` (before the optimizer step; the trainer
        clips nothing then: its max_grad_norm is 0, its logged grad_norm the model's alone)."""

        def __init__(self, peaks: Callable[[], list[float] | None], joint: JointObjective | None,
                     max_grad_norm: float) -> None:
            self.peaks = peaks
            self.joint = joint
            self.max_grad_norm = max_grad_norm

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if int(state.global_step) > 0:  # resumed from a checkpoint
                _restore_peaks(kwargs["optimizer"], kwargs["lr_scheduler"], self.peaks())

        def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.joint is None:
                return
            import torch

            self.joint.reduce_gradients()
            if self.max_grad_norm > 0:
                params = [*kwargs["model"].parameters(), *self.joint.parameters()]
                torch.nn.utils.clip_grad_norm_(params, self.max_grad_norm)

    return StepRules


# ---------------------------------------------------------------------------------------- callbacks


class ProgressLog:
    """One line per log event: step, loss, lr, tokens/s (since the previous line) and ETA; the eval loss."""

    def __init__(self, echo: Echo, tokens: Callable[[], int] = lambda: 0) -> None:
        self.echo = echo
        self.tokens = tokens
        self._started = self._last_time = time.monotonic()
        self._first_step = 0
        self._last_tokens = 0

    def begin(self, step: int) -> None:
        self._started = self._last_time = time.monotonic()
        self._first_step = step
        self._last_tokens = self.tokens()

    def log(self, step: int, total: int, logs: dict[str, Any]) -> None:
        if "eval_loss" in logs:
            self.echo(f"sft: step {step}/{total} eval loss {float(logs['eval_loss']):.4f}")
            return
        if "loss" not in logs:
            return
        now, tokens = time.monotonic(), self.tokens()
        rate = (tokens - self._last_tokens) / max(now - self._last_time, 1e-9)
        self._last_time, self._last_tokens = now, tokens
        done = step - self._first_step
        eta = f"ETA {(total - step) * (now - self._started) / done:.0f}s" if done > 0 else "ETA ?"
        lr = float(logs.get("learning_rate", 0.0))
        self.echo(f"sft: step {step}/{total} loss {float(logs['loss']):.4f} lr {lr:.2e} {rate:,.0f} tokens/s {eta}")


def stage_callback(progress: ProgressLog, store: CheckpointStore) -> Any:
    """The TrainerCallback of a run: progress lines, and every saved checkpoint pushed to the store's remote."""
    return _callback_class()(progress, store)


@cache
def _callback_class() -> Any:
    from transformers import TrainerCallback

    class StageCallback(TrainerCallback):
        def __init__(self, progress: ProgressLog, store: CheckpointStore) -> None:
            self.progress = progress
            self.store = store

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.progress.begin(int(state.global_step))

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
                   **kwargs: Any) -> None:
            self.progress.log(int(state.global_step), int(state.max_steps), logs or {})

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.store.push(Path(args.output_dir) / f"checkpoint-{state.global_step}")

    return StageCallback


def joint_callback(joint: JointObjective) -> Any:
    """The TrainerCallback that runs the monitoring of joint training (list it after the one that pushes
    checkpoints)."""
    return _joint_callback_class()(joint)


@cache
def _joint_callback_class() -> Any:
    from transformers import TrainerCallback

    class JointCallback(TrainerCallback):
        """Runs the monitoring of a `JointObjective` in the order the rules need: after a step, the losses, the
        monitoring line and its rules; the temperature and probe rules after the step's checkpoint (so a re-run
        resumes from it), except at the last step, whose checkpoint only a run that passed every rule writes."""

        def __init__(self, joint: JointObjective) -> None:
            self.joint = joint
            self.after_save = False

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.joint.begin()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            step = int(state.global_step)
            self.joint.end_step(step, kwargs["optimizer"])
            if control.should_save and step < int(state.max_steps):
                self.after_save = True
            else:
                self.joint.monitor(step)

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if self.after_save:
                self.after_save = False
                self.joint.monitor(int(state.global_step))

    return JointCallback


__all__ = [
    "ProgressLog",
    "TrainPlan",
    "build_trainer",
    "is_checkpoint_folder",
    "joint_callback",
    "plan_training",
    "scale_steps",
    "stage_callback",
]

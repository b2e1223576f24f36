"""Joint training (`sft.joint = true`, iterations ≥ 1): the policy and the value model's head trained together.

    outcome = run_joint(SftRequest(iteration=1, data=..., trajectories=(...,), init=..., output=...),
                        cfg.sft, cfg.ebm, fmt, salt=cfg.data.split_salt, store=store)

One optimizer step (docs/training.md, "Joint training"):
- **SFT half**: packed rows of tactic pairs (the same rows as `burnqed sft`: `burnqed.sft.data`, completion-only
  labels), token-mean cross-entropy over the step's global batch (`batch_size × grad_accum` rows);
- **contrastive half**: `joint_groups` InfoNCE groups (a positive + `ebm.negatives` negatives of the trajectories,
  drawn by the value model's own `NegativeSampler`), each state and goal embedded by the backbone being trained
  with `burnqed.policy.local.pool_hidden_states` — the encoder's one pooling — of `build_embedding_text` (the
  encoder's text), scored by `GoalConditionedEnergyHead` and `info_nce` (the head's temperature is the only one);
- loss = L_sft + `joint_weight` · L_infonce, one backward through both, AdamW with two parameter groups
  (the backbone's trainable weights at `learning_rate` (× decay for a warm start), the head at
  `joint_head_learning_rate`), the `scheduler` on both, gradients clipped to `max_grad_norm`.

Monitoring (each abort: one line (`TrainingError`) and `abort.json` in `{output}-checkpoints`, nothing published):
the temperature is checked after every step against [`ebm.temperature_min`, `ebm.temperature_max`] and logged
every `joint_log_every` steps with both losses; every `joint_probe_every` steps a probe embeds the states (eval
mode) and measures centroid L2, the linear probe (fit on the training split's states, scored on the held-out
split's) and the held-out groups' rank-1 by depth; `joint_min_centroid_l2` and `joint_max_sft_loss` (after
`joint_abort_after` steps) abort. Checkpoints every `save_steps` (`checkpoint-N/`, `trainer_state.json` last, the
`CheckpointStore` of `burnqed sft`); a re-run resumes from the newest, also after an abort once its cause is fixed:
learning rates, abort bounds and cadences are left out of the run's fingerprint for that reason.

Data parallel: under torchrun (`WORLD_SIZE` > 1) every process draws the same global batch (the data order is a
pure function of the seed and the step) and computes its 1/world share, normalised by the global counts; the
gradients are summed across processes (`all_reduce`), so the update equals the one-process update at the same
global batch. Process 0 writes checkpoints and publishes.

Output (`store.staged_output(output, "sft")`): what `burnqed sft` writes (adapter or model folder, tokenizer,
`sft.json`) plus `joint/head.safetensors`, `joint/joint.json` (`JointRecord`) and `joint/reference.safetensors`
(the trained backbone's vectors of a few states, which `train-ebm --joint` compares with the exported policy's
encoder before it publishes the head for search).
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from burnqed.config import EbmConfig, SftConfig
from burnqed.ebm.records import DEPTH_BUCKETS, HeadSpec
from burnqed.errors import ConfigError, InputError, TrainingError
from burnqed.prompt import DeclarationForm, PromptFormat
from burnqed.sft.checkpoints import STATE_FILE, CheckpointStore, fingerprint
from burnqed.sft.records import (
    SFT_RECORD,
    DataCounts,
    LogPoint,
    SftRecord,
    model_fingerprint,
    read_sft_record,
    share_files,
)
from burnqed.storage import Store, is_remote

if TYPE_CHECKING:
    import torch

    from burnqed.ebm.head import GoalConditionedEnergyHead
    from burnqed.ebm.sampling import Anchor, EbmDataset, NegativeSampler, Split
    from burnqed.sft.data import SftMix
    from burnqed.sft.train import SftOutcome

Echo = Callable[[str], None]
JOINT_DIR = "joint"
HEAD_FILE = "head.safetensors"
RECORD_FILE = "joint.json"
REFERENCE_FILE = "reference.safetensors"
ABORT_FILE = "abort.json"
TRAINABLE_FILE = "trainable.safetensors"
OPTIMIZER_FILE = "optimizer.pt"
REFERENCE_STATES = 8  # states whose trained-backbone vectors travel with the head (identity check)
PROBE_MAX_STATES = 4096  # states per split a probe embeds at most (seeded sample beyond)
STATS_MAX_TEXTS = 4096  # texts the head's input statistics are computed from at most
# Keys a resumed run may change: the fixes an abort asks for (learning rates, bounds) and cadences.
RESUMABLE_KEYS = frozenset({
    "learning_rate", "joint_head_learning_rate", "joint_min_centroid_l2", "joint_max_sft_loss", "joint_abort_after",
    "joint_log_every", "joint_probe_every", "logging_steps", "eval_steps", "save_steps", "keep_checkpoints",
    "cpu_threads", "device", "processes", "export_dtype", "export_max_shard_size", "export_max_logit_diff",
    "export_qlora_gap_examples", "export_max_qlora_gap", "joint_max_embedding_diff",
})
EBM_SHAPING_KEYS = ("hidden_dims", "dropout", "spectral_norm", "first_layer_scale", "init_temperature", "negatives",
                    "sibling_ratio", "same_theorem_ratio", "other_theorem_ratio", "depth_loss_weight",
                    "valid_fraction", "pooling", "normalize", "encoder_max_tokens", "seed")


# ------------------------------------------------------------------------------------------- records


class JointLog(BaseModel):
    """One monitoring line: the losses since the previous one and the temperature."""

    model_config = ConfigDict(extra="forbid")

    step: int = Field(ge=0, description="Optimizer steps done.")
    sft_loss: float = Field(description="Token-mean SFT cross-entropy since the previous log.")
    infonce: float = Field(description="Mean InfoNCE since the previous log (chance: ln(K+1)).")
    temperature: float = Field(gt=0, description="The head's temperature at this step.")
    lr_backbone: float = Field(ge=0, description="Learning rate of the backbone's trainable weights.")
    lr_head: float = Field(ge=0, description="Learning rate of the head.")
    seconds: float = Field(ge=0, description="Wall time since training started (this run).")


class JointProbe(BaseModel):
    """Embedding separation measured on the backbone being trained (eval mode)."""

    model_config = ConfigDict(extra="forbid")

    step: int = Field(ge=0, description="Optimizer steps done.")
    centroid_l2: float = Field(ge=0, description="‖mean positive − mean negative‖ of the states' raw embeddings.")
    linear_probe: float | None = Field(
        description="Class-balanced accuracy on held-out states of a logistic regression fit on training states; "
        "None when a split lacks a class."
    )
    valid_rank1: float | None = Field(description="Held-out groups whose positive has the lowest energy.")
    valid_infonce: float | None = Field(description="Held-out InfoNCE.")
    rank1_by_depth: dict[str, float] = Field(description="valid_rank1 per depth bucket of the positive.")
    states: int = Field(ge=0, description="States embedded by the probe.")


class JointRecord(BaseModel):
    """`joint/joint.json` of a jointly trained SFT output."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = Field(default=1, description="Version of this file format.")
    head: HeadSpec = Field(description="The head's architecture (ebm section).")
    temperature: float = Field(gt=0, description="The head's final temperature.")
    pooling: str = Field(description="ebm.pooling of the embeddings the head read.")
    normalize: bool = Field(description="ebm.normalize of the embeddings the head read.")
    max_tokens: int = Field(ge=1, description="Tokens an embedded text kept (ebm.encoder_max_tokens, ≤ context).")
    weight: float = Field(description="λ of L_sft + λ·L_infonce.")
    lr_backbone: float = Field(description="Peak learning rate of the backbone's trainable weights (this run).")
    lr_head: float = Field(description="Peak learning rate of the head (this run).")
    groups_per_step: int = Field(ge=1, description="InfoNCE groups per optimizer step.")
    negatives: int = Field(ge=1, description="Negatives per group (K).")
    steps: int = Field(ge=0, description="Optimizer steps trained.")
    processes: int = Field(ge=1, description="Data-parallel processes of the run that finished.")
    head_init: str = Field(description="Where the head started: fresh (and why) or the --init's joint head.")
    trajectories: list[str] = Field(description="Trajectory prefixes the groups came from.")
    anchors: dict[str, int] = Field(description="Positive anchors per split ('train', 'valid').")
    history: list[JointLog] = Field(description="Monitoring lines.")
    probes: list[JointProbe] = Field(description="Separation probes, in step order (the last one at the end).")
    reference_texts: list[str] = Field(description="Embedded texts whose vectors are in reference.safetensors.")
    train_seconds: float = Field(ge=0, description="Wall time of the training loop (this run).")
    written_at: datetime = Field(description="When the output was written (UTC).")


class AbortRecord(BaseModel):
    """`abort.json`: why a joint run stopped."""

    model_config = ConfigDict(extra="forbid")

    rule: str = Field(description="temperature-floor | temperature-ceiling | centroid-l2 | sft-loss | non-finite")
    step: int = Field(description="Optimizer step at which the rule fired.")
    value: float = Field(description="The measured value.")
    bound: float | None = Field(description="The configured bound it crossed.")
    message: str = Field(description="The one line printed.")
    last_checkpoint: int | None = Field(description="Step of the newest checkpoint a re-run resumes from.")
    at: datetime = Field(description="When (UTC).")


def read_joint_record(folder: Path) -> JointRecord:
    """The joint record of a local SFT output folder; `InputError` when it was not trained jointly."""
    path = folder / JOINT_DIR / RECORD_FILE
    if not path.is_file():
        raise InputError(f"{folder} holds no jointly trained head ({JOINT_DIR}/{RECORD_FILE}): train it with "
                         "sft.joint = true at an iteration ≥ 1")
    return JointRecord.model_validate_json(path.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------------------- distributed


@dataclass(frozen=True, slots=True)
class World:
    """This process's place among the data-parallel processes (torchrun's environment)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_env(cls) -> World:
        size = int(os.environ.get("WORLD_SIZE", "1"))
        return cls(int(os.environ.get("RANK", "0")), size, int(os.environ.get("LOCAL_RANK", "0")))


@contextmanager
def process_group(world: World, device: str) -> Iterator[None]:
    """torch.distributed for `world` (gloo on CPU, NCCL on CUDA); nothing for one process."""
    if world.size == 1:
        yield
        return
    import torch.distributed as dist

    dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    try:
        yield
    finally:
        dist.destroy_process_group()


def _all_sum(values: list[float], world: World, device: str) -> list[float]:
    if world.size == 1:
        return values
    import torch
    import torch.distributed as dist

    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    return [float(v) for v in tensor.tolist()]


def _all_reduce_grads(params: Sequence[torch.nn.Parameter], world: World) -> None:
    """Sum every gradient across processes (a parameter a process did not reach counts as zero)."""
    if world.size == 1:
        return
    import torch
    import torch.distributed as dist

    for param in params:
        if param.grad is None:
            param.grad = torch.zeros_like(param)
        dist.all_reduce(param.grad)


def check_processes(cfg: SftConfig, world: int) -> None:
    """The global batch must split evenly over the processes (ConfigError naming the keys otherwise)."""
    if cfg.batch_size % world or (cfg.joint and cfg.joint_groups % world):
        raise ConfigError(
            f"sft.batch_size={cfg.batch_size}" + (f" and sft.joint_groups={cfg.joint_groups}" if cfg.joint else "")
            + f" must divide by the {world} data-parallel processes (sft.processes): the global batch stays the "
            "same for every process count"
        )


# ------------------------------------------------------------------------------------------- stage


@dataclass(slots=True)
class _Window:
    sft_sum: float = 0.0
    sft_tokens: float = 0.0
    nce_sum: float = 0.0
    groups: float = 0.0

    def add(self, sft_sum: float, tokens: float, nce_sum: float, groups: float) -> None:
        self.sft_sum += sft_sum
        self.sft_tokens += tokens
        self.nce_sum += nce_sum
        self.groups += groups

    @property
    def sft(self) -> float:
        return self.sft_sum / max(self.sft_tokens, 1.0)

    @property
    def nce(self) -> float:
        return self.nce_sum / max(self.groups, 1.0)


@dataclass
class _State:
    """What a checkpoint carries besides weights and optimizer (trainer_state.json)."""

    step: int = 0
    history: list[JointLog] = field(default_factory=list)
    probes: list[JointProbe] = field(default_factory=list)
    points: list[LogPoint] = field(default_factory=list)
    head_init: str = ""


class JointAbort(TrainingError):
    """A monitoring rule stopped the run (its record is in abort.json)."""


def run_joint(request: Any, cfg: SftConfig, ebm: EbmConfig, fmt: PromptFormat, *, echo: Echo,
              store: Store, proof_examples: bool = False, form: DeclarationForm = DeclarationForm.BINDER,
              salt: str = "burnqed") -> SftOutcome:
    """Train policy + head jointly for `request` (an `SftRequest` of iteration ≥ 1); see the module docstring."""
    from burnqed.cpu_kernels import cpu_threads
    from burnqed.ebm.train import load_dataset
    from burnqed.sft.data import build_dataset, encode_pairs
    from burnqed.sft.model import load_for_training, quiet_warnings
    from burnqed.sft.train import SftOutcome, plan_training

    world = World.from_env()
    check_processes(cfg, world.size)
    if not world.main:
        echo = _silent  # one copy of every line: process 0's
    if request.iteration < 1:
        raise InputError("joint training needs trajectories: it runs at iterations ≥ 1 (iteration 0 is plain SFT)")
    groups_data = load_dataset(request.trajectories, valid_fraction=ebm.valid_fraction, salt=salt, store=store)
    base_dir, base_print, init_dir = _base_and_init(request, cfg, store)
    plan = plan_training(cfg, request.iteration, warm=init_dir is not None)
    device = plan.device  # cuda:LOCAL_RANK when data-parallel on GPUs
    mix = _training_mix(request, cfg, store, proof_examples, form)

    with cpu_threads(device, cfg.cpu_threads), quiet_warnings(), process_group(world, device):
        policy = load_for_training(plan.method, base_dir, init_dir, cfg, device, plan.bf16)
        model = policy.model.to(device) if plan.method != "qlora" else policy.model
        train_ds, stats = build_dataset(encode_pairs(policy.tokenizer, fmt, mix.train), max_length=cfg.max_length,
                                        packing=cfg.packing, seed=cfg.seed)
        if stats.examples == 0:
            raise InputError(f"all {stats.too_long} training pairs are longer than sft.max_length={cfg.max_length}")
        eval_rows: list[dict[str, Any]] = []
        if mix.eval:
            eval_ds, _ = build_dataset(encode_pairs(policy.tokenizer, fmt, mix.eval), max_length=cfg.max_length,
                                       packing=cfg.packing, seed=cfg.seed)
            eval_rows = [eval_ds[i] for i in range(len(eval_ds))]
        trainer = _JointTrainer(model, policy.tokenizer, [train_ds[i] for i in range(len(train_ds))], eval_rows,
                                groups_data, cfg, ebm, fmt, plan.steps, plan.learning_rate, device, world, echo)
        checkpoints = CheckpointStore.for_output(request.output, store=store)
        if world.main:
            checkpoints.prepare(_fingerprint(request, cfg, ebm, fmt, base_print, proof_examples),
                                fresh=request.force)
        _barrier(world)
        resume = checkpoints.latest()
        trainer.start(init_dir, resume, echo)
        started = time.monotonic()
        trainer.train(checkpoints)
        seconds = time.monotonic() - started
        eval_loss = trainer.eval_loss()
        final_probe = trainer.probe()
        if not trainer.state.probes or trainer.state.probes[-1].step != trainer.state.step:
            trainer.state.probes.append(final_probe)
        echo(trainer._probe_line(final_probe))
        if world.main:
            counts = DataCounts(
                train_examples=stats.examples, eval_examples=len(mix.eval), base_pairs=mix.base_pairs,
                positives=mix.positives, positive_upsample=mix.positive_upsample,
                positives_held_out=mix.positives_held_out, too_long=stats.too_long, eval_source=mix.eval_source,
                proof_examples=mix.proof_examples, repair_examples=mix.repair_examples, rows=stats.rows,
                tokens=stats.tokens,
                supervised_tokens=stats.supervised_tokens,
            )
            _publish(trainer, request, cfg, ebm, fmt, policy, counts, base_dir, init_dir, base_print, plan,
                     eval_loss, seconds, world, store)
            if not cfg.keep_checkpoints:
                checkpoints.clear()
        _barrier(world)
    return SftOutcome(request.output, read_sft_record(store.local_input(request.output)), skipped=False)


def _publish(trainer: _JointTrainer, request: Any, cfg: SftConfig, ebm: EbmConfig, fmt: PromptFormat, policy: Any,
             counts: DataCounts, base_dir: Path, init_dir: Path | None, base_print: str, plan: Any,
             eval_loss: float | None, seconds: float, world: World, store: Store) -> None:
    """Process 0: the policy (adapter or model folder), tokenizer, sft.json and the joint head, atomically."""
    from safetensors.torch import save_file

    from burnqed.ebm.head import save_head
    from burnqed.modelfolder import tokenizer_probe, write_config, write_tokenizer
    from burnqed.sft.model import saved_dtype

    points = trainer.state.points
    losses = [p.loss for p in points if p.loss is not None]
    record = SftRecord(
        method=cfg.method, base_model=cfg.base_model, base_fingerprint=base_print, base_dtype=saved_dtype(base_dir),
        init=request.init, iteration=request.iteration, data=request.data, trajectories=list(request.trajectories),
        prompt_format=fmt, seed=cfg.seed, steps=trainer.state.step, learning_rate=plan.learning_rate,
        resumed_from_step=trainer.resumed_from, train_loss=losses[-1] if losses else None,
        first_train_loss=losses[0] if losses else None, eval_loss=eval_loss, data_counts=counts,
        adapter_rank=policy.adapter_rank, trainable_params=policy.trainable_params + trainer.head_params,
        total_params=policy.total_params + trainer.head_params, train_seconds=round(seconds, 3),
        tokens_per_second=None, device=trainer.device, history=points,
        tokenizer_probe=tokenizer_probe(policy.tokenizer), written_at=datetime.now(UTC),
    )
    texts, vectors = trainer.reference()
    final = trainer.state.probes[-1]
    joint = JointRecord(
        head=trainer.head.spec, temperature=float(trainer.head.temperature.detach()), pooling=ebm.pooling,
        normalize=ebm.normalize, max_tokens=trainer.max_tokens, weight=cfg.joint_weight,
        lr_backbone=plan.learning_rate, lr_head=cfg.joint_head_learning_rate, groups_per_step=cfg.joint_groups,
        negatives=ebm.negatives, steps=trainer.state.step, processes=world.size, head_init=trainer.state.head_init,
        trajectories=list(request.trajectories),
        anchors={"train": len(trainer.anchors), "valid": len(trainer.valid_anchors)},
        history=trainer.state.history, probes=trainer.state.probes, reference_texts=texts,
        train_seconds=round(seconds, 3), written_at=datetime.now(UTC),
    )
    extra: dict[str, object] = {"method": record.method, "steps": record.steps, "eval_loss": record.eval_loss,
                                "joint": True, "temperature": round(joint.temperature, 6),
                                "centroid_l2": final.centroid_l2}
    with store.staged_output(request.output, "sft", extra) as folder:
        trainer.model.save_pretrained(folder)
        write_tokenizer(init_dir or base_dir, folder)
        if (folder / "config.json").is_file():
            write_config(folder / "config.json")
        (folder / JOINT_DIR).mkdir()
        save_head(trainer.head, folder / JOINT_DIR / HEAD_FILE)
        save_file({"vectors": vectors.contiguous()}, str(folder / JOINT_DIR / REFERENCE_FILE))
        (folder / JOINT_DIR / RECORD_FILE).write_text(joint.model_dump_json(indent=2) + "\n", encoding="utf-8")
        (folder / SFT_RECORD).write_text(record.model_dump_json(indent=2) + "\n", encoding="utf-8")
        share_files(folder, folder / SFT_RECORD)


def _base_and_init(request: Any, cfg: SftConfig, store: Store) -> tuple[Path, str, Path | None]:
    """The base model's folder and fingerprint, and the warm start's folder (checked against that base) or None."""
    from burnqed.sft.model import resolve_base_model
    from burnqed.sft.train import _check_init

    init_dir = store.local_input(request.init) if request.init else None
    base_dir = resolve_base_model(cfg.base_model, store=store)
    base_print = model_fingerprint(base_dir)
    if init_dir is not None:
        _check_init(init_dir, request.init or "", cfg, base_print)
    return base_dir, base_print, init_dir


def _training_mix(request: Any, cfg: SftConfig, store: Store, proof_examples: bool,
                  form: DeclarationForm) -> SftMix:
    """The SFT half's pairs: the base pairs mixed with the trajectories' positives (and proof examples)."""
    from burnqed.sft.data import mix_pairs, read_base_pairs, read_declarations, read_positives, read_proof_examples

    data_dir = store.local_input(request.data)
    base = read_base_pairs(data_dir)
    positives = read_positives(request.trajectories, store=store)
    if proof_examples:
        positives += read_proof_examples(request.trajectories, store=store)
    mix = mix_pairs(base, positives, iteration=request.iteration, base_subsample=cfg.base_subsample,
                    positive_upsample=cfg.positive_upsample, eval_fraction=cfg.eval_fraction, seed=cfg.seed,
                    declarations=read_declarations(data_dir, form))
    if not mix.train:
        raise InputError(f"no training pairs left after filtering ({len(base)} pairs in {request.data})")
    return mix


def _silent(line: str) -> None:
    del line


def _barrier(world: World) -> None:
    if world.size > 1:
        import torch.distributed as dist

        dist.barrier()


def _fingerprint(request: Any, cfg: SftConfig, ebm: EbmConfig, fmt: PromptFormat, base_print: str,
                 proof_examples: bool) -> str:
    return fingerprint({
        "joint": 1, "sft": cfg.model_dump(mode="json", exclude=set(RESUMABLE_KEYS)),
        "ebm": {key: getattr(ebm, key) for key in EBM_SHAPING_KEYS}, "iteration": request.iteration,
        "data": request.data, "trajectories": list(request.trajectories), "init": request.init, "format": str(fmt),
        "base": base_print, "proof_examples": proof_examples,
    })


# ------------------------------------------------------------------------------------------ trainer


class _JointTrainer:
    """The training loop (module docstring); one instance per process."""

    def __init__(self, model: Any, tokenizer: Any, rows: list[dict[str, Any]], eval_rows: list[dict[str, Any]],
                 data: EbmDataset, cfg: SftConfig, ebm: EbmConfig, fmt: PromptFormat, steps: int, lr: float,
                 device: str, world: World, echo: Echo) -> None:
        from burnqed.ebm.sampling import GroupShape, NegativeSampler, fixed_groups
        from burnqed.modelfolder import context_length, encode_texts
        from burnqed.prompt import build_embedding_text
        from burnqed.sft.data import PackedRowsCollator

        self.model, self.tokenizer, self.rows, self.eval_rows = model, tokenizer, rows, eval_rows
        self.data, self.cfg, self.ebm, self.steps, self.lr = data, cfg, ebm, steps, lr
        self.device, self.world, self.echo = device, world, echo
        self.collate = PackedRowsCollator(int(tokenizer.pad_token_id))
        self.max_tokens = max(1, min(ebm.encoder_max_tokens, context_length(model.config)))
        texts = data.texts()
        self.text_row = {text: row for row, text in enumerate(texts)}
        self.text_ids = encode_texts(tokenizer, [build_embedding_text(fmt, t) for t in texts],
                                     max_tokens=self.max_tokens)
        self.embedding_texts = [build_embedding_text(fmt, t) for t in texts]
        self.anchors = data.anchors("train")
        shape = GroupShape.of(ebm)
        self.sampler: NegativeSampler = NegativeSampler(data, "train", shape, seed=ebm.seed)
        self.valid_anchors = data.anchors("valid")
        self.valid_groups = fixed_groups(data, "valid", shape, seed=ebm.seed + 1)
        self.state = _State()
        self.resumed_from: int | None = None
        self.head: GoalConditionedEnergyHead
        self.head_params = 0
        self.optimizer: Any = None
        self.scheduler: Any = None

    # ---------------------------------------------------------------------------------- set-up

    @property
    def decoder(self) -> Any:
        """The decoder stack whose last hidden states the encoder pools (LoRA layers included)."""
        return self.model.get_decoder()

    def embed(self, rows: Sequence[int]) -> torch.Tensor:
        """Vectors (len(rows), d) of the texts at `rows`, through the encoder's pooling (with gradients when
        enabled by the caller)."""
        import torch

        from burnqed.policy.local import pool_hidden_states, token_batches

        ids = [self.text_ids[r] for r in rows]
        out = [pool_hidden_states(self.decoder, batch, int(self.tokenizer.pad_token_id), self.ebm.pooling,
                                  self.ebm.normalize, self.device)
               for batch in token_batches(ids, self.ebm.encode_batch_tokens)]
        return torch.cat(out) if out else torch.zeros(0)

    def embed_frozen(self, rows: Sequence[int]) -> torch.Tensor:
        import torch

        was = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                return self.embed(rows).detach()
        finally:
            self.model.train(was)

    def start(self, init_dir: Path | None, resume: Path | None, echo: Echo) -> None:
        """The head (fresh with input statistics from the starting backbone, or --init's joint head), the
        optimizer and scheduler, and the checkpoint `resume` when given."""
        import torch
        from transformers import get_scheduler

        from burnqed.ebm.head import GoalConditionedEnergyHead, load_head
        from burnqed.ebm.train import head_spec

        torch.manual_seed(self.cfg.seed)
        rows = sorted({self.text_row[self.data.states[i].text] for i in self.data.split_states("train")}
                      | {self.text_row[t.goal] for t in self.data.theorems.values() if t.split == "train"})
        if len(rows) > STATS_MAX_TEXTS:
            rows = sorted(random.Random(self.cfg.seed).sample(rows, STATS_MAX_TEXTS))
        sample = self.embed_frozen(rows)
        spec = head_spec(self.ebm, int(sample.shape[1]))
        previous = init_dir / JOINT_DIR if init_dir is not None else None
        if (init_dir is not None and previous is not None and (previous / HEAD_FILE).is_file()
                and read_joint_record(init_dir).head == spec):
            self.head = load_head(spec, previous / HEAD_FILE, self.device)
            self.state.head_init = "resumed: the --init output's jointly trained head (same architecture)"
        else:
            self.head = GoalConditionedEnergyHead(spec, self.ebm.init_temperature).to(self.device)
            self.head.set_input_stats(sample.mean(dim=0), sample.std(dim=0) if len(rows) > 1
                                      else torch.ones(sample.shape[1]))
            why = "no --init" if previous is None else "the --init output has no joint head of this architecture"
            self.state.head_init = f"fresh ({why}): input statistics of {len(rows)} training texts"
        self.head_params = sum(p.numel() for p in self.head.parameters())
        backbone = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            [{"params": backbone, "lr": self.lr}, {"params": list(self.head.parameters()),
                                                    "lr": self.cfg.joint_head_learning_rate, "weight_decay": 0.0}],
            weight_decay=self.cfg.weight_decay,
        )
        self.scheduler = get_scheduler(self.cfg.scheduler, self.optimizer, num_warmup_steps=self.cfg.warmup_steps,
                                       num_training_steps=self.steps)
        if resume is not None:
            self._load(resume)
            echo(f"sft: joint run resuming from {resume.name} (step {self.state.step})")

    # ---------------------------------------------------------------------------------- batches

    def _sft_rows(self, step: int) -> list[int]:
        """The global batch of rows of `step` (1-based): epochs of a seeded permutation, a pure function of step
        (every process draws the same; a resumed run continues the same order)."""
        size = self.cfg.batch_size * self.cfg.grad_accum
        return [_order(len(self.rows), f"{self.cfg.seed}:rows", p) for p in range((step - 1) * size, step * size)]

    def _groups(self, step: int) -> tuple[list[list[int]], list[Anchor]]:
        """The global InfoNCE groups of `step`: anchors in seeded epochs, negatives drawn with a per-step seed."""
        size = self.cfg.joint_groups
        anchors = [self.anchors[_order(len(self.anchors), f"{self.ebm.seed}:anchors", p)]
                   for p in range((step - 1) * size, step * size)]
        self.sampler.rng.seed(f"{self.ebm.seed}:groups:{step}")
        return [self.sampler.group(a) for a in anchors], anchors

    # ---------------------------------------------------------------------------------- losses

    def _sft_sum(self, rows: Sequence[dict[str, Any]]) -> tuple[torch.Tensor, int]:
        """Summed token cross-entropy of `rows` (completion tokens only) and the count of those tokens."""
        import torch.nn.functional as F

        batch = {k: v.to(self.device) for k, v in self.collate(rows).items()}
        logits = self.model(input_ids=batch["input_ids"], position_ids=batch["position_ids"], use_cache=False).logits
        labels = batch["labels"][:, 1:]
        loss = F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]), labels.reshape(-1),
                               ignore_index=-100, reduction="sum")
        return loss, int((labels != -100).sum())

    @staticmethod
    def _supervised(rows: Sequence[dict[str, Any]]) -> int:
        """Tokens in the loss of `rows` as collated (the first token of every packed example is never a target)."""
        total = 0
        for row in rows:
            starts, position = set(), 0
            for length in row.get("seq_lengths") or [len(row["input_ids"])]:
                starts.add(position)
                position += length
            total += sum(1 for i, label in enumerate(row["labels"]) if i > 0 and i not in starts and label != -100)
        return total

    def _energies(self, groups: Sequence[Sequence[int]],
                  anchors: Sequence[Anchor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Energies (G, 1 + K) of `groups` under their anchors' goals and the head's depth read-out, every state and
        goal embedded once through the backbone (with gradients when the caller allows them)."""
        import torch

        state_rows = [[self.text_row[self.data.states[s].text] for s in group] for group in groups]
        goal_rows = [self.text_row[self.data.theorems[a.theorem].goal] for a in anchors]
        unique = sorted({r for group in state_rows for r in group} | set(goal_rows))
        where = {r: i for i, r in enumerate(unique)}
        vectors = self.embed(unique)
        states = vectors[torch.tensor([[where[r] for r in g] for g in state_rows], device=vectors.device)]
        goals = vectors[torch.tensor([where[r] for r in goal_rows], device=vectors.device)].unsqueeze(1)
        return self.head.energy_and_depth(states, goals)

    # ---------------------------------------------------------------------------------- loop

    def train(self, checkpoints: CheckpointStore) -> None:
        self._checkpoints = checkpoints
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        window = _Window()
        started = time.monotonic()
        self.model.train()
        self.head.train()
        for step in range(self.state.step + 1, self.steps + 1):
            sft_sum, nce_sum, tokens, groups = self._step(step, params)
            window.add(sft_sum, tokens, nce_sum, groups)
            self.state.step = step
            temperature = float(self.head.temperature.detach())
            if not (math.isfinite(sft_sum) and math.isfinite(nce_sum)):
                self._abort("non-finite", step, sft_sum + nce_sum, None,
                            f"joint training diverged at step {step} (SFT {sft_sum:.4g}, InfoNCE {nce_sum:.4g}); "
                            "lower sft.learning_rate or sft.joint_head_learning_rate")
            if step % self.cfg.joint_log_every == 0 or step == self.steps:
                self._log(step, window, temperature, started)
                window = _Window()
            self._monitor(step, temperature, checkpoints)
            self.model.train()
            self.head.train()

    def _step(self, step: int, params: list[Any]) -> tuple[float, float, int, int]:
        """One optimizer step on both losses: (SFT loss sum, InfoNCE sum over all processes, supervised tokens,
        contrastive groups)."""
        import torch
        import torch.nn.functional as F

        from burnqed.ebm.losses import depth_loss

        world, cfg = self.world, self.cfg
        rows = self._sft_rows(step)
        groups, anchors = self._groups(step)
        tokens = self._supervised([self.rows[r] for r in rows])
        mine = rows[world.rank::world.size]
        my_groups, my_anchors = groups[world.rank::world.size], anchors[world.rank::world.size]
        self.optimizer.zero_grad(set_to_none=True)
        sft_sum = 0.0
        for start in range(0, len(mine), cfg.batch_size):
            loss, _ = self._sft_sum([self.rows[r] for r in mine[start:start + cfg.batch_size]])
            (loss / max(tokens, 1)).backward()  # type: ignore[no-untyped-call]
            sft_sum += float(loss.detach())
        energies, predicted = self._energies(my_groups, my_anchors)
        targets = torch.zeros(energies.shape[0], dtype=torch.long, device=energies.device)
        nce = F.cross_entropy(-energies, targets, reduction="sum")
        total = cfg.joint_weight * nce / len(groups)
        if self.ebm.depth_loss_weight > 0:
            remaining = torch.tensor([a.remaining for a in my_anchors], device=predicted.device)
            total = total + cfg.joint_weight * self.ebm.depth_loss_weight * depth_loss(
                predicted[:, 0], remaining) * len(my_groups) / len(groups)
        total.backward()  # type: ignore[no-untyped-call]
        _all_reduce_grads(params, world)
        torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
        self.optimizer.step()
        self.scheduler.step()
        sft_sum, nce_sum = _all_sum([sft_sum, float(nce.detach())], self.world, self.device)
        return sft_sum, nce_sum, tokens, len(groups)

    def _monitor(self, step: int, temperature: float, checkpoints: CheckpointStore) -> None:
        """After a step: the periodic checkpoint, the temperature rule and the separation probe with its bound."""
        cfg = self.cfg
        if step % cfg.save_steps == 0 and step < self.steps and self.world.main:
            self._save(checkpoints, step)
        self._check_temperature(step, temperature)
        if step % cfg.joint_probe_every == 0 and step < self.steps:
            probe = self.probe()
            self.state.probes.append(probe)
            self.echo(self._probe_line(probe))
            bound = cfg.joint_min_centroid_l2
            if bound is not None and probe.centroid_l2 < bound:
                self._abort("centroid-l2", step, probe.centroid_l2, bound,
                            f"joint training stopped at step {step}: embedding centroid L2 "
                            f"{probe.centroid_l2:.4f} fell below sft.joint_min_centroid_l2={bound} (the "
                            "embeddings are collapsing); raise sft.joint_weight or lower sft.learning_rate")

    def _log(self, step: int, window: _Window, temperature: float, started: float) -> None:
        lrs = [group["lr"] for group in self.optimizer.param_groups]
        entry = JointLog(step=step, sft_loss=round(window.sft, 6), infonce=round(window.nce, 6),
                         temperature=round(temperature, 6), lr_backbone=lrs[0], lr_head=lrs[1],
                         seconds=round(time.monotonic() - started, 3))
        self.state.history.append(entry)
        self.state.points.append(LogPoint(step=step, loss=entry.sft_loss, learning_rate=lrs[0]))
        self.echo(f"sft: joint step {step}/{self.steps} sft {entry.sft_loss:.4f} infonce {entry.infonce:.4f} "
                  f"T {temperature:.3f} lr {lrs[0]:.2e}/{lrs[1]:.2e}")
        bound = self.cfg.joint_max_sft_loss
        if bound is not None and step >= self.cfg.joint_abort_after and window.sft > bound:
            self._abort("sft-loss", step, window.sft, bound,
                        f"joint training stopped at step {step}: SFT loss {window.sft:.4f} is above "
                        f"sft.joint_max_sft_loss={bound} after {self.cfg.joint_abort_after} steps; lower "
                        "sft.joint_weight or sft.learning_rate")

    def _check_temperature(self, step: int, value: float) -> None:
        low, high = self.ebm.temperature_min, self.ebm.temperature_max
        if low <= value <= high:
            return
        side = "floor" if value < low else "ceiling"
        self._abort(f"temperature-{side}", step, value, low if side == "floor" else high,
                    f"joint training stopped at step {step}: the head's temperature {value:.4f} hit its {side} "
                    f"(ebm.temperature_min/max [{low}, {high}]); lower sft.joint_head_learning_rate and re-run to "
                    "resume from the last checkpoint")

    def _abort(self, rule: str, step: int, value: float, bound: float | None, message: str) -> None:
        if self.world.main:
            store = self._checkpoints
            latest = store.latest()
            record = AbortRecord(rule=rule, step=step, value=value if math.isfinite(value) else -1.0, bound=bound,
                                 message=message, last_checkpoint=int(latest.name.split("-")[1]) if latest else None,
                                 at=datetime.now(UTC))
            _write_abort(store, record)
            where = store.remote or str(store.local)
            message = f"{message} (record: {where}/{ABORT_FILE})"
        raise JointAbort(message)

    _checkpoints: CheckpointStore

    # ---------------------------------------------------------------------------------- probes

    def probe(self) -> JointProbe:
        """Separation of the current backbone's embeddings and the head's held-out ranking (eval mode)."""
        import torch

        from burnqed.ebm.metrics import embedding_health, group_snapshot

        splits: dict[Split, list[int]] = {}
        splits_names: tuple[Split, ...] = ("train", "valid")
        for split in splits_names:
            states = self.data.split_states(split)
            if len(states) > PROBE_MAX_STATES:
                states = sorted(random.Random(f"{self.cfg.seed}:probe:{split}").sample(states, PROBE_MAX_STATES))
            splits[split] = states
        every = splits["train"] + splits["valid"]
        rows = sorted({self.text_row[self.data.states[i].text] for i in every})
        vectors = self.embed_frozen(rows).cpu()
        position = {r: k for k, r in enumerate(rows)}
        where = {self.data.states[i].text: position[self.text_row[self.data.states[i].text]] for i in every}
        health = embedding_health(self.data, vectors, where, splits)
        rank1 = infonce = None
        by_depth: dict[str, float] = {}
        if self.valid_groups:
            self.head.eval()
            self.model.eval()
            with torch.no_grad():
                energies, _ = self._energies(self.valid_groups, self.valid_anchors)
            snap = group_snapshot(energies, [a.depth for a in self.valid_anchors], step=self.state.step,
                                  split="valid", temperature=float(self.head.temperature.detach()))
            rank1, infonce, by_depth = snap.rank1, snap.infonce, snap.rank1_by_depth
        return JointProbe(step=self.state.step, centroid_l2=health.centroid_l2, linear_probe=health.linear_probe,
                          valid_rank1=rank1, valid_infonce=infonce, rank1_by_depth=by_depth, states=len(every))

    @staticmethod
    def _probe_line(probe: JointProbe) -> str:
        linear = "n/a" if probe.linear_probe is None else f"{probe.linear_probe:.3f}"
        rank1 = "n/a" if probe.valid_rank1 is None else f"{probe.valid_rank1:.3f}"
        depths = ", ".join(f"{b}: {probe.rank1_by_depth[b]:.2f}" for b in DEPTH_BUCKETS if b in probe.rank1_by_depth)
        return (f"sft: joint probe at step {probe.step}: centroid L2 {probe.centroid_l2:.4f}, linear probe {linear}, "
                f"held-out rank-1 {rank1}" + (f" (by depth {depths})" if depths else ""))

    def eval_loss(self) -> float | None:
        """Token-mean SFT loss of the held-out rows (eval mode)."""
        import torch

        if not self.eval_rows:
            return None
        self.model.eval()
        total, count = 0.0, 0
        with torch.no_grad():
            for start in range(0, len(self.eval_rows), self.cfg.batch_size):
                loss, n = self._sft_sum(self.eval_rows[start:start + self.cfg.batch_size])
                total, count = total + float(loss), count + n
        return round(total / max(count, 1), 6)

    def reference(self) -> tuple[list[str], torch.Tensor]:
        """A few states' texts and their vectors under the trained backbone (eval mode), for the identity check."""
        states = sorted(self.data.split_states("train") + self.data.split_states("valid"))
        picked = random.Random(f"{self.cfg.seed}:reference").sample(states, min(REFERENCE_STATES, len(states)))
        rows = sorted({self.text_row[self.data.states[i].text] for i in picked})
        return [self.embedding_texts[r] for r in rows], self.embed_frozen(rows).float().cpu()

    # ---------------------------------------------------------------------------------- checkpoints

    def _save(self, checkpoints: CheckpointStore, step: int) -> None:
        import torch
        from safetensors.torch import save_file

        from burnqed.ebm.head import save_head

        folder = checkpoints.local / f"checkpoint-{step}"
        folder.mkdir(parents=True, exist_ok=True)
        trainable = {name: p.detach().contiguous().cpu() for name, p in self.model.named_parameters()
                     if p.requires_grad}
        save_file(trainable, str(folder / TRAINABLE_FILE))
        save_head(self.head, folder / HEAD_FILE)
        torch.save({"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                    "rng": torch.get_rng_state()}, folder / OPTIMIZER_FILE)
        state = {"step": step, "history": [h.model_dump(mode="json") for h in self.state.history],
                 "probes": [p.model_dump(mode="json") for p in self.state.probes],
                 "points": [p.model_dump(mode="json") for p in self.state.points], "head_init": self.state.head_init}
        (folder / STATE_FILE).write_text(json.dumps(state) + "\n", encoding="utf-8")
        for old in checkpoints.local.glob("checkpoint-*"):
            if old != folder:
                import shutil

                shutil.rmtree(old, ignore_errors=True)
        checkpoints.push(folder)

    def _load(self, folder: Path) -> None:
        import torch
        from safetensors.torch import load_file

        trainable = load_file(str(folder / TRAINABLE_FILE), device="cpu")
        params = dict(self.model.named_parameters())
        with torch.no_grad():
            for name, tensor in trainable.items():
                params[name].copy_(tensor.to(params[name].device))
        self.head.load_state_dict(load_file(str(folder / HEAD_FILE), device="cpu"), strict=True)
        saved = torch.load(folder / OPTIMIZER_FILE, map_location="cpu", weights_only=False)
        self.optimizer.load_state_dict(saved["optimizer"])
        self.scheduler.load_state_dict(saved["scheduler"])
        torch.set_rng_state(saved["rng"])
        # A re-run may have changed the learning rates (the fix an abort asks for): take the current ones.
        peaks = [self.lr, self.cfg.joint_head_learning_rate]
        self.scheduler.base_lrs = list(peaks)
        for group, peak, factor in zip(self.optimizer.param_groups, peaks, self.scheduler.lr_lambdas, strict=True):
            group["initial_lr"] = peak
            group["lr"] = peak * factor(self.scheduler.last_epoch)
        raw = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
        self.state = _State(step=int(raw["step"]), history=[JointLog.model_validate(h) for h in raw["history"]],
                            probes=[JointProbe.model_validate(p) for p in raw["probes"]],
                            points=[LogPoint.model_validate(p) for p in raw["points"]],
                            head_init=str(raw["head_init"]))
        self.resumed_from = self.state.step


@cache
def _permutation(size: int, key: str, epoch: int) -> tuple[int, ...]:
    order = list(range(size))
    random.Random(f"{key}:{epoch}").shuffle(order)
    return tuple(order)


def _order(size: int, key: str, position: int) -> int:
    """The index at `position` of an endless sequence of seeded permutations of range(size)."""
    epoch, offset = divmod(position, size)
    return _permutation(size, key, epoch)[offset]


def _write_abort(checkpoints: CheckpointStore, record: AbortRecord) -> None:
    payload = record.model_dump_json(indent=2) + "\n"
    checkpoints.local.mkdir(parents=True, exist_ok=True)
    (checkpoints.local / ABORT_FILE).write_text(payload, encoding="utf-8")
    if checkpoints.remote is not None and is_remote(checkpoints.remote):
        import posixpath

        fs, root = checkpoints.store.resolve(checkpoints.remote)
        fs.pipe_file(posixpath.join(root, ABORT_FILE), payload.encode())


def read_abort(output: str, *, store: Store) -> AbortRecord | None:
    """The abort record of the joint run of `output`, if its last run aborted."""
    path = CheckpointStore.for_output(output, store=store).local / ABORT_FILE
    return AbortRecord.model_validate_json(path.read_text(encoding="utf-8")) if path.is_file() else None


__all__ = ["AbortRecord", "JointAbort", "JointProbe", "JointRecord", "World", "read_abort", "read_joint_record",
           "run_joint"]

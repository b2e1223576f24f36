"""Joint training (`sft.joint = true`, iterations ≥ 1): the value model's head trained with the policy, as a hook in the
one SFT trainer (`burnqed.sft.trainer`, TRL's `SFTTrainer`), not a loop of its own.

    joint = JointObjective(policy.model, policy.tokenizer, load_groups(request.trajectories, ebm, salt=..., store=...),
                           cfg.sft, cfg.ebm, fmt, steps=..., learning_rate=..., device=..., world=..., echo=...,
                           checkpoints=...)
    trainer = build_trainer(policy, train_ds, eval_ds, ..., joint=joint)   # `run_sft` does all of this
    joint.start(init_dir, resume)           # the head: fresh, the --init output's, or the checkpoint's
    trainer.train(...)

The hook adds an InfoNCE loss term, the head's parameter group, the row order, monitoring with abort rules, and
the head's checkpoint and output files: docs/training.md, "Joint training" and "Data-parallel training".
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from burnqed.config import EbmConfig, SftConfig
from burnqed.ebm.formats import DEPTH_BUCKETS
from burnqed.sft.checkpoints import CheckpointStore
from burnqed.sft.launch import World, all_sum
from burnqed.storage import Store
from burnqed.text.prompt import PromptFormat

if TYPE_CHECKING:
    import torch

    from burnqed.ebm.head import GoalConditionedEnergyHead
    from burnqed.ebm.sampling import Anchor, EbmDataset, Split
from burnqed.sft.joint_records import (
    ABORT_FILE,
    HEAD_FILE,
    JOINT_DIR,
    JOINT_STATE_FILE,
    RECORD_FILE,
    REFERENCE_FILE,
    AbortRecord,
    JointAbort,
    JointLog,
    JointProbe,
    JointRecord,
    _write_abort,
    read_joint_record,
)

Echo = Callable[[str], None]


REFERENCE_STATES = 8  # states whose trained-backbone vectors travel with the head (identity check)


PROBE_MAX_STATES = 4096  # states per split a probe embeds at most (seeded sample beyond)


STATS_MAX_TEXTS = 4096  # texts the head's input statistics are computed from at most


def load_groups(trajectories: Sequence[str], ebm: EbmConfig, *, salt: str, store: Store) -> EbmDataset:
    """The trajectories' states and theorems the InfoNCE groups come from, split by theorem (`ebm.valid_fraction`,
    `data.split_salt`); `InputError` when they cannot train a head."""
    from burnqed.ebm.sampling import load_dataset

    return load_dataset(trajectories, valid_fraction=ebm.valid_fraction, salt=salt, store=store)


@dataclass(slots=True)
class _Window:
    """The losses since the previous monitoring line: token-weighted SFT, group-mean InfoNCE."""

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


# ------------------------------------------------------------------------------------------- the hook


class JointObjective:
    """The value model's head, its loss term, its monitoring and its files: what joint training adds to the
    trainer (module docstring). One instance per process; the trainer calls `loss_term`, `observe_sft`,
    `join`, `reduce_gradients` and `save_checkpoint`, its callback (`callback`) the monitoring."""

    def __init__(self, model: Any, tokenizer: Any, data: EbmDataset, cfg: SftConfig, ebm: EbmConfig,
                 fmt: PromptFormat, *, steps: int, learning_rate: float, device: str, world: World, echo: Echo,
                 checkpoints: CheckpointStore) -> None:
        from burnqed.ebm.sampling import GroupShape, NegativeSampler, fixed_groups
        from burnqed.policy.modelfolder import context_length, encode_texts
        from burnqed.text.prompt import build_embedding_text

        self.model, self.tokenizer, self.data, self.cfg, self.ebm = model, tokenizer, data, cfg, ebm
        self.steps, self.learning_rate, self.device, self.world, self.echo = steps, learning_rate, device, world, echo
        self.checkpoints = checkpoints
        self.max_tokens = max(1, min(ebm.encoder_max_tokens, context_length(model.config)))
        texts = data.texts()
        self.text_row = {text: row for row, text in enumerate(texts)}
        self.embedding_texts = [build_embedding_text(fmt, t) for t in texts]
        self.text_ids = encode_texts(tokenizer, self.embedding_texts, max_tokens=self.max_tokens)
        self.anchors = data.anchors("train")
        shape = GroupShape.of(ebm)
        self.sampler = NegativeSampler(data, "train", shape, seed=ebm.seed)
        self.valid_anchors = data.anchors("valid")
        self.valid_groups = fixed_groups(data, "valid", shape, seed=ebm.seed + 1)
        self.head: GoalConditionedEnergyHead
        self.head_params = 0
        self.head_init = ""
        self.history: list[JointLog] = []
        self.probes: list[JointProbe] = []
        self.step = 0  # optimizer steps done
        self._termed = 0  # the step whose loss term is in
        self._sft_share = 0.0  # this process's share of the current step's token-mean SFT loss
        self._sft_tokens = 0  # the current step's supervised tokens (all processes)
        self._nce = 0.0  # this process's InfoNCE sum of the current step
        self._window = _Window()
        self._started = time.monotonic()

    # ---------------------------------------------------------------------------------- set-up

    def row_order(self, rows: int) -> list[int]:
        """The dataset positions of every step's SFT rows, in training order: step s (1-based) takes positions
        [(s-1)·B, s·B) of epochs of a seeded permutation (B = batch_size × grad_accum rows, the global batch), a
        pure function of the seed and the step, so a resumed run continues the same sequence."""
        size = self.cfg.batch_size * self.cfg.grad_accum
        return [_order(rows, f"{self.cfg.seed}:rows", p) for p in range(self.steps * size)]

    def start(self, init_dir: Path | None, resume: Path | None) -> None:
        """The head (fresh with input statistics from the starting backbone, or --init's joint head), then the
        checkpoint `resume`'s head and monitoring state when given. Call once the model is on its device."""
        import torch

        from burnqed.ebm.head import GoalConditionedEnergyHead, head_spec, load_head

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
            self.head_init = "resumed: the --init output's jointly trained head (same architecture)"
        else:
            self.head = GoalConditionedEnergyHead(spec, self.ebm.init_temperature).to(self.device)
            self.head.set_input_stats(sample.mean(dim=0), sample.std(dim=0) if len(rows) > 1
                                      else torch.ones(sample.shape[1]))
            why = "no --init" if previous is None else "the --init output has no joint head of this architecture"
            self.head_init = f"fresh ({why}): input statistics of {len(rows)} training texts"
        self.head_params = sum(p.numel() for p in self.head.parameters())
        if resume is not None:
            self._load(resume)
            self.echo(f"sft: joint run resuming from {resume.name} (step {self.step})")

    def parameters(self) -> list[Any]:
        return list(self.head.parameters())

    def join(self, optimizer: Any) -> None:
        """Add the head to the trainer's optimizer (once), as its last group: its own peak learning rate, no weight
        decay."""
        head = {id(p) for p in self.parameters()}
        if not any(id(p) in head for group in optimizer.param_groups for p in group["params"]):
            optimizer.add_param_group({"params": self.parameters(), "lr": self.cfg.joint_head_learning_rate,
                                       "weight_decay": 0.0})

    # ---------------------------------------------------------------------------------- the loss term

    def loss_term(self, step: int) -> torch.Tensor | None:
        """`joint_weight` · InfoNCE (+ the depth read-out's loss) of this process's share of step `step`'s groups,
        once per step (None for the step's later micro-batches), scaled by the process count: DDP averages the
        backbone's gradients over the processes and `reduce_gradients` the head's, and the update needs their sum."""
        import torch
        import torch.nn.functional as F

        from burnqed.ebm.losses import depth_loss

        if step == self._termed:
            return None
        self._termed = step
        # The trainer zeroes the model's gradients after each step; the head is not part of the model.
        self.head.zero_grad(set_to_none=True)
        world, cfg = self.world, self.cfg
        groups, anchors = self._groups(step)
        mine, my_anchors = groups[world.rank::world.size], anchors[world.rank::world.size]
        self.head.train()
        energies, predicted = self._energies(mine, my_anchors)
        targets = torch.zeros(energies.shape[0], dtype=torch.long, device=energies.device)
        nce = F.cross_entropy(-energies, targets, reduction="sum")
        total = cfg.joint_weight * nce / len(groups)
        if self.ebm.depth_loss_weight > 0:
            remaining = torch.tensor([a.remaining for a in my_anchors], device=predicted.device)
            total = total + cfg.joint_weight * self.ebm.depth_loss_weight * depth_loss(
                predicted[:, 0], remaining) * len(mine) / len(groups)
        self._nce = float(nce.detach())
        return total * world.size

    def observe_sft(self, share: float, tokens: int) -> None:
        """A micro-batch's share of its step's token-mean SFT loss (this process), and the step's supervised
        tokens over all processes."""
        self._sft_share += share
        self._sft_tokens = tokens

    def reduce_gradients(self) -> None:
        """The head's gradients summed over the processes (each holds its loss term × the process count)."""
        if self.world.size == 1:
            return
        import torch
        import torch.distributed as dist

        for param in self.head.parameters():
            if param.grad is None:
                param.grad = torch.zeros_like(param)
            dist.all_reduce(param.grad)
            param.grad /= self.world.size

    # ---------------------------------------------------------------------------------- monitoring

    def begin(self) -> None:
        self._started = time.monotonic()
        self._window = _Window()

    def end_step(self, step: int, optimizer: Any) -> None:
        """After optimizer step `step`: both losses over all processes, the non-finite rule, the monitoring line
        every `joint_log_every` steps and the SFT-loss rule."""
        sft_mean, nce_sum = all_sum([self._sft_share, self._nce], self.world, self.device)
        tokens, groups = self._sft_tokens, self.cfg.joint_groups
        self._sft_share, self._nce = 0.0, 0.0
        self.step = step
        sft_sum = sft_mean * tokens
        self._window.add(sft_sum, tokens, nce_sum, groups)
        if not (math.isfinite(sft_sum) and math.isfinite(nce_sum)):
            self._abort("non-finite", step, sft_sum + nce_sum, None,
                        f"joint training diverged at step {step} (SFT {sft_sum:.4g}, InfoNCE {nce_sum:.4g}); "
                        "lower sft.learning_rate or sft.joint_head_learning_rate")
        if step % self.cfg.joint_log_every == 0 or step == self.steps:
            self._log(step, optimizer)
            self._window = _Window()

    def monitor(self, step: int) -> None:
        """After step `step` (and its checkpoint, when it has one): the temperature rule and, every
        `joint_probe_every` steps before the last, the separation probe and its bound."""
        self._check_temperature(step, float(self.head.temperature.detach()))
        cfg = self.cfg
        if step % cfg.joint_probe_every == 0 and step < self.steps:
            probe = self.probe()
            self.probes.append(probe)
            self.echo(self._probe_line(probe))
            bound = cfg.joint_min_centroid_l2
            if bound is not None and probe.centroid_l2 < bound:
                self._abort("centroid-l2", step, probe.centroid_l2, bound,
                            f"joint training stopped at step {step}: embedding centroid L2 "
                            f"{probe.centroid_l2:.4f} fell below sft.joint_min_centroid_l2={bound} (the "
                            "embeddings are collapsing); raise sft.joint_weight or lower sft.learning_rate")

    def _log(self, step: int, optimizer: Any) -> None:
        window = self._window
        temperature = float(self.head.temperature.detach())
        lrs = [group["lr"] for group in optimizer.param_groups]
        entry = JointLog(step=step, sft_loss=round(window.sft, 6), infonce=round(window.nce, 6),
                         temperature=round(temperature, 6), lr_backbone=lrs[0], lr_head=lrs[-1],
                         seconds=round(time.monotonic() - self._started, 3))
        self.history.append(entry)
        self.echo(f"sft: joint step {step}/{self.steps} sft {entry.sft_loss:.4f} infonce {entry.infonce:.4f} "
                  f"T {temperature:.3f} lr {lrs[0]:.2e}/{lrs[-1]:.2e}")
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
            store = self.checkpoints
            latest = store.latest()
            record = AbortRecord(rule=rule, step=step, value=value if math.isfinite(value) else -1.0, bound=bound,
                                 message=message, last_checkpoint=int(latest.name.split("-")[1]) if latest else None,
                                 at=datetime.now(UTC))
            _write_abort(store, record)
            where = store.remote or str(store.local)
            message = f"{message} (record: {where}/{ABORT_FILE})"
        raise JointAbort(message)

    # ---------------------------------------------------------------------------------- embeddings

    def embed(self, rows: Sequence[int]) -> torch.Tensor:
        """Vectors (len(rows), d) of the texts at `rows`, through the encoder's pooling of the decoder stack's
        last hidden states (LoRA layers included), with gradients when the caller allows them."""
        import torch

        from burnqed.policy.localmodel import pool_hidden_states, token_batches

        ids = [self.text_ids[r] for r in rows]
        decoder = self.model.get_decoder()
        out = [pool_hidden_states(decoder, batch, int(self.tokenizer.pad_token_id), self.ebm.pooling,
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

    def _groups(self, step: int) -> tuple[list[list[int]], list[Anchor]]:
        """The global InfoNCE groups of `step`: anchors in seeded epochs, negatives drawn with a per-step seed."""
        size = self.cfg.joint_groups
        anchors = [self.anchors[_order(len(self.anchors), f"{self.ebm.seed}:anchors", p)]
                   for p in range((step - 1) * size, step * size)]
        self.sampler.rng.seed(f"{self.ebm.seed}:groups:{step}")
        return [self.sampler.group(a) for a in anchors], anchors

    def _energies(self, groups: Sequence[Sequence[int]],
                  anchors: Sequence[Anchor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Energies (G, 1 + K) of `groups` under their anchors' goals and the head's depth read-out, every state and
        goal embedded once through the backbone (with gradients when the caller allows them). The head reads
        float32 vectors in float32, also under the trainer's bf16 autocast, as the value model does in search."""
        import torch

        state_rows = [[self.text_row[self.data.states[s].text] for s in group] for group in groups]
        goal_rows = [self.text_row[self.data.theorems[a.theorem].goal] for a in anchors]
        unique = sorted({r for group in state_rows for r in group} | set(goal_rows))
        where = {r: i for i, r in enumerate(unique)}
        vectors = self.embed(unique).float()
        states = vectors[torch.tensor([[where[r] for r in g] for g in state_rows], device=vectors.device)]
        goals = vectors[torch.tensor([where[r] for r in goal_rows], device=vectors.device)].unsqueeze(1)
        with torch.autocast(device_type=vectors.device.type, enabled=False):
            return self.head.energy_and_depth(states, goals)

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
            was = self.model.training
            self.head.eval()
            self.model.eval()
            try:
                with torch.no_grad():
                    energies, _ = self._energies(self.valid_groups, self.valid_anchors)
            finally:
                self.model.train(was)
            snap = group_snapshot(energies, [a.depth for a in self.valid_anchors], step=self.step,
                                  split="valid", temperature=float(self.head.temperature.detach()))
            rank1, infonce, by_depth = snap.rank1, snap.infonce, snap.rank1_by_depth
        return JointProbe(step=self.step, centroid_l2=health.centroid_l2, linear_probe=health.linear_probe,
                          valid_rank1=rank1, valid_infonce=infonce, rank1_by_depth=by_depth, states=len(every))

    @staticmethod
    def _probe_line(probe: JointProbe) -> str:
        linear = "n/a" if probe.linear_probe is None else f"{probe.linear_probe:.3f}"
        rank1 = "n/a" if probe.valid_rank1 is None else f"{probe.valid_rank1:.3f}"
        depths = ", ".join(f"{b}: {probe.rank1_by_depth[b]:.2f}" for b in DEPTH_BUCKETS if b in probe.rank1_by_depth)
        return (f"sft: joint probe at step {probe.step}: centroid L2 {probe.centroid_l2:.4f}, linear probe {linear}, "
                f"held-out rank-1 {rank1}" + (f" (by depth {depths})" if depths else ""))

    def finish(self) -> JointProbe:
        """The probe at the end of training (kept once: the last periodic probe may be at the same step)."""
        final = self.probe()
        if not self.probes or self.probes[-1].step != self.step:
            self.probes.append(final)
        self.echo(self._probe_line(final))
        return final

    def reference(self) -> tuple[list[str], torch.Tensor]:
        """A few states' texts and their vectors under the trained backbone (eval mode), for the identity check."""
        states = sorted(self.data.split_states("train") + self.data.split_states("valid"))
        picked = random.Random(f"{self.cfg.seed}:reference").sample(states, min(REFERENCE_STATES, len(states)))
        rows = sorted({self.text_row[self.data.states[i].text] for i in picked})
        return [self.embedding_texts[r] for r in rows], self.embed_frozen(rows).float().cpu()

    # ---------------------------------------------------------------------------------- files

    def save_checkpoint(self, folder: Path) -> None:
        """Beside the trainer's files of checkpoint `folder` (written before its trainer_state.json): the head and
        the monitoring state. Process 0 only."""
        from burnqed.ebm.head import save_head

        folder.mkdir(parents=True, exist_ok=True)
        save_head(self.head, folder / HEAD_FILE)
        state = {"step": self.step, "history": [h.model_dump(mode="json") for h in self.history],
                 "probes": [p.model_dump(mode="json") for p in self.probes], "head_init": self.head_init}
        (folder / JOINT_STATE_FILE).write_text(json.dumps(state) + "\n", encoding="utf-8")

    def _load(self, folder: Path) -> None:
        from safetensors.torch import load_file

        self.head.load_state_dict(load_file(str(folder / HEAD_FILE), device="cpu"), strict=True)
        raw = json.loads((folder / JOINT_STATE_FILE).read_text(encoding="utf-8"))
        self.step = int(raw["step"])
        self.history = [JointLog.model_validate(h) for h in raw["history"]]
        self.probes = [JointProbe.model_validate(p) for p in raw["probes"]]
        self.head_init = str(raw["head_init"])

    def marker(self) -> dict[str, object]:
        """What the output's completion marker adds for a joint run."""
        return {"joint": True, "temperature": round(float(self.head.temperature.detach()), 6),
                "centroid_l2": self.probes[-1].centroid_l2}

    def write_output(self, folder: Path, trajectories: Sequence[str], seconds: float) -> None:
        """`joint/` of the output folder being published: the head, the reference vectors and joint.json."""
        from safetensors.torch import save_file

        from burnqed.ebm.head import save_head

        texts, vectors = self.reference()
        record = JointRecord(
            head=self.head.spec, temperature=float(self.head.temperature.detach()), pooling=self.ebm.pooling,
            normalize=self.ebm.normalize, max_tokens=self.max_tokens, weight=self.cfg.joint_weight,
            lr_backbone=self.learning_rate, lr_head=self.cfg.joint_head_learning_rate,
            groups_per_step=self.cfg.joint_groups, negatives=self.ebm.negatives, steps=self.step,
            processes=self.world.size, head_init=self.head_init, trajectories=list(trajectories),
            anchors={"train": len(self.anchors), "valid": len(self.valid_anchors)}, history=self.history,
            probes=self.probes, reference_texts=texts, train_seconds=round(seconds, 3), written_at=datetime.now(UTC),
        )
        (folder / JOINT_DIR).mkdir()
        save_head(self.head, folder / JOINT_DIR / HEAD_FILE)
        save_file({"vectors": vectors.contiguous()}, str(folder / JOINT_DIR / REFERENCE_FILE))
        (folder / JOINT_DIR / RECORD_FILE).write_text(record.model_dump_json(indent=2) + "\n", encoding="utf-8")


@cache
def _permutation(size: int, key: str, epoch: int) -> tuple[int, ...]:
    order = list(range(size))
    random.Random(f"{key}:{epoch}").shuffle(order)
    return tuple(order)


def _order(size: int, key: str, position: int) -> int:
    """The index at `position` of an endless sequence of seeded permutations of range(size)."""
    epoch, offset = divmod(position, size)
    return _permutation(size, key, epoch)[offset]


__all__ = ["JointObjective", "load_groups"]

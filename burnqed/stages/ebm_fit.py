"""The `train-ebm` stage's training: trajectories in, a trained energy head out (docs/ebm.md, "Training").

    data = load_dataset(["runs/iter_0/trajectories"], valid_fraction=0.2, store=store)    # ebm/sampling.py
    embeddings, rows, embed = await embed_dataset(data, fmt, encoder, cache, batch=32, chunk=512)  # ebm/cache.py
    outcome = train_and_publish(data, embeddings, rows, embed, output="runs/iter_1/ebm", identity=identity,
                                fmt=fmt, cfg=cfg.ebm, iteration=1, init="runs/iter_0/ebm",
                                store=store)

The encoder (an edge) is wired in by the caller (`burnqed/commands/ebm.py`). The output is published with
`Store.staged_output` (docs/ebm.md, "Checkpoint format"); nothing is published when training fails (a temperature
out of bounds, a non-finite loss). This module imports torch at the top: import it inside the functions that need it.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import torch

from burnqed import storage
from burnqed.config import EbmConfig
from burnqed.ebm.formats import (
    MANIFEST_FILE,
    METRICS_FILE,
    METRICS_LOG_FILE,
    WEIGHTS_FILE,
    DataCounts,
    EbmManifest,
    EbmMetrics,
    EmbedReport,
    EncoderIdentity,
    HeadSpec,
    InitInfo,
    Snapshot,
    ValueEvidence,
)
from burnqed.ebm.head import GoalConditionedEnergyHead, head_spec, load_head, save_head
from burnqed.ebm.losses import depth_loss, info_nce
from burnqed.ebm.metrics import (
    calibration,
    centroid_l2,
    energy_by_depth,
    group_snapshot,
    linear_probe,
    sibling_rank,
)
from burnqed.ebm.sampling import (
    Anchor,
    EbmDataset,
    GroupShape,
    NegativeSampler,
    Split,
    fixed_groups,
)
from burnqed.errors import TrainingError
from burnqed.provenance import StageInputs
from burnqed.text.prompt import PromptFormat

log = logging.getLogger(__name__)

EVAL_CHUNK = 1024  # groups per forward pass when evaluating


# ------------------------------------------------------------------------------------------------ data


def counts(data: EbmDataset, uris: Sequence[str]) -> DataCounts:
    theorems = data.theorems.values()
    return DataCounts(
        trajectories=list(uris),
        edges=data.edges,
        theorems=len(data.theorems),
        proved_theorems=sum(1 for t in theorems if t.positives),
        states=len(data.states),
        positives=sum(len(t.positives) for t in theorems),
        negatives=sum(len(t.negatives) for t in theorems),
        train_theorems=sum(1 for t in theorems if t.split == "train"),
        valid_theorems=sum(1 for t in theorems if t.split == "valid"),
        train_positives=len(data.anchors("train")),
        valid_positives=len(data.anchors("valid")),
        texts=len(data.texts()),
    )


# ---------------------------------------------------------------------------------------------- fitting


@dataclass(slots=True)
class FitResult:
    """A trained head and its last snapshots."""

    head: GoalConditionedEnergyHead
    train: Snapshot | None
    valid: Snapshot | None
    steps: int
    seconds: float
    samples_per_s: float


@dataclass(frozen=True, slots=True)
class _Tensors:
    embeddings: torch.Tensor  # (texts, d) on the device
    state_rows: torch.Tensor  # (states,) row of each state's text
    goal_rows: Mapping[str, int]  # theorem → row of its goal


def _batch(
    t: _Tensors, groups: Sequence[Sequence[int]], anchors: Sequence[Anchor]
) -> tuple[torch.Tensor, torch.Tensor]:
    device = t.embeddings.device
    rows = t.state_rows[torch.tensor(groups, dtype=torch.long, device=device)]
    goals = torch.tensor([t.goal_rows[a.theorem] for a in anchors], dtype=torch.long, device=device)
    return t.embeddings[rows], t.embeddings[goals].unsqueeze(1)


def evaluate(head: GoalConditionedEnergyHead, t: _Tensors, groups: Sequence[Sequence[int]],
             anchors: Sequence[Anchor], *, step: int, split: Split, depth_weight: float) -> Snapshot:
    """Metrics of fixed groups with dropout off."""
    head.eval()
    energies, losses = [], []
    with torch.no_grad():
        for start in range(0, len(groups), EVAL_CHUNK):
            cut = slice(start, start + EVAL_CHUNK)
            states, goals = _batch(t, groups[cut], anchors[cut])
            energy, predicted = head.energy_and_depth(states, goals)
            energies.append(energy.cpu())
            if depth_weight > 0:
                remaining = torch.tensor([a.remaining for a in anchors[cut]], device=predicted.device)
                losses.append(float(depth_loss(predicted[:, 0], remaining)) * len(anchors[cut]))
    return group_snapshot(
        torch.cat(energies), [a.depth for a in anchors], step=step, split=split,
        temperature=float(head.temperature.detach()), depth_loss=sum(losses) / len(anchors) if losses else None,
        depth_weight=depth_weight,
    )


def _check_temperature(value: float, cfg: EbmConfig, step: int) -> None:
    if not cfg.temperature_min <= value <= cfg.temperature_max:
        side = "floor" if value < cfg.temperature_min else "ceiling"
        raise TrainingError(
            f"EBM temperature {value:.4f} left [{cfg.temperature_min}, {cfg.temperature_max}] at step {step} "
            f"(hit the {side}): the head is degenerate. Lower ebm.learning_rate or ebm.steps, and check the "
            "embeddings (centroid L2, linear probe) with `burnqed ebm metrics`; nothing was published"
        )


def _fresh_head(data: EbmDataset, t: _Tensors, cfg: EbmConfig, device: str) -> GoalConditionedEnergyHead:
    """A new head whose input statistics are those of the training split's states and goals."""
    head = GoalConditionedEnergyHead(head_spec(cfg, int(t.embeddings.shape[1])), cfg.init_temperature)
    train_rows = sorted({int(t.state_rows[i]) for i in data.split_states("train")}
                        | {t.goal_rows[n] for n, th in data.theorems.items() if th.split == "train"})
    sample = t.embeddings[torch.tensor(train_rows, device=device)]
    head.set_input_stats(sample.mean(dim=0).cpu(),
                         sample.std(dim=0).cpu() if len(train_rows) > 1 else torch.ones(sample.shape[1]))
    return head


def _next_batch(anchors: Sequence[Anchor], order: list[int], rng: random.Random, size: int) -> list[Anchor]:
    """`size` anchors taken from the end of `order` (in place), refilled with a new shuffled epoch when empty."""
    batch: list[Anchor] = []
    while len(batch) < size:  # epochs of a shuffled order
        if not order:
            order.extend(range(len(anchors)))
            rng.shuffle(order)
        batch.append(anchors[order.pop()])
    return batch


def _loss(energy: torch.Tensor, predicted: torch.Tensor, batch: Sequence[Anchor], cfg: EbmConfig, step: int,
          window_aux: list[float]) -> torch.Tensor:
    """InfoNCE over the batch's groups, plus the weighted depth loss (its value appended to `window_aux`);
    `TrainingError` when it is not finite."""
    loss = info_nce(energy)
    if cfg.depth_loss_weight > 0:
        remaining = torch.tensor([a.remaining for a in batch], device=energy.device)
        aux = depth_loss(predicted[:, 0], remaining)
        window_aux.append(float(aux.detach()))
        loss = loss + cfg.depth_loss_weight * aux
    if not torch.isfinite(loss):
        raise TrainingError(f"EBM loss is {float(loss.detach())} at step {step}: training diverged; lower "
                            "ebm.learning_rate; nothing was published")
    return loss


def fit_head(
    data: EbmDataset,
    embeddings: torch.Tensor,
    rows: Mapping[str, int],
    cfg: EbmConfig,
    *,
    head: GoalConditionedEnergyHead | None = None,
    device: str = "cpu",
    on_snapshot: Callable[[Snapshot], None] | None = None,
) -> FitResult:
    """Train `head` (a fresh one when None, its input statistics from the training split) for `cfg.steps`
    steps of `cfg.batch_size` InfoNCE groups; see the module docstring for logging and the abort rule."""
    torch.manual_seed(cfg.seed)
    shape = GroupShape.of(cfg)
    t = _Tensors(
        embeddings.to(device=device, dtype=torch.float32),
        torch.tensor([rows[s.text] for s in data.states], dtype=torch.long, device=device),
        {name: rows[th.goal] for name, th in data.theorems.items()},
    )
    if head is None:
        head = _fresh_head(data, t, cfg, device)
    head = head.to(device)
    anchors = data.anchors("train")
    sampler = NegativeSampler(data, "train", shape, seed=cfg.seed)
    valid_anchors = data.anchors("valid")
    valid_groups = fixed_groups(data, "valid", shape, seed=cfg.seed + 1)
    optimizer = torch.optim.AdamW(head.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    order_rng = random.Random(cfg.seed)
    order: list[int] = []
    window_energy: list[torch.Tensor] = []
    window_depth: list[int] = []
    window_aux: list[float] = []
    train_snap: Snapshot | None = None
    valid_snap: Snapshot | None = None
    started = window_started = time.perf_counter()
    for step in range(1, cfg.steps + 1):
        batch = _next_batch(anchors, order, order_rng, cfg.batch_size)
        states, goals = _batch(t, [sampler.group(a) for a in batch], batch)
        head.train()
        energy, predicted = head.energy_and_depth(states, goals)
        loss = _loss(energy, predicted, batch, cfg, step, window_aux)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        torch.nn.utils.clip_grad_norm_(head.parameters(), cfg.grad_clip)
        optimizer.step()
        window_energy.append(energy.detach().cpu())
        window_depth += [a.depth for a in batch]
        temperature = float(head.temperature.detach())
        if step % cfg.log_every == 0 or step == cfg.steps:
            now = time.perf_counter()
            rate = len(window_depth) / max(now - window_started, 1e-9)
            train_snap = group_snapshot(
                torch.cat(window_energy), window_depth, step=step, split="train", temperature=temperature,
                depth_loss=sum(window_aux) / len(window_aux) if window_aux else None,
                depth_weight=cfg.depth_loss_weight, samples_per_s=rate,
            )
            snaps = [train_snap]
            if valid_groups:
                valid_snap = evaluate(head, t, valid_groups, valid_anchors, step=step, split="valid",
                                      depth_weight=cfg.depth_loss_weight)
                snaps.append(valid_snap)
            for snap in snaps:
                if on_snapshot is not None:
                    on_snapshot(snap)
            log.info(
                "ebm step %d/%d: loss %.4f, rank-1 %.3f, gap %.3f, T %.3f%s, %.0f groups/s", step, cfg.steps,
                train_snap.loss, train_snap.rank1, train_snap.energy_gap, temperature,
                f"; valid loss {valid_snap.loss:.4f}, rank-1 {valid_snap.rank1:.3f}" if valid_snap else "", rate,
            )
            window_energy, window_depth, window_aux = [], [], []
            window_started = time.perf_counter()
        _check_temperature(temperature, cfg, step)
    seconds = time.perf_counter() - started
    head.eval()
    return FitResult(head, train_snap, valid_snap, cfg.steps, seconds, cfg.steps * cfg.batch_size / max(seconds, 1e-9))


# ------------------------------------------------------------------------------------------ warm start


def resolve_init(
    init: str | None, spec: HeadSpec, identity: EncoderIdentity, *, store: storage.Store
) -> tuple[Path | None, InitInfo]:
    """The weights to start from (None = fresh) and why: resume only when `init` is a finished EBM trained on
    the same encoder (the same identity: model digest, pooling, ...) with the same architecture. Every
    iteration exports a new policy, so a fresh start is the usual outcome, not an error."""
    if init is None:
        return None, InitInfo(uri=None, resumed=False, reason="fresh: no --init given")
    if not store.is_done(init):
        return None, InitInfo(uri=init, resumed=False, reason=f"fresh: {init} is not a finished EBM output")
    manifest = store.read_model(storage.join(init, MANIFEST_FILE), EbmManifest, "EBM manifest")
    difference = manifest.encoder.mismatch(identity)
    if difference is not None:
        what = "the embedding model changed" if difference.startswith("digest ") else "the encoder changed"
        return None, InitInfo(
            uri=init, resumed=False,
            reason=f"fresh: {what} ({difference}: {manifest.encoder.model} → {identity.model}), so the old head "
            "reads other embeddings",
        )
    if manifest.head != spec:
        return None, InitInfo(uri=init, resumed=False,
                              reason=f"fresh: the architecture changed ({manifest.head} → {spec})")
    folder = store.local_input(init)
    return folder / manifest.weights, InitInfo(
        uri=init, resumed=True,
        reason=f"resumed: same embedding model (digest {identity.digest}), encoder and architecture"
    )


# ---------------------------------------------------------------------------------------------- stage


@dataclass(frozen=True, slots=True)
class TrainOutcome:
    """What `train-ebm` did."""

    output: str
    skipped: bool  # the output was already finished
    metrics: EbmMetrics | None
    init: InitInfo | None


def train_and_publish(
    data: EbmDataset,
    embeddings: torch.Tensor,
    rows: Mapping[str, int],
    embed: EmbedReport,
    *,
    output: str,
    identity: EncoderIdentity,
    fmt: PromptFormat,
    cfg: EbmConfig,
    iteration: int,
    uris: Sequence[str],
    init: str | None = None,
    device: str = "cpu",
    started: float | None = None,
    on_snapshot: Callable[[Snapshot], None] | None = None,
    force: bool = False,
    made_from: StageInputs | None = None,
    store: storage.Store,
) -> TrainOutcome:
    """Fit the head and publish it at `output` (module docstring), its completion marker recording `made_from`; a
    finished output is left alone unless `force`. `on_snapshot` also receives every logged snapshot (the CLI prints
    them)."""
    began = started if started is not None else time.perf_counter()
    if store.is_done(output) and not force:
        return TrainOutcome(output, True, None, None)
    spec = head_spec(cfg, int(embeddings.shape[1]))
    weights, init_info = resolve_init(init, spec, identity, store=store)
    if init is not None and not init_info.resumed:
        log.warning("ebm init: %s", init_info.reason)
    head = load_head(spec, weights, device) if weights is not None else None
    extra: dict[str, object] = {}
    with store.staged_output(output, "train-ebm", extra, made_from=made_from) as folder, \
            (folder / METRICS_LOG_FILE).open("w", encoding="utf-8") as log_file:

        def record(snap: Snapshot) -> None:
            log_file.write(snap.model_dump_json() + "\n")
            log_file.flush()
            if on_snapshot is not None:
                on_snapshot(snap)

        fit = fit_head(data, embeddings, rows, cfg, head=head, device=device, on_snapshot=record)
        probe, probe_split = _probe(data, embeddings, rows)
        positives = [rows[s.text] for s in data.states if s.positive]
        negatives = [rows[s.text] for s in data.states if not s.positive]
        temperature = float(fit.head.temperature.detach())
        metrics = EbmMetrics(
            steps=fit.steps,
            train=fit.train,
            valid=fit.valid,
            temperature=round(temperature, 6),
            centroid_l2=round(centroid_l2(embeddings[positives], embeddings[negatives]), 6),
            linear_probe_accuracy=probe,
            linear_probe_split=probe_split,
            counts=counts(data, uris),
            embed=embed,
            train_seconds=round(fit.seconds, 3),
            train_samples_per_s=round(fit.samples_per_s, 2),
            elapsed_s=round(time.perf_counter() - began, 3),
            evidence=value_evidence(fit.head, data, embeddings, rows, device=device),
        )
        save_head(fit.head, folder / WEIGHTS_FILE)
        manifest = EbmManifest(
            head=spec, temperature=temperature, encoder=identity, prompt_format=fmt, iteration=iteration,
            trained_at=datetime.now(UTC), steps=fit.steps, init=init_info, config=cfg.model_dump(mode="json"),
        )
        (folder / MANIFEST_FILE).write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
        (folder / METRICS_FILE).write_text(metrics.model_dump_json(indent=2) + "\n", encoding="utf-8")
        extra.update({
            "encoder_digest": identity.digest,
            "encoder_key": identity.key(),
            "temperature": metrics.temperature,
            "valid_rank1": metrics.valid.rank1 if metrics.valid else None,
            "centroid_l2": metrics.centroid_l2,
            "linear_probe_accuracy": metrics.linear_probe_accuracy,
        })
    return TrainOutcome(output, False, metrics, init_info)


def state_energies(head: GoalConditionedEnergyHead, data: EbmDataset, embeddings: torch.Tensor,
                   rows: Mapping[str, int], states: Sequence[int], *, device: str = "cpu") -> dict[int, float]:
    """State index → its energy under its theorem's goal (dropout off)."""
    pairs = [(rows[data.states[i].text], rows[data.theorems[data.states[i].theorem].goal]) for i in states]
    return dict(zip(states, _pair_energies(head, embeddings, pairs, device), strict=True))


def goal_energies(head: GoalConditionedEnergyHead, data: EbmDataset, embeddings: torch.Tensor,
                  rows: Mapping[str, int], theorems: Sequence[str], *, device: str = "cpu") -> dict[str, float]:
    """Theorem name → its goal's own energy under itself (dropout off): what step search measures a state's energy
    against (search.value_reference 'root')."""
    pairs = [(rows[data.theorems[name].goal], rows[data.theorems[name].goal]) for name in theorems]
    return dict(zip(theorems, _pair_energies(head, embeddings, pairs, device), strict=True))


def _pair_energies(head: GoalConditionedEnergyHead, embeddings: torch.Tensor, pairs: Sequence[tuple[int, int]],
                   device: str) -> list[float]:
    """The energy of each (state row, goal row) of `embeddings`, in chunks, dropout off."""
    if not pairs:
        return []
    head.eval()
    table = embeddings.to(device=device, dtype=torch.float32)
    out: list[float] = []
    with torch.no_grad():
        for start in range(0, len(pairs), EVAL_CHUNK):
            chunk = pairs[start:start + EVAL_CHUNK]
            z_state = table[torch.tensor([state for state, _ in chunk], device=device)]
            z_goal = table[torch.tensor([goal for _, goal in chunk], device=device)]
            energy, _ = head.energy_and_depth(z_state.unsqueeze(1), z_goal.unsqueeze(1))
            out.extend(energy[:, 0].cpu().tolist())
    return out


def value_evidence(head: GoalConditionedEnergyHead, data: EbmDataset, embeddings: torch.Tensor,
                   rows: Mapping[str, int], *, device: str = "cpu") -> ValueEvidence | None:
    """Sibling ranking, calibration and the energy by depth of `head` on the validation split, or on the training
    split when no held-out theorem has a decision (`ValueEvidence.split` says which); None when neither has one."""
    split: Split = "valid" if data.split_decisions("valid") else "train"
    decisions = data.split_decisions(split)
    if not decisions:
        return None
    states = data.split_states(split)
    energy = state_energies(head, data, embeddings, rows, states, device=device)
    ranking = sibling_rank(decisions, energy)
    assert ranking is not None  # decisions is not empty
    scored = [(data.states[i].theorem, energy[i], data.states[i].positive) for i in states]
    goal = goal_energies(head, data, embeddings, rows, sorted({theorem for theorem, _, _ in scored}), device=device)
    relative = [(data.states[i].depth, energy[i] - goal[data.states[i].theorem], data.states[i].positive)
                for i in states]
    return ValueEvidence(split=split, siblings=ranking, calibration=calibration(scored),
                         by_depth=energy_by_depth(relative))


def _probe(data: EbmDataset, embeddings: torch.Tensor, rows: Mapping[str, int]) -> tuple[float | None, str]:
    """Linear-probe accuracy: fitted on the training split's states, scored on the validation split's."""
    def xy(split: Split) -> tuple[torch.Tensor, torch.Tensor]:
        states = [data.states[i] for i in data.split_states(split)]
        x = embeddings[[rows[s.text] for s in states]] if states else embeddings[:0]
        return x, torch.tensor([s.positive for s in states], dtype=torch.bool)

    x_train, y_train = xy("train")
    x_valid, y_valid = xy("valid")
    accuracy = linear_probe(x_train, y_train, x_valid, y_valid)
    if accuracy is None:
        return None, (f"not measured: a split lacks a class (train {int(y_train.sum())}/{len(y_train)} positive, "
                      f"valid {int(y_valid.sum())}/{len(y_valid)} positive)")
    return accuracy, f"fit on {len(y_train)} train states, scored on {len(y_valid)} valid states"


def default_cache_uri(output: str) -> str:
    """Where the embedding cache of a train-ebm output lives unless configured: beside it, not inside."""
    return output.rstrip("/") + "-cache"

"""`train-ebm --joint SFT`: publish the head trained jointly with the policy (`sft.joint`) as the value model.

    outcome = await publish_joint(sft="runs/iter_1/sft", data, embeddings, rows, embed, encoder, identity,
                                  output="runs/iter_1/ebm", fmt=fmt, cfg=cfg, iteration=1, uris=[...], store=store)

Nothing is trained here. Before publishing, the exported model's encoder must reproduce the reference states'
vectors the joint run recorded, within `sft.joint_max_embedding_diff` of their norm (`TrainingError`), and the
head's embedding settings must be this configuration's (`ConfigError`). The output has the layout of any `train-ebm`
output (docs/ebm.md, "Joint training" and "Checkpoint format"). This module imports torch at the top: import it
inside the functions that need it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

import torch

from burnqed import storage
from burnqed.config import Config
from burnqed.ebm.formats import (
    MANIFEST_FILE,
    METRICS_FILE,
    METRICS_LOG_FILE,
    WEIGHTS_FILE,
    EbmManifest,
    EbmMetrics,
    EmbedReport,
    EncoderIdentity,
    InitInfo,
)
from burnqed.ebm.head import load_head, save_head
from burnqed.ebm.metrics import centroid_l2
from burnqed.ebm.sampling import EbmDataset, GroupShape, fixed_groups
from burnqed.errors import ConfigError, TrainingError
from burnqed.policy.base import Encoder
from burnqed.provenance import StageInputs
from burnqed.sft.joint_records import HEAD_FILE, JOINT_DIR, JointRecord
from burnqed.stages.ebm_fit import TrainOutcome, _probe, _Tensors, counts, evaluate
from burnqed.text.prompt import PromptFormat


def check_settings(record: JointRecord, identity: EncoderIdentity) -> None:
    """The joint head's embedding settings must be the encoder's (`ConfigError` naming the key)."""
    for key, recorded, actual in (("pooling", record.pooling, identity.pooling),
                                  ("normalize", record.normalize, identity.normalize),
                                  ("encoder_max_tokens", record.max_tokens, identity.max_tokens)):
        if actual != recorded:
            raise ConfigError(f"the joint head was trained on embeddings with ebm.{key}={recorded!r}, but the encoder "
                              f"embeds with {actual!r}; use the training configuration")


async def check_reference(encoder: Encoder, texts: Sequence[str], reference: torch.Tensor, tolerance: float,
                          model: str) -> float:
    """Max |Δ| between `encoder`'s vectors of `texts` and the trained backbone's; `TrainingError` beyond
    `tolerance` × their mean norm. Returns the difference."""
    vectors = torch.tensor(await encoder.encode(list(texts)), dtype=torch.float32)
    if vectors.shape != reference.shape:
        raise TrainingError(f"the encoder of {model} gives vectors of shape {tuple(vectors.shape)}, the joint head "
                            f"read {tuple(reference.shape)}: not the policy it was trained with")
    diff = float((vectors - reference).abs().max()) if len(texts) else 0.0
    bound = tolerance * float(reference.norm(dim=-1).mean()) if len(texts) else 0.0
    if diff > bound:
        raise TrainingError(
            f"the encoder of {model} does not reproduce the jointly trained backbone's embeddings (max |Δ| "
            f"{diff:.3g} > {bound:.3g} = sft.joint_max_embedding_diff × mean norm over {len(texts)} reference "
            "states): search would score other embeddings than the head read; export the SFT output it came from"
        )
    return diff


def publish_joint(
    sft: str,
    record: JointRecord,
    data: EbmDataset,
    embeddings: torch.Tensor,
    rows: Mapping[str, int],
    embed: EmbedReport,
    *,
    reference_diff: float,
    output: str,
    identity: EncoderIdentity,
    fmt: PromptFormat,
    cfg: Config,
    iteration: int,
    uris: Sequence[str],
    device: str = "cpu",
    started: float | None = None,
    force: bool = False,
    made_from: StageInputs | None = None,
    store: storage.Store,
) -> TrainOutcome:
    """Publish `{sft}/joint/head.safetensors` at `output` with metrics on `embeddings` (the exported policy's), its
    completion marker recording `made_from`; a finished output is left alone unless `force`."""
    began = started if started is not None else time.perf_counter()
    if store.is_done(output) and not force:
        return TrainOutcome(output, True, None, None)
    folder_in = store.local_input(sft)
    if record.head.embedding_dim != int(embeddings.shape[1]):
        raise TrainingError(f"the joint head reads {record.head.embedding_dim}-d embeddings, the encoder gives "
                            f"{int(embeddings.shape[1])}-d ones")
    head = load_head(record.head, folder_in / JOINT_DIR / HEAD_FILE, device)
    tensors = _Tensors(embeddings.to(device=device, dtype=torch.float32),
                       torch.tensor([rows[s.text] for s in data.states], dtype=torch.long, device=device),
                       {name: rows[th.goal] for name, th in data.theorems.items()})
    valid_anchors = data.anchors("valid")
    valid_groups = fixed_groups(data, "valid", GroupShape.of(cfg.ebm), seed=cfg.ebm.seed + 1)
    valid = evaluate(head, tensors, valid_groups, valid_anchors, step=record.steps, split="valid",
                     depth_weight=cfg.ebm.depth_loss_weight) if valid_groups else None
    probe, probe_split = _probe(data, embeddings, rows)
    positives = [rows[s.text] for s in data.states if s.positive]
    negatives = [rows[s.text] for s in data.states if not s.positive]
    init = InitInfo(uri=sft, resumed=True,
                    reason=f"joint: the head trained together with this policy in {sft} (sft.joint; reference "
                    f"embeddings reproduced by the export within {reference_diff:.2g})")
    metrics = EbmMetrics(
        steps=record.steps, train=None, valid=valid, temperature=round(record.temperature, 6),
        centroid_l2=round(centroid_l2(embeddings[positives], embeddings[negatives]), 6),
        linear_probe_accuracy=probe, linear_probe_split=probe_split, counts=counts(data, uris), embed=embed,
        train_seconds=record.train_seconds, train_samples_per_s=round(
            record.steps * record.groups_per_step / max(record.train_seconds, 1e-9), 2),
        elapsed_s=round(time.perf_counter() - began, 3),
    )
    manifest = EbmManifest(
        head=record.head, temperature=record.temperature, encoder=identity, prompt_format=fmt, iteration=iteration,
        trained_at=datetime.now(UTC), steps=record.steps, init=init,
        config={**cfg.ebm.model_dump(mode="json"), "joint": {"sft": sft, "weight": record.weight,
                                                              "lr_head": record.lr_head}},
    )
    extra: dict[str, object] = {
        "encoder_digest": identity.digest, "encoder_key": identity.key(), "temperature": metrics.temperature,
        "valid_rank1": valid.rank1 if valid else None, "centroid_l2": metrics.centroid_l2,
        "linear_probe_accuracy": metrics.linear_probe_accuracy, "joint": sft,
    }
    with store.staged_output(output, "train-ebm", extra, made_from=made_from) as folder:
        save_head(head, folder / WEIGHTS_FILE)
        (folder / METRICS_LOG_FILE).write_text(valid.model_dump_json() + "\n" if valid else "", encoding="utf-8")
        (folder / MANIFEST_FILE).write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
        (folder / METRICS_FILE).write_text(metrics.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return TrainOutcome(output, False, metrics, init)

"""The `train-ebm` stage: embed the trajectory states with the policy's encoder, then train and publish a value-model
head — or, given a jointly trained SFT output (`sft.joint`), publish the head trained with that policy after checking
that its export reproduces the embeddings the head read (docs/ebm.md).

    outcome = run_train_ebm(cfg, TrainRequest(output, trajectories), store=store, open_encoder=open_encoder)

`open_encoder(cfg, model, store=store)` is the encoder edge the command opens (`burnqed.commands.ebm.open_encoder`:
the local model or `burnqed serve`); this module never opens one itself. A finished output is left alone
(`TrainOutcome.skipped`) unless `TrainRequest.force`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from burnqed import storage
from burnqed.base.cpu_kernels import cpu_threads
from burnqed.ebm.cache import EmbeddingCache, embed_dataset
from burnqed.ebm.sampling import load_dataset
from burnqed.errors import InputError
from burnqed.provenance import StageInputs
from burnqed.stages.ebm_fit import TrainOutcome, default_cache_uri, train_and_publish

if TYPE_CHECKING:
    from pathlib import Path

    import torch

    from burnqed.config import Config
    from burnqed.ebm.formats import EmbedReport, EncoderIdentity, Snapshot
    from burnqed.ebm.sampling import EbmDataset
    from burnqed.policy.base import Encoder
    from burnqed.sft.joint_records import JointRecord

OpenEncoder = Callable[..., AbstractAsyncContextManager[tuple["Encoder", "EncoderIdentity"]]]


@dataclass(frozen=True, slots=True)
class TrainRequest:
    """What `burnqed train-ebm` asks for (its options; docs/ebm.md)."""

    output: str
    trajectories: Sequence[str]
    model: str | None = None  # the policy whose hidden states embed the states; None = policy.model
    init: str | None = None  # the previous iteration's head, resumed when it read the same encoder
    cache: str | None = None  # the embedding cache; None = ebm.cache_uri, else OUTPUT-cache
    iteration: int = 0
    joint: str | None = None  # a jointly trained SFT output whose head is published instead of training one
    force: bool = False  # publish over a finished output (the command decided it is to be redone)
    made_from: StageInputs | None = None  # recorded in the output's completion marker (burnqed.runner.reuse)


@dataclass(frozen=True, slots=True)
class _Embedded:
    identity: EncoderIdentity
    embeddings: torch.Tensor
    rows: dict[str, int]
    report: EmbedReport
    reference_diff: float  # the export's largest deviation from the joint run's reference embeddings (0 without)


def run_train_ebm(cfg: Config, request: TrainRequest, *, store: storage.Store, open_encoder: OpenEncoder,
                  device: str = "cpu", started: float | None = None,
                  on_snapshot: Callable[[Snapshot], None] | None = None) -> TrainOutcome:
    """Embed, then train and publish (or publish the joint head); `on_snapshot` receives every logged snapshot.
    On the CPU both run on `ebm.cpu_threads` torch threads (burnqed.base.cpu_kernels)."""
    with cpu_threads(device, cfg.ebm.cpu_threads):
        return _embed_and_train(cfg, request, store=store, open_encoder=open_encoder, device=device, started=started,
                                on_snapshot=on_snapshot)


def _embed_and_train(cfg: Config, request: TrainRequest, *, store: storage.Store, open_encoder: OpenEncoder,
                     device: str, started: float | None,
                     on_snapshot: Callable[[Snapshot], None] | None) -> TrainOutcome:
    began = started if started is not None else time.perf_counter()
    record, joint_dir = None, None
    if request.joint is not None:
        from burnqed.sft.joint_records import read_joint_record

        if request.init is not None:
            raise InputError("--init and --joint exclude each other: a joint head is published as trained")
        joint_dir = store.local_input(request.joint)
        record = read_joint_record(joint_dir)
    data = load_dataset(request.trajectories, valid_fraction=cfg.ebm.valid_fraction, salt=cfg.data.split_salt,
                        store=store)
    joint = (record, joint_dir) if record is not None and joint_dir is not None else None
    embedded = asyncio.run(_embed(cfg, request, data, joint, store=store, open_encoder=open_encoder))
    fmt = cfg.policy.prompt_format
    if record is not None and request.joint is not None:
        from burnqed.stages.ebm_joint import publish_joint

        return publish_joint(
            request.joint, record, data, embedded.embeddings, embedded.rows, embedded.report,
            reference_diff=embedded.reference_diff, output=request.output, identity=embedded.identity, fmt=fmt,
            cfg=cfg, iteration=request.iteration, uris=request.trajectories, device=device, started=began,
            force=request.force, made_from=request.made_from, store=store,
        )
    return train_and_publish(
        data, embedded.embeddings, embedded.rows, embedded.report, output=request.output,
        identity=embedded.identity, fmt=fmt, cfg=cfg.ebm, iteration=request.iteration, uris=request.trajectories,
        init=request.init, device=device, started=began, on_snapshot=on_snapshot, force=request.force,
        made_from=request.made_from, store=store,
    )


async def _embed(cfg: Config, request: TrainRequest, data: EbmDataset, joint: tuple[JointRecord, Path] | None, *,
                 store: storage.Store, open_encoder: OpenEncoder) -> _Embedded:
    """Every state's embedding through the cache; with a joint run (its record and local folder), first the
    export's reference check."""
    cache_uri = request.cache or cfg.ebm.cache_uri or default_cache_uri(request.output)
    reference_diff = 0.0
    async with open_encoder(cfg, request.model or cfg.policy.model, store=store) as (encoder, identity):
        if joint is not None:
            from safetensors.torch import load_file

            from burnqed.sft.joint_records import JOINT_DIR, REFERENCE_FILE
            from burnqed.stages.ebm_joint import check_reference, check_settings

            record, joint_dir = joint
            check_settings(record, identity)
            vectors = load_file(str(joint_dir / JOINT_DIR / REFERENCE_FILE))["vectors"]
            reference_diff = await check_reference(encoder, record.reference_texts, vectors,
                                                   cfg.sft.joint_max_embedding_diff, identity.model)
        embeddings, rows, report = await embed_dataset(
            data, cfg.policy.prompt_format, encoder, EmbeddingCache(cache_uri, identity, store=store),
            batch=cfg.ebm.encode_batch, chunk=cfg.ebm.cache_chunk)
    return _Embedded(identity, embeddings, rows, report, reference_diff)

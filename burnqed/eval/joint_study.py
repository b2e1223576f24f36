"""The three-configuration study of joint training (docs/training.md, "The joint study (A/B/C)"): A, the policy
trained by SFT alone with a value model on its frozen embeddings; B, the jointly trained policy with a value model
retrained on its frozen embeddings; C, the jointly trained policy with the head trained with it.

    metrics = await measure_study(cfg, iteration=1, trajectories=[...], configurations=study_configurations(at, 1),
                                  cache="runs/iter_1/study/metrics-cache", store=store, echo=print,
                                  open_encoder=open_encoder)                # the `joint-study` stage

The stage measures embedding health, value-model metrics and a PCA projection per configuration; the report's
section (`burnqed.report.study`) joins them with the three evals and the attributions A→B, B→C and A→C.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from burnqed import storage
from burnqed.ebm.formats import EmbeddingHealth
from burnqed.errors import InputError
from burnqed.layout import Layout

if TYPE_CHECKING:
    from burnqed.config import Config
    from burnqed.ebm.formats import EncoderIdentity
    from burnqed.policy.base import Encoder

STUDY_FILE = "study.json"
CONFIGURATIONS = ("A", "B", "C")
DESCRIPTIONS = {
    "A": "SFT-only policy + value model trained on its frozen embeddings (the path without sft.joint)",
    "B": "jointly trained policy + value model retrained on its frozen embeddings",
    "C": "jointly trained policy + its jointly trained head",
}
ATTRIBUTIONS = (("A→B", "A", "B", "did joint training protect the embeddings?"),
                ("B→C", "B", "C", "did the live gradients help the head?"),
                ("A→C", "A", "C", "joint training as a whole"))
PROJECTION_POINTS = 400  # states per configuration in the 2-D projection (seeded sample beyond)
Echo = Callable[[str], None]
# Opens the encoder of a policy folder (the command passes `burnqed.commands.ebm.open_encoder`, the edge it opens).
OpenEncoder = Callable[..., AbstractAsyncContextManager[tuple["Encoder", "EncoderIdentity"]]]


# ------------------------------------------------------------------------------------------- records


class ValueHealth(BaseModel):
    """How a configuration's value model ranks states (on its policy's embeddings)."""

    model_config = ConfigDict(extra="forbid")

    split: str = Field(description="The groups' split: 'valid' (held-out theorems) unless it has none.")
    groups: int = Field(ge=0, description="Groups (a positive + K negatives) scored.")
    rank1: float = Field(ge=0, le=1, description="Share of groups whose positive has the lowest energy.")
    rank1_by_depth: dict[str, float] = Field(description="rank1 per depth bucket of the positive.")
    energy_gap: float = Field(description="Mean negative energy minus mean positive energy (positive: right way).")
    infonce: float = Field(description="InfoNCE of the groups (chance: ln(K+1)).")
    temperature: float = Field(gt=0, description="The head's temperature.")
    sibling_split: str = Field(description="The split of the sibling decisions, or why none was measured.")
    sibling_decisions: int = Field(ge=0, description="Expanded nodes with children on and off the proof path.")
    sibling_accuracy: float | None = Field(
        ge=0, le=1, description="Share whose lowest-energy child is on the proof path (None: no decision).")
    sibling_chance: float | None = Field(ge=0, le=1, description="The same for a uniformly random child.")
    sibling_by_depth: dict[str, float] = Field(description="sibling_accuracy per depth bucket of the children.")


class ConfigurationMetrics(BaseModel):
    """What the `joint-study` stage measured of one configuration."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="A, B or C.")
    description: str
    policy: str = Field(description="The exported policy (URI) whose encoder embedded the states.")
    ebm: str = Field(description="The value model (URI) scored.")
    encoder_digest: str = Field(description="The encoder's identity digest (the value model's, checked equal).")
    embedding: EmbeddingHealth
    value: ValueHealth
    projection: list[tuple[float, float, int, bool]] = Field(
        description="(pc1, pc2, depth, positive) of a seeded sample of states: the 2-D PCA projection.")
    explained: list[float] = Field(description="Variance shares of the two projected components.")


class StudyMetrics(BaseModel):
    """`study.json` of the joint-study stage."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = Field(default=1, description="Version of this file format.")
    iteration: int = Field(ge=1)
    trajectories: list[str] = Field(description="The trajectory prefixes whose states were measured.")
    configurations: dict[str, ConfigurationMetrics] = Field(description="A, B and C.")
    written_at: datetime


# ------------------------------------------------------------------------------------------- layout


def study_configurations(at: Layout, iteration: int) -> dict[str, tuple[str, str]]:
    """Configuration → (policy export, value model) URIs of the pipeline's study stages."""
    return {"A": (at.study(iteration, "a/export"), at.study(iteration, "a/ebm")),
            "B": (at.export(iteration), at.study(iteration, "b/ebm")),
            "C": (at.export(iteration), at.ebm(iteration))}


def study_evals(at: Layout, iteration: int) -> dict[str, str]:
    """Configuration → its eval result URI (C's is the iteration's own eval)."""
    return {"A": at.study(iteration, "a/eval.json"), "B": at.study(iteration, "b/eval.json"),
            "C": at.eval_result(iteration)}


# ------------------------------------------------------------------------------------------- measuring


def _projection(table: torch.Tensor, states: Sequence[tuple[int, int, bool]], seed: int
                ) -> tuple[list[tuple[float, float, int, bool]], list[float]]:
    """2-D PCA of the rows of a seeded sample of (row, depth, positive)."""
    import torch

    picked = list(states)
    if len(picked) > PROJECTION_POINTS:
        picked = random.Random(f"{seed}:projection").sample(picked, PROJECTION_POINTS)
    if len(picked) < 3:
        return [], []
    x = table[[row for row, _, _ in picked]].double()
    centred = x - x.mean(dim=0)
    _, singular, vh = torch.linalg.svd(centred, full_matrices=False)
    coords = centred @ vh[:2].T
    total = float((singular ** 2).sum()) or 1.0
    explained = [round(float(v ** 2) / total, 6) for v in singular[:2]]
    return ([(round(float(a), 5), round(float(b), 5), depth, positive)
             for (a, b), (_, depth, positive) in zip(coords.tolist(), picked, strict=True)], explained)


def value_health(head: GoalConditionedEnergyHead, data: EbmDataset, embeddings: torch.Tensor,
                 rows: Mapping[str, int], cfg: Config) -> ValueHealth:
    """Rank-1 by depth and energy gap of fixed groups (held out unless there are none) and sibling discrimination."""
    import torch

    from burnqed.ebm.sampling import GroupShape, Split, fixed_groups
    from burnqed.stages.ebm_fit import _Tensors, evaluate, value_evidence

    split: Split = "valid" if data.anchors("valid") else "train"
    groups = fixed_groups(data, split, GroupShape.of(cfg.ebm), seed=cfg.ebm.seed + 1)
    if not groups:
        raise InputError("the trajectories hold no positive state to form a group from: nothing to rank")
    tensors = _Tensors(embeddings.float(), torch.tensor([rows[s.text] for s in data.states], dtype=torch.long),
                       {name: rows[th.goal] for name, th in data.theorems.items()})
    snap = evaluate(head, tensors, groups, data.anchors(split), step=0, split=split, depth_weight=0.0)
    evidence = value_evidence(head, data, embeddings.float(), rows)
    common = {"split": split, "groups": snap.groups, "rank1": snap.rank1, "rank1_by_depth": snap.rank1_by_depth,
              "energy_gap": snap.energy_gap, "infonce": snap.infonce, "temperature": snap.temperature}
    if evidence is None:  # measured as missing, never invented
        return ValueHealth(**common, sibling_split="not measured: no expanded node of the trajectories has children "
                           "both on and off a proof path", sibling_decisions=0, sibling_accuracy=None,
                           sibling_chance=None, sibling_by_depth={})
    sib = evidence.siblings
    return ValueHealth(**common, sibling_split=evidence.split, sibling_decisions=sib.decisions,
                       sibling_accuracy=sib.accuracy, sibling_chance=sib.chance,
                       sibling_by_depth={b: d.accuracy for b, d in sib.by_depth.items()})


async def measure_study(cfg: Config, *, iteration: int, trajectories: Sequence[str],
                        configurations: Mapping[str, tuple[str, str]], cache: str, store: storage.Store,
                        echo: Echo, open_encoder: OpenEncoder) -> StudyMetrics:
    """Embed every trajectory state with each configuration's policy (its encoder from `open_encoder(cfg, policy,
    store=store)`) and measure it with its value model. On the CPU on `ebm.cpu_threads` torch threads, as `train-ebm`
    embeds (burnqed.base.cpu_kernels): the embeddings, and so the metrics, then do not depend on the core count."""
    from burnqed.base.cpu_kernels import cpu_threads
    from burnqed.policy.localmodel import resolve_device

    with cpu_threads(resolve_device(cfg.ebm.device), cfg.ebm.cpu_threads):
        return await _measure_study(cfg, iteration=iteration, trajectories=trajectories, configurations=configurations,
                                    cache=cache, store=store, echo=echo, open_encoder=open_encoder)


def policy_runs(configurations: Mapping[str, tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """The configurations in their order, those next to each other with the same policy together: each run is
    embedded with one encoder (`policy_runs({"A": (p0, e0), "B": (p1, e1), "C": (p1, e2)})` gives `[(p0, ["A"]),
    (p1, ["B", "C"])]`), one model in memory at a time."""
    runs: list[tuple[str, list[str]]] = []
    for name, (policy, _) in configurations.items():
        if runs and runs[-1][0] == policy:
            runs[-1][1].append(name)
        else:
            runs.append((policy, [name]))
    return runs


async def _measure_study(cfg: Config, *, iteration: int, trajectories: Sequence[str],
                         configurations: Mapping[str, tuple[str, str]], cache: str, store: storage.Store,
                         echo: Echo, open_encoder: OpenEncoder) -> StudyMetrics:
    from burnqed.ebm.cache import EmbeddingCache, embed_dataset
    from burnqed.ebm.formats import MANIFEST_FILE, WEIGHTS_FILE, EbmManifest
    from burnqed.ebm.head import load_head
    from burnqed.ebm.metrics import embedding_health
    from burnqed.ebm.sampling import load_dataset

    data = load_dataset(trajectories, valid_fraction=cfg.ebm.valid_fraction, salt=cfg.data.split_salt, store=store)
    manifests = {name: store.read_model(storage.join(ebm, MANIFEST_FILE), EbmManifest, "value model manifest")
                 for name, (_, ebm) in configurations.items()}  # all three readable before any embedding
    out: dict[str, ConfigurationMetrics] = {}
    for policy, names in policy_runs(configurations):  # B and C share a policy: one model load, one embedding
        async with open_encoder(cfg, policy, store=store) as (encoder, identity):
            for name in names:
                mismatch = manifests[name].encoder.mismatch(identity)
                if mismatch is not None:
                    raise InputError(f"configuration {name}: the value model {configurations[name][1]} was trained "
                                     f"on another encoder than {policy}'s ({mismatch}); search would refuse it")
            embeddings, rows, _ = await embed_dataset(data, cfg.policy.prompt_format, encoder,
                                                      EmbeddingCache(cache, identity, store=store),
                                                      batch=cfg.ebm.encode_batch, chunk=cfg.ebm.cache_chunk)
        echo(f"joint-study: {' and '.join(names)} embedded once with {policy}'s encoder")
        health = embedding_health(data, embeddings, rows, seed=cfg.ebm.seed)
        every = data.split_states("train") + data.split_states("valid")
        projection, explained = _projection(
            embeddings.float(), [(rows[data.states[i].text], data.states[i].depth, data.states[i].positive)
                                 for i in every], cfg.ebm.seed)
        for name in names:
            ebm = configurations[name][1]
            head = load_head(manifests[name].head, store.local_input(ebm) / WEIGHTS_FILE)
            value = value_health(head, data, embeddings, rows, cfg)
            out[name] = ConfigurationMetrics(name=name, description=DESCRIPTIONS[name], policy=policy, ebm=ebm,
                                             encoder_digest=identity.digest, embedding=health, value=value,
                                             projection=projection, explained=explained)
            probe = "n/a" if health.linear_probe is None else f"{health.linear_probe:.3f}"
            sibling = ("n/a" if value.sibling_accuracy is None
                       else f"{value.sibling_accuracy:.3f} (chance {value.sibling_chance or 0:.3f})")
            echo(f"joint-study {name}: centroid L2 {health.centroid_l2:.4f}, linear probe {probe}, effective rank "
                 f"{health.effective_rank:.2f}; rank-1 {value.rank1:.3f}, energy gap {value.energy_gap:.3f}, "
                 f"sibling accuracy {sibling}")
    return StudyMetrics(iteration=iteration, trajectories=list(trajectories), configurations=out,
                        written_at=datetime.now(UTC))


if TYPE_CHECKING:
    import torch

    from burnqed.ebm.head import GoalConditionedEnergyHead
    from burnqed.ebm.sampling import EbmDataset

__all__ = ["STUDY_FILE", "StudyMetrics", "measure_study", "study_configurations", "study_evals"]

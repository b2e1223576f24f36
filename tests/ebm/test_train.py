"""Training the head: it learns a separable set, aborts on a runaway temperature, publishes once, warm-starts
only on the same encoder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import pytest
import torch

from burnqed.config import EbmConfig
from burnqed.ebm.formats import EbmManifest, EbmMetrics, EmbedReport, EncoderIdentity, Snapshot
from burnqed.ebm.sampling import EbmDataset, build_dataset
from burnqed.errors import TrainingError
from burnqed.stages.ebm_fit import TrainOutcome, fit_head, train_and_publish
from burnqed.storage import Store
from burnqed.text.prompt import EMBEDDING_TEXT_VERSION, PromptFormat
from burnqed.trajectory.schema import theorems_to_table
from tests.doubles.ebm_doubles import proved_tree, unproved_tree

DIM = 16


def synthetic(theorems: int = 60, seed: int = 0, dim: int = DIM) -> tuple[EbmDataset, torch.Tensor, dict[str, int]]:
    """Theorems shaped like `proved_tree` (+ a few unproved); a positive state's embedding is its goal's plus
    small noise, every other state is random: separable given the goal, not without it (a positive of one
    theorem is a negative for the others)."""
    trees = [(f"t{k}", proved_tree(f"t{k}/")) for k in range(theorems)]
    trees += [(f"u{k}", unproved_tree(f"u{k}/")) for k in range(theorems // 6)]  # only other-theorem negatives
    data = build_dataset([theorems_to_table("run", 0, trees)], valid_fraction=0.25)
    texts = data.texts()
    rows = {text: row for row, text in enumerate(texts)}
    generator = torch.Generator().manual_seed(seed)
    embeddings = torch.randn(len(texts), dim, generator=generator)
    for theorem in data.theorems.values():
        for index in theorem.positives:
            noise = 0.3 * torch.randn(dim, generator=generator)
            embeddings[rows[data.states[index].text]] = embeddings[rows[theorem.goal]] + noise
    return data, embeddings, rows


def config(**kwargs: object) -> EbmConfig:
    base: dict[str, object] = {"hidden_dims": [64, 32], "steps": 150, "batch_size": 32, "log_every": 50,
                               "learning_rate": 3e-3, "negatives": 5, "valid_fraction": 0.25,
                               # (2, 1, 2) negatives: other theorems' positives make the goal matter
                               "sibling_ratio": 0.4, "same_theorem_ratio": 0.2, "other_theorem_ratio": 0.4,
                               # the synthetic positives (goal + noise) carry no order along their proof to learn
                               "farther_negatives": 0}
    return EbmConfig.model_validate({**base, **kwargs})


@pytest.mark.slow
def test_the_head_learns_separable_positives() -> None:
    data, embeddings, rows = synthetic()
    snapshots: list[Snapshot] = []
    fit = fit_head(data, embeddings, rows, config(), on_snapshot=snapshots.append)
    assert fit.valid is not None and fit.valid.groups == len(data.anchors("valid")) == 18
    assert fit.valid.rank1 >= 0.9
    assert fit.valid.energy_gap > 0 and fit.valid.infonce < 0.5 * torch.log(torch.tensor(6.0)).item()
    assert set(fit.valid.rank1_by_depth) == {"1", "2"}
    assert [(s.step, s.split) for s in snapshots] == [(50, "train"), (50, "valid"), (100, "train"),
                                                      (100, "valid"), (150, "train"), (150, "valid")]
    assert 0.5 <= fit.valid.temperature <= 3.0
    assert snapshots[1].infonce > snapshots[3].infonce > fit.valid.infonce  # held-out loss keeps falling


@pytest.mark.slow
def test_the_depth_regression_is_trained_when_weighted() -> None:
    data, embeddings, rows = synthetic()
    fit = fit_head(data, embeddings, rows, config(depth_loss_weight=1.0, steps=100))
    assert fit.valid is not None and fit.valid.depth_loss is not None and fit.train is not None
    assert fit.valid.loss == pytest.approx(fit.valid.infonce + fit.valid.depth_loss, abs=1e-5)


def test_a_temperature_outside_its_bounds_aborts() -> None:
    data, embeddings, rows = synthetic()
    cfg = config(temperature_min=0.99, temperature_max=1.01, learning_rate=0.05)
    with pytest.raises(TrainingError, match=r"temperature .* left \[0.99, 1.01\] at step 1 "):
        fit_head(data, embeddings, rows, cfg)


def identity(digest: str, pooling: Literal["mean", "last"] = "mean", dtype: str = "float32") -> EncoderIdentity:
    """A full identity of burnqed's encoder on a model of this digest."""
    return EncoderIdentity(backend="burnqed", model=f"model-{digest}", digest=digest, verified=True, layer=-1,
                           pooling=pooling, normalize=False, max_tokens=2048, text=EMBEDDING_TEXT_VERSION,
                           dtype=dtype, probe=[1, 320, 278], via="in-process")


EMBED = EmbedReport(texts=0, cached=0, computed=0, chunks_written=0, seconds=0.0, states_per_s=0.0, cache="c")


def publish(output: Path | str, digest: str = "aaaa", init: str | None = None, dim: int = DIM,
            encoder: EncoderIdentity | None = None, *, store: Store, **kwargs: object) -> TrainOutcome:
    data, embeddings, rows = synthetic(dim=dim)
    return train_and_publish(data, embeddings, rows, EMBED, output=str(output), identity=encoder or identity(digest),
                             fmt=PromptFormat.PLAIN_TACTIC, cfg=config(steps=20, **kwargs), iteration=1,
                             uris=["t"], init=init, store=store)


@pytest.mark.slow
def test_publish_writes_the_checkpoint_once_and_warm_starts_only_on_the_same_encoder(tmp_path: Path,
                                                                                     store: Store) -> None:
    outcome = publish(tmp_path / "ebm0", store=store)
    assert not outcome.skipped
    assert sorted(p.name for p in (tmp_path / "ebm0").iterdir()) == [
        "_SUCCESS.json", "ebm.json", "head.safetensors", "metrics.json", "metrics.jsonl"]
    manifest = EbmManifest.model_validate_json((tmp_path / "ebm0" / "ebm.json").read_text())
    assert (manifest.encoder.digest, manifest.head.embedding_dim, manifest.head.hidden_dims) == ("aaaa", DIM, [64, 32])
    metrics = EbmMetrics.model_validate_json((tmp_path / "ebm0" / "metrics.json").read_text())
    assert metrics.steps == 20 and metrics.valid is not None and metrics.counts.theorems == 70
    assert metrics.linear_probe_accuracy is not None and metrics.centroid_l2 > 0
    assert metrics.evidence is not None and metrics.evidence.split == "valid"  # held-out siblings and calibration
    lines = (tmp_path / "ebm0" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [20, 20]
    marker = store.read_marker(str(tmp_path / "ebm0"))
    assert marker is not None and marker.extra["encoder_digest"] == "aaaa"
    assert marker.extra["encoder_key"] == identity("aaaa").key() != identity("aaaa", pooling="last").key()
    assert publish(tmp_path / "ebm0", store=store).skipped
    resumed = publish(tmp_path / "ebm1", init=str(tmp_path / "ebm0"), store=store).init
    assert resumed is not None and resumed.resumed and "same embedding model" in resumed.reason
    fresh = publish(tmp_path / "ebm2", digest="bbbb", init=str(tmp_path / "ebm0"), store=store).init
    assert fresh is not None and not fresh.resumed and "embedding model changed (digest aaaa vs bbbb" in fresh.reason
    pooled = publish(tmp_path / "ebm4", encoder=identity("aaaa", pooling="last"), init=str(tmp_path / "ebm0"),
                     store=store).init
    assert pooled is not None and not pooled.resumed and "the encoder changed (pooling mean vs last" in pooled.reason
    other_shape = publish(tmp_path / "ebm3", init=str(tmp_path / "ebm0"), hidden_dims=[32], store=store).init
    assert other_shape is not None and not other_shape.resumed and "architecture changed" in other_shape.reason


def test_a_failed_training_publishes_nothing(tmp_path: Path, store: Store) -> None:
    with pytest.raises(TrainingError):
        publish(tmp_path / "ebm", temperature_min=0.99, temperature_max=1.01, learning_rate=0.05, store=store)
    assert not (tmp_path / "ebm").exists() and list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_value_model_published_on_s3_loads_back_and_warm_starts(s3_root: str, store: Store) -> None:
    from burnqed.ebm.scorer import load_value_model

    uri = s3_root + "/iter_1/ebm"
    publish(uri, store=store)
    assert store.is_done(uri)
    head, manifest = load_value_model(uri, store=store)
    assert manifest.encoder.digest == "aaaa" and manifest.head.embedding_dim == DIM and not head.training
    resumed = publish(s3_root + "/iter_2/ebm", init=uri, store=store).init
    assert resumed is not None and resumed.resumed

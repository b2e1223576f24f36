"""Metrics of the value model (docs/ebm.md, "Training").

    snap = group_snapshot(energies, depths, step=100, split="valid", temperature=0.9)   # rank-1, gap, loss
    centroid_l2(z_pos, z_neg)                 # embedding collapse monitor (burn-qed: 6.40 healthy, 1.33 collapsed)
    linear_probe(x_train, y_train, x_test, y_test)   # class-balanced held-out accuracy of a logistic regression
    sibling_rank(data.split_decisions("valid"), energy)     # does the lowest energy pick the proof path?
    calibration([(theorem, energy, positive), ...], bins=5) # energy bins against the proof-path rate, AUC
    embedding_health(data, embeddings, rows)  # all of the embedding metrics, overall and by depth

`EmbeddingHealth` (docs/training.md, "The joint study") is the one implementation the joint run's probe,
`train-ebm`'s figures and the joint study share. `sibling_rank` and `calibration` are pure Python over energies the
caller computed. This module imports torch at the top: import it inside the functions that need it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

import torch
import torch.nn.functional as F

from burnqed.ebm.formats import (
    DEPTH_BUCKETS,
    SPECTRUM_SHARES,
    Calibration,
    CalibrationBin,
    DepthEnergy,
    DepthHealth,
    DepthRank,
    EmbeddingHealth,
    SiblingRank,
    Snapshot,
    depth_bucket,
)
from burnqed.ebm.sampling import Decision, EbmDataset, Split

PROBE_STEPS = 200
PROBE_L2 = 1e-2


def group_snapshot(
    energies: torch.Tensor,
    depths: Sequence[int],
    *,
    step: int,
    split: str,
    temperature: float,
    depth_loss: float | None = None,
    depth_weight: float = 0.0,
    samples_per_s: float | None = None,
) -> Snapshot:
    """Metrics of groups' energies (G, 1 + K), positive first; `depths` are the positives' depths."""
    energies = energies.detach().float().cpu()
    groups = int(energies.shape[0])
    if groups == 0:
        raise ValueError("no groups to measure")
    targets = torch.zeros(groups, dtype=torch.long)
    infonce = float(F.cross_entropy(-energies, targets))
    hits = (energies[:, 1:] > energies[:, :1]).all(dim=1)  # strictly lowest: ties are not a win
    by_depth: dict[str, list[bool]] = defaultdict(list)
    for depth, hit in zip(depths, hits.tolist(), strict=True):
        by_depth[depth_bucket(depth)].append(bool(hit))
    loss = infonce + (depth_weight * depth_loss if depth_loss is not None else 0.0)
    return Snapshot(
        step=step,
        split="valid" if split == "valid" else "train",
        groups=groups,
        loss=round(loss, 6),
        infonce=round(infonce, 6),
        depth_loss=round(depth_loss, 6) if depth_loss is not None else None,
        energy_gap=round(float(energies[:, 1:].mean() - energies[:, 0].mean()), 6),
        rank1=round(float(hits.float().mean()), 6),
        rank1_by_depth={b: round(sum(by_depth[b]) / len(by_depth[b]), 6) for b in DEPTH_BUCKETS if by_depth[b]},
        groups_by_depth={b: len(by_depth[b]) for b in DEPTH_BUCKETS if by_depth[b]},
        temperature=round(temperature, 6),
        samples_per_s=round(samples_per_s, 2) if samples_per_s is not None else None,
    )


def _pick_share(scores: Sequence[float], on_path: Sequence[bool]) -> float:
    """The share of the children with the LOWEST score that are on the path (ties: fractional)."""
    best = min(scores)
    tied = [flag for score, flag in zip(scores, on_path, strict=True) if score == best]
    return sum(tied) / len(tied)


def _rank(decisions: Sequence[Decision], energy: Mapping[int, float]) -> tuple[float, float, float | None]:
    accuracy = sum(_pick_share([energy[c] for c in d.children], d.on_path) for d in decisions) / len(decisions)
    chance = sum(sum(d.on_path) / len(d.on_path) for d in decisions) / len(decisions)
    with_lp = [d for d in decisions if d.logprobs is not None]
    policy = (sum(_pick_share([-lp for lp in d.logprobs or ()], d.on_path) for d in with_lp) / len(with_lp)
              if with_lp and len(with_lp) == len(decisions) else None)
    return accuracy, chance, policy


def sibling_rank(decisions: Sequence[Decision], energy: Mapping[int, float]) -> SiblingRank | None:
    """Rank accuracy among siblings (`SiblingRank`): `energy` maps each child's state index to its energy under
    its theorem's goal. None without decisions."""
    if not decisions:
        return None
    by_bucket: dict[str, list[Decision]] = defaultdict(list)
    for decision in decisions:
        by_bucket[depth_bucket(decision.depth)].append(decision)
    accuracy, chance, policy = _rank(decisions, energy)
    depths = {}
    for bucket in DEPTH_BUCKETS:
        if by_bucket[bucket]:
            a, c, p = _rank(by_bucket[bucket], energy)
            depths[bucket] = DepthRank(decisions=len(by_bucket[bucket]), accuracy=round(a, 6), chance=round(c, 6),
                                       policy=None if p is None else round(p, 6))
    return SiblingRank(decisions=len(decisions), accuracy=round(accuracy, 6), chance=round(chance, 6),
                       policy=None if policy is None else round(policy, 6), by_depth=depths)


def energy_by_depth(scored: Sequence[tuple[int, float, bool]]) -> dict[str, DepthEnergy]:
    """Mean energy per depth bucket (`ValueEvidence.by_depth`) of (depth, energy relative to the goal, positive)
    per state, on a proof path and off it; buckets without a state are left out."""
    sums: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for depth, value, positive in scored:
        sums[depth_bucket(depth)][0 if positive else 1].append(value)
    return {bucket: DepthEnergy(positives=len(sums[bucket][0]), negatives=len(sums[bucket][1]),
                                positive=_mean_or_none(sums[bucket][0]), negative=_mean_or_none(sums[bucket][1]))
            for bucket in DEPTH_BUCKETS if bucket in sums}


def calibration(scored: Sequence[tuple[str, float, bool]], bins: int = 5) -> Calibration:
    """Energy against the proof-path rate (`Calibration`) of (theorem, energy, positive) per state: `bins`
    equal-count bins by energy (fewer when there are fewer states), and the within-theorem AUC."""
    if bins < 1:
        raise ValueError("bins must be at least 1")
    ordered = sorted(scored, key=lambda item: item[1])
    count = min(bins, len(ordered))
    out = []
    for b in range(count):
        chunk = ordered[b * len(ordered) // count:(b + 1) * len(ordered) // count]
        positives = sum(1 for _, _, positive in chunk if positive)
        out.append(CalibrationBin(low=round(chunk[0][1], 6), high=round(chunk[-1][1], 6), states=len(chunk),
                                  positives=positives, rate=round(positives / len(chunk), 6)))
    by_theorem: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for theorem, value, positive in scored:
        by_theorem[theorem][0 if positive else 1].append(value)
    wins, pairs = 0.0, 0
    for positives_e, negatives_e in by_theorem.values():
        for p in positives_e:
            for n in negatives_e:
                wins += 1.0 if p < n else 0.5 if p == n else 0.0
        pairs += len(positives_e) * len(negatives_e)
    return Calibration(states=len(scored), positives=sum(1 for _, _, positive in scored if positive),
                       auc=round(wins / pairs, 6) if pairs else None, bins=out)


def centroid_l2(positives: torch.Tensor, negatives: torch.Tensor) -> float:
    """‖mean(positives) − mean(negatives)‖₂ of raw embeddings (N, d); 0 when either side is empty."""
    if positives.shape[0] == 0 or negatives.shape[0] == 0:
        return 0.0
    return float((positives.float().mean(dim=0) - negatives.float().mean(dim=0)).norm())


def balanced_accuracy(predicted: torch.Tensor, labels: torch.Tensor) -> float:
    """Mean of the per-class recalls of boolean predictions against boolean labels."""
    recalls = []
    for cls in (True, False):
        mask = labels == cls
        if mask.any():
            recalls.append(float((predicted[mask] == cls).float().mean()))
    return sum(recalls) / len(recalls) if recalls else 0.0


def fit_probe(x_train: torch.Tensor, y_train: torch.Tensor, *, seed: int = 0) -> Callable[[torch.Tensor], torch.Tensor]:
    """An L2-regularised logistic regression fitted on (x_train, y_train) (features standardised with the training
    statistics; classes weighted equally); returns the predictor of boolean labels. Both classes must occur."""
    generator = torch.Generator().manual_seed(seed)
    mean = x_train.float().mean(dim=0)
    std = x_train.float().std(dim=0).clamp(min=1e-6) if x_train.shape[0] > 1 else torch.ones(x_train.shape[1])
    train = (x_train.float() - mean) / std
    target = y_train.float()
    positives = float(target.sum())
    weights = torch.where(target > 0, 0.5 / positives, 0.5 / (target.numel() - positives))
    w = (torch.randn(train.shape[1], generator=generator) * 0.01).requires_grad_(True)
    b = torch.zeros((), requires_grad=True)
    optimizer = torch.optim.LBFGS([w, b], lr=0.5, max_iter=PROBE_STEPS, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        logits = train @ w + b
        loss = (F.binary_cross_entropy_with_logits(logits, target, reduction="none") * weights).sum()
        loss = loss + PROBE_L2 * (w * w).sum()
        loss.backward()  # type: ignore[no-untyped-call]
        return loss

    optimizer.step(closure)  # type: ignore[no-untyped-call]
    w_fit, b_fit = w.detach(), b.detach()

    def predict(x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return ((x.float() - mean) / std @ w_fit + b_fit) > 0

    return predict


def linear_probe(x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor, y_test: torch.Tensor,
                 *, seed: int = 0) -> float | None:
    """Class-balanced accuracy on (x_test, y_test) of `fit_probe` on (x_train, y_train). None when either set
    lacks one of the two classes."""
    if any(int(y.sum()) in (0, y.numel()) for y in (y_train, y_test)):
        return None
    predict = fit_probe(x_train, y_train, seed=seed)
    return round(balanced_accuracy(predict(x_test), y_test.bool()), 6)


# ------------------------------------------------------------------------------------- embedding health


def _spectrum(x: torch.Tensor) -> tuple[list[float], float | None]:
    """Variance shares (descending) of the rows of `x` and the effective rank; ([], None) below two rows."""
    if x.shape[0] < 2:
        return [], None
    centred = x.double() - x.double().mean(dim=0)
    values = torch.linalg.svdvals(centred) ** 2  # eigenvalues of the covariance up to a common factor
    total = float(values.sum())
    if total <= 0:
        return [0.0], 0.0
    shares = values / total
    nonzero = shares[shares > 0]
    entropy = float(-(nonzero * nonzero.log()).sum())
    return [round(float(v), 6) for v in shares], round(float(torch.tensor(entropy).exp()), 4)


def _mean_or_none(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 6) if values else None


def _norm_gap(x: torch.Tensor, y: torch.Tensor) -> float | None:
    if not y.any() or y.all():
        return None
    norms = x.float().norm(dim=1)
    return round(float(norms[y].mean() - norms[~y].mean()), 6)


def embedding_health(data: EbmDataset, embeddings: torch.Tensor, rows: Mapping[str, int],
                     states: Mapping[Split, Sequence[int]] | None = None, *, seed: int = 0) -> EmbeddingHealth:
    """Every embedding metric of the module docstring, overall and by depth, of the states of `data` (or the
    `states` given per split) whose raw text maps to a row of `embeddings` through `rows`."""
    chosen: dict[str, list[int]] = {
        split: list(states[split]) if states is not None else data.split_states(split)
        for split in ("train", "valid")
    }
    every = chosen["train"] + chosen["valid"]
    table = embeddings.detach().float().cpu()

    def xy(picked: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        x = table[[rows[data.states[i].text] for i in picked]] if picked else table[:0]
        return x, torch.tensor([data.states[i].positive for i in picked], dtype=torch.bool)

    x_all, y_all = xy(every)
    x_train, y_train = xy(chosen["train"])
    x_valid, y_valid = xy(chosen["valid"])
    predict = None
    probe: float | None = None
    if any(int(y.sum()) in (0, y.numel()) for y in (y_train, y_valid)):
        probe_split = (f"not measured: a split lacks a class (train {int(y_train.sum())}/{len(y_train)} positive, "
                       f"valid {int(y_valid.sum())}/{len(y_valid)} positive)")
    else:
        predict = fit_probe(x_train, y_train, seed=seed)
        probe = round(balanced_accuracy(predict(x_valid), y_valid), 6)
        probe_split = f"fit on {len(y_train)} train states, scored on {len(y_valid)} valid states"
    present = set(every)
    sibling: dict[str, list[float]] = defaultdict(list)
    for i in every:
        state = data.states[i]
        if not state.positive:
            continue
        z = table[rows[state.text]]
        for j in sorted(state.siblings & present):
            sibling[depth_bucket(state.depth)].append(float((z - table[rows[data.states[j].text]]).norm()))
    spectrum, rank = _spectrum(x_all)
    by_depth: dict[str, DepthHealth] = {}
    buckets = [depth_bucket(data.states[i].depth) for i in every]
    valid_buckets = [depth_bucket(data.states[i].depth) for i in chosen["valid"]]
    for bucket in DEPTH_BUCKETS:
        mask = torch.tensor([b == bucket for b in buckets], dtype=torch.bool)
        if not mask.any():
            continue
        x, y = x_all[mask], y_all[mask]
        vmask = torch.tensor([b == bucket for b in valid_buckets], dtype=torch.bool)
        y_depth = y_valid[vmask]
        depth_probe = (round(balanced_accuracy(predict(x_valid[vmask]), y_depth), 6)
                       if predict is not None and y_depth.any() and not y_depth.all() else None)
        _, depth_rank = _spectrum(x)
        by_depth[bucket] = DepthHealth(
            states=int(mask.sum()), positives=int(y.sum()),
            centroid_l2=round(centroid_l2(x[y], x[~y]), 6) if y.any() and not y.all() else None,
            linear_probe=depth_probe, sibling_l2=_mean_or_none(sibling[bucket]), norm_gap=_norm_gap(x, y),
            effective_rank=depth_rank,
        )
    pairs = [d for values in sibling.values() for d in values]
    return EmbeddingHealth(
        states=len(every), positives=int(y_all.sum()), dim=int(table.shape[1]) if table.ndim == 2 else 0,
        centroid_l2=round(centroid_l2(x_all[y_all], x_all[~y_all]), 6), linear_probe=probe,
        linear_probe_split=probe_split, sibling_l2=_mean_or_none(pairs), siblings=len(pairs),
        norm_gap=_norm_gap(x_all, y_all), spectrum=spectrum[:SPECTRUM_SHARES],
        effective_rank=rank if rank is not None else 0.0, by_depth=by_depth,
    )

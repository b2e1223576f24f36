"""Losses of the value model. InfoNCE has no temperature of its own (lesson 1): the head's learnable
temperature is already inside the energies.

    loss = info_nce(energies)                       # energies (B, 1 + K): column 0 is the positive
    aux = depth_loss(predicted, remaining)          # log(1 + remaining tactics) regression

This module imports torch at the top: import it inside the functions that need it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def info_nce(energies: torch.Tensor) -> torch.Tensor:
    """Mean over groups of −log softmax(−energy)[positive], the positive at index 0 of each row of (B, 1 + K)."""
    if energies.dim() != 2 or energies.shape[1] < 2:
        raise ValueError(f"energies must be (groups, 1 + K) with K ≥ 1, got {tuple(energies.shape)}")
    targets = torch.zeros(energies.shape[0], dtype=torch.long, device=energies.device)
    return F.cross_entropy(-energies, targets)


def depth_target(remaining: torch.Tensor) -> torch.Tensor:
    """The regression target of `remaining` tactics to a proof: log(1 + remaining)."""
    return torch.log1p(remaining.float())


def depth_loss(predicted: torch.Tensor, remaining: torch.Tensor) -> torch.Tensor:
    """Mean squared error between the head's depth read-out and log(1 + remaining)."""
    return F.mse_loss(predicted, depth_target(remaining))

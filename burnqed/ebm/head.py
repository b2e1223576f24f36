"""The goal-conditioned energy head (docs/ebm.md, "The head"): energy(state, goal) = MLP([z_s; z_g; z_s ⊙ z_g]) / T.

    head = GoalConditionedEnergyHead(HeadSpec(embedding_dim=64, hidden_dims=[256, 128, 64], dropout=0.1,
                                              spectral_norm=True, first_layer_scale=0.1), init_temperature=1.0)
    head.set_input_stats(mean, std)           # the training embeddings' per-dimension statistics
    energy = head(z_state, z_goal)            # (...,) lower = more promising; z_goal broadcasts to z_state
    save_head(head, path); load_head(spec, path)

Inputs standardised per dimension, spectral-normalised linear layers, a scaled first layer, a learnable temperature
(the only one), and an optional depth read-out that does not enter the energy; why each, with measurements, is in
docs/ebm.md. This module imports torch at the top: import it inside the functions that need it.
"""

from __future__ import annotations

import math
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm

from burnqed.ebm.formats import HeadSpec

if TYPE_CHECKING:
    from burnqed.config import EbmConfig


class GoalConditionedEnergyHead(nn.Module):
    """See the module docstring."""

    def __init__(self, spec: HeadSpec, init_temperature: float = 1.0) -> None:
        super().__init__()
        if init_temperature <= 0:
            raise ValueError(f"init_temperature must be positive, got {init_temperature}")
        self.spec = spec
        dims = [3 * spec.embedding_dim, *spec.hidden_dims]
        self.hidden = nn.ModuleList(
            _linear(fan_in, fan_out, spec.spectral_norm, spec.first_layer_scale if i == 0 else 1.0)
            for i, (fan_in, fan_out) in enumerate(pairwise(dims))
        )
        self.out = _linear(dims[-1], 1, spec.spectral_norm, 1.0)
        self.depth_out = nn.Linear(dims[-1], 1)
        self.act = nn.SiLU()
        self.drop = nn.Dropout(spec.dropout)
        self.log_temperature = nn.Parameter(torch.tensor(math.log(init_temperature)))
        self.input_mean: torch.Tensor
        self.input_std: torch.Tensor
        self.register_buffer("input_mean", torch.zeros(spec.embedding_dim))
        self.register_buffer("input_std", torch.ones(spec.embedding_dim))

    def set_input_stats(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        """Standardise inputs with these per-dimension statistics (tiny deviations are floored)."""
        std = std.float().clamp(min=max(float(std.float().mean()) * 1e-3, 1e-6))
        self.input_mean.copy_(mean.float())
        self.input_std.copy_(std)

    @property
    def temperature(self) -> torch.Tensor:
        return self.log_temperature.exp()

    def features(self, z_state: torch.Tensor, z_goal: torch.Tensor) -> torch.Tensor:
        """The last hidden layer's activations for (state, goal) pairs; `z_goal` must broadcast to `z_state`'s
        shape ((d,), or (B, 1, d) for states (B, K+1, d))."""
        z_state = (z_state - self.input_mean) / self.input_std
        z_goal = ((z_goal - self.input_mean) / self.input_std).expand_as(z_state)
        x = torch.cat([z_state, z_goal, z_state * z_goal], dim=-1)
        for layer in self.hidden:
            x = self.drop(self.act(layer(x)))
        return x

    def raw_energy(self, features: torch.Tensor) -> torch.Tensor:
        """MLP output before the temperature, (...,)."""
        out: torch.Tensor = self.out(features)
        return out.squeeze(-1)

    def forward(self, z_state: torch.Tensor, z_goal: torch.Tensor) -> torch.Tensor:
        """Energies (...,) of states (..., d) under goals broadcastable to them; lower = closer to a proof."""
        return self.raw_energy(self.features(z_state, z_goal)) / self.temperature

    def energy_and_depth(self, z_state: torch.Tensor, z_goal: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Energies and the auxiliary depth prediction (log(1 + remaining tactics)), both (...,)."""
        feats = self.features(z_state, z_goal)
        depth: torch.Tensor = self.depth_out(feats)
        return self.raw_energy(feats) / self.temperature, depth.squeeze(-1)

    def baked(self) -> GoalConditionedEnergyHead:
        """A copy for scoring only: eval mode, no gradients, and plain weights holding what the spectral-norm
        parametrisations compute (they would otherwise renormalise on every forward: the 25M parameters of the
        4096-d first layer per call). The original is left as it was."""
        with torch.random.fork_rng(devices=[]):  # its throwaway init must not move the caller's random stream
            plain = GoalConditionedEnergyHead(self.spec.model_copy(update={"spectral_norm": False}))
        was_training = self.training
        self.eval()  # a training-mode read of a normalised weight would run a power iteration
        try:
            with torch.no_grad():
                for source, target in zip(self.linear_layers(), plain.linear_layers(), strict=True):
                    target.weight.copy_(source.weight)
                    target.bias.copy_(source.bias)
                plain.depth_out.load_state_dict(self.depth_out.state_dict())
                plain.log_temperature.copy_(self.log_temperature)
                plain.input_mean.copy_(self.input_mean)
                plain.input_std.copy_(self.input_std)
        finally:
            self.train(was_training)
        return plain.to(self.log_temperature.device).eval().requires_grad_(False)

    def linear_layers(self) -> list[nn.Linear]:
        """The MLP's linear layers, input first (their `.weight` is the normalised weight under spectral norm)."""
        return [layer for layer in [*self.hidden, self.out] if isinstance(layer, nn.Linear)]


def _linear(fan_in: int, fan_out: int, normalise: bool, scale: float) -> nn.Linear:
    layer = nn.Linear(fan_in, fan_out)
    if scale != 1.0:
        with torch.no_grad():
            layer.weight.mul_(scale)
    if normalise:
        spectral_norm(layer)
    return layer


def save_head(head: GoalConditionedEnergyHead, path: Path) -> None:
    """The head's weights (spectral-norm state included) as safetensors."""
    from safetensors.torch import save_file

    tensors = {name: tensor.detach().contiguous().cpu() for name, tensor in head.state_dict().items()}
    save_file(tensors, str(path))


def load_head(spec: HeadSpec, path: Path, device: str = "cpu") -> GoalConditionedEnergyHead:
    """Rebuild the head of `spec` and load its weights from `path` (strict: names and shapes must match)."""
    from safetensors.torch import load_file

    head = GoalConditionedEnergyHead(spec)
    head.load_state_dict(load_file(str(path), device="cpu"), strict=True)
    return head.to(device)


def head_spec(cfg: EbmConfig, embedding_dim: int) -> HeadSpec:
    return HeadSpec(embedding_dim=embedding_dim, hidden_dims=list(cfg.hidden_dims), dropout=cfg.dropout,
                    spectral_norm=cfg.spectral_norm, first_layer_scale=cfg.first_layer_scale)

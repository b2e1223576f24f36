"""The energy head and the InfoNCE loss: shapes, spectral norms, first-layer scale, temperature, exact loss."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from burnqed.ebm.formats import HeadSpec
from burnqed.ebm.head import GoalConditionedEnergyHead, load_head, save_head
from burnqed.ebm.losses import depth_loss, info_nce


def spec(scale: float = 0.1, normalise: bool = True, dim: int = 16) -> HeadSpec:
    return HeadSpec(embedding_dim=dim, hidden_dims=[32, 24, 8], dropout=0.1, spectral_norm=normalise,
                    first_layer_scale=scale)


def built(seed: int, **kwargs: object) -> GoalConditionedEnergyHead:
    torch.manual_seed(seed)
    return GoalConditionedEnergyHead(spec(**kwargs))  # type: ignore[arg-type]


@pytest.mark.slow
def test_energies_have_one_value_per_state_and_goals_broadcast() -> None:
    head = built(0).eval()
    states, goals = torch.randn(5, 8, 16), torch.randn(5, 1, 16)
    assert head(states, goals).shape == (5, 8)
    assert head(torch.randn(3, 16), torch.randn(16)).shape == (3,)
    energy, depth = head.energy_and_depth(states, goals)
    assert energy.shape == depth.shape == (5, 8)
    # conditioning on the goal matters: another goal gives other energies
    assert not torch.allclose(head(states, goals), head(states, torch.randn(5, 1, 16)))


@pytest.mark.slow
def test_every_normalised_weight_has_spectral_norm_one() -> None:
    head = built(0).train()
    x, g = torch.randn(4, 16), torch.randn(16)
    for _ in range(50):  # each training forward runs one more power iteration
        head(x, g)
    head.eval()
    norms = [float(torch.linalg.matrix_norm(layer.weight.detach(), ord=2)) for layer in head.linear_layers()]
    assert len(norms) == 4
    assert norms == pytest.approx([1.0] * 4, abs=1e-3)
    raw = built(0, normalise=False)  # without spectral norm the scaled first layer keeps its small gain
    assert float(torch.linalg.matrix_norm(raw.linear_layers()[0].weight.detach(), ord=2)) < 0.2


def test_the_first_layer_is_scaled_at_init_and_spectral_norm_divides_the_scale_out() -> None:
    scaled, plain = built(7, scale=0.1, normalise=False), built(7, scale=1.0, normalise=False)
    first, first_plain = scaled.linear_layers()[0].weight, plain.linear_layers()[0].weight
    assert torch.allclose(first, 0.1 * first_plain, rtol=0, atol=1e-7)
    assert torch.equal(scaled.linear_layers()[1].weight, plain.linear_layers()[1].weight)
    # Under spectral norm the stored weights carry the factor, the normalised ones do not (docs/ebm.md).
    scaled, plain = built(7, scale=0.1), built(7, scale=1.0)
    stored: torch.Tensor = scaled.hidden[0].parametrizations.weight.original  # type: ignore[union-attr,assignment]
    stored_plain: torch.Tensor = plain.hidden[0].parametrizations.weight.original  # type: ignore[union-attr,assignment]
    assert torch.allclose(stored, 0.1 * stored_plain, rtol=0, atol=1e-7)
    scaled.eval()
    plain.eval()
    assert torch.allclose(scaled.linear_layers()[0].weight, plain.linear_layers()[0].weight, atol=1e-5)


def test_the_temperature_divides_the_energy() -> None:
    head = built(3).eval()
    states, goal = torch.randn(6, 16), torch.randn(16)
    with torch.no_grad():
        at_one = head(states, goal)
        head.log_temperature.fill_(math.log(2.5))
        at_two_and_a_half = head(states, goal)
    assert float(head.temperature.detach()) == pytest.approx(2.5)
    assert torch.allclose(at_two_and_a_half, at_one / 2.5, atol=1e-6)


def test_infonce_equals_the_hand_computed_value() -> None:
    # Group 1: energies 1, 2, 3 → −log(e^−1 / (e^−1 + e^−2 + e^−3)) = log(1 + e^−1 + e^−2) = 0.4076059644
    # Group 2: energies 0.5, 0.5, 0 → 0.5 + log(2·e^−0.5 + 1) = 1.2943767694
    energies = torch.tensor([[1.0, 2.0, 3.0], [0.5, 0.5, 0.0]])
    expected = (math.log(1 + math.exp(-1) + math.exp(-2)) + 0.5 + math.log(2 * math.exp(-0.5) + 1)) / 2
    assert expected == pytest.approx(0.8509913669, abs=1e-9)
    assert float(info_nce(energies)) == pytest.approx(expected, abs=1e-6)
    assert float(info_nce(torch.zeros(4, 8))) == pytest.approx(math.log(8), abs=1e-6)  # chance: ln(K + 1)
    with pytest.raises(ValueError, match="K ≥ 1"):
        info_nce(torch.zeros(4, 1))
    assert float(depth_loss(torch.tensor([0.0, math.log(3)]), torch.tensor([0, 2]))) == pytest.approx(0.0, abs=1e-7)


@pytest.mark.slow
def test_a_saved_head_loads_back_with_the_same_energies(tmp_path: Path) -> None:
    head = built(5)
    head.set_input_stats(torch.full((16,), 0.5), torch.full((16,), 2.0))
    head.eval()
    states, goal = torch.randn(4, 16), torch.randn(16)
    save_head(head, tmp_path / "head.safetensors")
    loaded = load_head(spec(), tmp_path / "head.safetensors").eval()
    with torch.no_grad():
        assert torch.equal(loaded(states, goal), head(states, goal))
    assert torch.equal(loaded.input_std, torch.full((16,), 2.0))


def test_the_baked_head_scores_like_the_trained_one_without_parametrisations() -> None:
    head = built(4).eval()
    states, goal = torch.randn(5, 16), torch.randn(16)
    baked = head.baked()
    with torch.no_grad():
        assert torch.allclose(baked(states, goal), head(states, goal), atol=1e-6)
    assert not hasattr(baked.hidden[0], "parametrizations") and hasattr(head.hidden[0], "parametrizations")
    assert not any(p.requires_grad for p in baked.parameters()) and not baked.training

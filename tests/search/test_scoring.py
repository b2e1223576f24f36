"""Node priorities of the best-first search: exact values of each term."""

from __future__ import annotations

import pytest

from burnqed.search.scoring import logprob_score, node_score, value_ramp


def test_logprob_score_normalises_by_depth_to_the_alpha() -> None:
    assert logprob_score(-6.0, 0, 0.5) == 0.0  # the root
    assert logprob_score(-6.0, 4, 0.0) == -6.0  # alpha 0: the plain sum
    assert logprob_score(-6.0, 4, 1.0) == -1.5  # alpha 1: the mean per tactic
    assert logprob_score(-6.0, 4, 0.5) == -3.0  # 6 / sqrt(4)


def test_value_ramp_is_linear_up_to_ramp_depth() -> None:
    assert [value_ramp(d, 0) for d in (0, 1, 7)] == [1.0, 1.0, 1.0]
    assert [value_ramp(d, 4) for d in (-1, 0, 1, 2, 4, 9)] == [0.0, 0.0, 0.25, 0.5, 1.0, 1.0]


def test_node_score_without_a_value_model_is_the_logprob_term() -> None:
    assert node_score(-6.0, 4, 0.5) == -3.0
    assert node_score(-6.0, 4, 0.5, energy=2.0) == -3.0  # weight 0: the energy is ignored
    assert node_score(-6.0, 4, 0.5, energy=None, weight=1.0) == -3.0


def test_node_score_subtracts_the_weighted_ramped_energy() -> None:
    assert node_score(-6.0, 4, 0.5, energy=2.0, weight=1.0) == -5.0
    assert node_score(-6.0, 4, 0.5, energy=-2.0, weight=0.5) == -2.0  # low energy raises the score
    assert node_score(-6.0, 2, 1.0, energy=2.0, weight=1.0, ramp_depth=4) == pytest.approx(-3.0 - 0.5 * 2.0)


def test_lower_energy_pops_first_at_equal_logprobs() -> None:
    good = node_score(-2.0, 2, 0.5, energy=-1.0, weight=1.0)
    bad = node_score(-2.0, 2, 0.5, energy=1.0, weight=1.0)
    assert good > bad

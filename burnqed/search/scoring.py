"""Node priorities of the best-first search (docs/search.md). Pure functions.

    score = Σ logprob / depth^α  +  w · ramp(depth) · (−energy)

The first term is the length-normalised cumulative log-prob of the tactics on the path (α = 0: plain
sum, which favours shallow nodes; α = 1: mean per tactic). The second is the value model's opinion,
off when there is no value model; `ramp` lets it in gradually with depth (ramp_depth = 0: full weight
at every depth), because near the root the log-probs are already informative.
"""

from __future__ import annotations

import math


def logprob_score(cum_logprob: float, depth: int, alpha: float) -> float:
    """Σ logprob / depth^α; the root (depth 0) scores 0."""
    if depth <= 0:
        return 0.0
    return cum_logprob / math.pow(depth, alpha)


def value_ramp(depth: int, ramp_depth: int) -> float:
    """How much of the value weight applies at `depth`: linear from 1/ramp_depth to 1."""
    if ramp_depth <= 0:
        return 1.0
    return min(1.0, max(depth, 0) / ramp_depth)


def node_score(
    cum_logprob: float,
    depth: int,
    alpha: float,
    energy: float | None = None,
    weight: float = 0.0,
    ramp_depth: int = 0,
) -> float:
    """The frontier priority of a node (higher pops first)."""
    score = logprob_score(cum_logprob, depth, alpha)
    if energy is not None and weight:
        score -= weight * value_ramp(depth, ramp_depth) * energy
    return score

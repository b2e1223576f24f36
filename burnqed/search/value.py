"""The `ValueFn` seam: what orders the frontier besides the policy's log-probs (the EBM, docs/ebm.md).

Search calls it once per expansion with every new child of that expansion, so an implementation can
batch; lower energy = more promising. The goal is the theorem's root state (the head is
goal-conditioned).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from burnqed.policy.base import AsyncResource


class ValueFn(AsyncResource, Protocol):
    """Energies of proof states; lower is better (`async with value:` closes it)."""

    async def energies(self, goal: str, states: Sequence[str]) -> list[float]:
        """One energy per state in `states` (pretty-printed goals), conditioned on the root `goal`."""
        ...

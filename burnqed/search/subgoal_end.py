"""What one subgoal's search in a sketch gave (docs/search.md, "Sketch search"), and the meter it runs under.
"""

from __future__ import annotations

from dataclasses import dataclass

from burnqed.records.results import Edge, FailureReason
from burnqed.search.skeleton import Proofs
from burnqed.search.usage import UsageMeter

__all__ = ["SubgoalEnd", "share_meter"]


def share_meter(theorem_meter: UsageMeter) -> UsageMeter:
    """A subgoal search's meter: its tokens go to the theorem's meter too (Lean requests are counted by the theorem's
    `CountingLean`, shared); its units are booked by the sketch search (`Root.book`); its clock is its own."""
    return UsageMeter((), theorem_meter.lean, into=theorem_meter)


@dataclass(slots=True)
class SubgoalEnd:
    """What a subgoal search gave: its proof's tactics (None: not proved), its rows (ids local: the subgoal's root is
    0), the closing row of the proof, the units spent and why it ended."""

    tactics: list[str] | None
    edges: list[Edge]
    leaf: int | None
    spent: int
    reason: FailureReason | None

    @classmethod
    def of(cls, proofs: Proofs, edges: list[Edge], spent: int, reason: FailureReason | None) -> SubgoalEnd:
        """A subgoal search's end from its proofs (the first counts) and rows."""
        first = proofs.verified[0] if proofs.verified else None
        return cls(first.tactics if first else None, edges, first.edge if first else None, spent,
                   None if first else (reason or FailureReason.EXHAUSTED))

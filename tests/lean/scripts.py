"""Test helper: the Lean file of a corpus theorem proved by some tactics (what the search will compile)."""

from __future__ import annotations

from collections.abc import Sequence

from burnqed.lean.soundness import assemble_proof
from burnqed.records.theorem import Theorem
from leankit.corpus import TheoremSpec


def assemble_script(theorem: TheoremSpec, tactics: Sequence[str]) -> str:
    text = assemble_proof(Theorem.from_recorded(theorem), tactics)
    assert text is not None  # corpus theorems always have a statement
    return text

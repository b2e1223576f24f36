"""Theorems for the search tests."""

from __future__ import annotations

from burnqed.lean.corpus import TheoremSpec
from burnqed.records import Theorem


def as_forall_declaration(spec: TheoremSpec) -> Theorem:
    """The corpus theorem written as one ∀ statement, `theorem NAME : ∀ …` (no binders before the colon): it starts
    at the recorded root, the ∀ goal these tests' scripted policies branch on (`intro x` or `intro x h₀`). A theorem
    given only as a ∀ statement starts in binder form instead; tests/sft/test_prompt_identity.py and
    tests/lean/test_theorem_start.py search and start those."""
    theorem = spec.as_theorem()
    return theorem.model_copy(update={"signature": f": {theorem.statement}"})

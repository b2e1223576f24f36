"""The core nouns every layer names: how a theorem's declaration is written and how a theorem is searched.

    from burnqed.records.enums import DeclarationForm, SearchMode
    theorem.declaration(DeclarationForm.FORALL)    # `theorem NAME : ∀ …, T`
    SearchMode(cfg.search.mode)                    # step, whole, hybrid or sketch

Pure; imports nothing of burnqed. With each mode, what its budget counts (`EXPANSION_MODES`): a saved result says
its unit by its mode.
"""

from __future__ import annotations

from enum import StrEnum


class DeclarationForm(StrEnum):
    """How a theorem's declaration is written: with its binders before the colon (as in a Lean file; the
    binders are hypotheses when the proof starts) or as one ∀ statement (the form of the burn-qed prototype's
    theorem indexes)."""

    BINDER = "binder"
    FORALL = "forall"


class SearchMode(StrEnum):
    """How a theorem is searched (`search.mode`, docs/search.md)."""

    STEP = "step"  # best-first over single tactics: the tactic format
    WHOLE = "whole"  # pass@N over whole proofs sampled from the statement: the whole format
    HYBRID = "hybrid"  # whole proofs sampled from proof states, replayed through a trie: the proof format
    SKETCH = "sketch"  # a planner's sketch of have subgoals, each subgoal searched: the sketch format


# The search modes whose budget counts node expansions (`nodes_expanded`): step, and sketch, whose planner requests and
# subgoal searches spend step's unit; whole and hybrid count proofs sampled (`proofs_sampled`).
EXPANSION_MODES: frozenset[SearchMode] = frozenset({SearchMode.STEP, SearchMode.SKETCH})

"""How a theorem is started in Lean and how its declaration is restated for the compile: one place, so the start,
the compile and every caller (search, `burnqed lean check`, the data stage's replay) agree (docs/lean.md, "Who
starts theorems this way").

    state_id = await start_goal(lean, theorem)             # the root state of the theorem
    state_id, goals = await start_theorem(lean, theorem)   # ... and its goals, surviving a neighbour's crash

A theorem with a statement starts as a Lean user's file states it, `theorem NAME <binders> : T := by sorry` under
its header, the binders hypotheses in context; one without a statement copies a constant (`goal.start copyFrom`).
A ∀ statement starts with its leading ∀ binders as the signature (`records.theorem.Theorem.binder_signature`).
"""

from __future__ import annotations

from burnqed.errors import LeanStatesLostError
from burnqed.lean.env import LeanEnv
from burnqed.records.enums import DeclarationForm
from burnqed.records.replies import Goal
from burnqed.records.theorem import Theorem

# The form a theorem is started and compiled in: as written, binders before the colon.
START_FORM = DeclarationForm.BINDER
MAX_SHARED_RESTARTS = 30  # worker replacements caused by neighbours before a start gives up on the worker


async def start_goal(lean: LeanEnv, theorem: Theorem) -> int:
    """The theorem's root state id: its declaration under its header, else a copy of the named constant."""
    declaration = theorem.declaration(START_FORM)
    if declaration is not None:
        return await lean.start_theorem(theorem.header, declaration)
    return await lean.start_goal(copy_from=theorem.name)


async def start_theorem(lean: LeanEnv, theorem: Theorem) -> tuple[int, tuple[Goal, ...]]:
    """The theorem's root state and its goals. A neighbour's tactic may replace a shared worker between the two
    requests: then start again, up to MAX_SHARED_RESTARTS times."""
    for _ in range(MAX_SHARED_RESTARTS):
        try:
            state_id = await start_goal(lean, theorem)
            return state_id, await lean.goals(state_id)
        except LeanStatesLostError:
            continue
    raise LeanStatesLostError(f"the Lean worker was replaced {MAX_SHARED_RESTARTS} times while starting")

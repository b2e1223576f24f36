"""How a theorem is started in Lean and how its declaration is restated for the compile: one place, so the start,
the compile and every caller (search, `burnqed lean check`, the data stage's replay) agree.

    state_id = await start_goal(lean, theorem)             # the root state of the theorem
    state_id, goals = await start_theorem(lean, theorem)   # ... and its goals, surviving a neighbour's crash

A theorem with a statement starts from its declaration in `START_FORM`; one without names a constant of the Lean
environment to copy (`goal.start copyFrom`). The compile (`burnqed.lean.soundness.assemble_proof`) restates the
declaration in the same form, so a proof found from the start compiles as written.
"""

from __future__ import annotations

from burnqed.errors import LeanStatesLostError
from burnqed.lean.env import LeanEnv
from burnqed.prompt import DeclarationForm
from burnqed.records import Goal, Theorem

# The form the theorem is started (and compiled) in. `goal.start expr` takes one ∀ statement in the REPL's
# empty scope; a start in binder form needs a sorry start of the declaration under its header.
START_FORM = DeclarationForm.FORALL
MAX_SHARED_RESTARTS = 30  # worker replacements caused by neighbours before a start gives up on the worker


async def start_goal(lean: LeanEnv, theorem: Theorem) -> int:
    """The theorem's root state id: from its statement, else by copying the named constant."""
    if theorem.statement is not None:
        return await lean.start_goal(expr=theorem.statement)
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

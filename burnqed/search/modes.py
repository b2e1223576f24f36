"""One theorem, any search mode: the settings type of each mode and the call that dispatches on it.

    outcome = await prove_theorem(theorem, lean, policy, settings, guard, value)

`StepSettings` runs step-level best-first search (`burnqed.search.step`), `WholeSettings` whole-proof pass@N
(`burnqed.search.whole`), `HybridSettings` hybrid search (`burnqed.search.hybrid`), `SketchSettings` sketch search
(`burnqed.search.sketching`; its `planner`, None: the policy plans too); `burnqed.stages.search` builds the one
`search.mode` names. Whole mode has no use for the value model.
"""

from __future__ import annotations

from burnqed.lean.env import LeanEnv
from burnqed.lean.guard import TacticGuard
from burnqed.policy.base import Policy
from burnqed.records.enums import SearchMode
from burnqed.records.theorem import Theorem
from burnqed.search.answer import mode_refusal
from burnqed.search.hybrid import HybridSettings, prove_hybrid
from burnqed.search.sketching import SketchSettings, elaborates_sketches, prove_sketch
from burnqed.search.step import SearchOutcome, StepSettings, prove
from burnqed.search.value import ValueFn
from burnqed.search.whole import WholeSettings, prove_whole

SearchSettings = StepSettings | WholeSettings | HybridSettings | SketchSettings

MODE_OF: dict[type[SearchSettings], SearchMode] = {
    StepSettings: SearchMode.STEP, WholeSettings: SearchMode.WHOLE, HybridSettings: SearchMode.HYBRID,
    SketchSettings: SearchMode.SKETCH,
}


async def prove_theorem(
    theorem: Theorem,
    lean: LeanEnv,
    policy: Policy,
    settings: SearchSettings,
    guard: TacticGuard,
    value: ValueFn | None = None,
    *,
    planner: Policy | None = None,
) -> SearchOutcome:
    """Search one theorem in the mode its settings are for; never raises for domain failures. A theorem the mode
    refuses (`search.answer.mode_refusal`) is a ValueError: the stages leave such theorems out before any work.
    `planner` writes sketch mode's sketches (None: the policy)."""
    if isinstance(settings, WholeSettings):
        return await prove_whole(theorem, lean, policy, settings, guard)
    mode = MODE_OF[type(settings)]
    refusal = mode_refusal(theorem, mode)
    if refusal is not None:
        raise ValueError(f"{mode} mode does not search {theorem.name}: {refusal}")
    if isinstance(settings, SketchSettings):
        if not elaborates_sketches(lean):
            raise TypeError(f"sketch mode needs a Lean environment that elaborates sketches (SketchEnv), got "
                            f"{type(lean).__name__}")
        return await prove_sketch(theorem, lean, policy, settings, guard, value, planner=planner)
    if isinstance(settings, HybridSettings):
        return await prove_hybrid(theorem, lean, policy, settings, guard, value)
    return await prove(theorem, lean, policy, settings, guard, value)

"""Where a step or hybrid search starts and what a closing path from there must pass (docs/search.md, "Sketch
search"): the theorem's start, or one subgoal of an elaborated sketch whose sibling subgoals Lean's automatic mode
appends to every reply.

    result = own_goals(result, siblings)            # the reply as the subgoal's search sees it
    verdict = accept_subgoal(final, tactics, guard)  # a subgoal's closing path, as far as its own search can tell
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from burnqed.lean.guard import TacticGuard
from burnqed.lean.soundness import Verdict, check_final, check_path
from burnqed.records import Goal, TacticKind, TacticResult


def _same_goal(a: Goal, b: Goal) -> bool:
    """One goal of Lean's, in two replies: the same target and, where Lean names them, the same metavariable (its
    context may print differently once an earlier hole's value is assigned)."""
    return a.target == b.target and (a.mvar is None or b.mvar is None or a.mvar == b.mvar)


def own_goals(result: TacticResult, siblings: Sequence[Goal]) -> TacticResult:
    """`result` as the subgoal's search sees it: Lean's automatic mode (`lean.automatic_mode`) appends the sketch's
    other subgoals to every state after a tactic on one of them; they are dropped when the reply ends with them, so
    the subgoal is closed when only they are left. A reply that does not end with them (automatic mode off) is kept."""
    count = len(siblings)
    if result.kind is not TacticKind.SUCCESS or not count or len(result.goals) < count:
        return result
    tail = result.goals[len(result.goals) - count :]
    if not all(_same_goal(got, sibling) for got, sibling in zip(tail, siblings, strict=True)):
        return result
    return dataclasses.replace(result, goals=result.goals[: len(result.goals) - count])


def accept_subgoal(final: TacticResult, tactics: list[str], guard: TacticGuard) -> Verdict:
    """Whether a closing path proves the subgoal as far as its own search can tell: Lean closed it with no sorry and
    nothing unsafe, and no tactic on the path is denied. What counts is the assembled proof's compile."""
    for verdict in (check_final(final), check_path(tactics, guard)):
        if not verdict.ok:
            return verdict
    return Verdict(True)

"""Where a step or hybrid search starts and what a closing path from there must pass (docs/search.md, "Sketch
search"): the theorem's start, or one subgoal of an elaborated sketch whose sibling subgoals Lean's automatic mode
appends to every reply. One engine, another root: a sketch's subgoal search is a `StepSearch` or `HybridSearch` given
a subgoal `Root`.

    search = StepSearch(theorem, lean, policy, settings, guard, value)                 # Root(): the theorem's start
    search = StepSearch(theorem, lean, policy, settings, guard, value,
                        Root(goal, state_id, generation, goal_id, siblings, restart, seed_key, book, meter))
    result = own_goals(result, siblings)            # the reply as the subgoal's search sees it
    verdict = accept_subgoal(final, tactics, guard)  # a subgoal's closing path, as far as its own search can tell
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from burnqed.lean.guard import TacticGuard
from burnqed.lean.soundness import Verdict, check_final, check_path
from burnqed.records.replies import Goal, TacticKind, TacticResult
from burnqed.search.usage import CountingLean, UsageMeter


@dataclass(frozen=True, slots=True)
class Root:
    """Where a search starts. `Root()`: the theorem's start, started in Lean, its closing paths verified as the
    theorem's proofs. With a `goal`: that goal of the state `state_id` (worker `generation`) already in the worker,
    a sketch's subgoal: its tactics at the root work on goal `goal_id`, the `siblings` Lean's automatic mode appends
    to every reply are dropped from it (`own_goals`), a replaced worker gives the state again by `restart`, the
    sampling seeds are keyed on `seed_key`, `book(units)` is told the units spent after each expansion or round,
    `meter` is the search's (the sketch's, whose tokens go to the theorem's too), and a closing path counts as
    `accept_subgoal` says. Build one per search: the meter is that search's."""

    goal: Goal | None = None
    state_id: int = 0
    generation: int = 0
    goal_id: int | None = None
    siblings: tuple[Goal, ...] = ()
    restart: Callable[[], Awaitable[int]] | None = None
    seed_key: str | None = None
    book: Callable[[int], None] | None = None
    meter: UsageMeter | None = None

    @property
    def subgoal(self) -> bool:
        """The search starts from a goal already in the worker, not the theorem's start."""
        return self.goal is not None

    def goal_at(self, is_root: bool) -> int | None:
        """The goal a tactic at a node works on (`goal.tactic`'s goalId): the root's `goal_id` at the root; else
        None, the first."""
        return self.goal_id if is_root else None

    def meter_for(self, marks: Sequence[int], lean: CountingLean) -> UsageMeter:
        """The search's meter: `meter` when given (a subgoal's, whose tokens go to the theorem's too), else its own."""
        return UsageMeter(marks, lean) if self.meter is None else self.meter


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


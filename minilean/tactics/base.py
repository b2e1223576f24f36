"""What a tactic sees of the engine running it: `TacticEngine` (its scripts, term checks, new goals and names), `Run`
(what one request did besides changing goals) and the term checker whose `by …` blocks run on the engine.

    checker = _ByAwareChecker(goal, engine, False)      # a TermChecker that runs `by` blocks as tactic scripts
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from minilean.goals import Goal, Hyp, TacticError, make_room, pp_goals
from minilean.syntax import Expr, Var
from minilean.terms import TermChecker


@dataclass
class Run:
    """What one tactic request did besides changing goals."""

    sorried_goals: list[Goal] = field(default_factory=list)  # goals closed by `sorry`/`admit`
    sleep_ms: int = 0

    @property
    def sorried(self) -> bool:
        return bool(self.sorried_goals)


class TacticEngine(Protocol):
    """What a tactic uses of the engine running it (`Engine`): its scripts, term checks, new goals and names."""

    uniq: Callable[[], str]
    timeout_ms: int
    run_info: Run

    def run(self, goals: tuple[Goal, ...], text: str) -> tuple[Goal, ...]: ...

    def check_term(self, goal: Goal, term: Expr, expected: Expr, holes: bool = False) -> list[Goal]: ...

    def infer_term(self, goal: Goal, term: Expr) -> Expr: ...

    def new_goal(self, goal: Goal, target: Expr, tag: str | None = None,
                 hyps: tuple[Hyp, ...] | None = None) -> Goal: ...


class _ByAwareChecker(TermChecker):
    """A TermChecker whose `by …` blocks run on the engine."""

    def __init__(self, goal: Goal, engine: TacticEngine, holes: bool) -> None:
        super().__init__(goal, lambda g: None, engine.uniq, holes)
        self.engine = engine

    def _with_local(self, name: str, ty: Expr) -> TermChecker:
        goal = make_room(self.goal, name)
        goal = Goal((*goal.hyps, Hyp(name, ty, self.uniq())), goal.target, goal.case, goal.mvar)
        return _ByAwareChecker(goal, self.engine, self.holes)

    def check(self, term: Expr, expected: Expr) -> list[Goal]:
        from minilean.syntax import By

        if isinstance(term, Var) and term.name in ("sorry", "admit"):
            # `exact sorry` closes the goal and marks the proof (hasSorry, sorryAx), like the tactic
            self.engine.run_info.sorried_goals.append(Goal(self.goal.hyps, expected, None, self.uniq()))
            return []
        if isinstance(term, By):
            sub = Goal(self.goal.hyps, expected, None, self.uniq())
            remaining = self.engine.run((sub,), term.text)
            if remaining:
                raise TacticError(f"unsolved goals\n{pp_goals(remaining)}")
            return []
        return super().check(term, expected)

"""The replay server's proof states: goals of the corpus, sessions (one per `goal.start`), and what a tactic
script leaves behind. Shared by the server (`goal.tactic`) and its frontend (`frontend.process`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from leankit.corpus import TheoremSpec


@dataclass(frozen=True)
class GoalRef:
    """One open goal of a state: a corpus goal id plus the metavariable name Pantograph reports."""

    goal_id: str
    name: str


@dataclass
class Session:
    """One `goal.start`: the theorem, the root metavariable, and stable free-variable names."""

    theorem: TheoremSpec
    root: str
    fvars: dict[tuple[str, str], str] = field(default_factory=dict)


@dataclass(frozen=True)
class GoalState:
    session: Session
    goals: tuple[GoalRef, ...]
    has_sorry: bool
    # The root's own goal before any tactic (goal.print shows `?m.N` for it).
    is_root: bool = False


class TacticFailure(Exception):
    """A tactic failed: `message` is the Lean error text."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class Run:
    """Side results of executing one tactic script."""

    sleep_ms: int = 0
    sorried: list[GoalRef] = field(default_factory=list)
    # A goal was closed by `decide` with the kernel switched off (`set_option debug.skipKernelTC true in decide
    # +kernel`): its auxiliary lemma was added unchecked, so the proof proves whatever it claims.
    unchecked: bool = False

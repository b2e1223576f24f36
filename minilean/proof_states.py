"""minilean's REPL state: its goal states (by state id) and the theorems its environment holds. The server's
`goal.*` commands and its file commands (`minilean.frontend`) both read and write them.

    state = State((goal,), is_root=True, root=goal.mvar)        # what `goal.start` holds under a new state id
    env["t"] = Declared("t", statement, STANDARD_AXIOMS)       # what `frontend.process {inheritEnv}` declares
"""

from __future__ import annotations

from dataclasses import dataclass

from minilean.goals import Goal
from minilean.syntax import Expr


@dataclass
class State:
    """A goal state: its goals (the first is the main goal), whether a sorry is on its path, and whether any
    tactic ran yet (Pantograph prints no root before that)."""

    goals: tuple[Goal, ...]
    has_sorry: bool = False
    is_root: bool = False
    root: str = ""


@dataclass
class Declared:
    """A theorem in the REPL's environment (declared by `frontend.process` with `inheritEnv`)."""

    name: str
    statement: Expr
    axioms: tuple[str, ...]


__all__ = ["Declared", "State"]

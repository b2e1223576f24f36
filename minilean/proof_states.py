"""minilean's REPL state: its goal states (by state id) and the theorems its environment holds. The server's
`goal.*` commands and its file commands (`minilean.frontend`) both read and write them.

    state = State((goal,), is_root=True, root=goal.mvar)        # what `goal.start` holds under a new state id
    env["t"] = Declared("t", statement, STANDARD_AXIOMS)       # what `frontend.process {inheritEnv}` declares

A state keeps the constants of the environment it was created in (`constants`), as Pantograph's GoalState keeps
its environment: the tactics on it see the file's definitions even where the REPL's environment does not have them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

from minilean.constants import Constant, Env
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
    constants: Env = field(default_factory=lambda: MappingProxyType({}))


@dataclass
class Declared:
    """A theorem or a definition (`definition`) in the REPL's environment (declared by `frontend.process` with
    `inheritEnv`): its statement (a definition's type), its own axioms and the constants it uses."""

    name: str
    statement: Expr
    axioms: tuple[str, ...]
    definition: Constant | None = None
    uses: frozenset[str] = frozenset()


__all__ = ["Declared", "State"]

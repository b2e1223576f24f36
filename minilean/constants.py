"""The constants a Lean file defines (`def`, `abbrev`, `noncomputable` either way) and the environment of them a
goal is worked on in.

    sol = Constant("sol", (), NAT, value=Ascr(Num(2), NAT), reducible=True)     # abbrev sol : ℕ := 2
    with using({"sol": sol}):
        engine.run(goals, "decide")          # the elaborator, `Goal.ctx` and the tactics see `sol`

A constant is a global name with a type (its parameters' types, then its result type) and a value, `None` when the
value is `sorry`. Outside the tactics that unfold (`minilean.defeq.delta`), a constant is an opaque atom of its type,
as a local variable is. Which constants are visible is the environment a goal state was created in (Pantograph's
GoalState keeps its environment): the server sets it around every tactic with `using`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import MappingProxyType

from minilean.syntax import Expr, Op

SORRY_AXIOM = "sorryAx"


@dataclass(frozen=True)
class Constant:
    """`def name (params) : result := value`; `reducible` for an `abbrev`; `uses`: the other constants its type and
    value mention (so the axioms and the kernel recheck reach what it reaches)."""

    name: str
    params: tuple[tuple[str, Expr], ...]
    result: Expr
    value: Expr | None
    reducible: bool = False
    uses: frozenset[str] = frozenset()

    @property
    def ty(self) -> Expr:
        """Its type: `ℕ → ℕ` for `def f (n : ℕ) : ℕ`."""
        ty = self.result
        for _, param_ty in reversed(self.params):
            ty = Op("→", (param_ty, ty))
        return ty

    @property
    def axioms(self) -> tuple[str, ...]:
        """The axioms its own value uses (minilean's values use none but `sorry`'s)."""
        return (SORRY_AXIOM,) if self.value is None else ()


Env = Mapping[str, Constant]

_ACTIVE: ContextVar[Env] = ContextVar("minilean_constants", default=MappingProxyType({}))


def active() -> Env:
    """The constants visible to what runs now."""
    return _ACTIVE.get()


def constant_types() -> dict[str, Expr]:
    """Name → type of the visible constants (what a local context lists before its locals)."""
    return {name: constant.ty for name, constant in _ACTIVE.get().items()}


@contextmanager
def using(env: Env) -> Iterator[None]:
    """Make `env` the visible constants while the block runs."""
    token = _ACTIVE.set(env)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


@dataclass
class FileTheorems:
    """The theorems the file declared before the command that runs now (Lean's environment holds each once its
    statement elaborated, its proof failed or not), by name, each its statement as a term's type: a value binder a
    `∀`, a hypothesis a premise `→`; and the names the command's proof used of them (`#print axioms` and the kernel
    recheck reach them, as Lean's do)."""

    types: Mapping[str, Expr] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)


_THEOREMS: ContextVar[FileTheorems | None] = ContextVar("minilean_theorems", default=None)


def file_theorem(name: str) -> Expr | None:
    """The type of a theorem declared earlier in the file (`exact name args`, `apply name`), recorded as used; None
    for any other name."""
    theorems = _THEOREMS.get()
    found = theorems.types.get(name) if theorems is not None else None
    if theorems is not None and found is not None:
        theorems.used.add(name)
    return found


@contextmanager
def using_theorems(theorems: FileTheorems) -> Iterator[FileTheorems]:
    """Make the file's earlier theorems usable by name while the block runs."""
    token = _THEOREMS.set(theorems)
    try:
        yield theorems
    finally:
        _THEOREMS.reset(token)


def reached(names: frozenset[str] | set[str], env: Env) -> list[str]:
    """The constants of `env` that `names` mention, and those they use in turn, in the order first reached."""
    order: list[str] = []
    pending = [name for name in sorted(names) if name in env]
    while pending:
        name = pending.pop(0)
        if name in order:
            continue
        order.append(name)
        pending.extend(sorted(used for used in env[name].uses if used in env and used not in order))
    return order


__all__ = ["SORRY_AXIOM", "Constant", "Env", "FileTheorems", "active", "constant_types", "file_theorem", "reached",
           "using", "using_theorems"]

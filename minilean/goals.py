"""Goals and local contexts, printed as Lean prints them.

A goal is its hypotheses (variables and proofs, in order), its target and its case tag; every local and every
goal has a `_uniq.N` name, kept while the local or goal is unchanged (as Lean's free variables keep their ids
across states). `pp_goal` groups consecutive locals of the same type (`x y : ℝ`), as Lean's goal display does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from minilean.constants import constant_types
from minilean.elab import Context, subst, subst_many
from minilean.syntax import Expr, Var, free_vars, pp


class TacticError(Exception):
    """A failing tactic, with Lean's message."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Hyp:
    name: str
    ty: Expr
    uniq: str

    @property
    def inaccessible(self) -> bool:
        return "✝" in self.name


@dataclass(frozen=True)
class Goal:
    hyps: tuple[Hyp, ...]
    target: Expr
    case: str | None
    mvar: str

    @property
    def ctx(self) -> Context:
        """Name → type: the visible constants, then the locals; a later local shadows an earlier one (and a
        constant) of the same name."""
        return {**constant_types(), **{hyp.name: hyp.ty for hyp in self.hyps}}

    def lookup(self, name: str) -> Hyp | None:
        for hyp in reversed(self.hyps):
            if hyp.name == name:
                return hyp
        return None


def child_tag(parent: str | None, tag: str | None) -> str | None:
    """Lean's case tags: a new tag `h` under `inl` is `inl.h`."""
    if tag is None:
        return parent
    return f"{parent}.{tag}" if parent else tag


def pp_hyps(hyps: tuple[Hyp, ...]) -> list[str]:
    lines: list[tuple[list[str], str]] = []
    for hyp in hyps:
        ty = pp(hyp.ty)
        if lines and lines[-1][1] == ty:
            lines[-1][0].append(hyp.name)
        else:
            lines.append(([hyp.name], ty))
    return [f"{' '.join(names)} : {ty}" for names, ty in lines]


def pp_goal(goal: Goal) -> str:
    lines = [f"case {goal.case}"] if goal.case else []
    lines.extend(pp_hyps(goal.hyps))
    lines.append(f"⊢ {pp(goal.target)}")
    return "\n".join(lines)


def pp_goals(goals: tuple[Goal, ...] | list[Goal]) -> str:
    return "\n\n".join(pp_goal(g) for g in goals)


def inaccessible_name(base: str, taken: set[str]) -> str:
    """`h✝`, then `h✝¹`, `h✝²`, … as Lean numbers shadowed names."""
    base = base.split("✝", maxsplit=1)[0] or "a"
    candidate = f"{base}✝"
    index = 0
    sups = "⁰¹²³⁴⁵⁶⁷⁸⁹"
    while candidate in taken:
        index += 1
        candidate = f"{base}✝" + "".join(sups[int(d)] for d in str(index))
    return candidate


_SUPERSCRIPTS = "⁰¹²³⁴⁵⁶⁷⁸⁹"


def number_inaccessible(goal: Goal) -> Goal:
    """Lean's display of shadowed names: among inaccessible locals of one base name the latest is `h✝`, the one
    before `h✝¹`, then `h✝²`, … (renamed consistently inside the other locals' types and the target)."""
    by_base: dict[str, list[int]] = {}
    for index, hyp in enumerate(goal.hyps):
        if hyp.inaccessible:
            by_base.setdefault(hyp.name.split("✝")[0], []).append(index)
    renames: dict[str, str] = {}
    for base, indices in by_base.items():
        for rank, index in enumerate(reversed(indices)):
            wanted = f"{base}✝" + ("".join(_SUPERSCRIPTS[int(d)] for d in str(rank)) if rank else "")
            if goal.hyps[index].name != wanted:
                renames[goal.hyps[index].name] = wanted
    if not renames:
        return goal
    # two steps through unique temporaries, so that swapping `a✝` and `a✝¹` cannot collide
    temps = {old: f"{old}#tmp" for old in renames}
    hyps = goal.hyps
    target = goal.target
    for mapping in (temps, {temps[old]: new for old, new in renames.items()}):
        hyps = tuple(replace(h, name=mapping.get(h.name, h.name), ty=subst_many(h.ty, {k: Var(v) for k, v in
                                                                                      mapping.items()}))
                     for h in hyps)
        target = subst_many(target, {k: Var(v) for k, v in mapping.items()})
    return Goal(hyps, target, goal.case, goal.mvar)


def make_room(goal: Goal, name: str) -> Goal:
    """`goal` with its local `name` (if any) renamed to an inaccessible `name✝` everywhere, so that a new local
    can take the name (what Lean shows when a name is shadowed)."""
    old = goal.lookup(name)
    if old is None:
        return goal
    hidden = inaccessible_name(name, {h.name for h in goal.hyps} | free_vars(goal.target))
    renamed = Var(hidden)
    hyps = tuple(replace(h, name=hidden) if h.uniq == old.uniq else replace(h, ty=subst(h.ty, name, renamed))
                 for h in goal.hyps)
    return Goal(hyps, subst(goal.target, name, renamed), goal.case, goal.mvar)


def make_room_for(goal: Goal, name: str, *exprs: Expr) -> tuple[Goal, list[Expr]]:
    """`make_room`, also renaming in `exprs`, which were written in `goal`'s context (a new local's type, a
    body to instantiate): so a new `name` never captures what meant the old one."""
    old = goal.lookup(name)
    if old is None:
        return goal, list(exprs)
    room = make_room(goal, name)
    hidden = next(h.name for h in room.hyps if h.uniq == old.uniq)
    return room, [subst(e, name, Var(hidden)) for e in exprs]


def take_hyp(goal: Goal, uniq: str) -> tuple[Goal, Hyp]:
    """`goal` without the local of id `uniq`, and that local."""
    hyp = next(h for h in goal.hyps if h.uniq == uniq)
    return Goal(tuple(h for h in goal.hyps if h.uniq != uniq), goal.target, goal.case, goal.mvar), hyp


def add_local(goal: Goal, name: str, ty: Expr, uniq: str, target: Expr | None = None) -> Goal:
    """`goal` (already `make_room`ed for `name`) with a new last local `name : ty` and optionally a new target."""
    new_target = goal.target if target is None else target
    return Goal((*goal.hyps, Hyp(name, ty, uniq)), new_target, goal.case, goal.mvar)

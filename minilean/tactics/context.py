"""The local context as the tactics handle it: inaccessible names (`h✝`), renaming them (`case tag x h`), taking
out a local, a term's proof as a local, and a connective seen through definitions.

    name = _hidden(goal, "h")                           # `h✝`, or `h✝¹` when taken
"""

from __future__ import annotations

import re
from dataclasses import replace

from minilean.elab import subst, unfold
from minilean.goals import Goal, Hyp, TacticError, add_local
from minilean.parser import parse
from minilean.syntax import Binder, Expr, Op, Var
from minilean.tactics.base import TacticEngine


def _rename_inaccessible(goal: Goal, names: list[str]) -> Goal:
    """`case tag x h => …`: the last inaccessible locals take the given names (in order)."""
    hyps = list(goal.hyps)
    target = goal.target
    positions = [i for i, h in enumerate(hyps) if h.inaccessible][-len(names):]
    for index, name in zip(positions, names, strict=False):
        old = hyps[index].name
        hyps = [replace(h, ty=subst(h.ty, old, Var(name))) for h in hyps]
        hyps[index] = replace(hyps[index], name=name)
        target = subst(target, old, Var(name))
    return Goal(tuple(hyps), target, goal.case, goal.mvar)


def _names(rest: str) -> list[str]:
    return rest.split()


def _hidden(goal: Goal, base: str) -> str:
    from minilean.goals import inaccessible_name

    return inaccessible_name(base, {h.name for h in goal.hyps})


def _fresh_mvar(engine: TacticEngine, goal: Goal) -> Goal:
    return Goal(goal.hyps, goal.target, goal.case, engine.uniq())


def _take_hyp(goal: Goal, name: str) -> tuple[Goal, Hyp]:
    hyp = goal.lookup(name)
    if hyp is None:
        raise TacticError(f"unknown identifier '{name}'")
    return Goal(tuple(h for h in goal.hyps if h.uniq != hyp.uniq), goal.target, goal.case, goal.mvar), hyp


def whnf_connective(ty: Expr, goal: Goal, ops: tuple[str, ...]) -> Expr | None:
    current = ty
    for _ in range(16):
        if isinstance(current, Op) and current.op in ops:
            return current
        if isinstance(current, Binder) and current.kind in ops:
            return current
        step = unfold(current, goal.ctx)
        if step is None:
            return None
        current = step
    return None


def _hyp_of_term(engine: TacticEngine, goal: Goal, text: str) -> tuple[Goal, str]:
    """A local holding the term `text`'s proof: the local itself, or a new inaccessible one."""
    text = text.strip()
    if re.fullmatch(r"[^\s().⟨⟩]+", text) and goal.lookup(text) is not None:
        return goal, text
    prop = engine.infer_term(goal, parse(text))
    name = _hidden(goal, "h")
    return add_local(goal, name, prop, engine.uniq()), name

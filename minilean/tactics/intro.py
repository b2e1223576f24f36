"""Tactics that introduce binders into the local context: `intro`, `intros`, `rintro`, `by_contra`, `ext`.

    tac_intro(engine, goal, "x h₀")
"""

from __future__ import annotations

from minilean.elab import element_type, subst, type_of, unfold
from minilean.goals import Goal, TacticError, add_local, child_tag, make_room, pp_goal
from minilean.syntax import FALSE, Binder, Op, Var, pp
from minilean.tactics.base import TacticEngine
from minilean.tactics.cases import _split_patterns, rcases
from minilean.tactics.context import _fresh_mvar, _hidden, _names


def _intro_one(engine: TacticEngine, goal: Goal, name: str | None) -> Goal:
    target = goal.target
    for _ in range(8):
        if isinstance(target, Binder) and target.kind == "∀":
            assert target.ty is not None
            chosen = name if name not in (None, "_") else _hidden(goal, target.name)
            # an older local named `chosen` becomes `chosen✝` (also inside the binder's type and body)
            room = make_room(goal, chosen)
            binder = room.target
            assert isinstance(binder, Binder)
            new_target = subst(binder.body, binder.name, Var(chosen))
            return add_local(room, chosen, target.ty, engine.uniq(), new_target)
        if isinstance(target, Op) and target.op == "→":
            chosen = name if name not in (None, "_") else _hidden(goal, "a")
            room = make_room(goal, chosen)
            premise, conclusion = room.target.args if isinstance(room.target, Op) else target.args
            return add_local(room, chosen, premise, engine.uniq(), conclusion)
        step = unfold(target, goal.ctx)
        if step is None:
            break
        target = step
        goal = Goal(goal.hyps, step, goal.case, goal.mvar)
    raise TacticError(f"tactic 'introN' failed, insufficient number of binders\n{pp_goal(goal)}")


def tac_intro(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    if any(c in rest for c in "⟨(|"):
        return tac_rintro(engine, goal, rest)
    names: list[str | None] = list(_names(rest)) or [None]
    for name in names:
        goal = _intro_one(engine, goal, name)
    return (_fresh_mvar(engine, goal),)


def tac_intros(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    names = _names(rest)
    if names:
        for name in names:
            goal = _intro_one(engine, goal, name)
        return (_fresh_mvar(engine, goal),)
    while (isinstance(goal.target, Binder) and goal.target.kind == "∀") or (
            isinstance(goal.target, Op) and goal.target.op == "→"):
        goal = _intro_one(engine, goal, None)
    return (_fresh_mvar(engine, goal),)


def tac_rintro(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    patterns = _split_patterns(rest)
    if not patterns:
        raise TacticError("rintro: expected a pattern")
    goals = [goal]
    for pattern in patterns:
        new_goals: list[Goal] = []
        for g in goals:
            if pattern[0] == "name":
                new_goals.append(_intro_one(engine, g, str(pattern[1])))
                continue
            if pattern[0] == "hole":
                new_goals.append(_intro_one(engine, g, None))
                continue
            introduced = _intro_one(engine, g, _hidden(g, "h"))
            new_goals.extend(rcases(engine, introduced, introduced.hyps[-1].name, pattern))
        goals = new_goals
    return tuple(_fresh_mvar(engine, g) for g in goals)


def tac_by_contra(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    name = rest.split(maxsplit=1)[0] if rest.split() else _hidden(goal, "h")
    room = make_room(goal, name)
    return (add_local(Goal(room.hyps, FALSE, goal.case, engine.uniq()), name, Op("¬", (room.target,)),
                      engine.uniq()),)


def tac_ext(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    target = goal.target
    if not (isinstance(target, Op) and target.op == "="):
        raise TacticError(f"ext: no applicable extensionality theorem found for\n  {pp(target)}")
    ty = type_of(target.args[0], goal.ctx) or type_of(target.args[1], goal.ctx)
    elem = element_type(ty) if ty is not None else None
    if elem is None:
        raise TacticError(f"ext: no applicable extensionality theorem found for\n  {pp(ty) if ty else '?'}")
    names = rest.split()
    name = names[0] if names else _hidden(goal, "x")
    room = make_room(goal, name)
    a, b = room.target.args if isinstance(room.target, Op) else target.args
    x = Var(name)
    new = add_local(room, name, elem, engine.uniq(), Op("↔", (Op("∈", (x, a)), Op("∈", (x, b)))))
    return (Goal(new.hyps, new.target, child_tag(goal.case, "h"), engine.uniq()),)

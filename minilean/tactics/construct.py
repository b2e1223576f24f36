"""Tactics that pick a constructor of the target: `constructor`, `left`, `right`, `exfalso`, `use`, `exists`.

    tac_use(engine, goal, "2, 3")
"""

from __future__ import annotations

from minilean.defeq import defeq
from minilean.elab import subst
from minilean.elaborator import Elaborator
from minilean.goals import Goal, TacticError, pp_goal
from minilean.parser import parse
from minilean.syntax import FALSE, TRUE, Binder, Op
from minilean.tactics.base import TacticEngine
from minilean.tactics.closing import _discharge, tac_trivial
from minilean.tactics.context import whnf_connective
from minilean.tactics.script import split_top


def tac_constructor(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    """Lean's `constructor`: the first constructor of the target's inductive type that applies (`And.intro`,
    `Iff.intro`, `Or.inl`, `Eq.refl`, `True.intro`); a target that is no inductive type, or none that applies,
    fails with Lean's two messages."""
    head = whnf_connective(goal.target, goal, ("∧", "↔", "∨", "∃", "="))
    if goal.target == TRUE:
        return ()
    if isinstance(head, Op) and head.op == "∧":
        return (engine.new_goal(goal, head.args[0], "left"), engine.new_goal(goal, head.args[1], "right"))
    if isinstance(head, Op) and head.op == "↔":
        a, b = head.args
        return (engine.new_goal(goal, Op("→", (a, b)), "mp"), engine.new_goal(goal, Op("→", (b, a)), "mpr"))
    if isinstance(head, Op) and head.op == "∨":
        return (engine.new_goal(goal, head.args[0], "h"),)  # Or.inl applies first
    if isinstance(head, Op) and head.op == "=":
        if defeq(head.args[0], head.args[1], goal.ctx):
            return ()
        raise TacticError(f"tactic 'constructor' failed, no applicable constructor found\n{pp_goal(goal)}")
    if isinstance(head, Binder):
        # Exists.intro leaves the witness as a metavariable goal, which minilean does not represent
        raise TacticError("minilean: `constructor` on `∃` would leave the witness as a metavariable goal, which "
                          "minilean does not represent; use `use` or `refine ⟨w, ?_⟩`")
    if goal.target == FALSE:
        raise TacticError(f"tactic 'constructor' failed, no applicable constructor found\n{pp_goal(goal)}")
    raise TacticError(f"tactic 'constructor' failed, target is not an inductive datatype\n{pp_goal(goal)}")


def _left_right(engine: TacticEngine, goal: Goal, side: int) -> tuple[Goal, ...]:
    head = whnf_connective(goal.target, goal, ("∨",))
    if not isinstance(head, Op):
        name = "left" if side == 0 else "right"
        raise TacticError(f"{name} tactic works for inductive types with exactly 2 constructors\n{pp_goal(goal)}")
    return (engine.new_goal(goal, head.args[side], "h"),)


def tac_left(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    return _left_right(engine, goal, 0)


def tac_right(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    return _left_right(engine, goal, 1)


def tac_exfalso(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    return (engine.new_goal(goal, FALSE),)


def tac_use(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    witnesses = split_top(rest, ",")
    target = goal.target
    for witness in witnesses:
        head = whnf_connective(target, goal, ("∃",))
        if not isinstance(head, Binder):
            raise TacticError(f"use: the goal is not an existential\n{pp_goal(goal)}")
        assert head.ty is not None
        value = Elaborator(goal.ctx).value(parse(witness), head.ty)
        target = subst(head.body, head.name, value)
    new = engine.new_goal(goal, target, "h")
    # `use` discharges the rest with `rfl`/`trivial`/`assumption` when that works
    if _discharge(new):
        return ()
    return (new,)


def tac_exists(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    goals = tac_use(engine, goal, rest)
    result: list[Goal] = []
    for g in goals:
        try:
            result.extend(tac_trivial(engine, g, ""))
        except TacticError:
            result.append(g)
    return tuple(result)

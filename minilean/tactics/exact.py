"""Tactics that take a term the user writes: `exact`, `refine`, `apply`, `have`, `show`, `specialize` and `calc`
(each step checked, the relations composed by Lean's `Trans` instances).

    tac_have(engine, goal, "h : 0 < 2 := by norm_num")
"""

from __future__ import annotations

import re

from minilean.defeq import defeq
from minilean.elab import ElabError, type_of
from minilean.elaborator import Elaborator
from minilean.goals import Goal, Hyp, TacticError, add_local, make_room_for, pp_goal
from minilean.parser import parse
from minilean.syntax import Expr, Hole, Op, Var, pp
from minilean.tactics.base import TacticEngine, _ByAwareChecker
from minilean.tactics.context import _fresh_mvar
from minilean.tactics.script import split_top
from minilean.terms import type_mismatch


def tac_exact(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    if not rest:
        raise TacticError("unexpected end of input; expected term")
    engine.check_term(goal, parse(rest), goal.target)
    return ()


def tac_refine(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    new_goals = engine.check_term(goal, parse(rest), goal.target, holes=True)
    return tuple(Goal(g.hyps, g.target, goal.case, g.mvar) for g in new_goals)


def tac_apply(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    term = parse(rest)
    checker = _ByAwareChecker(goal, engine, False)
    try:
        premises = checker.apply(term, goal.target)
    except ElabError as exc:
        if exc.message.startswith("tactic 'apply' failed"):
            raise TacticError(f"{exc.message}\n{pp_goal(goal)}") from None
        raise
    return tuple(engine.new_goal(goal, prop, label or None) for label, prop in premises)


def tac_have(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    match_ = re.match(r"(?:([^\s:]+)\s*)?(?::(?!=)\s*(.*?))?\s*(?::=\s*(.*))?$", rest, re.DOTALL)
    if match_ is None or (match_.group(2) is None and match_.group(3) is None):
        raise TacticError("unexpected syntax in `have`")
    name = match_.group(1) or "this"
    ty_text, term_text = match_.group(2), match_.group(3)
    if ty_text is not None:
        prop = Elaborator(goal.ctx).prop(parse(ty_text))
        if term_text is None:
            side = engine.new_goal(goal, prop)
            room, (shown,) = make_room_for(goal, name, prop)
            main = add_local(room, name, shown, engine.uniq())
            return (side, _fresh_mvar(engine, main))
        extra = engine.check_term(goal, parse(term_text), prop, holes=True)
    else:
        assert term_text is not None
        prop = engine.infer_term(goal, parse(term_text))
        extra = []
    room, (shown,) = make_room_for(goal, name, prop)
    main = add_local(room, name, shown, engine.uniq())
    return (*(Goal(g.hyps, g.target, goal.case, g.mvar) for g in extra), _fresh_mvar(engine, main))


def tac_show(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    prop = Elaborator(goal.ctx).prop(parse(rest))
    if not defeq(prop, goal.target, goal.ctx):
        raise TacticError(type_mismatch(Var("this"), prop, goal.target).replace("type mismatch\n  this",
                                                                               "type mismatch"))
    return (Goal(goal.hyps, prop, goal.case, engine.uniq()),)


def tac_specialize(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    term = parse(rest)
    head = term
    from minilean.syntax import App

    while isinstance(head, App):
        head = head.fn
    if not isinstance(head, Var) or goal.lookup(head.name) is None:
        raise TacticError("'specialize' requires a term of the form `h x_1 .. x_n` where `h` appears in the local "
                          "context")
    prop = engine.infer_term(goal, term)
    hyps = tuple(Hyp(h.name, prop, engine.uniq()) if h.name == head.name else h for h in goal.hyps)
    moved = tuple(h for h in hyps if h.name != head.name) + tuple(h for h in hyps if h.name == head.name)
    return (Goal(moved, goal.target, goal.case, engine.uniq()),)


_TRANS = {("=", "="): "=", ("=", "<"): "<", ("<", "="): "<", ("=", "≤"): "≤", ("≤", "="): "≤",
          ("≤", "≤"): "≤", ("≤", "<"): "<", ("<", "≤"): "<", ("<", "<"): "<",
          ("=", ">"): ">", (">", "="): ">", ("=", "≥"): "≥", ("≥", "="): "≥", ("≥", "≥"): "≥",
          ("≥", ">"): ">", (">", "≥"): ">", (">", ">"): ">", ("=", "↔"): "↔", ("↔", "↔"): "↔"}


def tac_calc(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    """`calc a = b := proof` then `_ ≤ c := proof` lines: each step is checked, the relations compose by
    Lean's `Trans` instances, and the composite must be the goal."""
    steps = [line.strip() for line in rest.split("\n") if line.strip()]
    if not steps:
        raise TacticError("unexpected end of input; expected term")
    first_lhs: Expr | None = None
    previous: Expr | None = None
    relation = ""
    for step in steps:
        pieces = split_top(step, ":=")
        if len(pieces) < 2:
            raise TacticError(f"invalid 'calc' step, expected `term := proof`\n  {step}")
        rel_text, proof_text = pieces[0], ":=".join(pieces[1:])
        rel = parse(rel_text)
        if not (isinstance(rel, Op) and rel.op in ("=", "<", "≤", ">", "≥", "↔")):
            raise TacticError(f"invalid 'calc' step, relation expected\n  {rel_text.strip()}")
        lhs, rhs = rel.args
        if isinstance(lhs, Hole):
            if previous is None:
                raise TacticError("invalid 'calc' step, the first step cannot start with `_`")
            lhs = previous
        elif previous is not None and not defeq(Elaborator(goal.ctx).value(lhs, type_of(previous, goal.ctx)),
                                                previous, goal.ctx):
            raise TacticError(f"invalid 'calc' step, left-hand side is\n  {pp(lhs)}\nprevious right-hand side is\n"
                              f"  {pp(previous)}")
        step_prop = Elaborator(goal.ctx).prop(Op(rel.op, (lhs, rhs)))
        assert isinstance(step_prop, Op)
        if engine.check_term(goal, parse(proof_text), step_prop):
            raise TacticError("invalid 'calc' step, the proof has holes")
        if first_lhs is None:
            first_lhs, relation = step_prop.args[0], step_prop.op
        else:
            composed = _TRANS.get((relation, step_prop.op))
            if composed is None:
                raise TacticError(f"invalid 'calc' step, failed to synthesize `Trans` instance for {relation} and "
                                  f"{step_prop.op}")
            relation = composed
        previous = step_prop.args[1]
    assert first_lhs is not None and previous is not None
    result = Op(relation, (first_lhs, previous))
    if not defeq(result, goal.target, goal.ctx):
        raise TacticError(type_mismatch(Var("calc"), result, goal.target).replace("type mismatch\n  calc",
                                                                                  "invalid 'calc' step, type mismatch"))
    return ()

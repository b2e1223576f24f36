"""Tactics that rewrite the goal or a local: `unfold`, `subst`, `rw` (`rewrite`), `rwa`, `push_neg`, and the
rewrite rule a term gives (an equation, an iff, a constant's equation).

    tac_rw(engine, goal, "[h, ← add_comm] at h₁ ⊢")
"""

from __future__ import annotations

from dataclasses import replace

from minilean.constants import active
from minilean.defeq import delta
from minilean.elab import alpha_eq, is_type, subst, subst_many
from minilean.goals import Goal, Hyp, TacticError, pp_goal
from minilean.lemmas import Param, Telescope
from minilean.parser import parse
from minilean.simp import Rule, rewrite_first
from minilean.syntax import FALSE, TRUE, App, Binder, Expr, Op, Var, free_vars, pp
from minilean.tactics.base import TacticEngine, _ByAwareChecker
from minilean.tactics.closing import tac_assumption
from minilean.tactics.context import _fresh_mvar
from minilean.tactics.script import _split_at, split_top


def tac_unfold(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    """`unfold f g (at h)`: each constant replaced by its value where it occurs (applications beta-reduced), one
    name after another, as Lean's `unfold` delta-expands a non-recursive definition."""
    names_text, locations = _split_at(rest)
    names = names_text.split()
    if not names:
        raise TacticError("unexpected end of input; expected identifier")
    for name in names:
        if name not in active() or goal.lookup(name) is not None:
            raise TacticError(f"unknown constant '{name}'")
        if locations is None or "⊢" in locations:
            target = delta(goal.target, goal.ctx, names=frozenset({name}))
            if target == goal.target:
                raise TacticError(f"tactic 'unfold' failed to unfold '{name}' at\n  {pp(goal.target)}")
            goal = Goal(goal.hyps, target, goal.case, goal.mvar)
        for location in [loc for loc in (locations or []) if loc != "⊢"]:
            hyp = goal.lookup(location)
            if hyp is None:
                raise TacticError(f"unknown identifier '{location}'")
            ty = delta(hyp.ty, goal.ctx, names=frozenset({name}))
            if ty == hyp.ty:
                raise TacticError(f"tactic 'unfold' failed to unfold '{name}' at\n  {pp(hyp.ty)}")
            goal = Goal(tuple(Hyp(h.name, ty, engine.uniq()) if h.uniq == hyp.uniq else h for h in goal.hyps),
                        goal.target, goal.case, goal.mvar)
    return (_fresh_mvar(engine, goal),)


def _subst(engine: TacticEngine, goal: Goal, name: str) -> tuple[Goal, ...]:
    hyp = goal.lookup(name)
    if hyp is None:
        raise TacticError(f"unknown identifier '{name}'")
    if is_type(hyp.ty):
        # `subst x`: find an equation `x = e` or `e = x`
        for other in reversed(goal.hyps):
            if isinstance(other.ty, Op) and other.ty.op == "=" and Var(name) in other.ty.args:
                return _subst(engine, goal, other.name)
        raise TacticError(f"tactic 'subst' failed, did not find equation for eliminating '{name}'")
    ty = hyp.ty
    if not (isinstance(ty, Op) and ty.op == "="):
        raise TacticError(f"tactic 'subst' failed, invalid equality proof, it is not of the form (x = t) or (t = x)\n"
                          f"  {pp(ty)}\n{pp_goal(goal)}")
    lhs, rhs = ty.args
    # Lean eliminates the variable on the right first (`h : a = x` replaces x by a), else the left one
    for var, value in ((rhs, lhs), (lhs, rhs)):
        if isinstance(var, Var) and var.name in goal.ctx and is_type(goal.ctx[var.name]) \
                and var.name not in free_vars(value):
            rest = tuple(h for h in goal.hyps if h.uniq != hyp.uniq and h.name != var.name)
            new_hyps = tuple(replace(h, ty=subst(h.ty, var.name, value)) for h in rest)
            return (Goal(new_hyps, subst(goal.target, var.name, value), goal.case, engine.uniq()),)
    raise TacticError(f"tactic 'subst' failed, invalid equality proof, it is not of the form (x = t) or (t = x)\n"
                      f"  {pp(ty)}\n{pp_goal(goal)}")


def tac_subst(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    goals: tuple[Goal, ...] = (goal,)
    for name in rest.split():
        goals = tuple(g for goal_ in goals for g in _subst(engine, goal_, name))
    return goals


def _rule_list(text: str) -> list[tuple[bool, str]]:
    text = text.strip()
    if not text:
        return []
    if not (text.startswith("[") and text.endswith("]")):
        raise TacticError(f"unexpected token; expected '['\n  {text}")
    items = []
    for raw in split_top(text[1:-1], ","):
        item = raw.strip()
        if not item:
            continue
        reverse = item.startswith("←") or item.startswith("<-")
        items.append((reverse, item.lstrip("←<-").strip()))
    return items


def _make_rule(engine: TacticEngine, goal: Goal, text: str, reverse: bool, props: bool = False) -> Rule:
    """The rewrite rule a term gives: an equation or iff (with metavariables for a lemma's variables); with
    `props` (simp) a proof of another proposition `p` gives `p = True`; `rw` refuses it. A constant with a value
    gives its equation (`f.eq_1 : ∀ n, f n = n + 1`)."""
    equation = _constant_equation(goal, text)
    if equation is not None:
        return Rule(equation.rhs, equation.lhs, equation.tel) if reverse else equation
    term = parse(text)
    checker = _ByAwareChecker(goal, engine, False)
    tel = checker.infer(term)
    while checker.peel_value(tel):
        pass
    concl = tel.inst(tel.concl)
    if tel.unassigned(concl) or tel.params:
        lhs_rhs = _eq_sides(tel.concl, goal)
        if lhs_rhs is None:
            raise TacticError(f"invalid rewrite argument, the equation expected\n  {pp(concl)}")
        lhs, rhs = lhs_rhs
        if any(p.kind == "proof" for p in tel.params):
            raise TacticError("minilean: rewriting with a conditional lemma is outside minilean's fragment")
        return Rule(rhs, lhs, tel) if reverse else Rule(lhs, rhs, tel)
    prop = checker._elab_instance(tel, concl) if tel.klass else concl
    sides = _eq_sides(prop, goal)
    if sides is None:
        if not props:
            raise TacticError(f"invalid rewrite argument, the equation expected\n  {pp(prop)}")
        return _hyp_rule(prop)
    lhs, rhs = sides
    return Rule(rhs, lhs) if reverse else Rule(lhs, rhs)


def _constant_equation(goal: Goal, text: str) -> Rule | None:
    """The equation of the visible constant `text` that has a value (its parameters as metavariables); None for any
    other term (a local of that name shadows the constant)."""
    constant = active().get(text)
    if constant is None or constant.value is None or goal.lookup(text) is not None:
        return None
    if not constant.params:
        return Rule(Var(text), constant.value)
    metas = {name: Var(f"?{name}") for name, _ in constant.params}
    lhs = App(Var(text), tuple(metas.values()))
    rhs = subst_many(constant.value, metas)
    params = [Param(f"?{name}", "value", ty, name) for name, ty in constant.params]
    return Rule(lhs, rhs, Telescope(params, Op("=", (lhs, rhs)), {p.name for p in params}))


def _eq_sides(prop: Expr, goal: Goal) -> tuple[Expr, Expr] | None:
    if isinstance(prop, Op) and prop.op in ("=", "↔"):
        return prop.args[0], prop.args[1]
    return None


def tac_rw(engine: TacticEngine, goal: Goal, rest: str, close_with_assumption: bool = False) -> tuple[Goal, ...]:
    rules_text, locations = _split_at(rest)
    rules = _rule_list(rules_text)
    if not rules:
        raise TacticError("unexpected token; expected '['")
    for reverse, text in rules:
        rule = _make_rule(engine, goal, text, reverse)
        if locations is None or "⊢" in locations:
            new_target = rewrite_first(goal.target, rule, goal.ctx)
            if new_target is None:
                raise TacticError(
                    "tactic 'rewrite' failed, did not find instance of the pattern in the target expression\n"
                    f"  {pp(rule.tel.inst(rule.lhs) if rule.tel else rule.lhs)}\n{pp_goal(goal)}")
            goal = Goal(goal.hyps, new_target, goal.case, goal.mvar)
        for location in [loc for loc in (locations or []) if loc != "⊢"]:
            hyp = goal.lookup(location)
            if hyp is None:
                raise TacticError(f"unknown identifier '{location}'")
            new_ty = rewrite_first(hyp.ty, rule, goal.ctx)
            if new_ty is None:
                raise TacticError(
                    "tactic 'rewrite' failed, did not find instance of the pattern in the target expression\n"
                    f"  {pp(rule.tel.inst(rule.lhs) if rule.tel else rule.lhs)}\n{pp_goal(goal)}")
            goal = Goal(tuple(Hyp(h.name, new_ty, engine.uniq()) if h.uniq == hyp.uniq else h for h in goal.hyps),
                        goal.target, goal.case, goal.mvar)
    goal = _fresh_mvar(engine, goal)
    # rw closes the goal with `rfl` when it can (syntactically equal sides)
    target = goal.target
    if isinstance(target, Op) and target.op in ("=", "↔") and alpha_eq(target.args[0], target.args[1]):
        return ()
    if target == TRUE:
        return ()
    if close_with_assumption:
        return tac_assumption(engine, goal, "")
    return (goal,)


def tac_rwa(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    return tac_rw(engine, goal, rest, close_with_assumption=True)


def _hyp_rule(prop: Expr) -> Rule:
    if isinstance(prop, Op) and prop.op in ("=", "↔"):
        return Rule(prop.args[0], prop.args[1])
    if isinstance(prop, Op) and prop.op == "¬":
        return Rule(prop.args[0], FALSE)
    if isinstance(prop, Op) and prop.op == "≠":
        return Rule(Op("=", prop.args), FALSE)
    return Rule(prop, TRUE)


def _push_neg(expr: Expr, ctx: dict[str, Expr]) -> Expr:
    if isinstance(expr, Op) and expr.op == "¬":
        return _negation_pushed(expr, ctx)
    if isinstance(expr, Op) and expr.op in ("∧", "∨", "→", "↔"):
        return Op(expr.op, tuple(_push_neg(a, ctx) for a in expr.args))
    if isinstance(expr, Binder) and expr.kind in ("∀", "∃"):
        inner_ctx = {**ctx, expr.name: expr.ty} if expr.ty is not None else ctx
        return Binder(expr.kind, expr.name, expr.ty, _push_neg(expr.body, inner_ctx))
    return expr


def _negation_pushed(expr: Op, ctx: dict[str, Expr]) -> Expr:
    """`¬P` with the negation moved inside `P`'s connective, comparison or quantifier (`expr` when it cannot)."""
    inner = expr.args[0]
    if isinstance(inner, Op):
        if inner.op == "¬":
            return _push_neg(inner.args[0], ctx)
        if inner.op == "∧":
            return Op("→", (_push_neg(inner.args[0], ctx), _push_neg(Op("¬", (inner.args[1],)), ctx)))
        if inner.op == "∨":
            return Op("∧", (_push_neg(Op("¬", (inner.args[0],)), ctx), _push_neg(Op("¬", (inner.args[1],)), ctx)))
        if inner.op == "→":
            return Op("∧", (_push_neg(inner.args[0], ctx), _push_neg(Op("¬", (inner.args[1],)), ctx)))
        flip = {"<": "≤", "≤": "<", ">": "≥", "≥": ">"}
        if inner.op in flip:
            a, b = inner.args
            return Op(flip[inner.op], (b, a))
        if inner.op == "=":
            return Op("≠", inner.args)
        if inner.op == "≠":
            return Op("=", inner.args)
    if isinstance(inner, Binder) and inner.kind in ("∀", "∃"):
        kind = "∃" if inner.kind == "∀" else "∀"
        inner_ctx = {**ctx, inner.name: inner.ty} if inner.ty is not None else ctx
        return Binder(kind, inner.name, inner.ty, _push_neg(Op("¬", (inner.body,)), inner_ctx))
    return expr


def tac_push_neg(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    _, locations = _split_at(rest)
    changed = False
    if locations is None or "⊢" in locations:
        new = _push_neg(goal.target, dict(goal.ctx))
        changed = new != goal.target
        goal = Goal(goal.hyps, new, goal.case, goal.mvar)
    for location in [loc for loc in (locations or []) if loc != "⊢"]:
        hyp = goal.lookup(location)
        if hyp is None:
            raise TacticError(f"unknown identifier '{location}'")
        new_ty = _push_neg(hyp.ty, dict(goal.ctx))
        changed = changed or new_ty != hyp.ty
        goal = Goal(tuple(Hyp(h.name, new_ty, engine.uniq()) if h.uniq == hyp.uniq else h for h in goal.hyps),
                    goal.target, goal.case, goal.mvar)
    if not changed:
        raise TacticError("push_neg made no progress")
    return (_fresh_mvar(engine, goal),)

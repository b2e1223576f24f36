"""Definitional equality as far as minilean decides it: equality up to bound names, through the unfoldings of
`minilean.elab`, the visible constants' values (`delta`, Lean's default transparency) and closed ℕ/ℤ arithmetic by
evaluation (`minilean.arith`), as Lean's kernel computes with literals.

    ctx = {"x": REAL}
    defeq(elaborate_prop(parse("x > 0"), ctx), elaborate_prop(parse("0 < x"), ctx), ctx)   # True: `>` unfolds
"""

from __future__ import annotations

from minilean.arith import closed_value
from minilean.constants import active
from minilean.elab import INT, NAT, Context, alpha_eq, fresh_name, subst, subst_many, unfold
from minilean.syntax import App, Ascr, Binder, Expr, Op, SetLit, Var, free_vars


def defeq(a: Expr, b: Expr, ctx: Context, depth: int = 0) -> bool:
    """Whether `a` and `b` are definitionally equal in `ctx`: syntactically up to bound names, through `unfold`, or
    closed ℕ/ℤ terms of the same value."""
    if alpha_eq(a, b):
        return True
    if depth > 24:
        return False
    if isinstance(a, Op) and isinstance(b, Op) and a.op == b.op and len(a.args) == len(b.args) and all(
            defeq(x, y, ctx, depth + 1) for x, y in zip(a.args, b.args, strict=True)):
        return True
    if isinstance(a, Binder) and isinstance(b, Binder) and a.kind == b.kind and a.ty == b.ty:
        fresh = Var(fresh_name(a.name, free_vars(a.body) | free_vars(b.body) | set(ctx)))
        inner = {**ctx, fresh.name: a.ty} if a.ty is not None else ctx
        if defeq(subst(a.body, a.name, fresh), subst(b.body, b.name, fresh), inner, depth + 1):
            return True
    va, vb = closed_value(a, ctx), closed_value(b, ctx)
    if va is not None and vb is not None and va[1] in (NAT, INT) and va == vb:
        return True
    ua = unfold(a, ctx)
    if ua is not None and defeq(ua, b, ctx, depth + 1):
        return True
    ub = unfold(b, ctx)
    if ub is not None and defeq(a, ub, ctx, depth + 1):
        return True
    da, db = delta(a, ctx), delta(b, ctx)
    return (da != a or db != b) and defeq(da, db, ctx, depth + 1)


def delta(expr: Expr, ctx: Context, reducible_only: bool = False, names: frozenset[str] | None = None) -> Expr:
    """`expr` with every visible constant that has a value replaced by it (applied ones beta-reduced), until none
    is left: Lean's unfolding at default transparency, or at reducible transparency (`abbrev`s only) with
    `reducible_only`, or of the constants `names` only (`unfold f`). A local of the same name shadows the constant;
    a constant whose value is `sorry` stays."""
    env = active()
    shadowed = {name for name in ctx if name in env and ctx[name] != env[name].ty}
    wanted = {name for name, constant in env.items() if constant.value is not None and name not in shadowed
              and (not reducible_only or constant.reducible) and (names is None or name in names)}
    if not wanted:
        return expr
    for _ in range(64):
        unfolded = _delta_once(expr, wanted)
        if unfolded == expr:
            return expr
        expr = unfolded
    return expr


def _delta_once(expr: Expr, wanted: set[str]) -> Expr:
    env = active()
    if isinstance(expr, Var) and expr.name in wanted and not env[expr.name].params:
        value = env[expr.name].value
        assert value is not None
        return value
    if isinstance(expr, App) and isinstance(expr.fn, Var) and expr.fn.name in wanted \
            and len(expr.args) == len(env[expr.fn.name].params):
        constant = env[expr.fn.name]
        assert constant.value is not None
        args = tuple(_delta_once(arg, wanted) for arg in expr.args)
        return subst_many(constant.value, {name: arg for (name, _), arg in zip(constant.params, args, strict=True)})
    if isinstance(expr, Op):
        return Op(expr.op, tuple(_delta_once(arg, wanted) for arg in expr.args))
    if isinstance(expr, App):
        return App(_delta_once(expr.fn, wanted), tuple(_delta_once(arg, wanted) for arg in expr.args))
    if isinstance(expr, Ascr):
        return Ascr(_delta_once(expr.expr, wanted), expr.ty)
    if isinstance(expr, SetLit):
        return SetLit(tuple(_delta_once(elem, wanted) for elem in expr.elems))
    if isinstance(expr, Binder):
        if expr.name in wanted:  # the bound variable shadows the constant
            return expr
        return Binder(expr.kind, expr.name, expr.ty, _delta_once(expr.body, wanted))
    return expr


__all__ = ["defeq", "delta"]

"""Definitional equality as far as minilean decides it: equality up to bound names, through the unfoldings of
`minilean.elab`, and closed ℕ/ℤ arithmetic by evaluation (`minilean.arith`), as Lean's kernel computes with literals.

    ctx = {"x": REAL}
    defeq(elaborate_prop(parse("x > 0"), ctx), elaborate_prop(parse("0 < x"), ctx), ctx)   # True: `>` unfolds
"""

from __future__ import annotations

from minilean.arith import closed_value
from minilean.elab import INT, NAT, Context, alpha_eq, fresh_name, subst, unfold
from minilean.syntax import Binder, Expr, Op, Var, free_vars


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
    return ub is not None and defeq(a, ub, ctx, depth + 1)


__all__ = ["defeq"]

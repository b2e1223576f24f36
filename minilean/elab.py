"""Types for minilean's fragment: the carrier type of every arithmetic subterm, capture-avoiding substitution and
Lean's definitional unfoldings (`minilean.defeq` decides definitional equality with them; `minilean.elaborator`
elaborates terms with these types).

    ty = type_of(parse("x + 1"), {"x": REAL})     # ℝ
    whnf(parse("a ≥ b"), ctx)                     # `b ≤ a`

Types are expressions: `ℕ ℤ ℚ ℝ Prop`, `Set T`, `A → B`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from minilean.constants import active
from minilean.syntax import (
    FALSE,
    PROP,
    TRUE,
    Anon,
    App,
    Ascr,
    Binder,
    By,
    Expr,
    Hole,
    Num,
    Op,
    Proj,
    Sci,
    SetLit,
    Var,
    free_vars,
    is_name_literal,
    pp,
)

NAT = Var("ℕ")
INT = Var("ℤ")
RAT = Var("ℚ")
REAL = Var("ℝ")
NUMBER_TYPES = (NAT, INT, RAT, REAL)
BOOL = Var("Bool")  # `true`, `false`, what `==` gives (a condition or a proposition is `b = true`)
NAME = Var("Lean.Name")  # name literals `` `foo ``, `decl_name%`
DATA_TYPES = (BOOL, NAME)  # compared by `==` and `=`, decided by evaluation; no arithmetic, no order
TRUE_BOOL = Var("true")
FIELDS = (RAT, REAL)
_ALIASES = {"Nat": NAT, "Int": INT, "Rat": RAT, "Real": REAL}
_ORDER = {NAT: 0, INT: 1, RAT: 2, REAL: 3}

Context = Mapping[str, Expr]


class ElabError(Exception):
    """An elaboration error with Lean's wording."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def set_of(ty: Expr) -> Expr:
    return App(Var("Set"), (ty,))


def element_type(ty: Expr) -> Expr | None:
    if isinstance(ty, App) and ty.fn == Var("Set") and len(ty.args) == 1:
        return ty.args[0]
    return None


def is_type(ty: Expr) -> bool:
    """`ty` is a type of the fragment (so a local of that type is a variable, not a hypothesis)."""
    if ty in NUMBER_TYPES or ty in DATA_TYPES or ty == PROP:
        return True
    if element_type(ty) is not None:
        return True
    return isinstance(ty, Op) and ty.op == "→" and is_type(ty.args[0]) and is_type(ty.args[1])


def normalize_type(ty: Expr) -> Expr:
    """`Nat` → `ℕ` and so on; refuses what is no type of the fragment."""
    if isinstance(ty, Var):
        ty = _ALIASES.get(ty.name, ty)
        if ty in NUMBER_TYPES or ty in DATA_TYPES or ty == PROP:
            return ty
        raise ElabError(f"unknown identifier '{ty.name}'" if ty.name not in ("Type",) else "type universes are "
                        "outside minilean's fragment")
    if isinstance(ty, App) and isinstance(ty.fn, Var) and ty.fn.name == "Set" and len(ty.args) == 1:
        return set_of(normalize_type(ty.args[0]))
    if isinstance(ty, Op) and ty.op == "→":
        return Op("→", (normalize_type(ty.args[0]), normalize_type(ty.args[1])))
    raise ElabError(f"type expected, got\n  ({pp(ty)})")


# ---------------------------------------------------------------------------------------------------
# Substitution.

_counter = itertools.count()


def fresh_name(base: str, avoid: frozenset[str] | set[str]) -> str:
    """`base` with a subscript-free suffix that is not in `avoid` (`x` → `x_1`)."""
    if base not in avoid:
        return base
    for index in itertools.count(1):
        candidate = f"{base}_{index}"
        if candidate not in avoid:
            return candidate
    raise AssertionError("unreachable")


def subst(expr: Expr, name: str, value: Expr) -> Expr:
    """`expr[name := value]`, renaming bound variables that would capture `value`'s free variables."""
    return subst_many(expr, {name: value})


def subst_many(expr: Expr, mapping: Mapping[str, Expr]) -> Expr:
    if not mapping:
        return expr
    if isinstance(expr, Var):
        return mapping.get(expr.name, expr)
    if isinstance(expr, (Num, Sci, Hole, By)):
        return expr
    if isinstance(expr, Op):
        return Op(expr.op, tuple(subst_many(a, mapping) for a in expr.args))
    if isinstance(expr, App):
        return App(subst_many(expr.fn, mapping), tuple(subst_many(a, mapping) for a in expr.args))
    if isinstance(expr, Anon):
        return Anon(tuple(subst_many(a, mapping) for a in expr.args))
    if isinstance(expr, SetLit):
        return SetLit(tuple(subst_many(a, mapping) for a in expr.elems))
    if isinstance(expr, Proj):
        return Proj(subst_many(expr.expr, mapping), expr.field)
    if isinstance(expr, Ascr):
        return Ascr(subst_many(expr.expr, mapping), expr.ty)
    assert isinstance(expr, Binder)
    return _subst_binder(expr, mapping)


def _subst_binder(expr: Binder, mapping: Mapping[str, Expr]) -> Expr:
    """`subst_many` under a binder: its own name shadows the mapping, and it is renamed when a value would be
    captured."""
    ty = subst_many(expr.ty, mapping) if expr.ty is not None else None
    inner = {k: v for k, v in mapping.items() if k != expr.name}
    if not inner:
        return Binder(expr.kind, expr.name, ty, expr.body)
    incoming = frozenset().union(*(free_vars(v) for v in inner.values()))
    name, body = expr.name, expr.body
    if name in incoming:
        name = fresh_name(name, incoming | free_vars(body) | set(inner))
        body = subst_many(body, {expr.name: Var(name)})
    return Binder(expr.kind, name, ty, subst_many(body, inner))


def alpha_eq(a: Expr, b: Expr) -> bool:
    """Syntactic equality up to the names of bound variables."""
    if isinstance(a, Binder) and isinstance(b, Binder):
        if a.kind != b.kind or a.ty != b.ty:
            return False
        if a.name == b.name:
            return alpha_eq(a.body, b.body)
        fresh = Var(fresh_name("α✝", free_vars(a.body) | free_vars(b.body)))
        return alpha_eq(subst(a.body, a.name, fresh), subst(b.body, b.name, fresh))
    if type(a) is not type(b):
        return False
    if isinstance(a, Op) and isinstance(b, Op):
        return a.op == b.op and len(a.args) == len(b.args) and all(
            alpha_eq(x, y) for x, y in zip(a.args, b.args, strict=True))
    if isinstance(a, App) and isinstance(b, App):
        return alpha_eq(a.fn, b.fn) and len(a.args) == len(b.args) and all(
            alpha_eq(x, y) for x, y in zip(a.args, b.args, strict=True))
    if isinstance(a, Ascr) and isinstance(b, Ascr):
        return a.ty == b.ty and alpha_eq(a.expr, b.expr)
    if isinstance(a, SetLit) and isinstance(b, SetLit):
        return len(a.elems) == len(b.elems) and all(alpha_eq(x, y) for x, y in zip(a.elems, b.elems, strict=True))
    return a == b


# ---------------------------------------------------------------------------------------------------
# Typing of value expressions.


def type_of(expr: Expr, ctx: Context) -> Expr | None:
    """The type of an elaborated value expression (None for a bare numeral, which has no type yet)."""
    if isinstance(expr, Var):
        return _variable_type(expr, ctx)
    if isinstance(expr, (Num, Sci)):
        return None
    if isinstance(expr, Ascr):
        return expr.ty
    if isinstance(expr, Op):
        return _operation_type(expr, ctx)
    if isinstance(expr, App):
        return _application_type(expr, ctx)
    if isinstance(expr, Binder):
        if expr.kind == "setOf":
            return set_of(expr.ty) if expr.ty is not None else None
        return PROP
    if isinstance(expr, SetLit):
        for elem in expr.elems:
            ty = type_of(elem, ctx)
            if ty is not None:
                return set_of(ty)
        return None
    return None


def _application_type(expr: App, ctx: Context) -> Expr | None:
    """The result type of a function applied to its arguments (None when it takes fewer)."""
    fn_ty = type_of(expr.fn, ctx)
    for _ in expr.args:
        if not (isinstance(fn_ty, Op) and fn_ty.op == "→"):
            return None
        fn_ty = fn_ty.args[1]
    return fn_ty


def _variable_type(expr: Var, ctx: Context) -> Expr | None:
    if expr.name in ("True", "False"):
        return PROP
    if expr.name in ("true", "false"):
        return BOOL
    if is_name_literal(expr):
        return NAME
    found = ctx.get(expr.name)
    if found is None and expr.name in active():
        return active()[expr.name].ty
    return found


def _operation_type(expr: Op, ctx: Context) -> Expr | None:
    """An arithmetic or set operation has the type of its first typed operand, `ite` of its first typed branch,
    `^` of its base; `==` is a `Bool`, the others are propositions."""
    if expr.op in ("+", "-", "*", "/", "%", "neg", "abs"):
        for arg in expr.args:
            ty = type_of(arg, ctx)
            if ty is not None:
                return ty
        return None
    if expr.op == "^":
        return type_of(expr.args[0], ctx)
    if expr.op in ("∩", "∪", "\\", "ite"):
        for arg in expr.args[1:] if expr.op == "ite" else expr.args:
            ty = type_of(arg, ctx)
            if ty is not None:
                return ty
        return None
    if expr.op == "==":
        return BOOL
    return PROP


# ---------------------------------------------------------------------------------------------------
# Definitional unfolding (the reducible definitions tactics see through) and definitional equality.


def unfold(prop: Expr, ctx: Context) -> Expr | None:
    """One step of Lean's unfolding of the head of `prop`, or None when it is in head normal form."""
    if isinstance(prop, Op):
        op, args = prop.op, prop.args
        if op == "≥":
            return Op("≤", (args[1], args[0]))
        if op == ">":
            return Op("<", (args[1], args[0]))
        if op == "¬":
            return Op("→", (args[0], FALSE))
        if op == "≠":
            return Op("→", (Op("=", args), FALSE))
        if op == "∉":
            return Op("¬", (Op("∈", args),))
        if op in ("⊆", "∣"):
            return _unfold_quantified(prop, ctx)
        if op == "∈":
            return _unfold_membership(args[0], args[1])
    return None


def _unfold_quantified(prop: Op, ctx: Context) -> Expr:
    """`s ⊆ t` as `∀ a, a ∈ s → a ∈ t`; `a ∣ b` as `∃ c, b = a * c`."""
    args = prop.args
    if prop.op == "⊆":
        elem = element_type(type_of(args[0], ctx) or type_of(args[1], ctx) or set_of(NAT)) or NAT
        avoid = free_vars(prop) | set(ctx)
        name = fresh_name("a", avoid)
        x = Var(name)
        return Binder("∀", name, elem, Op("→", (Op("∈", (x, args[0])), Op("∈", (x, args[1])))))
    ty = type_of(args[0], ctx) or type_of(args[1], ctx) or NAT
    name = fresh_name("c", free_vars(prop) | set(ctx))
    return Binder("∃", name, ty, Op("=", (args[1], Op("*", (args[0], Var(name))))))


def _unfold_membership(elem: Expr, coll: Expr) -> Expr | None:
    """`x ∈ s` unfolded for an intersection, a union, a difference, a set-builder and a set literal."""
    if isinstance(coll, Op) and coll.op == "∩":
        return Op("∧", (Op("∈", (elem, coll.args[0])), Op("∈", (elem, coll.args[1]))))
    if isinstance(coll, Op) and coll.op == "∪":
        return Op("∨", (Op("∈", (elem, coll.args[0])), Op("∈", (elem, coll.args[1]))))
    if isinstance(coll, Op) and coll.op == "\\":
        return Op("∧", (Op("∈", (elem, coll.args[0])), Op("∉", (elem, coll.args[1]))))
    if isinstance(coll, Binder) and coll.kind == "setOf":
        return subst(coll.body, coll.name, elem)
    if isinstance(coll, SetLit):
        if not coll.elems:
            return FALSE
        head = Op("=", (elem, coll.elems[0]))
        if len(coll.elems) == 1:
            return head
        return Op("∨", (head, Op("∈", (elem, SetLit(coll.elems[1:])))))
    return None


def whnf(prop: Expr, ctx: Context) -> Expr:
    """Unfold the head until it does not unfold."""
    for _ in range(32):
        step = unfold(prop, ctx)
        if step is None:
            return prop
        prop = step
    return prop


__all__ = ["FALSE", "FIELDS", "INT", "NAT", "NUMBER_TYPES", "PROP", "RAT", "REAL", "TRUE", "Context", "ElabError",
           "alpha_eq", "element_type", "fresh_name",
           "is_type", "normalize_type", "set_of", "subst", "subst_many", "type_of", "unfold", "whnf"]

"""Types and elaboration for minilean's fragment: which expressions are well-typed propositions, the carrier
type of every arithmetic subterm, capture-avoiding substitution and Lean's definitional unfoldings
(`minilean.defeq` decides definitional equality with them).

    ctx = {"x": REAL}
    prop = elaborate_prop(parse("2 * x + 3 = 11 → x = 4"), ctx)   # its numerals carry `(n : ℝ)` ascriptions

Types are expressions: `ℕ ℤ ℚ ℝ Prop`, `Set T`, `A → B`. Elaboration writes every numeral as `Ascr(Num, T)`
with the type Lean's unifier would give it (the other operand's type, else the default instance `ℕ`), and
gives every binder its type, so meaning never depends on where a subterm later moves (`subst` of `x := 3`
keeps `(3 : ℝ)`). The printer drops those ascriptions, as Lean's does with `pp.numericTypes` off. A scientific
literal (`2.5`) is typed the same way but only in ℚ/ℝ (Mathlib's `OfScientific`): on ℕ/ℤ it is Lean's `failed to
synthesize OfScientific ℕ`, and with nothing to fix its type (Lean's default: `Float`) it is refused.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping

from minilean.constants import active, constant_types
from minilean.syntax import (
    DECL_NAME,
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


_DIAGNOSTICS = "Additional diagnostic information may be available using the `set_option diagnostics true` command."


def has_scientific(expr: Expr) -> bool:
    """Whether a scientific literal (`2.5`) occurs in `expr`."""
    if isinstance(expr, Sci):
        return True
    if isinstance(expr, (Op, Anon)):
        return any(has_scientific(a) for a in expr.args)
    if isinstance(expr, App):
        return has_scientific(expr.fn) or any(has_scientific(a) for a in expr.args)
    if isinstance(expr, SetLit):
        return any(has_scientific(e) for e in expr.elems)
    if isinstance(expr, (Ascr, Proj)):
        return has_scientific(expr.expr)
    if isinstance(expr, Binder):
        return has_scientific(expr.body)
    return False


def _default_type(*exprs: Expr) -> Expr:
    """The type numerals get when nothing else fixes it: Lean's default instances, `ℕ` for a numeral (`OfNat ℕ`) —
    but `Float` when a scientific literal is among them (`@[default_instance mid+1] OfScientific Float`, above
    ℕ's), which is outside the fragment."""
    for expr in exprs:
        if has_scientific(expr):
            raise ElabError(f"minilean: nothing fixes the type of {pp(expr)}, so Lean elaborates its scientific "
                            "literal as a `Float` (the default `OfScientific` instance); `Float` is outside "
                            "minilean's fragment (write the type, as in `(2.5 : ℝ)`)")
    return NAT


def _join(types: list[Expr | None]) -> Expr | None:
    known = [t for t in types if t is not None]
    if not known:
        return None
    first = known[0]
    for other in known[1:]:
        if other != first:
            raise ElabError(f"type mismatch: {pp(first)} and {pp(other)} (minilean has no coercions)")
    return first


class Elaborator:
    """Elaborates expressions in a local context and the visible constants (`minilean.constants.active`);
    `decl_name` is the declaration being elaborated (what `decl_name%` names), None outside one."""

    def __init__(self, ctx: Context, decl_name: str | None = None) -> None:
        self.ctx = {**constant_types(), **ctx}  # the visible constants, then the locals (which shadow them)
        self.decl_name = decl_name

    # -- value terms ----------------------------------------------------------------------------

    def value(self, expr: Expr, expected: Expr | None) -> Expr:
        """Elaborate a value of type `expected` (None: infer; numerals default to ℕ at the top)."""
        ty = self._infer(expr)
        target = expected if expected is not None else ty if ty is not None else _default_type(expr)
        if ty is not None and expected is not None and ty != expected:
            raise ElabError(
                f"type mismatch\n  {pp(expr)}\nhas type\n  {pp(ty)} : Type\nbut is expected to have type\n"
                f"  {pp(expected)} : Type")
        return self._annotate(expr, target)

    def infer_type(self, expr: Expr) -> Expr | None:
        """The type of a value before numerals are fixed (None: only numerals decide it)."""
        return self._infer(expr)

    def _infer(self, expr: Expr) -> Expr | None:
        """The type `expr` has before numerals are fixed (None: only numerals decide it)."""
        if isinstance(expr, Var):
            return self._infer_variable(expr)
        if isinstance(expr, (Num, Sci)):
            return None
        if isinstance(expr, Ascr):
            return self._infer_ascription(expr)
        if isinstance(expr, Op):
            return self._infer_operation(expr)
        if isinstance(expr, App):
            return self._infer_application(expr)
        if isinstance(expr, Binder):
            if expr.kind == "setOf":
                if expr.ty is not None:
                    return set_of(normalize_type(expr.ty))
                return None
            if expr.kind == "fun":
                raise ElabError("functions are outside minilean's fragment of values")
            return PROP
        if isinstance(expr, SetLit):
            elem = _join([self._infer(e) for e in expr.elems])
            return set_of(elem) if elem is not None else None
        raise ElabError(f"unexpected term\n  {pp(expr)}")

    def _infer_application(self, expr: App) -> Expr | None:
        fn_ty = self._infer(expr.fn)
        for _ in expr.args:
            if not (isinstance(fn_ty, Op) and fn_ty.op == "→"):
                raise ElabError(f"function expected at\n  {pp(expr.fn)}\nterm has type\n  "
                                f"{pp(fn_ty) if fn_ty is not None else '?'}")
            fn_ty = fn_ty.args[1]
        return fn_ty

    def _infer_variable(self, expr: Var) -> Expr | None:
        if expr.name in self.ctx:
            return self.ctx[expr.name]
        if expr.name in ("True", "False"):
            return PROP
        if expr.name in ("true", "false"):
            return BOOL
        if is_name_literal(expr) or (expr == DECL_NAME and self._decl_name() is not None):
            return NAME
        raise ElabError(f"unknown identifier '{expr.name}'")

    def _infer_ascription(self, expr: Ascr) -> Expr | None:
        """`(e : T)` has type T when `e` has it or only numerals decide it (minilean inserts no coercion)."""
        ascribed = normalize_type(expr.ty)
        inner = self._infer(expr.expr)
        if inner in NUMBER_TYPES and ascribed in NUMBER_TYPES and \
                NUMBER_TYPES.index(inner) < NUMBER_TYPES.index(ascribed):
            raise ElabError(f"minilean: the cast of {pp(expr.expr)} from {pp(inner)} to {pp(ascribed)} (a "
                            "coercion, which Lean inserts) is outside minilean's fragment")
        if inner is not None and inner != ascribed:
            raise ElabError(
                f"type mismatch\n  {pp(expr.expr)}\nhas type\n  {pp(inner)} : Type\nbut is expected to have "
                f"type\n  {pp(ascribed)} : Type")
        return ascribed

    def _infer_operation(self, expr: Op) -> Expr | None:
        if expr.op in ("+", "-", "*", "/", "%", "neg", "abs"):
            joined = _join([self._infer(a) for a in expr.args])
            if joined is not None and joined not in NUMBER_TYPES:
                raise ElabError(f"failed to synthesize\n  {_class_of(expr.op)} {pp(joined)}")
            return joined
        if expr.op == "^":
            return self._infer(expr.args[0])
        if expr.op in ("∩", "∪", "\\"):
            joined = _join([self._infer(a) for a in expr.args])
            if joined is not None and element_type(joined) is None:
                raise ElabError(f"failed to synthesize\n  {_class_of(expr.op)} {pp(joined)}")
            return joined
        if expr.op == "==":
            self._compared(expr)
            return BOOL
        if expr.op == "ite":
            return _join([self._infer(a) for a in expr.args[1:]])
        return PROP

    def _annotate(self, expr: Expr, ty: Expr) -> Expr:
        """`expr` with every numeral ascribed and every binder typed, given its type `ty`."""
        if isinstance(expr, (Num, Sci)):
            return _literal(expr, ty)
        if isinstance(expr, Var):
            decl_name = self._decl_name() if expr == DECL_NAME else None
            return Var(f"`{decl_name}") if decl_name is not None else expr
        if isinstance(expr, Ascr):
            inner_ty = normalize_type(expr.ty)
            return self._annotate(expr.expr, inner_ty)
        if isinstance(expr, Op):
            return self._annotate_operation(expr, ty)
        if isinstance(expr, App):
            fn_ty = self._infer(expr.fn)
            args = []
            for arg in expr.args:
                assert isinstance(fn_ty, Op)
                args.append(self.value(arg, fn_ty.args[0]))
                fn_ty = fn_ty.args[1]
            return App(expr.fn, tuple(args))
        if isinstance(expr, SetLit):
            elem = element_type(ty)
            if elem is None:
                raise ElabError(f"failed to synthesize\n  Insert ?m {pp(ty)}")
            return SetLit(tuple(self.value(e, elem) for e in expr.elems))
        if isinstance(expr, Binder):
            if expr.kind == "setOf":
                elem = element_type(ty)
                if elem is None:
                    raise ElabError(f"type mismatch: a set-builder is a set, not {pp(ty)}")
                return Binder("setOf", expr.name, elem, self._under(expr.name, elem, expr.body, self.prop))
            return self.prop(expr)
        raise ElabError(f"unexpected term\n  {pp(expr)}")

    def _annotate_operation(self, expr: Op, ty: Expr) -> Expr:
        if expr.op in ("+", "-", "*", "/", "%", "neg", "abs"):
            if expr.op == "%" and ty in FIELDS:
                raise ElabError(f"failed to synthesize\n  HMod {pp(ty)} {pp(ty)} ?m")
            return Op(expr.op, tuple(self._annotate(a, ty) for a in expr.args))
        if expr.op == "^":
            base, exponent = expr.args
            if has_scientific(exponent):
                raise ElabError(f"minilean: the exponent {pp(exponent)} is a scientific literal (a real power, "
                                "`Real.rpow`), which is outside minilean's fragment")
            exp_ty = self._infer(exponent) or NAT
            if exp_ty != NAT:
                raise ElabError("real powers are outside minilean's fragment (exponents are natural numbers)")
            return Op("^", (self._annotate(base, ty), self._annotate(exponent, NAT)))
        if expr.op in ("∩", "∪", "\\"):
            return Op(expr.op, tuple(self._annotate(a, ty) for a in expr.args))
        if expr.op == "==":
            if ty != BOOL:
                raise ElabError(f"type mismatch\n  {pp(expr)}\nhas type\n  Bool : Type\nbut is expected to have "
                                f"type\n  {pp(ty)} : Type")
            compared = self._compared(expr)
            return Op("==", tuple(self._annotate(a, compared) for a in expr.args))
        if expr.op == "ite":
            cond, then, other = expr.args
            return Op("ite", (self._condition(cond), self._annotate(then, ty), self._annotate(other, ty)))
        return self.prop(expr)

    def _decl_name(self) -> str | None:
        """What `decl_name%` names: the declaration being elaborated; Lean's error outside one."""
        if self.decl_name is None:
            raise ElabError("invalid `decl_name%` macro, the declaration name is not available")
        return self.decl_name

    def _compared(self, expr: Op) -> Expr:
        """The type both sides of `a == b` have (`BEq`: the number types, `Bool`, `Lean.Name`)."""
        ty = _join([self._infer(a) for a in expr.args]) or _default_type(*expr.args)
        if ty not in NUMBER_TYPES and ty not in DATA_TYPES:
            raise ElabError(f"failed to synthesize\n  {pp(App(Var('BEq'), (ty,)))}\n{_DIAGNOSTICS}")
        return ty

    def _condition(self, cond: Expr) -> Expr:
        """An `if`'s condition: a proposition, or a `Bool` `b` read as `b = true` (Lean's coercion)."""
        if self._infer(cond) == BOOL:
            return Op("=", (self._annotate(cond, BOOL), TRUE_BOOL))
        return self.prop(cond)

    def _under(self, name: str, ty: Expr, body: Expr, how: Callable[[Expr], Expr]) -> Expr:
        saved = self.ctx.get(name)
        self.ctx[name] = ty
        try:
            return how(body)
        finally:
            if saved is None:
                del self.ctx[name]
            else:
                self.ctx[name] = saved

    # -- propositions ---------------------------------------------------------------------------

    def prop(self, expr: Expr) -> Expr:
        """Elaborate a proposition."""
        if isinstance(expr, Var):
            if expr.name in ("True", "False"):
                return expr
            ty = self.ctx.get(expr.name)
            if ty is None:
                raise ElabError(f"unknown identifier '{expr.name}'")
            if ty != PROP:
                raise ElabError(f"type expected, got\n  ({expr.name} : {pp(ty)})")
            return expr
        if isinstance(expr, Op):
            return self._prop_operation(expr)
        if isinstance(expr, Binder) and expr.kind in ("∀", "∃"):
            ty = normalize_type(expr.ty) if expr.ty is not None else self._guess_binder_type(expr)
            body = self._under(expr.name, ty, expr.body, self.prop)
            return Binder(expr.kind, expr.name, ty, body)
        if isinstance(expr, App):
            ty = self._infer(expr)
            if ty != PROP:
                raise ElabError(f"type expected, got\n  ({pp(expr)} : {pp(ty) if ty is not None else '?'})")
            return self._annotate(expr, PROP)
        if isinstance(expr, Ascr):
            if normalize_type(expr.ty) != PROP:
                raise ElabError(f"type mismatch: {pp(expr)} is not a proposition")
            return self.prop(expr.expr)
        raise ElabError(f"type expected, got\n  ({pp(expr)})")

    def _prop_operation(self, expr: Op) -> Expr:
        op = expr.op
        if op == "==":  # a `Bool` where a proposition is expected: `b = true` (Lean's coercion)
            return self._condition(expr)
        if op in ("∧", "∨", "→", "↔"):
            return Op(op, (self.prop(expr.args[0]), self.prop(expr.args[1])))
        if op == "¬":
            return Op(op, (self.prop(expr.args[0]),))
        if op in ("=", "≠", "<", ">", "≤", "≥", "∣"):
            return self._relation(expr)
        if op in ("∈", "∉"):
            elem, coll = expr.args
            coll_ty = self._infer(coll)
            elem_ty = self._infer(elem)
            if coll_ty is None:
                if elem_ty is None:
                    elem_ty = _default_type(elem, coll)
                coll_ty = set_of(elem_ty)
            inner = element_type(coll_ty)
            if inner is None:
                raise ElabError(f"failed to synthesize\n  Membership ?m {pp(coll_ty)}")
            return Op(op, (self.value(elem, inner), self._annotate(coll, coll_ty)))
        if op == "⊆":
            ty = _join([self._infer(a) for a in expr.args])
            if ty is None or element_type(ty) is None:
                raise ElabError("failed to synthesize\n  HasSubset ?m")
            return Op(op, tuple(self._annotate(a, ty) for a in expr.args))
        raise ElabError(f"type mismatch: {pp(expr)} is not a proposition")

    def _relation(self, expr: Op) -> Expr:
        """`=`, `≠`, the orders (`≤` also on sets) and `∣` (on ℕ and ℤ), both sides at their joined type."""
        op = expr.op
        lhs, rhs = expr.args
        ty = _join([self._infer(lhs), self._infer(rhs)]) or _default_type(lhs, rhs)
        if op in ("<", ">", "≤", "≥") and ty not in NUMBER_TYPES:
            if element_type(ty) is not None and op == "≤":
                pass
            else:
                raise ElabError(f"failed to synthesize\n  LT {pp(ty)}")
        if op == "∣" and ty not in (NAT, INT):
            raise ElabError(f"failed to synthesize\n  Dvd {pp(ty)}\n(minilean: `∣` over ℕ and ℤ)")
        return Op(op, (self._annotate(lhs, ty), self._annotate(rhs, ty)))

    def _guess_binder_type(self, binder: Binder) -> Expr:
        """A binder without a type gets the one its uses force (`∀ x ∈ A`: A's elements; `x < y` with
        `y : ℝ`: ℝ), else ℕ, the default instance of numerals (Lean: `∃ n, n * n = 49` is about ℕ)."""
        found = self._forced_type(binder.body, binder.name)
        return found if found is not None else NAT

    def _forced_type(self, expr: Expr, name: str) -> Expr | None:
        """The type the first use of `name` in `expr` (walked left to right) forces, or None."""
        if isinstance(expr, Op):
            return self._forced_in_operation(expr, name)
        if isinstance(expr, Binder) and expr.name != name:
            return self._forced_type(expr.body, name)
        if isinstance(expr, App):
            fn_ty = self.ctx.get(expr.fn.name) if isinstance(expr.fn, Var) else None
            for arg in expr.args:
                if arg == Var(name) and isinstance(fn_ty, Op) and fn_ty.op == "→":
                    return fn_ty.args[0]
                if isinstance(fn_ty, Op):
                    fn_ty = fn_ty.args[1]
        return None

    def _forced_in_operation(self, expr: Op, name: str) -> Expr | None:
        """`x ∈ A`: A's elements; `x` beside a typed operand: that type; else what the operands force."""
        if expr.op in ("∈", "∉") and expr.args[0] == Var(name):
            try:
                coll_ty = self._infer(expr.args[1])
            except ElabError:
                coll_ty = None
            inner = element_type(coll_ty) if coll_ty is not None else None
            if inner is not None:
                return inner
        if Var(name) in expr.args:
            for arg in expr.args:
                if arg != Var(name) and name not in free_vars(arg):
                    try:
                        ty = self._infer(arg)
                    except ElabError:
                        ty = None
                    if ty is not None and ty != PROP:
                        return ty
        for arg in expr.args:
            found = self._forced_type(arg, name)
            if found is not None:
                return found
        return None


def _literal(expr: Num | Sci, ty: Expr) -> Expr:
    """A numeral (a number type) or a scientific literal (a field) ascribed its type `ty`."""
    if isinstance(expr, Num):
        if ty not in NUMBER_TYPES:
            raise ElabError(f"failed to synthesize\n  OfNat {pp(ty)} {expr.value}\nnumerals are polymorphic in "
                            "Lean, but the numeral cannot be of this type")
        return Ascr(expr, ty)
    if ty not in FIELDS:
        # Mathlib's `OfScientific` instances are on division rings (ℚ, ℝ); Lean's core has Float's
        raise ElabError(f"failed to synthesize\n  OfScientific {pp(ty)}\n{_DIAGNOSTICS}")
    return Ascr(expr, ty)


def _class_of(op: str) -> str:
    return {"+": "HAdd", "-": "HSub", "*": "HMul", "/": "HDiv", "%": "HMod", "neg": "Neg", "abs": "Lattice",
            "∩": "Inter", "∪": "Union", "\\": "SDiff"}.get(op, "Inhabited")


def elaborate_prop(expr: Expr, ctx: Context) -> Expr:
    return Elaborator(ctx).prop(expr)


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
           "Elaborator", "alpha_eq", "elaborate_prop", "element_type", "fresh_name",
           "is_type", "normalize_type", "set_of", "subst", "subst_many", "type_of", "unfold", "whnf"]

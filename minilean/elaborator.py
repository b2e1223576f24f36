"""The elaborator of minilean's fragment: which expressions are well-typed propositions and values, with Lean's
messages when they are not.

    ctx = {"x": REAL}
    prop = elaborate_prop(parse("2 * x + 3 = 11 → x = 4"), ctx)   # its numerals carry `(n : ℝ)` ascriptions

Elaboration writes every numeral as `Ascr(Num, T)` with the type Lean's unifier would give it (the other
operand's type, else the default instance `ℕ`), and gives every binder its type, so meaning never depends on
where a subterm later moves (`subst` of `x := 3` keeps `(3 : ℝ)`). The printer drops those ascriptions, as Lean's
does with `pp.numericTypes` off. A scientific literal (`2.5`) is typed the same way but only in ℚ/ℝ (Mathlib's
`OfScientific`): on ℕ/ℤ it is Lean's `failed to synthesize OfScientific ℕ`, and with nothing to fix its type
(Lean's default: `Float`) it is refused. The types themselves, substitution and unfolding are `minilean.elab`.
"""

from __future__ import annotations

from collections.abc import Callable

from minilean.constants import constant_types
from minilean.elab import (
    BOOL,
    DATA_TYPES,
    FIELDS,
    INT,
    NAME,
    NAT,
    NUMBER_TYPES,
    TRUE_BOOL,
    Context,
    ElabError,
    element_type,
    normalize_type,
    set_of,
)
from minilean.syntax import (
    DECL_NAME,
    PROP,
    Anon,
    App,
    Ascr,
    Binder,
    Expr,
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


__all__ = ["Elaborator", "elaborate_prop", "has_scientific"]

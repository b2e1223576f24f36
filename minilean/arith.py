"""Arithmetic for minilean: Lean's semantics of closed terms and polynomial normal forms (the decision procedures
on them are `minilean.procedures`).

    value = evaluate(expr, env)     # ℕ/ℤ as int, ℚ/ℝ as Fraction, Prop and Bool as bool, a name literal as str
    poly = to_poly(expr, ctx, atoms)    # a commutative-ring normal form over ℚ, other subterms as atoms

docs/minilean.md gives the semantics ("The fragment").
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from minilean.elab import DATA_TYPES, FIELDS, NAT, PROP, Context, type_of, unfold
from minilean.syntax import App, Ascr, Binder, Expr, Num, Op, Sci, SetLit, Var, free_vars, is_name_literal

MAX_POWER = 12  # `x ^ n` with n above this stays an atom (keeps normal forms small)

Value = int | Fraction | bool | str | frozenset[Any]


class NotEvaluable(Exception):
    """The term has no value here (a free variable without one, an unbounded quantifier, …)."""


def _ediv_full(a: int, b: int) -> int:
    """Lean's `Int.ediv` (and ℕ division): Euclidean, so `a = b * q + r` with `0 ≤ r < |b|`; `a / 0 = 0`."""
    if b == 0:
        return 0
    r = a % abs(b)
    return (a - r) // b


def _emod_full(a: int, b: int) -> int:
    if b == 0:
        return a
    return a % abs(b)


def evaluate(expr: Expr, env: Mapping[str, Value], ctx: Context | None = None,
             domain: Mapping[str, Sequence[Value]] | None = None) -> Value:
    """The value of an elaborated expression under `env`; `domain` gives finite ranges for quantified types
    (by type name), without which a quantifier is NotEvaluable."""
    return _Evaluator(ctx or {}, domain).ev(expr, env, {})


@dataclass(frozen=True)
class _Evaluator:
    """`evaluate`'s walk: `local` holds the values of the bound and free variables, `tys` the types of the bound
    ones."""

    ctx: Context
    domain: Mapping[str, Sequence[Value]] | None

    def ev(self, e: Expr, local: Mapping[str, Value], tys: Mapping[str, Expr]) -> Value:
        if isinstance(e, Var):
            return _variable(e, local)
        if isinstance(e, Ascr):
            inner = self.ev(e.expr, local, tys)
            if e.ty in FIELDS and isinstance(inner, int) and not isinstance(inner, bool):
                return Fraction(inner)
            return inner
        if isinstance(e, Num):
            return e.value
        if isinstance(e, Sci):
            try:
                return e.value()  # exact, as Mathlib's `OfScientific` on ℚ/ℝ (elaboration allows no other type)
            except ValueError:
                raise NotEvaluable("huge scientific literal") from None
        if isinstance(e, Op):
            return self.op(e, local, tys)
        if isinstance(e, SetLit):
            return frozenset(self.ev(x, local, tys) for x in e.elems)
        if isinstance(e, Binder):
            return self.binder(e, local, tys)
        if isinstance(e, App):
            raise NotEvaluable("application")
        raise NotEvaluable(type(e).__name__)

    def op(self, e: Op, local: Mapping[str, Value], tys: Mapping[str, Expr]) -> Value:
        op = e.op
        if op in ("∧", "∨", "→", "↔"):
            return self.connective(e, local, tys)
        if op == "¬":
            return not self.ev(e.args[0], local, tys)
        if op == "ite":  # `ite c a b` reduces through `c`'s `Decidable` instance: decided by evaluation
            cond = self.ev(e.args[0], local, tys)
            if not isinstance(cond, bool):
                raise NotEvaluable("condition")
            return self.ev(e.args[1] if cond else e.args[2], local, tys)
        if op == "==" or (op in ("=", "≠") and _carrier(e, {**self.ctx, **tys}) in DATA_TYPES):
            same = self.ev(e.args[0], local, tys) == self.ev(e.args[1], local, tys)  # `BEq`, `DecidableEq` by value
            return not same if op == "≠" else same
        if op in ("∈", "∉", "⊆", "∩", "∪", "\\"):
            return self.sets(e, local, tys)
        ty = _carrier(e, {**self.ctx, **tys})
        if op == "neg":
            v = self.ev(e.args[0], local, tys)
            return _neg(v, ty)
        if op == "abs":
            inner = _num(self.ev(e.args[0], local, tys))
            return inner if inner >= 0 else -inner
        a = _num(self.ev(e.args[0], local, tys))
        b = _num(self.ev(e.args[1], local, tys))
        return _binop(op, a, b, ty)

    def connective(self, e: Op, local: Mapping[str, Value], tys: Mapping[str, Expr]) -> Value:
        """`∧`, `∨`, `→`, `↔`: the right side evaluated only when the left does not decide."""
        op = e.op
        a = self.ev(e.args[0], local, tys)
        if op == "∧":
            return bool(a) and bool(self.ev(e.args[1], local, tys))
        if op == "∨":
            return bool(a) or bool(self.ev(e.args[1], local, tys))
        if op == "→":
            return (not a) or bool(self.ev(e.args[1], local, tys))
        return bool(a) == bool(self.ev(e.args[1], local, tys))

    def sets(self, e: Op, local: Mapping[str, Value], tys: Mapping[str, Expr]) -> Value:
        """`∈`, `∉`, `⊆`, `∩`, `∪`, `\\`."""
        op = e.op
        if op in ("∈", "∉"):
            coll = e.args[1]
            step = unfold(Op("∈", e.args), {**self.ctx, **tys})
            if step is not None and not (isinstance(coll, Var)):
                result = bool(self.ev(step, local, tys))
            else:
                member = self.ev(e.args[0], local, tys)
                container = self.ev(coll, local, tys)
                if not isinstance(container, frozenset):
                    raise NotEvaluable("set")
                result = member in container
            return result if op == "∈" else not result
        a, b = self.ev(e.args[0], local, tys), self.ev(e.args[1], local, tys)
        if not isinstance(a, frozenset) or not isinstance(b, frozenset):
            raise NotEvaluable("set")
        if op == "⊆":
            return a <= b
        return a & b if op == "∩" else a | b if op == "∪" else a - b

    def binder(self, e: Binder, local: Mapping[str, Value], tys: Mapping[str, Expr]) -> Value:
        """A quantifier over a bounded range of ℕ or over its type's finite `domain`."""
        if e.kind == "setOf":
            raise NotEvaluable("set-builder")
        assert e.ty is not None
        bounded = _bounded_range(e, lambda t: self.ev(t, local, tys))
        values = bounded if bounded is not None else _domain_of(e.ty, self.domain)
        inner_tys = {**tys, e.name: e.ty}
        results = (bool(self.ev(e.body, {**local, e.name: v}, inner_tys)) for v in values)
        return all(results) if e.kind == "∀" else any(results)


def _variable(e: Var, local: Mapping[str, Value]) -> Value:
    """`True`, `False`, `true`, `false`, a name literal, or the value `local` gives the variable."""
    if e.name == "True":
        return True
    if e.name == "False":
        return False
    if e.name in ("true", "false"):
        return e.name == "true"
    if is_name_literal(e):
        return e.name[1:]  # Lean's `Name`: compared component by component, so by its text
    if e.name in local:
        return local[e.name]
    raise NotEvaluable(e.name)


MAX_BOUNDED = 10_000


def _bounded_range(binder: Binder, value_of: Callable[[Expr], Value]) -> Sequence[Value] | None:
    """`∀ x < n, P x` / `∃ x ≤ n, P x` over ℕ with a closed bound: the finitely many values (Lean decides these
    with `Nat.decidableBallLT` and friends); None otherwise."""
    body = binder.body
    if binder.ty != NAT or not isinstance(body, Op) or body.op not in ("→", "∧"):
        return None
    if (body.op == "→") != (binder.kind == "∀"):
        return None
    guard = body.args[0]
    if not (isinstance(guard, Op) and guard.op in ("<", "≤") and guard.args[0] == Var(binder.name)):
        return None
    if binder.name in free_vars(guard.args[1]):
        return None
    try:
        bound = value_of(guard.args[1])
    except NotEvaluable:
        return None
    if not isinstance(bound, int) or isinstance(bound, bool):
        return None
    top = bound if guard.op == "<" else bound + 1
    if top > MAX_BOUNDED:
        return None
    return range(max(top, 0))


def _domain_of(ty: Expr, domain: Mapping[str, Sequence[Value]] | None) -> Sequence[Value]:
    key = ty.name if isinstance(ty, Var) else None
    if ty == PROP:
        return (False, True)
    if domain is None or key is None or key not in domain:
        raise NotEvaluable("quantifier")
    return domain[key]


def _num(v: Value) -> int | Fraction:
    if isinstance(v, (bool, str, frozenset)):
        raise NotEvaluable("not a number")
    return v


def _neg(v: Value, ty: Expr | None) -> Value:
    n = _num(v)
    if ty == NAT:
        return 0  # `-n` on ℕ: Lean's Neg ℕ does not exist; Mathlib has none either, so elaboration refuses it
    return -n


# The comparisons of two numbers, by operator.
_COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq, "≠": operator.ne, "<": operator.lt, ">": operator.gt, "≤": operator.le, "≥": operator.ge}


def _binop(op: str, a: int | Fraction, b: int | Fraction, ty: Expr | None) -> Value:
    if op == "+":
        return a + b
    if op == "*":
        return a * b
    if op == "-":
        r = a - b
        return max(r, 0) if ty == NAT else r
    if op == "^":
        return _power(a, b)
    if op in ("/", "%"):
        return _division(op, a, b, ty)
    if op in _COMPARISONS:
        return _COMPARISONS[op](a, b)
    if op == "∣":
        return b == 0 if a == 0 else (b % a == 0)
    raise NotEvaluable(op)


def _power(a: int | Fraction, b: int | Fraction) -> Value:
    """`a ^ b` for a natural exponent, NotEvaluable when the result would be huge."""
    if not isinstance(b, int) or b < 0:
        raise NotEvaluable("power")
    magnitude = abs(a.numerator) + abs(a.denominator) if isinstance(a, Fraction) else abs(a)
    if b > 4096 or magnitude.bit_length() * b > 1_000_000:
        raise NotEvaluable("huge power")  # keeps a reply in milliseconds; the term stays symbolic
    return a**b


def _division(op: str, a: int | Fraction, b: int | Fraction, ty: Expr | None) -> Value:
    """`a / b` (in a field, or Lean's Euclidean division on ℕ/ℤ) and `a % b`; division by zero gives 0."""
    if op == "/":
        if ty in FIELDS or isinstance(a, Fraction) or isinstance(b, Fraction):
            return Fraction(0) if b == 0 else Fraction(a) / Fraction(b)
        assert isinstance(a, int) and isinstance(b, int)
        return _ediv_full(a, b)
    assert isinstance(a, int) and isinstance(b, int)
    return _emod_full(a, b)


def _carrier(e: Op, ctx: Context) -> Expr | None:
    for arg in e.args:
        ty = type_of(arg, ctx)
        if ty is not None and ty != PROP:
            return ty
    return None


def closed_value(expr: Expr, ctx: Context) -> tuple[Value, Expr] | None:
    """(value, type) of a term without free variables (None when it has some or has no value)."""
    if free_vars(expr) - {"True", "False"}:
        return None
    try:
        value = evaluate(expr, {}, ctx)
    except (NotEvaluable, ZeroDivisionError, OverflowError, ValueError):
        return None
    ty = PROP if isinstance(value, bool) else type_of(expr, ctx) or NAT
    return value, ty


# ---------------------------------------------------------------------------------------------------
# Polynomials over ℚ with opaque atoms.

Mono = tuple[tuple[int, int], ...]  # (atom index, power), sorted


@dataclass
class Atoms:
    """The opaque subterms of one problem, keyed structurally (types included: `(3 : ℕ) - 5 ≠ (3 : ℤ) - 5`)."""

    keys: dict[Expr, int] = field(default_factory=dict)
    exprs: list[Expr] = field(default_factory=list)
    types: list[Expr | None] = field(default_factory=list)

    def index(self, expr: Expr, ty: Expr | None) -> int:
        found = self.keys.get(expr)
        if found is None:
            found = self.keys[expr] = len(self.exprs)
            self.exprs.append(expr)
            self.types.append(ty)
        return found


Poly = dict[Mono, Fraction]


def padd(p: Poly, q: Poly, scale: Fraction = Fraction(1)) -> Poly:
    out = dict(p)
    for mono, coef in q.items():
        value = out.get(mono, Fraction(0)) + scale * coef
        if value == 0:
            out.pop(mono, None)
        else:
            out[mono] = value
    return out


def _mono_mul(a: Mono, b: Mono) -> Mono:
    powers: dict[int, int] = dict(a)
    for atom, power in b:
        powers[atom] = powers.get(atom, 0) + power
    return tuple(sorted(powers.items()))


def pmul(p: Poly, q: Poly) -> Poly:
    out: Poly = {}
    for m1, c1 in p.items():
        for m2, c2 in q.items():
            out = padd(out, {_mono_mul(m1, m2): c1 * c2})
    return out


def pconst(c: Fraction | int) -> Poly:
    return {(): Fraction(c)} if c != 0 else {}


def to_poly(expr: Expr, ctx: Context, atoms: Atoms, ty: Expr | None = None) -> Poly:
    """The polynomial of an arithmetic term: commutative-ring normalisation, with ℕ subtraction, ℕ/ℤ
    division and remainder, `|x|`, applications and non-literal powers as atoms; division in a field by a
    non-constant becomes multiplication by the atom `b⁻¹` (as `ring` does)."""
    ty = ty or type_of(expr, ctx)
    if isinstance(expr, Ascr):
        return to_poly(expr.expr, ctx, atoms, expr.ty)
    if isinstance(expr, Num):
        return pconst(expr.value)
    if isinstance(expr, Sci):
        try:
            return pconst(expr.value())
        except ValueError:
            return _atom(expr, atoms, ty)
    if isinstance(expr, Op):
        return _op_poly(expr, ctx, atoms, ty)
    return _atom(expr, atoms, ty)


def _atom(e: Expr, atoms: Atoms, ty: Expr | None) -> Poly:
    return {((atoms.index(e, ty), 1),): Fraction(1)}


def _op_poly(expr: Op, ctx: Context, atoms: Atoms, ty: Expr | None) -> Poly:
    """`to_poly` of an operator term."""
    op = expr.op
    if op == "neg":
        return padd({}, to_poly(expr.args[0], ctx, atoms, ty), Fraction(-1))
    if op == "+":
        return padd(to_poly(expr.args[0], ctx, atoms, ty), to_poly(expr.args[1], ctx, atoms, ty))
    if op == "-":
        if ty == NAT:
            value = closed_value(expr, ctx)
            if value is not None and not isinstance(value[0], bool):
                return pconst(value[0])  # type: ignore[arg-type]
            return _atom(expr, atoms, ty)
        return padd(to_poly(expr.args[0], ctx, atoms, ty), to_poly(expr.args[1], ctx, atoms, ty), Fraction(-1))
    if op == "*":
        return pmul(to_poly(expr.args[0], ctx, atoms, ty), to_poly(expr.args[1], ctx, atoms, ty))
    if op == "^":
        return _power_poly(expr, ctx, atoms, ty)
    if op == "/" and ty in FIELDS:
        return _quotient_poly(expr, ctx, atoms, ty)
    value = closed_value(expr, ctx)
    if value is not None and not isinstance(value[0], (bool, str, frozenset)):
        return pconst(value[0])
    return _atom(expr, atoms, ty)


def _power_poly(expr: Op, ctx: Context, atoms: Atoms, ty: Expr | None) -> Poly:
    """`b ^ n` expanded for a closed exponent up to `MAX_POWER`, an atom otherwise."""
    exponent = closed_value(expr.args[1], ctx)
    if exponent is None or not isinstance(exponent[0], int) or isinstance(exponent[0], bool) \
            or exponent[0] > MAX_POWER:
        return _atom(expr, atoms, ty)
    base = to_poly(expr.args[0], ctx, atoms, ty)
    result = pconst(1)
    for _ in range(int(exponent[0])):
        result = pmul(result, base)
    return result


def _quotient_poly(expr: Op, ctx: Context, atoms: Atoms, ty: Expr) -> Poly:
    """`a / b` in a field: `a` times the constant `1 / b`, or times the atom `b⁻¹`; `a / 0 = 0`."""
    numerator = to_poly(expr.args[0], ctx, atoms, ty)
    denominator = to_poly(expr.args[1], ctx, atoms, ty)
    if not denominator:
        return {}  # x / 0 = 0
    if set(denominator) == {()}:
        return padd({}, numerator, 1 / denominator[()])
    inverse = Op("/", (Ascr(Num(1), ty), expr.args[1]))  # the atom b⁻¹, printed as 1 / b
    return pmul(numerator, {((atoms.index(inverse, ty), 1),): Fraction(1)})


__all__ = [
    "Atoms",
    "NotEvaluable",
    "closed_value",
    "evaluate",
    "to_poly",
]

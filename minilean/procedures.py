"""The decision procedures behind `linarith`, `nlinarith`, `omega` and `tauto`: z3 on exactly the facts each
tactic may use, over the polynomial normal forms of `minilean.arith`.

    refuted = linarith_refutes(facts, goal, ctx, products=False)
    proved = omega_proves(facts, goal, ctx)

A procedure proves a goal only when z3 answers *unsat*: `unknown`, the deterministic `rlimit` budget or the
wall-clock cap running out is a failure, and a subterm outside its theory is an opaque atom, which only weakens
what z3 knows. docs/minilean.md gives the argument ("Soundness").
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from minilean.arith import Atoms, Mono, Poly, closed_value, padd, pconst, pmul, to_poly
from minilean.elab import INT, NAT, NUMBER_TYPES, Context, type_of, unfold
from minilean.syntax import FALSE, TRUE, Ascr, Binder, Expr, Num, Op

Z3_TIMEOUT_MS = 2000
# z3's deterministic resource budget per call: the same problem gets the same answer on a busy machine. The
# wall-clock timeout above is only a safety net (a call that hits either is a failure, like Lean's timeout).
Z3_RLIMIT = 2_000_000
# ---------------------------------------------------------------------------------------------------
# Comparisons `p R 0`.


@dataclass(frozen=True)
class Comparison:
    """`poly rel 0` with rel one of `<`, `≤`, `=`; `ty` is the carrier of the original fact."""

    poly: tuple[tuple[Mono, Fraction], ...]
    rel: str
    ty: Expr

    def as_dict(self) -> Poly:
        return dict(self.poly)


def _comparison(poly: Poly, rel: str, ty: Expr) -> Comparison:
    return Comparison(tuple(sorted(poly.items())), rel, ty)


def comparison_of(prop: Expr, ctx: Context, atoms: Atoms, negate: bool = False) -> list[Comparison] | None:
    """`prop` (or its negation) as comparisons `p R 0`, or None when it is no order fact. A negated `=` is
    not a comparison (linarith cannot use `≠`); the goal `a = b` is handled by two runs instead."""
    if isinstance(prop, Op) and prop.op == "¬":
        return comparison_of(prop.args[0], ctx, atoms, not negate)
    if not (isinstance(prop, Op) and prop.op in ("=", "<", ">", "≤", "≥")):
        return None
    lhs, rhs = prop.args
    ty = type_of(lhs, ctx) or type_of(rhs, ctx) or NAT
    if ty not in NUMBER_TYPES:
        return None
    op = prop.op
    if op in (">", "≥"):
        lhs, rhs = rhs, lhs
        op = "<" if op == ">" else "≤"
    if negate:
        if op == "=":
            return None
        # ¬(a < b) ↔ b ≤ a; ¬(a ≤ b) ↔ b < a (linear orders)
        lhs, rhs = rhs, lhs
        op = "≤" if op == "<" else "<"
    diff = padd(to_poly(lhs, ctx, atoms, ty), to_poly(rhs, ctx, atoms, ty), Fraction(-1))
    return [_comparison(diff, op, ty)]


def _strengthen(c: Comparison) -> Comparison:
    """Over ℕ/ℤ, `p < 0` with integer coefficients is `p + 1 ≤ 0` (linarith's int preprocessing)."""
    if c.rel == "<" and c.ty in (NAT, INT) and all(coef.denominator == 1 for _, coef in c.poly):
        return _comparison(padd(c.as_dict(), pconst(1)), "≤", c.ty)
    return c


def _product(a: Comparison, b: Comparison) -> Comparison | None:
    """The product fact of two comparisons `p R 0`, `q S 0` (signs: neg·neg ≥ 0, strict·strict > 0)."""
    poly = pmul(a.as_dict(), b.as_dict())
    if a.rel == "=" or b.rel == "=":
        return _comparison(poly, "=", a.ty)
    # p < 0, q < 0 ⇒ p*q > 0 ⇒ -(p*q) < 0; with ≤: -(p*q) ≤ 0
    rel = "<" if a.rel == "<" and b.rel == "<" else "≤"
    return _comparison(padd({}, poly, Fraction(-1)), rel, a.ty)


def _square_subterms(exprs: Iterable[Expr]) -> Iterator[Expr]:
    """Subterms `t ^ 2` and `t * t` (nlinarith adds `0 ≤ t ^ 2` for each)."""
    for expr in exprs:
        stack = [expr]
        while stack:
            e = stack.pop()
            if isinstance(e, Op):
                if e.op == "^" and isinstance(e.args[1], Ascr) and e.args[1].expr == Num(2):
                    yield e
                if e.op == "*" and e.args[0] == e.args[1]:
                    yield e
                stack.extend(e.args)


def _limit(solver: Any, timeout_ms: int) -> None:
    solver.set("rlimit", Z3_RLIMIT)
    solver.set("timeout", timeout_ms)


def _z3() -> Any:
    import z3

    return z3


def _linear_unsat(comparisons: Sequence[Comparison], atoms: Atoms, timeout_ms: int) -> bool:
    """Is the conjunction of the comparisons infeasible over ℚ, monomials of degree ≥ 2 read as atoms? Asked again
    with the same problem (the comparisons, the atoms' types, the timeout: all that the answer reads), the answer
    is the first one's (`_linear_unsat_of`): a search tries the same goal many times (the sketch benchmark: 1,858
    calls, 241 problems)."""
    problem = tuple((comp.poly, comp.rel) for comp in comparisons)
    return _linear_unsat_of(problem, tuple(atoms.types), timeout_ms)


@functools.lru_cache(maxsize=4096)
def _linear_unsat_of(problem: tuple[tuple[tuple[tuple[Mono, Fraction], ...], str], ...],
                     types: tuple[Expr | None, ...], timeout_ms: int) -> bool:
    """`_linear_unsat` of a problem as hashable parts: each comparison's `poly` and `rel`, each atom's type. z3's
    deterministic budget (`Z3_RLIMIT`) gives one problem one answer; the wall-clock timeout is a safety net."""
    z3 = _z3()
    solver = z3.Solver()
    _limit(solver, timeout_ms)
    monos: dict[Mono, Any] = {}

    def var(mono: Mono) -> Any:
        if mono not in monos:
            monos[mono] = z3.Real(f"m{len(monos)}")
            if all(types[a] == NAT for a, _ in mono):
                # ℕ atoms and their products are non-negative: the facts linarith's ℕ→ℤ cast preprocessing adds
                solver.add(monos[mono] >= 0)
        return monos[mono]

    for poly, rel in problem:
        terms = [z3.RealVal(f"{c.numerator}/{c.denominator}") * (var(m) if m else 1) for m, c in poly]
        lhs = z3.Sum(terms) if terms else z3.RealVal(0)
        solver.add(lhs < 0 if rel == "<" else lhs <= 0 if rel == "≤" else lhs == 0)
    return bool(solver.check() == z3.unsat)


def linarith_refutes(
    facts: Sequence[Expr], goal: Expr | None, ctx: Context, *, products: bool = False,
    timeout_ms: int = Z3_TIMEOUT_MS,
) -> bool:
    """Does `linarith` (or `nlinarith`, with `products`) close a goal from `facts`? `goal` None means False.
    A goal `a = b` needs two refutations (of `a < b` and of `a > b`), as Mathlib's linarith runs twice."""
    atoms = Atoms()
    base: list[Comparison] = []
    for fact in facts:
        comps = comparison_of(fact, ctx, atoms)
        if comps:
            base.extend(comps)
    negations = _goal_negations(goal, ctx, atoms)
    square_sources = [*facts, *([goal] if goal is not None else [])]
    for negation in negations:
        comps = [_strengthen(c) for c in [*base, *negation]]
        if products:
            comps = comps + _nlinarith_products(comps, square_sources, ctx, atoms)
        if not _linear_unsat(comps, atoms, timeout_ms):
            return False
    return True


def _goal_negations(goal: Expr | None, ctx: Context, atoms: Atoms) -> list[list[Comparison]]:
    """The negated goal, one refutation each: `a < b` and `a > b` for `a = b`, the empty list for no goal or one
    outside linear arithmetic."""
    negations: list[list[Comparison]] = [[]]
    if goal is not None:
        if isinstance(goal, Op) and goal.op == "=":
            lhs, rhs = goal.args
            lt = comparison_of(Op("<", (lhs, rhs)), ctx, atoms)
            gt = comparison_of(Op(">", (lhs, rhs)), ctx, atoms)
            negations = [[]] if lt is None or gt is None else [lt, gt]
        else:
            negated = comparison_of(goal, ctx, atoms, negate=True)
            negations = [negated] if negated is not None else [[]]
    return negations


def _nlinarith_products(comps: list[Comparison], square_sources: list[Expr], ctx: Context,
                        atoms: Atoms) -> list[Comparison]:
    """nlinarith's extra facts: the pairwise products of the comparisons and `0 ≤ t ^ 2` for each square."""
    extra: list[Comparison] = []
    for a, b in itertools.combinations_with_replacement(comps, 2):
        if a.ty == b.ty:
            product = _product(a, b)
            if product is not None:
                extra.append(product)
    for square in _square_subterms(square_sources):
        sq_ty = type_of(square, ctx)
        if sq_ty in NUMBER_TYPES:
            assert sq_ty is not None
            poly = to_poly(square, ctx, atoms, sq_ty)
            extra.append(_comparison(padd({}, poly, Fraction(-1)), "≤", sq_ty))
    return extra


# ---------------------------------------------------------------------------------------------------
# omega: linear integer arithmetic over ℕ and ℤ, with propositional structure.


class _Unsupported(Exception):
    pass


def _int_term(expr: Expr, ctx: Context, env: dict[Expr, Any], solver: Any, ty: Expr) -> Any:
    z3 = _z3()
    if isinstance(expr, Ascr):
        return _int_term(expr.expr, ctx, env, solver, expr.ty)
    if isinstance(expr, Num):
        return z3.IntVal(expr.value)
    if isinstance(expr, Op):
        op = expr.op
        value = closed_value(expr, ctx)
        if value is not None and isinstance(value[0], int) and not isinstance(value[0], bool):
            return z3.IntVal(value[0])
        if op == "neg":
            return -_int_term(expr.args[0], ctx, env, solver, ty)
        if op in ("+", "-", "*", "/", "%"):
            return _int_arith(expr, ctx, env, solver, ty)
        if op == "^":
            return _int_atom(expr, env, solver, ty)
        raise _Unsupported(op)
    return _int_atom(expr, env, solver, ty)


def _int_atom(e: Expr, env: dict[Expr, Any], solver: Any, ty: Expr) -> Any:
    """The z3 integer standing for `e` (nonnegative on ℕ), made on first use."""
    if e not in env:
        env[e] = _z3().Int(f"a{len(env)}")
        if ty == NAT:
            solver.add(env[e] >= 0)
    return env[e]


def _int_arith(expr: Op, ctx: Context, env: dict[Expr, Any], solver: Any, ty: Expr) -> Any:
    """`+`, `-` (truncated on ℕ), `*` by a constant, `/` and `%` by a constant; otherwise an atom."""
    z3 = _z3()
    op = expr.op
    a = _int_term(expr.args[0], ctx, env, solver, ty)
    if op == "*":
        left = closed_value(expr.args[0], ctx)
        right = closed_value(expr.args[1], ctx)
        if left is None and right is None:
            return _int_atom(expr, env, solver, ty)  # omega treats nonlinear products as atoms
    if op in ("/", "%"):
        divisor = closed_value(expr.args[1], ctx)
        if divisor is None:
            return _int_atom(expr, env, solver, ty)
        k = int(divisor[0])  # type: ignore[arg-type]
        if k == 0:
            return z3.IntVal(0) if op == "/" else a
        # z3's div/mod are Euclidean (remainder in [0, |k|)), like Lean's Int.ediv/emod
        return a / k if op == "/" else a % k
    b = _int_term(expr.args[1], ctx, env, solver, ty)
    if op == "+":
        return a + b
    if op == "*":
        return a * b
    if ty == NAT:
        return z3.If(a >= b, a - b, 0)
    return a - b


def _omega_formula(prop: Expr, ctx: Context, env: dict[Expr, Any], solver: Any, bools: dict[Expr, Any]) -> Any:
    z3 = _z3()

    def opaque(p: Expr) -> Any:
        if p not in bools:
            bools[p] = z3.Bool(f"b{len(bools)}")
        return bools[p]

    if prop == TRUE:
        return z3.BoolVal(True)
    if prop == FALSE:
        return z3.BoolVal(False)
    if isinstance(prop, Op):
        op = prop.op
        if op in ("∧", "∨", "→", "↔"):
            a = _omega_formula(prop.args[0], ctx, env, solver, bools)
            b = _omega_formula(prop.args[1], ctx, env, solver, bools)
            return z3.And(a, b) if op == "∧" else z3.Or(a, b) if op == "∨" else z3.Implies(a, b) if op == "→" \
                else a == b
        if op == "¬":
            return z3.Not(_omega_formula(prop.args[0], ctx, env, solver, bools))
        if op in ("=", "≠", "<", ">", "≤", "≥", "∣"):
            atom = _omega_atom(prop, ctx, env, solver)
            return opaque(prop) if atom is None else atom
    return opaque(prop)


def _omega_atom(prop: Op, ctx: Context, env: dict[Expr, Any], solver: Any) -> Any:
    """A comparison or divisibility of ℕ/ℤ terms as z3 sees it; None when omega must treat it as opaque."""
    op = prop.op
    ty = type_of(prop.args[0], ctx) or type_of(prop.args[1], ctx) or NAT
    if ty not in (NAT, INT):
        return None
    try:
        a = _int_term(prop.args[0], ctx, env, solver, ty)
        b = _int_term(prop.args[1], ctx, env, solver, ty)
    except _Unsupported:
        return None
    if op == "∣":
        divisor = closed_value(prop.args[0], ctx)
        if divisor is None:
            return None
        k = int(divisor[0])  # type: ignore[arg-type]
        return b == 0 if k == 0 else b % abs(k) == 0
    return {"=": a == b, "≠": a != b, "<": a < b, ">": a > b, "≤": a <= b, "≥": a >= b}[op]


def omega_proves(facts: Sequence[Expr], goal: Expr, ctx: Context, timeout_ms: int = Z3_TIMEOUT_MS) -> bool:
    """Is `facts → goal` valid in linear integer arithmetic (the ℕ/ℤ facts omega collects)?"""
    z3 = _z3()
    solver = z3.Solver()
    _limit(solver, timeout_ms)
    env: dict[Expr, Any] = {}
    bools: dict[Expr, Any] = {}
    for fact in facts:
        solver.add(_omega_formula(fact, ctx, env, solver, bools))
    solver.add(z3.Not(_omega_formula(goal, ctx, env, solver, bools)))
    return bool(solver.check() == z3.unsat)


def omega_relevant(prop: Expr, ctx: Context) -> bool:
    """Whether omega would collect this fact: built from ℕ/ℤ (in)equalities and divisibility by connectives."""
    if isinstance(prop, Op):
        if prop.op in ("∧", "∨", "→", "↔"):
            return omega_relevant(prop.args[0], ctx) or omega_relevant(prop.args[1], ctx)
        if prop.op == "¬":
            return omega_relevant(prop.args[0], ctx)
        if prop.op in ("=", "≠", "<", ">", "≤", "≥", "∣"):
            ty = type_of(prop.args[0], ctx) or type_of(prop.args[1], ctx) or NAT
            return ty in (NAT, INT)
    return False


# ---------------------------------------------------------------------------------------------------
# tauto: classical propositional logic, atoms opaque (membership in ∩ ∪ \ unfolded first).


def _prop_formula(prop: Expr, ctx: Context, bools: dict[Expr, Any], depth: int = 0) -> Any:
    z3 = _z3()
    if prop == TRUE:
        return z3.BoolVal(True)
    if prop == FALSE:
        return z3.BoolVal(False)
    if isinstance(prop, Op):
        op = prop.op
        if op in ("∧", "∨", "→", "↔"):
            a = _prop_formula(prop.args[0], ctx, bools, depth + 1)
            b = _prop_formula(prop.args[1], ctx, bools, depth + 1)
            return z3.And(a, b) if op == "∧" else z3.Or(a, b) if op == "∨" else z3.Implies(a, b) if op == "→" \
                else a == b
        if op == "¬":
            return z3.Not(_prop_formula(prop.args[0], ctx, bools, depth + 1))
        if op == "=" and prop.args[0] == prop.args[1]:
            return z3.BoolVal(True)
        if op in ("∈", "∉") and depth < 64:
            step = unfold(prop, ctx)
            if step is not None and not (op == "∈" and isinstance(prop.args[1], Binder)):
                return _prop_formula(step, ctx, bools, depth + 1)
    if prop not in bools:
        bools[prop] = z3.Bool(f"p{len(bools)}")
    return bools[prop]


def tauto_proves(facts: Sequence[Expr], goal: Expr, ctx: Context, timeout_ms: int = Z3_TIMEOUT_MS) -> bool:
    z3 = _z3()
    solver = z3.Solver()
    _limit(solver, timeout_ms)
    bools: dict[Expr, Any] = {}
    for fact in facts:
        solver.add(_prop_formula(fact, ctx, bools))
    solver.add(z3.Not(_prop_formula(goal, ctx, bools)))
    return bool(solver.check() == z3.unsat)


__all__ = ["Z3_TIMEOUT_MS", "linarith_refutes", "omega_proves", "omega_relevant", "tauto_proves"]

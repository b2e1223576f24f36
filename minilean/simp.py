"""The rewriting behind `simp`, `simp only`, `norm_num` and `rw`: user rules (hypotheses and lemma instances),
a small default simp set, and evaluation of closed numerals.

    result = simplify(target, rules, ctx, default_set=True, numerals="all")

Every built-in rewrite is an equation or equivalence that holds in Lean for every type it is applied at
(`x - 0 = x` also on ℕ; `¬a < b ↔ b ≤ a` on linear orders); closed subterms are replaced by their value under
Lean's semantics (`minilean.arith.evaluate`). `simp` folds ℕ/ℤ literals (Lean's simprocs), `norm_num` folds in
every type and writes a scientific literal as its rational (`2.5` ↦ `5 / 2`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from minilean.arith import closed_value
from minilean.elab import FIELDS, NAT, NUMBER_TYPES, Context, alpha_eq, fresh_name, subst, type_of
from minilean.lemmas import Telescope, instance_allowed, match
from minilean.syntax import FALSE, TRUE, App, Ascr, Binder, Expr, Num, Op, Sci, SetLit, Var, free_vars

MAX_PASSES = 24


@dataclass
class Rule:
    """`lhs = rhs` or `lhs ↔ rhs`, with metavariables (`tel.metas`) when it came from a lemma."""

    lhs: Expr
    rhs: Expr
    tel: Telescope | None = None


def numeral(value: int | Fraction, ty: Expr) -> Expr:
    """The Lean numeral for a value of type `ty` (`-2`, `1 / 2`)."""
    if isinstance(value, Fraction) and value.denominator != 1:
        num = numeral(value.numerator, ty)
        return Op("/", (num, Ascr(Num(value.denominator), ty)))
    n = int(value)
    if n < 0:
        return Op("neg", (Ascr(Num(-n), ty),))
    return Ascr(Num(n), ty)


def is_numeral(expr: Expr) -> bool:
    if isinstance(expr, Ascr):
        return isinstance(expr.expr, Num)
    if isinstance(expr, Num):
        return True
    if isinstance(expr, Op) and expr.op == "neg":
        return is_numeral(expr.args[0])
    if isinstance(expr, Op) and expr.op == "/":
        return is_numeral(expr.args[0]) and is_numeral(expr.args[1])
    return False


def _num_value(expr: Expr) -> int | None:
    if isinstance(expr, Ascr) and isinstance(expr.expr, Num):
        return expr.expr.value
    return None


def _builtin(expr: Expr, ctx: Context, numerals: str) -> Expr | None:
    """One default-simp-set step at the root of `expr`, or None: the first of the rule families that applies."""
    if numerals == "all" and isinstance(expr, Ascr) and isinstance(expr.expr, Sci):
        # norm_num's `OfScientific` extension: `(2.5 : ℝ)` is the rational `5 / 2` (simp leaves it)
        try:
            return numeral(expr.expr.value(), expr.ty)
        except ValueError:
            return None
    if not isinstance(expr, Op):
        return None
    closed = _closed(expr, ctx, numerals)
    if closed is not None:
        return closed
    for family in _FAMILIES:
        result = family(expr.op, expr.args)
        if result is not None:
            return result
    return None


def _closed(expr: Op, ctx: Context, numerals: str) -> Expr | None:
    """Closed arithmetic and comparisons folded to their value (`==` and `ite` are values, a `Bool` or a number:
    not rewritten to a proposition here)."""
    op, args = expr.op, expr.args
    if numerals != "none" and not is_numeral(expr) and op not in ("∧", "∨", "→", "↔", "¬", "==", "ite"):
        value = closed_value(expr, ctx)
        if value is not None:
            result, ty = value
            if isinstance(result, bool):
                carrier = type_of(args[0], ctx) if args else None
                if numerals == "all" or carrier in (NAT, Var("ℤ"), None) or op in ("∈", "∉", "⊆"):
                    return TRUE if result else FALSE
            elif not isinstance(result, (frozenset, str)) and ty in NUMBER_TYPES and (
                    numerals == "all" or ty not in FIELDS):
                return numeral(result, ty)
    return None


def _units(op: str, args: tuple[Expr, ...]) -> Expr | None:
    """`x + 0`, `0 + x`, `x - 0`, `x * 1`, `1 * x`, `0 * x`, `x * 0`, `x / 1`, `x ^ 1`."""
    if op == "+":
        if _num_value(args[1]) == 0:
            return args[0]
        if _num_value(args[0]) == 0:
            return args[1]
    if op == "-" and _num_value(args[1]) == 0:
        return args[0]
    if op == "*":
        if _num_value(args[1]) == 1:
            return args[0]
        if _num_value(args[0]) == 1:
            return args[1]
        if _num_value(args[0]) == 0:
            return args[0]
        if _num_value(args[1]) == 0:
            return args[1]
    if op in ("/", "^") and _num_value(args[1]) == 1:
        return args[0]
    return None


def _relations(op: str, args: tuple[Expr, ...]) -> Expr | None:
    """Reflexivity, `n < n + k`, cancelling a common summand, `s ∩ s`, `s ∪ s`, subsets of an intersection and of a
    union, irreflexivity."""
    if op in ("=", "≤", "↔", "⊆") and alpha_eq(args[0], args[1]):
        return TRUE
    if op in ("<", "≤") and isinstance(args[1], Op) and args[1].op == "+" and alpha_eq(args[0], args[1].args[0]):
        # `lt_add_iff_pos_right`, `le_add_iff_nonneg_right` with a numeral: `n < n + 1`
        k = _num_value(args[1].args[1])
        if k is not None and (k > 0 or op == "≤"):
            return TRUE
    if op in ("=", "≠", "<", "≤") and all(isinstance(a, Op) and a.op == "+" for a in args):
        # add_left_cancel_iff, add_le_add_iff_left, … (and on the right): `b + 1 ≤ b + 2` ↦ `1 ≤ 2`
        left, right = args
        assert isinstance(left, Op) and isinstance(right, Op)
        if alpha_eq(left.args[0], right.args[0]):
            return Op(op, (left.args[1], right.args[1]))
        if alpha_eq(left.args[1], right.args[1]):
            return Op(op, (left.args[0], right.args[0]))
    if op in ("∩", "∪") and alpha_eq(args[0], args[1]):
        return args[0]  # Set.inter_self, Set.union_self
    if op == "⊆":
        small, big = args
        if isinstance(small, Op) and small.op == "∩" and any(alpha_eq(part, big) for part in small.args):
            return TRUE  # Set.inter_subset_left/right
        if isinstance(big, Op) and big.op == "∪" and any(alpha_eq(part, small) for part in big.args):
            return TRUE  # Set.subset_union_left/right
    if op in ("<", "≠") and alpha_eq(args[0], args[1]):
        return FALSE
    return None


def _normal_forms(op: str, args: tuple[Expr, ...]) -> Expr | None:
    """`≥`, `>`, `≠` and `∉` written with `≤`, `<`, `=`, `∈`; a negation pushed through `True`, `False`, `¬`, `<`,
    `≤`."""
    if op == "≥":
        return Op("≤", (args[1], args[0]))
    if op == ">":
        return Op("<", (args[1], args[0]))
    if op == "≠":
        return Op("¬", (Op("=", args),))
    if op == "∉":
        return Op("¬", (Op("∈", args),))
    if op == "¬":
        inner = args[0]
        if inner == TRUE:
            return FALSE
        if inner == FALSE:
            return TRUE
        if isinstance(inner, Op) and inner.op == "¬":
            return inner.args[0]
        if isinstance(inner, Op) and inner.op == "<":
            return Op("≤", (inner.args[1], inner.args[0]))
        if isinstance(inner, Op) and inner.op == "≤":
            return Op("<", (inner.args[1], inner.args[0]))
    return None


def _conjunction(op: str, args: tuple[Expr, ...]) -> Expr | None:
    """`∧` and `∨` with `True`, `False` or twice the same side."""
    if op == "∧":
        a, b = args
        if a == TRUE:
            return b
        if b == TRUE:
            return a
        if FALSE in (a, b):
            return FALSE
        if alpha_eq(a, b):
            return a
    if op == "∨":
        a, b = args
        if a == FALSE:
            return b
        if b == FALSE:
            return a
        if TRUE in (a, b):
            return TRUE
        if alpha_eq(a, b):
            return a
    return None


def _implication(op: str, args: tuple[Expr, ...]) -> Expr | None:
    """`→` and `↔` with `True`, `False` or twice the same side."""
    if op == "→":
        a, b = args
        if a == TRUE:
            return b
        if a == FALSE or b == TRUE:
            return TRUE
        if alpha_eq(a, b):
            return TRUE
    if op == "↔":
        a, b = args
        if a == TRUE:
            return b
        if b == TRUE:
            return a
    return None


def _membership(op: str, args: tuple[Expr, ...]) -> Expr | None:
    """`x ∈ s` unfolded for an intersection, a union, a difference, a set-builder and a set literal."""
    if op != "∈":
        return None
    elem, coll = args
    if isinstance(coll, Op) and coll.op == "∩":
        return Op("∧", (Op("∈", (elem, coll.args[0])), Op("∈", (elem, coll.args[1]))))
    if isinstance(coll, Op) and coll.op == "∪":
        return Op("∨", (Op("∈", (elem, coll.args[0])), Op("∈", (elem, coll.args[1]))))
    if isinstance(coll, Op) and coll.op == "\\":
        return Op("∧", (Op("∈", (elem, coll.args[0])), Op("¬", (Op("∈", (elem, coll.args[1])),))))
    if isinstance(coll, Binder) and coll.kind == "setOf":
        return subst(coll.body, coll.name, elem)
    if isinstance(coll, SetLit):
        if not coll.elems:
            return FALSE
        head = Op("=", (elem, coll.elems[0]))
        return head if len(coll.elems) == 1 else Op("∨", (head, Op("∈", (elem, SetLit(coll.elems[1:])))))
    return None


# The default simp set's families, tried in this order at the root of an operator term (each keyed on the operator,
# so at most a few apply to one term).
_FAMILIES: tuple[Callable[[str, tuple[Expr, ...]], Expr | None], ...] = (
    _units, _relations, _normal_forms, _conjunction, _implication, _membership)


def _rewrite_once(expr: Expr, rules: list[Rule], ctx: Context, default_set: bool, numerals: str,
                  bound: frozenset[str] = frozenset()) -> Expr:
    """One bottom-up pass."""
    if isinstance(expr, Op):
        expr = Op(expr.op, tuple(_rewrite_once(a, rules, ctx, default_set, numerals, bound) for a in expr.args))
    elif isinstance(expr, App):
        expr = App(expr.fn, tuple(_rewrite_once(a, rules, ctx, default_set, numerals, bound) for a in expr.args))
    elif isinstance(expr, Binder) and expr.kind in ("∀", "∃"):
        inner_ctx = {**ctx, expr.name: expr.ty} if expr.ty is not None else ctx
        body = _rewrite_once(expr.body, rules, inner_ctx, default_set, numerals, bound | {expr.name})
        expr = Binder(expr.kind, expr.name, expr.ty, body)
    for rule in rules:
        replaced = apply_rule(expr, rule, ctx, bound)
        if replaced is not None and (not _is_permutation(rule) or _key(replaced) < _key(expr)):
            # a commutativity rule rewrites only towards the smaller term (Lean's ordered rewriting), so
            # `simp [or_comm]` normalises instead of looping
            return replaced
    if default_set:
        step = _builtin(expr, ctx, numerals)
        if step is not None:
            return step
    elif numerals != "none" and isinstance(expr, Op) and not is_numeral(expr):
        step = _builtin(expr, ctx, numerals)
        # `simp only` still evaluates literals (simprocs) and closes `a = a`
        if step is not None and (step in (TRUE, FALSE) or is_numeral(step)):
            return step
    return expr


def _is_permutation(rule: Rule) -> bool:
    if rule.tel is None:
        return False
    return sorted(repr(v) for v in _metas_of(rule.lhs, rule.tel)) == sorted(repr(v) for v in _metas_of(rule.rhs,
                                                                                                         rule.tel)) \
        and len(repr(rule.lhs)) == len(repr(rule.rhs))


def _metas_of(expr: Expr, tel: Telescope) -> list[str]:
    return sorted(name for name in free_vars(expr) if name in tel.metas)


def _key(expr: Expr) -> str:
    return repr(expr)


def apply_rule(expr: Expr, rule: Rule, ctx: Context, bound: frozenset[str]) -> Expr | None:
    """`rule.rhs` if `expr` is an instance of `rule.lhs` not mentioning bound variables, else None."""
    if rule.tel is None:
        if alpha_eq(expr, rule.lhs) and not (free_vars(expr) & bound):
            return rule.rhs
        return None
    tel = rule.tel
    saved = dict(tel.assign)
    if _shallow_match(rule.lhs, expr) and match(rule.lhs, expr, tel, ctx) and not (free_vars(expr) & bound) \
            and instance_allowed(tel, ctx):
        rhs = tel.inst(rule.rhs)
        tel.assign.clear()
        tel.assign.update(saved)
        if tel.unassigned(rhs):
            return None
        return rhs
    tel.assign.clear()
    tel.assign.update(saved)
    return None


def _shallow_match(pattern: Expr, expr: Expr) -> bool:
    """Same head symbol (keeps lemma rules from matching through unfoldings at every node)."""
    if isinstance(pattern, Op):
        return isinstance(expr, Op) and expr.op == pattern.op
    if isinstance(pattern, App):
        return isinstance(expr, App)
    return True


def simplify(expr: Expr, rules: list[Rule], ctx: Context, *, default_set: bool, numerals: str) -> Expr:
    """Rewrite to a fixpoint (at most MAX_PASSES passes). `numerals`: "all", "int" (ℕ/ℤ only) or "none"."""
    current = expr
    for _ in range(MAX_PASSES):
        nxt = _rewrite_once(current, rules, ctx, default_set, numerals)
        if nxt == current:
            break
        current = nxt
    return current


def rewrite_first(expr: Expr, rule: Rule, ctx: Context) -> Expr | None:
    """`rw`: instantiate the rule at the first matching subterm (pre-order, left to right), then replace every
    instance of that instantiated left side; None if no subterm matches."""
    instance = _find_instance(expr, rule, ctx, frozenset())
    if instance is None:
        return None
    lhs, rhs = instance
    return _replace_all(expr, lhs, rhs, frozenset())


def _find_instance(expr: Expr, rule: Rule, ctx: Context, bound: frozenset[str]) -> tuple[Expr, Expr] | None:
    if not (free_vars(expr) & bound):
        if rule.tel is None:
            if alpha_eq(expr, rule.lhs):
                return rule.lhs, rule.rhs
        else:
            tel = rule.tel
            saved = dict(tel.assign)
            if _shallow_match(rule.lhs, expr) and match(rule.lhs, expr, tel, ctx) and instance_allowed(tel, ctx):
                lhs, rhs = tel.inst(rule.lhs), tel.inst(rule.rhs)
                tel.assign.clear()
                tel.assign.update(saved)
                if not tel.unassigned(rhs) and not tel.unassigned(lhs):
                    return expr, rhs
            tel.assign.clear()
            tel.assign.update(saved)
    children: tuple[Expr, ...] = ()
    inner_bound = bound
    if isinstance(expr, (Op, App)):
        children = expr.args
    elif isinstance(expr, Binder):
        children = (expr.body,)
        inner_bound = bound | {expr.name}
    for child in children:
        found = _find_instance(child, rule, ctx, inner_bound)
        if found is not None:
            return found
    return None


def _replace_all(expr: Expr, lhs: Expr, rhs: Expr, bound: frozenset[str]) -> Expr:
    if alpha_eq(expr, lhs) and not (free_vars(expr) & bound):
        return rhs
    if isinstance(expr, Op):
        return Op(expr.op, tuple(_replace_all(a, lhs, rhs, bound) for a in expr.args))
    if isinstance(expr, App):
        return App(expr.fn, tuple(_replace_all(a, lhs, rhs, bound) for a in expr.args))
    if isinstance(expr, Binder):
        name, body = expr.name, expr.body
        if name in free_vars(rhs):
            name = fresh_name(name, free_vars(rhs) | free_vars(body))
            body = subst(body, expr.name, Var(name))
        return Binder(expr.kind, name, expr.ty, _replace_all(body, lhs, rhs, bound | {name}))
    return expr

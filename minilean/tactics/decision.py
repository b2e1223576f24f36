"""The decision tactics, through z3 in `minilean.procedures` on exactly the facts the real tactic collects:
`linarith`, `nlinarith`, `omega`, `tauto`; and `ring`, `ring_nf` (polynomial normal forms) and `positivity`
(Mathlib's positivity extensions, syntactic).

    tac_linarith(engine, goal, "[sq_nonneg x]")
"""

from __future__ import annotations

import re

from minilean.arith import closed_value
from minilean.elab import INT, NAT, NUMBER_TYPES, is_type, type_of
from minilean.goals import Goal, Hyp, TacticError, number_inaccessible, pp_goal
from minilean.parser import parse
from minilean.procedures import linarith_refutes, omega_proves, omega_relevant, tauto_proves
from minilean.syntax import FALSE, Binder, Expr, Num, Op, Sci, pp
from minilean.tactics.base import TacticEngine
from minilean.tactics.intro import _intro_one
from minilean.tactics.script import split_top


def _extra_facts(engine: TacticEngine, goal: Goal, rest: str) -> list[Expr]:
    rest = rest.strip()
    rest = re.sub(r"^\(config\s*:=[^)]*\)\s*", "", rest)
    if not rest:
        return []
    if not (rest.startswith("[") and rest.endswith("]")):
        raise TacticError(f"unexpected token; expected '['\n  {rest}")
    return [engine.infer_term(goal, parse(item)) for item in split_top(rest[1:-1], ",") if item.strip()]


def _negated_goal_hyp(target: Expr, ctx: dict[str, Expr]) -> Expr | None:
    """The hypothesis `a✝` linarith adds: the negated goal, as Mathlib prints it. Mathlib negates through `not_lt`
    and `not_le`, which turn the sides around (`a < b` gives `b ≤ a`, `a ≤ b` gives `b < a`); `≥` and `>` are
    `≤` and `<` read backwards, so their negations read forwards (`a ≥ b` gives `a < b`); an equation is proved
    as two inequalities, the first failing one shown (`a = b`: `a < b`)."""
    if isinstance(target, Op):
        a, b = target.args if len(target.args) == 2 else (None, None)
        if a is None or b is None:
            return None
        turned = {"<": ("≤", (b, a)), "≤": ("<", (b, a)), ">": ("≤", (a, b)), "≥": ("<", (a, b)),
                  "=": ("<", (a, b))}
        if target.op in turned:
            op, args = turned[target.op]
            return Op(op, args)
    return None


def _linarith(engine: TacticEngine, goal: Goal, rest: str, products: bool) -> tuple[Goal, ...]:
    extra = _extra_facts(engine, goal, rest)
    ctx = dict(goal.ctx)
    facts = [h.ty for h in goal.hyps if not is_type(h.ty)] + extra
    target = goal.target
    order_goal = isinstance(target, Op) and target.op in ("<", "≤", ">", "≥", "=") and (
        type_of(target.args[0], ctx) or type_of(target.args[1], ctx) or NAT) in NUMBER_TYPES
    goal_for_z3 = target if order_goal else None
    if linarith_refutes(facts, goal_for_z3, ctx, products=products, timeout_ms=engine.timeout_ms):
        return ()
    negated = _negated_goal_hyp(target, ctx) if order_goal else None
    hyps = goal.hyps
    if negated is not None:
        hyps = (*hyps, Hyp("a✝", negated, ""))
    shown = Goal(hyps, FALSE, goal.case, goal.mvar)
    # Mathlib: `throwError "linarith failed to find a contradiction\n{g}\n{e.toMessageData}"`, the oracle's own error
    # being `failed` (Mathlib/Tactic/Linarith/Frontend.lean).
    raise TacticError(f"linarith failed to find a contradiction\n{pp_goal(shown)}\nfailed")


def tac_linarith(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    return _linarith(engine, goal, rest, products=False)


def tac_nlinarith(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    return _linarith(engine, goal, rest, products=True)


def tac_omega(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    ctx = dict(goal.ctx)
    facts = [h.ty for h in goal.hyps if not is_type(h.ty) and omega_relevant(h.ty, ctx)]
    target = goal.target if omega_relevant(goal.target, ctx) else FALSE
    if omega_proves(facts, target, ctx, timeout_ms=engine.timeout_ms):
        return ()
    if not facts and target == FALSE:
        raise TacticError("omega could not prove the goal:\nNo usable constraints found for the hypotheses and goal.")
    listing = "\n".join(f"  {pp(f)}" for f in [*facts, Op("¬", (target,))] if f != Op("¬", (FALSE,)))
    raise TacticError(f"omega could not prove the goal:\na possible counterexample may satisfy the constraints\n"
                      f"{listing}")


def tac_tauto(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    # tauto introduces first (`intros`), then decides the propositional structure
    while (isinstance(goal.target, Binder) and goal.target.kind == "∀") or (
            isinstance(goal.target, Op) and goal.target.op in ("→", "¬")):
        goal = number_inaccessible(_intro_one(engine, goal, None))
    facts = [h.ty for h in goal.hyps if not is_type(h.ty)]
    if tauto_proves(facts, goal.target, goal.ctx, timeout_ms=engine.timeout_ms):
        return ()
    raise TacticError("tauto failed to solve some goals.")


def tac_ring(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    from minilean.arith import Atoms, to_poly

    target = goal.target
    if isinstance(target, Op) and target.op == "=":
        ty = type_of(target.args[0], goal.ctx) or type_of(target.args[1], goal.ctx) or NAT
        if ty in NUMBER_TYPES:
            atoms = Atoms()
            lhs = to_poly(target.args[0], goal.ctx, atoms, ty)
            rhs = to_poly(target.args[1], goal.ctx, atoms, ty)
            if lhs == rhs:
                return ()
    raise TacticError(f"ring failed, ring_nf subsidiary goal\n{pp_goal(goal)}")


def tac_ring_nf(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    try:
        return tac_ring(engine, goal, rest)
    except TacticError:
        raise TacticError("ring_nf failed") from None


def tac_positivity(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    target = goal.target
    want: str | None = None
    term: Expr | None = None
    if isinstance(target, Op) and len(target.args) == 2:
        a, b = target.args
        if target.op in ("<", "≤") and _is_zero(a):
            want, term = ("pos" if target.op == "<" else "nonneg"), b
        elif target.op in (">", "≥") and _is_zero(b):
            want, term = ("pos" if target.op == ">" else "nonneg"), a
        elif target.op == "≠" and _is_zero(b):
            want, term = "nonzero", a
    if want is None or term is None:
        raise TacticError("not a positivity goal")
    got = _positivity(term, goal)
    if got == "pos" or (got == "nonneg" and want == "nonneg") or (got == "nonzero" and want == "nonzero"):
        return ()
    if got == "nonneg" and want == "pos":
        raise TacticError("failed to prove positivity, but it would be possible to prove nonnegativity if desired")
    raise TacticError(f"failed to prove positivity/nonnegativity/nonzeroness\n{pp_goal(goal)}")


def _is_zero(expr: Expr) -> bool:
    from minilean.syntax import Ascr

    return (isinstance(expr, Ascr) and expr.expr == Num(0)) or expr == Num(0)


def _positivity(expr: Expr, goal: Goal) -> str | None:
    """"pos", "nonneg", "nonzero" or None, by Mathlib's positivity extensions (syntactic, hypotheses for atoms)."""
    from minilean.syntax import Ascr

    ty = type_of(expr, goal.ctx)
    if isinstance(expr, Ascr) and isinstance(expr.expr, Num):
        return "pos" if expr.expr.value > 0 else "nonneg"
    if isinstance(expr, Ascr) and isinstance(expr.expr, Sci):
        return "pos" if expr.expr.mantissa > 0 else "nonneg"
    if isinstance(expr, Op):
        return _operation_sign(expr, goal, ty)
    return _atom_sign(expr, goal, ty)


def _operation_sign(expr: Op, goal: Goal, ty: Expr | None) -> str | None:
    """`_positivity` of a sum, product, quotient, power, `|x|`, or ℕ's `-` and `%`."""
    op = expr.op
    parts = [_positivity(a, goal) for a in expr.args] if op != "^" else []
    if op == "+":
        a, b = parts
        if "pos" in (a, b) and a in ("pos", "nonneg") and b in ("pos", "nonneg"):
            return "pos"
        if a in ("pos", "nonneg") and b in ("pos", "nonneg"):
            return "nonneg"
    if op in ("*", "/"):
        a, b = parts
        if a == "pos" and b == "pos":
            return "pos" if not (op == "/" and ty in (NAT, INT)) else "nonneg"
        if a in ("pos", "nonneg") and b in ("pos", "nonneg"):
            return "nonneg"
        if a in ("pos", "nonzero") and b in ("pos", "nonzero") and op == "*":
            return "nonzero"
    if op == "^":
        return _power_sign(expr, goal)
    if op == "abs":
        inner = parts[0]
        return "pos" if inner in ("pos", "nonzero") else "nonneg"
    if op in ("-", "%") and ty == NAT:
        return "nonneg"
    return None


def _power_sign(expr: Op, goal: Goal) -> str | None:
    """`b ^ n`: positive for a positive base, nonnegative (positive for a nonzero base) for an even exponent."""
    base = _positivity(expr.args[0], goal)
    exponent = closed_value(expr.args[1], goal.ctx)
    if base == "pos":
        return "pos"
    if exponent is not None and isinstance(exponent[0], int) and exponent[0] % 2 == 0:
        return "pos" if base == "nonzero" else "nonneg"
    if base == "nonneg":
        return "nonneg"
    if base == "nonzero":
        return "nonzero"
    return None


def _atom_sign(expr: Expr, goal: Goal, ty: Expr | None) -> str | None:
    """An atom's sign from the hypotheses `0 < x`, `0 ≤ x`, `x ≠ 0` (and ℕ's `0 ≤ x`)."""
    found: str | None = "nonneg" if ty == NAT else None
    for hyp in goal.hyps:
        prop = hyp.ty
        if not isinstance(prop, Op) or len(prop.args) != 2:
            continue
        lhs, rhs = prop.args
        if (prop.op == "<" and _is_zero(lhs) and rhs == expr) or (prop.op == ">" and _is_zero(rhs) and lhs == expr):
            return "pos"
        if (prop.op == "≤" and _is_zero(lhs) and rhs == expr) or (prop.op == "≥" and _is_zero(rhs) and lhs == expr):
            found = "nonneg"
        if prop.op == "≠" and lhs == expr and _is_zero(rhs) and found is None:
            found = "nonzero"
    return found

"""Tactics that close a goal or fail: `assumption`, `contradiction`, `trivial`, `rfl`, `decide`, `exact?`, `sorry`
(recorded in the run: hasSorry); and `sleep`, which only adds to the run's sleep (the peers' timeout tests).

    tac_decide(engine, goal, "")                        # () or TacticError with Lean's message
"""

from __future__ import annotations

from minilean.arith import closed_value
from minilean.constants import active
from minilean.defeq import defeq, delta
from minilean.elab import INT, NAT, alpha_eq, is_type, type_of, whnf
from minilean.goals import Goal, TacticError, pp_goal
from minilean.syntax import FALSE, TRUE, Binder, Expr, Op, free_vars, pp
from minilean.tactics.base import TacticEngine
from minilean.tactics.context import whnf_connective

_RFL_FAILED = (
    "The rfl tactic failed. Possible reasons:\n- The goal is not a reflexive relation (neither `=` nor a relation "
    "with a @[refl] lemma).\n- The arguments of the relation are not equal.\nTry using the reflexivity lemma for "
    "your relation explicitly, e.g. `exact Eq.refl _` or\n`exact HEq.rfl` etc.\n"
)

_FREE_VARS = ("Expected type must not contain free variables\n  {}\n\nHint: Use the `+revert` option to "
              "automatically clean up and revert free variables")


def tac_assumption(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    for hyp in reversed(goal.hyps):
        if not is_type(hyp.ty) and defeq(hyp.ty, goal.target, goal.ctx):
            return ()
    raise TacticError(f"tactic 'assumption' failed\n{pp_goal(goal)}")


def tac_contradiction(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    props = [h.ty for h in goal.hyps if not is_type(h.ty)]
    for prop in props:
        if prop == FALSE:
            return ()
        if isinstance(prop, Op) and prop.op == "≠" and alpha_eq(prop.args[0], prop.args[1]):
            return ()
        if isinstance(prop, Op) and prop.op == "¬" and isinstance(prop.args[0], Op) and prop.args[0].op == "=" \
                and alpha_eq(*prop.args[0].args):
            return ()
        value = closed_value(prop, goal.ctx)
        if value is not None and value[0] is False and isinstance(prop, Op) and prop.op == "=" \
                and type_of(prop.args[0], goal.ctx) in (NAT, INT, None):
            return ()  # distinct literals: `Nat` constructors differ
        negated = Op("¬", (prop,))
        if any(defeq(other, negated, goal.ctx) for other in props):
            return ()
    raise TacticError(f"tactic 'contradiction' failed\n{pp_goal(goal)}")


def _discharge(goal: Goal) -> bool:
    target = goal.target
    if target == TRUE:
        return True
    if isinstance(target, Op) and target.op == "=" and defeq(target.args[0], target.args[1], goal.ctx):
        return True
    return any(defeq(h.ty, target, goal.ctx) for h in goal.hyps if not is_type(h.ty))


def tac_trivial(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    if _discharge(goal):
        return ()
    try:
        return tac_decide(engine, goal, "")
    except TacticError:
        pass
    head = whnf_connective(goal.target, goal, ("∧",))
    if isinstance(head, Op):
        left = tac_trivial(engine, engine.new_goal(goal, head.args[0]), "")
        right = tac_trivial(engine, engine.new_goal(goal, head.args[1]), "")
        if not left and not right:
            return ()
    raise TacticError(f"The rfl tactic failed. Possible reasons:\n{pp_goal(goal)}")


def tac_rfl(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    target = whnf(goal.target, goal.ctx)
    if isinstance(target, Op) and target.op in ("=", "↔", "≤", "⊆", "∣") and defeq(target.args[0], target.args[1],
                                                                                  goal.ctx):
        return ()
    raise TacticError(_RFL_FAILED + pp_goal(goal))


def tac_decide(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    locals_used = free_vars(goal.target) & {hyp.name for hyp in goal.hyps}
    if locals_used:
        raise TacticError(_FREE_VARS.format(pp(goal.target)))
    # the kernel's evaluation unfolds every definition; one whose value is `sorry` leaves the instance stuck
    target = delta(goal.target, goal.ctx)
    if free_vars(target) & set(active()):
        raise TacticError(f"tactic 'decide' failed for proposition\n  {pp(goal.target)}\nsince its 'Decidable' "
                          "instance did not reduce to 'isTrue' or 'isFalse'.")
    if _mentions_field(target, goal):
        raise TacticError(f"failed to synthesize\n  Decidable ({pp(target)})\nAdditional diagnostic information may "
                          "be available using the `set_option diagnostics true` command.")
    value = closed_value(target, goal.ctx)
    if value is None:
        raise TacticError(f"failed to synthesize\n  Decidable ({pp(target)})\nAdditional diagnostic information may "
                          "be available using the `set_option diagnostics true` command.")
    if value[0] is True:
        return ()
    raise TacticError(f"tactic 'decide' proved that the proposition\n  {pp(goal.target)}\nis false")


def _mentions_field(expr: Expr, goal: Goal) -> bool:
    from minilean.elab import FIELDS
    from minilean.syntax import Ascr

    if isinstance(expr, Ascr):
        return expr.ty in FIELDS
    if isinstance(expr, Op):
        return any(_mentions_field(a, goal) for a in expr.args)
    if isinstance(expr, Binder):
        return expr.ty in FIELDS or _mentions_field(expr.body, goal)
    return False


def tac_exact_search(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    """`exact?` searches Mathlib; minilean has no library search, so it answers as Lean does when none is found."""
    raise TacticError("`exact?` could not close the goal. Try `apply?` to see partial suggestions.")


def tac_sorry(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    engine.run_info.sorried_goals.append(goal)
    return ()


def tac_sleep(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    engine.run_info.sleep_ms += min(int(rest or "0"), 600_000) if rest.strip().isdigit() else 0
    return (goal,)

"""The simp family: `simp` (`dsimp`, `simp only […]`, `at h`), `simp_arith` and `norm_num`, over
`minilean.simp`'s rewriting with the default set or only the given rules.

    tac_norm_num(engine, goal, "[h] at h₁")
"""

from __future__ import annotations

import re

from minilean.defeq import delta
from minilean.elab import alpha_eq, is_type
from minilean.goals import Goal, Hyp, TacticError, pp_goal
from minilean.simp import Rule, simplify
from minilean.syntax import FALSE, TRUE
from minilean.tactics.base import TacticEngine
from minilean.tactics.context import _fresh_mvar
from minilean.tactics.rewrite import _hyp_rule, _make_rule, _rule_list
from minilean.tactics.script import _split_at


def _simp_rules(engine: TacticEngine, goal: Goal, rules_text: str) -> list[Rule]:
    rules: list[Rule] = []
    for reverse, text in _rule_list(rules_text):
        if text == "*":
            for hyp in goal.hyps:
                if not is_type(hyp.ty):
                    rules.append(_hyp_rule(hyp.ty))
            continue
        rules.append(_make_rule(engine, goal, text, reverse, props=True))
    return rules


def _simp_like(engine: TacticEngine, goal: Goal, rest: str, *, default_set: bool, numerals: str,
               name: str) -> tuple[Goal, ...]:
    rest = re.sub(r"^(?:\(config\s*:=[^)]*\)|only)\s*", "", rest) if name == "simp" else rest
    rules_text, locations = _split_at(rest)
    rules = _simp_rules(engine, goal, rules_text)
    progress = False
    if locations is None or "⊢" in locations:
        new_target = simplify(goal.target, rules, goal.ctx, default_set=default_set, numerals=numerals)
        if new_target != goal.target:
            progress = True
            if new_target == TRUE:
                return ()
            goal = Goal(goal.hyps, new_target, goal.case, goal.mvar)
    for location in [loc for loc in (locations or []) if loc != "⊢"]:
        hyp = goal.lookup(location)
        if hyp is None:
            raise TacticError(f"unknown identifier '{location}'")
        own_rules = [r for r in rules if not (r.tel is None and alpha_eq(r.lhs, hyp.ty))]
        new_ty = simplify(hyp.ty, own_rules, goal.ctx, default_set=default_set, numerals=numerals)
        if new_ty == hyp.ty:
            continue
        progress = True
        if new_ty == FALSE:
            return ()
        if new_ty == TRUE:
            goal = Goal(tuple(h for h in goal.hyps if h.uniq != hyp.uniq), goal.target, goal.case, goal.mvar)
            continue
        goal = Goal(tuple(Hyp(h.name, new_ty, engine.uniq()) if h.uniq == hyp.uniq else h for h in goal.hyps),
                    goal.target, goal.case, goal.mvar)
    if (locations is None or "⊢" in locations) and _closes_through_abbrevs(goal, rules, default_set, numerals):
        return ()
    if not progress:
        raise TacticError("simp made no progress")
    if goal.target == FALSE and name == "norm_num" and locations is None:
        raise TacticError(f"unsolved goals\n{pp_goal(goal)}")
    return (_fresh_mvar(engine, goal),)


def _closes_through_abbrevs(goal: Goal, rules: list[Rule], default_set: bool, numerals: str) -> bool:
    """simp and norm_num unify at reducible transparency, which sees through an `abbrev` (`rfl` closes `2 = sol`
    for `abbrev sol : ℕ := 2`, a `def` stays opaque): the target closes when it does with the abbrevs unfolded."""
    unfolded = delta(goal.target, goal.ctx, reducible_only=True)
    return unfolded != goal.target and simplify(unfolded, rules, goal.ctx, default_set=default_set,
                                                 numerals=numerals) == TRUE


def tac_simp(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    only = re.match(r"only\b", rest.strip()) is not None
    return _simp_like(engine, goal, rest.strip(), default_set=not only, numerals="int", name="simp")


def tac_norm_num(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    return _simp_like(engine, goal, rest.strip(), default_set=True, numerals="all", name="norm_num")


def tac_simp_arith(engine: TacticEngine, goal: Goal, rest: str) -> tuple[Goal, ...]:
    return _simp_like(engine, goal, rest.strip(), default_set=True, numerals="all", name="simp")

"""The tactics minilean runs, by name: each a function `(engine, goal, rest of the text) -> goals replacing goal`.

    handler = _TACTICS.get("simp")
"""

from __future__ import annotations

from collections.abc import Callable

from minilean.goals import Goal
from minilean.tactics.base import TacticEngine
from minilean.tactics.cases import tac_cases, tac_cases_prime, tac_obtain, tac_rcases
from minilean.tactics.closing import (
    tac_assumption,
    tac_contradiction,
    tac_decide,
    tac_exact_search,
    tac_rfl,
    tac_sleep,
    tac_sorry,
    tac_trivial,
)
from minilean.tactics.construct import tac_constructor, tac_exfalso, tac_exists, tac_left, tac_right, tac_use
from minilean.tactics.decision import (
    tac_linarith,
    tac_nlinarith,
    tac_omega,
    tac_positivity,
    tac_ring,
    tac_ring_nf,
    tac_tauto,
)
from minilean.tactics.exact import tac_apply, tac_calc, tac_exact, tac_have, tac_refine, tac_show, tac_specialize
from minilean.tactics.intro import tac_by_contra, tac_ext, tac_intro, tac_intros, tac_rintro
from minilean.tactics.rewrite import tac_push_neg, tac_rw, tac_rwa, tac_subst, tac_unfold
from minilean.tactics.simplify import tac_norm_num, tac_simp, tac_simp_arith

_TACTICS: dict[str, Callable[[TacticEngine, Goal, str], tuple[Goal, ...]]] = {
    "intro": tac_intro,
    "intros": tac_intros,
    "rintro": tac_rintro,
    "rcases": tac_rcases,
    "obtain": tac_obtain,
    "cases": tac_cases,
    "cases'": tac_cases_prime,
    "constructor": tac_constructor,
    "left": tac_left,
    "right": tac_right,
    "exfalso": tac_exfalso,
    "exact": tac_exact,
    "refine": tac_refine,
    "apply": tac_apply,
    "use": tac_use,
    "exists": tac_exists,
    "assumption": tac_assumption,
    "contradiction": tac_contradiction,
    "trivial": tac_trivial,
    "rfl": tac_rfl,
    "decide": tac_decide,
    "unfold": tac_unfold,
    "have": tac_have,
    "show": tac_show,
    "specialize": tac_specialize,
    "subst": tac_subst,
    "rw": tac_rw,
    "rewrite": tac_rw,
    "rwa": tac_rwa,
    "simp": tac_simp,
    "dsimp": tac_simp,
    "simp_arith": tac_simp_arith,
    "norm_num": tac_norm_num,
    "linarith": tac_linarith,
    "nlinarith": tac_nlinarith,
    "positivity": tac_positivity,
    "omega": tac_omega,
    "tauto": tac_tauto,
    "ring": tac_ring,
    "ring_nf": tac_ring_nf,
    "ext": tac_ext,
    "calc": tac_calc,
    "exact?": tac_exact_search,
    "by_contra": tac_by_contra,
    "push_neg": tac_push_neg,
    "sorry": tac_sorry,
    "admit": tac_sorry,
    "sleep": tac_sleep,
}

TACTIC_NAMES = frozenset(_TACTICS)

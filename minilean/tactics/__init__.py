"""The tactic engine: Lean 4 tactic scripts run on goals, with Lean's behaviour and messages.

    engine = Engine(uniq=counter)
    goals = engine.run((goal,), "intro x h₀")          # raises TacticError with Lean's message

A script splits as Lean parses a tactic sequence (lines at the base indentation, `;`, `<;>`, `·`, `(t)`, `case`,
`next`, `all_goals`, `any_goals`, `try`, `first`, `repeat`: `script`, `engine`); the tactics themselves are in
`table._TACTICS`, one module per family: `intro` (intro, intros, rintro, by_contra, ext), `cases` (rcases, obtain,
cases, cases'), `construct` (constructor, left, right, exfalso, use, exists), `exact` (exact, refine, apply, have,
show, specialize, calc), `closing` (assumption, contradiction, trivial, rfl, decide, exact?, sorry, sleep), `rewrite`
(unfold, subst, rw, rwa, push_neg), `simplify` (simp, dsimp, simp_arith, norm_num) and `decision` (linarith,
nlinarith, omega, tauto, ring, ring_nf, positivity); each takes a `TacticEngine` (`base`) and the goal, and the local
context helpers they share are in `context`. The decision tactics call z3 through `minilean.procedures` on exactly the
facts the real tactic collects. docs/minilean.md, "Tactics and their scope", gives each tactic's behaviour and message
and says which texts are approximated.
"""

from __future__ import annotations

from minilean.tactics.base import Run, TacticEngine
from minilean.tactics.engine import MAX_DEPTH, OUTSIDE_FRAGMENT, Engine
from minilean.tactics.script import split_blocks, split_top
from minilean.tactics.table import TACTIC_NAMES

__all__ = ["MAX_DEPTH", "OUTSIDE_FRAGMENT", "TACTIC_NAMES", "Engine", "Run", "TacticEngine", "split_blocks",
           "split_top"]

"""Where a tactic starts, as Lean's parsers have it: the tokens right before a tactic argument in the syntax
declarations of core Lean 4, Batteries and Mathlib (`try tac`, `t <|> t'`, `t <;> t'`, `first | t`, `case h => t`,
`(t)`, `· t`, `t; t'`, `by t`, `(disch := t)`, …). The tactic guard's configuration rule reads a `(name := V)` after
a name standing at such a place as a tactic's configuration, which Lean compiles and runs
(`burnqed.lean.guard.configuration_problem`; docs/lean.md, "The tactic guard").

Read from the sources by `scripts/tactic_combinators.py`, which prints any token it finds before a tactic that is
missing here (docs/results.md, "Where a tactic starts, read from the parsers", 2026-11-29), at:

    core Lean 4   src/Init/Tactics.lean at 00165f83 and its newest stored version (a `module` file, Lean
                  >= v4.22), src/Init/TacticsExtra.lean (newest), src/Init/Conv.lean 00312708,
                  src/Lean/Parser/Tactic.lean 0514f7ca, byTactic
                  and the tacticSeq parsers of src/Lean/Parser/Term.lean, cdot and solve of
                  src/Init/NotationExtra.lean (through the search index: the repository is over what `fetch`
                  brings)
    Mathlib       fd003e0d8c36fac53d984f5935a44b6f61cbeaf3 (the fork Vierkantor/mathlib4, Lean v4.21.0-rc3)
    Batteries     45f65c8b8292f98a70a0eccb706f89bb3e69feab
    Aesop         b5b9e2bb45ce91e4bc44eaa738c3a8910404ab82 (no tactic argument)
"""

from __future__ import annotations

# The tokens right before a tactic argument, read from the sources above; a symbol made of several characters
# (`<|>`, `<;>`, `=>`) is matched on the symbols the guard's reader splits it into.
BEFORE_A_TACTIC: frozenset[str] = frozenset({
    # core: Init/Tactics.lean, Init/TacticsExtra.lean (`iterate`), Lean/Parser/Term.lean (`by`, `{ … }`, `;`),
    # Init/NotationExtra.lean (`·`, `.`)
    "all_goals", "any_goals", "focus", "fail_if_success", "with_reducible", "with_reducible_and_instances",
    "with_unfolding_all", "try", "repeat", "repeat'", "repeat1'", "stop", "unhygienic", "checkpoint", "show_term",
    "classical", "iterate", "then", "else", "with", "by", "by?", "=>", "|", "(", "<;>", ";", "{", "·", ".",
    # Mathlib, Batteries
    "recover", "repeat1", "fail_if_no_progress", "says", "try_this", "squeeze_scope", "[",
    # not in the files read above, kept from the guard's earlier list: core's `orelse` tactic (`t <|> t'`), and
    # `with_unfolding_none`, `decreasing_by`, `decreasing_with` over a tactic sequence
    "<|>", "with_unfolding_none", "decreasing_by", "decreasing_with",
})
# The first atom of a declaration whose tactic argument follows another argument (a term, an identifier):
# `success_if_fail_with_msg "m" tac` (Mathlib), `with_annotate_state stx tac` (core, scoped). After one of these
# anywhere in a text, every named value counts as a configuration.
AFTER_AN_ARGUMENT: frozenset[str] = frozenset({"success_if_fail_with_msg", "with_annotate_state"})
# `(NAME := tac)`: the names whose value is a tactic (core's `discharger`, Mathlib's `normStx`), so what follows
# their `:=` is where a tactic starts.
TACTIC_VALUED: frozenset[str] = frozenset({"disch", "discharger", "norm"})

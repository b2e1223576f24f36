"""The refusals of recursive sketch search and of the lemma library read directly, with exact values: a hole no
declaration can state is not planned again (`search.recursion.lemma_of`); the mutation run's survivors
(scripts/mutation.py, docs/results.md) are each read here."""

from __future__ import annotations

from burnqed.records.replies import Goal, Variable
from burnqed.records.theorem import Theorem
from burnqed.search.recursion import lemma_of
from burnqed.search.root import Root

THEOREM = Theorem(name="t", signature="(x : ℕ) : x = x", header="import Mathlib")


def test_a_hole_whose_goal_no_declaration_can_state_is_not_planned_again_and_says_why() -> None:
    inaccessible = Root(goal=Goal("x = x", (Variable("x✝", "ℕ", inaccessible=True),)))
    assert lemma_of(THEOREM, "h", inaccessible) == "the hypothesis x✝ is inaccessible: no binder can name it"
    stated = lemma_of(THEOREM, "h", Root(goal=Goal("x = x", (Variable("x", "ℕ"),))))
    assert stated == Theorem(name="t.h", signature="(x : ℕ) : x = x", header="import Mathlib")

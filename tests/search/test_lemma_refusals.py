"""The refusals of recursive sketch search and of the lemma library read directly, with exact values: a hole no
declaration can state is not planned again (`search.recursion.lemma_of`); the mutation run's survivors
(scripts/mutation.py, docs/results.md) are each read here."""

from __future__ import annotations

from burnqed.records.replies import Goal, Variable
from burnqed.records.results import SubgoalSource
from burnqed.records.theorem import Theorem
from burnqed.search.goal_keys import closed_key
from burnqed.search.lemma_graph import Frame, GoalGraph
from burnqed.search.lemmas import KEY_MISMATCH, LemmaEntry, LemmaLibrary, entry_of, refusal
from burnqed.search.recursion import lemma_of
from burnqed.search.root import Root
from burnqed.search.subgoal_cache import subgoal_key
from burnqed.text.sketch import Sketch, read_sketch
from tests.search.test_lemma_poison import CONTEXT, ENV, GUARD, HOLE, TRAIN

THEOREM = Theorem(name="t", signature="(x : ℕ) : x = x", header="import Mathlib")


def lemma_entry(tactics: list[str], goal: Goal = HOLE) -> LemmaEntry:
    return entry_of(goal, None, tactics, ENV, TRAIN)


def test_a_hole_whose_goal_no_declaration_can_state_is_not_planned_again_and_says_why() -> None:
    inaccessible = Root(goal=Goal("x = x", (Variable("x✝", "ℕ", inaccessible=True),)))
    assert lemma_of(THEOREM, "h", inaccessible) == "the hypothesis x✝ is inaccessible: no binder can name it"
    stated = lemma_of(THEOREM, "h", Root(goal=Goal("x = x", (Variable("x", "ℕ"),))))
    assert stated == Theorem(name="t.h", signature="(x : ℕ) : x = x", header="import Mathlib")


def test_a_let_value_is_part_of_its_hypothesis_closed_key_and_a_draft_s_hole_value_is_not() -> None:
    goal = Goal("n + m = 5", (Variable("n", "ℕ", value="5"), Variable("m", "ℕ", value=" ?m.3 "),
                              Variable("h", "n = m")))
    assert closed_key(goal, "import  Mathlib\nopen Nat").text == (
        "header import Mathlib open Nat\n∀ _0 : ℕ := 5\n∀ _1 : ℕ\n∀ _2 : _0 = _1\n⊢ _0 + _1 = 5")


async def _never() -> int:
    raise AssertionError("no lemma is started again here")


def test_a_hole_restates_an_ancestor_only_with_the_holes_before_it_as_hypotheses_and_is_recorded_once() -> None:
    graph = GoalGraph(header=None, depth=3)
    context = (Variable("x", "ℝ"), Variable("y", "ℝ"), Variable("h₀", "0 < x"))
    root = graph.root(Goal("0 < x * y + x", context))
    child = graph.place(Goal("0 < x * y", context), 1)
    frame = Frame(child, (root, child), THEOREM, _never, "k")
    later = read_sketch("have hy : 0 < y := by sorry\nhave hq : 0 < x * y + x := by sorry\nexact hq")
    assert isinstance(later, Sketch) and graph.restated(later, frame) is None and graph.refused == []
    alone = read_sketch("have hq : 0 < x * y + x := by sorry\nexact hq")
    assert isinstance(alone, Sketch)
    ancestor = (f"the hole hq restates its ancestor goal 0 (closed key {root.closed.digest[:16]}): refused before "
                "Lean, a cycle")
    assert graph.restated(alone, frame) == ancestor
    parent = (f"the hole hq restates the goal it decomposes (closed key {child.closed.digest[:16]}): refused before "
              "Lean, a cycle")
    assert graph.restates("hq", Goal("0 < x * y", context), frame) == parent
    assert graph.refused == [ancestor, parent]


def test_a_goal_alike_is_a_proved_other_node_of_its_closed_key_under_another_exact_key() -> None:
    graph = GoalGraph(header=None, depth=3)
    first = graph.place(Goal("0 < a", (Variable("a", "ℝ"), Variable("h", "0 < a"))), 1)
    renamed = graph.place(Goal("0 < b", (Variable("b", "ℝ"), Variable("h", "0 < b"))), 1)
    same = graph.place(Goal("0 < a", (Variable("a", "ℝ"), Variable("h", "0 < a"))), 2)
    assert same is first and graph.alike(renamed) is None
    first.close(["exact h"], SubgoalSource.SEARCH)
    assert graph.alike(renamed) is first and graph.alike(first) is None


def test_each_refusal_before_lean_names_what_it_refused() -> None:
    honest = lemma_entry(["nlinarith [h₀, h₁]"])
    assert refusal(honest, ENV, GUARD, {"another digest": "held"}) is None
    assert refusal(honest, ENV, GUARD, {honest.digest: "held: why"}) == "held: why"
    assert refusal(honest.model_copy(update={"closed_key": "x"}), ENV, GUARD, {}) == KEY_MISMATCH.format(
        which="closed")
    valued = lemma_entry(["nlinarith [h₀, h₁]"], Goal("0 < x * y", (*CONTEXT, Variable("n", "ℕ", value="sorry"))))
    assert refusal(valued, ENV, GUARD, {}) == "its statement's hypothesis n is refused: matches deny pattern " + repr(
        r"\bsorry\b")
    let = lemma_entry(["nlinarith [h₀, h₁]"], Goal("0 < x * y", (*CONTEXT, Variable("n", "ℕ", value="3"))))
    assert refusal(let, ENV, GUARD, {}) is None
    open_type = lemma_entry(["nlinarith [h₀, h₁]"], Goal("0 < x * y", (*CONTEXT, Variable("h", "(0 <"))))
    assert refusal(open_type, ENV, GUARD, {}) == "its statement's hypothesis h is refused: it leaves '(' open " \
        "(character 0)"
    closing = lemma_entry(["nlinarith [h₀, h₁]"], Goal("0 < x * y)", CONTEXT))
    assert refusal(closing, ENV, GUARD, {}) == ("its statement's target is refused: it closes a bracket ')' it never "
                                                "opened (character 9)")


def test_a_hole_is_offered_its_exact_entries_then_its_renamed_ones_shortest_first_up_to_the_limit_once_each() -> None:
    short, long = lemma_entry(["positivity"]), lemma_entry(["nlinarith [h₀, h₁]"])
    renamed_goal = Goal("0 < a * b", (Variable("a", "ℝ"), Variable("b", "ℝ"), Variable("ha", "0 < a"),
                                      Variable("hb", "0 < b")))
    renamed = lemma_entry(["exact mul_pos ha hb"], renamed_goal)
    library = LemmaLibrary.of([long, renamed, short])
    source = library.source(ENV, GUARD, {})
    exact, closed = subgoal_key(HOLE, None), closed_key(HOLE, None)
    offered = source.lemma_candidates(exact, closed, HOLE, 3)
    assert [c.tactics for c in offered] == [("positivity",), ("nlinarith [h₀, h₁]",), ("exact mul_pos h₀ h₁",)]
    assert [c.tactics for c in source.lemma_candidates(exact, closed, HOLE, 1)] == [("positivity",)]
    assert [c.tactics for c in source.lemma_candidates(exact, closed, HOLE, 2)] == [("positivity",),
                                                                                     ("nlinarith [h₀, h₁]",)]
    source.lemma_outcome(offered[0], exact, accepted=False)
    assert [c.tactics for c in source.lemma_candidates(exact, closed, HOLE, 1)] == [("nlinarith [h₀, h₁]",)]
    assert (source.stats.lookups, source.stats.offered, source.stats.rejected, source.stats.refused) == (4, 7, 1, 0)


def test_an_entry_under_a_header_passes_the_key_check_under_that_header() -> None:
    """`refusal` forms the keys under the entry's own header (a mutation run's survivor, 2026-11-29)."""
    headed = entry_of(HOLE, "import Mathlib", ["positivity"], ENV, TRAIN)
    assert refusal(headed, ENV, GUARD, {}) is None
    assert headed.key == subgoal_key(HOLE, "import Mathlib").text != subgoal_key(HOLE, None).text


def test_a_renamed_entry_refused_before_lean_is_never_offered_and_an_exact_one_is_offered_as_it_is() -> None:
    """An entry under the hole's closed key only is renamed, and only if nothing refuses it first; an entry under
    its exact key is offered as it is, not as a renamed one (the file lemma a closed-key hit becomes): two of a
    mutation run's survivors of `LibrarySource._candidate` (2026-11-29)."""
    renamed_goal = Goal("0 < a * b", (Variable("a", "ℝ"), Variable("b", "ℝ"), Variable("ha", "0 < a"),
                                      Variable("hb", "0 < b")))
    poisoned = lemma_entry(["exact mul_pos ha hb"], renamed_goal).model_copy(update={"axioms": ["sorryAx"]})
    exact, closed = subgoal_key(HOLE, None), closed_key(HOLE, None)
    refused = LemmaLibrary.of([poisoned]).source(ENV, GUARD, {})
    assert refused.lemma_candidates(exact, closed, HOLE, 3) == []
    assert (refused.stats.refused, refused.refused) == (1, {poisoned.name: "its axioms at insert go beyond propext, "
                                                                              "Classical.choice, Quot.sound: sorryAx"})
    served = LemmaLibrary.of([lemma_entry(["positivity"]), lemma_entry(["exact mul_pos ha hb"], renamed_goal)])
    offered = served.source(ENV, GUARD, {}).lemma_candidates(exact, closed, HOLE, 3)
    assert [(c.tactics, c.closed) for c in offered] == [(("positivity",), False), (("exact mul_pos h₀ h₁",), True)]

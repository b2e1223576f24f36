"""Recursive sketch search on a lemma graph (docs/search.md, "Recursive sketches"): the two keys of a goal, the lemma
source's lookup point, a hole planned again down to `search.sketch_depth` levels, a goal proved once closing every
place it appears, and a hole that restates its goal or an ancestor refused before Lean; against minilean,
in-process, with a scripted planner."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from burnqed.config import LeanConfig
from burnqed.errors import LeanStatesLostError
from burnqed.eval.pass_at import build_eval_result
from burnqed.eval.result import load_eval_result, write_eval_result
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay
from burnqed.policy.base import Sampling
from burnqed.records.replies import Goal, SketchResult, Variable
from burnqed.records.results import SketchOutcome, SubgoalSource
from burnqed.records.theorem import Theorem
from burnqed.search.goal_keys import LemmaCandidate, closed_key, closed_key_of, translate
from burnqed.search.skeleton import SearchOutcome
from burnqed.search.sketch_settings import SketchSettings
from burnqed.search.sketching import prove_sketch
from burnqed.search.step import StepSettings
from burnqed.search.subgoal_cache import SubgoalKey, subgoal_key
from burnqed.storage import Store
from burnqed.text.sketch import Sketch
from burnqed.trajectory.theorem_tree import render_sketches
from leankit.version import PantographVersion
from tests.doubles.line_servers import MiniLean
from tests.doubles.policy_double import ScriptedPolicy

pytestmark = pytest.mark.usefixtures("minilean_in_process")

GUARD = TacticGuard.from_config(LeanConfig())
PLANNER = ("Sketch a proof", "This Lean 4 proof sketch failed:")
THEOREM = Theorem(name="t", signature="(x y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) : 0 < x * y + x")
SKETCH = "have hxy : 0 < x * y := by sorry\nhave hx : 0 < x := sorry\nnlinarith [hxy, hx]"
CONTEXT = (Variable("x", "ℝ"), Variable("y", "ℝ"), Variable("h₀", "0 < x"), Variable("h₁", "0 < y"))


def lean() -> InProcessReplay:
    return InProcessReplay(MiniLean(version=PantographVersion.parse("0.3.4")))


def target(prompt: str) -> str:
    return [line.strip() for line in prompt.split("\n") if line.strip().startswith("⊢")][-1]


def policy(sketches: Callable[[str], str], proofs: dict[str, str]) -> ScriptedPolicy:
    """The planner answers `sketches(prompt)`; a subgoal prompt is answered from `proofs` by its target (else a
    `have` that closes nothing)."""

    def answer(prompt: str) -> list[tuple[str, float]]:
        if prompt.startswith(PLANNER):
            return [(sketches(prompt), -0.5)]
        return [(proofs.get(target(prompt), f"have h{len(prompt)} : (1 : ℝ) = 1 := by norm_num"), -0.1)]

    return ScriptedPolicy(answer, key=lambda prompt: prompt, tokens=len)


def settings(**given: object) -> SketchSettings:
    base: dict[str, object] = {"sampling": Sampling(n=1, stop=("```",)), "max_nodes": 12,
                               "subgoal": StepSettings(sampling=Sampling(n=1), revisits=0)}
    return SketchSettings(**{**base, **given})  # type: ignore[arg-type]


def search(planner: ScriptedPolicy, config: SketchSettings, theorem: Theorem = THEOREM) -> SearchOutcome:
    return asyncio.run(prove_sketch(theorem, lean(), planner, config, GUARD))


# ------------------------------------------------------------------------------------------------ the keys


def test_the_closed_key_is_the_goal_up_to_its_hypotheses_names_and_the_exact_key_is_not() -> None:
    goal = Goal("0 < x * y", CONTEXT)
    renamed = Goal("0 < a * b", (Variable("a", "ℝ"), Variable("b", "ℝ"), Variable("ha", "0 < a"),
                                 Variable("hb", "0 < b")))
    assert closed_key(goal, None) == closed_key(renamed, None)
    assert subgoal_key(goal, None) != subgoal_key(renamed, None)
    assert closed_key(goal, None).text == "header \n∀ _0 : ℝ\n∀ _1 : ℝ\n∀ _2 : 0 < _0\n∀ _3 : 0 < _1\n⊢ 0 < _0 * _1"
    # The order of the hypotheses, the header and the target are part of it; a projection's field is no name.
    swapped = Goal("0 < x * y", (CONTEXT[1], CONTEXT[0], *CONTEXT[2:]))
    assert closed_key(swapped, None) != closed_key(goal, None)
    assert closed_key(goal, "open Real") != closed_key(goal, None)
    assert closed_key_of([(v.name, v.type) for v in CONTEXT], "0 < x * y", None) == closed_key(goal, None)
    assert translate(["nlinarith [h₀, h₁, mul_pos h₀ h₁, x.le]", "exact h₁"], goal, renamed) == [
        "nlinarith [ha, hb, mul_pos ha hb, a.le]", "exact hb"]
    # Two names swapped stay swapped; contexts of two lengths have no place-wise renaming.
    swap = Goal("0 < x * y", (CONTEXT[0], CONTEXT[1], Variable("h₁", "0 < x"), Variable("h₀", "0 < y")))
    assert translate(["exact mul_pos h₀ h₁"], goal, swap) == ["exact mul_pos h₁ h₀"]
    assert translate(["exact h₀"], goal, Goal("0 < x", CONTEXT[:3])) is None


# ------------------------------------------------------------------------------------------ the lemma source


class Library:
    """A lemma source holding proofs by closed key (text), telling what it was asked and what Lean said."""

    def __init__(self, proofs: dict[str, list[tuple[str, ...]]]) -> None:
        self.proofs = proofs
        self.asked: list[tuple[str, str]] = []
        self.outcomes: list[tuple[tuple[str, ...], bool]] = []

    def lemma_candidates(self, exact: SubgoalKey, closed: SubgoalKey, goal: Goal,
                         limit: int) -> Sequence[LemmaCandidate]:
        self.asked.append((goal.target, closed.text.rsplit("\n", 1)[-1]))
        return [LemmaCandidate(tactics, "planted") for tactics in self.proofs.get(closed.text, [])][:limit]

    def lemma_outcome(self, candidate: LemmaCandidate, exact: SubgoalKey, accepted: bool) -> None:
        self.outcomes.append((candidate.tactics, accepted))


def test_a_lemma_source_is_asked_before_a_hole_is_searched_and_its_proof_counts_only_when_lean_closes_it() -> None:
    hxy = closed_key(Goal("0 < x * y", CONTEXT), None).text
    library = Library({hxy: [("exact h₁",), ("nlinarith [h₀, h₁]",)]})  # the first is no proof of it
    planner = policy(lambda _: SKETCH, {"⊢ 0 < x": "exact h₀"})
    outcome = search(planner, settings(lemmas=library))
    assert outcome.result.proved, outcome.result.detail
    assert [(s.name, s.source, s.tactics) for s in outcome.result.sketches[0].subgoals] == [
        ("hxy", SubgoalSource.LIBRARY, ["nlinarith [h₀, h₁]"]), ("hx", SubgoalSource.SEARCH, ["exact h₀"])]
    assert library.outcomes == [(("exact h₁",), False), (("nlinarith [h₀, h₁]",), True)]
    assert [asked[0] for asked in library.asked] == ["0 < x * y", "0 < x"]
    # No subgoal prompt for hxy: only hx was searched.
    shown = [target(p) for call in planner.calls for p in call if not p.startswith(PLANNER)]
    assert shown == ["⊢ 0 < x"]


# -------------------------------------------------------------------------------------------- recursion

NESTED = "have hxy : 0 < x * y := by sorry\nhave hx : 0 < x := by sorry\nnlinarith [hxy, hx]"
LEMMA = "have hpx : 0 < x := by sorry\nhave hpy : 0 < y := by sorry\nnlinarith [hpx, hpy]"
LEAVES = {"⊢ 0 < x": "exact h₀", "⊢ 0 < y": "exact h₁"}  # nothing proves 0 < x * y in one step


def planned(theorem_sketch: str, lemma_sketch: str) -> Callable[[str], str]:
    """The planner: the theorem's prompt gets `theorem_sketch`, a lemma's (`theorem t.NAME …`) `lemma_sketch`."""
    return lambda prompt: lemma_sketch if "theorem t." in prompt else theorem_sketch


def test_a_hole_whose_search_fails_is_planned_again_and_closed_by_its_lemma_s_sketch() -> None:
    planner = policy(planned(NESTED, LEMMA), LEAVES)
    outcome = search(planner, settings(sketch_depth=2, max_nodes=20))
    result = outcome.result
    assert result.proved, result.detail
    [sketch] = result.sketches
    inner = "have hpx : 0 < x := by\n  exact h₀\nhave hpy : 0 < y := by\n  exact h₁\nnlinarith [hpx, hpy]"
    assert [(s.name, s.source, s.tactics) for s in sketch.subgoals] == [
        ("hxy", SubgoalSource.SKETCH, ["have hpx : 0 < x := by\n  exact h₀", "have hpy : 0 < y := by\n  exact h₁",
                                       "nlinarith [hpx, hpy]"]),
        ("hx", SubgoalSource.SEARCH, ["exact h₀"])]
    assert result.proof == (
        "theorem t (x y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) : 0 < x * y + x := by\n  have hxy : 0 < x * y := by\n"
        + "\n".join(f"    {line}" for line in inner.split("\n")) + "\n  have hx : 0 < x := by\n    exact h₀\n"
        "  nlinarith [hxy, hx]\n")
    # The lemma was asked with its own declaration; the graph: the theorem, hxy (closed by sketch 1, the lemma's),
    # its two holes one level down, and hx.
    lemma_prompts = [p for call in planner.calls for p in call if "theorem t.hxy (x y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) :"
                     " 0 < x * y" in p]
    assert len(lemma_prompts) == 1
    graph = result.lemma_graph
    assert graph is not None and graph.depth == 2
    assert [(g.id, g.level, g.goal.rsplit("⊢ ", 1)[1], g.places, g.proved, g.source, g.by) for g in graph.goals] == [
        (0, 0, "0 < x * y + x", 1, True, None, None), (1, 1, "0 < x * y", 1, True, SubgoalSource.SKETCH, 1),
        (2, 2, "0 < x", 1, True, SubgoalSource.SEARCH, None), (3, 2, "0 < y", 1, True, SubgoalSource.SEARCH, None),
        (4, 1, "0 < x", 1, True, SubgoalSource.SEARCH, None)]
    assert [(s.id, s.goal, s.holes, s.outcome, s.closed) for s in graph.sketches] == [
        (0, 0, [1, 4], SketchOutcome.ELABORATED, True), (1, 1, [2, 3], SketchOutcome.ELABORATED, True)]
    assert (graph.shared, graph.refused) == (0, [])
    # Budget: two planner requests and the searches' expansions; the lemma's rows hang under the theorem's sketch.
    assert result.nodes_expanded == 2 + sum(s.spent for s in sketch.subgoals) + 2
    lemma_row = next(e for e in outcome.edges if e.tactic == LEMMA)
    assert (lemma_row.parent_id, lemma_row.depth) == (1, 2)
    # `burnqed show` draws the graph under the sketches (render_sketches).
    drawn = render_sketches(result)
    assert drawn[drawn.index("lemma graph: depth 2, 5 goals, 2 sketches, 0 places shared, 0 holes refused"):] == [
        "lemma graph: depth 2, 5 goals, 2 sketches, 0 places shared, 0 holes refused",
        "✓ goal 0 (level 0): 0 < x * y + x",
        "└── sketch 0 (elaborated, closes it)",
        "    ├── ✓ goal 1 (level 1): 0 < x * y  [sketch 1]",
        "    │   └── sketch 1 (elaborated, closes it)",
        "    │       ├── ✓ goal 2 (level 2): 0 < x  [search]",
        "    │       └── ✓ goal 3 (level 2): 0 < y  [search]",
        "    └── ✓ goal 4 (level 1): 0 < x  [search]"]


def test_at_depth_one_a_hole_is_never_planned_again_and_no_graph_is_recorded() -> None:
    planner = policy(planned(NESTED, LEMMA), LEAVES)
    result = search(planner, settings(max_nodes=20)).result
    assert not result.proved and result.lemma_graph is None
    assert not any("theorem t.hxy" in p for call in planner.calls for p in call)


@pytest.mark.parametrize(("lemma_sketch", "whose"), [
    ("have hp : 0 < x * y + x := by sorry\nexact hp", "its ancestor goal 0"),  # restates the grandparent
    ("have hq : 0 < x * y := by sorry\nexact hq", "the goal it decomposes"),  # restates its parent
])
def test_a_planner_that_restates_an_ancestor_is_refused_before_lean_at_once_not_after_the_budget(
        lemma_sketch: str, whose: str) -> None:
    theorem_sketch = "have hq : 0 < x * y := by sorry\nnlinarith [hq, h₀]"
    planner = policy(planned(theorem_sketch, lemma_sketch), {"⊢ 0 < x * y": "exact h₀"})  # fails at once
    result = search(planner, settings(sketch_depth=3, max_nodes=60)).result
    assert not result.proved and result.failure_reason == "exhausted"
    # Three rounds (the first plan and two re-plans), each: the plan, hq's one expansion, hq's lemma plan.
    assert result.nodes_expanded == 9
    graph = result.lemma_graph
    assert graph is not None
    assert len(graph.refused) == 3 and all(f"restates {whose}" in reason and "before Lean" in reason
                                           for reason in graph.refused)
    lemmas = [s for s in graph.sketches if s.goal != 0]
    assert [(s.outcome, s.holes) for s in lemmas] == [(SketchOutcome.REFUSED, [])] * 3
    assert all(s.detail is not None and whose in s.detail for s in lemmas)
    # Lean never saw a restating sketch: its only drafts are the theorem's three sketches.
    assert [g.goal.rsplit("⊢ ", 1)[1] for g in graph.goals] == ["0 < x * y + x", "0 < x * y"]


def in_turn(*sketches: str) -> Callable[[str], str]:
    """The planner: the theorem's requests get `sketches` in turn (the last one again after), a lemma's a sketch
    that restates it (refused)."""
    left = list(sketches)

    def answer(prompt: str) -> str:
        if "theorem t." in prompt:
            return "have z : x < 0 := by sorry\nexact z"
        return left.pop(0) if len(left) > 1 else left[0]

    return answer


def test_a_goal_proved_once_closes_its_other_places_by_exact_and_by_closed_key() -> None:
    first = "have hx : 0 < x := by sorry\nhave hxy : 0 < x * y := by sorry\nhave bad : x < 0 := by sorry\nlinarith"
    second = "have hpos : 0 < x := by sorry\nhave hprod : 0 < x * y := by sorry\nnlinarith [hprod, hpos]"
    proofs = {**LEAVES, "⊢ 0 < x * y": "nlinarith [hx, h₁]"}  # names the earlier hole: hx
    result = search(policy(in_turn(first, second), proofs), settings(sketch_depth=2, max_nodes=30)).result
    assert result.proved, result.detail
    one, two = result.sketches
    assert [(s.name, s.proved, s.source) for s in one.subgoals] == [
        ("hx", True, SubgoalSource.SEARCH), ("hxy", True, SubgoalSource.SEARCH), ("bad", False, None)]
    # hpos has hx's context: kept; hprod's context names hpos where hxy's named hx: the same closed key, the proof
    # renamed and replayed.
    assert [(s.name, s.source, s.tactics) for s in two.subgoals] == [
        ("hpos", SubgoalSource.KEPT, ["exact h₀"]), ("hprod", SubgoalSource.SHARED, ["nlinarith [hpos, h₁]"])]
    graph = result.lemma_graph
    assert graph is not None and graph.shared == 2
    hxy = next(g for g in graph.goals if g.goal.endswith("⊢ 0 < x * y") and "hx :" in g.goal)
    hprod = next(g for g in graph.goals if g.goal.endswith("⊢ 0 < x * y") and "hpos :" in g.goal)
    assert (hprod.source, hprod.by, hprod.closed) == (SubgoalSource.SHARED, hxy.id, hxy.closed)
    assert next(g for g in graph.goals if g.goal.endswith("⊢ 0 < x")).places == 2
    # The tree (nothing shared) searches hprod again, where the policy's proof names hx: not proved.
    tree = search(policy(in_turn(first, second), proofs), settings(sketch_depth=2, max_nodes=30, share_goals=False))
    assert not tree.result.proved
    assert [s.source for s in tree.result.sketches[1].subgoals] == [SubgoalSource.SEARCH, None]
    drawn = render_sketches(result)
    assert "lemma graph: depth 2, 5 goals, 3 sketches, 2 places shared, 1 holes refused" in drawn
    assert drawn[-4:] == [
        "└── sketch 2 (elaborated, closes it)",
        "    ├── goal 1 (above)",
        "    └── ✓ goal 4 (level 1): 0 < x * y  [shared from goal 2]",
        "refused: the hole z restates the goal it decomposes (closed key "
        f"{graph.goals[3].closed}): refused before …"]


def test_an_eval_keeps_the_lemma_graph_of_the_attempt_that_proved_the_theorem(tmp_path: Path, store: Store) -> None:
    proved = search(policy(planned(NESTED, LEMMA), LEAVES), settings(sketch_depth=2, max_nodes=20)).result
    failed = search(policy(planned(NESTED, LEMMA), LEAVES), settings(sketch_depth=2, max_nodes=3)).result
    assert failed.lemma_graph is not None and not failed.proved
    result = build_eval_result([[failed], [proved]], [20], benchmark="b", model="m", ebm=None, lean_backend="replay",
                               iteration=0, config_digest="0123456789abcdef", git_commit=None, theorem_names=["t"])
    write_eval_result(result, tmp_path / "eval.json", store=store)
    [row] = load_eval_result(tmp_path / "eval.json", store=store).per_theorem
    assert row.lemma_graph == proved.lemma_graph


@pytest.mark.parametrize(("lemma_sketch", "outcome", "said"), [
    ("have hpx : 0 < x := by sorry\nhave hpy : 0 < y := by sorry\nnative_decide", SketchOutcome.REFUSED,
     "native_decide"),
    ("have hpx : 0 < x := by sorry\nsorry", SketchOutcome.REFUSED, "sorry"),
    ("have hpx : 0 < x := by sorry\nexact hpx", SketchOutcome.ERROR, ""),  # Lean: its closing step does not close it
])
def test_a_lemma_s_sketch_is_guarded_and_drafted_as_the_theorem_s_are(lemma_sketch: str, outcome: SketchOutcome,
                                                                      said: str) -> None:
    result = search(policy(planned(NESTED, lemma_sketch), LEAVES), settings(sketch_depth=2, max_nodes=20)).result
    assert not result.proved and result.lemma_graph is not None
    lemmas = [s for s in result.lemma_graph.sketches if s.goal != 0]
    assert lemmas and all(s.outcome is outcome and not s.closed and s.holes == [] for s in lemmas)
    assert all(said in (s.detail or "") for s in lemmas)
    assert all(g.proved is False for g in result.lemma_graph.goals if g.goal.endswith("⊢ 0 < x * y"))


class LosesOnce(InProcessReplay):
    """minilean whose draft of the lemma's sketch (the second draft of the search) finds the worker replaced once."""

    def __init__(self) -> None:
        super().__init__(MiniLean(version=PantographVersion.parse("0.3.4")))
        self.drafts = 0

    async def draft_sketch(self, state_id: int, sketch: Sketch, goal_id: int = 0) -> SketchResult:
        self.drafts += 1
        if self.drafts == 2:
            raise LeanStatesLostError("the worker was replaced")
        return await super().draft_sketch(state_id, sketch, goal_id)


def test_a_lemma_s_sketch_is_drafted_again_on_the_lemma_started_again_when_the_worker_was_replaced() -> None:
    lean_ = LosesOnce()
    result = asyncio.run(prove_sketch(THEOREM, lean_, policy(planned(NESTED, LEMMA), LEAVES),
                                      settings(sketch_depth=2, max_nodes=20), GUARD)).result
    assert result.proved, result.detail
    assert lean_.drafts == 3 and result.sketches[0].subgoals[0].source is SubgoalSource.SKETCH


def test_a_hole_that_restates_its_goal_only_as_lean_prints_it_is_caught_after_the_draft_and_not_searched() -> None:
    theorem_sketch = "have hq : 0 < x * y := by sorry\nnlinarith [hq, h₀]"
    lemma_sketch = "have hq2 : (0 : ℝ) < x * y := by sorry\nexact hq2"  # its text is not the goal's; Lean's print is
    planner = policy(planned(theorem_sketch, lemma_sketch), {"⊢ 0 < x * y": "exact h₀"})
    result = search(planner, settings(sketch_depth=3, max_nodes=60, sketch_rounds=0)).result
    assert not result.proved and result.lemma_graph is not None
    [first, lemma] = result.lemma_graph.sketches
    assert first.goal == 0
    assert (lemma.goal, lemma.outcome, lemma.holes, lemma.closed) == (1, SketchOutcome.ELABORATED, [1], False)
    assert result.lemma_graph.goals[1].places == 2
    [reason] = result.lemma_graph.refused
    assert reason.startswith("the hole hq2 restates the goal it decomposes")
    # hq was searched once (its one expansion), its restatement never: the plan, that expansion, the lemma's plan
    assert result.nodes_expanded == 3


def test_a_counted_proof_lists_the_library_lemmas_its_lemmas_used_at_any_level() -> None:
    hpx = closed_key(Goal("0 < x", CONTEXT), None).text  # a hole of hxy's lemma, one level down
    library = Library({hpx: [("exact h₀",)]})
    planner = policy(planned(NESTED, LEMMA), LEAVES)
    result = search(planner, settings(sketch_depth=2, max_nodes=20, lemmas=library)).result
    assert result.proved, result.detail
    assert [s.source for s in result.sketches[0].subgoals] == [SubgoalSource.SKETCH, SubgoalSource.SEARCH]
    assert result.lemmas_used() == ["planted"]
    graph = result.lemma_graph
    assert graph is not None
    assert [(g.source, g.origin) for g in graph.goals if g.level == 2] == [(SubgoalSource.LIBRARY, "planted"),
                                                                          (SubgoalSource.SEARCH, None)]

"""One file, one boundary for sketch search (docs/search.md, "One file"): a hole a library entry closed by its closed
key, or one whose goal appears at more than one place of the sketch, is a lemma of the assembled file, declared before
the theorem and applied to the hole's hypotheses; an exact-key hit and every other hole stay inline; a search at
depth one with no lemma source assembles the file it always did. Against minilean."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from burnqed.lean.declared_lemmas import FileLemma
from burnqed.records.replies import Goal
from burnqed.records.results import SubgoalSource
from burnqed.search.file_lemmas import Hole, Inner, lift_holes, restatable, statement_of
from burnqed.search.goal_keys import LemmaCandidate, closed_key
from burnqed.search.sketching import prove_sketch
from burnqed.search.subgoal_cache import SubgoalKey
from burnqed.text.sketch import read_sketch
from tests.search.test_sketch_graph import (
    CONTEXT,
    GUARD,
    LEAVES,
    LEMMA,
    NESTED,
    SKETCH,
    THEOREM,
    lean,
    planned,
    policy,
    settings,
)

pytestmark = pytest.mark.usefixtures("minilean_in_process")

HXY = Goal("0 < x * y", CONTEXT)
LIFTED = ("theorem burnqed_lemma_1 (x : ℝ) (y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) : 0 < x * y := by\n"
          "  nlinarith [h₀, h₁]\n\n"
          "theorem t (x y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) : 0 < x * y + x := by\n"
          "  have hxy : 0 < x * y := by\n    exact burnqed_lemma_1 x y h₀ h₁\n"
          "  have hx : 0 < x := by\n    exact h₀\n  nlinarith [hxy, hx]\n")


class Library:
    """A lemma source offering one proof of `0 < x * y`, by its closed key or by its exact key."""

    def __init__(self, closed: bool) -> None:
        self.closed = closed

    def lemma_candidates(self, exact: SubgoalKey, closed: SubgoalKey, goal: Goal,
                         limit: int) -> Sequence[LemmaCandidate]:
        hit = closed.text == closed_key(HXY, None).text
        return [LemmaCandidate(("nlinarith [h₀, h₁]",), "planted", self.closed)] if hit else []

    def lemma_outcome(self, candidate: LemmaCandidate, exact: SubgoalKey, accepted: bool) -> None:
        pass


def _proof(config_lemmas: Library | None) -> str:
    planner = policy(lambda _: SKETCH, {"⊢ 0 < x": "exact h₀", "⊢ 0 < x * y": "nlinarith [h₀, h₁]"})
    result = asyncio.run(prove_sketch(THEOREM, lean(), planner, settings(lemmas=config_lemmas), GUARD)).result
    assert result.proved, result.detail
    assert result.proof is not None
    return result.proof


def test_a_library_hit_by_closed_key_enters_the_file_as_a_lemma_applied_to_the_holes_hypotheses() -> None:
    assert _proof(Library(closed=True)) == LIFTED


def test_an_exact_key_hit_and_a_search_without_a_lemma_source_stay_inline() -> None:
    inline = ("theorem t (x y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) : 0 < x * y + x := by\n"
              "  have hxy : 0 < x * y := by\n    nlinarith [h₀, h₁]\n"
              "  have hx : 0 < x := by\n    exact h₀\n  nlinarith [hxy, hx]\n")
    assert _proof(Library(closed=False)) == inline
    assert _proof(None) == inline


def test_holes_of_one_closed_key_are_one_lemma_and_a_hole_that_cannot_be_restated_stays_inline() -> None:
    renamed = Goal("0 < a * b", tuple(type(v)(n, t) for v, (n, t) in zip(CONTEXT, [
        ("a", "ℝ"), ("b", "ℝ"), ("ha", "0 < a"), ("hb", "0 < b")], strict=True)))
    hidden = Goal("0 < x", (*CONTEXT[:2], type(CONTEXT[0])("a✝", "0 < x", inaccessible=True)))
    holes = [Hole(HXY, ["nlinarith [h₀, h₁]"]), Hole(hidden, ["assumption"], lift=True),
             Hole(renamed, ["nlinarith [ha, hb]"]), Hole(Goal("0 < x", CONTEXT), ["exact h₀"])]
    proofs, lemmas = lift_holes(holes, None)
    assert lemmas == (FileLemma(1, "(x : ℝ) (y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) : 0 < x * y", ("nlinarith [h₀, h₁]",)),)
    assert proofs == [["exact burnqed_lemma_1 x y h₀ h₁"], ["assumption"], ["exact burnqed_lemma_1 a b ha hb"],
                      ["exact h₀"]]
    assert not restatable(hidden) and not restatable(None) and statement_of(Goal("1 = 1", ())) == ": 1 = 1"
    assert lift_holes([Hole(HXY, ["nlinarith [h₀, h₁]"])], None) == ([["nlinarith [h₀, h₁]"]], ())


def test_the_library_hole_s_source_is_recorded_as_before() -> None:
    planner = policy(lambda _: SKETCH, {"⊢ 0 < x": "exact h₀"})
    result = asyncio.run(prove_sketch(THEOREM, lean(), planner, settings(lemmas=Library(closed=True)), GUARD)).result
    assert [(s.name, s.source, s.tactics) for s in result.sketches[0].subgoals] == [
        ("hxy", SubgoalSource.LIBRARY, ["nlinarith [h₀, h₁]"]), ("hx", SubgoalSource.SEARCH, ["exact h₀"])]


def test_a_library_hit_inside_a_hole_planned_again_is_a_lemma_before_the_theorem() -> None:
    inner = Goal("0 < y", (*CONTEXT, type(CONTEXT[0])("hpx", "0 < x")))

    class Inside(Library):
        def lemma_candidates(self, exact: SubgoalKey, closed: SubgoalKey, goal: Goal,
                             limit: int) -> Sequence[LemmaCandidate]:
            hit = closed.text == closed_key(inner, None).text
            return [LemmaCandidate(("exact h₁",), "planted", True)] if hit else []

    planner = policy(planned(NESTED, LEMMA), LEAVES)
    result = asyncio.run(prove_sketch(THEOREM, lean(), planner, settings(sketch_depth=2, max_nodes=30,
                                                                         lemmas=Inside(closed=True)), GUARD)).result
    assert result.proved, result.detail
    assert result.proof == (
        "theorem burnqed_lemma_1 (x : ℝ) (y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) (hpx : 0 < x) : 0 < y := by\n"
        "  exact h₁\n\n"
        "theorem t (x y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) : 0 < x * y + x := by\n"
        "  have hxy : 0 < x * y := by\n    have hpx : 0 < x := by\n      exact h₀\n"
        "    have hpy : 0 < y := by\n      exact burnqed_lemma_1 x y h₀ h₁ hpx\n    nlinarith [hpx, hpy]\n"
        "  have hx : 0 < x := by\n    exact h₀\n  nlinarith [hxy, hx]\n")


def test_a_lemma_comes_after_the_lemmas_its_proof_uses() -> None:
    sketch = read_sketch("have hpx : 0 < x := by sorry\nnlinarith [hpx, h₁]")
    assert not isinstance(sketch, str)
    below = Goal("0 < x", CONTEXT)
    inside = Inner(sketch, (Hole(below, ["exact h₀"], lift=True),))
    proofs, lemmas = lift_holes([Hole(HXY, ["nlinarith [h₀, h₁]"], lift=True, inner=inside)], None)
    assert proofs == [["exact burnqed_lemma_2 x y h₀ h₁"]]
    assert lemmas == (
        FileLemma(1, "(x : ℝ) (y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) : 0 < x", ("exact h₀",)),
        FileLemma(2, "(x : ℝ) (y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) : 0 < x * y",
                  ("have hpx : 0 < x := by\n  exact burnqed_lemma_1 x y h₀ h₁", "nlinarith [hpx, h₁]")))

"""Recursive sketch search on a lemma graph (docs/search.md, "Recursive sketches"): the two keys of a goal, the lemma
source's lookup point, a hole planned again down to `search.sketch_depth` levels, a goal proved once closing every
place it appears, and a hole that restates its goal or an ancestor refused before Lean; against minilean,
in-process, with a scripted planner."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import pytest

from burnqed.config import LeanConfig
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay
from burnqed.policy.base import Sampling
from burnqed.records.replies import Goal, Variable
from burnqed.records.results import SubgoalSource
from burnqed.records.theorem import Theorem
from burnqed.search.goal_keys import LemmaCandidate, closed_key, closed_key_of, translate
from burnqed.search.skeleton import SearchOutcome
from burnqed.search.sketching import SketchSettings, prove_sketch
from burnqed.search.step import StepSettings
from burnqed.search.subgoal_cache import SubgoalKey, subgoal_key
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

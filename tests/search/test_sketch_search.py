"""Sketch search (docs/search.md, "Sketch search"): a planner's `have … := by sorry` subgoals, each searched from its
own goal, against the strict Pantograph double at 0.3.4 and the newest version and against minilean, in-process;
the assembled proof counts only through the soundness path; the subgoal cache's proofs are re-checked and never served
to another context; re-planning keeps proved subgoals and tells the planner what failed; budget shares hold; and
`burnqed search` / `burnqed eval` run end to end in sketch mode (the commands in this process, `cli`)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from burnqed.config import LeanConfig
from burnqed.eval.result import load_eval_result
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay
from burnqed.policy.base import Sampling
from burnqed.records.replies import Goal, TacticKind, TacticResult, Variable
from burnqed.records.results import EdgeOutcome, FailureReason, Label, SketchOutcome, SubgoalSource
from burnqed.records.theorem import Theorem
from burnqed.search.hybrid_settings import HybridSettings
from burnqed.search.root import accept_subgoal, own_goals
from burnqed.search.skeleton import SearchOutcome
from burnqed.search.sketch_settings import SketchSettings
from burnqed.search.sketching import prove_sketch
from burnqed.search.step import StepSettings
from burnqed.search.subgoal_cache import SubgoalCache, subgoal_key, subgoals_from_cache
from burnqed.storage import Store
from burnqed.text.prompt import PromptFormat, format_state_comment
from burnqed.trajectory.reader import read_results
from leankit.version import SUPPORTED, PantographVersion
from tests.doubles.line_servers import DoubleServer, MiniLean
from tests.doubles.policy_double import ScriptedPolicy
from tests.processes import cli
from tests.search.helpers import small_index

# What the commands make of Lean's replies is the subject, not the worker's process: minilean answers in this
# process (tests/conftest.py `minilean_in_process`).
pytestmark = pytest.mark.usefixtures("minilean_in_process")

V = PantographVersion.parse
NEWEST = str(SUPPORTED[-1])
GUARD = TacticGuard.from_config(LeanConfig())
THEOREM = Theorem(name="t", signature="(x y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) : 0 < x * y + x")
SKETCH = "have hxy : 0 < x * y := by sorry\nhave hx : 0 < x := sorry\nnlinarith [hxy, hx]"
PROOFS = {"⊢ 0 < x * y": "nlinarith [h₀, h₁]", "⊢ 0 < x": "exact h₀", "⊢ x > 0": "linarith"}
ASSEMBLED = ("theorem t (x y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) : 0 < x * y + x := by\n"
             "  have hxy : 0 < x * y := by\n    nlinarith [h₀, h₁]\n  have hx : 0 < x := by\n    exact h₀\n"
             "  nlinarith [hxy, hx]\n")
PLANNER = ("Sketch a proof", "This Lean 4 proof sketch failed:")
BINDERS = "x y : ℝ\nh₀ : 0 < x\nh₁ : 0 < y"


LEANS: dict[str, Callable[[], InProcessReplay]] = {
    "minilean-0.3.4": lambda: InProcessReplay(MiniLean(version=V("0.3.4"))),
    "double-0.3.4": lambda: InProcessReplay(DoubleServer("0.3.4", tuple(PROOFS.values()))),
    f"double-{NEWEST}": lambda: InProcessReplay(DoubleServer(NEWEST, tuple(PROOFS.values()))),
}


def target(prompt: str) -> str:
    """The ⊢ line of the state a tactic prompt shows."""
    return [line.strip() for line in prompt.split("\n") if line.strip().startswith("⊢")][-1]


def policy(sketches: Callable[[str], str] | str = SKETCH, proofs: dict[str, str] | None = None) -> ScriptedPolicy:
    """The planner answers `sketches` (its prompt → a sketch); a subgoal prompt is answered from `proofs` by its
    target (else a `have` named by the prompt's length: every answer reaches a new state, none closes the goal); 1 token
    a character."""
    table = PROOFS if proofs is None else proofs

    def answer(prompt: str) -> list[tuple[str, float]]:
        if prompt.startswith(PLANNER):
            return [(sketches if isinstance(sketches, str) else sketches(prompt), -0.5)]
        return [(table.get(target(prompt), f"have h{len(prompt)} : (1 : ℝ) = 1 := by norm_num"), -0.1)]

    return ScriptedPolicy(answer, key=lambda prompt: prompt, tokens=len)


def settings(**given: object) -> SketchSettings:
    base: dict[str, object] = {"sampling": Sampling(n=1, stop=("```",)), "max_nodes": 12,
                               "subgoal": StepSettings(sampling=Sampling(n=1), revisits=0)}
    return SketchSettings(**{**base, **given})  # type: ignore[arg-type]


def search(lean: InProcessReplay, planner: ScriptedPolicy, config: SketchSettings | None = None,
           cache: SubgoalCache | None = None, theorem: Theorem = THEOREM) -> SearchOutcome:
    return asyncio.run(prove_sketch(theorem, lean, planner, config or settings(), GUARD, cache=cache))


# ------------------------------------------------------------------------------------------- the subgoals


@pytest.mark.parametrize("lean", list(LEANS))
def test_each_subgoal_is_searched_from_its_own_context_and_the_assembled_proof_counts(lean: str) -> None:
    scripted = policy()
    outcome = search(LEANS[lean](), scripted)
    result = outcome.result
    assert result.proved, result.detail
    assert (result.mode, result.proof, result.failure_reason) == ("sketch", ASSEMBLED, None)
    assert result.rejected_proofs == 0 and outcome.edges[0].error is None  # counted, and only counted
    assert result.tactics == ["have hxy : 0 < x * y := by\n  nlinarith [h₀, h₁]", "have hx : 0 < x := by\n  exact h₀",
                              "nlinarith [hxy, hx]"]
    # The subgoals' prompts showed their contexts: the binders, then for hx the hole before it (from 0.3.7, whose
    # Lean makes a draft's have a let, with the earlier hole's metavariable as its value).
    value = " := ?m.7" if lean == f"double-{NEWEST}" else ""
    shown = [prompt for call in scripted.calls for prompt in call if not prompt.startswith(PLANNER)]
    assert [target(prompt) for prompt in shown] == ["⊢ 0 < x * y", "⊢ 0 < x"]
    assert format_state_comment(f"{BINDERS}\n⊢ 0 < x * y") in shown[0]
    assert format_state_comment(f"{BINDERS}\nhxy : 0 < x * y{value}\n⊢ 0 < x") in shown[1]
    [sketch] = result.sketches
    assert (sketch.round, sketch.body, sketch.outcome, sketch.verified, sketch.tokens) == (
        0, SKETCH, SketchOutcome.ELABORATED, True, len(SKETCH))
    assert [(s.name, s.statement, s.proved, s.tactics, s.source, s.spent) for s in sketch.subgoals] == [
        ("hxy", "0 < x * y", True, ["nlinarith [h₀, h₁]"], SubgoalSource.SEARCH, 1),
        ("hx", "0 < x", True, ["exact h₀"], SubgoalSource.SEARCH, 1)]
    assert sketch.subgoals[1].goal == f"{BINDERS}\nhxy : 0 < x * y{value}\n⊢ 0 < x"
    # Rows: the sketch from the root (its state after: the subgoals), each subgoal's search beneath it; the counted
    # proof's rows are positive, its subgoals' closing rows complete it.
    rows = [(e.node_id, e.parent_id, e.depth, e.tactic, e.outcome, e.label, e.proof_complete) for e in outcome.edges]
    assert rows == [(1, 0, 1, SKETCH, EdgeOutcome.OK, Label.POSITIVE, False),
                    (2, 1, 2, "nlinarith [h₀, h₁]", EdgeOutcome.CLOSED, Label.POSITIVE, True),
                    (3, 1, 2, "exact h₀", EdgeOutcome.CLOSED, Label.POSITIVE, True)]
    assert outcome.edges[0].state_after == (f"{BINDERS}\n⊢ 0 < x * y\n\n{BINDERS}\nhxy : 0 < x * y{value}\n⊢ 0 < x")
    # Budget: one planner request and one expansion per subgoal; every completion's tokens.
    assert (result.nodes_expanded, result.budget_at_proof, result.tokens) == (3, 3, len(SKETCH) + 18 + 8)
    assert result.curve is not None and result.curve.tokens == [len(SKETCH), len(SKETCH) + 18, len(SKETCH) + 26]


def test_a_tactic_on_a_subgoal_sees_its_own_context_in_the_strict_double() -> None:
    """`uses N` resolves only names of the goal worked on: `hxy` is in hx's context, not in hxy's own."""
    scripted = policy(proofs={"⊢ 0 < x * y": "uses hxy", "⊢ 0 < x": "uses hxy h₀"})
    outcome = search(InProcessReplay(DoubleServer("0.3.4", ("nlinarith [h₀, h₁]",))), scripted)
    below = {e.tactic: (e.outcome, e.error) for e in outcome.edges if e.parent_id == 1}
    assert below["uses hxy"] == (EdgeOutcome.ERROR, "error: unknown identifier 'hxy'")
    assert outcome.result.sketches[0].subgoals[0].detail == (
        "its search had nothing left to try; Lean's first message on a tactic there: error: unknown identifier 'hxy'")


def test_lean_s_automatic_mode_siblings_are_not_the_subgoal_s_goals() -> None:
    hx = Goal("0 < x", (Variable("x", "ℝ"),), mvar="_uniq.9")
    after = Goal("0 < x * y", (Variable("x", "ℝ"),), mvar="_uniq.12")
    with_siblings = TacticResult(TacticKind.SUCCESS, 4, (after, hx))
    assert own_goals(with_siblings, (hx,)).goals == (after,)
    assert own_goals(TacticResult(TacticKind.SUCCESS, 5, (hx,)), (hx,)).goals == ()  # only the siblings left: closed
    # Automatic mode off, or a goal of the subgoal's own that only looks alike (another metavariable): kept.
    assert own_goals(TacticResult(TacticKind.SUCCESS, 6, (after,)), (hx,)).goals == (after,)
    twin = Goal("0 < x", (), mvar="_uniq.30")
    assert own_goals(TacticResult(TacticKind.SUCCESS, 7, (twin,)), (hx,)).goals == (twin,)


# ------------------------------------------------------------------------------------------- counting


@pytest.mark.parametrize(("sketch", "refused"), [
    ("have hxy : 0 < x * y := by sorry\nsorry", "a `sorry` outside a `have NAME : P := by sorry` hole"),
    ("have hxy : 0 < x * y := by sorry\naxiom bad : False\nexact bad.elim", "holds the command keyword 'axiom'"),
    ("have hxy : 0 < x * y := by sorry\nnative_decide", "deny pattern '\\\\bnative_decide\\\\b'"),
])
def test_a_skeleton_that_smuggles_sorry_an_axiom_or_native_decide_is_refused_before_lean(sketch: str,
                                                                                         refused: str) -> None:
    lean = LEANS["double-0.3.4"]()
    outcome = search(lean, policy(sketch), settings(sketch_rounds=0))
    result = outcome.result
    assert not result.proved and result.failure_reason is FailureReason.EXHAUSTED
    [tried] = result.sketches
    assert tried.outcome is SketchOutcome.REFUSED and tried.detail is not None and refused in tried.detail
    assert (tried.subgoals, outcome.edges[0].outcome) == ([], EdgeOutcome.REFUSED)
    assert lean.requests == 2  # the start and its goals: no draft, no compile


def test_a_sketch_over_the_text_cap_is_refused_unread_with_its_length() -> None:
    lean = LEANS["double-0.3.4"]()
    written = len(f"{SKETCH}\n```")  # the completion as the scripted planner writes it: 81 characters
    capped = TacticGuard(LeanConfig().deny, max_text_chars=written - 1)
    outcome = asyncio.run(prove_sketch(THEOREM, lean, policy(), settings(sketch_rounds=0), capped))
    [tried] = outcome.result.sketches
    reason = "refused by the tactic guard: the completion has 81 characters, over the cap of 80 (lean.max_text_chars)"
    assert (tried.outcome, tried.detail, tried.body, tried.subgoals) == (SketchOutcome.REFUSED, reason, "", [])
    assert (outcome.edges[0].outcome, outcome.edges[0].error) == (EdgeOutcome.REFUSED, reason)
    assert lean.requests == 2  # the start and its goals: no draft, no compile
    # at the cap, read
    at_cap = TacticGuard(LeanConfig().deny, max_text_chars=written)
    assert asyncio.run(prove_sketch(THEOREM, LEANS["double-0.3.4"](), policy(), settings(sketch_rounds=0),
                                    at_cap)).result.proved


def test_an_assembled_proof_counts_only_when_it_compiles() -> None:
    """Every subgoal closed in Lean, but the assembled proof does not compile (the double's FAILCOMPILE marker):
    not proved, the sketch's row says why, and the re-plan tells the planner."""
    failing = {"⊢ 0 < x * y": "exact FAILCOMPILE", "⊢ 0 < x": "exact h₀"}
    scripted = policy(proofs=failing)
    lean = InProcessReplay(DoubleServer("0.3.4", tuple(failing.values())))
    outcome = search(lean, scripted, settings(sketch_rounds=1))
    result = outcome.result
    assert not result.proved and result.proof is None and result.rejected_proofs == 2
    assert [(s.verified, [p.source for p in s.subgoals]) for s in result.sketches] == [
        (False, [SubgoalSource.SEARCH, SubgoalSource.SEARCH]), (False, [SubgoalSource.KEPT, SubgoalSource.KEPT])]
    assert outcome.edges[0].error is not None and outcome.edges[0].error.startswith(
        "not counted: the proof text does not compile")
    replan = [p for call in scripted.calls for p in call if p.startswith("This Lean 4 proof sketch failed:")]
    assert len(replan) == 1 and "every subgoal was proved, but the assembled proof does not count: the proof text " \
        "does not compile" in replan[0]
    assert all(e.label is not Label.POSITIVE for e in outcome.edges)


def test_a_subgoal_proof_the_guard_denies_is_never_sent() -> None:
    scripted = policy(proofs={"⊢ 0 < x * y": "native_decide", "⊢ 0 < x": "exact h₀"})
    outcome = search(LEANS["double-0.3.4"](), scripted, settings(sketch_rounds=0))
    assert not outcome.result.proved
    refused = [e for e in outcome.edges if e.tactic == "native_decide"]
    assert [(e.outcome, e.parent_id) for e in refused] == [(EdgeOutcome.REFUSED, 1)]


def test_a_sketch_sampled_twice_in_one_request_is_tried_once() -> None:
    twice = ScriptedPolicy(lambda prompt: [(SKETCH, -0.5), (f"  {SKETCH}", -0.6)] if prompt.startswith(PLANNER)
                           else [(PROOFS[target(prompt)], -0.1)], key=lambda prompt: prompt, tokens=len)
    outcome = search(LEANS["minilean-0.3.4"](), twice, settings(sampling=Sampling(n=2, stop=("```",)),
                                                                 stop_at_first=False))
    assert outcome.result.proved and len(outcome.result.sketches) == 1
    assert outcome.result.tokens == 2 * len(SKETCH) + 2 + 18 + 8  # both samples' tokens count


# ---------------------------------------------------------------------------------------------- the cache


def test_a_cached_proof_is_rechecked_in_lean_before_it_counts() -> None:
    cache = SubgoalCache()
    first = search(LEANS["minilean-0.3.4"](), policy(), cache=cache)
    assert first.result.proved and (cache.stats.stored, cache.stats.hits) == (2, 0)
    # Another theorem with the same context and statements: both subgoals come from the cache, re-checked in Lean
    # (their rows), with no search (no subgoal prompt).
    again = policy(proofs={})
    twin = THEOREM.model_copy(update={"name": "t_twin"})
    second = search(LEANS["minilean-0.3.4"](), again, cache=cache, theorem=twin)
    assert second.result.proved and second.result.proof == ASSEMBLED.replace("theorem t ", "theorem t_twin ")
    assert [(s.source, s.spent) for s in second.result.sketches[0].subgoals] == [(SubgoalSource.CACHE, 0)] * 2
    assert all(prompt.startswith(PLANNER) for call in again.calls for prompt in call)
    assert [(e.tactic, e.outcome, e.parent_id) for e in second.edges[1:]] == [
        ("nlinarith [h₀, h₁]", EdgeOutcome.CLOSED, 1), ("exact h₀", EdgeOutcome.CLOSED, 1)]
    assert (cache.stats.hits, cache.stats.rejected, second.result.nodes_expanded) == (2, 0, 1)


def test_a_cached_proof_lean_refuses_in_this_context_is_rejected_and_the_subgoal_searched() -> None:
    cache = SubgoalCache()
    goal = Goal("0 < x * y", (Variable("x", "ℝ"), Variable("y", "ℝ"), Variable("h₀", "0 < x"),
                              Variable("h₁", "0 < y")))
    cache.store(subgoal_key(goal, None), ["exact h₁"], theorem="elsewhere")  # not a proof of it
    outcome = search(LEANS["minilean-0.3.4"](), policy(), cache=cache)
    assert outcome.result.proved
    assert [s.source for s in outcome.result.sketches[0].subgoals] == [SubgoalSource.SEARCH, SubgoalSource.SEARCH]
    assert (cache.stats.rejected, cache.stats.hits) == (1, 0)
    assert [(e.tactic, e.outcome) for e in outcome.edges[1:3]] == [("exact h₁", EdgeOutcome.ERROR),
                                                                   ("nlinarith [h₀, h₁]", EdgeOutcome.CLOSED)]


def test_a_cached_proof_is_never_served_to_another_context() -> None:
    cache = SubgoalCache()
    assert search(LEANS["minilean-0.3.4"](), policy(), cache=cache).result.proved
    # The same statements under other binder names: another key, so the cache has nothing for it.
    renamed = Theorem(name="u", signature="(x y : ℝ) (hx0 : 0 < x) (hy0 : 0 < y) : 0 < x * y + x")
    other = policy(proofs={"⊢ 0 < x * y": "nlinarith [hx0, hy0]", "⊢ 0 < x": "exact hx0"})
    outcome = search(LEANS["minilean-0.3.4"](), other, cache=cache, theorem=renamed)
    assert outcome.result.proved
    assert [s.source for s in outcome.result.sketches[0].subgoals] == [SubgoalSource.SEARCH] * 2
    assert (cache.stats.hits, cache.stats.misses, cache.stats.rejected) == (0, 4, 0)


def test_100_planted_proofs_cost_each_subgoal_at_most_the_cap_and_each_one_replay_a_job() -> None:
    cache = SubgoalCache()
    goal = Goal("0 < x * y", (Variable("x", "ℝ"), Variable("y", "ℝ"), Variable("h₀", "0 < x"),
                              Variable("h₁", "0 < y")))
    for i in range(100):  # none proves it; each is shorter than the proof the search finds
        cache.store(subgoal_key(goal, None), [f"exact h{i}"], theorem="planted")
    replays: list[int] = []
    for k in range(26):
        outcome = search(LEANS["minilean-0.3.4"](), policy(), settings(subgoal_cache_replays=4), cache=cache,
                         theorem=THEOREM.model_copy(update={"name": f"t{k}"}))
        assert outcome.result.proved
        replays.append(sum(re.fullmatch(r"exact h[0-9]+", e.tactic) is not None for e in outcome.edges))
    # four planted proofs a theorem, each once, until none is left: then the proof the first search stored is served
    assert replays == [4] * 25 + [0] and cache.stats.rejected == 100
    assert [s.source for s in outcome.result.sketches[0].subgoals] == [SubgoalSource.CACHE] * 2


# ------------------------------------------------------------------------------------------- re-planning


def test_a_failed_sketch_goes_back_to_the_planner_and_its_proved_subgoals_are_kept() -> None:
    again = "have hxy : 0 < x * y := by sorry\nhave hx : x > 0 := by sorry\nnlinarith [hxy, hx]"

    def sketches(prompt: str) -> str:
        return again if prompt.startswith("This Lean 4 proof sketch failed:") else SKETCH

    scripted = policy(sketches, proofs={"⊢ 0 < x * y": "nlinarith [h₀, h₁]", "⊢ x > 0": "linarith"})
    outcome = search(LEANS["minilean-0.3.4"](), scripted, settings(max_nodes=12))
    result = outcome.result
    assert result.proved, result.detail
    first, second = result.sketches
    assert [(s.name, s.proved, s.source, s.spent) for s in first.subgoals] == [
        ("hxy", True, SubgoalSource.SEARCH, 1), ("hx", False, None, 3)]
    assert first.subgoals[1].detail is not None and first.subgoals[1].detail.startswith(
        "its share of the budget (3 expansions) was spent")
    assert (second.round, second.verified) == (1, True)
    assert [(s.name, s.source, s.spent) for s in second.subgoals] == [("hxy", SubgoalSource.KEPT, 0),
                                                                       ("hx", SubgoalSource.SEARCH, 1)]
    # The re-plan showed the failed sketch and which subgoal failed, and how.
    [replan] = [p for call in scripted.calls for p in call if p.startswith("This Lean 4 proof sketch failed:")]
    assert replan.startswith("This Lean 4 proof sketch failed:\n```lean4\ntheorem t (x y : ℝ) (h₀ : 0 < x) "
                             "(h₁ : 0 < y) : 0 < x * y + x := by\n  have hxy : 0 < x * y := by sorry\n")
    assert "\nWhat failed:\nthe subgoal hx : 0 < x was not proved: its share of the budget (3 expansions) was " \
        "spent" in replan
    # Units: 2 planner requests, 1 + 3 expansions, then the kept one (none) and 1.
    assert result.nodes_expanded == 7


# ------------------------------------------------------------------------------------------------ budget


def test_a_subgoal_search_spends_its_share_and_the_theorem_its_budget() -> None:
    scripted = policy(proofs={})  # no subgoal is ever proved: every answer reaches a new state
    lean = InProcessReplay(DoubleServer("0.3.4"))
    outcome = search(lean, scripted, settings(max_nodes=8, sketch_subgoal_share=0.25, sketch_rounds=5))
    result = outcome.result
    # Shares of 2 expansions: per round a planner request and the first subgoal's 2 expansions (the second is not
    # searched once the first failed), until the 8 units are spent.
    assert [[s.spent for s in t.subgoals] for t in result.sketches] == [[2, 0], [2, 0], [1, 0]]
    assert [t.subgoals[1].detail for t in result.sketches] == [
        "not searched: an earlier subgoal of the sketch was not proved"] * 3
    assert (result.nodes_expanded, result.failure_reason) == (8, FailureReason.MAX_NODES)
    assert result.curve is not None and len(result.curve.tokens) == 8
    assert result.sketches[2].subgoals[0].detail is not None
    assert result.sketches[2].subgoals[0].detail.startswith("its share of the budget (1 expansions) was spent")


def test_a_hybrid_subgoal_search_counts_its_rounds() -> None:
    hybrid = HybridSettings(fmt=PromptFormat.PLAIN_PROOF, sampling=Sampling(stop=("```",)), num_proofs=1,
                            min_proofs=1)
    outcome = search(LEANS["minilean-0.3.4"](), policy(), settings(subgoal=hybrid))
    result = outcome.result
    assert result.proved and result.proof == ASSEMBLED
    assert [(s.source, s.spent) for s in result.sketches[0].subgoals] == [(SubgoalSource.SEARCH, 1)] * 2
    assert result.nodes_expanded == 3


# ------------------------------------------------------------------------------------------ end to end


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_search_and_eval_run_in_sketch_mode_on_the_embedded_world(tiny_model_dir: Path, tmp_path: Path,
                                                                  store: Store) -> None:
    index = small_index(tmp_path, count=2)
    sets = ["--set", f"policy.model={tiny_model_dir}", "--set", "search.mode=sketch", "--set", "lean.workers=1",
            "--set", "search.sketch_plans=2", "--set", "planner.max_new_tokens=24", "--set",
            "search.proof_min_tokens=16", "--set",
            "policy.max_new_tokens=16", "--set", "policy.num_candidates=2"]
    done = cli("search", "--theorems", str(index), "--output", str(tmp_path / "traj"), "--set",
                   "search.max_nodes=4", *sets)
    assert done.returncode == 0, done.stderr
    results = read_results(f"file://{tmp_path / 'traj'}", store=store)
    assert len(results) == 2 and all(r.mode == "sketch" and r.sketches for r in results)
    assert all(1 <= r.nodes_expanded <= 4 for r in results)
    # The job's subgoal cache (beside the output: search.subgoal_cache is unset) counted what it was asked; its hits
    # are the subgoals the results took from it.
    counted = json.loads((tmp_path / "traj" / "_SUCCESS.json").read_text())["extra"]["subgoal_cache"]
    reached = sum(len(s.subgoals) for r in results for s in r.sketches)
    assert counted["hits"] == subgoals_from_cache(results) and counted["lookups"] <= reached
    out = tmp_path / "r.json"
    done = cli("eval", "--theorems", str(index), "--output", str(out), "--budgets", "2,4", *sets)
    assert done.returncode == 0, done.stderr
    result = load_eval_result(out, store=store)
    assert (result.mode, result.budget_unit, result.total) == ("sketch", "expansions", 2)
    assert result.settings is not None
    assert (result.settings.prompt_format, result.settings.num_candidates, result.settings.sketch_subgoal_mode,
            result.settings.subgoal_num_candidates) == ("plain-sketch", 2, "step", 2)
    assert json.loads(out.read_text())["budgets"][-1]["budget"] == 4


def test_a_subgoal_path_counts_only_when_lean_closed_it_honestly_and_every_tactic_passes_the_guard() -> None:
    # Each rule on its own: a denied tactic on a path Lean closed (the guard is checked again, not trusted to have
    # run before), and Lean's own verdict on the closing step.
    closed = TacticResult(TacticKind.SUCCESS, 3, ())
    assert accept_subgoal(closed, ["intro h", "linarith"], GUARD).ok
    denied = accept_subgoal(closed, ["intro h", "native_decide"], GUARD)
    assert not denied.ok and "native_decide" in denied.reason
    assert accept_subgoal(TacticResult(TacticKind.SUCCESS, 3, (), has_sorry=True), ["simp"], GUARD).reason == (
        "Lean reports sorry in the closing step")
    still_open = TacticResult(TacticKind.SUCCESS, 3, (Goal(target="False"),))
    assert not accept_subgoal(still_open, ["simp"], GUARD).ok

"""Step-level best-first search: proofs on the replay corpus, budgets, labels, false finishes, restarts."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence

import pytest

from burnqed.config import LeanConfig
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay
from burnqed.policy.base import AsyncClosing, Completion, Sampling, Seeds, refused
from burnqed.records.results import EdgeOutcome, FailureReason, Label
from burnqed.records.theorem import Theorem
from burnqed.search.step import SearchOutcome, StepSettings, prove
from leankit.corpus import load_corpus
from minilean.replay.replay_server import ReplayServer
from tests.doubles.line_servers import DoubleServer, MiniLean
from tests.doubles.policy_double import ScriptedPolicy, corpus_oracle
from tests.search.helpers import as_forall_declaration

CORPUS = load_corpus()
GUARD = TacticGuard.from_config(LeanConfig())
SETTINGS = StepSettings(sampling=Sampling(n=16), max_nodes=50, timeout_s=30.0)


def theorem(name: str) -> Theorem:
    spec = CORPUS.by_name(name)
    assert spec is not None
    return as_forall_declaration(spec)


def run(
    th: Theorem, policy: ScriptedPolicy, settings: StepSettings = SETTINGS, env: InProcessReplay | None = None
) -> SearchOutcome:
    lean = env or InProcessReplay(ReplayServer(CORPUS))
    return asyncio.run(prove(th, lean, policy, settings, GUARD))


def test_the_oracle_proves_every_bundled_theorem_and_the_proofs_compile() -> None:
    policy = ScriptedPolicy(corpus_oracle(CORPUS))
    for spec in CORPUS.theorems:
        outcome = run(Theorem.from_recorded(spec), policy)
        result = outcome.result
        assert result.proved, (spec.name, result.failure_reason, result.detail)
        assert result.proof is not None and result.tactics
        assert result.depth == len(result.tactics)
        assert result.budget_at_proof is not None and 1 <= result.budget_at_proof <= result.nodes_expanded
        closing = [e for e in outcome.edges if e.proof_complete]
        assert len(closing) == 1 and closing[0].outcome is EdgeOutcome.CLOSED
        path = [e for e in outcome.edges if e.on_proof_path]
        assert [e.tactic for e in sorted(path, key=lambda e: e.depth)] == result.tactics
        assert all(e.label is Label.POSITIVE for e in path)


def test_failed_tactics_are_edges_and_negative() -> None:
    outcome = run(theorem("algebra_2x_plus_3_eq_11"), ScriptedPolicy(corpus_oracle(CORPUS)))
    kinds = Counter(e.outcome for e in outcome.edges)
    assert kinds[EdgeOutcome.ERROR] >= 2  # linarith and norm_num fail on the root first (higher log-prob)
    for edge in outcome.edges:
        if edge.outcome is EdgeOutcome.ERROR:
            assert edge.label is Label.NEGATIVE and edge.error and edge.state_after is None
        if edge.outcome is EdgeOutcome.OK:
            assert edge.state_after and edge.state_before
    root_edges = [e for e in outcome.edges if e.parent_id == 0]
    assert {e.depth for e in root_edges} == {1}
    ids = [e.node_id for e in outcome.edges]
    assert len(ids) == len(set(ids)) and all(e.node_id > e.parent_id for e in outcome.edges)


def test_best_first_order_follows_length_normalised_logprob() -> None:
    # Root: "intro x" (lp -0.1) and "intro x h₀" (lp -2.0). With alpha = 0 the cheaper path's child
    # (-0.1) is expanded before the one-step node (-2.0), even though it is deeper.
    def script(state: str) -> list[tuple[str, float]]:
        if "∀" in state:
            return [("intro x", -0.1), ("intro x h₀", -2.0)]
        return []

    policy = ScriptedPolicy(script)
    run(theorem("algebra_2x_plus_3_eq_11"), policy, StepSettings(sampling=Sampling(n=4), max_nodes=3, alpha=0.0))
    expanded_targets = [call[0].split("⊢ ")[-1] for call in policy.calls]
    assert expanded_targets == ["∀ (x : ℝ), 2 * x + 3 = 11 → x = 4", "2 * x + 3 = 11 → x = 4", "x = 4"]


def test_budgets_end_the_search_with_the_right_reason() -> None:
    th = theorem("algebra_2x_plus_3_eq_11")
    loop = ScriptedPolicy(lambda s: [("intro x", -0.1)] if "∀" in s else [("skip", -0.1)])
    result = run(th, loop, StepSettings(sampling=Sampling(n=2), max_nodes=1)).result
    assert (result.proved, result.failure_reason, result.nodes_expanded) == (False, FailureReason.MAX_NODES, 1)
    nothing = ScriptedPolicy(lambda s: [])
    result = run(th, nothing).result
    assert (result.failure_reason, result.nodes_expanded) == (FailureReason.EXHAUSTED, 1)
    deep = run(th, ScriptedPolicy(corpus_oracle(CORPUS)), StepSettings(sampling=Sampling(n=16), max_depth=1))
    assert deep.result.failure_reason is FailureReason.EXHAUSTED and deep.result.nodes_expanded == 1
    slow = ScriptedPolicy(lambda s: [("intro x", -0.1)], delay_s=0.3)
    result = run(th, slow, StepSettings(sampling=Sampling(n=2), timeout_s=0.1)).result
    assert result.failure_reason is FailureReason.TIMEOUT and result.time_s < 0.3


def test_start_error_is_a_result() -> None:
    bad = Theorem(name="nope", statement="1 = (2 ∧")
    result = run(bad, ScriptedPolicy(lambda s: [])).result
    assert result.failure_reason is FailureReason.START_ERROR and result.detail


def test_probe_tactics_are_tried_after_the_policy() -> None:
    th = theorem("algebra_2x_plus_3_eq_11")
    policy = ScriptedPolicy(lambda s: [("intro x h₀", -0.3)] if "∀" in s else [])
    settings = StepSettings(sampling=Sampling(n=4), probe_tactics=("linarith", "intro x h₀"))
    outcome = run(th, policy, settings)
    assert outcome.result.proved and outcome.result.tactics == ["intro x h₀", "linarith"]
    root_tactics = [e.tactic for e in outcome.edges if e.parent_id == 0]
    assert root_tactics == ["intro x h₀", "linarith"]  # the duplicate probe was not tried twice


class RefusingPolicy(ScriptedPolicy):
    """The corpus oracle, except that prompts whose state contains `marker` are refused (too long)."""

    def __init__(self, marker: str) -> None:
        super().__init__(corpus_oracle(CORPUS))
        self.marker = marker

    async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
        answered = await super().generate(prompts, sampling, seeds)
        return [refused(f"too long: {self.marker}", sampling.n) if self.marker in prompt else answer
                for prompt, answer in zip(prompts, answered, strict=True)]


def test_a_refused_prompt_fails_its_node_alone_and_is_recorded() -> None:
    # The state after `intro x` is refused; the other path (`intro x h₀`, then linarith) still proves it.
    settings = StepSettings(sampling=Sampling(n=16), max_nodes=50, timeout_s=30.0, stop_at_first=False)
    outcome = run(theorem("algebra_2x_plus_3_eq_11"), RefusingPolicy("⊢ 2 * x + 3 = 11 → x = 4"), settings)
    assert outcome.result.proved and outcome.result.rejected_prompts == 1
    (row,) = [e for e in outcome.edges if e.outcome is EdgeOutcome.PROMPT_REJECTED]
    parent = next(e for e in outcome.edges if e.node_id == row.parent_id)
    assert (parent.tactic, row.tactic, row.state_after, row.error) == ("intro x", "", None,
                                                                       "too long: ⊢ 2 * x + 3 = 11 → x = 4")
    assert row.state_before == parent.state_after and row.depth == parent.depth + 1
    assert row.label is Label.UNKNOWN and not row.on_proof_path  # not a tactic: never a negative either


def test_a_search_left_with_only_refused_prompts_says_so() -> None:
    settings = StepSettings(sampling=Sampling(n=4), max_nodes=50, timeout_s=30.0, probe_tactics=("linarith",))
    outcome = run(theorem("algebra_2x_plus_3_eq_11"), RefusingPolicy("⊢ ∀ (x : ℝ)"), settings)
    result = outcome.result
    assert not result.proved and result.failure_reason is FailureReason.PROMPT_REJECTED
    assert result.detail == "the policy refused 1 prompt(s); first: too long: ⊢ ∀ (x : ℝ)"
    assert result.nodes_expanded == 1 and result.rejected_prompts == 1
    # The probe tactic needs no policy: it was still tried on the refused root.
    assert [(e.outcome, e.tactic) for e in outcome.edges] == [(EdgeOutcome.PROMPT_REJECTED, ""),
                                                             (EdgeOutcome.ERROR, "linarith")]


@pytest.mark.parametrize("word", ["sorry", "unsafe", "bullet", "nogoals", "nullstate", "parse", "strmsg"])
def test_false_finishes_from_lean_never_count(word: str) -> None:
    # The strict double in this process: what the search reads of a reply is the subject, not the pipe.
    policy = ScriptedPolicy(lambda s: [(word, -0.1)])
    open_guard = TacticGuard([])  # let `sorry` reach Lean: Lean's own hasSorry must stop it
    lean = InProcessReplay(DoubleServer("0.3.4"))
    outcome = asyncio.run(prove(Theorem(name="t", statement="p"), lean, policy, SETTINGS, open_guard))
    assert not outcome.result.proved
    assert not any(e.label is Label.POSITIVE or e.proof_complete for e in outcome.edges)


def test_a_proof_that_fails_to_compile_is_not_counted() -> None:
    policy = ScriptedPolicy(lambda s: [("done FAILCOMPILE", -0.1)])
    lean = InProcessReplay(DoubleServer("0.3.4"))
    outcome = asyncio.run(prove(Theorem(name="t", statement="p"), lean, policy, SETTINGS, GUARD))
    assert not outcome.result.proved and outcome.result.rejected_proofs == 1
    assert "does not compile" in (outcome.edges[0].error or "")


def test_a_crashed_worker_is_replaced_and_the_search_still_proves() -> None:
    th = theorem("algebra_2x_plus_3_eq_11")
    env = InProcessReplay(ReplayServer(CORPUS), crash_on="CRASH")

    def script(state: str) -> list[tuple[str, float]]:
        if "∀" in state:
            return [("intro x h₀", -0.1)]
        return [("CRASH now", -0.1), ("linarith", -0.2)]

    outcome = run(th, ScriptedPolicy(script), env=env)
    assert outcome.result.proved and outcome.result.tactics == ["intro x h₀", "linarith"]
    assert env.generation == 2
    assert [e.outcome for e in outcome.edges] == [EdgeOutcome.OK, EdgeOutcome.ERROR, EdgeOutcome.CLOSED]


def test_a_worker_that_keeps_crashing_ends_the_theorem_as_a_lean_error() -> None:
    th = theorem("algebra_2x_plus_3_eq_11")
    env = InProcessReplay(ReplayServer(CORPUS), crash_on="CRASH")
    script = ScriptedPolicy(lambda s: [("intro x", -0.1)] if "∀" in s else [(f"CRASH {i}", -0.1) for i in range(9)])
    result = run(th, script, StepSettings(sampling=Sampling(n=9), max_nodes=50), env=env).result
    assert result.failure_reason is FailureReason.LEAN_ERROR and not result.proved


def test_time_is_split_into_policy_and_lean() -> None:
    env = InProcessReplay(ReplayServer(CORPUS), latency=lambda: 0.01)
    outcome = run(theorem("algebra_2x_plus_3_eq_11"), ScriptedPolicy(corpus_oracle(CORPUS), delay_s=0.02), env=env)
    result = outcome.result
    assert result.policy_s >= 0.02 * result.nodes_expanded
    assert result.lean_s >= 0.01 * result.edges
    assert result.policy_s + result.lean_s <= result.time_s + 1e-3


class RecordingValue(AsyncClosing):
    """Energies from a table (state target → energy); records every call."""

    def __init__(self, table: dict[str, float]) -> None:
        self.table = table
        self.calls: list[tuple[str, list[str]]] = []

    async def energies(self, goal: str, states: Sequence[str]) -> list[float]:
        self.calls.append((goal, list(states)))
        return [self.table.get(s.split("⊢ ")[-1], 0.0) for s in states]

    async def close(self) -> None:
        """Nothing to release."""


def test_the_value_model_is_called_once_per_expansion_and_reorders_the_frontier() -> None:
    # Without a value model "intro x" (-0.1) is expanded before "intro x h₀" (-2.0); a low energy for
    # the latter's state (x = 4) flips the order.
    def script(state: str) -> list[tuple[str, float]]:
        return [("intro x", -0.1), ("intro x h₀", -2.0)] if "∀" in state else []

    value = RecordingValue({"x = 4": -10.0})
    policy = ScriptedPolicy(script)
    settings = StepSettings(sampling=Sampling(n=4), max_nodes=2, alpha=0.0, value_weight=1.0, value_reference="none")
    outcome = asyncio.run(prove(theorem("algebra_2x_plus_3_eq_11"), InProcessReplay(ReplayServer(CORPUS)), policy,
                                settings, GUARD, value))
    assert len(value.calls) == 1  # the root's expansion; the second expansion produced no children
    goal, states = value.calls[0]
    assert goal.endswith("⊢ ∀ (x : ℝ), 2 * x + 3 = 11 → x = 4") and len(states) == 2
    assert policy.calls[1][0].endswith("⊢ x = 4")
    scored = {e.tactic: (e.score, e.energy) for e in outcome.edges}
    assert scored["intro x h₀"] == (-2.0 + 10.0, -10.0) and scored["intro x"] == (-0.1, 0.0)


def test_energies_are_measured_against_the_root_s_own_asked_once_with_the_first_children() -> None:
    # InfoNCE fixes energies only up to a constant: with value_reference "root" a child scores its log-prob minus
    # (its energy - the root's), so an offset common to all energies changes nothing. The root's energy is asked
    # in the first value call, never again; the trajectory keeps the raw energies.
    def script(state: str) -> list[tuple[str, float]]:
        return [("intro x", -0.1), ("intro x h₀", -2.0)] if "∀" in state else []

    root = "∀ (x : ℝ), 2 * x + 3 = 11 → x = 4"
    for offset in (0.0, 40.0):
        value = RecordingValue({root: 5.0 + offset, "x = 4": 1.0 + offset, "2 * x + 3 = 11 → x = 4": 6.0 + offset})
        settings = StepSettings(sampling=Sampling(n=4), max_nodes=3, alpha=0.0, value_weight=2.0)
        outcome = asyncio.run(prove(theorem("algebra_2x_plus_3_eq_11"), InProcessReplay(ReplayServer(CORPUS)),
                                    ScriptedPolicy(script), settings, GUARD, value))
        assert [len(states) for _, states in value.calls] == [3]  # the root, then its two children
        assert value.calls[0][1][0].endswith(f"⊢ {root}")
        scored = {e.tactic: (e.score, e.energy) for e in outcome.edges}
        assert scored["intro x h₀"] == (-2.0 - 2.0 * (1.0 - 5.0), 1.0 + offset)
        assert scored["intro x"] == (-0.1 - 2.0 * (6.0 - 5.0), 6.0 + offset)


def test_renamed_copies_of_a_state_are_not_pushed_again() -> None:
    # On minilean (in this process): `intro h₁ h₂` reaches the state of `intro h₀ h₁` renamed, in the same
    # expansion; `intro h` then `intro h₂` reaches it renamed in a later one. Neither copy is scored or pushed:
    # their proofs are the first one's, renamed. Their edges are still recorded.
    def script(state: str) -> list[tuple[str, float]]:
        if "→ x ≠ 2" in state:
            return [("intro h₀ h₁", -0.5), ("intro h₁ h₂", -0.6), ("intro h", -1.0)]
        return [("intro h₂", -0.1)] if "⊢ x ≠ 2 →" in state else []

    value = RecordingValue({})
    settings = StepSettings(sampling=Sampling(n=4), max_nodes=3, alpha=0.0)
    theorem = Theorem(name="t", statement="∀ (x : ℝ), 0 < x → x ≠ 2 → 0 < x ^ 2")
    lean = InProcessReplay(MiniLean())  # `python -m minilean`: its default version
    outcome = asyncio.run(prove(theorem, lean, ScriptedPolicy(script), settings, GUARD, value))
    first = "x : ℝ\nh₀ : 0 < x\nh₁ : x ≠ 2\n⊢ 0 < x ^ 2"
    reached = {e.tactic: e.state_after for e in outcome.edges if e.outcome is EdgeOutcome.OK}
    assert reached == {"intro h₀ h₁": first, "intro h₁ h₂": "x : ℝ\nh₁ : 0 < x\nh₂ : x ≠ 2\n⊢ 0 < x ^ 2",
                       "intro h": "x : ℝ\nh : 0 < x\n⊢ x ≠ 2 → 0 < x ^ 2",
                       "intro h₂": "x : ℝ\nh : 0 < x\nh₂ : x ≠ 2\n⊢ 0 < x ^ 2"}
    assert [states[1:] for _, states in value.calls] == [[first, reached["intro h"]]]  # after the root's own
    assert {e.tactic for e in outcome.edges if e.score is not None} == {"intro h₀ h₁", "intro h"}


def test_tokens_lean_calls_and_budget_marks_are_counted() -> None:
    env = InProcessReplay(ReplayServer(CORPUS))
    script = corpus_oracle(CORPUS)
    policy = ScriptedPolicy(script)
    settings = StepSettings(sampling=Sampling(n=16), max_nodes=50, timeout_s=30.0, marks=(1, 50))
    result = run(theorem("algebra_2x_plus_3_eq_11"), policy, settings, env=env).result
    per_call = [3 * sum(len(script(state)[:16]) for state in call) for call in policy.calls]  # 3 tokens a sample
    assert result.proved and result.mode == "step"
    assert result.tokens == sum(per_call) and len(per_call) == result.nodes_expanded == 2
    # Every request the worker answered was this search's; the search counts all but the header's scope load, which
    # the worker sends itself before the start.
    assert result.lean_calls == env.requests - 1
    assert [u.budget for u in result.usage] == [1, 50]
    assert result.usage[0].tokens == per_call[0] and result.usage[0].lean_calls < result.lean_calls
    assert (result.usage[1].tokens, result.usage[1].lean_calls) == (result.tokens, result.lean_calls)
    # The curve: what was spent after each expansion, the marks' readings at 1 and at the end (2).
    assert result.curve is not None
    assert (result.curve.tokens, result.curve.lean_calls) == (
        [per_call[0], result.tokens], [result.usage[0].lean_calls, result.lean_calls])


def _second_ask_proves(proof_step: str) -> tuple[ScriptedPolicy, Counter[str]]:
    """A policy whose first answer at the root is a tactic that fails and whose later answers add `proof_step`
    (the first tactic of a proof): only a revisit of the root can find the proof."""
    asks: Counter[str] = Counter()

    def script(state: str) -> list[tuple[str, float]]:
        if "∀" in state:
            asks[state] += 1
            first = [("norm_num", -0.1)]
            return first if asks[state] == 1 else [*first, (proof_step, -0.5)]
        return corpus_oracle(CORPUS)(state)

    return ScriptedPolicy(script), asks


def test_without_revisits_a_node_is_asked_once_and_the_search_ends_exhausted() -> None:
    policy, asks = _second_ask_proves("intro x h₀")
    result = run(theorem("algebra_2x_plus_3_eq_11"), policy, StepSettings(sampling=Sampling(n=4), max_nodes=20)).result
    assert (result.proved, result.failure_reason, result.nodes_expanded) == (False, FailureReason.EXHAUSTED, 1)
    assert sum(asks.values()) == 1


def test_a_revisit_asks_again_with_new_seeds_and_skips_tactics_already_tried() -> None:
    policy, asks = _second_ask_proves("intro x h₀")
    settings = StepSettings(sampling=Sampling(n=4, temperature=0.8), max_nodes=20, revisits=2, seed=7,
                            revisit_temperature=1.3)
    outcome = run(theorem("algebra_2x_plus_3_eq_11"), policy, settings)
    result = outcome.result
    assert result.proved and result.tactics[0] == "intro x h₀"
    assert sum(asks.values()) == 2  # the root, then the root again (nothing else was on the frontier)
    root_tactics = [e.tactic for e in outcome.edges if e.parent_id == 0]
    assert root_tactics == ["norm_num", "intro x h₀"]  # norm_num failed once and is not tried again
    first, second = policy.seeds[0], policy.seeds[1]
    assert first is not None and second is not None
    assert set(first[0]).isdisjoint(second[0])  # the revisit draws samples numbered after the first ones
    assert [sampling.temperature for sampling in policy.samplings] == [0.8, 1.3, 0.8]  # root, root again, child


def test_revisits_are_bounded_and_ranked_below_fresh_children() -> None:
    # The root answers only tactics that fail: with 2 revisits it is asked 3 times in all, then the frontier is
    # empty. A child, when there is one, is expanded before a root lowered by the revisit penalty.
    policy = ScriptedPolicy(lambda s: [("norm_num", -0.1)] if "∀" in s else [])
    result = run(theorem("algebra_2x_plus_3_eq_11"), policy,
                 StepSettings(sampling=Sampling(n=4), max_nodes=20, revisits=2)).result
    assert (result.failure_reason, result.nodes_expanded) == (FailureReason.EXHAUSTED, 3)
    order = ScriptedPolicy(lambda s: [("intro x", -0.2)] if "∀" in s else [])
    run(theorem("algebra_2x_plus_3_eq_11"), order,
        StepSettings(sampling=Sampling(n=4), max_nodes=3, alpha=0.0, revisits=1, revisit_penalty=1.0))
    # root (score 0) → its child "intro x" (-0.2) beats the root put back at 0 - 1.0 → then the root again
    assert ["∀" in call[0] for call in order.calls] == [True, False, True]


def test_a_refused_prompt_is_not_revisited() -> None:
    # The root's prompt is refused: asking again cannot help, so revisits leave it alone and the search ends as
    # a refusal after one expansion (the probe tactic still tried once).
    settings = StepSettings(sampling=Sampling(n=4), max_nodes=50, timeout_s=30.0, probe_tactics=("linarith",),
                            revisits=3)
    result = run(theorem("algebra_2x_plus_3_eq_11"), RefusingPolicy("⊢ ∀ (x : ℝ)"), settings).result
    assert result.failure_reason is FailureReason.PROMPT_REJECTED
    assert result.nodes_expanded == 1 and result.rejected_prompts == 1

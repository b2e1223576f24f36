"""Whole-proof search (pass@N): proofs from the statement, each compiled; budget, rows, tokens, Lean requests."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from burnqed.config import LeanConfig
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay
from burnqed.lean.soundness import check_proof_text
from burnqed.policy.base import Sampling
from burnqed.records.results import EdgeOutcome, FailureReason, Label
from burnqed.records.theorem import Theorem
from burnqed.search.step import SearchOutcome
from burnqed.search.whole import WholeSettings, prove_whole
from burnqed.text.prompt import PromptFormat
from leankit.corpus import load_corpus
from minilean.replay.replay_server import ReplayServer
from tests.doubles.policy_double import Answer, ScriptedPolicy, declaration_of

CORPUS = load_corpus()
GUARD = TacticGuard.from_config(LeanConfig())
NAME = "ineq_x_plus_reciprocal_ge_two"
BROKEN = "intro hx\nfield_simp\nlinarith"  # right until its last step
GOOD = "intro hx\nfield_simp\nnlinarith [sq_nonneg (x - 1)]"


def theorem(name: str = NAME) -> Theorem:
    spec = CORPUS.by_name(name)
    assert spec is not None
    return Theorem.from_recorded(spec)


def sequence(answers: Answer, per_request: int) -> ScriptedPolicy:
    """A policy answering successive requests with successive slices of `answers`; 1 token per character."""
    stream: Iterator[tuple[str, float]] = iter(answers)
    return ScriptedPolicy(lambda _: [next(stream) for _ in range(per_request)], key=declaration_of, tokens=len)


def run(th: Theorem, policy: ScriptedPolicy, settings: WholeSettings, env: InProcessReplay) -> SearchOutcome:
    return asyncio.run(prove_whole(th, env, policy, settings, GUARD))


def test_the_first_verified_sample_proves_it_and_every_sample_is_counted() -> None:
    answers = [("linarith", -0.1), (BROKEN, -0.2), ("intro  hx\nfield_simp\nlinarith", -0.3),  # a duplicate
               (GOOD, -0.5), ("intro hx\nsorry", -0.6), ("", -0.7)]
    policy = sequence(answers, 3)
    env = InProcessReplay(ReplayServer(CORPUS))
    settings = WholeSettings(sampling=Sampling(n=3, max_new_tokens=64, stop=("```",)), max_proofs=12, marks=(2, 4, 12))
    outcome = run(theorem(), policy, settings, env)
    result = outcome.result
    assert result.proved and result.mode == "whole"
    assert (result.proofs_sampled, result.budget_at_proof, result.nodes_expanded) == (6, 4, 0)
    assert result.tactics == GOOD.split("\n") and result.depth == 3
    # The requests: the statement prompt's declaration, 3 proofs each, whole-proof token limit and stop string.
    assert policy.calls == [[f"theorem {NAME} (x : ℝ) : 0 < x → x + 1 / x ≥ 2"]] * 2
    assert [(s.n, s.max_new_tokens, s.stop) for s in policy.samplings] == [(3, 64, ("```",))] * 2
    # Rows: one per distinct proof checked (the duplicate, and what came after the proof, add none).
    assert [(e.tactic, e.outcome, e.label) for e in outcome.edges] == [
        ("linarith", EdgeOutcome.ERROR, Label.NEGATIVE),
        (BROKEN, EdgeOutcome.ERROR, Label.NEGATIVE),
        (GOOD, EdgeOutcome.CLOSED, Label.POSITIVE),
    ]
    assert all(e.parent_id == 0 and e.depth == 1 and e.state_before.endswith("⊢ 0 < x → x + 1 / x ≥ 2")
               for e in outcome.edges)
    assert outcome.edges[1].error is not None and outcome.edges[1].error.startswith("not counted:")
    assert [e.n_tokens for e in outcome.edges] == [len("linarith"), len(BROKEN), len(GOOD)]
    # Every sampled token counts; Lean saw the start, the goal print and three compiles.
    assert result.tokens == sum(len(text) for text, _ in answers)
    assert result.lean_calls == env.requests - 1 == 5  # the worker's scope load before the start is not counted
    assert [(u.budget, u.tokens, u.lean_calls) for u in result.usage] == [
        (2, len("linarith") + len(BROKEN), 4),
        (4, sum(len(text) for text, _ in answers[:4]), 5),
        (12, result.tokens, 5),
    ]
    # After each of the six proofs sampled (a search ended there: the totals beyond): its tokens; Lean's start and
    # goal print, then a compile of each distinct proof up to the verified fourth (the duplicate third, and what came
    # after the proof, compile nothing).
    assert result.curve is not None
    assert result.curve.tokens == [sum(len(text) for text, _ in answers[:k]) for k in range(1, 7)]
    assert result.curve.lean_calls == [3, 4, 4, 5, 5, 5]
    assert result.curve.at(12, (result.tokens, result.lean_calls)) == (result.tokens, 5)
    # The counted proof re-compiles on its own.
    assert result.proof is not None
    assert asyncio.run(check_proof_text(InProcessReplay(ReplayServer(CORPUS)), NAME, result.proof,
                                        index_header=theorem().header)).verified


def test_refused_proofs_never_reach_lean() -> None:
    policy = sequence([("intro hx\nsorry", -0.1), ("intro hx\nnative_decide", -0.2)], 2)
    env = InProcessReplay(ReplayServer(CORPUS))
    settings = WholeSettings(sampling=Sampling(n=2, stop=("```",)), max_proofs=2)
    outcome = run(theorem(), policy, settings, env)
    assert not outcome.result.proved and outcome.result.failure_reason is FailureReason.MAX_PROOFS
    assert [e.outcome for e in outcome.edges] == [EdgeOutcome.REFUSED, EdgeOutcome.REFUSED]
    # The search asked for the start and its goals only; the worker also loaded the header's scope first.
    assert outcome.result.lean_calls == 2 and env.requests == 3
    assert outcome.result.rejected_proofs == 2


def test_the_cot_answer_is_read_from_its_last_lean4_block() -> None:
    answer = (f"### Plan\nClear the denominator, then use a square.\n```lean4\ntheorem {NAME} : ∀ (x : ℝ), 0 < x → "
              f"x + 1 / x ≥ 2 := by\n  intro hx\n  field_simp\n  nlinarith [sq_nonneg (x - 1)]\n```")
    policy = ScriptedPolicy(lambda _: [(answer, -1.0)], key=declaration_of)
    sampling = Sampling(n=1, stop=("<｜end▁of▁sentence｜>",))
    settings = WholeSettings(fmt=PromptFormat.DEEPSEEK_WHOLE_COT, sampling=sampling, max_proofs=1)
    result = run(theorem(), policy, settings, InProcessReplay(ReplayServer(CORPUS))).result
    assert result.proved and result.tactics == GOOD.split("\n")


def test_a_theorem_without_a_statement_or_with_a_broken_one_is_a_start_error() -> None:
    policy = ScriptedPolicy(lambda _: [], key=declaration_of)
    env = InProcessReplay(ReplayServer(CORPUS))
    result = run(Theorem(name=NAME), policy, WholeSettings(), env).result
    assert result.failure_reason is FailureReason.START_ERROR
    assert "needs the theorem's statement" in (result.detail or "")
    # A declaration Lean cannot elaborate (the replay server gives a statement it does not know a goal on which no
    # tactic is known, so the start error here is a parse error).
    broken = run(Theorem(name="nope", statement="1 = (2 ∧"), policy, WholeSettings(), env).result
    assert broken.failure_reason is FailureReason.START_ERROR and not policy.calls
    silent = run(theorem(), policy, WholeSettings(), env).result  # a policy that answers nothing: no endless loop
    assert silent.failure_reason is FailureReason.EXHAUSTED and len(policy.calls) == 1

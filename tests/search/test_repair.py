"""Compiler-feedback repair (docs/search.md, "Repair"): whole and hybrid search revise a failed proof with Lean's
messages on it. A revision is one proof sampled, counted and checked like any proof; the trajectory keeps the chain
(attempt → feedback → revision → verdict); `search.repair_rounds = 0` revises nothing. In process on the
replay corpus, then against the strict Pantograph doubles of 0.3.4 and the newest version (real processes): the
repair prompt carries the messages of the proof that failed at their mapped positions, a revision counts only on the
compile's positive evidence (the kernel recheck included), and a revision the guard refuses is refused."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from pathlib import Path

import pytest

from burnqed.config import LeanConfig
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay
from burnqed.policy.base import Completion, Sampling, Seeds, refused, sample_seed
from burnqed.records.replies import CompileMessage, CompileResult
from burnqed.records.results import EdgeOutcome
from burnqed.records.theorem import Theorem
from burnqed.search.hybrid import prove_hybrid
from burnqed.search.hybrid_settings import HybridSettings
from burnqed.search.repair import RepairSettings
from burnqed.search.skeleton import SearchOutcome
from burnqed.search.whole import WholeSettings, prove_whole
from burnqed.stages.summary import render_summary, summarize
from burnqed.storage import Store
from burnqed.text.feedback import Feedback
from burnqed.text.prompt import PromptFormat
from leankit.corpus import load_corpus
from minilean.replay.replay_server import ReplayServer
from tests.doubles.line_servers import DoubleServer
from tests.doubles.policy_double import ScriptedPolicy
from tests.trajectory.factories import write_trajectory

CORPUS = load_corpus()
GUARD = TacticGuard.from_config(LeanConfig())
NAME = "ineq_x_plus_reciprocal_ge_two"
PROOF = "intro hx\nfield_simp\nnlinarith [sq_nonneg (x - 1)]"
WRONG = "intro hx\nlinarith"
REPAIR = "This Lean 4 proof does not compile:"
ON = RepairSettings(rounds=1, message_tokens=512)


def theorem() -> Theorem:
    spec = CORPUS.by_name(NAME)
    assert spec is not None
    return Theorem.from_recorded(spec)


def whole(policy: ScriptedPolicy, *, max_proofs: int = 4, repair: RepairSettings = ON) -> SearchOutcome:
    settings = WholeSettings(fmt=PromptFormat.PLAIN_WHOLE, max_proofs=max_proofs, sampling=Sampling(n=1, stop=("```",)),
                             repair=repair, seed=7)
    return asyncio.run(prove_whole(theorem(), InProcessReplay(ReplayServer(CORPUS)), policy, settings, GUARD))


def answering(fresh: str, revision: str) -> ScriptedPolicy:
    """A policy answering the theorem with `fresh` and a repair prompt with `revision`; every prompt kept."""
    return ScriptedPolicy(lambda key: [(revision if key.startswith(REPAIR) else fresh, -1.0)], key=lambda p: p)


def test_a_failed_whole_proof_is_revised_with_leans_message_and_the_revision_counts_like_any_proof() -> None:
    policy = answering(WRONG, PROOF)
    outcome = whole(policy)
    result = outcome.result
    assert (result.proved, result.proofs_sampled, result.budget_at_proof) == (True, 2, 2)
    assert (result.repaired, result.revisions, result.revision_at_proof) == (1, 1, 1)
    assert result.tokens == 6  # the attempt's 3 tokens and the revision's
    # The chain in the rows: the attempt failed with its feedback, the revision revises it and closed.
    failed, revised = outcome.edges
    assert (failed.outcome, failed.revision, failed.revises) == (EdgeOutcome.ERROR, 0, None)
    assert (revised.outcome, revised.revision, revised.revises, revised.feedback) == (EdgeOutcome.CLOSED, 1, 1, None)
    assert revised.label.value == "positive" and failed.label.value == "negative"
    feedback = Feedback.from_json(failed.feedback or "")
    assert feedback.proof == WRONG and feedback.goal == "x : ℝ\nhx : 0 < x\n⊢ x + 1 / x ≥ 2"
    assert [(m.severity, m.line, m.column) for m in feedback.messages] == [("error", 2, 0)]
    # The prompt the policy got, and the seed of the revision: round 1, the position of the proof it revises.
    (prompt,) = [call[0] for call in policy.calls if call[0].startswith(REPAIR)]
    declaration = theorem().declaration()
    assert prompt == (
        f"{REPAIR}\n```lean4\n{declaration} := by\n  intro hx\n  linarith\n```\nLean's messages:\n"
        "3:2: error: linarith failed to find a contradiction\nx : ℝ\nhx : 0 < x\na✝ : x + 1 / x < 2\n⊢ False\n"
        "The goal at the first error:\nx : ℝ\nhx : 0 < x\n⊢ x + 1 / x ≥ 2\n"
        f"Complete the following Lean 4 code:\n```lean4\n{declaration} := by\n")
    assert policy.seeds[-1] == [[sample_seed(7, NAME, 1, 1)]]
    assert policy.samplings[-1].n == 1


def test_no_repair_rounds_revise_nothing() -> None:
    policy = answering(WRONG, PROOF)
    outcome = whole(policy, repair=RepairSettings(rounds=0))
    assert not outcome.result.proved and outcome.result.proofs_sampled == 4
    assert (outcome.result.repaired, outcome.result.revisions, outcome.result.revision_at_proof) == (0, 0, None)
    assert not any(call[0].startswith(REPAIR) for call in policy.calls)
    assert [(e.revision, e.revises, e.feedback) for e in outcome.edges] == [(0, None, None)]


def test_revisions_use_the_budget_a_smaller_budget_samples_a_prefix() -> None:
    # One proof of budget: the failed attempt is all there is (no revision fits).
    policy = answering(WRONG, PROOF)
    small = whole(policy, max_proofs=1)
    assert not small.result.proved and (small.result.proofs_sampled, small.result.revisions) == (1, 0)
    # A revision that fails again is revised again, up to repair_rounds; the third proof sampled proves it.
    answers = iter([WRONG, "intro hx\nnlinarith", PROOF])
    chain = whole(ScriptedPolicy(lambda _: [(next(answers), -1.0)], key=lambda p: p),
                  repair=RepairSettings(rounds=2, message_tokens=512))
    result = chain.result
    assert (result.proved, result.budget_at_proof, result.revisions, result.repaired, result.revision_at_proof) == (
        True, 3, 2, 1, 2)
    assert [(e.node_id, e.revision, e.revises, e.outcome) for e in chain.edges] == [
        (1, 0, None, EdgeOutcome.ERROR), (2, 1, 1, EdgeOutcome.ERROR), (3, 2, 2, EdgeOutcome.CLOSED)]


def test_a_revision_repeating_a_checked_proof_ends_its_chain() -> None:
    outcome = whole(answering(WRONG, WRONG), repair=RepairSettings(rounds=3, message_tokens=512), max_proofs=2)
    # The duplicate is sampled and counted, never compiled again, and nothing follows it in this request.
    assert (outcome.result.proved, outcome.result.proofs_sampled, outcome.result.revisions) == (False, 2, 1)
    assert len(outcome.edges) == 1


def test_a_hybrid_attempt_failing_at_a_tactic_is_revised_from_the_theorems_start_through_the_trie() -> None:
    policy = answering(WRONG, PROOF)
    settings = HybridSettings(fmt=PromptFormat.PLAIN_PROOF, sampling=Sampling(stop=("```",)), num_proofs=1,
                              min_proofs=1, max_proofs=4, repair=ON)
    outcome = asyncio.run(prove_hybrid(theorem(), InProcessReplay(ReplayServer(CORPUS)), policy, settings, GUARD))
    result = outcome.result
    assert (result.proved, result.budget_at_proof, result.revisions, result.revision_at_proof) == (True, 2, 1, 1)
    rows = [(e.tactic, e.outcome, e.revision, e.revises) for e in outcome.edges]
    # `intro hx` succeeded, `linarith` failed (its row holds the feedback); the revision followed `intro hx` in the
    # trie for free and added its two new steps.
    assert rows == [("intro hx", EdgeOutcome.OK, 0, None), ("linarith", EdgeOutcome.ERROR, 0, None),
                    ("field_simp", EdgeOutcome.OK, 1, 2), ("nlinarith [sq_nonneg (x - 1)]", EdgeOutcome.CLOSED, 1, 2)]
    feedback = Feedback.from_json(outcome.edges[1].feedback or "")
    assert feedback.proof == WRONG and feedback.goal == "x : ℝ\nhx : 0 < x\n⊢ x + 1 / x ≥ 2"
    assert feedback.messages[0].line == 2 and feedback.messages[0].text.startswith("linarith failed")
    assert sum(call[0].startswith(REPAIR) for call in policy.calls) == 1


class RefusingRepairs(ScriptedPolicy):
    """`answering(WRONG, PROOF)`, with every repair prompt refused as too long for the model."""

    def __init__(self) -> None:
        super().__init__(answering(WRONG, PROOF).script, key=lambda p: p)

    async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
        answered = await super().generate(prompts, sampling, seeds)
        return [refused("too long", sampling.n) if prompt.startswith(REPAIR) else answer
                for prompt, answer in zip(prompts, answered, strict=True)]


def test_a_refused_repair_prompt_ends_its_chain_and_counts_as_a_refused_prompt_in_both_engines() -> None:
    """One way of counting, whole and hybrid alike: every prompt the policy refused is in `rejected_prompts`."""
    policy = RefusingRepairs()
    result = whole(policy, max_proofs=2).result
    # The fresh attempt's repair prompt is refused; the second attempt repeats it (never checked, nothing to revise).
    assert (result.proved, result.proofs_sampled, result.revisions, result.repaired) == (False, 2, 0, 0)
    assert (result.rejected_prompts, result.failure_reason) == (1, "max_proofs")
    settings = HybridSettings(fmt=PromptFormat.PLAIN_PROOF, sampling=Sampling(stop=("```",)), num_proofs=1,
                              min_proofs=1, max_proofs=3, repair=ON)
    hybrid = asyncio.run(prove_hybrid(theorem(), InProcessReplay(ReplayServer(CORPUS)), RefusingRepairs(), settings,
                                      GUARD)).result
    # Rounds 1 and 2 fail at a new tactic (`linarith` after `intro hx`, then `intro hx` again below it): both repair
    # prompts refused; round 3 ends at the trie's cached failure, nothing to revise.
    assert (hybrid.proved, hybrid.proofs_sampled, hybrid.revisions, hybrid.repaired) == (False, 3, 0, 0)
    assert (hybrid.rejected_prompts, hybrid.failure_reason) == (2, "max_proofs")


# ---------------------------------------------------------------------------------- against the strict doubles

DOUBLE_THEOREM = Theorem(name="double_t", signature="(x : ℕ) : x = x", header="open Nat")
FAIL_A, FAIL_B, FAIL_C = "skip\nexact FAILCOMPILE", "skip\nexact FAILCOMPILE_b", "skip\nexact FAILCOMPILE_c"
REVISIONS = {
    "FAILCOMPILE_c": "rfl",  # compiles cleanly: newConstants, #print axioms and the kernel recheck all say so
    "FAILCOMPILE_b": "exact noconstants_x",  # compiles, but the reply lists no newConstants: no positive evidence
    "FAILCOMPILE": "native_decide",  # the guard refuses it before Lean sees it
}


def double_policy() -> ScriptedPolicy:
    def answer(prompt: str) -> list[tuple[str, float]]:
        if not prompt.startswith(REPAIR):
            return [(FAIL_A, -1.0), (FAIL_B, -1.1), (FAIL_C, -1.2)]
        failed = prompt.split("```lean4\n")[1].split("\n```", maxsplit=1)[0]
        word = failed.rsplit("exact ", 1)[1]
        return [(REVISIONS[word], -1.0)]

    return ScriptedPolicy(answer, key=lambda p: p)


@pytest.mark.parametrize("version", ["0.3.4", "0.3.16"])
def test_against_the_strict_double_revisions_count_only_on_the_compiles_evidence(version: str) -> None:
    policy = double_policy()
    settings = WholeSettings(fmt=PromptFormat.PLAIN_WHOLE, max_proofs=6, sampling=Sampling(n=3, stop=("```",)),
                             repair=ON)
    outcome = asyncio.run(prove_whole(DOUBLE_THEOREM, InProcessReplay(DoubleServer(version)), policy, settings, GUARD))
    result = outcome.result
    assert result.proved, result.detail
    assert (result.proofs_sampled, result.budget_at_proof, result.revisions, result.revision_at_proof) == (6, 6, 3, 1)
    assert result.tactics == ["rfl"]
    rows = {e.tactic: e for e in outcome.edges}
    assert rows["native_decide"].outcome is EdgeOutcome.REFUSED and rows["native_decide"].revises == 1
    assert rows["exact noconstants_x"].outcome is EdgeOutcome.ERROR
    assert rows["exact noconstants_x"].error == "not counted: the compile reply lists no newConstants for the " \
        "theorem's unit"
    assert rows["rfl"].outcome is EdgeOutcome.CLOSED and rows["rfl"].revises == 3
    # Each repair prompt carries its own failed proof's message, mapped onto the shown block: the double reports
    # `unsolved goals` two lines below the theorem's first line, the proof's second line (`exact …`), column 0.
    prompts = [call for request in policy.calls for call in request if call.startswith(REPAIR)]
    assert len(prompts) == 3
    for prompt, word in zip(prompts, ("FAILCOMPILE", "FAILCOMPILE_b", "FAILCOMPILE_c"), strict=True):
        assert f"  skip\n  exact {word}\n```\nLean's messages:\n3:2: error: unsolved goals\n" in prompt
        assert "The goal at the first error:\n" in prompt  # replayed from the start through `skip`


def test_the_summary_shows_what_repair_revised(tmp_path: Path, store: Store) -> None:
    outcome = whole(answering(WRONG, PROOF))
    uri = f"file://{tmp_path}/traj"
    write_trajectory(uri, [(outcome.result, outcome.edges)], store=store)
    summary = summarize(uri, store=store)
    assert (summary.repaired, summary.revisions, summary.proved_by_revision) == (1, 1, {1: 1})
    assert "repair: 1 failed proofs revised, 1 revisions; proved by revision 1 1" in render_summary(summary)
    plain = f"file://{tmp_path}/plain"
    again = whole(answering(WRONG, PROOF), repair=RepairSettings(rounds=0))
    write_trajectory(plain, [(again.result, again.edges)], store=store)
    assert "repair:" not in render_summary(summarize(plain, store=store))


@pytest.mark.parametrize("version", ["0.3.4", "0.3.16"])
def test_against_the_strict_double_a_hybrid_revision_is_replayed_and_guarded_like_any_attempt(version: str) -> None:
    def answer(prompt: str) -> list[tuple[str, float]]:
        if not prompt.startswith(REPAIR):
            return [("skip\nerror", -1.0), ("skip\nstrmsg", -1.1)]
        # Lean's message on each attempt: the double's `error` is linarith's, `strmsg` an unknown identifier.
        return [("native_decide" if "linarith failed" in prompt else "skip\ndone", -1.0)]

    policy = ScriptedPolicy(answer, key=lambda p: p)
    settings = HybridSettings(fmt=PromptFormat.PLAIN_PROOF, sampling=Sampling(stop=("```",)), num_proofs=2,
                              min_proofs=2, max_proofs=4, repair=ON)
    outcome = asyncio.run(prove_hybrid(DOUBLE_THEOREM, InProcessReplay(DoubleServer(version)), policy, settings,
                                       GUARD))
    result = outcome.result
    assert result.proved, result.detail
    assert (result.proofs_sampled, result.budget_at_proof, result.revisions, result.revision_at_proof) == (4, 4, 2, 1)
    assert result.tactics == ["skip", "done"]
    rows = [(e.tactic, e.outcome, e.revision, e.revises) for e in outcome.edges]
    assert rows == [("skip", EdgeOutcome.OK, 0, None), ("error", EdgeOutcome.ERROR, 0, None),
                    ("strmsg", EdgeOutcome.ERROR, 0, None), ("native_decide", EdgeOutcome.REFUSED, 1, 2),
                    ("done", EdgeOutcome.CLOSED, 1, 3)]
    prompts = [call for request in policy.calls for call in request if call.startswith(REPAIR)]
    assert len(prompts) == 2
    # The failed attempt from the theorem's start, its message at the failing tactic (line 3, column 2 of the block)
    # and the goal that tactic was tried in.
    assert "  skip\n  error\n```\nLean's messages:\n3:2: error: linarith failed to find a contradiction\n" in prompts[0]
    assert "  skip\n  strmsg\n```\nLean's messages:\n3:2: error: unknown identifier 'foo'\n" in prompts[1]
    assert all("The goal at the first error:\n" in prompt for prompt in prompts)


def test_cut_at_error_shows_the_failed_proof_up_to_the_tactic_its_first_error_is_in() -> None:
    wrong = "intro hx\nlinarith\nnorm_num\nsimp"
    policy = answering(wrong, PROOF)
    outcome = whole(policy, repair=RepairSettings(rounds=1, message_tokens=512, cut=True))
    assert outcome.result.proved and outcome.result.revision_at_proof == 1
    feedback = Feedback.from_json(outcome.edges[0].feedback or "")
    assert feedback.proof == WRONG  # `norm_num` and `simp` after the failing `linarith` are left out
    (prompt,) = [call[0] for call in policy.calls if call[0].startswith(REPAIR)]
    assert "  intro hx\n  linarith\n```\nLean's messages:\n3:2: error: linarith failed" in prompt
    full = Feedback.from_json(whole(answering(wrong, PROOF)).edges[0].feedback or "")
    assert full.proof == wrong


class UnsolvedAtBy(InProcessReplay):
    """The replay server with real Lean's usual shape of a failed compile: beside the body's error, `unsolved goals`
    at the theorem's `by` on the declaration line (listed after it, as Lean lists them; tests/search/
    test_repair_messages.py has the shape from the repl's tests)."""

    async def compile(self, text: str, timeout_s: float | None = None) -> CompileResult:
        result = await super().compile(text, timeout_s)
        rows = text.split("\n")
        line = next(n for n, row in enumerate(rows, start=1) if row.endswith(":= by"))
        unsolved = CompileMessage("error", "unsolved goals\nx : ℝ\nhx : 0 < x\n⊢ x + 1 / x ≥ 2", line=line,
                                  column=len(rows[line - 1]) - 2)
        return CompileResult(tuple(
            dataclasses.replace(unit, messages=(*unit.messages, unsolved))
            if any(m.severity == "error" for m in unit.messages) else unit for unit in result.units))


def test_unsolved_goals_at_by_beside_the_bodys_error_keeps_the_goal_and_the_cut_at_the_failing_tactic() -> None:
    wrong = "intro hx\nlinarith\nnorm_num\nsimp"
    policy = answering(wrong, PROOF)
    settings = WholeSettings(fmt=PromptFormat.PLAIN_WHOLE, max_proofs=4, sampling=Sampling(n=1, stop=("```",)),
                             repair=RepairSettings(rounds=1, message_tokens=512, cut=True), seed=7)
    outcome = asyncio.run(prove_whole(theorem(), UnsolvedAtBy(ReplayServer(CORPUS)), policy, settings, GUARD))
    assert outcome.result.proved and outcome.result.revision_at_proof == 1
    feedback = Feedback.from_json(outcome.edges[0].feedback or "")
    assert feedback.proof == WRONG  # cut after `linarith`, the tactic the body's error is in
    assert feedback.goal == "x : ℝ\nhx : 0 < x\n⊢ x + 1 / x ≥ 2"  # the state `linarith` was tried in
    assert [(m.severity, m.text.split("\n")[0], m.line, m.column) for m in feedback.messages] == [
        ("error", "unsolved goals", 0, None), ("error", "linarith failed to find a contradiction", 2, 0)]


def test_body_line_finds_where_an_assemblys_tactics_start_in_its_compile_and_nothing_in_another_text() -> None:
    """Messages of a compile are mapped onto the proof's tactics by this offset: the compile drops the header's
    `import` lines, so the first tactic's line counts from the first line that stays."""
    from burnqed.lean.soundness import assemble_proof, body_line, compile_text

    theorem = Theorem(name="t", signature="(x : ℕ) : x = x", header="import Mathlib\nimport Aesop\nopen Nat")
    tactics = ["intro", "rfl"]
    proof = assemble_proof(theorem, tactics)
    assert proof is not None
    line = body_line(proof, tactics)
    assert line is not None
    compiled = compile_text(proof, "t", None).text.split("\n")
    assert compiled[line - 1:line + 1] == ["  intro", "  rfl"]  # 1-based: the first tactic's line, then the next
    assert body_line(proof, ["simp"]) is None  # the text does not end with these tactics: not their assembly
    assert body_line(proof.removesuffix("\n"), tactics) is None  # an assembly ends with its body's newline
    assert body_line(proof, []) is None  # no tactics: no body to find

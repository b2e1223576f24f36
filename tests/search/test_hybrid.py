"""Hybrid search: whole proofs from states, replayed through the trie; the must-show cases against the replay
server, the schedule, pruning, the value model as prior, and resuming a killed search from its checkpoint."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from burnqed.config import LeanConfig
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay
from burnqed.lean.soundness import check_proof_text
from burnqed.policy.base import AsyncClosing, Completion, Sampling, Seeds, refused
from burnqed.records.replies import TacticResult
from burnqed.records.results import EdgeOutcome, FailureReason, Label
from burnqed.records.theorem import Theorem
from burnqed.search.hybrid import prove_hybrid
from burnqed.search.hybrid_settings import HybridSettings
from burnqed.search.journal import FileJournal, RoundRecord
from burnqed.search.step import SearchOutcome
from burnqed.search.trie import Priority, TrieNode, chain_reason, prune_reason
from burnqed.search.value import ValueFn
from burnqed.search.whole import WholeSettings, prove_whole
from burnqed.storage import Store
from leankit.corpus import load_corpus
from minilean.replay.replay_server import ReplayServer
from tests.doubles.policy_double import Answer, ScriptedPolicy, declaration_of
from tests.search.helpers import as_forall_declaration

CORPUS = load_corpus()
GUARD = TacticGuard.from_config(LeanConfig())
NAME = "ineq_x_plus_reciprocal_ge_two"
ROOT = "⊢ ∀ (x : ℝ), 0 < x → x + 1 / x ≥ 2"
AFTER_INTRO = "⊢ x + 1 / x ≥ 2"
AFTER_FIELD_SIMP = "⊢ 2 * x ≤ x * x + 1"
FIX = "nlinarith [sq_nonneg (x - 1)]"
SETTINGS = HybridSettings(sampling=Sampling(stop=("```",)), num_proofs=8, min_proofs=2, decay_depth=2,
                          max_tokens=100, min_tokens=50, max_proofs=64, timeout_s=60.0)


class TacticLog(InProcessReplay):
    """The replay server, keeping every tactic sent to it."""

    def __init__(self) -> None:
        super().__init__(ReplayServer(CORPUS))
        self.sent: list[str] = []

    async def tactic(self, state_id: int, tactic: str, goal_id: int | None = None) -> TacticResult:
        self.sent.append(tactic)
        return await super().tactic(state_id, tactic, goal_id)


def theorem(name: str = NAME) -> Theorem:
    spec = CORPUS.by_name(name)
    assert spec is not None
    return as_forall_declaration(spec)


def by_target(table: dict[str, Answer]) -> ScriptedPolicy:
    """Answers keyed by the state's last ⊢ line."""
    return ScriptedPolicy(lambda state: table.get(state.split("\n")[-1], []))


def run(policy: ScriptedPolicy, settings: HybridSettings = SETTINGS, env: InProcessReplay | None = None,
        th: Theorem | None = None, value: ValueFn | None = None) -> SearchOutcome:
    lean = env or InProcessReplay(ReplayServer(CORPUS))
    return asyncio.run(prove_hybrid(th or theorem(), lean, policy, settings, GUARD, value))


def recompiles(proof: str | None, name: str = NAME) -> bool:
    assert proof is not None
    spec = CORPUS.by_name(name)
    assert spec is not None
    return asyncio.run(check_proof_text(InProcessReplay(ReplayServer(CORPUS)), name, proof,
                                        index_header=Theorem.from_recorded(spec).header)).verified


# The only proof ever sampled from the root breaks at its last step; from the state after `field_simp` the
# policy knows the fix. From the state after `intro` it repeats the broken ending.
BROKEN_TABLE: dict[str, Answer] = {
    ROOT: [("intro x hx\nfield_simp\nlinarith", -1.0)],
    AFTER_INTRO: [("field_simp\nlinarith", -1.0)],
    AFTER_FIELD_SIMP: [(FIX, -1.0)],
}


def test_hybrid_proves_by_expanding_a_replayed_intermediate_node_and_whole_does_not() -> None:
    env = TacticLog()
    policy = by_target(BROKEN_TABLE)
    outcome = run(policy, env=env)
    result = outcome.result
    assert result.proved and result.mode == "hybrid"
    assert result.tactics == ["intro x hx", "field_simp", FIX]
    # Round 1 at the root; round 2 at the node after `intro` (Q = 1: its completion went on), whose answer is
    # followed through the trie for free and cut at the cached failure; round 3 at the node after `field_simp`.
    assert [call[0].split("\n")[-1] for call in policy.calls] == [ROOT, AFTER_INTRO, AFTER_FIELD_SIMP]
    assert (result.nodes_expanded, result.proofs_sampled, result.budget_at_proof) == (3, 3, 3)
    assert env.sent == ["intro x hx", "field_simp", "linarith", FIX]  # round 2 sent nothing to Lean
    # N and the token limit decay with depth (8 → 2 and 100 → 50 at depth 2).
    assert [(s.n, s.max_new_tokens) for s in policy.samplings] == [(8, 100), (5, 75), (2, 50)]
    # The counted proof re-compiles; its path is positive, the broken step negative.
    assert recompiles(result.proof)
    labels = {e.tactic: (e.outcome, e.label) for e in outcome.edges}
    assert labels == {"intro x hx": (EdgeOutcome.OK, Label.POSITIVE), "field_simp": (EdgeOutcome.OK, Label.POSITIVE),
                      "linarith": (EdgeOutcome.ERROR, Label.NEGATIVE), FIX: (EdgeOutcome.CLOSED, Label.POSITIVE)}
    # Every request but the header's scope load, which the worker sends before the start, is the search's own.
    assert result.lean_calls == env.requests - 1 and result.tokens == 3 * 3

    whole = ScriptedPolicy(lambda _: [("intro x hx\nfield_simp\nlinarith", -1.0)], key=declaration_of)
    settings = WholeSettings(sampling=Sampling(n=4, stop=("```",)), max_proofs=8)
    missed = asyncio.run(prove_whole(theorem(), InProcessReplay(ReplayServer(CORPUS)), whole, settings, GUARD)).result
    assert not missed.proved and missed.failure_reason is FailureReason.MAX_PROOFS and missed.proofs_sampled == 8


def test_a_prefix_shared_by_several_completions_goes_to_lean_once() -> None:
    answers = [
        ("intro x hx\nfield_simp\nlinarith", -1.0),
        ("intro x hx\nfield_simp\n" + FIX, -2.0),
        ("intro x hx\nrw [ge_iff_le, ← sub_nonneg]\npositivity", -3.0),  # replayed after the proof: training data
    ]
    env = TacticLog()
    outcome = run(by_target({ROOT: answers}), env=env)
    result = outcome.result
    assert result.proved and (result.nodes_expanded, result.proofs_sampled, result.budget_at_proof) == (1, 3, 2)
    assert Counter(env.sent) == Counter({"intro x hx": 1, "field_simp": 1, "linarith": 1, FIX: 1,
                                         "rw [ge_iff_le, ← sub_nonneg]": 1, "positivity": 1})
    rows = {e.tactic: e for e in outcome.edges}
    assert rows["positivity"].outcome is EdgeOutcome.ERROR and rows["positivity"].label is Label.NEGATIVE
    # A completion's tokens go to the rows it created, by tactic length: the first created three rows.
    first = [rows["intro x hx"], rows["field_simp"], rows["linarith"]]
    assert sum(r.n_tokens for r in first) == 3 and rows[FIX].n_tokens == 3 and result.tokens == 9
    assert sum(r.logprob for r in first) == pytest.approx(-1.0)
    assert recompiles(result.proof)


def test_the_budget_caps_a_round_and_ends_the_search() -> None:
    policy = by_target({ROOT: [(f"intro x hx\nlinarith [h{i}]", -1.0) for i in range(8)]})
    result = run(policy, HybridSettings(sampling=Sampling(stop=("```",)), num_proofs=8, max_proofs=5)).result
    assert policy.samplings[0].n == 5 and result.proofs_sampled == 5
    assert not result.proved and result.failure_reason is FailureReason.MAX_PROOFS


def test_with_every_open_node_expanded_the_best_one_is_sampled_again() -> None:
    answers = iter([[("linarith", -1.0)], [("intro x hx\nfield_simp\n" + FIX, -1.0)]])  # a second, better sample
    policy = ScriptedPolicy(lambda _: next(answers))
    result = run(policy).result
    assert result.proved and (result.nodes_expanded, result.proofs_sampled, result.budget_at_proof) == (2, 2, 2)
    assert [call[0].split("\n")[-1] for call in policy.calls] == [ROOT, ROOT]


def test_a_state_reached_again_is_pruned() -> None:
    th = theorem("algebra_2x_plus_3_eq_11")
    policy = by_target({"⊢ ∀ (x : ℝ), 2 * x + 3 = 11 → x = 4": [("intro x\nintro h₀\nrfl", -1.0),
                                                                   ("intro x h₀\nlinarith", -2.0)]})
    outcome = run(policy, HybridSettings(sampling=Sampling(stop=("```",)), max_proofs=2), th=th)
    rows = {e.tactic: e for e in outcome.edges}
    assert rows["intro x h₀"].outcome is EdgeOutcome.OK
    assert rows["intro x h₀"].error == "pruned: the state was already reached (node 2)"
    assert "linarith" not in rows and not outcome.result.proved


def test_pruning_rules() -> None:
    root = TrieNode(0, None, 0, None, "⊢ p", ("p",))
    assert prune_reason(root, "simp", ("p",), None) is None  # one unchanged step is fine
    stuck = TrieNode(1, root, 1, "simp", "⊢ p", ("p",), unchanged=3)
    assert "targets unchanged" in (prune_reason(stuck, "simp", ("p",), None) or "")
    assert prune_reason(root, "have h : q", ("q", "p"), None) is None  # a split `have` opens its own goal
    assert "opened 2 goal(s)" in (prune_reason(root, "have h : q", ("q", "r", "p"), None) or "")
    assert "opened 1 goal(s)" in (prune_reason(root, "have h : q := foo", ("q", "p"), None) or "")
    chained = TrieNode(1, root, 1, "have h4 : q", "⊢ p", ("p",), haves=4)
    assert chain_reason(chained, "have h5 : r") is not None and chain_reason(chained, "simp") is None


class TableValue(AsyncClosing):
    """Energies by the state's last ⊢ line; records every call."""

    def __init__(self, table: dict[str, float]) -> None:
        self.table = table
        self.calls: list[tuple[str, list[str]]] = []

    async def energies(self, goal: str, states: Sequence[str]) -> list[float]:
        self.calls.append((goal, list(states)))
        return [self.table.get(s.split("\n")[-1], 0.0) for s in states]

    async def close(self) -> None:
        """Nothing to release."""


def test_the_value_model_scores_the_new_nodes_once_per_round_and_is_their_prior() -> None:
    th = theorem("algebra_2x_plus_3_eq_11")
    goal = "⊢ ∀ (x : ℝ), 2 * x + 3 = 11 → x = 4"
    table = {goal: [("intro x\nlinarith", -1.0), ("intro x h₀\nrfl", -1.0)]}
    settings = HybridSettings(sampling=Sampling(stop=("```",)), max_rounds=2)
    plain = by_target(table)
    run(plain, settings, th=th)
    assert plain.calls[1][0].endswith("⊢ 2 * x + 3 = 11 → x = 4")  # a tie: the older node
    value = TableValue({"⊢ x = 4": -10.0})
    guided = by_target(table)
    outcome = run(guided, settings, th=th, value=value)
    assert guided.calls[1][0].endswith("⊢ x = 4")  # the low energy made it the better node
    assert len(value.calls) == 1 and len(value.calls[0][1]) == 2 and value.calls[0][0].endswith(goal)
    scored = {e.tactic: e.energy for e in outcome.edges if e.outcome is EdgeOutcome.OK}
    assert scored == {"intro x": 0.0, "intro x h₀": -10.0}
    node = TrieNode(1, None, 1, "t", "⊢ p", ("p",), prior=-1.0, energy=-10.0)
    assert Priority(value_weight=1.0).prior(node) == 10.0 and Priority(value_ramp_depth=2).prior(node) == 4.5


# ---------------------------------------------------------------------------------------------- resume


class Killed(Exception):
    """The process died right after a checkpoint."""


class KillingJournal(FileJournal):
    def __init__(self, prefix: str, after_round: int, *, store: Store) -> None:
        super().__init__(prefix, store=store)
        self.after_round = after_round

    def append(self, theorem: str, record: RoundRecord) -> None:
        super().append(theorem, record)
        if record.round == self.after_round:
            raise Killed


def test_a_killed_search_resumes_from_its_last_round(tmp_path: Path, store: Store) -> None:
    full = run(by_target(BROKEN_TABLE))
    prefix = str(tmp_path / "shard")
    with pytest.raises(Killed):
        run(by_target(BROKEN_TABLE), dataclasses.replace(SETTINGS, journal=KillingJournal(prefix, 2, store=store)))
    assert len(FileJournal(prefix, store=store).load(NAME)) == 3  # the start and rounds 1-2
    again = by_target(BROKEN_TABLE)
    env = TacticLog()
    resumed = run(again, dataclasses.replace(SETTINGS, journal=FileJournal(prefix, store=store)), env=env)
    assert [call[0].split("\n")[-1] for call in again.calls] == [AFTER_FIELD_SIMP]  # only round 3 was left
    result = resumed.result
    assert result.proved and result.tactics == full.result.tactics
    assert (result.nodes_expanded, result.proofs_sampled, result.budget_at_proof, result.tokens) == (3, 3, 3, 9)
    # The new worker rebuilt the node by replaying its path; the rows are the uninterrupted run's.
    assert env.sent == ["intro x hx", "field_simp", FIX]
    assert [(e.node_id, e.tactic, e.outcome, e.label) for e in resumed.edges] == [
        (e.node_id, e.tactic, e.outcome, e.label) for e in full.edges
    ]
    assert result.lean_calls > full.result.lean_calls  # both processes' requests, the rebuild included
    # The usage curve goes on from the journal's: proofs 1 and 2 as the killed run recorded them (the uninterrupted
    # run's), proof 3 with the rebuild's requests on top.
    assert full.result.curve is not None and resumed.result.curve is not None
    assert (full.result.curve.tokens, full.result.curve.lean_calls) == ([3, 6, 9], [5, 5, 8])
    assert resumed.result.curve.tokens == [3, 6, 9]
    assert resumed.result.curve.lean_calls[:2] == [5, 5]
    assert resumed.result.curve.lean_calls[2] == result.lean_calls > 8
    assert recompiles(result.proof)


def test_a_checkpoint_of_other_settings_is_not_resumed(tmp_path: Path, store: Store) -> None:
    prefix = str(tmp_path / "shard")
    with pytest.raises(Killed):
        run(by_target(BROKEN_TABLE), dataclasses.replace(SETTINGS, journal=KillingJournal(prefix, 1, store=store)))
    again = by_target(BROKEN_TABLE)
    other = dataclasses.replace(SETTINGS, max_depth=10, journal=FileJournal(prefix, store=store))
    assert run(again, other).result.proved and len(again.calls) == 3  # searched from the start



def killed_with_its_proof(prefix: str, store: Store) -> Path:
    """A search killed right after the round that found its proof: the journal's last round, which holds it."""
    with pytest.raises(Killed):
        run(by_target(BROKEN_TABLE), dataclasses.replace(SETTINGS, journal=KillingJournal(prefix, 3, store=store)))
    (last,) = Path(prefix).glob("_inflight/*/round-000003.json")
    return last


def resume_silent(prefix: str, store: Store,
                  env: InProcessReplay | None = None) -> tuple[SearchOutcome, ScriptedPolicy]:
    """Resume with a policy that proposes nothing: whatever is counted comes from the journal."""
    silent = ScriptedPolicy(lambda _: [])
    settings = dataclasses.replace(SETTINGS, max_rounds=5, journal=FileJournal(prefix, store=store))
    return run(silent, settings, env=env), silent


def test_a_resumed_search_counts_its_journals_proof_once_lean_closed_and_compiled_it_again(tmp_path: Path,
                                                                                            store: Store) -> None:
    full = run(by_target(BROKEN_TABLE))
    prefix = str(tmp_path / "shard")
    killed_with_its_proof(prefix, store)
    env = TacticLog()
    resumed, silent = resume_silent(prefix, store, env)
    result = resumed.result
    assert result.proved and silent.calls == [] and result.rejected_proofs == 0 and result.detail is None
    assert (result.tactics, result.proof, result.budget_at_proof) == (full.result.tactics, full.result.proof, 3)
    assert env.sent == ["intro x hx", "field_simp", FIX]  # the journal's path, replayed from the start in Lean
    assert [(e.node_id, e.tactic, e.outcome, e.label) for e in resumed.edges] == [
        (e.node_id, e.tactic, e.outcome, e.label) for e in full.edges]
    assert recompiles(result.proof)


def test_a_journals_proof_text_is_never_what_counts(tmp_path: Path, store: Store) -> None:
    prefix = str(tmp_path / "shard")
    last = killed_with_its_proof(prefix, store)
    record = json.loads(last.read_text())
    honest = record["proofs"][0]["proof"]
    record["proofs"][0]["proof"] = honest.replace("  nlinarith [sq_nonneg (x - 1)]\n", "  sorry\n")
    last.write_text(json.dumps(record))
    result = resume_silent(prefix, store)[0].result
    assert result.proved and result.proof == honest  # assembled afresh from the path Lean closed again


FORGERIES: dict[str, tuple[Callable[[str], str], str]] = {  # an edit of the journal's last round → why not counted
    "tactics": (lambda text: text.replace('"field_simp","nlinarith [sq_nonneg (x - 1)]"]', '"field_simp","sorry"]'),
                "its tactics are not the trie's path to its closing row"),
    "a step that fails": (lambda text: text.replace(FIX, "linarith"),
                          "replayed from the theorem's start, its path does not close the goal in Lean"),
    "a step the guard denies": (lambda text: text.replace(FIX, "sorry"),
                                "replayed from the theorem's start, its path does not close the goal in Lean"),
    "its row": (lambda text: text.replace('"edge":4,"proof"', '"edge":40,"proof"'),
                "the journal names no closing row of the trie for it"),
}


@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_a_forged_journal_proof_is_not_counted_and_the_result_says_why(forgery: str, tmp_path: Path,
                                                                       store: Store) -> None:
    prefix = str(tmp_path / "shard")
    last = killed_with_its_proof(prefix, store)
    edit, why = FORGERIES[forgery]
    forged = edit(last.read_text())
    assert forged != last.read_text()
    last.write_text(forged)
    resumed, silent = resume_silent(prefix, store)
    result = resumed.result
    assert len(silent.calls) == 2  # the search went on from round 3 to max_rounds (5), finding nothing
    assert not result.proved and not result.unverified and result.proof is None and result.rejected_proofs == 1
    row = 40 if forgery == "its row" else 4
    assert result.detail == f"a proof its journal holds (row {row}) did not check again: {why}"
    assert all(edge.label is not Label.POSITIVE for edge in resumed.edges)


def test_a_refused_prompt_fails_its_node_alone_and_is_not_asked_again(tmp_path: Path, store: Store) -> None:
    class Refusing(ScriptedPolicy):
        async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
            answered = await super().generate(prompts, sampling, seeds)
            return [refused("too long", sampling.n) if AFTER_INTRO in prompt else answer
                    for prompt, answer in zip(prompts, answered, strict=True)]

    policy = Refusing(lambda state: {ROOT: [("intro x hx\nlinarith", -1.0)]}.get(state.split("\n")[-1], []))
    prefix = str(tmp_path / "shard")
    outcome = run(policy, dataclasses.replace(SETTINGS, max_rounds=10, journal=FileJournal(prefix, store=store)))
    rows = [e for e in outcome.edges if e.outcome is EdgeOutcome.PROMPT_REJECTED]
    assert len(rows) == 1 and rows[0].error == "too long" and outcome.result.rejected_prompts == 1
    # The root was sampled again (empty answers), the refused node never again.
    assert [call[0].split("\n")[-1] for call in policy.calls][:2] == [ROOT, AFTER_INTRO]
    assert all(call[0].split("\n")[-1] == ROOT for call in policy.calls[2:])
    # The node is dead, and so recorded in the round's checkpoint (a resumed search never asks about it either).
    (refused_node,) = {row.parent_id for row in rows}
    records = FileJournal(prefix, store=store).load(NAME)
    assert {stat.id for record in records for stat in record.stats if stat.dead} == {refused_node}


def test_a_completion_over_the_text_cap_is_a_refused_row_and_reaches_no_reader_nor_lean() -> None:
    env = TacticLog()
    written = len("intro x hx\nfield_simp\nlinarith\n```")  # 34 characters, as the scripted policy writes it
    capped = TacticGuard(LeanConfig().deny, max_text_chars=written - 1)
    outcome = asyncio.run(prove_hybrid(theorem(), env, by_target(BROKEN_TABLE), SETTINGS, capped))
    assert not outcome.result.proved and env.sent == []
    reason = "refused by the tactic guard: the completion has 34 characters, over the cap of 33 (lean.max_text_chars)"
    assert {(edge.parent_id, edge.depth, edge.tactic, edge.outcome, edge.error) for edge in outcome.edges} == {
        (outcome.edges[0].parent_id, 1, "", EdgeOutcome.REFUSED, reason)}
    at_cap = asyncio.run(prove_hybrid(theorem(), TacticLog(), by_target(BROKEN_TABLE), SETTINGS,
                                      TacticGuard(LeanConfig().deny, max_text_chars=written)))
    assert [(edge.tactic, edge.outcome) for edge in at_cap.edges[:2]] == [  # at the cap the completion is read
        ("intro x hx", EdgeOutcome.OK), ("field_simp", EdgeOutcome.OK)]
    # …and the proof it closes (51 characters: `nlinarith [sq_nonneg (x - 1)]` last) is model text under the same cap
    assert not at_cap.result.proved
    assert asyncio.run(prove_hybrid(theorem(), TacticLog(), by_target(BROKEN_TABLE), SETTINGS,
                                    TacticGuard(LeanConfig().deny, max_text_chars=51))).result.proved

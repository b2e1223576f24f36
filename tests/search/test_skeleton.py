"""The search skeleton (`burnqed.search.skeleton`) on its own, without Lean: how a run's failures are classified,
the re-close after a lost worker, what counts as a proof, the limits and the result. The engines' own tests cover
the same paths end to end; these pin each rule to one place (and kill its mutants in a second)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest

from burnqed.errors import LeanCrashError, LeanProtocolError, LeanStartError, LeanStatesLostError
from burnqed.lean.env import LeanEnv
from burnqed.lean.guard import TacticGuard
from burnqed.lean.soundness import Verdict
from burnqed.policy.base import Policy
from burnqed.records.enums import DeclarationForm, SearchMode
from burnqed.records.replies import Goal, TacticKind, TacticResult
from burnqed.records.results import Edge, EdgeOutcome, FailureReason, TheoremResult, UsageCurve
from burnqed.records.theorem import Theorem
from burnqed.search import skeleton
from burnqed.search.answer import AnswerSlot
from burnqed.search.rebuild import LeanGone
from burnqed.search.root import Root
from burnqed.search.skeleton import (
    LOST_RECLOSE,
    UNVERIFIED_ROW,
    EngineCore,
    Proofs,
    SearchOutcome,
    Spent,
    Stop,
    final_result,
    refusal_row,
    refused_ending,
    run_search,
    tactic_row,
    verify_closing,
)
from burnqed.search.usage import CountingLean, UsageMeter, Waits
from burnqed.search.value import ValueFn

THEOREM = Theorem(name="t", statement="1 + 1 = 2", header="open Nat")
CLOSED = TacticResult(TacticKind.SUCCESS, state_id=7)
OPEN = TacticResult(TacticKind.SUCCESS, state_id=8, goals=(Goal("⊢ True"),))


def finish_recorder() -> tuple[list[tuple[FailureReason | None, str | None]], Callable[..., SearchOutcome]]:
    seen: list[tuple[FailureReason | None, str | None]] = []

    def finish(reason: FailureReason | None, detail: str | None) -> SearchOutcome:
        seen.append((reason, detail))
        return cast(SearchOutcome, None)

    return seen, finish


def run(start: Callable[[], Awaitable[object]], loop: Callable[[], Awaitable[FailureReason | None]]) -> list[Any]:
    seen, finish = finish_recorder()
    asyncio.run(run_search(start, loop, finish))
    return seen


async def fine() -> None:
    return None


def test_run_search_classifies_start_errors_and_a_worker_that_keeps_dying() -> None:
    order: list[str] = []

    async def start() -> None:
        order.append("start")

    async def loop() -> FailureReason | None:
        order.append("loop")
        return FailureReason.MAX_NODES

    assert run(start, loop) == [(FailureReason.MAX_NODES, None)] and order == ["start", "loop"]

    async def bad_statement() -> None:
        raise LeanProtocolError("elab", "unknown identifier 'x'\nmore", "goal.start")

    async def crashed() -> None:
        raise LeanCrashError("the worker died\nits stderr")

    async def gone() -> FailureReason | None:
        raise LeanGone("the shared Lean worker was replaced 9 times")

    async def never() -> FailureReason | None:
        raise AssertionError("the loop must not run after a failed start")

    assert run(bad_statement, never) == [(FailureReason.START_ERROR, "unknown identifier 'x'")]
    assert run(crashed, never) == [(FailureReason.LEAN_ERROR, "the worker died")]
    assert run(fine, gone) == [(FailureReason.LEAN_ERROR, "the shared Lean worker was replaced 9 times")]


def test_a_protocol_error_without_a_description_shows_its_message() -> None:
    async def bare() -> None:
        raise LeanProtocolError("elab", "", "goal.start")

    async def never() -> FailureReason | None:
        raise AssertionError

    assert run(bare, never) == [(FailureReason.START_ERROR, "Lean rejected `goal.start`: elab: ")]


def test_a_worker_that_cannot_start_is_not_a_result() -> None:
    async def cannot() -> None:
        raise LeanStartError("no lean on PATH")

    seen, finish = finish_recorder()
    with pytest.raises(LeanStartError):
        asyncio.run(run_search(cannot, fine_loop, finish))
    assert seen == []


async def fine_loop() -> FailureReason | None:
    return None


def verify(monkeypatch: pytest.MonkeyPatch, answers: list[Verdict | None],
           reclosed: list[TacticResult | None]) -> tuple[Verdict, list[TacticResult], list[float], int]:
    """verify_closing with `verify_proof` answering `answers` in turn (None: the worker was lost meanwhile)."""
    finals: list[TacticResult] = []
    charged: list[float] = []
    recloses = iter(reclosed)
    calls = 0

    async def fake_verify(lean: object, theorem: Theorem, tactics: list[str], final: TacticResult,
                          guard: object, *, compile: bool, index_header: str | None) -> Verdict:
        assert tactics == ["intro", "rfl"] and compile is False and index_header == "open Nat"
        finals.append(final)
        answer = answers.pop(0)
        if answer is None:
            raise LeanStatesLostError("replaced")
        return answer

    async def reclose() -> TacticResult | None:
        nonlocal calls
        calls += 1
        return next(recloses)

    monkeypatch.setattr(skeleton, "verify_proof", fake_verify)
    verdict = asyncio.run(verify_closing(cast(LeanEnv, None), THEOREM, cast(TacticGuard, None), ["intro", "rfl"],
                                         CLOSED, compile=False, reclose=reclose, charge=charged.append,
                                         index_header="open Nat"))
    return verdict, finals, charged, calls


def test_verify_closing_recloses_after_a_lost_worker_and_verifies_there(monkeypatch: pytest.MonkeyPatch) -> None:
    again = TacticResult(TacticKind.SUCCESS, state_id=70)
    ok = Verdict(True, proof="theorem t : 1 + 1 = 2 := by\n  intro\n  rfl", compiled=True)
    verdict, finals, charged, calls = verify(monkeypatch, [None, ok], [again])
    assert verdict is ok and finals == [CLOSED, again] and calls == 1
    assert len(charged) == 2 and all(seconds >= 0 for seconds in charged)  # both attempts booked


def test_verify_closing_needs_the_close_to_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    for reclosed in (None, OPEN):
        verdict, finals, _, calls = verify(monkeypatch, [None], [reclosed])
        assert verdict == Verdict(False, LOST_RECLOSE) and finals == [CLOSED] and calls == 1
    first = Verdict(False, "the root term has sorry")
    verdict, finals, charged, calls = verify(monkeypatch, [first], [])
    assert verdict is first and calls == 0 and len(charged) == 1


def closing_row(node_id: int, parent_id: int = 0) -> Any:
    row = tactic_row(node_id, parent_id, 1, "⊢ 1 + 1 = 2", "rfl", CLOSED)
    row.outcome = EdgeOutcome.CLOSED
    return row


def test_proofs_count_only_what_passed_and_say_why_on_the_row() -> None:
    proofs = Proofs()
    assert not proofs.found() and proofs.ending(FailureReason.TIMEOUT) is FailureReason.TIMEOUT
    rejected = closing_row(1)
    assert proofs.count(rejected, Verdict(False, "sorry in the proof"), ["sorry"], 1) is None
    assert rejected.error == "not counted: sorry in the proof" and proofs.rejected == 1 and not proofs.found()
    unverified = closing_row(2)
    kept = proofs.count(unverified, Verdict(True, proof="p0"), ["rfl"], 2)
    assert kept is not None and kept.edge == 2 and kept.proof == "p0" and kept.budget == 2
    assert proofs.unverified == [kept] and proofs.verified == [] and unverified.error == UNVERIFIED_ROW
    assert proofs.found() and proofs.ending(FailureReason.TIMEOUT) is FailureReason.TIMEOUT  # unverified: no proof
    verified = closing_row(3)
    proof = proofs.count(verified, Verdict(True, proof="p1", compiled=True), ["simp"], 3)
    assert proofs.verified == [proof] and verified.error is None and proofs.rejected == 1
    assert proofs.ending(FailureReason.TIMEOUT) is None


def test_a_sketch_subgoal_accepted_is_a_textless_proof_and_a_refused_one_counts_nothing() -> None:
    proofs = Proofs()
    refused = closing_row(1)
    assert proofs.accept(refused, Verdict(False, "the goal is not the subgoal's"), ["exact h"], 1, 2) is None
    assert (proofs.verified, proofs.unverified, proofs.rejected) == ([], [], 1)
    assert refused.error == "not counted: the goal is not the subgoal's" and not proofs.found()
    taken = closing_row(4)
    proof = proofs.accept(taken, Verdict(True, proof="ignored"), ["simp", "rfl"], 4)  # a fresh attempt: revision 0
    assert proof is not None and (proof.edge, proof.proof, proof.tactics, proof.budget, proof.revision) == (
        4, None, ["simp", "rfl"], 4, 0)
    assert proofs.verified == [proof] and proofs.unverified == [] and taken.error is None and proofs.rejected == 1


def test_limits_in_order_first_proof_time_budget() -> None:
    proofs = Proofs()
    over = FailureReason.MAX_NODES
    assert proofs.limit(True, 1.0, 2.0, 3, 4, over) is None
    assert proofs.limit(True, 2.0, 2.0, 3, 4, over) == Stop(FailureReason.TIMEOUT)
    assert proofs.limit(True, 1.0, 2.0, 4, 4, over) == Stop(over)
    proofs.count(closing_row(1), Verdict(True, proof="p"), ["rfl"], 1)  # unverified: ends a stop-at-first search
    assert proofs.limit(True, 1.0, 2.0, 0, 4, over) == Stop(None)
    assert proofs.limit(False, 1.0, 2.0, 0, 4, over) is None
    assert proofs.limit(False, 2.0, 2.0, 0, 4, over) == Stop(FailureReason.TIMEOUT)
    proofs.count(closing_row(2), Verdict(True, proof="p", compiled=True), ["rfl"], 2)
    assert proofs.limit(False, 9.0, 2.0, 0, 4, over) == Stop(None)
    assert proofs.limit(False, 1.0, 2.0, 9, 4, over) == Stop(None)


def test_refusals_explain_a_search_with_nothing_left() -> None:
    refusals = ["prompt too long: 9000 tokens\nmore", "prompt too long: 9100 tokens"]
    said = (FailureReason.PROMPT_REJECTED, "the policy refused 2 prompt(s); first: prompt too long: 9000 tokens")
    assert refused_ending(None, None, False, refusals) == said
    assert refused_ending(FailureReason.EXHAUSTED, "x", False, refusals) == said
    assert refused_ending(FailureReason.TIMEOUT, "x", False, refusals) == (FailureReason.TIMEOUT, "x")
    assert refused_ending(None, None, True, refusals) == (None, None)
    assert refused_ending(FailureReason.EXHAUSTED, None, False, []) == (FailureReason.EXHAUSTED, None)
    assert refused_ending(None, None, False, ["one"])[1] == "the policy refused 1 prompt(s); first: one"


def meter() -> UsageMeter:
    return UsageMeter((), CountingLean(cast(LeanEnv, None)), tokens_before=12, calls_before=5)


def test_a_meter_into_another_counts_its_tokens_there_too_and_keeps_its_units_and_marks() -> None:
    """A sketch's subgoal search: its tokens are the theorem's too; its units, marks and curve are its own."""
    lean = CountingLean(cast(LeanEnv, None))
    theorem = UsageMeter((2,), lean, tokens_before=4)
    subgoal = UsageMeter((1,), lean, into=theorem)
    subgoal.add_tokens(5)
    subgoal.reach(1)
    theorem.add_tokens(2)
    assert (subgoal.tokens, theorem.tokens) == (5, 11)
    assert [(u.budget, u.tokens) for u in subgoal.recorded] == [(1, 5)] and theorem.recorded == []
    assert subgoal.curve() == UsageCurve(tokens=[5], lean_calls=[0])
    assert theorem.curve() == UsageCurve(tokens=[], lean_calls=[])


SPENT = Spent(1.23456789, 0.1111111, 0.2222222, 0.3333333)


def core(proofs: Proofs, edges: list[Edge], declaration: str | None = None,
         refusals: tuple[str, ...] = ()) -> EngineCore[CountingLean]:
    """A search's state as `final_result` reads it: its proofs, rows, refusals and meter (no Lean, no policy)."""
    return EngineCore(THEOREM, AnswerSlot(THEOREM), declaration, CountingLean(cast(LeanEnv, None)),
                      cast(Policy, None), cast(TacticGuard, None), None, Root(), "t", meter(), 0, proofs=proofs,
                      edges=edges, refusals=list(refusals))


def test_the_result_shows_the_verified_proof_of_the_smallest_budget_and_labels_its_path() -> None:
    proofs = Proofs()
    root = tactic_row(1, 0, 1, "⊢ a", "intro", OPEN)
    late, early = closing_row(2, 1), closing_row(3, 1)
    edges = [root, late, early, refusal_row(4, 0, 1, "⊢ a", "too long", 5.0)]
    proofs.count(late, Verdict(True, proof="late", compiled=True), ["intro", "a"], 9)
    proofs.count(early, Verdict(True, proof="early", compiled=True), ["intro", "b"], 4)
    result = final_result(core(proofs, edges, "theorem t : 1 + 1 = 2", ("too long",)), SearchMode.HYBRID,
                          (FailureReason.TIMEOUT, "x"), SPENT, nodes_expanded=3, proofs_sampled=11)
    assert result.proved and not result.unverified and result.failure_reason is None and result.detail is None
    assert (result.proof, result.tactics, result.budget_at_proof, result.depth) == ("early", ["intro", "b"], 4, 2)
    assert (result.repaired, result.revisions, result.revision_at_proof) == (0, 0, 0)  # no repair: a first proof
    assert (result.name, result.header, result.mode) == ("t", "open Nat", SearchMode.HYBRID)
    assert result.declaration == "theorem t : 1 + 1 = 2"
    assert (result.nodes_expanded, result.proofs_sampled, result.edges, result.rejected_prompts) == (3, 11, 4, 1)
    assert (result.time_s, result.policy_s, result.lean_s, result.value_s) == (1.234568, 0.111111, 0.222222, 0.333333)
    assert (result.tokens, result.lean_calls, result.usage) == (12, 5, [])
    assert [(e.on_proof_path, e.proof_complete) for e in edges] == [(True, False), (True, True), (True, True),
                                                                    (False, False)]


def test_the_result_of_an_unverified_or_no_proof() -> None:
    proofs = Proofs()
    first, second = closing_row(1), closing_row(2)
    proofs.count(first, Verdict(True, proof="second found first", compiled=False), ["b"], 5)
    proofs.count(second, Verdict(True, proof="smaller budget", compiled=False), ["a", "b"], 2)
    proofs.count(closing_row(3), Verdict(False, "sorry"), ["sorry"], 6)
    result = final_result(core(proofs, [first, second]), SearchMode.STEP, (FailureReason.TIMEOUT, "t"), SPENT)
    assert not result.proved and result.unverified and result.failure_reason is FailureReason.UNVERIFIED
    assert result.detail == "a proof passed the step-level rules; search.verify=false skipped the compile"
    assert (result.proof, result.tactics, result.depth, result.budget_at_proof) == ("smaller budget", ["a", "b"], 2,
                                                                                   None)
    assert (result.nodes_expanded, result.proofs_sampled, result.rejected_prompts, result.rejected_proofs) == (
        0, 0, 0, 1)
    assert not any(e.on_proof_path for e in (first, second))
    nothing = final_result(core(Proofs(), []), SearchMode.WHOLE, (None, None), SPENT)
    assert (nothing.failure_reason, nothing.detail, nothing.proof, nothing.tactics, nothing.depth) == (
        FailureReason.EXHAUSTED, None, None, [], None)
    assert not nothing.unverified
    timed = final_result(core(Proofs(), []), SearchMode.WHOLE, (FailureReason.TIMEOUT, "slow"), SPENT)
    assert (timed.failure_reason, timed.detail) == (FailureReason.TIMEOUT, "slow")


class Worker:
    """A worker at generation 3, as a search's state reads it when built."""

    generation = 3


def test_a_search_state_is_built_once_from_the_theorem_its_root_and_its_marks() -> None:
    theorem = Theorem(name="u", statement="∀ (n : Nat), n = n")
    lean, policy, guard = CountingLean(cast(LeanEnv, Worker())), cast(Policy, object()), cast(TacticGuard, object())
    state = EngineCore.of(theorem, lean, policy, guard, DeclarationForm.FORALL, (2, 5))
    assert (state.theorem, state.lean, state.policy, state.guard, state.value) == (theorem, lean, policy, guard, None)
    assert (state.slot, state.declaration) == (AnswerSlot(theorem), "theorem u : ∀ (n : Nat), n = n")
    assert (state.root, state.seed_key, state.start_generation, state.own_restarts) == (Root(), "u", 3, 0)
    assert (state.meter.marks, state.meter.lean, state.meter.tokens) == ([2, 5], lean, 0)
    assert (state.waits, state.proofs, state.refusals, state.edges) == (Waits(), Proofs(), [], [])
    binder = EngineCore.of(theorem, lean, policy, guard, DeclarationForm.BINDER, ())
    assert binder.declaration == "theorem u (n : Nat) : n = n"
    assert binder.waits is not state.waits and binder.proofs is not state.proofs  # each search its own
    # A sketch's subgoal: its root's seed key and meter (the sketch's, whose tokens go to the theorem's too).
    shared, value = meter(), cast(ValueFn, object())
    sub = EngineCore.of(theorem, lean, policy, guard, DeclarationForm.BINDER, (7,), Root(seed_key="u/g1",
                                                                                          meter=shared), value)
    assert (sub.seed_key, sub.meter, sub.value, sub.root.seed_key) == ("u/g1", shared, value, "u/g1")


def test_the_clocks_are_the_meters_wall_time_and_the_waits() -> None:
    state = core(Proofs(), [])
    state.waits = Waits(0.5, 0.25, 0.125)
    before = state.meter.elapsed()
    spent = Spent.of(state)
    assert (spent.policy_s, spent.lean_s, spent.value_s) == (0.5, 0.25, 0.125)
    assert before <= spent.time_s <= state.meter.elapsed()


def test_the_meter_records_the_curve_after_every_unit_and_a_resume_without_one_leaves_it_unknown() -> None:
    usage = UsageMeter((2,), CountingLean(cast(LeanEnv, None)))
    usage.add_tokens(10)
    usage.lean.calls = 3
    usage.reach(1)
    usage.add_tokens(5)
    usage.reach(3)  # a batch of two units spent at once: both hold what was spent when it ended
    usage.reach(3)
    assert usage.curve() == UsageCurve(tokens=[10, 15, 15], lean_calls=[3, 3, 3])
    assert usage.curve(1) == UsageCurve(tokens=[15, 15], lean_calls=[3, 3])
    assert [(u.budget, u.tokens) for u in usage.finish()] == [(2, 15)]
    # Resumed with the curve of the units spent, it goes on; with a shorter one it is unknown.
    resumed = UsageMeter((), CountingLean(cast(LeanEnv, None)), tokens_before=15, calls_before=3)
    resumed.restore([], UsageCurve(tokens=[10, 15, 15], lean_calls=[3, 3, 3]), 3)
    resumed.add_tokens(1)
    resumed.reach(4)
    assert resumed.curve() == UsageCurve(tokens=[10, 15, 15, 16], lean_calls=[3, 3, 3, 3])
    resumed.restore([], UsageCurve(), 3)
    assert resumed.curve() is None


def test_a_curve_is_cumulative_and_read_beyond_its_end_as_the_totals() -> None:
    curve = UsageCurve(tokens=[4, 9], lean_calls=[2, 2])
    assert [curve.at(b, (11, 3)) for b in (1, 2, 3, 50)] == [(4, 2), (9, 2), (11, 3), (11, 3)]
    with pytest.raises(ValueError, match="non-decreasing"):
        UsageCurve(tokens=[4, 3], lean_calls=[1, 1])
    with pytest.raises(ValueError, match="one each per unit"):
        UsageCurve(tokens=[4], lean_calls=[])


@pytest.mark.parametrize(("mode", "units"), [(SearchMode.STEP, 3), (SearchMode.SKETCH, 3), (SearchMode.WHOLE, 7),
                                             (SearchMode.HYBRID, 7)])
def test_an_outcome_says_the_units_its_search_spent_in_its_modes_unit(mode: SearchMode, units: int) -> None:
    """Expansions in step and sketch mode (a hybrid result's `nodes_expanded` are its rounds: not its unit)."""
    result = TheoremResult(name="t", mode=mode, proved=False, nodes_expanded=3, proofs_sampled=7)
    assert SearchOutcome(result, []).units == units

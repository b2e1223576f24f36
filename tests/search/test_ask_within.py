"""`search.skeleton.ask_within`, the one way every engine asks the policy before its deadline: the completions, whose
tokens the meter counts as they are taken, the seconds waited charged to the search's `Waits` either way, each
prompt's refusal recorded once (the search's refusals, and a refusal row where the prompt has a place)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import cast

import pytest

from burnqed.lean.env import LeanEnv
from burnqed.lean.guard import TacticGuard
from burnqed.policy.base import Completion, Policy, refused
from burnqed.records.enums import DeclarationForm
from burnqed.records.results import EdgeOutcome
from burnqed.records.theorem import Theorem
from burnqed.search.skeleton import EngineCore, Place, ask_within
from burnqed.search.usage import CountingLean, Waits


class Worker:
    generation = 0


def core(elapsed_s: float = 0.0) -> EngineCore[CountingLean]:
    """A search not started, whose clock reads `elapsed_s` already (an earlier process's seconds)."""
    state = EngineCore.of(Theorem(name="t", statement="True"), CountingLean(cast(LeanEnv, Worker())),
                          cast(Policy, object()), cast(TacticGuard, object()), DeclarationForm.BINDER, (1, 2))
    state.meter.seconds_before = elapsed_s
    state.waits = Waits(policy_s=1.0, lean_s=2.0)
    return state


def answered(delay: float, answers: list[list[Completion]]) -> Callable[[], Awaitable[list[list[Completion]]]]:
    """The request `ask_within` awaits: `answers` after `delay` seconds."""

    async def asking() -> list[list[Completion]]:
        await asyncio.sleep(delay)
        return answers
    return asking


def test_an_answer_in_time_gives_the_completions_and_charges_the_wait() -> None:
    search = core()
    got = [[Completion("simp", -0.5, 3), Completion("ring", -0.7, 4)], refused("prompt too long", 2)]
    answer = asyncio.run(ask_within(search, 5.0, answered(0.02, got), places=[Place(0, 1, "⊢ a"), Place(4, 2, "⊢ b")],
                                    new_id=iter([9]).__next__))
    assert answer is not None and answer.asked == got
    assert (answer.refusal(0), answer.refusal(1)) == (None, "prompt too long")
    assert 0.02 <= answer.seconds < 1.0
    assert search.waits.policy_s == pytest.approx(1.0 + answer.seconds)
    assert (search.waits.lean_s, search.waits.value_s) == (2.0, 0.0)
    assert search.refusals == ["prompt too long"]  # recorded once, at the ask
    (row,) = search.edges
    assert answer.rows == [None, row]
    assert (row.node_id, row.parent_id, row.depth, row.state_before, row.outcome, row.error) == (
        9, 4, 2, "⊢ b", EdgeOutcome.PROMPT_REJECTED, "prompt too long")
    assert row.gen_ms == pytest.approx(answer.seconds * 1000 / 2)  # its prompt's share of the wait


def test_tokens_are_counted_as_each_completion_is_taken() -> None:
    search = core()
    got = [[Completion("simp", -0.5, 3), Completion("ring", -0.7, 4)], [Completion("omega", -0.1, 5)]]
    answer = asyncio.run(ask_within(search, 5.0, answered(0.0, got)))
    assert answer is not None and search.meter.tokens == 0
    taking = answer.take(0)
    next(taking)
    search.meter.reach(1)  # a mark between two completions records the tokens of those taken so far
    assert search.meter.tokens == 3 and [usage.tokens for usage in search.meter.recorded] == [3]
    assert [c.text for c in taking] == ["ring"] and search.meter.tokens == 7
    assert answer.take_all() == got and search.meter.tokens == 7 + 12


def test_a_refusal_without_a_place_is_recorded_with_no_row() -> None:
    search = core()
    answer = asyncio.run(ask_within(search, 5.0, answered(0.0, [refused("too long", 1)])))
    assert answer is not None and answer.rows == [None]
    assert search.refusals == ["too long"] and search.edges == []


@pytest.mark.parametrize("elapsed_s", [5.0, 8.0])
def test_no_time_left_times_out_at_once(elapsed_s: float) -> None:
    search = core(elapsed_s)
    started = search.waits.policy_s
    assert asyncio.run(ask_within(search, 5.0, answered(10.0, []))) is None
    assert 0.0 <= search.waits.policy_s - started < 1.0


def test_an_answer_past_the_deadline_is_none_and_its_wait_is_charged() -> None:
    search = core(4.8)  # 0.2 s left, less what passes before the ask reads the clock (its meter runs from core())
    assert asyncio.run(ask_within(search, 5.0, answered(10.0, [[Completion("ring", -1.0, 1)]]))) is None
    assert 0.1 <= search.waits.policy_s - 1.0 < 1.0  # the time left, charged: neither nothing nor the answer's 10 s
    assert search.refusals == [] and search.meter.tokens == 0

"""`search.skeleton.ask_within`, the one way every engine asks the policy before its deadline: the completions, the
seconds waited charged to the search's `Waits` either way, each prompt's refusal read."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from burnqed.policy.base import Completion, refused
from burnqed.search.skeleton import ask_within
from burnqed.search.usage import Waits


def answered(delay: float, answers: list[list[Completion]]) -> Callable[[], Awaitable[list[list[Completion]]]]:
    """The request `ask_within` awaits: `answers` after `delay` seconds."""

    async def asking() -> list[list[Completion]]:
        await asyncio.sleep(delay)
        return answers
    return asking


def test_an_answer_in_time_gives_the_completions_and_charges_the_wait() -> None:
    waits = Waits(policy_s=1.0, lean_s=2.0)
    got = [[Completion("simp", -0.5, 3)], refused("prompt too long", 2)]
    answer = asyncio.run(ask_within(waits, 5.0, answered(0.02, got)))
    assert answer.completions == got
    assert (answer.refusal(0), answer.refusal(1)) == (None, "prompt too long")
    assert 0.02 <= answer.seconds < 1.0
    assert waits.policy_s == pytest.approx(1.0 + answer.seconds)
    assert (waits.lean_s, waits.value_s) == (2.0, 0.0)


@pytest.mark.parametrize("left_s", [0.0, -3.0])
def test_no_time_left_times_out_at_once(left_s: float) -> None:
    waits = Waits()
    answer = asyncio.run(ask_within(waits, left_s, answered(10.0, [])))
    assert answer.completions is None and answer.seconds < 1.0
    assert waits.policy_s == answer.seconds


def test_an_answer_past_the_deadline_is_none_and_its_wait_is_charged() -> None:
    waits = Waits()
    answer = asyncio.run(ask_within(waits, 0.05, answered(10.0, [[Completion("ring", -1.0, 1)]])))
    assert answer.completions is None
    assert 0.05 <= answer.seconds < 1.0 and waits.policy_s == answer.seconds

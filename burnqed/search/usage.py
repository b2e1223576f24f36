"""What a search spends: generated tokens, Lean requests and wall time, in total, at budget marks and after every unit
of budget (docs/search.md, "Cost: tokens and Lean calls").

    lean = CountingLean(lean)                         # every engine talks to Lean through it
    meter = UsageMeter(marks=(10, 50), lean=lean)     # marks: eval's budgets, in the mode's unit
    meter.add_tokens(sum(c.n_tokens for c in completions))
    meter.reach(spent)                                # after each unit of budget is fully spent
    result.usage = meter.finish()                     # marks the search never reached get its totals
    result.curve = meter.curve()                      # tokens and Lean requests after units 1, 2, …, spent

The engines call `reach` only where a search with that budget would have stopped, so one search with the largest
budget says what every smaller budget would have cost.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from burnqed.lean.env import LeanEnv
from burnqed.records.replies import CompileResult, Goal, RootInfo, TacticResult
from burnqed.records.results import BudgetUsage, UsageCurve

T = TypeVar("T")


@dataclass(slots=True)
class Waits:
    """What a search waited for, in seconds: the policy, Lean, the value model (every engine's one set of timers; a
    sketch's subgoal searches add theirs to the theorem's)."""

    policy_s: float = 0.0
    lean_s: float = 0.0
    value_s: float = 0.0

    def add(self, other: Waits) -> None:
        self.policy_s += other.policy_s
        self.lean_s += other.lean_s
        self.value_s += other.value_s


class CountingLean:
    """A `LeanEnv` that counts the requests one search sends through it (the worker may serve other theorems)."""

    def __init__(self, inner: LeanEnv) -> None:
        self.inner = inner
        self.calls = 0

    @property
    def generation(self) -> int:
        return self.inner.generation

    async def start_goal(self, expr: str | None = None, copy_from: str | None = None) -> int:
        self.calls += 1
        return await self.inner.start_goal(expr=expr, copy_from=copy_from)

    async def start_theorem(self, header: str | None, declaration: str) -> int:
        self.calls += 1
        return await self.inner.start_theorem(header, declaration)

    async def tactic(self, state_id: int, tactic: str, goal_id: int | None = None) -> TacticResult:
        self.calls += 1
        return await self.inner.tactic(state_id, tactic, goal_id)

    async def goals(self, state_id: int) -> tuple[Goal, ...]:
        self.calls += 1
        return await self.inner.goals(state_id)

    async def root_info(self, state_id: int) -> RootInfo:
        self.calls += 1
        return await self.inner.root_info(state_id)

    async def delete(self, state_ids: Sequence[int]) -> None:
        self.calls += 1
        await self.inner.delete(state_ids)

    async def compile(self, text: str, timeout_s: float | None = None) -> CompileResult:
        self.calls += 1
        return await self.inner.compile(text, timeout_s)

    async def counted(self, request: Awaitable[T]) -> T:
        """`request` to a Lean the search holds beside this one (a sketch's elaboration on its `SketchEnv`), counted
        as one of this search's requests."""
        self.calls += 1
        return await request


class UsageMeter:
    """Totals of one search, its snapshots at the budget marks and its curve (see the module docstring).

    `tokens_before`, `calls_before` and `seconds_before` carry what an interrupted search had spent before it
    resumed, so totals, marks and curve span both processes. `into` is the meter of a search this one is part of (a
    sketch's subgoal search: the theorem's): the tokens counted here are counted there too; its units and marks stay
    its own (the sketch books the subgoal's units on the theorem's: `Root.book`).
    """

    def __init__(self, marks: Sequence[int], lean: CountingLean, *, tokens_before: int = 0, calls_before: int = 0,
                 seconds_before: float = 0.0, into: UsageMeter | None = None) -> None:
        self.into = into
        self.marks = sorted(set(marks))
        self.lean = lean
        self.tokens = tokens_before
        self.calls_before = calls_before
        self.seconds_before = seconds_before
        self.started = time.perf_counter()
        self.recorded: list[BudgetUsage] = []
        self.curve_tokens: list[int] = []  # after unit k: entry k - 1
        self.curve_calls: list[int] = []
        self.curve_known = True  # False once a resume could not restore the curve's start

    @property
    def lean_calls(self) -> int:
        return self.calls_before + self.lean.calls

    def elapsed(self) -> float:
        """Wall time of the search, earlier processes included."""
        return self.seconds_before + time.perf_counter() - self.started

    def add_tokens(self, count: int) -> None:
        self.tokens += count
        if self.into is not None:
            self.into.add_tokens(count)

    def snapshot(self, budget: int) -> BudgetUsage:
        return BudgetUsage(budget=budget, tokens=self.tokens, lean_calls=self.lean_calls,
                           time_s=round(self.elapsed(), 6))

    def reach(self, spent: int) -> None:
        """Record every mark at or below `spent` not recorded yet, and the curve up to unit `spent`: the search has
        fully spent that budget."""
        done = {usage.budget for usage in self.recorded}
        for mark in self.marks:
            if mark <= spent and mark not in done:
                self.recorded.append(self.snapshot(mark))
        if len(self.curve_tokens) < spent:
            calls = self.lean_calls
            self.curve_tokens += [self.tokens] * (spent - len(self.curve_tokens))
            self.curve_calls += [calls] * (spent - len(self.curve_calls))

    def restore(self, recorded: Sequence[BudgetUsage], curve: UsageCurve, spent: int) -> None:
        """Marks and curve an interrupted search had already recorded, when it had spent `spent` units. A curve
        shorter than that (a checkpoint written without one) leaves the curve unknown: `curve()` is None."""
        self.recorded = [*recorded]
        self.curve_tokens, self.curve_calls = [*curve.tokens], [*curve.lean_calls]
        self.curve_known = len(curve.tokens) == spent

    def curve(self, start: int = 0) -> UsageCurve | None:
        """The curve from unit `start` + 1 on (all of it by default); None when a resume left it unknown."""
        if not self.curve_known:
            return None
        return UsageCurve(tokens=self.curve_tokens[start:], lean_calls=self.curve_calls[start:])

    def finish(self) -> list[BudgetUsage]:
        """Every mark: the recorded ones, then the search's totals for the marks it never reached."""
        done = {usage.budget for usage in self.recorded}
        rest = [self.snapshot(mark) for mark in self.marks if mark not in done]
        return sorted([*self.recorded, *rest], key=lambda usage: usage.budget)

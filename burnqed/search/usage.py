"""What a search spends: generated tokens, Lean requests and wall time, in total and at budget marks.

    lean = CountingLean(lean)                         # every engine talks to Lean through it
    meter = UsageMeter(marks=(10, 50), lean=lean)     # marks: eval's budgets, in the mode's unit
    meter.add_tokens(sum(c.n_tokens for c in completions))
    meter.reach(spent)                                # after each unit of budget is fully spent
    result.usage = meter.finish()                     # marks the search never reached get its totals

A mark records what a search stopped at that budget would have spent: the engines call `reach` only where such a
search would have stopped (after an expansion, after a sampled proof's checks), so eval reports tokens and Lean
calls per budget from one search with the largest budget, exactly as it reports solve rates.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from burnqed.lean.env import LeanEnv
from burnqed.records import BudgetUsage, CompileResult, Goal, RootInfo, TacticResult


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


class UsageMeter:
    """Totals of one search and its snapshots at the budget marks (see the module docstring).

    `tokens_before`, `calls_before` and `seconds_before` carry what an interrupted search had spent before it
    resumed, so totals and marks span both processes.
    """

    def __init__(self, marks: Sequence[int], lean: CountingLean, *, tokens_before: int = 0, calls_before: int = 0,
                 seconds_before: float = 0.0) -> None:
        self.marks = sorted(set(marks))
        self.lean = lean
        self.tokens = tokens_before
        self.calls_before = calls_before
        self.seconds_before = seconds_before
        self.started = time.perf_counter()
        self.recorded: list[BudgetUsage] = []

    @property
    def lean_calls(self) -> int:
        return self.calls_before + self.lean.calls

    def elapsed(self) -> float:
        """Wall time of the search, earlier processes included."""
        return self.seconds_before + time.perf_counter() - self.started

    def add_tokens(self, count: int) -> None:
        self.tokens += count

    def snapshot(self, budget: int) -> BudgetUsage:
        return BudgetUsage(budget=budget, tokens=self.tokens, lean_calls=self.lean_calls,
                           time_s=round(self.elapsed(), 6))

    def reach(self, spent: int) -> None:
        """Record every mark at or below `spent` not recorded yet: the search has fully spent that budget."""
        done = {usage.budget for usage in self.recorded}
        for mark in self.marks:
            if mark <= spent and mark not in done:
                self.recorded.append(self.snapshot(mark))

    def restore(self, recorded: Sequence[BudgetUsage]) -> None:
        """Marks an interrupted search had already recorded."""
        self.recorded = [*recorded]

    def finish(self) -> list[BudgetUsage]:
        """Every mark: the recorded ones, then the search's totals for the marks it never reached."""
        done = {usage.budget for usage in self.recorded}
        rest = [self.snapshot(mark) for mark in self.marks if mark not in done]
        return sorted([*self.recorded, *rest], key=lambda usage: usage.budget)

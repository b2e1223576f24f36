"""`LeanEnv`: the seam between search and Lean. `LeanWorker` implements it; tests may pass doubles.

Stages type their Lean argument with this Protocol and never import the concrete client.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from burnqed.records.replies import CompileResult, Goal, RootInfo, SketchResult, TacticResult
from burnqed.text.sketch import Sketch


class LeanEnv(Protocol):
    """What one theorem's search needs from one Lean process."""

    @property
    def generation(self) -> int:
        """Changes when the process is replaced: state ids of an older generation are gone."""
        ...

    async def start_goal(self, expr: str | None = None, copy_from: str | None = None) -> int: ...

    async def start_theorem(self, header: str | None, declaration: str) -> int:
        """The state of `declaration` (`theorem NAME <binders> : T`) started under `header` as a user's file does:
        one goal, binders as hypotheses; the header's opens and options hold for every later tactic."""
        ...

    async def tactic(self, state_id: int, tactic: str, goal_id: int | None = None) -> TacticResult: ...

    async def goals(self, state_id: int) -> tuple[Goal, ...]: ...

    async def root_info(self, state_id: int) -> RootInfo: ...

    async def delete(self, state_ids: Sequence[int]) -> None: ...

    async def compile(self, text: str, timeout_s: float | None = None) -> CompileResult: ...


class SketchEnv(LeanEnv, Protocol):
    """A `LeanEnv` that also elaborates sketches (`LeanLease`, `LeanWorker`, `InProcessReplay`): what a sketch
    search needs (docs/lean.md, "Sketches")."""

    async def draft_sketch(self, state_id: int, sketch: Sketch, goal_id: int = 0) -> SketchResult:
        """The sketch's holes as subgoals of one new state, by `goal.tactic {draft}` on goal `goal_id`."""
        ...

    async def file_sketch(self, header: str | None, declaration: str, sketch: Sketch) -> SketchResult:
        """The same, from the theorem's file elaborated whole (`frontend.distil` / `frontend.process {sorrys}`)."""
        ...


class WorkerPool(Protocol):
    """What search and data replay need from a Lean pool: one (possibly shared) worker per theorem, kept for its
    whole search or replay (`burnqed.lean.pool.LeanPool`, the in-process replay pool)."""

    def lease(self, owner: str | None = None, *, header: str | None = None) -> AbstractAsyncContextManager[LeanEnv]:
        """One (shared) worker for `owner`; `header` is its theorem's, so the pool can pick a worker in its scope."""
        ...

"""One theorem's Lean side on a shared worker: starting the theorem, guarded tactics, restarts counted per cause,
and rebuilding a node after the worker was replaced (docs/search.md, "Shared workers").

    worker = SharedWorker(core)                                   # step search: the core's theorem starts the root
    worker = SharedWorker(core, started_by=..., mark_dead=...)    # hybrid: answers' roots, dead nodes checkpointed
    result = await worker.apply_at(node, "simp")                  # None: the node cannot be rebuilt
    worker.charge_lean(seconds)                                   # Lean time spent outside these requests

Step and hybrid search each hold one (`worker`) over their `EngineCore` (the theorem, Lean, the guard, the root, the
`Waits` where Lean time is booked); their nodes (`search.tree.Node`, `search.trie.TrieNode`) are `Rebuildable`. Whole
search, which keeps no states beyond the root, uses `burnqed.lean.start.start_theorem`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Generic, Protocol, Self, TypeVar

from burnqed.errors import LeanError, LeanStartError, LeanStatesLostError
from burnqed.lean.env import LeanEnv
from burnqed.lean.guard import TacticGuard
from burnqed.lean.start import MAX_SHARED_RESTARTS, start_goal
from burnqed.records.replies import TacticResult, first_line, pretty_state
from burnqed.records.theorem import Theorem
from burnqed.search.root import Root, own_goals
from burnqed.search.usage import Waits

MAX_RESTARTS = 3  # worker crashes/hangs caused by this theorem's own requests before it ends as a Lean error



class Rebuildable(Protocol):
    """A search node as rebuilding sees it: its parent and the tactic from there (none at the root), the state text
    a replay must reproduce, and its state id (None: not in this process yet) with the worker generation it is of."""

    @property
    def parent(self) -> Self | None: ...
    @property
    def tactic(self) -> str | None: ...
    @property
    def state(self) -> str: ...

    state_id: int | None
    generation: int
    dead: bool


N = TypeVar("N", bound=Rebuildable)


class LeanGone(Exception):
    """The worker kept failing: the theorem ends with a Lean error."""


class WorkerSide(Protocol):
    """What the shared-worker requests read and count of a search's state (`search.skeleton.EngineCore`): the
    theorem, Lean, the guard, the root (where the search starts: its goal and the goals dropped from every reply, how
    a replaced worker gives the root again), the timers (where Lean's time is booked), the worker generation of the
    root and this theorem's requests that crashed or hung the worker (states_lost results)."""

    @property
    def theorem(self) -> Theorem: ...
    @property
    def lean(self) -> LeanEnv: ...
    @property
    def guard(self) -> TacticGuard: ...
    @property
    def root(self) -> Root: ...
    @property
    def waits(self) -> Waits: ...

    start_generation: int
    own_restarts: int


def searched_root(theorem: Theorem, node: Rebuildable) -> Theorem | None:
    """The theorem whose start gives `node` its state: `theorem` at the root, None elsewhere (the node's state comes
    from its parent by its tactic)."""
    return theorem if node.parent is None else None


def _set_dead(node: Rebuildable) -> None:
    node.dead = True


class SharedWorker(Generic[N]):
    """The Lean requests of one theorem's search on a worker it shares with other theorems. `started_by(node)`: the
    theorem whose start gives `node` its state, None when its parent's state and its tactic give it (default: the
    core's theorem at the root, `searched_root`); `mark_dead(node)`: record that `node` cannot be rebuilt (default:
    its `dead` flag)."""

    def __init__(self, core: WorkerSide, *, started_by: Callable[[N], Theorem | None] | None = None,
                 mark_dead: Callable[[N], None] = _set_dead) -> None:
        self.core = core
        self._started_by = started_by or (lambda node: searched_root(core.theorem, node))
        self._mark_dead = mark_dead

    def charge_lean(self, seconds: float) -> None:
        """Book `seconds` spent waiting for Lean."""
        self.core.waits.lean_s += seconds

    async def _materialize(self, node: N) -> int | None:
        """The node's state id in the worker's current process, replaying its tactic path when the process was
        replaced since (or the node was restored from a checkpoint); None when the replay does not reproduce it
        (the node is then dead)."""
        generation = self.core.lean.generation
        if node.state_id is not None and node.generation == generation:
            return node.state_id
        self._check_restarts(generation)
        started = self._started_by(node)
        if started is not None:
            state_id = await self._restart_root(started)
        else:
            assert node.parent is not None  # only a start has none
            parent_id = await self._materialize(node.parent)
            if parent_id is None or node.tactic is None:
                self._mark_dead(node)
                return None
            result = await self._apply(parent_id, node.tactic, self._goal_at(node.parent))
            if result.state_id is None or result.states_lost or pretty_state(result.goals) != node.state:
                self._mark_dead(node)
                return None
            state_id = result.state_id
        node.state_id, node.generation = state_id, generation
        return state_id

    async def _restart_root(self, theorem: Theorem) -> int:
        """The state id of `theorem`'s start in a new worker process (a worker that cannot be started stops the
        run); a search from a goal already in the worker (`Root.restart`) gets its state again its own way."""
        started = time.perf_counter()
        try:
            if self.core.root.restart is not None:
                return await self.core.root.restart()
            return await start_goal(self.core.lean, theorem)
        except LeanStartError:
            raise
        except LeanError as exc:
            raise LeanGone(f"cannot restart the theorem on a new worker: {first_line(str(exc))}") from exc
        finally:
            self.charge_lean(time.perf_counter() - started)

    def _goal_at(self, node: N) -> int | None:
        """The goal of `node`'s state a tactic there works on (`goal.tactic`'s goalId); None: the first. A search
        that starts from one goal of a state holding several (a sketch's subgoal) names it at its root."""
        return self.core.root.goal_at(node.parent is None)

    async def _apply(self, state_id: int, tactic: str, goal_id: int | None = None) -> TacticResult:
        """`tactic` at `state_id` (on goal `goal_id`, else the first), unless the guard refuses it (then the refusal,
        Lean never sees it); the goals the root leaves out of every reply (`Root.siblings`) dropped."""
        refusal = self.core.guard.refusal(tactic)
        if refusal is not None:
            return refusal
        started = time.perf_counter()
        try:
            if goal_id is None:
                result = await self.core.lean.tactic(state_id, tactic)
            else:
                result = await self.core.lean.tactic(state_id, tactic, goal_id)
        finally:
            self.charge_lean(time.perf_counter() - started)
        if result.states_lost:
            self.core.own_restarts += 1  # this request crashed or hung the worker
        return own_goals(result, self.core.root.siblings)

    async def apply_at(self, node: N, tactic: str) -> TacticResult | None:
        """Apply `tactic` at `node` in the worker's current process, rebuilding the node first when the process
        was replaced; None when the node cannot be rebuilt. The worker is shared: a request refused unsent because
        a neighbour's tactic replaced the process meanwhile (`LeanStatesLostError`) is tried again on the rebuilt
        node."""
        while True:
            generation = self.core.lean.generation
            try:
                state_id = await self._materialize(node)
                if state_id is None:
                    return None
                return await self._apply(state_id, tactic, self._goal_at(node))
            except LeanStatesLostError as exc:
                if self.core.lean.generation == generation:
                    raise LeanGone(f"Lean refused this theorem's state ids: {first_line(str(exc))}") from exc

    def _check_restarts(self, generation: int) -> None:
        """Only this theorem's own crashes count against MAX_RESTARTS; replacements caused by the theorems it
        shares the worker with have the larger MAX_SHARED_RESTARTS."""
        replaced = generation - self.core.start_generation
        if self.core.own_restarts > MAX_RESTARTS:
            raise LeanGone(f"this theorem's tactics crashed or hung the Lean worker {self.core.own_restarts} times")
        if replaced - self.core.own_restarts > MAX_SHARED_RESTARTS:
            raise LeanGone(
                f"the shared Lean worker was replaced {replaced} times ({self.core.own_restarts} by this theorem)"
            )

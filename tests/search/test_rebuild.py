"""A node's Lean state after its shared worker was replaced (`search.rebuild.SharedWorker`), against a scripted Lean:
rebuilt by replaying its path from the theorem's start (or the root's own restart), kept for the new process, and
marked dead (never expanded, never counted from) when the replay does not give its state back; restarts counted per
cause; a refused state id retried only when the worker changed meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import pytest

from burnqed.config import LeanConfig
from burnqed.errors import LeanError, LeanStartError, LeanStatesLostError
from burnqed.lean.guard import TacticGuard
from burnqed.lean.start import MAX_SHARED_RESTARTS
from burnqed.records.replies import Goal, TacticKind, TacticResult, pretty_state
from burnqed.records.theorem import Theorem
from burnqed.search.rebuild import MAX_RESTARTS, LeanGone, SharedWorker, WorkerSide
from burnqed.search.root import Root
from burnqed.search.usage import Waits

THEOREM = Theorem(name="t", signature=": 1 + 1 = 2")
ROOT_STATE, MID_STATE = pretty_state((Goal("1 + 1 = 2"),)), pretty_state((Goal("2 = 2"),))


@dataclass
class ScriptedLean:
    """A worker process of `generation` that starts the theorem at state `start_id` and answers `norm_num` from
    any state with `mid` (or raises `lost` once), counting what it was asked."""

    generation: int = 2
    start_id: int = 10
    mid: TacticResult = field(default_factory=lambda: TacticResult(TacticKind.SUCCESS, 11, (Goal("2 = 2"),)))
    start_error: Exception | None = None
    lost: LeanStatesLostError | None = None
    replace_on_loss: bool = False
    starts: int = 0
    tactics: list[tuple[int, str, int | None]] = field(default_factory=list)

    async def start_theorem(self, header: str | None, declaration: str) -> int:
        self.starts += 1
        if self.start_error is not None:
            raise self.start_error
        return self.start_id

    async def tactic(self, state_id: int, tactic: str, goal_id: int | None = None) -> TacticResult:
        self.tactics.append((state_id, tactic, goal_id))
        if self.lost is not None:
            lost, self.lost = self.lost, None
            if self.replace_on_loss:
                self.generation += 1
            raise lost
        return self.mid


@dataclass
class Core:
    lean: ScriptedLean
    root: Root = field(default_factory=Root)
    theorem: Theorem = THEOREM
    guard: TacticGuard = field(default_factory=lambda: TacticGuard.from_config(LeanConfig()))
    waits: Waits = field(default_factory=Waits)
    start_generation: int = 1
    own_restarts: int = 0


@dataclass(eq=False)
class Node:
    parent: Node | None
    tactic: str | None
    state: str
    state_id: int | None = None
    generation: int = 1
    dead: bool = False


def chain(state_ids: tuple[int | None, int | None] = (1, 2)) -> tuple[Node, Node]:
    """A root and its child by `norm_num`, both in generation 1's process (the worker is in generation 2 now)."""
    root = Node(None, None, ROOT_STATE, state_ids[0])
    return root, Node(root, "norm_num", MID_STATE, state_ids[1])


T = TypeVar("T")


def worker_of(core: Core, **callbacks: Any) -> SharedWorker[Node]:
    """The shared-worker requests over `core` (a `WorkerSide` whose Lean is scripted)."""
    return SharedWorker(cast(WorkerSide, core), **callbacks)


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


def test_a_node_of_a_replaced_worker_is_rebuilt_by_its_path_and_kept_for_the_new_process() -> None:
    lean = ScriptedLean()
    core = Core(lean)
    worker = worker_of(core)
    _, child = chain()
    result = run(worker.apply_at(child, "simp"))
    assert result is lean.mid
    # the root started again (10), its child replayed from there (11), the tactic asked at the rebuilt child
    assert lean.starts == 1 and lean.tactics == [(10, "norm_num", None), (11, "simp", None)]
    assert (child.state_id, child.generation, child.dead) == (11, 2, False)
    assert child.parent is not None and child.parent.state_id == 10
    run(worker.apply_at(child, "ring"))  # the same process: nothing replayed again
    assert lean.starts == 1 and lean.tactics[-1] == (11, "ring", None)
    assert core.waits.lean_s > 0


@pytest.mark.parametrize("reply", [
    TacticResult(TacticKind.SUCCESS, 11, (Goal("3 = 3"),)),  # another state than the node's
    TacticResult(TacticKind.ERROR, errors=("no",)),  # no state at all
    TacticResult(TacticKind.SUCCESS, 11, (Goal("2 = 2"),), states_lost=True),  # the worker went again
])
def test_a_replay_that_does_not_give_the_nodes_state_back_leaves_it_dead(reply: TacticResult) -> None:
    marked: list[Node] = []

    def mark(node: Node) -> None:
        node.dead = True
        marked.append(node)

    worker = worker_of(Core(ScriptedLean(mid=reply)), mark_dead=mark)
    _, child = chain()
    assert run(worker.apply_at(child, "simp")) is None
    assert marked == [child] and child.dead and child.state_id == 2  # never taken for the new process's


def test_the_default_marks_a_dead_node_by_its_flag() -> None:
    worker = worker_of(Core(ScriptedLean(mid=TacticResult(TacticKind.ERROR, errors=("no",)))))
    _, child = chain()
    assert run(worker.apply_at(child, "simp")) is None
    assert child.dead


def test_a_node_whose_parent_cannot_be_rebuilt_is_dead_too() -> None:
    marked: list[Node] = []
    lean = ScriptedLean(mid=TacticResult(TacticKind.ERROR, errors=("no",)))
    worker = worker_of(Core(lean), mark_dead=marked.append)
    root, child = chain()
    grandchild = Node(child, "simp", "no goals", 3)
    assert run(worker.apply_at(grandchild, "rfl")) is None
    assert marked == [child, grandchild] and lean.tactics == [(10, "norm_num", None)]
    # a node with no tactic from its parent (only a start has none) is not replayed either
    orphan = Node(root, None, MID_STATE, 4)
    assert run(worker_of(Core(ScriptedLean()), mark_dead=marked.append).apply_at(orphan, "simp")) is None
    assert marked[-1] is orphan


def test_the_node_a_start_gives_comes_from_started_by_and_a_roots_restart() -> None:
    other = Theorem(name="t_filled", signature=": 2 = 2")
    lean = ScriptedLean()
    started: list[Node] = []

    def started_by(node: Node) -> Theorem | None:
        started.append(node)
        return other if node.parent is not None else None  # the child starts a theorem of its own (an answer's)

    worker = worker_of(Core(lean), started_by=started_by)
    _, child = chain()
    run(worker.apply_at(child, "simp"))
    assert started == [child] and lean.starts == 1 and lean.tactics == [(10, "simp", None)]

    restarts: list[int] = []

    async def restart() -> int:
        restarts.append(1)
        return 42

    lean = ScriptedLean()
    root_node, _ = chain()
    subgoal = Root(goal=Goal("2 = 2"), goal_id=7, restart=restart)
    run(worker_of(Core(lean, root=subgoal)).apply_at(root_node, "simp"))
    assert restarts == [1] and lean.starts == 0 and lean.tactics == [(42, "simp", 7)]


def test_a_start_that_fails_stops_the_run_or_ends_the_theorem() -> None:
    with pytest.raises(LeanStartError):
        run(worker_of(Core(ScriptedLean(start_error=LeanStartError("no repl")))).apply_at(chain()[0], "simp"))
    core = Core(ScriptedLean(start_error=LeanError("elaboration failed")))
    with pytest.raises(LeanGone, match="cannot restart the theorem on a new worker: elaboration failed"):
        run(worker_of(core).apply_at(chain()[0], "simp"))
    assert core.waits.lean_s > 0  # the failed start's wait is booked too


def test_a_refused_state_id_is_retried_only_when_the_worker_changed_meanwhile() -> None:
    lean = ScriptedLean(lost=LeanStatesLostError("replaced"), replace_on_loss=True)
    root, _ = chain((10, None))
    root.generation = 2
    assert run(worker_of(Core(lean)).apply_at(root, "simp")) is lean.mid
    assert [t for _, t, _ in lean.tactics] == ["simp", "simp"] and lean.starts == 1  # rebuilt on the new process

    lean = ScriptedLean(lost=LeanStatesLostError("bad id"))
    root, _ = chain((10, None))
    root.generation = 2
    with pytest.raises(LeanGone, match="Lean refused this theorem's state ids: bad id"):
        run(worker_of(Core(lean)).apply_at(root, "simp"))


@pytest.mark.parametrize(("own", "generation", "ends"), [
    (MAX_RESTARTS, 1 + MAX_RESTARTS, False),
    (MAX_RESTARTS + 1, 2 + MAX_RESTARTS, True),
    (0, 1 + MAX_SHARED_RESTARTS, False),
    (0, 2 + MAX_SHARED_RESTARTS, True),
    (1, 2 + MAX_SHARED_RESTARTS, False),  # one of the replacements was this theorem's own
])
def test_restarts_are_counted_per_cause(own: int, generation: int, ends: bool) -> None:
    core = Core(ScriptedLean(generation=generation), own_restarts=own)
    node = Node(None, None, ROOT_STATE, 1)
    if ends:
        with pytest.raises(LeanGone, match=r"crashed or hung|was replaced"):
            run(worker_of(core).apply_at(node, "simp"))
    else:
        assert run(worker_of(core).apply_at(node, "simp")) is not None

"""Small builders of edges, results and written trajectories for the trajectory tests."""

from __future__ import annotations

from collections.abc import Sequence

from burnqed.records.results import Edge, EdgeOutcome, FailureReason, TheoremResult
from burnqed.storage import Store
from burnqed.trajectory.labels import label_edges
from burnqed.trajectory.writer import TrajectoryWriter


def edge(node_id: int, parent_id: int = 0, outcome: EdgeOutcome = EdgeOutcome.OK, depth: int = 1) -> Edge:
    """An edge with distinct, recognisable text and numbers derived from its node id."""
    ok = outcome in (EdgeOutcome.OK, EdgeOutcome.CLOSED)
    return Edge(
        node_id=node_id,
        parent_id=parent_id,
        depth=depth,
        state_before=f"state {parent_id}",
        tactic=f"tactic {node_id}",
        state_after=("" if outcome is EdgeOutcome.CLOSED else f"state {node_id}") if ok else None,
        outcome=outcome,
        error=None if ok else f"{outcome.value} at {node_id}",
        logprob=-0.5 * node_id,
        n_tokens=3 + node_id,
        score=-1.0 * node_id if ok else None,
        energy=None,
        lean_ms=10.0 + node_id,
        gen_ms=100.0 + node_id,
        timestamp_ms=1_700_000_000_000 + node_id,
    )


def result(name: str, proved: bool = False, *, edges: int = 0, depth: int | None = None,
           reason: FailureReason | None = None, time_s: float = 0.0, policy_s: float = 0.0,
           lean_s: float = 0.0, value_s: float = 0.0, **extra: object) -> TheoremResult:
    return TheoremResult(
        **extra,
        name=name,
        proved=proved,
        proof="by\n  simp" if proved else None,
        failure_reason=None if proved else (reason or FailureReason.EXHAUSTED),
        edges=edges,
        depth=depth,
        time_s=time_s,
        policy_s=policy_s,
        lean_s=lean_s,
        value_s=value_s,
    )


def simple_theorem(name: str, n_edges: int = 2, proved: bool = False) -> tuple[TheoremResult, list[Edge]]:
    """A theorem with `n_edges` children of the root; the last one closes the proof when `proved`."""
    edges = [edge(i, 0) for i in range(1, n_edges + 1)]
    if proved and edges:
        edges[-1] = edge(n_edges, 0, EdgeOutcome.CLOSED)
    label_edges(edges, [n_edges] if proved and edges else [], proved)
    return result(name, proved, edges=len(edges), depth=1 if proved else None), edges


def write_trajectory(uri: str, theorems: Sequence[tuple[TheoremResult, list[Edge]]], *, every: int = 2,
                     finish: bool = True, run_id: str = "run", iteration: int = 0, store: Store) -> None:
    writer = TrajectoryWriter(uri, run_id=run_id, iteration=iteration, checkpoint_every=every, store=store)
    for theorem_result, edges in theorems:
        writer.add(theorem_result, edges)
    if finish:
        writer.finish()
    else:
        writer.close()

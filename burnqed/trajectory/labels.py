"""Training labels of a finished theorem's edges: every edge on ANY verified proof path is positive, not only the
first proof found.

    label_edges(edges, proof_leaves=[closing node ids of verified proofs], proved=result.proved)

The rule, per edge (docs/trajectories.md, "Labels"): on a verified proof path, positive (the closing edges also
`proof_complete`); a `prompt_rejected` row, unknown; an edge Lean failed or the guard refused, or any off-path edge
of a proved theorem, negative; otherwise unknown. A closing edge whose proof failed verification or was never
compiled is never positive.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from burnqed.records.results import Edge, EdgeOutcome, Label

_FAILED = frozenset({EdgeOutcome.ERROR, EdgeOutcome.TIMEOUT, EdgeOutcome.REFUSED})


def label_edges(edges: list[Edge], proof_leaves: Collection[int], proved: bool) -> None:
    """Set `label`, `on_proof_path` and `proof_complete` of every edge in place (see the module rule).

    `proof_leaves` are node ids of CLOSED edges that closed a verified proof; they require `proved`.
    Raises ValueError when a leaf is not a CLOSED edge of `edges` or when the tree is inconsistent.
    """
    if proof_leaves and not proved:
        raise ValueError(f"verified proof leaves {sorted(proof_leaves)} given for an unproved theorem")
    by_node = {edge.node_id: edge for edge in edges}
    if len(by_node) != len(edges):
        raise ValueError("duplicate node_id among the edges")
    for edge in edges:
        edge.on_proof_path = False
        edge.proof_complete = False
    for leaf in proof_leaves:
        closing = by_node.get(leaf)
        if closing is None:
            raise ValueError(f"proof leaf {leaf} is not an edge of this theorem")
        if closing.outcome is not EdgeOutcome.CLOSED:
            raise ValueError(f"proof leaf {leaf} has outcome {closing.outcome.value}, not closed")
        closing.proof_complete = True
        _mark_path(closing, by_node)
    for edge in edges:
        if edge.on_proof_path:
            edge.label = Label.POSITIVE
        elif proved and edge.outcome is not EdgeOutcome.PROMPT_REJECTED:
            edge.label = Label.NEGATIVE
        else:
            edge.label = unproved_label(edge.outcome)


def unproved_label(outcome: EdgeOutcome) -> Label:
    """The label of an edge of a theorem with no verified proof (see the module rule): negative where Lean failed
    or the guard refused, else unknown."""
    return Label.NEGATIVE if outcome in _FAILED else Label.UNKNOWN


def _mark_path(closing: Edge, by_node: Mapping[int, Edge]) -> None:
    """Mark the edges from `closing` up to the root as on the proof path, stopping where an earlier proof's path
    joins; ValueError when a parent is not older than its child."""
    node: Edge | None = closing
    while node is not None and not node.on_proof_path:
        node.on_proof_path = True
        parent = by_node.get(node.parent_id)
        if parent is not None and parent.node_id >= node.node_id:
            raise ValueError(f"edge {node.node_id} has parent {parent.node_id} that is not older")
        node = parent

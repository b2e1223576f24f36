"""The labelling rule: every edge on any verified proof path is positive (docs/trajectories.md)."""

from __future__ import annotations

import pytest

from burnqed.records.results import EdgeOutcome, Label
from burnqed.trajectory.labels import label_edges
from tests.trajectory.factories import edge

OK, CLOSED, ERROR, TIMEOUT, REFUSED = (EdgeOutcome.OK, EdgeOutcome.CLOSED, EdgeOutcome.ERROR,
                                       EdgeOutcome.TIMEOUT, EdgeOutcome.REFUSED)
P, N, U = "positive", "negative", "unknown"

# (case, edges as (node, parent, outcome), proof leaves, proved, expected {node: (label, on_path, complete)})
CASES = [
    (
        "one proof: path positive, failed and off-path siblings negative",
        [(1, 0, OK), (2, 0, ERROR), (3, 0, OK), (4, 1, CLOSED), (5, 1, TIMEOUT), (6, 3, OK)],
        [4], True,
        {1: (P, True, False), 2: (N, False, False), 3: (N, False, False), 4: (P, True, True),
         5: (N, False, False), 6: (N, False, False)},
    ),
    (
        "two alternative proofs sharing a prefix: both paths positive",
        [(1, 0, OK), (2, 1, OK), (3, 1, OK), (4, 2, CLOSED), (5, 3, CLOSED), (6, 0, OK)],
        [4, 5], True,
        {1: (P, True, False), 2: (P, True, False), 3: (P, True, False), 4: (P, True, True),
         5: (P, True, True), 6: (N, False, False)},
    ),
    (
        "a CLOSED edge whose verification failed is not positive; another proof is",
        [(1, 0, CLOSED), (2, 0, OK), (3, 2, CLOSED)],
        [3], True,
        {1: (N, False, False), 2: (P, True, False), 3: (P, True, True)},
    ),
    (
        "unproved: failed verification and accepted tactics unknown, Lean failures negative",
        [(1, 0, CLOSED), (2, 0, OK), (3, 2, REFUSED), (4, 2, ERROR), (5, 2, TIMEOUT)],
        [], False,
        {1: (U, False, False), 2: (U, False, False), 3: (N, False, False), 4: (N, False, False),
         5: (N, False, False)},
    ),
    (
        "proved without edges on a path (no leaves): everything off-path is negative",
        [(1, 0, OK)],
        [], True,
        {1: (N, False, False)},
    ),
]


@pytest.mark.parametrize(("case", "spec", "leaves", "proved", "expected"), CASES, ids=[c[0] for c in CASES])
def test_label_edges(case, spec, leaves, proved, expected):
    edges = [edge(node, parent, outcome) for node, parent, outcome in spec]
    label_edges(edges, leaves, proved)
    got = {e.node_id: (e.label.value, e.on_proof_path, e.proof_complete) for e in edges}
    assert got == expected


def test_relabelling_clears_old_flags():
    edges = [edge(1, 0, CLOSED), edge(2, 0, CLOSED)]
    label_edges(edges, [1], True)
    label_edges(edges, [2], True)
    assert [(e.label, e.on_proof_path, e.proof_complete) for e in edges] == [
        (Label.NEGATIVE, False, False), (Label.POSITIVE, True, True)]


@pytest.mark.parametrize(
    ("spec", "leaves", "proved", "message"),
    [
        ([(1, 0, CLOSED)], [1], False, "unproved theorem"),
        ([(1, 0, CLOSED)], [7], True, "not an edge"),
        ([(1, 0, OK)], [1], True, "not closed"),
        ([(1, 0, OK), (1, 0, CLOSED)], [1], True, "duplicate node_id"),
        ([(1, 2, OK), (2, 1, CLOSED)], [2], True, "not older"),
    ],
)
def test_inconsistent_inputs_are_refused(spec, leaves, proved, message):
    edges = [edge(node, parent, outcome) for node, parent, outcome in spec]
    with pytest.raises(ValueError, match=message):
        label_edges(edges, leaves, proved)

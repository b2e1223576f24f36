"""Doubles for the value-model tests: a deterministic counting encoder and small trajectories.

`CountingEncoder` stands in for an `Encoder` (burnqed's own encoder or SGLang's /encode). More lenient than the real
ones, and why: any text is encoded, whatever its length (no context limit, no tokenizer), the vectors are hashes,
not an L2-normalised last-token or mean-pooled hidden state (the tests check caching, batching and failure
handling, not what the vectors mean), and it never stalls. A crash is played with `fail_after`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from burnqed.policy.base import AsyncClosing
from burnqed.records.results import Edge, EdgeOutcome
from burnqed.trajectory.labels import label_edges
from tests.trajectory.factories import edge


def vector(text: str, dim: int = 8) -> list[float]:
    """A deterministic pseudo-embedding of `text` (bytes of its sha256 scaled to [-1, 1))."""
    digest = hashlib.sha256(text.encode()).digest()
    return [digest[i % len(digest)] / 128.0 - 1.0 for i in range(dim)]


class CountingEncoder(AsyncClosing):
    """`Encoder` returning `vector(text)`; counts calls and texts; raises after `fail_after` calls."""

    def __init__(self, dim: int = 8, fail_after: int | None = None) -> None:
        self.dim = dim
        self.fail_after = fail_after
        self.calls: list[list[str]] = []
        self.closed = False

    async def encode(self, texts: Sequence[str]) -> list[list[float]]:
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise RuntimeError("killed")  # a crash mid-run
        self.calls.append(list(texts))
        return [vector(text, self.dim) for text in texts]

    async def close(self) -> None:
        self.closed = True

    @property
    def texts(self) -> int:
        return sum(len(call) for call in self.calls)


def proved_tree(prefix: str = "") -> list[Edge]:
    """root 0 ─1 (ok, on the proof) ─4 (ok, on the proof) ─5 (closed)
                │                    └6 (ok, off the proof)
                ├2 (ok, off the proof)
                └3 (error)
    State texts are f"{prefix}state {node_id}"."""
    edges = [
        edge(1, 0), edge(2, 0), edge(3, 0, EdgeOutcome.ERROR),
        edge(4, 1, depth=2), edge(6, 1, depth=2), edge(5, 4, EdgeOutcome.CLOSED, depth=3),
    ]
    for e in edges:
        e.state_before = f"{prefix}state {e.parent_id}"
        if e.state_after:
            e.state_after = f"{prefix}state {e.node_id}"
    label_edges(edges, [5], True)
    return edges


def unproved_tree(prefix: str = "", children: int = 2) -> list[Edge]:
    """root 0 with `children` OK children and no proof."""
    edges = [edge(i, 0) for i in range(1, children + 1)]
    for e in edges:
        e.state_before = f"{prefix}state 0"
        e.state_after = f"{prefix}state {e.node_id}"
    label_edges(edges, [], False)
    return edges

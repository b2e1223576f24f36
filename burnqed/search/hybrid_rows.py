"""The rows of a hybrid search's completions (docs/search.md, "Hybrid search"): a completion's tokens, log-prob and
generation time shared over the rows it created, and the row of a completion that reached no node of the trie.
"""

from __future__ import annotations

import time

from burnqed.policy.base import Completion
from burnqed.records.replies import first_line
from burnqed.records.results import Edge, EdgeOutcome
from burnqed.search.trie import ProofTrie, TrieNode

__all__ = ["attempt_row", "share"]


def share(rows: list[Edge], completion: Completion, gen_ms: float) -> None:
    """Split a completion's tokens, log-prob and generation time over the rows it created, by tactic length
    (integer tokens by largest remainder, so they add up to the completion's)."""
    if not rows:
        return
    weights = [max(len(row.tactic), 1) for row in rows]
    total = sum(weights)
    exact = [completion.n_tokens * w / total for w in weights]
    tokens = [int(x) for x in exact]
    for index in sorted(range(len(rows)), key=lambda i: tokens[i] - exact[i])[: completion.n_tokens - sum(tokens)]:
        tokens[index] += 1
    for row, weight, count in zip(rows, weights, tokens, strict=True):
        row.n_tokens = count
        row.logprob = completion.logprob * weight / total
        row.gen_ms = gen_ms * weight / total


def attempt_row(trie: ProofTrie, at: TrieNode, body: str, outcome: EdgeOutcome, reason: str, completion: Completion,
                gen_ms: float, revises: Edge | None) -> Edge:
    """The row at `at` of a completion that reached no node of the trie (an attempt at the open answer under the open
    root; a completion read at no node): its proof as the tactic, why in its error, the completion's tokens; a
    revision of the attempt at `revises` numbered as one."""
    edge = Edge(node_id=trie.new_id(), parent_id=at.id, depth=at.depth + 1, state_before=at.state,
                tactic=body,
                state_after=None, outcome=outcome, error=first_line(reason), logprob=0.0, n_tokens=0, score=None,
                energy=None, lean_ms=0.0, gen_ms=0.0, timestamp_ms=int(time.time() * 1000))
    if revises is not None:
        edge.revision, edge.revises = revises.revision + 1, revises.node_id
    share([edge], completion, gen_ms)
    return edge

"""The search tree of one theorem: nodes, the frontier, the seen-state table (states up to names). No I/O.

A node is a proof state Lean produced; its Lean state id is valid only in the worker generation it was
made in (a crashed or timed-out worker is replaced and every id is gone) — `SearchTree` keeps what is
needed to rebuild it: the tactic path from the root.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from burnqed.records.replies import Goal
from leankit.normal_form import state_up_to_names


@dataclass(slots=True, eq=False)
class Node:
    """One proof state in the tree.

    Invariants: `id` is unique in its tree and larger than its parent's; `depth == parent.depth + 1`
    (root: 0, no parent, no tactic); `state_id` belongs to Lean worker generation `generation`;
    `state` is the pretty-printed goals (the text prompts and trajectories use). `visits` counts its
    expansions (more than one only with search.revisits: `SearchTree.requeue`), `tried` the tactics (normalised)
    already tried on it; `dead` nodes (could not be rebuilt after a worker restart) are never expanded.
    """

    id: int
    parent: Node | None
    depth: int
    tactic: str | None
    state: str
    goals: tuple[Goal, ...]
    state_id: int | None  # always set on a tree node (made with its id); `| None` as `rebuild.Rebuildable` reads it
    generation: int
    cum_logprob: float = 0.0
    score: float = 0.0
    expanded: bool = False
    dead: bool = False
    visits: int = 0
    tried: set[str] = field(default_factory=set)

    def path(self) -> list[str]:
        """The tactics from the root to this node, in order."""
        tactics: list[str] = []
        node: Node | None = self
        while node is not None and node.tactic is not None:
            tactics.append(node.tactic)
            node = node.parent
        tactics.reverse()
        return tactics


@dataclass(slots=True)
class SearchTree:
    """Nodes by id, the frontier (a max-heap on score; ties: older first) and the seen states.

    Invariant: a state enters the frontier at most once up to the names of its hypotheses and variables (`seen`,
    keyed by `state_up_to_names`), so loops, transpositions and renamed copies (`intro h₁ h₂` beside `intro h₀ h₁`:
    every proof of one, renamed, proves the other) are not expanded twice; a node is on the frontier at most once at
    a time (an entry remembers the node's `visits` when it was pushed: an entry that does not match is stale and
    skipped).
    """

    root: Node
    nodes: dict[int, Node] = field(default_factory=dict)
    seen: dict[str, Node] = field(default_factory=dict)
    _heap: list[tuple[float, int, int, Node]] = field(default_factory=list)
    _next_id: int = 1

    def __post_init__(self) -> None:
        self.nodes[self.root.id] = self.root
        self.seen[state_up_to_names(self.root.state)] = self.root
        heapq.heappush(self._heap, (-self.root.score, self.root.id, 0, self.root))

    def new_id(self) -> int:
        """A fresh id for a child (or for a failed edge, which gets an id but no node)."""
        node_id = self._next_id
        self._next_id += 1
        return node_id

    def is_new_state(self, state: str) -> bool:
        return state_up_to_names(state) not in self.seen

    def add(self, node: Node) -> None:
        """Register a child whose state was not seen before and put it on the frontier."""
        self.nodes[node.id] = node
        self.seen[state_up_to_names(node.state)] = node
        heapq.heappush(self._heap, (-node.score, node.id, 0, node))

    def requeue(self, node: Node, priority: float) -> None:
        """Put an expanded node back on the frontier at `priority` (instead of its score), to be expanded again."""
        heapq.heappush(self._heap, (-priority, node.id, node.visits, node))

    def pop(self, count: int, max_depth: int) -> list[Node]:
        """Up to `count` best live nodes no deeper than `max_depth` (deeper ones are dropped): unexpanded ones and
        those put back by `requeue`."""
        taken: list[Node] = []
        while self._heap and len(taken) < count:
            _, _, visits, node = heapq.heappop(self._heap)
            stale = visits != node.visits or (visits == 0 and node.expanded)
            if stale or node.dead or node.depth >= max_depth:
                continue
            taken.append(node)
        return taken

    def __len__(self) -> int:
        return len(self._heap)

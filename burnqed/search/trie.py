"""The replay trie of hybrid search: proof states, what each (state, tactic) led to, PUCT priorities, pruning. Pure:
no Lean, no policy (`burnqed.search.hybrid` drives it).

A node is a proof state Lean produced; its children are keyed by the whitespace-normalised tactic
(`normalize_tactic`), so every completion reaching the node with the same next tactic follows the same entry: a
cached success for free, a cached failure ends the completion. Lean sees each (node, tactic) at most once. The
priority of an unexpanded node is the burn-qed prototype's PUCT rule with a per-token log-prob prior
(docs/search.md, "Hybrid search"):

    score = alpha_t·prior + (1 − alpha_t)·Q + c·sqrt(ln(parent visits + 1) / (1 + visits)) − penalty·(goals − 1)

A theorem whose answer is open searches a forest under one node (docs/search.md, "Answers"): the open root (no Lean
state), whose children are the roots of the answers' tries (`TrieNode.answer`), each a theorem started of its own.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from burnqed.search.scoring import value_ramp

MAX_UNCHANGED_STEPS = 3  # more consecutive steps that leave every ⊢ target unchanged end a completion
MAX_HAVE_CHAIN = 4  # more consecutive `have` steps end a completion (runaway lemma lists)
_HAVE = re.compile(r"have(?![\w'])")
_BARE_TYPED_HAVE = re.compile(r"have(?:\s+[^\s:()\[\]{}⟨⟩⦃⦄]+)?\s*:(?!=)")


@dataclass(slots=True, eq=False)
class TrieNode:
    """One proof state of the trie.

    Invariants: `id` is unique and larger than the parent's (the root is 0, with no parent and no tactic);
    `depth == parent.depth + 1`, but for the root of an answer's trie (`answer` set: the value it fills an open slot
    with), a child of the open root at depth 0 with no tactic, where its theorem starts (`start`); `state` is the
    pretty-printed goals, `targets` their ⊢ lines; `state_id` belongs to Lean worker generation `generation` (None:
    not materialised in this process, e.g. restored from a checkpoint; rebuilt by replaying `path()`). A node is
    expanded (a round of proofs sampled from it) again only when no open node is unexpanded; `dead` nodes (not
    rebuilt after a worker restart, or whose prompt the policy refuses) are never expanded.
    """

    id: int
    parent: TrieNode | None
    depth: int
    tactic: str | None
    state: str
    targets: tuple[str, ...]
    prior: float = 0.0
    state_id: int | None = None
    generation: int = -1
    energy: float | None = None
    visits: int = 0
    successes: int = 0
    expanded: bool = False
    dead: bool = False
    unchanged: int = 0  # consecutive steps ending here that left every ⊢ target unchanged
    haves: int = 0  # consecutive `have` steps ending here
    answer: str | None = None  # set on the root of an answer's trie: the answer its theorem is filled with
    children: dict[str, TrieEntry] = field(default_factory=dict)

    @property
    def goals(self) -> int:
        return len(self.targets)

    def path(self) -> list[str]:
        """The tactics from the root to this node, in order."""
        tactics: list[str] = []
        node: TrieNode | None = self
        while node is not None and node.tactic is not None:
            tactics.append(node.tactic)
            node = node.parent
        tactics.reverse()
        return tactics

    def start(self) -> TrieNode:
        """The node this node's theorem starts at: the root of its answer's trie, else the root."""
        node = self
        while node.answer is None and node.parent is not None:
            node = node.parent
        return node

    def lineage(self) -> list[TrieNode]:
        """The nodes from the root to this one."""
        nodes: list[TrieNode] = []
        node: TrieNode | None = self
        while node is not None:
            nodes.append(node)
            node = node.parent
        nodes.reverse()
        return nodes


@dataclass(slots=True)
class TrieEntry:
    """What one (node, normalised tactic) gave: a `child` state, a verified `closed` proof, or a `failure` reason.
    `edge` is its trajectory row's node id (None when Lean never saw the tactic: a pruning rule cut it first)."""

    edge: int | None
    child: TrieNode | None = None
    closed: bool = False
    failure: str | None = None


@dataclass(frozen=True, slots=True)
class Priority:
    """The PUCT parameters (search.prior_weight, exploration, goal_penalty, value_weight, value_ramp_depth)."""

    alpha: float = 1.0
    exploration: float = 1.41
    goal_penalty: float = 0.3
    value_weight: float = 1.0
    value_ramp_depth: int = 0

    def prior(self, node: TrieNode) -> float:
        if node.energy is None:
            return node.prior
        ramp = value_ramp(node.depth, self.value_ramp_depth)
        return ramp * (-self.value_weight * node.energy) + (1.0 - ramp) * node.prior

    def score(self, node: TrieNode) -> float:
        """The node's priority (higher is expanded first); see the module docstring."""
        alpha_t = self.alpha / (1 + node.visits)
        q = node.successes / node.visits if node.visits else 0.0
        parent_visits = node.parent.visits if node.parent is not None else node.visits
        explore = self.exploration * math.sqrt(math.log(parent_visits + 1) / (1 + node.visits))
        return alpha_t * self.prior(node) + (1 - alpha_t) * q + explore - self.goal_penalty * max(0, node.goals - 1)


class ProofTrie:
    """Nodes by id and by state text (within the theorem they start from: an answer's trie is a theorem of its own);
    the replay trie hangs off the nodes' `children`."""

    def __init__(self, root: TrieNode) -> None:
        self.root = root
        self.nodes: dict[int, TrieNode] = {root.id: root}
        self.seen: dict[tuple[int, str], TrieNode] = {(root.id, root.state): root}
        self.next_id = root.id + 1

    def new_id(self) -> int:
        """A fresh id for a row (and the node it may create)."""
        node_id = self.next_id
        self.next_id += 1
        return node_id

    def add(self, node: TrieNode) -> None:
        self.nodes[node.id] = node
        self.seen.setdefault((node.start().id, node.state), node)

    def reached(self, parent: TrieNode, state: str) -> TrieNode | None:
        """The node that already holds `state` in `parent`'s theorem, if any."""
        return self.seen.get((parent.start().id, state))

    def best(self, priority: Priority, max_depth: int) -> TrieNode | None:
        """The live open node below `max_depth` with the highest priority (ties: the older): an unexpanded one when
        there is any (the prototype's rule), else an expanded one again (the prototype gave up there, leaving
        budget unspent; a new sample from a state can differ, and its visits already lower its priority)."""
        fresh: tuple[float, int, TrieNode] | None = None
        again: tuple[float, int, TrieNode] | None = None
        for node in self.nodes.values():
            if node.dead or not node.targets or node.depth >= max_depth:
                continue
            key = (priority.score(node), -node.id, node)
            if not node.expanded and (fresh is None or key[:2] > fresh[:2]):
                fresh = key
            elif node.expanded and (again is None or key[:2] > again[:2]):
                again = key
        chosen = fresh or again
        return chosen[2] if chosen else None

    def backpropagate(self, reached: TrieNode, closed: bool) -> list[TrieNode]:
        """One completion's replay ended at `reached` (`closed`: it proved the theorem from there): every node
        from the root to it gets a visit, and a success where the replay went on past it. Returns those nodes."""
        lineage = reached.lineage()
        for node in lineage:
            node.visits += 1
            if node is not reached or closed:
                node.successes += 1
        return lineage


def schedule(depth: int, at_root: int, at_floor: int, floor_depth: int) -> int:
    """A quantity decaying linearly with depth from `at_root` to `at_floor` at `floor_depth` (rounded)."""
    share = min(max(depth, 0), floor_depth) / floor_depth
    return max(1, round(at_root + (at_floor - at_root) * share))


def prune_reason(parent: TrieNode, tactic: str, targets: tuple[str, ...], seen: TrieNode | None) -> str | None:
    """Why a successful step from `parent` by `tactic` to a state with `targets` must end its completion, if it
    must: the state was already reached (`seen`, a loop or a transposition), the ⊢ targets stayed the same for
    more than MAX_UNCHANGED_STEPS steps, or a `have` opened more goals than it states (a bare typed
    `have h : T`, which the splitter makes of `have h : T := by …`, opens exactly one)."""
    if seen is not None:
        return f"pruned: the state was already reached (node {seen.id})"
    if unchanged_run(parent, targets) > MAX_UNCHANGED_STEPS:
        return f"pruned: more than {MAX_UNCHANGED_STEPS} steps in a row left the goals' targets unchanged"
    if _HAVE.match(tactic):
        opened = len(targets) - len(parent.targets)
        allowed = 1 if _BARE_TYPED_HAVE.match(tactic) and ":=" not in tactic else 0
        if opened > allowed:
            return f"pruned: a `have` step opened {opened} goal(s)"
    return None


def chain_reason(parent: TrieNode, tactic: str) -> str | None:
    """Why `tactic` is not even tried at `parent`: one more `have` than MAX_HAVE_CHAIN in a row."""
    if _HAVE.match(tactic) and parent.haves >= MAX_HAVE_CHAIN:
        return f"pruned: more than {MAX_HAVE_CHAIN} `have` steps in a row"
    return None


def unchanged_run(parent: TrieNode, targets: tuple[str, ...]) -> int:
    """Consecutive steps ending in the child that left the ⊢ targets as they were."""
    return parent.unchanged + 1 if sorted(targets) == sorted(parent.targets) else 0


def have_run(parent: TrieNode, tactic: str) -> int:
    """Consecutive `have` steps ending in the child."""
    return parent.haves + 1 if _HAVE.match(tactic) else 0


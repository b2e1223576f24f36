"""Checkpoints of half-searched theorems (hybrid mode): a killed `burnqed search --resume` continues a theorem from its
last round instead of restarting it (docs/search.md, "Hybrid search", Resume).

    journal = FileJournal("runs/iter_0/search/shard-0", store=store)  # {prefix}/_inflight/{key}/round-NNNNNN.json
    records = journal.load("thm")                            # the rounds written so far, in order
    journal.append("thm", record)                            # after each round
    trie, rows = rebuild_trie(records)                       # what a resumed search starts from
    curve = joined_curve(records)                            # its usage curve so far
    verdict = await recheck_proof(found, trie, rows, ...)    # a journaled proof, checked again before it counts
    journal.clear_all()                                      # once the trajectory is complete

One small file per round, published atomically, holds what that round added and changed, never a rewrite of the
trie (a theorem whose answer is open: its forest, each answer's root recording its answer); the rounds after a
missing one are ignored, and a checkpoint of other settings (`fingerprint`) is discarded. Anyone who can write the
output can write a journal, so a proof it holds counts only once `recheck_proof` passed: its tactics are the path of
its closing row, the answer its trie starts from passes `check_answer`, Lean closes the goal again by replaying that
path from the theorem's start, and the soundness rules (the compile included when `search.verify` is on) pass again.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Awaitable, Callable
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, ValidationError, model_serializer

from burnqed import storage
from burnqed.errors import InputError
from burnqed.layout import INFLIGHT
from burnqed.lean.env import LeanEnv
from burnqed.lean.guard import TacticGuard
from burnqed.lean.soundness import Verdict, check_answer
from burnqed.records.replies import TacticResult
from burnqed.records.results import BudgetUsage, Edge, UsageCurve
from burnqed.records.theorem import Theorem
from burnqed.search.skeleton import verify_closing
from burnqed.search.trie import ProofTrie, TrieEntry, TrieNode
from leankit.commands import term_problem

_ROUND = re.compile(r"^round-(\d{6,})\.json$")


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NodeRecord(_Record):
    """A node as created (its parent exists in an earlier or the same record)."""

    id: int
    parent: int | None
    depth: int
    tactic: str | None
    state: str
    targets: list[str]
    prior: float
    unchanged: int
    haves: int
    answer: str | None = None  # the root of an answer's trie: its answer (written only there)

    @model_serializer(mode="wrap")
    def _answer_only_when_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        """A node of a theorem without an open answer is written as it always was: no `answer` key."""
        data: dict[str, object] = handler(self)
        if self.answer is None:
            data.pop("answer", None)
        return data


class NodeStats(_Record):
    """A node's mutable search statistics after the round."""

    id: int
    visits: int
    successes: int
    expanded: bool
    dead: bool
    energy: float | None


class EntryRecord(_Record):
    """One trie entry: (node, normalised tactic) → a child, a closed proof or a failure."""

    node: int
    key: str
    edge: int | None
    child: int | None
    closed: bool
    failure: str | None


class ProofRecord(_Record):
    """A proof the search found: its closing row, text, tactics, the budget spent at it, verified or not."""

    edge: int
    proof: str | None
    tactics: list[str]
    depth: int
    budget: int
    verified: bool
    revision: int = 0  # its place in a repair chain (0: a fresh attempt)


class Counters(_Record):
    """The search's totals after the round (what a resumed search starts from)."""

    rounds: int
    sampled: int
    tokens: int
    lean_calls: int
    elapsed_s: float
    policy_s: float
    lean_s: float
    value_s: float
    rejected: int
    refusals: list[str]
    next_id: int
    repaired: int = 0  # failed attempts revised so far (search.repair_rounds)
    revisions: int = 0


class RoundRecord(_Record):
    """What one round added and changed (round 0: the started root)."""

    theorem: str = Field(description="The theorem searched.")
    round: int = Field(ge=0, description="0 for the start, then the round number.")
    fingerprint: str = Field(description="Digest of what the trie depends on; another one is not resumed.")
    counters: Counters
    nodes: list[NodeRecord] = Field(default_factory=list)
    stats: list[NodeStats] = Field(default_factory=list)
    entries: list[EntryRecord] = Field(default_factory=list)
    edges: list[Edge] = Field(default_factory=list)
    proofs: list[ProofRecord] = Field(default_factory=list)
    usage: list[BudgetUsage] = Field(default_factory=list, description="Budget marks recorded so far (all of them).")
    curve: UsageCurve | None = Field(
        default=None, description="The usage curve's entries this round added (the units it spent); the records' "
        "curves in order make the search's. None: not recorded (a resumed search's curve is then unknown).")


class RoundJournal(Protocol):
    """Where a search keeps its rounds (burnqed.stages.search passes a `FileJournal` on the output prefix)."""

    def load(self, theorem: str) -> list[RoundRecord]: ...

    def append(self, theorem: str, record: RoundRecord) -> None: ...

    def clear(self, theorem: str) -> None: ...


def joined_curve(records: list[RoundRecord]) -> UsageCurve:
    """The usage curve the records hold, their rounds' entries in order (a record without one adds nothing: the
    curve then falls short of the units spent, which the meter reads as unknown)."""
    return UsageCurve(tokens=[t for r in records if r.curve for t in r.curve.tokens],
                      lean_calls=[c for r in records if r.curve for c in r.curve.lean_calls])


def rebuild_trie(records: list[RoundRecord]) -> tuple[ProofTrie, list[Edge]]:
    """The trie (nodes, their statistics, the entries) and the trajectory rows the records hold, in round order.
    Restored nodes have no Lean state in this process: the search rebuilds them by replaying their paths. The trie
    of an answer that is not one term (`leankit.commands.term_problem`; only an edited journal holds one) is dead:
    nothing is prompted with it, and a proof under it is refused by `recheck_proof`."""
    nodes: dict[int, TrieNode] = {}
    trie: ProofTrie | None = None
    edges: list[Edge] = []
    for record in records:
        for spec in record.nodes:
            parent = nodes[spec.parent] if spec.parent is not None else None
            node = TrieNode(spec.id, parent, spec.depth, spec.tactic, spec.state, tuple(spec.targets),
                            prior=spec.prior, unchanged=spec.unchanged, haves=spec.haves, answer=spec.answer)
            nodes[spec.id] = node
            if trie is None:
                trie = ProofTrie(node)
            else:
                trie.add(node)
        for stats in record.stats:
            node = nodes[stats.id]
            node.visits, node.successes, node.expanded = stats.visits, stats.successes, stats.expanded
            node.dead, node.energy = stats.dead, stats.energy
        for entry in record.entries:
            child = nodes[entry.child] if entry.child is not None else None
            nodes[entry.node].children[entry.key] = TrieEntry(entry.edge, child, entry.closed, entry.failure)
        edges.extend(record.edges)
    if trie is None:
        raise InputError(f"search checkpoint of {records[0].theorem!r} has no root node: delete its folder")
    for node in nodes.values():  # a journal edited to an answer that is not one term: its trie is never searched
        answer = node.start().answer
        if answer is not None and term_problem(answer) is not None:
            node.dead = True
    trie.next_id = records[-1].counters.next_id
    return trie, edges


async def recheck_proof(
    found: ProofRecord,
    trie: ProofTrie,
    rows: dict[int, Edge],
    *,
    lean: LeanEnv,
    guard: TacticGuard,
    compile: bool,
    theorem_at: Callable[[TrieNode], Theorem],
    apply_at: Callable[[TrieNode, str], Awaitable[TacticResult | None]],
    charge: Callable[[float], None],
    index_header: str | None,
) -> tuple[TrieNode | None, Verdict]:
    """Check a proof a journal holds as if the search had just found it (the module docstring): the node its closing
    tactic was applied at (None when the journal names none) and the verdict, whose `proof` is the text assembled
    afresh (the journal's own text is never used). `apply_at` applies a tactic at a node, replaying its path in Lean
    first (the search's `_apply_at`); `theorem_at` is the theorem a node is a state of (an open answer: filled);
    `index_header` the theorem's header as the index gives it (the compile's pinned shape)."""
    row = rows.get(found.edge)
    node = trie.nodes.get(row.parent_id) if row is not None else None
    if row is None or node is None or not found.tactics:
        return None, Verdict(False, "the journal names no closing row of the trie for it")
    tactic = found.tactics[-1]
    if row.tactic != tactic or found.tactics != [*node.path(), tactic]:
        return node, Verdict(False, "its tactics are not the trie's path to its closing row")
    answer = node.start().answer
    if answer is not None:
        verdict = check_answer(answer, guard)
        if not verdict.ok:
            return node, Verdict(False, f"its answer is refused: {verdict.reason}")
    final = await apply_at(node, tactic)
    if final is None or not final.closed_all_goals:
        return node, Verdict(False, "replayed from the theorem's start, its path does not close the goal in Lean")
    theorem = theorem_at(node)
    verdict = await verify_closing(lean, theorem, guard, list(found.tactics), final, compile=compile,
                                   reclose=lambda: apply_at(node, tactic), charge=charge, index_header=index_header)
    return node, verdict


def theorem_key(name: str) -> str:
    """A file-name-safe, unique folder name for a theorem."""
    slug = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:60]
    return f"{slug}-{hashlib.sha256(name.encode()).hexdigest()[:12]}"


class FileJournal:
    """Round records under `{prefix}/_inflight/` on any storage URI (local path, file://, s3://)."""

    def __init__(self, prefix: str, *, store: storage.Store) -> None:
        self.root = storage.join(prefix, INFLIGHT)
        self.store = store

    def _folder(self, theorem: str) -> str:
        return storage.join(self.root, theorem_key(theorem))

    def load(self, theorem: str) -> list[RoundRecord]:
        fs, folder = self.store.resolve(self._folder(theorem))
        try:
            names = [posixpath.basename(str(p)) for p in fs.ls(folder, detail=False)] if fs.isdir(folder) else []
        except FileNotFoundError:
            return []
        numbered = sorted((int(m.group(1)), name) for name in names if (m := _ROUND.match(name)))
        records: list[RoundRecord] = []
        for expected, (number, name) in enumerate(numbered):
            if number != expected:
                break  # a round after a missing one belongs to no consistent state
            path = posixpath.join(folder, name)
            try:
                record = RoundRecord.model_validate_json(fs.cat_file(path))
            except ValidationError as exc:
                raise InputError(f"search checkpoint {path} is malformed ({exc.errors()[0]['msg']}): delete "
                                 f"{self._folder(theorem)} to search {theorem!r} from the start") from None
            if record.theorem != theorem or record.round != number:
                raise InputError(f"search checkpoint {path} belongs to {record.theorem!r} round {record.round}, "
                                 f"not {theorem!r} round {number}: delete {self._folder(theorem)}")
            records.append(record)
        return records

    def append(self, theorem: str, record: RoundRecord) -> None:
        uri = storage.join(self._folder(theorem), f"round-{record.round:06d}.json")
        self.store.write_bytes(uri, record.model_dump_json().encode())

    def clear(self, theorem: str) -> None:
        self._remove(self._folder(theorem))

    def pending(self) -> int:
        """How many theorems have checkpoints here."""
        fs, root = self.store.resolve(self.root)
        try:
            return len(fs.ls(root, detail=False)) if fs.isdir(root) else 0
        except FileNotFoundError:
            return 0

    def clear_all(self) -> None:
        """Remove every checkpoint (the trajectory is complete: nothing is half-searched)."""
        self._remove(self.root)

    def _remove(self, uri: str) -> None:
        fs, path = self.store.resolve(uri)
        try:
            if fs.exists(path):
                fs.rm(path, recursive=True)
        except FileNotFoundError:
            return

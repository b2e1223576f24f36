"""A hybrid search's checkpoints (docs/search.md, "Hybrid search", "Resume"): what its current round changed, saved
as one record of its round journal (`search.journal`) after the round; on a restart the search rebuilt from the
records, and the proofs they hold counted only once checked again (`journal.recheck_proof`). A checkpoint made under
other settings (`fingerprint`) is not resumed.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from burnqed.records.replies import first_line
from burnqed.records.results import Edge
from burnqed.records.theorem import Theorem
from burnqed.search.hybrid_settings import HybridSettings
from burnqed.search.journal import (
    Counters,
    EntryRecord,
    NodeRecord,
    NodeStats,
    ProofRecord,
    RoundJournal,
    RoundRecord,
    joined_curve,
    rebuild_trie,
    recheck_proof,
)
from burnqed.search.rebuild import SharedWorker
from burnqed.search.skeleton import EngineCore, Proof
from burnqed.search.trie import ProofTrie, TrieEntry, TrieNode
from burnqed.search.usage import CountingLean, UsageMeter, Waits
from burnqed.text.completion import normalize_tactic

__all__ = ["Checkpointed", "Checkpoints", "RoundChanges", "fingerprint"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class RoundChanges:
    """What the current round of a hybrid search changed, for its checkpoint, each in the order the round made it:
    the nodes it created, those whose statistics it changed (by id), the trie entries and rows it added, and the
    proofs it counted (each with whether it was verified)."""

    nodes: list[TrieNode] = field(default_factory=list)
    touched: dict[int, TrieNode] = field(default_factory=dict)
    entries: list[tuple[TrieNode, str, TrieEntry]] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    proofs: list[tuple[Proof, bool]] = field(default_factory=list)

    def entry(self, node: TrieNode, key: str, entry: TrieEntry) -> None:
        """`node`'s entry for the tactic `key` (set, and kept for the checkpoint)."""
        node.children[key] = entry
        self.entries.append((node, key, entry))

    def touch(self, node: TrieNode) -> None:
        """`node`'s statistics changed."""
        self.touched[node.id] = node

    def changed(self) -> list[TrieNode]:
        """The nodes the round created or whose statistics it changed."""
        return list({**{n.id: n for n in self.nodes}, **self.touched}.values())

    def clear(self) -> None:
        """A new round: nothing changed yet."""
        self.nodes, self.touched, self.entries, self.edges, self.proofs = [], {}, [], [], []


def fingerprint(core: EngineCore[CountingLean], settings: HybridSettings) -> str:
    """What a hybrid search's trie depends on: a checkpoint made under anything else is not resumed."""
    s = settings
    deny = "\1".join(pattern.pattern for pattern in core.guard.patterns)
    parts: tuple[object, ...] = (core.theorem.name, core.declaration, core.theorem.header, s.fmt,
                                 s.max_depth, s.verify, deny, core.guard.max_chars)
    if s.repair.on:  # repair changes what the rounds sample and add (off, it leaves the fingerprint alone)
        parts = (*parts, s.repair.rounds, s.repair.message_tokens, s.repair.fmt, s.repair.cut)
    if core.slot.open:  # the answer prompt's format decides the forest's answers
        parts = (*parts, s.whole_fmt)
    text = "\0".join(map(str, parts))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Checkpointed(Protocol):
    """A hybrid search as its checkpoints save and restore it (`HybridSearch`): its settings, its core, its trie
    (None until started or restored) and its counters."""

    @property
    def settings(self) -> HybridSettings: ...
    @property
    def core(self) -> EngineCore[CountingLean]: ...

    trie: ProofTrie | None
    rounds: int
    sampled: int  # proofs sampled (the budget)
    repaired: int  # fresh attempts revised (repair chains started)
    revisions: int  # revisions sampled
    resumed_from: int  # the round a resumed search went on from


class Checkpoints:
    """A hybrid search's round journal (`HybridSettings.journal`; None: no checkpoints, as in eval): each round's
    `changes` saved as one record; on a restart the search rebuilt from the records, and the proofs they hold counted
    only once checked again."""

    def __init__(self, journal: RoundJournal | None, changes: RoundChanges) -> None:
        self.journal = journal
        self.changes = changes
        self.curve_saved = 0  # the usage curve's entries already in the journal
        self.journaled: list[ProofRecord] = []  # a resumed search's proofs from its journal, not counted yet
        self.unproved: list[str] = []  # why journaled proofs were not counted (said in the result)

    async def save(self, search: Checkpointed) -> None:
        """The round `search` just ended (or its start) as one record in the journal; the round's changes cleared."""
        journal = self.journal
        if journal is None:
            self.changes.clear()
            return
        core, trie = search.core, search.trie
        assert trie is not None
        record = RoundRecord(
            theorem=core.theorem.name,
            round=search.rounds,
            fingerprint=fingerprint(core, search.settings),
            counters=Counters(
                rounds=search.rounds, sampled=search.sampled, tokens=core.meter.tokens,
                lean_calls=core.meter.lean_calls,
                elapsed_s=core.meter.elapsed(), policy_s=core.waits.policy_s, lean_s=core.waits.lean_s,
                value_s=core.waits.value_s,
                rejected=core.proofs.rejected, refusals=list(core.refusals), next_id=trie.next_id,
                repaired=search.repaired, revisions=search.revisions,
            ),
            nodes=[NodeRecord(id=n.id, parent=n.parent.id if n.parent else None, depth=n.depth, tactic=n.tactic,
                              state=n.state, targets=list(n.targets), prior=n.prior, unchanged=n.unchanged,
                              haves=n.haves, answer=n.answer) for n in self.changes.nodes],
            stats=[NodeStats(id=n.id, visits=n.visits, successes=n.successes, expanded=n.expanded, dead=n.dead,
                             energy=n.energy) for n in self.changes.changed()],
            entries=[EntryRecord(node=n.id, key=key, edge=e.edge, child=e.child.id if e.child else None,
                                 closed=e.closed, failure=e.failure) for n, key, e in self.changes.entries],
            edges=list(self.changes.edges),
            proofs=[ProofRecord(edge=p.edge, proof=p.proof, tactics=p.tactics, depth=len(p.tactics),
                                budget=p.budget, verified=verified, revision=p.revision)
                    for p, verified in self.changes.proofs],
            usage=list(core.meter.recorded),
            curve=core.meter.curve(self.curve_saved),
        )
        self.curve_saved = len(core.meter.curve_tokens)
        self.changes.clear()
        await asyncio.to_thread(journal.append, core.theorem.name, record)

    def restore(self, search: Checkpointed) -> bool:
        """Rebuild `search` from the journal's rounds; False when there is nothing (usable) to resume."""
        journal = self.journal
        if journal is None:
            return False
        core = search.core
        records = journal.load(core.theorem.name)
        if not records:
            return False
        if any(record.fingerprint != fingerprint(core, search.settings) for record in records):
            log.warning("%s: its checkpoint was made under other settings; searching it from the start",
                        core.theorem.name)
            journal.clear(core.theorem.name)
            return False
        search.trie, core.edges = rebuild_trie(records)
        self.journaled = [found for record in records for found in record.proofs]  # counted once re-checked
        last = records[-1].counters
        search.rounds, search.sampled = last.rounds, last.sampled
        core.proofs.rejected, core.refusals = last.rejected, [*last.refusals]
        core.waits = Waits(last.policy_s, last.lean_s, last.value_s)
        search.repaired, search.revisions = last.repaired, last.revisions
        core.meter = UsageMeter(search.settings.marks, core.lean, tokens_before=last.tokens,
                                calls_before=last.lean_calls, seconds_before=last.elapsed_s)
        core.meter.restore(records[-1].usage, joined_curve(records), last.sampled)
        self.curve_saved = len(core.meter.curve_tokens)
        search.resumed_from = last.rounds
        log.info("%s: resumed at round %d (%d proofs sampled)", core.theorem.name, last.rounds, last.sampled)
        return True

    async def recheck(self, search: Checkpointed, worker: SharedWorker[TrieNode],
                      theorem_at: Callable[[TrieNode], Theorem]) -> None:
        """Count the journal's proofs only once each passes again as if just found (`journal.recheck_proof`: its
        path replayed from the theorem's start in Lean on `worker`, the soundness rules, the compile). One that does
        not is a rejected proof, its closing entry a failure (never followed as closed again), and the result says
        why."""
        core, trie = search.core, search.trie
        assert trie is not None
        rows = {edge.node_id: edge for edge in core.edges}
        for found in self.journaled:
            node, verdict = await recheck_proof(
                found, trie, rows, lean=core.lean, guard=core.guard, compile=search.settings.verify,
                theorem_at=theorem_at, apply_at=worker.apply_at, charge=worker.charge_lean,
                index_header=core.theorem.header)
            if verdict.ok:  # verified or not as the check says, whatever the journal says
                (core.proofs.verified if verdict.verified else core.proofs.unverified).append(
                    Proof(found.edge, verdict.proof, found.tactics, found.budget, found.revision,
                          node.start().answer if node is not None else None))
                continue
            why = verdict.reason
            core.proofs.rejected += 1
            self.unproved.append(f"a proof its journal holds (row {found.edge}) did not check again: {why}")
            log.warning("%s: %s", core.theorem.name, self.unproved[-1])
            if node is not None and found.tactics:
                self.changes.entry(node, normalize_tactic(found.tactics[-1]),
                                   TrieEntry(found.edge, failure=first_line(why)))
        self.journaled = []

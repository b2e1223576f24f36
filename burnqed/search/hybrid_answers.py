"""The tries of a hybrid search of a theorem whose answer is open (docs/search.md, "Answers"): each distinct answer
under the open root roots the trie of the theorem it fills; the theorem a node is a state of, what a proof prompt at
it shows, and an answer prompt's completion read to its answer's trie.
"""

from __future__ import annotations

import time

from burnqed.errors import LeanError, LeanStartError
from burnqed.lean.guard import read_off_loop
from burnqed.lean.soundness import check_header
from burnqed.lean.start import start_theorem
from burnqed.policy.base import Completion
from burnqed.records.replies import first_line, pretty_state
from burnqed.records.results import Edge, EdgeOutcome
from burnqed.records.theorem import Theorem
from burnqed.search.answer import read_attempt
from burnqed.search.hybrid_checkpoints import RoundChanges
from burnqed.search.hybrid_rows import attempt_row
from burnqed.search.skeleton import EngineCore
from burnqed.search.trie import ProofTrie, TrieEntry, TrieNode
from burnqed.search.usage import CountingLean
from burnqed.text.completion import join_tactics, normalize_tactic, split_proof
from burnqed.text.prompt import PromptFormat, answer_header
from leankit.answer import fill_slot

__all__ = ["AnswerForest"]


class AnswerForest:
    """The tries of a theorem whose answer is open (docs/search.md, "Answers"): under its open root, each distinct
    answer roots the trie of the theorem it fills. Which theorem a node is a state of and what a proof prompt at it
    shows; an answer prompt's completion read to the root of its answer's trie (started when new), where its proof is
    replayed. A theorem whose answer is not open is a forest of one trie, the theorem's."""

    def __init__(self, core: EngineCore[CountingLean], changes: RoundChanges) -> None:
        self.core = core
        self.changes = changes  # the round's: an answer's new root, the open root's entries and rows
        self.filled: dict[int, Theorem] = {}  # the theorem each answer's root starts, by root id

    def theorem_at(self, node: TrieNode) -> Theorem:
        """The theorem `node` is a state of: the one searched, or (an open answer) the one its answer's root fills."""
        start = node.start()
        if start.answer is None:
            return self.core.theorem
        if start.id not in self.filled:
            self.filled[start.id] = self.core.theorem.with_answer(start.answer)
        return self.filled[start.id]

    def is_open_root(self, node: TrieNode) -> bool:
        """`node` is the open root of a theorem whose answer is open (it samples answers with their proofs)."""
        return node.parent is None and self.core.slot.open

    def context(self, node: TrieNode) -> str | None:
        """What a proof prompt at `node` shows above its state: the declaration, under the header with the answer
        filled in when the answer is open (the model sees the answer it proves; never the reference comment)."""
        answer = node.start().answer
        if answer is None:
            return self.core.declaration
        assert self.core.theorem.answer is not None and self.core.theorem.header is not None
        slot = self.core.theorem.answer.name
        header = fill_slot(answer_header(self.core.theorem.header, slot), slot, answer)
        return f"{header}\n\n{self.core.declaration or ''}"

    async def answered(self, trie: ProofTrie, completion: Completion, fmt: PromptFormat, gen_ms: float,
                       opened: list[TrieNode], revises: Edge | None = None,
                       kept: str | None = None) -> tuple[TrieNode, list[str]] | None:
        """One completion of the answer prompt (`fmt`), or a revision of an attempt at the open answer (whose answer
        was `kept`): the root of the answer's trie it gives (or leads to), and its proof's tactics to replay there;
        None when it reached no trie. A completion refused by name (`search.answer.read_attempt`) and an answer whose
        theorem does not start are rows under the open root, cached like any (node, key) of the trie: the refused one
        by answer and proof, the answer by its whitespace-collapsed text."""
        root = trie.root
        attempt = await read_off_loop(completion.text, lambda: read_attempt(self.core.theorem, fmt, completion.text,
                                                                            self.core.guard, kept=kept))
        body = join_tactics(attempt.tactics, indent="")
        answer_key = " ".join((attempt.answer or "").split())
        key = answer_key if attempt.theorem is not None else f"{answer_key}\0{normalize_tactic(body)}"
        entry = root.children.get(key)
        if entry is None and attempt.theorem is None:
            reason = attempt.refusal or "no attempt"
            entry = self._no_trie(trie, key, body, EdgeOutcome.REFUSED, reason, completion, gen_ms, revises)
        elif entry is None:
            assert attempt.theorem is not None and attempt.answer is not None
            entry = await self._open_answer(trie, key, attempt.answer, attempt.theorem, body, completion, gen_ms,
                                            revises)
            if entry.child is not None:
                opened.append(entry.child)
        if entry.child is None:
            for reached in trie.backpropagate(root, False):
                self.changes.touch(reached)
            return None
        return entry.child, split_proof(body)

    async def _open_answer(self, trie: ProofTrie, key: str, answer: str, theorem: Theorem, body: str,
                           completion: Completion, gen_ms: float, revises: Edge | None) -> TrieEntry:
        """Start `theorem` (the open one filled with `answer`): the root of the answer's trie, or the failure row
        when Lean cannot start it (an answer it cannot elaborate). Either way the open root's entry for `key`."""
        shape = check_header(self.core.theorem.header, theorem.header)  # the compile's pinned shape, before Lean
        if not shape.ok:
            return self._no_trie(trie, key, body, EdgeOutcome.ERROR, f"the theorem does not start with this answer: "
                                 f"{shape.reason}", completion, gen_ms, revises)
        started = time.perf_counter()
        try:
            state_id, goals = await start_theorem(self.core.lean, theorem)
        except LeanStartError:
            raise
        except LeanError as exc:
            return self._no_trie(trie, key, body, EdgeOutcome.ERROR, f"the theorem does not start with this answer: "
                                 f"{first_line(str(exc))}", completion, gen_ms, revises)
        finally:
            self.core.waits.lean_s += time.perf_counter() - started
        node = TrieNode(trie.new_id(), trie.root, 0, None, pretty_state(goals),
                        tuple(goal.target for goal in goals), prior=completion.logprob / max(completion.n_tokens, 1),
                        state_id=state_id, generation=self.core.lean.generation, answer=answer.strip())
        self.filled[node.id] = theorem
        trie.add(node)
        self.changes.nodes.append(node)
        entry = TrieEntry(None, child=node)
        self.changes.entry(trie.root, key, entry)
        return entry

    def _no_trie(self, trie: ProofTrie, key: str, body: str, outcome: EdgeOutcome, reason: str,
                 completion: Completion, gen_ms: float, revises: Edge | None) -> TrieEntry:
        """The open root's entry for `key` of an attempt that reached no trie: a failure, at its row (`attempt_row`)."""
        row = attempt_row(trie, trie.root, body, outcome, reason, completion, gen_ms, revises)
        self.core.edges.append(row)
        self.changes.edges.append(row)
        entry = TrieEntry(row.node_id, failure=row.error)
        self.changes.entry(trie.root, key, entry)
        return entry

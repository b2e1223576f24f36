"""Hybrid search of one theorem (docs/search.md, "Hybrid search", "Repair"): whole proofs sampled from proof states,
replayed tactic by tactic through a trie, best-first over the states they reach.

    outcome = await prove_hybrid(theorem, lean, policy, HybridSettings(max_proofs=64), guard, value=None)

Each round samples N proofs from the open node of highest priority (`trie.Priority`), replays them through the trie
(each (node, tactic) goes to Lean once; `trie.prune_reason`, `trie.chain_reason` prune), verifies a path that closes
every goal with the soundness rules, back-propagates every path and has the value model score the new open nodes. With
`settings.repair.rounds` > 0 the round's failed attempts are revised (`search.repair.revise`), each revision a whole
proof replayed from the root. With a `journal` every round is checkpointed (`hybrid_checkpoints.Checkpoints`, over
`search.journal`): a restarted search resumes from its last round, and a proof its journal holds counts only once
checked again as if just found (`journal.recheck_proof`). A theorem whose answer is open is searched as a forest
(`hybrid_answers.AnswerForest`; docs/search.md, "Answers"): its open root asks the answer prompt, each distinct answer
roots the trie of the theorem it fills. The settings are `hybrid_settings.HybridSettings`; a completion's rows share
its tokens (`hybrid_rows.share`). The engine holds these collaborators and inherits from nothing.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable

from burnqed.lean.env import LeanEnv
from burnqed.lean.guard import TacticGuard, read_off_loop
from burnqed.lean.start import start_theorem
from burnqed.policy.base import Completion, Policy, ask, expansion_seeds, sample_seed
from burnqed.records.enums import SearchMode
from burnqed.records.replies import Goal, TacticKind, TacticResult, pretty_state
from burnqed.records.results import Edge, EdgeOutcome, FailureReason
from burnqed.records.theorem import Theorem
from burnqed.search.hybrid_answers import AnswerForest
from burnqed.search.hybrid_checkpoints import Checkpoints, RoundChanges, fingerprint
from burnqed.search.hybrid_rows import attempt_row, share
from burnqed.search.hybrid_settings import HybridSettings
from burnqed.search.rebuild import SharedWorker, searched_root
from burnqed.search.repair import Failure, revise, tactic_feedback, unsolved_feedback
from burnqed.search.root import Root, accept_subgoal
from burnqed.search.skeleton import (
    EngineCore,
    Place,
    SearchOutcome,
    Spent,
    ask_within,
    final_result,
    refused_ending,
    run_search,
    tactic_row,
    verify_closing,
)
from burnqed.search.trie import ProofTrie, TrieEntry, TrieNode, chain_reason, have_run, prune_reason, unchanged_run
from burnqed.search.usage import CountingLean
from burnqed.search.value import ValueFn
from burnqed.text.completion import extract_completion, normalize_tactic, split_proof
from burnqed.text.prompt import PromptFormat, build_prompt, build_statement_prompt, stop_strings


class HybridSearch:
    """One theorem's hybrid search; `run()` once."""

    core: EngineCore[CountingLean]

    def __init__(self, theorem: Theorem, lean: LeanEnv, policy: Policy, settings: HybridSettings,
                 guard: TacticGuard, value: ValueFn | None = None, root: Root | None = None) -> None:
        self.core = EngineCore.of(theorem, CountingLean(lean), policy, guard, settings.form, settings.marks, root,
                                  value)  # proofs' budget: proofs sampled before the round + the position in it
        self.worker: SharedWorker[TrieNode] = SharedWorker(self.core, started_by=self._started_by,
                                                           mark_dead=self._mark_dead)
        self.settings = settings
        self.trie: ProofTrie | None = None
        self.rounds = 0
        self.sampled = 0
        self.repaired = 0  # failed attempts revised (repair chains started)
        self.revisions = 0
        self.resumed_from = 0
        self.changes = RoundChanges()  # what the current round changed, for its checkpoint
        self.checkpoints = Checkpoints(settings.journal, self.changes)
        self.forest = AnswerForest(self.core, self.changes)  # an open answer's tries; the theorem at a node
        self._lean_error: str | None = None  # Lean's message on the last tactic `_step` sent, when Lean rejected it

    # ------------------------------------------------------------------------------------ entry point

    async def run(self) -> SearchOutcome:
        return await run_search(self._resume_or_start, self._loop, self._finish)

    async def search(self) -> FailureReason | None:
        """Start and search, no result built, no journal resumed and Lean's failures not classified (a sketch's
        subgoal search: the sketch search reads `core.proofs`, `core.edges`, `rounds`); why it ended."""
        await self._start()
        return await self._loop()

    async def _resume_or_start(self) -> None:
        if not self.checkpoints.restore(self):
            await self._start()
            return
        await self.checkpoints.recheck(self, self.worker, self.forest.theorem_at)

    async def _loop(self) -> FailureReason | None:
        settings = self.settings
        assert self.trie is not None
        while True:
            self.core.meter.reach(self.sampled)
            stop = self.core.proofs.limit(settings.stop_at_first, self.core.meter.elapsed(), settings.timeout_s,
                                          self.sampled, settings.max_proofs, FailureReason.MAX_PROOFS)
            if stop is not None:
                return stop.reason
            if self.rounds >= settings.max_rounds:
                return self.core.proofs.ending(FailureReason.MAX_ROUNDS)
            node = self.trie.best(settings.priority, settings.max_depth)
            if node is None:
                return self.core.proofs.ending(FailureReason.EXHAUSTED)
            finished = await self._round(node)
            if self.core.root.book is not None:
                self.core.root.book(self.rounds)
            await self.checkpoints.save(self)
            if not finished:
                return self.core.proofs.ending(FailureReason.TIMEOUT)

    # ---------------------------------------------------------------------------------------- lean side

    async def _start(self) -> None:
        if self.core.root.goal is not None:  # a goal already in the worker: nothing to start
            goals: tuple[Goal, ...] = (self.core.root.goal,)
            root = TrieNode(0, None, 0, None, pretty_state(goals), tuple(g.target for g in goals),
                            state_id=self.core.root.state_id, generation=self.core.root.generation)
            self.core.start_generation = root.generation
            self.trie = ProofTrie(root)
            return
        if not self.core.slot.started:  # the open root: asked with the answer prompt, never started (its slot is sorry)
            assert self.core.slot.name is not None
            self.trie = ProofTrie(TrieNode(0, None, 0, None, "", (self.core.slot.name,)))
            self.changes.nodes.append(self.trie.root)
            await self.checkpoints.save(self)
            return
        started = time.perf_counter()
        try:
            state_id, goals = await start_theorem(self.core.lean, self.core.theorem)
        finally:
            self.core.waits.lean_s += time.perf_counter() - started
        root = TrieNode(0, None, 0, None, pretty_state(goals), tuple(g.target for g in goals), state_id=state_id,
                        generation=self.core.lean.generation)
        self.trie = ProofTrie(root)
        self.changes.nodes.append(root)
        await self.checkpoints.save(self)

    def _mark_dead(self, node: TrieNode) -> None:
        """`node` cannot be rebuilt: never expanded again, and so recorded in the round's checkpoint."""
        node.dead = True
        self.changes.touch(node)

    def _started_by(self, node: TrieNode) -> Theorem | None:
        """The theorem whose start gives `node` its state: an answer's root starts the theorem its answer fills."""
        return self.forest.theorem_at(node) if node.answer is not None else searched_root(self.core.theorem, node)

    # ------------------------------------------------------------------------------------------- rounds

    async def _round(self, node: TrieNode) -> bool:
        """Sample from `node` and replay the answers. False when the time ran out waiting for the policy."""
        settings = self.settings
        node.expanded = True
        self.changes.touch(node)
        self.rounds += 1
        sampling = settings.round_sampling(node.depth, settings.max_proofs - self.sampled)
        answering = self.forest.is_open_root(node)
        if answering:  # the answer prompt, as whole mode asks it; each round numbers its samples on (new answers)
            prompt = build_statement_prompt(settings.whole_fmt, self.core.declaration or "", self.core.theorem.header,
                                            slot=self.core.slot.name)
            sampling = dataclasses.replace(sampling, stop=stop_strings(settings.whole_fmt))
        else:
            prompt = build_prompt(settings.fmt, node.state, self.forest.context(node))
        seeds = expansion_seeds(settings.seed, self.core.seed_key, [node.id], sampling.n,
                                first_sample=self.sampled if answering else 0, attempt=settings.attempt)
        assert self.trie is not None
        answer = await ask_within(self.core, settings.timeout_s,
                                  lambda: ask(self.core.policy, [prompt], sampling, seeds),
                                  places=[Place(node.id, node.depth + 1, node.state)], new_id=self.trie.new_id)
        if answer is None:
            return False
        (row,) = answer.rows
        if row is not None:  # the prompt does not fit: the node is never asked about again (refused alike)
            self._mark_dead(node)
            self.changes.edges.append(row)
            return True
        before = self.sampled
        opened: list[TrieNode] = []
        failures: list[Failure] = []
        gen_ms = answer.seconds * 1000 / max(len(answer.asked[0]), 1)
        for position, completion in enumerate(answer.take(), start=1):  # each one's tokens counted as it is taken
            self.sampled += 1
            if self.core.meter.elapsed() < settings.timeout_s:  # past the time limit the rest is only counted
                failure = await (self._answered(completion, settings.whole_fmt, gen_ms, before + position, opened)
                                 if answering else self._replay(node, completion, gen_ms, before + position, opened))
                if failure is not None:
                    failures.append(failure)
            self.core.meter.reach(self.sampled)
        assert self.trie is not None
        root, seed = self.trie.root, settings.seed
        revision_seed = None if seed is None else (  # keyed on the row where the attempt failed
            lambda failure, _: sample_seed(seed, self.core.seed_key, -failure.edge.node_id, 0, settings.attempt))

        def check(completion: Completion, gen_ms: float, failure: Failure) -> Awaitable[Failure | None]:
            if self.core.slot.open:  # a file again: its answer (the attempt's when it gives none) picks the trie
                return self._answered(completion, settings.repair.fmt, gen_ms, self.sampled, opened,
                                      revises=failure.edge, kept=failure.answer)
            return self._replay(root, completion, gen_ms, self.sampled, opened, revises=failure.edge)  # from the root

        await revise(self, failures, dataclasses.replace(settings.sampling, max_new_tokens=settings.max_tokens),
                     revision_seed, check)
        await self._score(opened)
        return True

    async def _answered(self, completion: Completion, fmt: PromptFormat, gen_ms: float, budget: int,
                        opened: list[TrieNode], revises: Edge | None = None,
                        kept: str | None = None) -> Failure | None:
        """One completion of the answer prompt (`fmt`), or a revision of an attempt at the open answer (whose answer
        was `kept`), read by the forest (`AnswerForest.answered`): its proof replayed from the root of the answer's
        trie it reached, as any completion is."""
        assert self.trie is not None
        reached = await self.forest.answered(self.trie, completion, fmt, gen_ms, opened, revises, kept)
        if reached is None:
            return None
        start, tactics = reached
        return await self._replay(start, completion, gen_ms, budget, opened, revises, tactics)

    async def _read(self, start: TrieNode, completion: Completion, gen_ms: float,
                    revises: Edge | None) -> list[str] | None:
        """The tactics of a completion replayed from `start`; None when it is over the cap (`TacticGuard.over_cap`):
        read by no reader, a refused row at `start`."""
        over = self.core.guard.over_cap(completion.text)
        if over is not None:
            assert self.trie is not None
            row = attempt_row(self.trie, start, "", EdgeOutcome.REFUSED,
                              f"refused by the tactic guard: the completion has {over}", completion, gen_ms, revises)
            self.core.edges.append(row)
            self.changes.edges.append(row)
            return None
        fmt = self.settings.fmt if revises is None else self.settings.repair.fmt
        return await read_off_loop(completion.text, lambda: split_proof(extract_completion(fmt, completion.text)))

    async def _replay(self, start: TrieNode, completion: Completion, gen_ms: float, budget: int,
                      opened: list[TrieNode], revises: Edge | None = None,
                      tactics: list[str] | None = None) -> Failure | None:
        """Replay one completion from `start` through the trie (docs/search.md, step 3); a revision of the attempt
        that failed at `revises` is a whole proof, replayed from the root. `tactics`: the completion's, already read
        (an answer prompt's). The failed attempt, when repair is on and the completion failed with Lean's message."""
        assert self.trie is not None
        tactics = await self._read(start, completion, gen_ms, revises) if tactics is None else tactics
        if tactics is None:
            return None
        prior = completion.logprob / max(completion.n_tokens, 1)
        created: list[Edge] = []
        node, closed = start, False
        failed: tuple[int, str] | None = None  # the tactic Lean rejected and its message
        unsolved = False  # every tactic succeeded and goals are left
        for index, tactic in enumerate(tactics):
            key = normalize_tactic(tactic)
            entry = node.children.get(key)
            if entry is not None:
                if entry.child is not None:
                    node = entry.child
                    continue
                closed = entry.closed
                break
            self._lean_error = None
            step = await self._step(node, tactic, key, prior, budget, created, revision=revises)
            if step is None:  # a failure, a pruned step or a dead node: the completion ends here
                failed = (index, self._lean_error) if self._lean_error is not None else None
                break
            if step is node:  # closed every goal (verified or not: the entry says)
                closed = bool(node.children[key].closed)
                break
            opened.append(step)
            node = step
        else:
            unsolved = bool(tactics) and bool(node.targets)
        for reached in self.trie.backpropagate(node, closed):
            self.changes.touch(reached)
        share(created, completion, gen_ms)
        # Repair needs a row of this completion to keep the feedback on: the one Lean rejected, else its last.
        if not self.settings.repair.on or not created or created[-1].feedback is not None:
            return None
        attempt = [*start.path(), *tactics]
        row, tokens = created[-1], self.settings.repair.message_tokens
        if failed is not None:
            at = len(attempt) - len(tactics) + failed[0]
            shown = attempt[: at + 1] if self.settings.repair.cut else attempt
            feedback = tactic_feedback(shown, at, failed[1], row.state_before, tokens)
        elif unsolved and node is not start:
            feedback = unsolved_feedback(attempt, node.state, tokens)
        else:
            return None
        row.feedback = feedback.to_json()
        return Failure(row, feedback, budget, start.start().answer)

    async def _step(self, node: TrieNode, tactic: str, key: str, prior: float, budget: int,
                    created: list[Edge], revision: Edge | None = None) -> TrieNode | None:
        """Try a (node, tactic) the trie has not seen. Returns the new child, `node` itself when the tactic closed
        every goal, or None when the completion ends here."""
        assert self.trie is not None
        cut = chain_reason(node, tactic) or (
            "pruned: the child would be deeper than search.max_depth" if node.depth >= self.settings.max_depth else None
        )
        if cut is not None:
            self.changes.entry(node, key, TrieEntry(None, failure=cut))
            return None
        result = await self.worker.apply_at(node, tactic)
        if result is None:
            return None
        edge = tactic_row(self.trie.new_id(), node.id, node.depth + 1, node.state, tactic, result)
        if revision is not None:
            edge.revision, edge.revises = revision.revision + 1, revision.node_id
        self.core.edges.append(edge)
        self.changes.edges.append(edge)
        created.append(edge)
        if result.kind is not TacticKind.SUCCESS or result.state_id is None:
            self.changes.entry(node, key, TrieEntry(edge.node_id, failure=edge.error or result.kind.value))
            if result.kind in (TacticKind.ERROR, TacticKind.PARSE_ERROR):
                self._lean_error = "\n".join(result.errors) or result.reason
            return None
        if not result.goals:
            edge.outcome, edge.state_after = EdgeOutcome.CLOSED, ""
            closed = await self._verify(node, tactic, result, edge, budget, edge.revision)
            self.changes.entry(node, key, TrieEntry(edge.node_id, closed=closed,
                                                    failure=None if closed else edge.error))
            return node
        state = pretty_state(result.goals)
        edge.state_after = state
        targets = tuple(goal.target for goal in result.goals)
        pruned = prune_reason(node, tactic, targets, self.trie.reached(node, state))
        if pruned is not None:
            edge.error = pruned
            self.changes.entry(node, key, TrieEntry(edge.node_id, failure=pruned))
            return None
        child = TrieNode(edge.node_id, node, node.depth + 1, tactic, state, targets, prior=prior,
                         state_id=result.state_id, generation=self.core.lean.generation,
                         unchanged=unchanged_run(node, targets), haves=have_run(node, tactic))
        self.trie.add(child)
        self.changes.nodes.append(child)
        self.changes.entry(node, key, TrieEntry(edge.node_id, child=child))
        return child

    async def _verify(self, node: TrieNode, tactic: str, final: TacticResult, edge: Edge, budget: int,
                      revision: int) -> bool:
        """Count a closing path only on the soundness rules (a subgoal's: as far as its own search can tell,
        `accept_subgoal`). True when it is a proof (verified, or unverified with search.verify off)."""
        tactics = [*node.path(), tactic]
        if self.core.root.subgoal:
            return self.core.proofs.accept(edge, accept_subgoal(final, tactics, self.core.guard), tactics, self.rounds,
                                           revision) is not None
        verdict = await verify_closing(self.core.lean, self.forest.theorem_at(node), self.core.guard, tactics, final,
                                       compile=self.settings.verify, reclose=lambda: self.worker.apply_at(node, tactic),
                                       charge=self.worker.charge_lean, index_header=self.core.theorem.header)
        proof = self.core.proofs.count(edge, verdict, tactics, budget, revision)
        if proof is None:
            return False
        proof.answer = node.start().answer
        self.changes.proofs.append((proof, verdict.verified))
        return True

    async def _score(self, opened: list[TrieNode]) -> None:
        """The value model's energies of the round's new open nodes (one call), then their rows' priorities."""
        fresh = [node for node in opened if node.targets]
        if self.core.value is not None and fresh:
            starts: dict[int, list[TrieNode]] = {}  # one call per theorem started (an open answer: per answer)
            for node in fresh:
                starts.setdefault(node.start().id, []).append(node)
            for group in starts.values():
                started = time.perf_counter()
                energies = await self.core.value.energies(group[0].start().state, [node.state for node in group])
                self.core.waits.value_s += time.perf_counter() - started
                for node, energy in zip(group, energies, strict=True):
                    node.energy = energy
                    self.changes.touch(node)
        by_id = {edge.node_id: edge for edge in self.changes.edges}
        for node in fresh:
            edge = by_id.get(node.id)
            if edge is not None:
                edge.score, edge.energy = self.settings.priority.score(node), node.energy

    # ------------------------------------------------------------------------------------- checkpoints

    def fingerprint(self) -> str:
        """What the trie depends on: a checkpoint made under anything else is not resumed."""
        return fingerprint(self.core, self.settings)

    # ------------------------------------------------------------------------------------------ result

    def _finish(self, reason: FailureReason | None, detail: str | None) -> SearchOutcome:
        if self.checkpoints.unproved and not self.core.proofs.found() and detail is None:
            detail = "; ".join(self.checkpoints.unproved)
        ending = refused_ending(reason, detail, bool(self.core.proofs.verified), self.core.refusals)
        result = final_result(self.core, SearchMode.HYBRID, ending, Spent.of(self.core), nodes_expanded=self.rounds,
                              proofs_sampled=self.sampled, repaired=self.repaired, revisions=self.revisions)
        return SearchOutcome(result, self.core.edges)


async def prove_hybrid(theorem: Theorem, lean: LeanEnv, policy: Policy, settings: HybridSettings, guard: TacticGuard,
                       value: ValueFn | None = None) -> SearchOutcome:
    """Search one theorem in hybrid mode; never raises for domain failures (they are the result)."""
    return await HybridSearch(theorem, lean, policy, settings, guard, value).run()

"""Step-level best-first search of one theorem (docs/search.md, "Step-level best-first search"; BFS-Prover style).

    outcome = await prove(theorem, lean, policy, settings, guard)            # value=None: log-probs only
    outcome.result.proved, outcome.result.proof, outcome.edges

Loop: pop the best `expand_batch` frontier nodes, ask the policy for n tactics per node in ONE call, deduplicate,
apply each in Lean (the guard refuses unsafe ones first), verify every path that closes all goals, score the new
children (with the value model, one batched call per expansion) and push them. Budgets: `max_nodes` expansions,
`max_depth`, `timeout_s`. Revisits (`search.revisits`), the value reference, unverified proofs
(`search.verify = false`), speculative expansion (`search.speculate`), refused prompts and the rebuild after a
shared worker is replaced are described in that section.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from burnqed.lean.env import LeanEnv
from burnqed.lean.guard import TacticGuard
from burnqed.lean.start import start_theorem
from burnqed.policy.base import Completion, Policy, Sampling, ask, expansion_seeds
from burnqed.policy.candidates import Candidate, to_candidates, with_probes
from burnqed.records.enums import DeclarationForm, SearchMode
from burnqed.records.replies import Goal, TacticKind, TacticResult, pretty_state
from burnqed.records.results import Edge, EdgeOutcome, FailureReason
from burnqed.records.theorem import Theorem
from burnqed.search.rebuild import SharedWorker
from burnqed.search.repair import tactic_feedback
from burnqed.search.root import Root, accept_subgoal
from burnqed.search.scoring import node_score
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
from burnqed.search.tree import Node, SearchTree
from burnqed.search.usage import CountingLean
from burnqed.search.value import ValueFn
from burnqed.text.completion import normalize_tactic
from burnqed.text.prompt import PromptFormat, build_prompt
from leankit.normal_form import state_up_to_names

__all__ = ["SearchOutcome", "StepSearch", "StepSettings", "prove"]  # SearchOutcome: its old home, still imported


@dataclass(frozen=True, slots=True)
class StepSettings:
    """Plain search settings (built from `SearchConfig` + `PolicyConfig` by the runner)."""

    fmt: PromptFormat = PromptFormat.PLAIN_TACTIC
    form: DeclarationForm = DeclarationForm.BINDER  # how the prompts show the theorem's declaration
    sampling: Sampling = field(default_factory=lambda: Sampling(n=8))
    max_nodes: int = 300
    max_depth: int = 50
    timeout_s: float = 300.0
    alpha: float = 0.5
    expand_batch: int = 1
    probe_tactics: tuple[str, ...] = ()
    probe_logprob: float = -1.0
    verify: bool = True
    stop_at_first: bool = True
    value_weight: float = 1.0
    value_ramp_depth: int = 0
    value_reference: Literal["root", "none"] = "root"  # energies taken relative to the root's (search.value_reference)
    speculate: int = 0  # policy asks ahead per theorem (see the module docstring); 0 = off
    revisits: int = 0  # further expansions of an expanded node, with fresh samples (search.revisits)
    revisit_penalty: float = 1.0  # score a node loses per expansion when it goes back on the frontier
    revisit_temperature: float | None = None  # a revisit's sampling temperature (None: the first visit's)
    marks: tuple[int, ...] = ()  # budgets (expansions) at which to record what was spent (eval's rungs)
    seed: int | None = None  # policy.seed: each expansion samples from its own seeds (`expansion_seeds`); None: not
    attempt: int = 0  # which search of each theorem this is (eval's pass k): part of the seeds
    # search.repair_rounds > 0: step search revises nothing (it has no whole proofs), but keeps on every tactic Lean
    # rejects the feedback of the failed proof it ends (the path, then that tactic; burnqed.search.repair), capped at
    # this many tokens, so SFT can train the repair formats on step trajectories. None: no feedback kept.
    feedback_tokens: int | None = None


class StepSearch:
    """One theorem's search; `run()` once. Split into methods only for readability."""

    core: EngineCore[CountingLean]

    def __init__(
        self,
        theorem: Theorem,
        lean: LeanEnv,
        policy: Policy,
        settings: StepSettings,
        guard: TacticGuard,
        value: ValueFn | None = None,
        root: Root | None = None,
    ) -> None:
        self.core = EngineCore.of(theorem, CountingLean(lean), policy, guard, settings.form, settings.marks, root,
                                  value)  # proofs' budget: expansions when found
        self.worker: SharedWorker[Node] = SharedWorker(self.core)
        self.settings = settings
        self.expanded = 0
        self.tree: SearchTree | None = None
        self.ahead: dict[int, asyncio.Task[list[list[Completion]]]] = {}  # node id → the policy's answer, asked ahead
        self.speculated = 0
        self.root_energy: float | None = None  # the root's own energy (value_reference "root")
        self.speculation_used = 0

    # ------------------------------------------------------------------------------------ entry point

    async def run(self) -> SearchOutcome:
        try:
            return await run_search(self._start, self._loop, self._finish)
        finally:
            self._drop_speculation()

    async def search(self) -> FailureReason | None:
        """Start and search, no result built and Lean's failures not classified (a sketch's subgoal search: the
        sketch search reads `core.proofs`, `core.edges`, `expanded`); why it ended."""
        await self._start()
        try:
            return await self._loop()
        finally:
            self._drop_speculation()

    async def replay(self, tactics: list[str]) -> FailureReason | None:
        """Apply `tactics` in order from the root (a proof found elsewhere, nothing sampled): proved when the last one
        closes every goal (and only the last), its rows in `core.edges`; why not."""
        await self._start()
        assert self.tree is not None
        node = self.tree.root
        for index, tactic in enumerate(tactics):
            result = await self.worker.apply_at(node, tactic)
            if result is None:
                break
            edge = tactic_row(self.tree.new_id(), node.id, node.depth + 1, node.state, tactic, result)
            self.core.edges.append(edge)
            if result.kind is not TacticKind.SUCCESS or result.state_id is None:
                break
            if not result.goals:
                edge.outcome, edge.state_after = EdgeOutcome.CLOSED, ""
                if index == len(tactics) - 1:
                    await self._verify(node, tactic, result, edge)
                else:
                    edge.error = "not counted: the subgoal closed before the proof's last tactic"
                break
            edge.state_after = pretty_state(result.goals)
            node = Node(edge.node_id, node, node.depth + 1, tactic, edge.state_after, result.goals, result.state_id,
                        self.core.lean.generation)
        return None if self.core.proofs.verified else FailureReason.EXHAUSTED

    async def _loop(self) -> FailureReason | None:
        settings = self.settings
        assert self.tree is not None
        while True:
            self.core.meter.reach(self.expanded)
            stop = self.core.proofs.limit(settings.stop_at_first, self.core.meter.elapsed(), settings.timeout_s,
                                          self.expanded, settings.max_nodes, FailureReason.MAX_NODES)
            if stop is not None:
                return stop.reason
            batch = self.tree.pop(min(settings.expand_batch, settings.max_nodes - self.expanded), settings.max_depth)
            if not batch:
                return self.core.proofs.ending(FailureReason.EXHAUSTED)
            answered = await self._expand(batch)
            if self.core.root.book is not None:
                self.core.root.book(self.expanded)
            if not answered:
                return self.core.proofs.ending(FailureReason.TIMEOUT)

    # ---------------------------------------------------------------------------------------- lean side

    async def _start(self) -> None:
        if self.core.root.goal is not None:  # a goal already in the worker: nothing to start
            goals: tuple[Goal, ...] = (self.core.root.goal,)
            start = self.core.root
            node = Node(0, None, 0, None, pretty_state(goals), goals, start.state_id, start.generation)
            self.core.start_generation = node.generation
            self.tree = SearchTree(node)
            return
        started = time.perf_counter()
        try:
            state_id, goals = await start_theorem(self.core.lean, self.core.theorem)
        finally:
            self.core.waits.lean_s += time.perf_counter() - started
        root = Node(0, None, 0, None, pretty_state(goals), goals, state_id, self.core.lean.generation)
        self.core.start_generation = root.generation
        self.tree = SearchTree(root)

    # ------------------------------------------------------------------------------------- expansion

    async def _expand(self, batch: list[Node]) -> bool:
        """Expand `batch` with one policy call (nodes asked ahead wait for their own asks instead). False when
        the time budget ran out while waiting."""
        settings = self.settings
        ahead = {node.id: self.ahead.pop(node.id) for node in batch if node.id in self.ahead}
        fresh = [node for node in batch if node.id not in ahead]
        self.speculation_used += len(ahead)

        async def asked() -> list[list[Completion]]:
            answers: dict[int, list[Completion]] = {}
            for sampling in dict.fromkeys(self._sampling(n) for n in fresh):  # first visits, revisits: one ask each
                nodes = [n for n in fresh if self._sampling(n) == sampling]
                prompts = [build_prompt(settings.fmt, n.state, self.core.declaration) for n in nodes]
                got = await ask(self.core.policy, prompts, sampling, self._seeds(nodes))
                answers.update(zip((n.id for n in nodes), got, strict=True))
            return [answers[n.id] for n in fresh]

        async def in_batch_order() -> list[list[Completion]]:
            answers = await asyncio.gather(asked(), *ahead.values())
            by_node = dict(zip((node.id for node in fresh), answers[0], strict=True))
            by_node.update((node_id, answer[0]) for node_id, answer in zip(ahead, answers[1:], strict=True))
            return [by_node[node.id] for node in batch]

        assert self.tree is not None
        answer = await ask_within(self.core, settings.timeout_s, in_batch_order, new_id=self.tree.new_id,
                                  places=[Place(node.id, node.depth + 1, node.state) for node in batch])
        if answer is None:
            return False
        completions = answer.take_all()
        self.expanded += len(batch)
        children: list[tuple[Node, Edge]] = []
        refused: set[int] = set()  # nodes whose prompt the policy cannot take: asking again cannot help
        for index, (node, node_completions) in enumerate(zip(batch, completions, strict=True)):
            node.expanded = True
            node.visits += 1
            if answer.refusal(index) is not None:
                refused.add(node.id)
            candidates = self._untried(node, with_probes(
                to_candidates(settings.fmt, node_completions), settings.probe_tactics, settings.probe_logprob
            ))
            gen_ms = answer.gen_ms() / max(len(candidates), 1)
            for candidate in candidates:
                if (self.core.meter.elapsed() >= settings.timeout_s
                        or (self.core.proofs.found() and settings.stop_at_first)):
                    break
                child = await self._try(node, candidate, gen_ms)
                if child is not None:
                    children.append(child)
        await self._score(children)
        assert self.tree is not None
        for node in batch:
            if node.visits <= settings.revisits and not node.dead and node.id not in refused:
                self.tree.requeue(node, node.score - settings.revisit_penalty * node.visits)
        return True

    def _sampling(self, node: Node) -> Sampling:
        """How `node`'s next expansion samples: a revisit at search.revisit_temperature when that is set."""
        sampling = self.settings.sampling
        hotter = self.settings.revisit_temperature
        if node.visits == 0 or hotter is None:
            return sampling
        return dataclasses.replace(sampling, temperature=hotter)

    @staticmethod
    def _untried(node: Node, candidates: list[Candidate]) -> list[Candidate]:
        """The candidates `node` has not tried in an earlier expansion (normalised text), now marked tried."""
        fresh = [c for c in candidates if normalize_tactic(c.tactic) not in node.tried]
        node.tried.update(normalize_tactic(c.tactic) for c in fresh)
        return fresh

    async def _try(self, node: Node, candidate: Candidate, gen_ms: float) -> tuple[Node, Edge] | None:
        """Apply one candidate; record the edge; return the new child (and its edge) if it is a new state."""
        assert self.tree is not None
        result = await self.worker.apply_at(node, candidate.tactic)
        if result is None:
            return None
        edge_id = self.tree.new_id()
        depth = node.depth + 1
        edge = tactic_row(edge_id, node.id, depth, node.state, candidate.tactic, result,
                          logprob=candidate.logprob, n_tokens=candidate.n_tokens, gen_ms=gen_ms)
        self.core.edges.append(edge)
        if result.kind in (TacticKind.ERROR, TacticKind.PARSE_ERROR) and self.settings.feedback_tokens is not None:
            attempt = [*node.path(), candidate.tactic]
            edge.feedback = tactic_feedback(attempt, len(attempt) - 1, "\n".join(result.errors) or result.reason,
                                            node.state, self.settings.feedback_tokens).to_json()
        if result.kind is not TacticKind.SUCCESS or result.state_id is None:
            return None
        if not result.goals:
            edge.outcome = EdgeOutcome.CLOSED
            edge.state_after = ""
            await self._verify(node, candidate.tactic, result, edge)
            return None
        state = pretty_state(result.goals)
        edge.state_after = state
        if not self.tree.is_new_state(state):
            return None
        child = Node(
            edge_id, node, depth, candidate.tactic, state, result.goals, result.state_id, self.core.lean.generation,
            node.cum_logprob + candidate.logprob,
        )
        self._speculate(child)
        return child, edge

    def _speculate(self, child: Node) -> None:
        """Ask the policy about `child` now, while Lean works on the rest of the expansion (`search.speculate`)."""
        settings = self.settings
        if (
            len(self.ahead) >= settings.speculate
            or child.depth >= settings.max_depth
            or self.expanded >= settings.max_nodes
            or (self.core.proofs.found() and settings.stop_at_first)
        ):
            return
        prompt = build_prompt(settings.fmt, child.state, self.core.declaration)
        self.ahead[child.id] = asyncio.get_running_loop().create_task(
            ask(self.core.policy, [prompt], settings.sampling, self._seeds([child])))
        self.speculated += 1

    def _seeds(self, nodes: list[Node]) -> list[list[int]] | None:
        """The sampling seeds of the next expansion of each of these nodes: keyed on the node's id in the tree,
        which the search assigns in its own order (so a node asked ahead gets what it would get when expanded),
        and on how often it was expanded before (a revisit draws samples numbered after the earlier ones')."""
        n = self.settings.sampling.n
        if self.settings.seed is None:
            return None
        return [row for node in nodes
                for row in expansion_seeds(self.settings.seed, self.core.seed_key, [node.id], n,
                                           first_sample=node.visits * n, attempt=self.settings.attempt) or []]

    def _drop_speculation(self) -> None:
        """The search is over: asks for nodes never expanded are cancelled (their answers were not needed). Those
        answered already were generated all the same: their tokens count (a cancelled one's partial generation
        is not known, so it does not)."""
        for task in self.ahead.values():
            if not task.done():
                task.cancel()
            elif not task.cancelled() and task.exception() is None:  # a failed ask nobody needed is not an error
                self.core.meter.add_tokens(sum(c.n_tokens for answer in task.result() for c in answer))
        self.ahead.clear()

    async def _verify(self, node: Node, tactic: str, final: TacticResult, edge: Edge) -> None:
        """Count the path to `node` and on by `tactic`, which closed every goal, only on the soundness rules (a
        subgoal's: as far as its own search can tell, `accept_subgoal`)."""
        tactics = [*node.path(), tactic]
        if self.core.root.subgoal:
            self.core.proofs.accept(edge, accept_subgoal(final, tactics, self.core.guard), tactics, self.expanded)
            return
        verdict = await verify_closing(self.core.lean, self.core.theorem, self.core.guard, tactics, final,
                                       compile=self.settings.verify, reclose=lambda: self.worker.apply_at(node, tactic),
                                       charge=self.worker.charge_lean, index_header=self.core.theorem.header)
        self.core.proofs.count(edge, verdict, tactics, self.expanded)

    async def _score(self, children: Sequence[tuple[Node, Edge]]) -> None:
        """Score the expansion's new children (one value call for all of them) and push them."""
        assert self.tree is not None
        first_by_state: dict[str, tuple[Node, Edge]] = {}
        for child, edge in children:  # two candidates of one expansion may reach one state (up to names): the first
            first_by_state.setdefault(state_up_to_names(child.state), (child, edge))
        if not first_by_state:
            return
        energies: list[float | None] = [None] * len(first_by_state)
        reference = 0.0
        if self.core.value is not None:
            started = time.perf_counter()
            root = self.tree.root.state
            ask_root = self.settings.value_reference == "root" and self.root_energy is None
            values = await self.core.value.energies(
                root, [*([root] if ask_root else []), *(child.state for child, _ in first_by_state.values())])
            self.core.waits.value_s += time.perf_counter() - started
            if ask_root:
                self.root_energy, values = values[0], values[1:]
            energies = list(values)
            reference = self.root_energy or 0.0
        for (child, edge), energy in zip(first_by_state.values(), energies, strict=True):
            child.score = node_score(
                child.cum_logprob,
                child.depth,
                self.settings.alpha,
                None if energy is None else energy - reference,
                self.settings.value_weight,
                self.settings.value_ramp_depth,
            )
            edge.score, edge.energy = child.score, energy
            self.tree.add(child)

    # ----------------------------------------------------------------------------------------- result

    def _finish(self, reason: FailureReason | None, detail: str | None) -> SearchOutcome:
        self._drop_speculation()  # before the totals: answered asks ahead count their tokens
        ending = refused_ending(reason, detail, bool(self.core.proofs.verified), self.core.refusals)
        result = final_result(self.core, SearchMode.STEP, ending, Spent.of(self.core), nodes_expanded=self.expanded)
        return SearchOutcome(result, self.core.edges, self.speculated, self.speculation_used)


async def prove(
    theorem: Theorem,
    lean: LeanEnv,
    policy: Policy,
    settings: StepSettings,
    guard: TacticGuard,
    value: ValueFn | None = None,
) -> SearchOutcome:
    """Search one theorem on one Lean worker; never raises for domain failures (they are the result)."""
    return await StepSearch(theorem, lean, policy, settings, guard, value).run()

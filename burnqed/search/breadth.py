"""Breadth-first search, a trial mode (`search.mode = breadth`): the nodes of one theorem expanded in the order they
were made, shallowest first, each asked for tactics in the step format; a budget of node expansions (search.max_nodes).

    outcome = await prove_theorem(theorem, lean, policy, BREADTH.settings(Sections(search, policy)), guard)
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

from burnqed.lean.env import LeanEnv
from burnqed.lean.guard import TacticGuard
from burnqed.lean.start import start_theorem
from burnqed.policy.base import Policy, Sampling, ask
from burnqed.policy.candidates import Candidate, to_candidates
from burnqed.records.enums import DeclarationForm, SearchMode
from burnqed.records.replies import TacticKind, pretty_state
from burnqed.records.results import EdgeOutcome, FailureReason
from burnqed.records.theorem import Theorem
from burnqed.search.mode import Engine, Mode, Recorded, Sections, complete, sampling_from_config
from burnqed.search.rebuild import SharedWorker
from burnqed.search.skeleton import (
    EngineCore,
    Place,
    SearchOutcome,
    Spent,
    ask_within,
    final_result,
    run_search,
    tactic_row,
    verify_closing,
)
from burnqed.search.tree import Node, SearchTree
from burnqed.search.usage import CountingLean
from burnqed.search.value import ValueFn
from burnqed.text.prompt import PromptFormat, build_prompt


@dataclass(frozen=True, slots=True)
class BreadthSettings:
    fmt: PromptFormat = PromptFormat.PLAIN_TACTIC
    form: DeclarationForm = DeclarationForm.BINDER
    sampling: Sampling = field(default_factory=lambda: Sampling(n=8))
    max_nodes: int = 300
    max_depth: int = 50
    timeout_s: float = 300.0
    verify: bool = True
    stop_at_first: bool = True
    marks: tuple[int, ...] = ()
    attempt: int = 0


class BreadthSearch:
    """One theorem's breadth-first search; `run()` once. Every node scores 0: the frontier pops the oldest first."""

    def __init__(self, theorem: Theorem, lean: LeanEnv, policy: Policy, settings: BreadthSettings,
                 guard: TacticGuard) -> None:
        self.core = EngineCore.of(theorem, CountingLean(lean), policy, guard, settings.form, settings.marks)
        self.worker: SharedWorker[Node] = SharedWorker(self.core)
        self.settings = settings
        self.expanded = 0
        self.tree: SearchTree | None = None

    async def run(self) -> SearchOutcome:
        return await run_search(self._start, self._loop, self._finish)

    async def _start(self) -> None:
        started = time.perf_counter()
        try:
            state_id, goals = await start_theorem(self.core.lean, self.core.theorem)
        finally:
            self.core.waits.lean_s += time.perf_counter() - started
        self.tree = SearchTree(Node(0, None, 0, None, pretty_state(goals), goals, state_id, self.core.lean.generation))
        self.core.start_generation = self.tree.root.generation

    async def _loop(self) -> FailureReason | None:
        settings, tree = self.settings, self.tree
        assert tree is not None
        while True:
            self.core.meter.reach(self.expanded)
            stop = self.core.proofs.limit(settings.stop_at_first, self.core.meter.elapsed(), settings.timeout_s,
                                          self.expanded, settings.max_nodes, FailureReason.MAX_NODES)
            if stop is not None:
                return stop.reason
            batch = tree.pop(1, settings.max_depth)
            if not batch:
                return self.core.proofs.ending(FailureReason.EXHAUSTED)
            (node,) = batch
            prompt = build_prompt(settings.fmt, node.state, self.core.declaration)
            answer = await ask_within(self.core, settings.timeout_s,
                                      functools.partial(ask, self.core.policy, [prompt], settings.sampling, None),
                                      places=[Place(node.id, node.depth + 1, node.state)], new_id=tree.new_id)
            if answer is None:
                return self.core.proofs.ending(FailureReason.TIMEOUT)
            self.expanded += 1
            node.expanded = True
            (completions,) = answer.take_all()
            for candidate in to_candidates(settings.fmt, completions):
                if self.core.proofs.found() and settings.stop_at_first:
                    break
                await self._try(tree, node, candidate)

    async def _try(self, tree: SearchTree, node: Node, candidate: Candidate) -> None:
        result = await self.worker.apply_at(node, candidate.tactic)
        if result is None:
            return
        edge = tactic_row(tree.new_id(), node.id, node.depth + 1, node.state, candidate.tactic, result,
                          logprob=candidate.logprob, n_tokens=candidate.n_tokens)
        self.core.edges.append(edge)
        if result.kind is not TacticKind.SUCCESS or result.state_id is None:
            return
        if not result.goals:
            edge.outcome, edge.state_after = EdgeOutcome.CLOSED, ""
            tactics = [*node.path(), candidate.tactic]
            verdict = await verify_closing(
                self.core.lean, self.core.theorem, self.core.guard, tactics, result, compile=self.settings.verify,
                reclose=lambda: self.worker.apply_at(node, candidate.tactic), charge=self.worker.charge_lean,
                index_header=self.core.theorem.header)
            self.core.proofs.count(edge, verdict, tactics, self.expanded)
            return
        edge.state_after = pretty_state(result.goals)
        if tree.is_new_state(edge.state_after):
            tree.add(Node(edge.node_id, node, node.depth + 1, candidate.tactic, edge.state_after, result.goals,
                          result.state_id, self.core.lean.generation))

    def _finish(self, reason: FailureReason | None, detail: str | None) -> SearchOutcome:
        result = final_result(self.core, SearchMode.BREADTH, (reason, detail), Spent.of(self.core),
                              nodes_expanded=self.expanded)
        return SearchOutcome(result, self.core.edges)


def _settings(sections: Sections, budget: int, fmt: PromptFormat) -> BreadthSettings:
    search, policy = sections.search, sections.policy
    return complete(BreadthSettings, fmt=fmt, form=policy.declaration_form, sampling=sampling_from_config(policy, fmt),
                    max_nodes=budget, max_depth=search.max_depth, timeout_s=search.timeout_s,
                    verify=sections.verified, stop_at_first=search.stop_at_first, marks=sections.marks)


def _record(settings: BreadthSettings, common: dict[str, object], recorded: Recorded) -> dict[str, object]:
    return {**common, "num_candidates": settings.sampling.n, "max_new_tokens": settings.sampling.max_new_tokens}


def _engine(theorem: Theorem, lean: LeanEnv, policy: Policy, settings: BreadthSettings, guard: TacticGuard,
            value: ValueFn | None, planner: Policy | None) -> Engine:
    return BreadthSearch(theorem, lean, policy, settings, guard)


BREADTH = Mode(name=SearchMode.BREADTH, settings_type=BreadthSettings, unit="expansions", prompts_as=SearchMode.STEP,
               budget=lambda search: search.max_nodes, build=_settings, record=_record, engine=_engine)

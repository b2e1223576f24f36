"""Sketch search of one theorem (docs/search.md, "Sketch search"): a planner writes `have NAME : P := by sorry`
subgoals and the tactics that close the goal from them, Lean elaborates the sketch, each subgoal is searched from its
own goal (step or hybrid search, with the value model, under its share of the budget), and the assembled proof counts
only through the soundness path a whole proof takes.

    outcome = await prove_sketch(theorem, lean, policy, SketchSettings(max_nodes=32), guard, value=None,
                                 planner=None, cache=SubgoalCache())   # planner None: the policy plans too
    outcome.result.sketches      # every sketch: what Lean made of it, each subgoal's search, the assembled verdict

The budget is step mode's: `max_nodes` units for the whole theorem, a planner request counting one and every
expansion (step) or round (hybrid) of a subgoal search one; a subgoal's search may spend `sketch_subgoal_share` of it.
Before a subgoal is searched, a proof an earlier sketch of this theorem found under the same key is replayed (`kept`),
then at most `subgoal_cache_replays` of the subgoal cache's (`search.subgoal_cache`): either counts only when Lean
closes the subgoal with it. A request whose sketches all fail goes back to the planner with what failed
(`text.prompt.build_replan_prompt`), up to `sketch_rounds` times. Rows: each sketch is a row from the root (its
tactic the sketch, its state after the subgoals'), the subgoal searches' rows beneath it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from burnqed.errors import LeanError, LeanStartError, LeanStatesLostError
from burnqed.lean.declared_lemmas import FileLemma
from burnqed.lean.env import SketchEnv
from burnqed.lean.guard import TacticGuard, read_off_loop
from burnqed.lean.soundness import Verdict, check_lemmas, check_path
from burnqed.lean.start import MAX_SHARED_RESTARTS, start_goal, start_theorem
from burnqed.policy.base import Completion, Policy, ask, expansion_seeds
from burnqed.records.enums import SearchMode
from burnqed.records.replies import Goal, SketchResult, TacticKind, first_line, pretty_state
from burnqed.records.results import (
    Edge,
    EdgeOutcome,
    FailureReason,
    SketchAttempt,
    SketchOutcome,
    SubgoalAttempt,
    SubgoalSource,
)
from burnqed.records.theorem import Theorem
from burnqed.search.file_lemmas import Hole, Inner, lift_holes
from burnqed.search.goal_keys import closed_key, translate
from burnqed.search.hybrid import HybridSearch
from burnqed.search.hybrid_settings import HybridSettings
from burnqed.search.lemma_graph import Frame, GoalGraph, GoalNode, Tried
from burnqed.search.rebuild import MAX_RESTARTS, LeanGone
from burnqed.search.recursion import decompose
from burnqed.search.root import Root
from burnqed.search.skeleton import (
    EngineCore,
    Place,
    Proof,
    SearchOutcome,
    Spent,
    ask_within,
    final_result,
    run_search,
)
from burnqed.search.sketch_failures import cap, summary, to_show, why
from burnqed.search.sketch_settings import SketchSettings, subgoal_budget
from burnqed.search.step import StepSearch, StepSettings
from burnqed.search.subgoal_cache import SubgoalCache, SubgoalKey
from burnqed.search.subgoal_end import SubgoalEnd, share_meter
from burnqed.search.usage import CountingLean
from burnqed.search.value import ValueFn
from burnqed.search.whole import WholeAttempt, check_whole
from burnqed.text.completion import extract_completion, normalize_tactic, split_proof
from burnqed.text.prompt import build_replan_prompt, build_sketch_prompt
from burnqed.text.sketch import SORRY_OUTSIDE_HOLE, Sketch, read_sketch
from burnqed.trajectory.labels import label_edges

__all__ = ["SketchSearch", "prove_sketch"]


# ---------------------------------------------------------------------------------------------- the theorem


class SketchSearch:
    """One theorem's sketch search; `run()` once."""

    def __init__(self, theorem: Theorem, lean: SketchEnv, policy: Policy, settings: SketchSettings,
                 guard: TacticGuard, value: ValueFn | None = None, *, planner: Policy | None = None,
                 cache: SubgoalCache | None = None) -> None:
        self.core = EngineCore.of(theorem, CountingLean(lean), policy, guard, settings.form, settings.marks,
                                  value=value)  # proofs: assembled; waits: its subgoal searches' included
        self.drafts = lean  # elaborates the sketches, each a request counted on the core's Lean
        # own_restarts: worker replacements a sketch's elaboration caused
        self.planner = planner or policy
        self.settings = settings
        self.cache = cache if cache is not None else (settings.cache if settings.cache is not None else SubgoalCache())
        self.next_id = 1
        self.spent = 0  # units: planner requests + subgoal expansions / rounds
        self.sketches: list[Tried] = []
        self.kept: dict[str, tuple[str, list[str]]] = {}  # subgoal key digest → (key text, a proof Lean accepted)
        self.root_id = 0
        self.root_state = ""
        self.gen_ms = 0.0
        self.sampled = 0  # sketches asked for (the planner's sample numbers)
        self.leaves: list[int] = []  # the counted proof's subgoal closing rows
        self.graph = GoalGraph(theorem.header, settings.sketch_depth)  # recorded when sketch_depth is above 1
        self.frame: Frame | None = None  # the theorem's goal, where its own sketches' holes are proved
        # by id of a hole's record: its goal, and the holes a library entry closed by its closed key (`file_lemmas`)
        self.hole_goals: dict[int, Goal] = {}
        self.lifted: set[int] = set()
        self.planned: dict[int, tuple[Sketch, Sequence[SubgoalAttempt]]] = {}  # a hole's sketch when planned again

    async def run(self) -> SearchOutcome:
        if self.core.theorem.statement is None:
            return self._finish(FailureReason.START_ERROR, "sketch mode needs the theorem's statement (it prompts "
                                "with it and compiles the assembled proof); this theorem names only a constant to copy")
        return await run_search(self._start, self._loop, self._finish)

    async def _start(self) -> None:
        started = time.perf_counter()
        try:
            self.root_id, goals = await start_theorem(self.core.lean, self.core.theorem)
            self.core.start_generation = self.core.lean.generation
            self.root_state = pretty_state(goals)
            if goals:
                node = self.graph.root(goals[0])
                self.frame = Frame(node, (node,), self.core.theorem, self._root, self.core.theorem.name)
        finally:
            self.core.waits.lean_s += time.perf_counter() - started

    def _book(self, units: int) -> None:
        self.spent = units
        self.core.meter.reach(self.spent)

    def out_of(self) -> FailureReason | None:
        """Why no more can be spent: the time, or the budget."""
        if self.core.meter.elapsed() >= self.settings.timeout_s:
            return FailureReason.TIMEOUT
        if self.spent >= self.settings.max_nodes:
            return FailureReason.MAX_NODES
        return None

    async def _loop(self) -> FailureReason | None:
        settings = self.settings
        declaration = self.core.declaration or ""
        prompt = build_sketch_prompt(settings.fmt, declaration, self.core.theorem.header)
        for round_ in range(settings.sketch_rounds + 1):
            stop = self.out_of()
            if stop is not None:
                return self.core.proofs.ending(stop)
            completions = await self.plan(prompt)
            if completions is None:
                return self.core.proofs.ending(FailureReason.TIMEOUT)
            if not completions:
                return self.core.proofs.ending(
                    FailureReason.PROMPT_REJECTED if self.core.refusals else FailureReason.EXHAUSTED)
            tried = await self._try_all(completions, round_)
            if self.core.proofs.verified:
                return None
            stop = self.out_of()
            if stop is not None:
                return self.core.proofs.ending(stop)
            failed = to_show(tried)
            if failed is None:
                break
            prompt = build_replan_prompt(settings.fmt, declaration, self.core.theorem.header, failed.record.body,
                                         failed.failures)
        return self.core.proofs.ending(FailureReason.EXHAUSTED)

    async def plan(self, prompt: str) -> list[Completion] | None:
        """One planner request (one unit); None when the time ran out waiting, [] when the prompt was refused."""
        settings = self.settings
        seeds = expansion_seeds(settings.seed, self.core.theorem.name, [0], settings.sampling.n,
                                first_sample=self.sampled, attempt=settings.attempt)
        answer = await ask_within(self.core, settings.timeout_s,
                                  lambda: ask(self.planner, [prompt], settings.sampling, seeds),
                                  places=[Place(0, 1, self.root_state)], new_id=self.new_id)
        if answer is None:
            return None
        (completions,) = answer.take_all()
        self.sampled += settings.sampling.n
        self._book(self.spent + 1)
        if answer.refusal() is not None:
            return []
        self.gen_ms = answer.seconds * 1000 / max(len(completions), 1)  # each sketch's share of the request's time
        return completions

    def new_id(self) -> int:
        node_id = self.next_id
        self.next_id += 1
        return node_id

    async def _try_all(self, completions: list[Completion], round_: int) -> list[Tried]:
        """Each distinct sketch of a request (normalised; a re-plan may write one again: it is tried again, its proved
        subgoals kept), in sample order, until one verified (`stop_at_first`) or nothing is left to spend; the ones
        tried."""
        tried: list[Tried] = []
        seen: set[str] = set()
        for completion in completions:
            if (self.core.proofs.verified and self.settings.stop_at_first) or self.out_of() is not None:
                break
            over = self.core.guard.over_cap(completion.text)  # read by no reader: its key is its length
            key = over or normalize_tactic(extract_completion(self.settings.fmt, completion.text))
            if key in seen:  # its tokens count (the request's); it adds no row
                continue
            seen.add(key)
            tried.append(await self._try(completion, round_))
        return tried

    async def _try(self, completion: Completion, round_: int) -> Tried:
        """One sketch of the theorem (`_try_one`), recorded in the lemma graph too when the search is recursive."""
        graph_sketch = self.graph.sketch(0, "", SketchOutcome.REFUSED) if self.recursive else None
        tried = await self._try_one(completion, round_)
        if graph_sketch is not None:
            record = tried.record
            graph_sketch.body, graph_sketch.outcome, graph_sketch.detail = record.body, record.outcome, record.detail
            graph_sketch.closed = tried.sketch is not None and len(tried.leaves) == len(tried.sketch.holes)
        return tried

    async def _try_one(self, completion: Completion, round_: int) -> Tried:
        """Read, guard, elaborate one sketch, then search its subgoals and check the assembled proof; a completion
        over the cap (`TacticGuard.over_cap`) is refused unread."""
        over = self.core.guard.over_cap(completion.text)
        text = "" if over is not None else extract_completion(self.settings.fmt, completion.text)
        row = Edge(node_id=self.new_id(), parent_id=0, depth=1, state_before=self.root_state, tactic=text,
                   state_after=None, outcome=EdgeOutcome.REFUSED, error=None, logprob=completion.logprob,
                   n_tokens=completion.n_tokens, score=None, energy=None, lean_ms=0.0, gen_ms=self.gen_ms,
                   timestamp_ms=int(time.time() * 1000))
        self.core.edges.append(row)
        record = SketchAttempt(round=round_, body=text, outcome=SketchOutcome.REFUSED, tokens=completion.n_tokens)
        tried = Tried(record, row)
        self.sketches.append(tried)
        frame = self.frame
        checked = await self.read(text, over, tried, frame if self.recursive and frame is not None else None)
        if checked is None:
            return tried
        tried.sketch = checked
        record.body = checked.body
        row.tactic = checked.body
        elaborated = await self._elaborate(checked)
        row.lean_ms = elaborated.elapsed_ms
        if elaborated.kind is not TacticKind.SUCCESS or not elaborated.subgoals:
            message = "\n".join(elaborated.errors) or elaborated.kind.value
            record.outcome, record.detail = SketchOutcome.ERROR, message
            row.outcome = EdgeOutcome.TIMEOUT if elaborated.kind is TacticKind.TIMEOUT else EdgeOutcome.ERROR
            row.error = first_line(message)
            tried.failures.append(cap(f"Lean did not accept the sketch: {message}"))
            if elaborated.states_lost:
                self.core.own_restarts += 1
                if self.core.own_restarts > MAX_RESTARTS:
                    raise LeanGone(
                        f"this theorem's sketches crashed or hung the Lean worker {self.core.own_restarts} times")
            return tried
        record.outcome = SketchOutcome.ELABORATED
        row.outcome = EdgeOutcome.OK
        row.state_after = pretty_state([subgoal.goal for subgoal in elaborated.subgoals])
        assert frame is not None  # the theorem started
        await self.subgoals(tried, checked, elaborated, frame)
        if len(tried.leaves) == len(checked.holes):
            await self._count(tried, checked)
        return tried

    @property
    def recursive(self) -> bool:
        """Holes may be planned again (search.sketch_depth above 1): the lemma graph refuses cycles and is recorded."""
        return self.settings.sketch_depth > 1

    async def read(self, text: str, over: str | None, tried: Tried, frame: Frame | None) -> Sketch | None:
        """The sketch in `text`, or None with `tried` saying why not (over the cap, unreadable, refused by the guard,
        or, given a `frame`, a hole that restates the goal it decomposes or an ancestor: refused before Lean)."""
        record, row = tried.record, tried.row
        reason: str | None = None
        if over is not None:
            reason = f"refused by the tactic guard: the completion has {over}"
        else:
            read = await read_off_loop(text, lambda: read_sketch(text))
            if isinstance(read, str) and read != SORRY_OUTSIDE_HOLE:  # no sketch at all (a sorry left is smuggling)
                record.outcome, record.detail, row.error = SketchOutcome.UNREADABLE, read, first_line(read)
                tried.failures.append(cap(f"no sketch could be read: {read}"))
                return None
            checked = await read_off_loop(text, lambda: self.core.guard.sketch_refusal(text))
            if isinstance(checked, SketchResult):
                reason = checked.errors[0] if checked.errors else "refused by the tactic guard"
            elif frame is not None:
                reason = self.graph.restated(checked, frame)
            if reason is None:
                assert isinstance(checked, Sketch)
                return checked
        record.detail, row.error = reason, first_line(reason)
        tried.failures.append(cap(f"the sketch was refused before Lean: {reason}"))
        return None

    async def _elaborate(self, sketch: Sketch) -> SketchResult:
        """`goal.tactic {draft}` on the theorem's start (docs/lean.md, "Sketches": every supported version has it)."""
        started = time.perf_counter()
        try:
            for _ in range(MAX_SHARED_RESTARTS):
                try:
                    return await self.core.lean.counted(self.drafts.draft_sketch(await self._root(), sketch))
                except LeanStatesLostError:  # a neighbour's tactic replaced the shared worker meanwhile
                    continue
            raise LeanGone(f"the Lean worker was replaced {MAX_SHARED_RESTARTS} times while elaborating a sketch")
        finally:
            self.core.waits.lean_s += time.perf_counter() - started

    async def _root(self) -> int:
        """The theorem's start in the worker's current process (started again after the worker was replaced)."""
        if self.core.lean.generation != self.core.start_generation:
            try:
                self.root_id = await start_goal(self.core.lean, self.core.theorem)
            except LeanStartError:
                raise
            except LeanError as exc:
                raise LeanGone(f"cannot restart the theorem on a new worker: {first_line(str(exc))}") from exc
            self.core.start_generation = self.core.lean.generation
        return self.root_id

    async def subgoals(self, tried: Tried, sketch: Sketch, elaborated: SketchResult, frame: Frame) -> None:
        """Prove each subgoal in order (kept, cached, else searched, else planned again); the first that is not
        proved ends the sketch's subgoals (the rest are recorded as not searched). `frame`: the goal the sketch
        decomposes (the theorem's, or a lemma's)."""
        assert elaborated.state_id is not None
        generation = self.core.lean.generation
        goals = [subgoal.goal for subgoal in sorted(elaborated.subgoals, key=lambda s: s.goal_id)]
        sketch_index = len(self.sketches) - 1 if frame.node.id == 0 else len(self.graph.sketches) - 1
        holes = self.graph.sketches[-1].holes if self.recursive else []
        for subgoal in elaborated.subgoals:
            siblings = tuple(goal for index, goal in enumerate(goals) if index != subgoal.goal_id)
            attempt = SubgoalAttempt(name=subgoal.name, statement=subgoal.statement, goal=subgoal.goal.pretty(),
                                     proved=False)
            tried.record.subgoals.append(attempt)
            self.hole_goals[id(attempt)] = subgoal.goal
            if len(tried.leaves) < len(tried.record.subgoals) - 1:  # an earlier subgoal was not proved
                attempt.detail = "not searched: an earlier subgoal of the sketch was not proved"
                continue
            node = self.graph.place(subgoal.goal, frame.level)
            holes.append(node.id)
            root = Root(subgoal.goal, subgoal.state_id, generation, subgoal.goal_id, siblings,
                        functools.partial(self._redraft, sketch, subgoal.goal_id, frame.start),
                        f"{frame.seed_key}\x1fsketch {sketch_index}\x1f{subgoal.name}")
            cycle = self.graph.restates(subgoal.name, subgoal.goal, frame) if self.recursive else None
            proved = await self._prove(tried, root, node.exact, attempt, frame, node, cycle)
            if not proved:
                failure = attempt.detail or "not proved"
                tried.failures.append(cap(f"the subgoal {subgoal.name} : {subgoal.statement} was not proved: "
                                           f"{failure}"))

    async def _redraft(self, sketch: Sketch, goal_id: int, start: Callable[[], Awaitable[int]]) -> int:
        """The sketch elaborated again on a replaced worker: the theorem (or lemma) started, drafted; the new state's
        id."""
        try:
            again = await self.core.lean.counted(self.drafts.draft_sketch(await start(), sketch))
        except LeanStartError:
            raise
        except LeanError as exc:
            raise LeanGone(f"cannot elaborate the sketch again on a new worker: {first_line(str(exc))}") from exc
        if again.kind is not TacticKind.SUCCESS or again.state_id is None or goal_id >= len(again.subgoals):
            raise LeanGone("the sketch did not elaborate again on a new worker")
        return again.state_id

    async def _prove(self, tried: Tried, root: Root, key: SubgoalKey, attempt: SubgoalAttempt, frame: Frame,
                     node: GoalNode, cycle: str | None = None) -> bool:
        """Kept, cached, shared, from the lemma source, else searched, else planned again (`search.sketch_depth`):
        True when Lean closed the subgoal (its closing row in `tried.leaves`). A hole that restates its goal or an
        ancestor (`cycle`, the reason) takes a proof found already, and is neither searched nor planned."""
        if self.settings.share_goals and await self._known(tried, root, key, attempt, node):
            return True
        if await self._from_lemmas(tried, root, key, attempt, node):
            return True
        if cycle is not None:
            attempt.detail = f"not searched: {cycle}"
            return False
        if await self._search_hole(tried, root, key, attempt, node):
            return True
        if not self.recursive or frame.level >= self.settings.sketch_depth:
            return False
        return await decompose(self, tried, root, attempt, frame, node)

    async def _known(self, tried: Tried, root: Root, key: SubgoalKey, attempt: SubgoalAttempt,
                     node: GoalNode) -> bool:
        """A proof found already: kept (this theorem, the same key), the subgoal cache's, or (a recursive search) a
        goal of the graph with the same closed key, its proof renamed; each replayed on the subgoal in Lean."""
        known = self.kept.get(key.digest)
        if known is not None and known[0] == key.text:
            end = await self.replay(root, known[1])
            self.adopt(tried, end)
            if end.tactics is not None:
                self.graph.shared += 1
                return await self.proved(tried, attempt, end, SubgoalSource.KEPT, key, node)
        # A persisted cache reads and writes storage: off the event loop, as every other theorem's search runs on it.
        for tactics in await asyncio.to_thread(self.cache.lookup, key, self.settings.subgoal_cache_replays):
            end = await self.replay(root, tactics)
            self.adopt(tried, end)
            if end.tactics is not None:
                self.cache.record_hit()
                return await self.proved(tried, attempt, end, SubgoalSource.CACHE, key, node)
            self.cache.record_rejected(key, tactics)
        alike = self.graph.alike(node) if self.recursive else None
        renamed = translate(alike.proof, alike.goal, node.goal) if alike is not None and alike.proof else None
        if alike is not None and renamed is not None:
            end = await self.replay(root, renamed)
            self.adopt(tried, end)
            if end.tactics is not None:
                self.graph.shared += 1
                node.close(end.tactics, SubgoalSource.SHARED, by=alike.id)
                return await self.proved(tried, attempt, end, SubgoalSource.SHARED, key, node)
        return False

    async def _search_hole(self, tried: Tried, root: Root, key: SubgoalKey, attempt: SubgoalAttempt,
                           node: GoalNode) -> bool:
        """The subgoal's own search, under its share of what is left."""
        units = min(self.settings.share, self.settings.max_nodes - self.spent)
        if units <= 0 or self.core.meter.elapsed() >= self.settings.timeout_s:
            attempt.detail = "not searched: the theorem's budget or time was spent"
            return False
        end = await self._search(root, units)
        attempt.spent = end.spent
        said = next((edge.error for edge in end.edges if edge.parent_id == 0 and edge.outcome is EdgeOutcome.ERROR
                     and edge.error), None)
        self.adopt(tried, end)
        if end.tactics is not None:
            return await self.proved(tried, attempt, end, SubgoalSource.SEARCH, key, node)
        attempt.detail = why(end.reason, units, self.settings.subgoal, said)
        return False

    async def _from_lemmas(self, tried: Tried, root: Root, key: SubgoalKey, attempt: SubgoalAttempt,
                           node: GoalNode) -> bool:
        """The lemma source's proofs of the subgoal (`SketchSettings.lemmas`, by its exact and closed keys), each
        replayed on it in Lean (its Lean calls counted, no unit): True when one closed it (source `library`)."""
        lemmas = self.settings.lemmas
        if lemmas is None or root.goal is None:
            return False
        closed = closed_key(root.goal, self.core.theorem.header)
        found = await asyncio.to_thread(lemmas.lemma_candidates, key, closed, root.goal,
                                        self.settings.subgoal_cache_replays)
        for candidate in found[: self.settings.subgoal_cache_replays]:
            end = await self.replay(root, list(candidate.tactics))
            self.adopt(tried, end)
            await asyncio.to_thread(lemmas.lemma_outcome, candidate, key, end.tactics is not None)
            if end.tactics is not None:
                attempt.lemma = candidate.origin  # what the counted proof lists (`TheoremResult.lemmas_used`)
                if candidate.closed:
                    self.lifted.add(id(attempt))
                node.close(end.tactics, SubgoalSource.LIBRARY, origin=candidate.origin)
                return await self.proved(tried, attempt, end, SubgoalSource.LIBRARY, key, node)
        return False

    async def proved(self, tried: Tried, attempt: SubgoalAttempt, end: SubgoalEnd, source: SubgoalSource,
                     key: SubgoalKey, node: GoalNode) -> bool:
        """Lean closed the subgoal by `end`: its proof recorded, kept for the theorem's later places and cached."""
        assert end.tactics is not None and end.leaf is not None
        attempt.proved, attempt.tactics, attempt.source = True, end.tactics, source
        tried.leaves.append(end.leaf)
        node.close(end.tactics, source)
        if self.settings.share_goals:
            self.kept.setdefault(key.digest, (key.text, end.tactics))
            await asyncio.to_thread(self.cache.store, key, end.tactics, self.core.theorem.name)
        return True

    async def replay(self, root: Root, tactics: list[str]) -> SubgoalEnd:
        """A proof found elsewhere, applied to this subgoal (no budget: nothing is sampled)."""
        core = self.core
        search = StepSearch(core.theorem, core.lean, core.policy, StepSettings(max_nodes=0), core.guard, None,
                            dataclasses.replace(root, meter=share_meter(core.meter)))
        started = time.perf_counter()
        try:
            reason = await search.replay(tactics)
            return SubgoalEnd.of(search.core.proofs, search.core.edges, search.expanded, reason)
        finally:
            self.core.waits.lean_s += time.perf_counter() - started

    async def _search(self, root: Root, units: int) -> SubgoalEnd:
        """The subgoal's own search, `units` of budget, the theorem's time left."""
        base = self.spent
        left = max(self.settings.timeout_s - self.core.meter.elapsed(), 0.0)
        root = dataclasses.replace(root, book=lambda used: self._book(base + used), meter=share_meter(self.core.meter))
        subgoal = subgoal_budget(self.settings.subgoal, units)
        run: dict[str, Any] = {"timeout_s": left, "stop_at_first": True, "marks": (), "attempt": self.settings.attempt}
        core = self.core
        search: StepSearch | HybridSearch
        if isinstance(subgoal, HybridSettings):
            hybrid = dataclasses.replace(subgoal, journal=None, **run)
            search = HybridSearch(core.theorem, core.lean, core.policy, hybrid, core.guard, core.value, root)
        else:
            search = StepSearch(core.theorem, core.lean, core.policy, dataclasses.replace(subgoal, **run), core.guard,
                                core.value, root)
        try:
            reason = await search.search()
            spent = search.rounds if isinstance(search, HybridSearch) else search.expanded
            return SubgoalEnd.of(search.core.proofs, search.core.edges, spent, reason)
        finally:
            self.core.waits.add(search.core.waits)

    def adopt(self, tried: Tried, end: SubgoalEnd) -> None:
        """Renumber a subgoal search's rows into the theorem's tree under the sketch's row (its root, local id 0);
        the closing row's id follows."""
        offset = self.next_id - 1
        parent = tried.row
        for edge in end.edges:
            edge.node_id += offset
            edge.parent_id = parent.node_id if edge.parent_id == 0 else edge.parent_id + offset
            edge.depth += parent.depth
        if end.edges:
            self.next_id = max(edge.node_id for edge in end.edges) + 1
        if end.leaf is not None:
            end.leaf += offset
        self.core.edges.extend(end.edges)

    async def _count(self, tried: Tried, sketch: Sketch) -> None:
        """The assembled proof through the soundness path: guard on every tactic, compile, axioms, kernel recheck. A
        recursive search or one with a lemma source first tries its file with the shared and library-by-closed-key
        holes as lemmas (`file_lemmas.lift_holes`), and the proof with every hole inline when that does not count."""
        subgoals = tried.record.subgoals
        proofs = [list(attempt.tactics or []) for attempt in subgoals]
        lifted, lemmas = proofs, tuple[FileLemma, ...]()
        if self.recursive or self.settings.lemmas is not None:
            lifted, lemmas = lift_holes(self._holes(subgoals), self.core.theorem.header)
        verdict, tactics = await self._assembled(sketch, lifted, lemmas) if lemmas else (None, [])
        if verdict is None or not verdict.verified:
            verdict, tactics = await self._assembled(sketch, proofs, ())
        if verdict.verified:
            tried.record.verified = True
            self.core.proofs.verified.append(Proof(tried.leaves[0], verdict.proof, tactics, self.spent))
            if not self.leaves:
                self.leaves = list(tried.leaves)
            return
        self.core.proofs.rejected += 1
        tried.row.error = f"not counted: {first_line(verdict.reason)}"
        tried.failures.append(cap(f"every subgoal was proved, but the assembled proof does not count: "
                                   f"{verdict.reason}"))

    def planned_into(self, attempt: SubgoalAttempt, sketch: Sketch, holes: Sequence[SubgoalAttempt]) -> None:
        """The hole of `attempt` was closed by `sketch`, planned again, whose holes are `holes`."""
        self.planned[id(attempt)] = (sketch, holes)

    def _holes(self, subgoals: Sequence[SubgoalAttempt]) -> list[Hole]:
        """The holes of a verified sketch as `file_lemmas` reads them, each planned again one with its sketch's."""
        holes = []
        for attempt in subgoals:
            planned = self.planned.get(id(attempt))
            inner = Inner(planned[0], tuple(self._holes(planned[1]))) if planned is not None else None
            holes.append(Hole(self.hole_goals.get(id(attempt)), attempt.tactics or [], id(attempt) in self.lifted,
                              inner))
        return holes

    async def _assembled(self, sketch: Sketch, proofs: list[list[str]],
                         lemmas: tuple[FileLemma, ...]) -> tuple[Verdict, list[str]]:
        """The verdict on the sketch filled with `proofs` in a file declaring `lemmas`, and its top-level tactics."""
        body = sketch.filled(proofs)
        tactics = split_proof(body, split_have=False)
        allowed = check_path(tactics, self.core.guard)
        if allowed.ok and lemmas:
            allowed = check_lemmas(lemmas, self.core.theorem, self.core.guard)
        attempt = WholeAttempt(body, tactics, self.core.theorem, None if allowed.ok else allowed.reason,
                               lemmas=lemmas)
        started = time.perf_counter()
        verdict = await check_whole(self.core.lean, self.core.theorem, attempt)
        self.core.waits.lean_s += time.perf_counter() - started
        return verdict, tactics

    def _finish(self, reason: FailureReason | None, detail: str | None) -> SearchOutcome:
        if reason is FailureReason.PROMPT_REJECTED and self.core.refusals:
            detail = f"the planner refused the sketch prompt: {first_line(self.core.refusals[-1])}"
        elif reason is not None and detail is None and self.sketches:
            detail = summary(self.sketches)
        result = final_result(self.core, SearchMode.SKETCH, (reason, detail), Spent.of(self.core),
                              nodes_expanded=self.spent)
        if result.proved:  # every subgoal's closing row of the counted proof is a leaf of it
            label_edges(self.core.edges, self.leaves, True)
        result.sketches = [tried.record for tried in self.sketches]
        if self.recursive and self.graph.goals:
            result.lemma_graph = self.graph.record(result.proved)
        return SearchOutcome(result, self.core.edges)


async def prove_sketch(theorem: Theorem, lean: SketchEnv, policy: Policy, settings: SketchSettings,
                       guard: TacticGuard, value: ValueFn | None = None, *, planner: Policy | None = None,
                       cache: SubgoalCache | None = None) -> SearchOutcome:
    """Search one theorem in sketch mode; never raises for domain failures (they are the result). `planner` writes the
    sketches (None: the policy itself); `cache` is the run's subgoal cache (None: `settings.cache`, else this
    search's own)."""
    return await SketchSearch(theorem, lean, policy, settings, guard, value, planner=planner, cache=cache).run()

"""A hole planned again (docs/search.md, "Recursive sketches"): when a hole's own search fails and its level is
below `search.sketch_depth`, the hole becomes a lemma of its own (`text.sketch.subgoal_declaration`: its hypotheses
as binders, its target after the colon), the planner is asked for sketches of it (one request, one unit), each is
read and guarded as the theorem's are, refused before Lean when a hole restates the lemma or an ancestor
(`GoalGraph.restated`), drafted on the lemma's start, and its holes proved as the theorem's are (kept, cached,
shared, from the lemma source, searched, planned again one level deeper). The first sketch whose holes are all proved
closes the hole: its filled body (`Sketch.filled`) is replayed on the hole in Lean, and that replay is the hole's
proof, so the assembled proof holds the lemma's proof in place of its `sorry`.

    proved = await decompose(search, tried, root, attempt, frame, node)   # SketchSearch._prove, last resort
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

from burnqed.errors import LeanError, LeanStartError, LeanStatesLostError
from burnqed.lean.env import SketchEnv
from burnqed.lean.start import start_goal
from burnqed.policy.base import Completion
from burnqed.records.replies import SketchResult, TacticKind, first_line, pretty_state
from burnqed.records.results import Edge, EdgeOutcome, SketchAttempt, SketchOutcome, SubgoalAttempt, SubgoalSource
from burnqed.records.theorem import Theorem
from burnqed.search.lemma_graph import Frame, GoalGraph, GoalNode, Tried
from burnqed.search.root import Root
from burnqed.search.skeleton import EngineCore
from burnqed.search.subgoal_cache import SubgoalKey
from burnqed.text.completion import extract_completion, normalize_tactic, split_proof
from burnqed.text.prompt import PromptFormat, build_sketch_prompt
from burnqed.text.sketch import Sketch, Unrenderable, subgoal_declaration, subgoal_name

__all__ = ["Decomposing", "decompose", "lemma_of"]


class _Settings(Protocol):
    @property
    def fmt(self) -> PromptFormat: ...

    @property
    def form(self) -> Any: ...


class Decomposing(Protocol):
    """What `decompose` uses of a sketch search (`search.sketching.SketchSearch`, which calls it)."""

    @property
    def settings(self) -> _Settings: ...

    core: EngineCore[Any]
    drafts: SketchEnv  # elaborates sketches; each request counted on core's Lean (`CountingLean.counted`)
    graph: GoalGraph
    gen_ms: float

    def out_of(self) -> Any: ...

    async def plan(self, prompt: str) -> list[Completion] | None: ...

    def new_id(self) -> int: ...

    async def read(self, text: str, over: str | None, tried: Tried, frame: Frame | None) -> Sketch | None: ...

    async def subgoals(self, tried: Tried, sketch: Sketch, elaborated: SketchResult, frame: Frame) -> None: ...

    async def replay(self, root: Root, tactics: list[str]) -> Any: ...

    def adopt(self, tried: Tried, end: Any) -> None: ...

    def planned_into(self, attempt: SubgoalAttempt, sketch: Sketch, holes: Sequence[SubgoalAttempt]) -> None: ...

    async def proved(self, tried: Tried, attempt: SubgoalAttempt, end: Any, source: SubgoalSource, key: SubgoalKey,
                     node: GoalNode) -> bool: ...


def lemma_of(theorem: Theorem, name: str, root: Root) -> Theorem | str:
    """The hole `name` of `theorem` whose goal `root` starts from, as a theorem of its own under `theorem`'s header;
    why not when Lean's goal cannot be written as a declaration (`subgoal_declaration`)."""
    assert root.goal is not None
    lemma = subgoal_name(theorem.name, name)
    try:
        declaration = subgoal_declaration(lemma, root.goal)
    except Unrenderable as exc:
        return str(exc)
    return Theorem(name=lemma, signature=declaration[len(f"theorem {lemma}") :].strip(), header=theorem.header)


async def decompose(search: Decomposing, tried: Tried, root: Root, attempt: SubgoalAttempt, frame: Frame,
                    node: GoalNode) -> bool:
    """Plan the hole of `attempt` again (see the module docstring): True when Lean closed it with a sketch's filled
    body; else False, `attempt.detail` saying what was tried."""
    if search.out_of() is not None:
        return False
    lemma = lemma_of(frame.theorem, attempt.name, root)
    if isinstance(lemma, str):
        attempt.detail = f"{attempt.detail}; not planned again: {lemma}"
        return False
    declaration = lemma.declaration(search.settings.form) or ""
    completions = await search.plan(build_sketch_prompt(search.settings.fmt, declaration, lemma.header))
    if not completions:
        attempt.detail = f"{attempt.detail}; planned again: the planner gave no sketch"
        return False
    try:
        start = await start_goal(search.core.lean, lemma)
    except LeanStartError:
        raise
    except LeanError as exc:
        attempt.detail = f"{attempt.detail}; planned again: Lean did not start the lemma: {first_line(str(exc))}"
        return False
    below = Frame(node, (*frame.ancestors, node), lemma, lambda: start_goal(search.core.lean, lemma),
                  f"{frame.seed_key}\x1flemma {node.id}")
    seen: set[str] = set()
    tried_here = 0
    for completion in completions:
        if search.out_of() is not None:
            break
        key = normalize_tactic(extract_completion(search.settings.fmt, completion.text))
        if key in seen:
            continue
        seen.add(key)
        tried_here += 1
        if await _one(search, tried, root, attempt, below, start, completion):
            return True
    attempt.detail = f"{attempt.detail}; planned again: {tried_here} sketch(es) of it, none closed it"
    return False


async def _one(search: Decomposing, tried: Tried, root: Root, attempt: SubgoalAttempt, frame: Frame,
               start: int, completion: Completion) -> bool:
    """One sketch of the lemma: read, guarded, checked for a cycle, drafted on the lemma's start (`start`), its holes
    proved; when all are, its filled body replayed on the hole. Its row hangs under the sketch whose hole it is."""
    over = search.core.guard.over_cap(completion.text)
    text = "" if over is not None else extract_completion(search.settings.fmt, completion.text)
    row = Edge(node_id=search.new_id(), parent_id=tried.row.node_id, depth=tried.row.depth + 1,
               state_before=frame.node.goal.pretty(), tactic=text, state_after=None, outcome=EdgeOutcome.REFUSED,
               error=None, logprob=completion.logprob, n_tokens=completion.n_tokens, score=None, energy=None,
               lean_ms=0.0, gen_ms=search.gen_ms, timestamp_ms=int(time.time() * 1000))
    search.core.edges.append(row)
    here = Tried(SketchAttempt(round=0, body=text, outcome=SketchOutcome.REFUSED, tokens=completion.n_tokens), row)
    graph_sketch = search.graph.sketch(frame.node.id, text, SketchOutcome.REFUSED)
    checked = await search.read(text, over, here, frame)
    if checked is None:
        graph_sketch.detail = here.record.detail
        return False
    graph_sketch.body = row.tactic = checked.body
    started = time.perf_counter()
    try:
        elaborated = await search.core.lean.counted(search.drafts.draft_sketch(start, checked))
    except LeanStatesLostError:  # a neighbour's tactic replaced the shared worker: the lemma started again there
        elaborated = await search.core.lean.counted(search.drafts.draft_sketch(await frame.start(), checked))
    finally:
        search.core.waits.lean_s += time.perf_counter() - started
    row.lean_ms = elaborated.elapsed_ms
    if elaborated.kind is not TacticKind.SUCCESS or not elaborated.subgoals:
        message = "\n".join(elaborated.errors) or elaborated.kind.value
        graph_sketch.outcome, graph_sketch.detail = SketchOutcome.ERROR, message
        row.outcome, row.error = EdgeOutcome.ERROR, first_line(message)
        return False
    graph_sketch.outcome, row.outcome = SketchOutcome.ELABORATED, EdgeOutcome.OK
    row.state_after = pretty_state([subgoal.goal for subgoal in elaborated.subgoals])
    await search.subgoals(here, checked, elaborated, frame)
    if len(here.leaves) != len(checked.holes):
        return False
    graph_sketch.closed = True
    filled = split_proof(checked.filled([sub.tactics for sub in here.record.subgoals]), split_have=False)
    end = await search.replay(root, filled)
    search.adopt(tried, end)
    if end.tactics is None:
        return False
    frame.node.close(end.tactics, SubgoalSource.SKETCH, by=graph_sketch.id)
    search.planned_into(attempt, checked, here.record.subgoals)
    return await search.proved(tried, attempt, end, SubgoalSource.SKETCH, frame.node.exact, frame.node)

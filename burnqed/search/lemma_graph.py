"""A theorem's AND-OR graph in recursive sketch search (docs/search.md, "Recursive sketches"): a goal is an OR node
(the theorem, or a hole of a sketch), a sketch an AND node whose holes are its new goals; one node per exact key
however many places it appears, each also known by its closed key (`search.goal_keys`).

    graph = GoalGraph(header, depth=3)
    root = graph.root(goal)                          # the theorem's goal: node 0, level 0
    node = graph.place(subgoal.goal, level=1)        # a hole: a new node, or one more place of a known one
    graph.restated(sketch, frame)                    # why a sketch's hole restates its goal or an ancestor, or None
    graph.alike(node)                                # a proved node of the same closed key (its proof, renamed)
    result.lemma_graph = graph.record(proved)        # the graph as the result keeps it

The graph decides nothing Lean must: it refuses a cycle before Lean (a hole whose closed key is the goal's it
decomposes or an ancestor's: the planner restating its grandparent loops until the budget is spent) and names
candidates (a proof found at another place); every candidate is replayed in Lean where it is used.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from burnqed.records.replies import Goal
from burnqed.records.results import (
    Edge,
    GraphGoal,
    GraphSketch,
    LemmaGraph,
    SketchAttempt,
    SketchOutcome,
    SubgoalSource,
)
from burnqed.records.theorem import Theorem
from burnqed.search.goal_keys import closed_key, closed_key_of
from burnqed.search.subgoal_cache import SubgoalKey, subgoal_key
from burnqed.text.sketch import Sketch

__all__ = ["Frame", "GoalGraph", "GoalNode", "Tried"]

SHOWN_DIGITS = 16  # of a closed key's digest, as the record shows it


@dataclass(slots=True)
class Tried:
    """A sketch of a sketch search (of the theorem, or of a lemma): its record, its row, and (elaborated) its
    subgoals' closing rows in order."""

    record: SketchAttempt
    row: Edge
    sketch: Sketch | None = None
    leaves: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # what failed, for a re-plan


@dataclass(slots=True)
class GoalNode:
    """An OR node: a goal, its keys, the places it appeared and the proof that closed it first."""

    id: int
    level: int
    goal: Goal
    exact: SubgoalKey
    closed: SubgoalKey
    places: int = 1
    proof: list[str] | None = None
    source: SubgoalSource | None = None
    by: int | None = None
    origin: str | None = None

    def close(self, tactics: list[str], source: SubgoalSource, by: int | None = None,
              origin: str | None = None) -> None:
        """Lean closed the goal with `tactics` (the first proof found is the node's; later places replay it)."""
        if self.proof is None:
            self.proof, self.source, self.by, self.origin = list(tactics), source, by, origin


@dataclass(frozen=True, slots=True)
class Frame:
    """Where a sketch's holes are proved: the goal it decomposes (`node`), the path from the theorem down to it
    (`ancestors`, itself last), the theorem or lemma whose start it was drafted on, how that start is made again in
    a replaced worker (`start`: its state id), and what its holes' sampling seeds are keyed on."""

    node: GoalNode
    ancestors: tuple[GoalNode, ...]
    theorem: Theorem
    start: Callable[[], Awaitable[int]]
    seed_key: str

    @property
    def level(self) -> int:
        """The level of the sketch's holes."""
        return self.node.level + 1


@dataclass(slots=True)
class GoalGraph:
    """One theorem's lemma graph (see the module docstring)."""

    header: str | None
    depth: int
    goals: list[GoalNode] = field(default_factory=list)
    sketches: list[GraphSketch] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    shared: int = 0
    by_exact: dict[str, GoalNode] = field(default_factory=dict)

    def root(self, goal: Goal) -> GoalNode:
        """The theorem's goal, node 0."""
        return self.place(goal, 0)

    def place(self, goal: Goal, level: int) -> GoalNode:
        """The node of `goal` (as Lean printed it) at one more place: a known one by its exact key, else a new one."""
        exact = subgoal_key(goal, self.header)
        known = self.by_exact.get(exact.digest)
        if known is not None and known.exact.text == exact.text:
            known.places += 1
            return known
        node = GoalNode(len(self.goals), level, goal, exact, closed_key(goal, self.header))
        self.goals.append(node)
        self.by_exact.setdefault(exact.digest, node)
        return node

    def alike(self, node: GoalNode) -> GoalNode | None:
        """A proved node of `node`'s closed key under another exact key (its hypotheses named otherwise)."""
        return next((other for other in self.goals if other is not node and other.proof is not None
                     and other.closed.text == node.closed.text and other.exact.text != node.exact.text), None)

    def sketch(self, goal: int, body: str, outcome: SketchOutcome, detail: str | None = None) -> GraphSketch:
        """A sketch of goal `goal`, recorded."""
        made = GraphSketch(id=len(self.sketches), goal=goal, body=body, outcome=outcome, detail=detail)
        self.sketches.append(made)
        return made

    def restated(self, sketch: Sketch, frame: Frame) -> str | None:
        """Why `sketch`, a sketch of `frame.node`'s goal, would close a cycle, read from its text before Lean sees it:
        a hole whose goal (the goal's hypotheses, the holes before it, its statement) has the closed key of the goal
        or of an ancestor; None when none does."""
        context = [(variable.name, variable.type) for variable in frame.node.goal.variables]
        for hole in sketch.holes:
            key = closed_key_of(context, hole.statement, self.header)
            reason = self._repeat(hole.name, key, frame)
            if reason is not None:
                return reason
            context.append((hole.name, hole.statement))
        return None

    def restates(self, name: str, goal: Goal, frame: Frame) -> str | None:
        """The same check on a hole as Lean printed it (after the sketch elaborated)."""
        return self._repeat(name, closed_key(goal, self.header), frame)

    def _repeat(self, name: str, key: SubgoalKey, frame: Frame) -> str | None:
        for ancestor in reversed(frame.ancestors):
            if ancestor.closed.text == key.text:
                whose = "the goal it decomposes" if ancestor is frame.node else f"its ancestor goal {ancestor.id}"
                reason = (f"the hole {name} restates {whose} (closed key {ancestor.closed.digest[:SHOWN_DIGITS]}): "
                          "refused before Lean, a cycle")
                self.refused.append(reason)
                return reason
        return None

    def record(self, proved: bool) -> LemmaGraph:
        """The graph as a result keeps it; `proved`: the theorem's assembled proof counted."""
        goals = [GraphGoal(id=node.id, level=node.level, goal=node.goal.pretty(),
                           closed=node.closed.digest[:SHOWN_DIGITS], places=node.places,
                           proved=proved if node.id == 0 else node.proof is not None,
                           source=None if node.id == 0 else node.source, by=node.by, origin=node.origin)
                 for node in self.goals]
        return LemmaGraph(depth=self.depth, goals=goals, sketches=list(self.sketches), shared=self.shared,
                          refused=list(self.refused))

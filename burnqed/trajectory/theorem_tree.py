"""One theorem's search tree as text (`burnqed show`): its states, the tactics tried from each, what Lean answered,
the scores the search gave, and the proof path, drawn from the trajectory rows of one search (`reader.read_theorem`).

    search = read_theorem("runs/iter_0/eval/eval.trajectories", "mathd_algebra_10", store=store)[0]
    print(render_search(search, max_depth=6, max_nodes=60, width=120))

A row is an edge: the tactic applied to the node `parent_id` (0 is the root, the theorem's goal), giving the node
`node_id` at `depth`. Big trees are bounded: every node on a verified proof path is drawn, then the others breadth
first (shallow before deep, each level in the order the search tried them) until `max_nodes`; nothing deeper than
`max_depth`. What is left out is counted under its parent, by outcome, so the drawing never hides that it was cut.

A sketch search's result also holds its sketches (`TheoremResult.sketches`): under the tree, each sketch in order (its
round, what became of it, its body) with its subgoals (name, statement, proved and where the proof came from, the
budget its search spent, the proof or why not), then the assembled proof the theorem counts.
"""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass, field

from burnqed.records.results import (
    EdgeOutcome,
    GraphGoal,
    GraphSketch,
    LemmaGraph,
    SketchAttempt,
    SubgoalSource,
    TheoremResult,
)
from burnqed.trajectory.reader import TheoremSearch

TACTIC_CHARS = 70  # of a tactic (or a whole proof's first line) on its node's line
DETAIL_CHARS = 90  # of Lean's error or the goal left, on a node's line
ROOT_LINES = 8  # lines of the root state shown above the tree
SKETCH_LINES = 12  # of a sketch's body
PROOF_LINES = 40  # of the assembled proof
FAILED = {EdgeOutcome.ERROR.value, EdgeOutcome.TIMEOUT.value, EdgeOutcome.REFUSED.value,
          EdgeOutcome.PROMPT_REJECTED.value}


@dataclass(slots=True)
class TreeNode:
    """One edge of the search and the node it leads to."""

    node_id: int
    parent_id: int
    depth: int
    tactic: str
    outcome: str
    state_after: str | None
    error: str | None
    logprob: float
    score: float | None
    energy: float | None
    on_path: bool
    closes: bool  # the edge that closed a verified proof (proof_complete)
    children: list[TreeNode] = field(default_factory=list)


def _nodes(search: TheoremSearch) -> dict[int, TreeNode]:
    columns = {name: search.rows.column(name).to_pylist() for name in (
        "node_id", "parent_id", "depth", "tactic", "outcome", "state_after", "error", "logprob", "score", "energy",
        "on_proof_path", "proof_complete")}
    nodes = {}
    for k in range(search.rows.num_rows):
        node = TreeNode(node_id=columns["node_id"][k], parent_id=columns["parent_id"][k], depth=columns["depth"][k],
                        tactic=columns["tactic"][k], outcome=columns["outcome"][k],
                        state_after=columns["state_after"][k], error=columns["error"][k],
                        logprob=columns["logprob"][k], score=columns["score"][k], energy=columns["energy"][k],
                        on_path=columns["on_proof_path"][k], closes=columns["proof_complete"][k])
        nodes[node.node_id] = node
    for node in sorted(nodes.values(), key=lambda n: n.node_id):
        parent = nodes.get(node.parent_id)
        if parent is not None:
            parent.children.append(node)
    return nodes


def _shown(nodes: dict[int, TreeNode], max_depth: int, max_nodes: int) -> set[int]:
    """The nodes drawn: the proof path whatever the bound, then breadth first until `max_nodes`."""
    within = sorted((n for n in nodes.values() if n.depth <= max_depth), key=lambda n: (n.depth, n.node_id))
    shown = {n.node_id for n in within if n.on_path}
    for node in within:
        if len(shown) >= max_nodes:
            break
        if node.parent_id == 0 or node.parent_id in shown:
            shown.add(node.node_id)
    return shown


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _goals(state: str) -> str:
    """The goals of a state on one line: its `⊢` lines (one per goal), else its first line."""
    targets = [line.strip() for line in state.splitlines() if line.strip().startswith("⊢")]
    return " | ".join(targets) if targets else state.strip().splitlines()[0] if state.strip() else ""


# What an edge without text is, by its outcome and the search's mode: only a refused prompt was never asked.
WRITTEN = {"step": "tactic", "whole": "proof", "hybrid": "proof", "sketch": "sketch"}


def _empty(node: TreeNode, mode: str) -> str:
    if node.outcome == EdgeOutcome.PROMPT_REJECTED.value:
        return "(no tactic: the policy could not be asked)"
    what = WRITTEN.get(mode, "completion")
    return f"(an empty {what}: the {'planner' if what == 'sketch' else 'policy'} wrote nothing)"


def _label(node: TreeNode, mode: str = "step") -> str:
    mark = "★" if node.on_path else "✗" if node.outcome in FAILED else "·"
    tactic = _one_line(node.tactic, TACTIC_CHARS) if node.tactic.strip() else _empty(node, mode)
    text = f"{mark} {tactic} → {node.outcome}"
    if node.outcome == EdgeOutcome.OK.value and node.state_after:
        text += f": {_one_line(_goals(node.state_after), DETAIL_CHARS)}"
    elif node.error:  # Lean's messages start with their severity, which the outcome already says
        text += f": {_one_line(node.error.removeprefix('error: '), DETAIL_CHARS)}"
    numbers = [f"logprob {node.logprob:.2f}"]
    if node.score is not None:
        numbers.append(f"score {node.score:.2f}")
    if node.energy is not None:
        numbers.append(f"energy {node.energy:.2f}")
    return f"{text}  ({', '.join(numbers)})"


def _left_out(children: list[TreeNode], max_depth: int) -> str:
    counts = Counter(child.outcome for child in children)
    by = ", ".join(f"{outcome} {n}" for outcome, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])))
    deeper = " (deeper than --depth)" if children and children[0].depth > max_depth else ""
    return f"… {len(children)} more{deeper}: {by}"


def _header(search: TheoremSearch, edges: int) -> list[str]:
    result = search.result
    spent = (f"{result.nodes_expanded} expansions" if result.mode.value in ("step", "sketch") else
             f"{result.proofs_sampled} proofs sampled")
    if result.proved:
        verdict = f"proved at budget {result.budget_at_proof}"
        if result.answer is not None:  # task produced: the answer the proof filled in, never judged by a search
            verdict += (f" with the answer it produced, {_one_line(result.answer, DETAIL_CHARS)} (not compared with "
                        "the reference: `burnqed eval` judges answers)")
    else:
        reason = result.failure_reason.value if result.failure_reason is not None else "unknown"
        verdict = f"not proved: {reason}" + (f" ({_one_line(result.detail, DETAIL_CHARS)})" if result.detail else "")
    return [f"{result.name}: {verdict}; {result.mode.value} search, {spent}, {edges} edges, {result.time_s:.1f} s "
            f"(run {search.run_id} in {search.uri})"]


def render_search(search: TheoremSearch, *, max_depth: int, max_nodes: int, width: int = 120) -> str:
    """The search as text: a header line (verdict, budget spent, where it was read), the tree under the root state
    (★ a node on a verified proof path, ✗ a tactic Lean or the guard refused, · any other), what was left out, and
    the proof path's tactics (see the module docstring for the bounds)."""
    from rich.console import Console
    from rich.text import Text
    from rich.tree import Tree

    nodes = _nodes(search)
    shown = _shown(nodes, max_depth, max_nodes)
    roots = [n for n in nodes.values() if n.parent_id == 0 or n.parent_id not in nodes]
    roots.sort(key=lambda n: n.node_id)
    start = next((before for before, parent in zip(search.rows.column("state_before").to_pylist(),
                                                    search.rows.column("parent_id").to_pylist(), strict=True)
                  if parent == 0), None)
    state = (start or search.result.declaration or search.result.name).strip().splitlines()
    label = "\n".join(state[:ROOT_LINES]) + (f"\n… {len(state) - ROOT_LINES} more lines" if len(state) > ROOT_LINES
                                                else "")
    tree = Tree(Text(label))

    def add(branch: Tree, children: list[TreeNode]) -> None:
        hidden = [child for child in children if child.node_id not in shown]
        for child in children:
            if child.node_id in shown:
                add(branch.add(Text(_label(child, search.result.mode.value))), child.children)
        if hidden:
            branch.add(Text(_left_out(hidden, max_depth)))

    add(tree, roots)
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None, force_terminal=False, legacy_windows=False).print(tree)
    lines = [*_header(search, len(nodes)), *(line.rstrip() for line in buffer.getvalue().splitlines())]
    if len(shown) < len(nodes):
        lines.append(f"shown {len(shown)} of {len(nodes)} edges (the proof path, then breadth first up to --max-nodes "
                     f"{max_nodes}, no deeper than --depth {max_depth})")
    path = proof_path(nodes)
    if path:
        lines.append("proof path: " + "; ".join(_one_line(n.tactic, TACTIC_CHARS) for n in path))
    lines += render_sketches(search.result)
    return "\n".join(lines) + "\n"


def render_sketches(result: TheoremResult) -> list[str]:
    """A sketch search's sketches as lines (none for a result without any): a count, then each sketch (its round,
    outcome, subgoals proved, the planner's tokens, its body), its subgoals (✓ proved, ✗ not: name, statement, where
    the proof came from and the budget spent, the proof's tactics or why not), and the assembled proof the theorem
    counts, under the sketch it assembles."""
    if not result.sketches:
        return []
    replans = sum(1 for sketch in result.sketches if sketch.round > 0)
    lines = [f"sketches: {len(result.sketches)} written, {replans} re-plan{'' if replans == 1 else 's'}"]
    for number, sketch in enumerate(result.sketches, start=1):
        lines += _sketch_lines(number, sketch)
    verified = next((n for n, sketch in enumerate(result.sketches, start=1) if sketch.verified), None)
    if result.proved and result.proof and verified is not None:
        lines.append(f"assembled proof (sketch {verified}):")
        lines += _bounded(result.proof, PROOF_LINES)
    if result.lemma_graph is not None:
        lines += render_lemma_graph(result.lemma_graph)
    return lines


def render_lemma_graph(graph: LemmaGraph) -> list[str]:
    """A recursive sketch search's lemma graph as a text tree: each goal (✓ proved, ✗ not; its number, level,
    target, places and how it was closed: `shared from goal N`, `sketch N`), under it its sketches (outcome, closed or
    not), under each its holes' goals; a goal met again is named, not drawn again. Then the refusals."""
    goals = {goal.id: goal for goal in graph.goals}
    sketches: dict[int, list[GraphSketch]] = {}
    for sketch in graph.sketches:
        sketches.setdefault(sketch.goal, []).append(sketch)
    lines = [f"lemma graph: depth {graph.depth}, {len(graph.goals)} goals, {len(graph.sketches)} sketches, "
             f"{graph.shared} places shared, {len(graph.refused)} holes refused"]
    drawn: set[int] = set()

    def goal_line(goal: GraphGoal) -> str:
        mark = "✓" if goal.proved else "✗"
        how = goal.source.value if goal.source is not None else ""
        if goal.by is not None:
            how += f" from goal {goal.by}" if goal.source is SubgoalSource.SHARED else f" {goal.by}"
        if goal.origin:
            how += f" ({_one_line(goal.origin, DETAIL_CHARS)})"
        places = f", {goal.places} places" if goal.places > 1 else ""
        told = f"  [{how.strip()}]" if how.strip() else ""
        target = _one_line(_target(goal.goal), DETAIL_CHARS)
        return f"{mark} goal {goal.id} (level {goal.level}{places}): {target}{told}"

    def draw(goal: GraphGoal, pad: str, branch: str) -> None:
        if goal.id in drawn:
            lines.append(f"{pad}{branch}goal {goal.id} (above)")
            return
        drawn.add(goal.id)
        lines.append(f"{pad}{branch}{goal_line(goal)}")
        below = pad + ("    " if branch == "└── " else "│   " if branch else "")
        mine = sketches.get(goal.id, [])
        for index, sketch in enumerate(mine):
            last = index == len(mine) - 1
            state = sketch.outcome.value + (", closes it" if sketch.closed else "")
            if sketch.detail and not sketch.closed:
                state += f": {_one_line(sketch.detail, DETAIL_CHARS)}"
            lines.append(f"{below}{'└── ' if last else '├── '}sketch {sketch.id} ({state})")
            inner = below + ("    " if last else "│   ")
            for number, hole in enumerate(sketch.holes):
                if hole in goals:
                    draw(goals[hole], inner, "└── " if number == len(sketch.holes) - 1 else "├── ")

    if 0 in goals:
        draw(goals[0], "", "")
    lines += [f"refused: {_one_line(reason, DETAIL_CHARS)}" for reason in graph.refused[:ROOT_LINES]]
    return lines


def _target(goal: str) -> str:
    """A goal's target as Lean printed it (the text after its last `⊢`)."""
    return goal.rsplit("⊢", 1)[-1].strip()


def _sketch_lines(number: int, sketch: SketchAttempt) -> list[str]:
    outcome = "verified" if sketch.verified else sketch.outcome.value
    if sketch.detail:
        outcome += f": {_one_line(sketch.detail, DETAIL_CHARS)}"
    proved = sum(1 for subgoal in sketch.subgoals if subgoal.proved)
    subgoals = f", {proved} of {len(sketch.subgoals)} subgoals proved" if sketch.subgoals else ""
    lines = [f"sketch {number} (round {sketch.round}): {outcome}{subgoals}, {sketch.tokens} tokens",
             *_bounded(sketch.body, SKETCH_LINES)]
    for index, subgoal in enumerate(sketch.subgoals):
        branch = "└──" if index == len(sketch.subgoals) - 1 else "├──"
        mark = "✓" if subgoal.proved else "✗"
        head = f"  {branch} {mark} {subgoal.name} : {_one_line(subgoal.statement, DETAIL_CHARS)}"
        if subgoal.proved:
            source = subgoal.source.value if subgoal.source is not None else "proved"
            proof = _one_line("; ".join(subgoal.tactics), TACTIC_CHARS)
            lines.append(f"{head}  ({source}, spent {subgoal.spent}): {proof}")
        else:
            why = f": {_one_line(subgoal.detail, DETAIL_CHARS)}" if subgoal.detail else ""
            lines.append(f"{head}  (spent {subgoal.spent}){why}")
    return lines


def _bounded(text: str, limit: int) -> list[str]:
    """`text`'s lines indented by two spaces, at most `limit` of them and a line counting the rest."""
    lines = text.strip("\n").splitlines()
    shown = [f"  {line}".rstrip() for line in lines[:limit]]
    return shown + ([f"  … {len(lines) - limit} more lines"] if len(lines) > limit else [])


def proof_path(nodes: dict[int, TreeNode]) -> list[TreeNode]:
    """The edges of the first verified proof the search found (its closing edge, then up through the parents), root
    first; empty when it found none."""
    closing = min((n for n in nodes.values() if n.closes), key=lambda n: n.node_id, default=None)
    path: list[TreeNode] = []
    while closing is not None:
        path.append(closing)
        closing = nodes.get(closing.parent_id)
    return path[::-1]

"""What the searches' trajectories teach `burnqed sft` (docs/training.md, "Data"): the positives (the (state,
tactic) of edges on a proof path), the verified proofs in the proof formats, the repair examples (a failed proof,
Lean's messages, the proof that closed it) and the sketches with their subgoals as theorems; `sft.data` mixes them
with the prepared data's pairs and makes token rows of them.

    positives = read_positives(["runs/iter_0/trajectories"], store=store)  # (state_before, tactic) of positive edges
    shortest = read_positives(["runs/iter_0/trajectories"], store=store, keep="shortest")  # one proof per theorem
    proofs = read_proof_examples(["runs/iter_0/trajectories"], store=store)  # verified proofs, in the proof formats
    sketches = read_sketch_examples(["runs/iter_0/trajectories"], store=store)  # sketches, subgoals as theorems
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from burnqed.config.sft import ProofsPerTheorem
from burnqed.errors import InputError
from burnqed.lean.declared_lemmas import names_file_lemmas
from burnqed.records.enums import SearchMode
from burnqed.records.replies import Goal
from burnqed.records.results import SubgoalAttempt, TheoremResult
from burnqed.search.subgoal_cache import subgoal_key
from burnqed.sft.data import SUBGOAL, TRAJECTORY, Rows, SftPair, _key
from burnqed.storage import Store
from burnqed.text.completion import join_tactics, split_proof
from burnqed.text.feedback import Feedback
from burnqed.text.sketch import Unrenderable, sketch_of_proof, subgoal_declaration, subgoal_name
from leankit.answer import find_slots


@dataclass(frozen=True, slots=True)
class SketchExamples:
    """What `read_sketch_examples` found: the examples, and the proved subgoals it could not declare."""

    examples: list[SftPair]
    subgoals_skipped: int


def read_positives(uris: Sequence[str], *, store: Store, keep: ProofsPerTheorem = "all") -> list[SftPair]:
    """Distinct (state_before, tactic) of the positive edges under every trajectory prefix, first seen first; with
    `keep` "shortest" or "newest", only the rows of each theorem's one proof `choose_proofs` picks.

    Only the state BEFORE the tactic is read: the policy is asked for a tactic in that state. Rows of whole-mode
    searches hold whole proofs, not tactics, and are left out (`read_proof_examples` reads them), and so are a sketch
    search's sketch rows (the children of its root: a sketch, not a tactic); its subgoals' rows are tactics.
    """
    from burnqed.trajectory.reader import read_edges, require_trajectories

    chosen = choose_proofs(uris, keep, store=store) if keep != "all" else None
    seen: dict[SftPair, SftPair] = {}
    for source, uri in enumerate(uris):
        results = {(part.run_id, result.name): result for part in require_trajectories(uri, store=store)
                   for result in part.theorems}
        table = read_edges(uri, ["run_id", "theorem", "node_id", "parent_id", "state_before", "tactic", "label"],
                           store=store)
        columns = table.to_pydict()
        for run_id, theorem, node, parent, state, tactic, label in zip(
            columns["run_id"], columns["theorem"], columns["node_id"], columns["parent_id"], columns["state_before"],
            columns["tactic"], columns["label"], strict=True,
        ):
            result = results.get((run_id, theorem))
            if chosen is not None and not _on_chosen(chosen, theorem, source, run_id, node):
                continue
            if (label == "positive" and tactic.strip() and result is not None and result.mode is not SearchMode.WHOLE
                    and not (result.mode is SearchMode.SKETCH and parent == 0)):
                pair = SftPair(theorem, state, tactic, TRAJECTORY, declaration=result.declaration)
                seen.setdefault(_key(pair), pair)
    return list(seen.values())


@dataclass(frozen=True, slots=True)
class ChosenProof:
    """The one verified proof of a theorem that SFT trains on (`choose_proofs`): the place of its trajectory among
    the uris, the run id of its search, and its rows from the root down (node ids and tactics)."""

    source: int
    run_id: str
    nodes: tuple[int, ...]
    tactics: tuple[str, ...]


def choose_proofs(uris: Sequence[str], keep: ProofsPerTheorem, *, store: Store) -> dict[str, ChosenProof]:
    """Per proved theorem, the one verified proof `keep` picks among every search of it under `uris` (in iteration
    order, as SFT's --trajectories give them; docs/training.md, "One proof per theorem"). A proof is the rows from the
    root down to a `proof_complete` row (a whole-mode proof is its one row). "shortest": the fewest rows, then the
    fewest characters of their tactics, then the newest; "newest": the one of the last trajectory that proved the
    theorem, in it the search with the greatest run id, in that search the proof found last (the greatest node id).

    A sketch search's proof is the sketch and every subgoal's proof together, not one path: an InputError names
    such a theorem, since one of its paths is not a proof (`sft.proofs_per_theorem` = "all" trains it)."""
    from burnqed.trajectory.reader import require_trajectories

    if keep not in ("shortest", "newest"):
        raise ValueError(f"choose_proofs picks 'shortest' or 'newest', not {keep!r}")
    best: dict[str, tuple[tuple[Any, ...], ChosenProof]] = {}
    for source, uri in enumerate(uris):
        sketched = {(part.run_id, result.name) for part in require_trajectories(uri, store=store)
                    for result in part.theorems if result.mode is SearchMode.SKETCH}
        rows, leaves = _search_rows(uri, store=store)
        for run_id, theorem, leaf in leaves:
            if (run_id, theorem) in sketched:
                raise InputError(f"trajectory {uri}: theorem {theorem!r} was proved by a sketch search (run "
                                 f"{run_id!r}), whose proof is not one path; sft.proofs_per_theorem = {keep!r} picks "
                                 "among step, hybrid and whole proofs: set it to 'all' to train on these")
            by_node = rows[(run_id, theorem)]
            nodes = _path_nodes(leaf, by_node)
            tactics = tuple(by_node[node][2] for node in nodes)
            proof = ChosenProof(source, run_id, nodes, tactics)
            newest = (source, run_id, leaf)
            rank = (newest if keep == "newest"
                    else (-len(nodes), -sum(len(tactic) for tactic in tactics), *newest))
            if theorem not in best or rank > best[theorem][0]:
                best[theorem] = (rank, proof)
    return {theorem: proof for theorem, (_, proof) in best.items()}


def _search_rows(uri: str, *, store: Store) -> tuple[Rows, list[tuple[str, str, int]]]:
    """The rows of every search under `uri` by node, and the (run id, theorem, node) of its `proof_complete` rows."""
    from burnqed.trajectory.reader import read_edges

    table = read_edges(uri, ["run_id", "theorem", "node_id", "parent_id", "state_before", "tactic",
                             "proof_complete"], store=store).to_pydict()
    rows: Rows = {}
    leaves: list[tuple[str, str, int]] = []
    for run_id, theorem, node, parent, state, tactic, complete in zip(
        table["run_id"], table["theorem"], table["node_id"], table["parent_id"], table["state_before"],
        table["tactic"], table["proof_complete"], strict=True,
    ):
        rows.setdefault((run_id, theorem), {})[node] = (parent, state, tactic)
        if complete:
            leaves.append((run_id, theorem, node))
    return rows, leaves


def _on_chosen(chosen: Mapping[str, ChosenProof], theorem: str, source: int, run_id: str, node: int, *,
               last: bool = False) -> bool:
    """Whether the row `node` of theorem `theorem`'s search `run_id` in trajectory `source` is on its chosen proof
    (`last`: is the row that closes it)."""
    proof = chosen.get(theorem)
    if proof is None or (proof.source, proof.run_id) != (source, run_id):
        return False
    return node == proof.nodes[-1] if last else node in proof.nodes


def _path_nodes(leaf: int, by_node: Mapping[int, tuple[int, str, str]]) -> tuple[int, ...]:
    """The node ids from the root's child down to `leaf`."""
    nodes: list[int] = []
    node = leaf
    while node in by_node:  # up to the root, whose id (0) has no row
        nodes.append(node)
        node = by_node[node][0]
    return tuple(reversed(nodes))


def read_proof_examples(uris: Sequence[str], *, store: Store, keep: ProofsPerTheorem = "all") -> list[SftPair]:
    """Distinct proof-format examples of the verified proofs under every trajectory prefix (see the module doc):
    a "whole" example per proved theorem (from its stored proof text), a "proof" example per state on every
    verified proof path (from the rows; a row whose state was not recorded, `""`, has none; a sketch search's path
    ends at its sketch row: the proof examples are its subgoals'). With `keep` "shortest" or "newest" only each
    theorem's one proof `choose_proofs` picks: its whole example is that proof's rows' tactics, its proof examples
    the states on its path; the repair examples are every one as before (`read_repair_examples`)."""
    from burnqed.trajectory.reader import require_trajectories

    seen: dict[SftPair, SftPair] = {}
    chosen = choose_proofs(uris, keep, store=store) if keep != "all" else None

    def add(pair: SftPair) -> None:
        seen.setdefault(_key(pair), pair)

    for source, uri in enumerate(uris):
        declarations: dict[tuple[str, str], str | None] = {}
        sketched: set[tuple[str, str]] = set()  # sketch searches: their paths stop below the sketch row
        # by run id and theorem, like the rows (`read_edges`): parts hold theorems in the order they finished
        recorded = sorted(((part.run_id, result) for part in require_trajectories(uri, store=store)
                           for result in part.theorems), key=lambda item: (item[0], item[1].name))
        for run_id, result in recorded:
            declarations[(run_id, result.name)] = result.declaration
            if result.mode is SearchMode.SKETCH:
                sketched.add((run_id, result.name))
            if (whole := _whole_example(result, (source, run_id), chosen)) is not None:
                add(whole)
        rows, leaves = _search_rows(uri, store=store)
        for run_id, theorem, leaf in leaves:
            if chosen is not None and not _on_chosen(chosen, theorem, source, run_id, leaf, last=True):
                continue
            path = _path_to(leaf, rows[(run_id, theorem)], below_root=(run_id, theorem) in sketched)
            declaration = declarations.get((run_id, theorem))
            for index, (state, _) in enumerate(path):
                if not state:  # no state recorded (an open answer's whole attempt, an RL rollout): no prompt shows it
                    continue
                rest = join_tactics([tactic for _, tactic in path[index:]], indent="")
                add(SftPair(theorem, state, rest, TRAJECTORY, "proof", declaration=declaration))
    for pair in read_repair_examples(uris, store=store):
        add(pair)
    return list(seen.values())


def _whole_example(result: TheoremResult, search: tuple[int, str],
                   chosen: Mapping[str, ChosenProof] | None) -> SftPair | None:
    """The whole-proof example of `result` (its search: the place of its trajectory, its run id): its proof, or with
    `chosen` (one proof per theorem) the chosen proof's tactics when that proof is this search's, else none."""
    # A result without a recorded declaration (written before searches recorded it) has no prompt to
    # reproduce: its whole example is left out rather than parsed back out of the proof text.
    if result.declaration is None:
        return None
    if chosen is None:
        tactics = result.tactics if result.proved else []
    else:
        proof = chosen.get(result.name)
        tactics = list(proof.tactics) if proof is not None and (proof.source, proof.run_id) == search else []
    if not tactics or names_file_lemmas(tactics):  # a proof through its file's lemmas is no whole proof alone
        return None
    return SftPair(result.name, "", join_tactics(tactics, indent=""), TRAJECTORY, "whole", result.header,
                   result.declaration)


def _path_to(leaf: int, by_node: Mapping[int, tuple[int, str, str]], *, below_root: bool) -> list[tuple[str, str]]:
    """The (state before, tactic) of the rows from the root down to `leaf`; `below_root`: without the root's child
    (a sketch search's sketch row)."""
    path: list[tuple[str, str]] = []
    node = leaf
    while node in by_node:  # up to the root, whose id (0) has no row
        parent, state, tactic = by_node[node]
        if parent == 0 and below_root:
            break
        path.append((state, tactic))
        node = parent
    path.reverse()
    return path


def read_repair_examples(uris: Sequence[str], *, store: Store) -> list[SftPair]:
    """Distinct repair examples of the trajectories (docs/training.md, "Repair examples"): every row holding a failed
    proof's feedback in a theorem with a verified proof → the revision of that row that verified, else the theorem's
    verified proof in the same run, else in another run."""
    from burnqed.trajectory.reader import read_edges, require_trajectories

    results: dict[tuple[str, str], TheoremResult] = {}
    for uri in uris:
        for part in require_trajectories(uri, store=store):
            for result in part.theorems:
                results[(part.run_id, result.name)] = result
    proved: dict[str, str] = {}  # theorem → a verified proof body, by run id (any run's, when its own has none)
    for (_, name), result in sorted(results.items()):
        if result.proved and result.tactics and not names_file_lemmas(result.tactics):
            proved.setdefault(name, join_tactics(result.tactics, indent=""))
    seen: dict[SftPair, SftPair] = {}
    states: set[tuple[str, str, int]] = set()  # (run, theorem, parent) of the step and hybrid failures taken
    for uri in uris:
        table = read_edges(uri, ["run_id", "theorem", "node_id", "parent_id", "tactic", "label", "on_proof_path",
                                 "revision", "revises", "feedback"], store=store).to_pydict()
        rows = list(zip(table["run_id"], table["theorem"], table["node_id"], table["parent_id"], table["tactic"],
                        table["label"], table["on_proof_path"], table["revision"], table["revises"], table["feedback"],
                        strict=True))
        on_path = {(run, name, node) for run, name, node, _, _, _, path, *_ in rows if path}
        # A whole-mode row is a whole proof: a positive one that revises a row is that row's verified revision.
        revised = {(run, name, revises): join_tactics(split_proof(tactic, split_have=False), indent="")
                   for run, name, _, _, tactic, label, _, _, revises, _ in rows
                   if revises is not None and label == "positive"
                   and getattr(results.get((run, name)), "mode", None) is SearchMode.WHOLE}
        for run, name, node, parent, _, _, _, revision, _, feedback in rows:
            found = results.get((run, name))
            if feedback is None or found is None or found.declaration is None:
                continue
            own = (join_tactics(found.tactics, indent="") if found.proved and found.tactics
                   and not names_file_lemmas(found.tactics) else None)
            target = revised.get((run, name, node)) or own or proved.get(name)
            if target is None or not _takes(found, (run, name, parent), on_path, states):
                continue
            try:
                Feedback.from_json(feedback)
            except ValueError as exc:
                raise InputError(f"trajectory {uri}: theorem {name!r}, row {node}: {exc}") from None
            pair = SftPair(name, "", target, TRAJECTORY, "repair", found.header, found.declaration, feedback, revision)
            seen.setdefault(_key(pair), pair)
    return list(seen.values())


def _takes(result: TheoremResult, state: tuple[str, str, int], on_path: set[tuple[str, str, int]],
           taken: set[tuple[str, str, int]]) -> bool:
    """Whether a failure tried at `state` (run, theorem, parent node) is a repair example: always in whole mode (each
    row a whole proof); in step and hybrid mode the first at a state on a verified proof (docs/training.md)."""
    if result.mode is SearchMode.WHOLE:
        return True
    if state[2] != 0 and state not in on_path:
        return False  # off every verified proof: its path is no prefix of one
    if state in taken:
        return False  # a later failure at a state already taken
    taken.add(state)
    return True


def read_sketch_examples(uris: Sequence[str], *, store: Store) -> SketchExamples:
    """Distinct sketch and subgoal examples of the trajectories (docs/training.md, "Sketch examples"), results in run id
    and theorem order. A sketch example per proved theorem with a recorded declaration: each verified sketch of a sketch
    search as the planner wrote it, else the sketch its verified proof is (`text.sketch.sketch_of_proof`, any mode; none
    when the proof has no top-level `have NAME : P := …`) → the planner's prompt. Every subgoal of a verified sketch
    (its proof compiled in the assembled proof; a sketch that did not verify was never compiled, and trains nothing, as
    an unverified proof), the first of each subgoal key (`search.subgoal_cache.subgoal_key`: its context and target
    under the theorem's header), gives its state under the theorem's declaration (what the subgoal's search sends) → its
    first tactic (the step format) and → its whole proof (the proof-from-state format), and as a theorem of its own
    (`subgoal_declaration`), its declaration and the theorem's header → its whole proof (the whole format); one no
    declaration can state is counted and skipped. A theorem whose answer is open (its header's slot `sorry`) gives none:
    the planner's prompt has no answer slot."""
    from burnqed.trajectory.reader import require_trajectories

    seen: dict[SftPair, SftPair] = {}
    keys: set[object] = set()
    skipped = 0

    def add(pair: SftPair) -> None:
        seen.setdefault(_key(pair), pair)

    for uri in uris:
        recorded = sorted(((part.run_id, result) for part in require_trajectories(uri, store=store)
                           for result in part.theorems), key=lambda item: (item[0], item[1].name))
        for _, result in recorded:
            if find_slots(result.header):
                continue
            if result.proved and result.declaration is not None:
                for body in _sketch_bodies(result):
                    add(SftPair(result.name, "", body, TRAJECTORY, "sketch", result.header, result.declaration))
            for subgoal in (s for attempt in result.sketches if attempt.verified
                            for s in attempt.subgoals if s.proved and s.tactics):
                try:
                    goal: Goal | None = Goal.from_pretty(subgoal.goal)
                except ValueError:
                    goal = None
                key = subgoal_key(goal, result.header).digest if goal is not None else (result.header, subgoal.goal)
                if key in keys:
                    continue
                keys.add(key)
                examples = _subgoal_examples(result, subgoal, goal)
                skipped += not examples
                for pair in examples:
                    add(pair)
    return SketchExamples(list(seen.values()), skipped)


def _subgoal_examples(result: TheoremResult, subgoal: SubgoalAttempt, goal: Goal | None) -> list[SftPair]:
    """A proved subgoal of `result`'s sketch search as a theorem of its own (`goal`, its text read back: None when it
    is not one goal): its step, proof-from-state and whole examples; none when no declaration can state it."""
    try:
        if goal is None:
            raise Unrenderable("not one goal")
        declaration = subgoal_declaration(subgoal_name(result.name, subgoal.name), goal)
    except Unrenderable:
        return []
    proof = join_tactics(subgoal.tactics, indent="")
    # From its state, under the theorem's declaration: what the sketch search's subgoal search sends (step, hybrid).
    return [SftPair(result.name, subgoal.goal, subgoal.tactics[0], SUBGOAL, declaration=result.declaration),
            SftPair(result.name, subgoal.goal, proof, SUBGOAL, "proof", declaration=result.declaration),
            SftPair(result.name, "", proof, SUBGOAL, "whole", result.header, declaration)]


def _sketch_bodies(result: TheoremResult) -> list[str]:
    """The sketches a proved theorem's result trains the planner on: its verified sketches as written, else the sketch
    its proof is (none without one)."""
    verified = [attempt.body for attempt in result.sketches if attempt.verified]
    if verified or not result.tactics:
        return verified
    sketch = sketch_of_proof(join_tactics(result.tactics, indent=""))
    return [sketch.body] if sketch is not None else []

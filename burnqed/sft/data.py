"""Training data of `burnqed sft` (docs/training.md, "Data"): tactic pairs and trajectory positives, proof and
repair examples → token rows with completion-only labels.

    base = read_base_pairs(data_dir)                       # the prepared-data folder's pairs.parquet
    whole = read_base_proofs(data_dir, base, DeclarationForm.BINDER)  # a whole proof per theorem, from its pairs
    positives = read_positives(["runs/iter_0/trajectories"], store=store)  # (state_before, tactic) of positive edges
    shortest = read_positives(["runs/iter_0/trajectories"], store=store, keep="shortest")  # one proof per theorem
    proofs = read_proof_examples(["runs/iter_0/trajectories"], store=store)  # verified proofs, in the proof formats
    sketches = read_sketch_examples(["runs/iter_0/trajectories"], store=store)  # sketches, subgoals as theorems
    mix = mix_pairs(base, positives, iteration=1, base_subsample=10000, positive_upsample=10,
                    eval_fraction=0.1, seed=0, base_proofs=whole)  # train / held-out pairs
    rows = encode_pairs(tokenizer, fmt, mix.train)          # prompt ids + completion ids + EOS, labels
    dataset, stats = build_dataset(rows, max_length=512, packing=True, seed=0)
    batch = PackedRowsCollator(tokenizer.pad_token_id)([dataset[0], dataset[1]])

Every prompt is the one the search sends (`burnqed.text.prompt`); prompt and completion are tokenized separately.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from burnqed.config.sft import ProofsPerTheorem
from burnqed.data.pairs import THEOREMS_FILE, TacticPair, read_pairs
from burnqed.errors import InputError, ModelError
from burnqed.policy.modelfolder import encode_texts
from burnqed.records.enums import DeclarationForm, SearchMode
from burnqed.records.replies import Goal, pretty_state
from burnqed.records.results import SubgoalAttempt, TheoremResult
from burnqed.records.theorem import TheoremIndex, stable_split
from burnqed.search.answer import AnswerSlot
from burnqed.search.subgoal_cache import subgoal_key
from burnqed.storage import Store, read_json_model
from burnqed.text.completion import join_tactics, split_proof
from burnqed.text.feedback import Feedback
from burnqed.text.prompt import (
    PromptFormat,
    build_completion,
    build_prompt,
    build_repair_prompt,
    build_sketch_prompt,
    build_statement_prompt,
    format_for,
    repair_format,
    sketch_format,
)
from burnqed.text.sketch import Unrenderable, sketch_of_proof, subgoal_declaration, subgoal_name
from leankit.answer import find_slots

IGNORE_INDEX = -100
BASE = "base"
TRAJECTORY = "trajectory"
SUBGOAL = "subgoal"  # a subgoal a sketch search proved, trained as a theorem of its own
EVAL_SALT = "burnqed-sft-eval"
ENCODE_CHUNK = 1024

HFTokenizer = Any  # transformers tokenizers are untyped under mypy --strict
Dataset = Any  # datasets.Dataset
EvalSource = Literal["valid-split", "hashed-train", "none"]
Variant = Literal["tactic", "proof", "whole", "repair", "sketch"]
_VARIANT_MODE: dict[str, SearchMode] = {"tactic": SearchMode.STEP, "proof": SearchMode.HYBRID,
                                        "whole": SearchMode.WHOLE}


@dataclass(frozen=True, slots=True)
class SftPair:
    """One supervised example; `origin` is BASE, TRAJECTORY or SUBGOAL (a proved subgoal of a sketch search:
    `theorem` is the theorem whose sketch it was; `declaration` the theorem's from the subgoal's state, the
    subgoal's own in its whole example).

    `variant` is what the prompt shows and the completion holds: "tactic" (state_before → one tactic), "proof"
    (state_before → the rest of a proof), "whole" (the theorem's declaration and `header` → the whole proof body;
    state_before is the root state, which the prompt does not show), "repair" (a failed proof and Lean's messages on
    it, `feedback` as the trajectory row holds it, at place `revision` of its chain → a whole proof body), "sketch"
    (the theorem's declaration and `header` → a sketch: the planner's prompt, `build_sketch_prompt`).
    `declaration` is the theorem's declaration exactly as the search's prompts showed it
    (`records.theorem.Theorem.declaration`, recorded in each search result; for base pairs read from the prepared
    data's theorem index): None shows an anonymous `example`."""

    theorem: str
    state_before: str
    tactic: str
    origin: str = BASE
    variant: Variant = "tactic"
    header: str | None = None
    declaration: str | None = None
    feedback: str | None = None
    revision: int = 0

    def prompt(self, fmt: PromptFormat) -> tuple[PromptFormat, str]:
        """The format of this example in the family of `fmt`, and its prompt (what the search sends)."""
        if self.variant == "repair":
            repair = repair_format(fmt)
            feedback = Feedback.from_json(self.feedback or "")
            return repair, build_repair_prompt(repair, self.declaration or "", self.header, feedback,
                                               round_=self.revision)
        if self.variant == "sketch":
            sketch = sketch_format(fmt)
            return sketch, build_sketch_prompt(sketch, self.declaration or "", self.header)
        variant = format_for(fmt, _VARIANT_MODE[self.variant])
        if self.variant == "whole":
            return variant, build_statement_prompt(variant, self.declaration or "", self.header)
        return variant, build_prompt(variant, self.state_before, self.declaration)


@dataclass(frozen=True, slots=True)
class SftMix:
    """Training and held-out pairs, with the counts that go into sft.json."""

    train: list[SftPair]
    eval: list[SftPair]
    base_pairs: int
    positives: int
    positive_upsample: int
    positives_held_out: int
    eval_source: EvalSource
    proof_examples: int = 0  # distinct proof-format examples among the positives
    repair_examples: int = 0  # distinct repair examples among the positives
    sketch_examples: int = 0  # distinct sketch examples (iteration 0: the base proofs' sketches that train)
    subgoal_examples: int = 0  # distinct examples of proved subgoals as theorems, among the positives
    subgoals_skipped: int = 0  # proved subgoals no declaration can state (`text.sketch.Unrenderable`): no example


@dataclass(frozen=True, slots=True)
class SketchExamples:
    """What `read_sketch_examples` found: the examples, and the proved subgoals it could not declare."""

    examples: list[SftPair]
    subgoals_skipped: int


@dataclass(frozen=True, slots=True)
class EncodedPair:
    """Token ids of prompt + completion (+ EOS) and the labels: IGNORE_INDEX on the prompt."""

    input_ids: list[int]
    labels: list[int]

    @property
    def prompt_length(self) -> int:
        return sum(1 for label in self.labels if label == IGNORE_INDEX)


@dataclass(frozen=True, slots=True)
class DatasetStats:
    """What `build_dataset` kept."""

    examples: int
    too_long: int
    rows: int
    tokens: int
    supervised_tokens: int


# ------------------------------------------------------------------------------------------ pairs


def read_declarations(data_dir: Path, form: DeclarationForm) -> dict[str, str]:
    """The declaration of every theorem of the prepared data's theorem index, in `form`: what the search's prompts
    show for it (a theorem without a statement has none). Empty when the folder holds no index."""
    path = data_dir / THEOREMS_FILE
    if not path.is_file():
        return {}
    index = read_json_model(path, TheoremIndex, "theorem index", defaults={"name": data_dir.name or "data"})
    return {t.name: decl for t in index.theorems if (decl := t.declaration(form)) is not None}


def read_base_proofs(data_dir: Path, base: Sequence[TacticPair], form: DeclarationForm) -> list[SftPair]:
    """A "whole" example per theorem of the prepared data whose tactic pairs hold a replayed proof of it: the
    declaration (in `form`) and header of its index entry → the tactics of that proof, joined as search's verified
    proofs are (docs/training.md, "Proof formats"). The proof is the chain of pairs from depth 0, each one's
    `state_before` the state the one before left, to a tactic that leaves no goals (`no goals`, or an empty state),
    the first such chain in the file's order (the theorem's first replayed proof); a theorem without one (pairs
    without `state_after`, a recorded proof cut short), without a statement, or whose answer is open (its whole
    prompt is another) gives none."""
    path = data_dir / THEOREMS_FILE
    if not path.is_file():
        return []
    index = read_json_model(path, TheoremIndex, "theorem index", defaults={"name": data_dir.name or "data"})
    by_theorem: dict[str, list[TacticPair]] = {}
    for pair in base:
        by_theorem.setdefault(pair.theorem, []).append(pair)
    closed = {pretty_state(()), ""}  # Lean's text of no goals; corpus pairs (`corpus_pairs`) write it empty
    examples: list[SftPair] = []
    for theorem in index.theorems:
        declaration = theorem.declaration(form)
        pairs = by_theorem.get(theorem.name, [])
        if declaration is None or AnswerSlot(theorem).open or not pairs:
            continue
        tactics = _replayed_proof(pairs, closed)
        if tactics:
            examples.append(SftPair(theorem.name, "", join_tactics(tactics, indent=""), BASE, "whole", theorem.header,
                                    declaration))
    return examples


def _replayed_proof(pairs: Sequence[TacticPair], closed: set[str]) -> list[str] | None:
    """The tactics of the first chain of `pairs` (one theorem's, in file order) from depth 0 to no goals, or None."""
    following: dict[tuple[int, str], TacticPair] = {}
    for pair in pairs:
        following.setdefault((pair.depth, pair.state_before), pair)
    for start in (pair for pair in pairs if pair.depth == 0):
        tactics, pair = [start.tactic], start
        while pair.state_after is not None and pair.state_after not in closed:
            step = following.get((pair.depth + 1, pair.state_after))
            if step is None:
                break
            tactics.append(step.tactic)
            pair = step
        if pair.state_after in closed:
            return tactics
    return None


def read_base_pairs(data_dir: Path) -> list[TacticPair]:
    """The prepared-data folder's tactic pairs (all splits); InputError when missing, malformed or empty."""
    if not data_dir.exists():
        raise InputError(f"data folder {data_dir} does not exist (run `burnqed data prepare` first)")
    pairs = read_pairs(data_dir)
    if not pairs:
        raise InputError(f"data folder {data_dir} holds no tactic pairs")
    return pairs


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


Rows = dict[tuple[str, str], dict[int, tuple[int, str, str]]]  # (run id, theorem) → node → (parent, state, tactic)


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
    if not tactics:
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
        if result.proved and result.tactics:
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
            own = join_tactics(found.tactics, indent="") if found.proved and found.tactics else None
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


def base_sketches(proofs: Sequence[SftPair]) -> list[SftPair]:
    """A sketch example per replayed proof of the prepared data (`read_base_proofs`'s "whole" examples) whose top-level
    haves make a sketch (`text.sketch.sketch_of_proof`): the same declaration and header → that sketch."""
    return [SftPair(proof.theorem, "", sketch.body, BASE, "sketch", proof.header, proof.declaration)
            for proof in proofs if (sketch := sketch_of_proof(proof.tactic)) is not None]


def mix_pairs(
    base: Sequence[TacticPair],
    positives: Sequence[SftPair],
    *,
    iteration: int,
    base_subsample: int,
    positive_upsample: int,
    eval_fraction: float,
    seed: int,
    declarations: Mapping[str, str] | None = None,
    base_proofs: Sequence[SftPair] = (),
    base_sketch_examples: Sequence[SftPair] = (),
) -> SftMix:
    """Training and held-out pairs for `iteration`.

    Iteration 0: every base pair of the train split, and the `base_proofs` (`read_base_proofs`, given when proof
    examples train) and `base_sketch_examples` (`base_sketches`, given when sketch examples train) of the theorems
    that train. Iteration ≥ 1: `base_subsample` base train pairs (seeded sample; all
    when fewer) plus each positive `positive_upsample` times. Held out: the base `valid` split, or when there is
    none, `eval_fraction` of the train theorems by stable hash. Test-split pairs are never used. `declarations`
    (`read_declarations`) gives each base pair's theorem the declaration its search prompts show.
    """
    shown = declarations or {}
    has_valid = any(pair.split == "valid" for pair in base)

    def held_out(pair: TacticPair) -> bool:
        if has_valid:
            return pair.split == "valid"
        return pair.split == "train" and stable_split(pair.theorem, eval_fraction, EVAL_SALT) == "valid"

    train_base = [_from_tactic_pair(p, shown) for p in base if p.split == "train" and not held_out(p)]
    eval_pairs = [_from_tactic_pair(p, shown) for p in base if held_out(p)]
    eval_source: EvalSource = "valid-split" if has_valid else ("hashed-train" if eval_pairs else "none")
    closed = {pair.theorem for pair in eval_pairs} | {pair.theorem for pair in base if pair.split == "test"}
    kept_positives = [pair for pair in positives if pair.theorem not in closed]
    training = {pair.theorem for pair in train_base}
    whole = [pair for pair in base_proofs if pair.theorem in training]
    sketches = [pair for pair in base_sketch_examples if pair.theorem in training]
    if iteration == 0:
        train = [*train_base, *whole, *sketches]
    else:
        rng = random.Random(seed)
        sampled = train_base if base_subsample >= len(train_base) else rng.sample(train_base, base_subsample)
        train = [*sampled, *(pair for pair in kept_positives for _ in range(positive_upsample))]
        rng.shuffle(train)
    return SftMix(
        train=train,
        eval=eval_pairs,
        base_pairs=sum(1 for pair in train if pair.origin == BASE and pair.variant == "tactic"),
        positives=sum(1 for pair in kept_positives if pair.variant == "tactic" and pair.origin != SUBGOAL)
        if iteration else 0,
        positive_upsample=positive_upsample,
        positives_held_out=len(positives) - len(kept_positives),
        eval_source=eval_source,
        proof_examples=sum(1 for pair in kept_positives if pair.variant in ("proof", "whole")
                           and pair.origin != SUBGOAL) if iteration else len(whole),
        repair_examples=sum(1 for pair in kept_positives if pair.variant == "repair") if iteration else 0,
        sketch_examples=sum(1 for pair in kept_positives if pair.variant == "sketch") if iteration else len(sketches),
        subgoal_examples=sum(1 for pair in kept_positives if pair.origin == SUBGOAL) if iteration else 0,
    )


def _from_tactic_pair(pair: TacticPair, declarations: Mapping[str, str]) -> SftPair:
    return SftPair(pair.theorem, pair.state_before, pair.tactic, BASE, declaration=declarations.get(pair.theorem))


# ------------------------------------------------------------------------------------------ tokens


def encode_pairs(tokenizer: HFTokenizer, fmt: PromptFormat, pairs: Sequence[SftPair]) -> list[EncodedPair]:
    """Token rows of `pairs` in the variants of `fmt`'s family: the prompt's ids (BOS by the folder's rule), then
    the completion's tokenized alone, its stop marker and EOS, labels -100 on the prompt (docs/training.md); a pair
    repeated by upsampling is tokenized once."""
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ModelError("the tokenizer has no EOS token: the model could never learn to stop; use a model "
                         "whose tokenizer defines eos_token")
    texts: dict[SftPair, tuple[str, str]] = {}
    for pair in pairs:
        key = _key(pair)
        if key not in texts:
            variant, prompt = key.prompt(fmt)
            texts[key] = (prompt, build_completion(variant, pair.tactic))
    unique = list(texts)
    encoded: dict[SftPair, EncodedPair] = {}
    for start in range(0, len(unique), ENCODE_CHUNK):
        chunk = unique[start : start + ENCODE_CHUNK]
        prompts = encode_texts(tokenizer, [texts[key][0] for key in chunk])
        completions = tokenizer([texts[key][1] for key in chunk], add_special_tokens=False)["input_ids"]
        for key, prompt_ids, completion_ids in zip(chunk, prompts, completions, strict=True):
            target = list(completion_ids)
            # Chat formats carry EOS as text (tokenized to the EOS id); plain formats get the tokenizer's EOS.
            if not target or target[-1] != eos:
                target.append(eos)
            encoded[key] = EncodedPair([*prompt_ids, *target], [IGNORE_INDEX] * len(prompt_ids) + target)
    return [encoded[_key(pair)] for pair in pairs]


def _key(pair: SftPair) -> SftPair:
    """What an example's text depends on (not its theorem or origin)."""
    return SftPair("", pair.state_before, pair.tactic, BASE, pair.variant, pair.header, pair.declaration,
                   pair.feedback, pair.revision)


def build_dataset(rows: Sequence[EncodedPair], *, max_length: int, packing: bool,
                  seed: int) -> tuple[Dataset, DatasetStats]:
    """A `datasets.Dataset` of `input_ids`, `labels`, `seq_lengths` (one length per example in the row).

    Rows longer than `max_length` are dropped. With `packing`, examples are shuffled (seeded) and packed
    best-fit-decreasing into rows of at most `max_length` tokens; without, one example per row.
    """
    from datasets import Dataset as HFDataset
    from trl.data_utils import pack_dataset

    kept = [row for row in rows if len(row.input_ids) <= max_length]
    columns: dict[str, list[list[int]]] = {
        "input_ids": [row.input_ids for row in kept],
        "labels": [row.labels for row in kept],
    }
    dataset: Any = HFDataset.from_dict(columns)
    if packing and kept:
        dataset = pack_dataset(dataset.shuffle(seed=seed), max_length, "bfd")
    else:
        dataset = dataset.add_column("seq_lengths", [[len(row.input_ids)] for row in kept])
    stats = DatasetStats(
        examples=len(kept),
        too_long=len(rows) - len(kept),
        rows=len(dataset),
        tokens=sum(len(row.input_ids) for row in kept),
        supervised_tokens=sum(len(row.labels) - row.prompt_length for row in kept),
    )
    return dataset, stats


# --------------------------------------------------------------------------------------- collator


@dataclass
class PackedRowsCollator:
    """Collates packed rows into a batch with no cross-example attention (docs/training.md, "Packing").

    Returns `input_ids` and `labels` (B × longest row, right-padded with `pad_token_id` / IGNORE_INDEX) and
    `position_ids` restarting at 0 for every example (0 on padding, so each pad token is alone). No attention
    mask: its absence is what makes transformers derive the per-row block-diagonal mask from the position ids.
    The label of every example's first token (BOS) is IGNORE_INDEX, so no example is predicted from the
    previous one.
    """

    pad_token_id: int

    def __call__(self, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
        import torch

        width = max(len(row["input_ids"]) for row in rows)
        input_ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        labels = torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long)
        positions = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            n = len(row["input_ids"])
            lengths: Iterable[int] = row.get("seq_lengths") or [n]
            input_ids[i, :n] = torch.as_tensor(row["input_ids"], dtype=torch.long)
            labels[i, :n] = torch.as_tensor(row["labels"], dtype=torch.long)
            positions[i, :n] = torch.cat([torch.arange(length) for length in lengths])
        labels[positions == 0] = IGNORE_INDEX
        return {"input_ids": input_ids, "labels": labels, "position_ids": positions}

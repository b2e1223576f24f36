"""Training data of the value model: states, their goals and labels from trajectories, and InfoNCE groups of one
positive and K negatives. Pure Python (no torch); deterministic for a seed.

    data = build_dataset([read_edges(uri, columns=EDGE_COLUMNS, store=store) for uri in uris], valid_fraction=0.2)
    sampler = NegativeSampler(data, "train", GroupShape(7, (0.6, 0.3, 0.1), farther=4), seed=0)  # or .of(cfg.ebm)
    group = sampler.group(data.anchors("train")[0])      # [positive state, K negative states] (indexes)

What a state, goal, positive, sibling, decision and anchor are, how the negatives of a group are drawn (farther
states first, then siblings, same theorem, other theorems, with the fallback when a pool is short), and the split
by theorem: docs/ebm.md, "Training data".
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from burnqed.errors import InputError
from burnqed.records.theorem import stable_split
from leankit.normal_form import state_up_to_names

if TYPE_CHECKING:
    from burnqed import storage
    from burnqed.config import EbmConfig

EDGE_COLUMNS = ("run_id", "theorem", "node_id", "parent_id", "depth", "state_before", "state_after", "outcome", "label",
                "proof_complete")
OPTIONAL_COLUMNS = ("logprob",)  # read when present: the policy's pick among a decision's children
MIN_POSITIVES = 2  # train anchors below this cannot train anything
MIN_NEGATIVES = 2  # distinct negative candidates below this make every group a repeat

Split = Literal["train", "valid"]


@dataclass(slots=True)
class State:
    """One distinct (theorem, state) pair."""

    theorem: str
    text: str
    depth: int  # fewest tactics from the root that reached it
    positive: bool = False
    remaining: int | None = None  # positives: fewest tactics from it to a verified proof
    siblings: set[int] = field(default_factory=set)  # positives: non-positive states of the same parent node


@dataclass(slots=True)
class TheoremData:
    """A theorem's goal and the indexes of its states."""

    name: str
    split: Split
    goal: str
    positives: list[int] = field(default_factory=list)
    negatives: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Anchor:
    """A positive state with what a group needs: its theorem and its sibling pool."""

    state: int
    theorem: str
    depth: int
    remaining: int
    siblings: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Decision:
    """An expanded node whose children are both on and off its search's proof path (module docstring)."""

    theorem: str
    depth: int  # the children's depth (1: the root's children)
    children: tuple[int, ...]  # distinct state indexes
    on_path: tuple[bool, ...]  # per child: an edge of this search on a verified proof path produced it
    logprobs: tuple[float, ...] | None  # per child: the highest log-prob of a tactic that produced it


@dataclass(slots=True)
class EbmDataset:
    """States and goals of every theorem read, split by theorem."""

    states: list[State]
    theorems: dict[str, TheoremData]
    edges: int
    decisions: list[Decision] = field(default_factory=list)

    def split_decisions(self, split: Split) -> list[Decision]:
        """The decisions of the theorems in `split`."""
        return [d for d in self.decisions if self.theorems[d.theorem].split == split]

    def anchors(self, split: Split) -> list[Anchor]:
        """The positive states of the theorems in `split`, in a stable order."""
        out = []
        for theorem in self.theorems.values():
            if theorem.split != split:
                continue
            for index in theorem.positives:
                state = self.states[index]
                out.append(Anchor(index, theorem.name, state.depth, _remaining(state), tuple(sorted(state.siblings))))
        return out

    def split_states(self, split: Split) -> list[int]:
        """Every state of the theorems in `split`."""
        return [i for t in self.theorems.values() if t.split == split for i in (*t.positives, *t.negatives)]

    def texts(self) -> list[str]:
        """Distinct texts to embed: every state and every goal (raw states; the caller formats them)."""
        seen: dict[str, None] = {}
        for state in self.states:
            seen.setdefault(state.text, None)
        for theorem in self.theorems.values():
            seen.setdefault(theorem.goal, None)
        return list(seen)


def _columns(table: Any) -> dict[str, list[Any]]:
    missing = [name for name in EDGE_COLUMNS if name not in table.column_names]
    if missing:
        raise InputError(f"trajectory rows lack the columns {missing}")
    names = [*EDGE_COLUMNS, *(name for name in OPTIONAL_COLUMNS if name in table.column_names)]
    return {name: table.column(name).to_pylist() for name in names}


def build_dataset(tables: Sequence[Any], *, valid_fraction: float, salt: str = "burnqed") -> EbmDataset:
    """The dataset of the trajectory rows in `tables` (pyarrow tables with `EDGE_COLUMNS`, one per prefix). Node ids
    are only unique within one search: a search is the rows of one run id and theorem in one prefix (a merged prefix
    holds several searches of a theorem, iteration 0's search and its noise pass)."""
    states: list[State] = []
    index_of: dict[tuple[str, str], int] = {}
    theorems: dict[str, TheoremData] = {}
    searches: list[_Search] = []
    edges = 0
    for source, table in enumerate(tables):
        cols = _columns(table)
        edges += len(cols["theorem"])
        trees: dict[tuple[str, str], list[int]] = defaultdict(list)  # one search: its run id and theorem
        for row, (run_id, name) in enumerate(zip(cols["run_id"], cols["theorem"], strict=True)):
            trees[(run_id, name)].append(row)
        for (_, name), rows in trees.items():
            searches.append(_add_tree(name, rows, cols, source, states, index_of, theorems, valid_fraction, salt))
    for theorem in theorems.values():
        _promote_renamed(theorem, states)
    decisions: list[Decision] = []
    for search in searches:
        _mark_siblings(search, states)
        decisions += _decisions(search, states, index_of)
    for theorem in theorems.values():
        positives = {i for i in (*theorem.positives, *theorem.negatives) if states[i].positive}
        theorem.positives = sorted(positives)
        theorem.negatives = sorted(set(theorem.negatives) - positives)
        for index in theorem.positives:  # a state positive anywhere is no one's sibling (farther: `NegativeSampler`)
            states[index].siblings -= positives
    return EbmDataset(states, theorems, edges, decisions)


@dataclass(slots=True)
class _Search:
    """One search of one theorem: its rows of one prefix, and the state each of its OK edges reached."""

    name: str
    rows: list[int]
    cols: dict[str, list[Any]]
    by_node: dict[int, int]  # node id → row
    node_state: dict[int, int]  # node id → state index


def _promote_renamed(theorem: TheoremData, states: list[State]) -> None:
    """A state equal to one of the theorem's positive states up to the names of its hypotheses and variables
    (`state_up_to_names`: `intro h₁ h₂` where the proof said `intro h₀ h₁`) is positive too, `remaining` tactics from
    a proof like its twin: the same proof, renamed, closes it. Without this such twins are negatives, often the
    positive's own siblings, that no head can tell from it."""
    remaining: dict[str, int] = {}
    for index in theorem.positives:
        key = state_up_to_names(states[index].text)
        own = states[index].remaining
        known = 1 if own is None else own  # a label without a closing edge: as `anchors` reads it
        remaining[key] = min(remaining.get(key, known), known)
    for index in theorem.negatives:
        state = states[index]
        twin = remaining.get(state_up_to_names(state.text)) if not state.positive else None
        if twin is not None:
            state.positive, state.remaining = True, twin
            theorem.positives.append(index)


def _decisions(search: _Search, states: list[State], index_of: dict[tuple[str, str], int]) -> list[Decision]:
    """The decisions of one search of one theorem: per expanded node, its children's distinct states (OK edges
    with a new state; the goal and closing edges have none), on its proof path when one of its edges is, or when
    it equals such an edge's state up to names (`_promote_renamed`)."""
    name, rows, cols = search.name, search.rows, search.cols
    goal = cols["state_before"][next(r for r in rows if cols["parent_id"][r] == 0)]
    logprobs = cols.get("logprob")
    on_path = {state_up_to_names(cols["state_after"][r]) for r in rows
               if cols["outcome"][r] == "ok" and cols["label"][r] == "positive" and cols["state_after"][r]}
    by_parent: dict[int, dict[int, list[Any]]] = defaultdict(dict)  # node → state → [on path, best log-prob, depth]
    for r in rows:
        text = cols["state_after"][r]
        if cols["outcome"][r] != "ok" or not text or text == goal:
            continue
        index = index_of.get((name, text))
        if index is None:  # another search's goal: not a state
            continue
        lp = float(logprobs[r]) if logprobs is not None and logprobs[r] is not None else None
        entry = by_parent[cols["parent_id"][r]].setdefault(index, [False, lp, cols["depth"][r]])
        entry[0] = entry[0] or state_up_to_names(states[index].text) in on_path
        if lp is not None and (entry[1] is None or lp > entry[1]):
            entry[1] = lp
    out = []
    for node in sorted(by_parent):
        children = by_parent[node]
        flags = [entry[0] for entry in children.values()]
        if not any(flags) or all(flags):
            continue
        lps = [entry[1] for entry in children.values()]
        out.append(Decision(name, min(entry[2] for entry in children.values()), tuple(children), tuple(flags),
                            None if any(lp is None for lp in lps) else tuple(lps)))
    return out


def _add_tree(name: str, rows: list[int], cols: dict[str, list[Any]], source: int, states: list[State],
              index_of: dict[tuple[str, str], int], theorems: dict[str, TheoremData], valid_fraction: float,
              salt: str) -> _Search:
    """One search of one theorem (its rows of one prefix) into the dataset: its states, labels and `remaining`."""
    root_rows = [r for r in rows if cols["parent_id"][r] == 0]
    if not root_rows:
        raise InputError(f"theorem {name} (trajectory {source}) has edges but none from the root (parent_id 0)")
    goal = cols["state_before"][root_rows[0]]
    theorem = theorems.get(name)
    if theorem is None:
        theorem = theorems[name] = TheoremData(name, "valid" if stable_split(name, valid_fraction, salt) == "valid"
                                               else "train", goal)
    by_node = {cols["node_id"][r]: r for r in rows}
    node_state = _add_states(name, rows, cols, states, index_of, theorem)
    _mark_remaining(rows, by_node, node_state, cols, states)
    return _Search(name, rows, cols, by_node, node_state)


def _add_states(name: str, rows: list[int], cols: dict[str, list[Any]], states: list[State],
                index_of: dict[tuple[str, str], int], theorem: TheoremData) -> dict[int, int]:
    """Add the states the OK edges reach (other than the goal); node id → state index."""
    node_state: dict[int, int] = {}
    for r in rows:
        text = cols["state_after"][r]
        if cols["outcome"][r] != "ok" or not text or text == theorem.goal:
            continue
        key = (name, text)
        index = index_of.get(key)
        depth = cols["depth"][r]
        if index is None:
            index = index_of[key] = len(states)
            states.append(State(name, text, depth))
        else:
            states[index].depth = min(states[index].depth, depth)
        node_state[cols["node_id"][r]] = index
        if cols["label"][r] == "positive":
            states[index].positive = True
            theorem.positives.append(index)
        else:
            theorem.negatives.append(index)
    return node_state


def _mark_siblings(search: _Search, states: list[State]) -> None:
    """A positive state's siblings: the states reached from its parent node."""
    children: dict[int, list[int]] = defaultdict(list)
    parent_of = {node: search.cols["parent_id"][search.by_node[node]] for node in search.node_state}
    for node, index in search.node_state.items():
        children[parent_of[node]].append(index)
    for node, index in search.node_state.items():
        if states[index].positive:
            states[index].siblings.update(children[parent_of[node]])


def _mark_remaining(rows: list[int], by_node: dict[int, int], node_state: dict[int, int],
                    cols: dict[str, list[Any]], states: list[State]) -> None:
    """Remaining tactics to a proof, walking up from every closing edge."""
    for r in rows:
        if not cols["proof_complete"][r]:
            continue
        total = cols["depth"][r]
        node = cols["parent_id"][r]
        while node in by_node:
            index = node_state.get(node)
            if index is not None:
                remaining = total - cols["depth"][by_node[node]]
                state = states[index]
                state.remaining = remaining if state.remaining is None else min(state.remaining, remaining)
            node = cols["parent_id"][by_node[node]]


def check_trainable(data: EbmDataset, uris: Sequence[str]) -> None:
    """`InputError` saying what is missing when `data` cannot train a head."""
    where = ", ".join(uris) or "the trajectories"
    positives = sum(len(t.positives) for t in data.theorems.values())
    if data.edges == 0:
        raise InputError(f"{where} hold no edges: nothing to train the value model on")
    if positives == 0:
        raise InputError(
            f"{where}: {len(data.theorems)} theorems, {data.edges} edges, but no positive state (no verified proof "
            "longer than one tactic): a trajectory with zero proofs cannot train an EBM. Search more theorems or with "
            "a larger budget first."
        )
    train = data.anchors("train")
    if len(train) < MIN_POSITIVES:
        raise InputError(
            f"{where}: only {len(train)} positive states in the training split ({positives} in all); the value model "
            f"needs at least {MIN_POSITIVES}. Search more theorems, or lower ebm.valid_fraction."
        )
    candidates = len(data.split_states("train")) - len({a.state for a in train})
    if candidates < MIN_NEGATIVES:
        raise InputError(
            f"{where}: only {candidates} negative states in the training split; the value model needs at least "
            f"{MIN_NEGATIVES} to contrast positives with. Search more theorems first."
        )


def quotas(negatives: int, ratios: tuple[float, float, float]) -> tuple[int, int, int]:
    """(siblings, same theorem, other theorems) counts out of `negatives`, in the ratios (normalised)."""
    total = sum(ratios)
    if total <= 0:
        raise ValueError("the negative ratios sum to 0")
    sibling = round(negatives * ratios[0] / total)
    same = min(negatives - sibling, round(negatives * ratios[1] / total))
    return sibling, same, negatives - sibling - same


@dataclass(frozen=True, slots=True)
class GroupShape:
    """What an InfoNCE group holds besides its anchor: K negatives, the (sibling, same theorem, other theorems)
    ratios and up to `farther` farther states (module docstring)."""

    negatives: int
    ratios: tuple[float, float, float]
    farther: int = 0

    @classmethod
    def of(cls, cfg: EbmConfig) -> GroupShape:
        """The shape the `ebm` section configures: every trainer of a head and its evidence draw groups so."""
        return cls(cfg.negatives, (cfg.sibling_ratio, cfg.same_theorem_ratio, cfg.other_theorem_ratio),
                   cfg.farther_negatives)


class NegativeSampler:
    """Draws InfoNCE groups for the anchors of one split (module docstring)."""

    def __init__(self, data: EbmDataset, split: Split, shape: GroupShape, *, seed: int) -> None:
        self.data = data
        self.negatives = shape.negatives
        self.farther = min(max(shape.farther, 0), shape.negatives)
        self.quotas = quotas(shape.negatives, shape.ratios)
        self.rng = random.Random(seed)
        self.pool = data.split_states(split)  # every state of the split: the other-theorem pool minus own
        self.own: dict[str, set[int]] = {
            t.name: {*t.positives, *t.negatives} for t in data.theorems.values() if t.split == split
        }

    def group(self, anchor: Anchor) -> list[int]:
        """[anchor.state, K negatives]."""
        theorem = self.data.theorems[anchor.theorem]
        far = self._draw(self._farther(theorem, anchor), self.farther, set())
        n_sibling, n_same, n_other = _take(self.quotas, len(far))
        siblings = self._draw(list(anchor.siblings), n_sibling, set())
        picked = far + siblings
        n_same += n_sibling - len(siblings)
        same = self._draw(theorem.negatives, n_same, set(picked) | set(anchor.siblings))
        picked += same
        n_other += n_same - len(same)
        picked += self._draw_other(anchor.theorem, n_other, set(picked))
        if len(picked) < self.negatives:
            candidates = picked or self._fallback(anchor.theorem)
            picked += [self.rng.choice(candidates) for _ in range(self.negatives - len(picked))]
        return [anchor.state, *picked]

    def _farther(self, theorem: TheoremData, anchor: Anchor) -> list[int]:
        """The positive states of the anchor's theorem with more tactics remaining to a proof than the anchor."""
        if self.farther <= 0:
            return []
        return [i for i in theorem.positives if _remaining(self.data.states[i]) > anchor.remaining]

    def _draw(self, pool: Sequence[int], count: int, exclude: set[int]) -> list[int]:
        if count <= 0:
            return []
        available = [i for i in pool if i not in exclude]
        if len(available) <= count:
            self.rng.shuffle(available)
            return available
        return self.rng.sample(available, count)

    def _draw_other(self, theorem: str, count: int, exclude: set[int]) -> list[int]:
        own = self.own.get(theorem, set())
        others = len(self.pool) - len(own)
        if count <= 0 or others <= 0:
            return []
        if others <= 4 * count:  # few: enumerate
            return self._draw([i for i in self.pool if i not in own], count, exclude)
        out: list[int] = []
        taken = set(exclude)
        while len(out) < count:  # many: rejection sampling
            index = self.pool[self.rng.randrange(len(self.pool))]
            if index not in own and index not in taken:
                taken.add(index)
                out.append(index)
        return out

    def _fallback(self, theorem: str) -> list[int]:
        negatives = self.data.theorems[theorem].negatives
        if negatives:
            return list(negatives)
        return [i for i in self.pool if i not in self.own.get(theorem, set())]


def _remaining(state: State) -> int:
    """Tactics from a positive state to a proof (1 when its labels lack the closing edge), as its anchor has it."""
    return state.remaining if state.remaining is not None else 1


def _take(quota: tuple[int, int, int], taken: int) -> tuple[int, int, int]:
    """(siblings, same theorem, other theorems) with `taken` slots removed, from the siblings' first."""
    left = list(quota)
    for pool, count in enumerate(left):
        removed = min(count, taken)
        left[pool], taken = count - removed, taken - removed
    return left[0], left[1], left[2]


def fixed_groups(data: EbmDataset, split: Split, shape: GroupShape, *, seed: int) -> list[list[int]]:
    """One group per anchor of `split`, drawn once (validation: the same groups at every evaluation)."""
    anchors = data.anchors(split)
    if not anchors:
        return []
    sampler = NegativeSampler(data, split, shape, seed=seed)
    return [sampler.group(anchor) for anchor in anchors]


def load_dataset(
    uris: Sequence[str], *, valid_fraction: float, salt: str = "burnqed", store: storage.Store, trainable: bool = True
) -> EbmDataset:
    """Read every trajectory prefix and build the dataset; `InputError` when it cannot train a head (`trainable`;
    `ebm embed`, which trains nothing, checks what it needs itself)."""
    from burnqed.trajectory.reader import read_edges, require_trajectories

    if not uris:
        raise InputError("no trajectories given: pass --trajectories PREFIX (repeatable)")
    tables = []
    for uri in uris:
        require_trajectories(uri, store=store)
        tables.append(read_edges(uri, columns=[*EDGE_COLUMNS, *OPTIONAL_COLUMNS], store=store))
    data = build_dataset(tables, valid_fraction=valid_fraction, salt=salt)
    if trainable:
        check_trainable(data, uris)
    return data

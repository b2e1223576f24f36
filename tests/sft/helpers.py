"""Builders for the SFT tests: a prepared-data folder from the bundled corpus, and small trajectories."""

from __future__ import annotations

from pathlib import Path

from burnqed.data.pairs import PAIRS_FILE, TacticPair, stable_split, write_pairs
from burnqed.lean.corpus import goal_pp, load_corpus

VALID_FRACTION = 0.2


def corpus_pairs(limit: int | None = None) -> list[TacticPair]:
    """The bundled corpus' recorded proofs as tactic pairs: train theorems split train/valid by name hash,
    test theorems kept as 'test'. States are the whole goal list before each tactic, as search sees them."""
    pairs: list[TacticPair] = []
    for theorem in load_corpus().theorems[:limit]:
        split = "test" if theorem.split == "test" else stable_split(theorem.name, VALID_FRACTION)
        for proof in theorem.proofs[:1]:
            goals = [theorem.root]
            for depth, tactic in enumerate(proof):
                state = "\n\n".join(goal_pp(theorem.goals[g]) for g in goals)
                transition = theorem.lookup(goals[0], tactic)
                assert transition is not None and transition.result is not None
                after = "\n\n".join(goal_pp(theorem.goals[g]) for g in [*transition.result, *goals[1:]])
                pairs.append(TacticPair(theorem.name, "bundled", split, state, tactic, after, depth))
                goals = [*transition.result, *goals[1:]]
    return pairs


def write_data_folder(folder: Path, pairs: list[TacticPair] | None = None) -> Path:
    """A prepared-data folder holding just `pairs.parquet` (what `burnqed sft` reads)."""
    write_pairs(folder / PAIRS_FILE, corpus_pairs() if pairs is None else pairs)
    return folder

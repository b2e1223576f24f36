"""Builders for the SFT tests: a prepared-data folder from the bundled corpus (`burnqed.data.pairs.corpus_pairs`)."""

from __future__ import annotations

from pathlib import Path

from burnqed.data.pairs import PAIRS_FILE, TacticPair, corpus_pairs, write_pairs


def write_data_folder(folder: Path, pairs: list[TacticPair] | None = None) -> Path:
    """A prepared-data folder holding just `pairs.parquet` (what `burnqed sft` reads)."""
    write_pairs(folder / PAIRS_FILE, corpus_pairs() if pairs is None else pairs)
    return folder

"""The `[data]` section: the data sources and how they become a theorem index and tactic pairs (docs/data.md)."""

from __future__ import annotations

import warnings
from typing import Any, Literal

from pydantic import Field, model_validator

from burnqed.config.identity import shapes
from burnqed.config.section import Section

# A source kind's old name → its name: read as the new one with a `KindRenamed` warning, which the command line
# prints as its deprecation line (docs/commands.md, "Renamed options").
RENAMED_KINDS: dict[str, str] = {"minif2f": "benchmark"}


class KindRenamed(FutureWarning):
    """A source was given a kind's old name (`RENAMED_KINDS`); `args` are the old and the new name."""


class SourceSpec(Section):
    """One data source for `burnqed data prepare` (docs/data.md lists each kind's columns)."""

    kind: Literal[
        "bundled", "world", "lean-workbook", "goedel-pset", "goedel-proofs", "lean-github", "numina-lean", "benchmark",
        "pairs",
    ] = Field(description="Which converter reads it: 'lean-workbook' (internlm/Lean-Workbook), 'goedel-pset' "
              "(Goedel-LM/Goedel-Pset-v1, statements only), 'goedel-proofs' (Goedel-LM/Lean-workbook-proofs), "
              "'numina-lean' (AI-MO/NuminaMath-LEAN), 'benchmark' (a benchmark as users have it: a DeepSeek/miniF2F "
              "jsonl, a .lean file or folder, an id-only layout or a prototype index; keeps its test/valid split, "
              "needs no proofs, and training theorems equal to its statements are dropped), "
              "'lean-github' (internlm/Lean-Github, traced steps), 'pairs' (tactic pairs in docs/data.md's format, "
              "or a prepared-data folder), 'bundled' (the bundled hand-written replay corpus' proofs), 'world' "
              "(the generated world: train proofs and pool statements; docs/replay-corpus.md).")
    name: str | None = Field(
        default=None,
        description="Label recorded as the `source` of this source's theorems and pairs; unset = the kind.",
    )
    path: str | None = Field(
        default=None,
        description="Local file or folder (JSON, JSONL, Parquet) in the source's own schema, or an s3:// URI of "
        "one; for 'bundled'/'world' a replay corpus file or folder (unset = the bundled corpus / the checked "
        "world of data.world_seed). A name like 'org/name' that is no "
        "local path is loaded from the Hugging Face hub with `datasets` (needs network and burnqed[train]).",
    )
    split: str | None = Field(
        default=None,
        description="Split to read: the hub dataset split (default 'train'); for a local folder only files named "
        "after it (when any are); rows whose own `split` column differs are skipped. 'bundled': train (default), "
        "pool or test; 'world': unset = train and pool (pool theorems give statements only), else one split.",
    )
    limit: int | None = Field(default=None, ge=1, description="Read at most this many rows (a quick subset).")
    answers: Literal["both", "produced", "given"] | None = Field(
        default=None,
        description="A benchmark source's answer-bearing theorems (a header definition `:= sorry` the statement "
        "uses, PutnamBench's `…_solution`): 'produced' indexes the theorem as written (the prover writes the "
        "answer), 'given' the form with the reference answer written in, named NAME_given (PutnamBench's "
        "rewrite_solutions.py; a slot without a reference answer gives none), 'both' (unset) each. Benchmark sources "
        "only.",
    )

    @model_validator(mode="before")
    @classmethod
    def _renamed_kind(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("kind"), str) and data["kind"] in RENAMED_KINDS:
            warnings.warn(KindRenamed(data["kind"], RENAMED_KINDS[data["kind"]]), stacklevel=2)
            return {**data, "kind": RENAMED_KINDS[data["kind"]]}
        return data

    @model_validator(mode="after")
    def _answers_of_a_benchmark(self) -> SourceSpec:
        if self.answers is not None and self.kind != "benchmark":
            raise ValueError(f"answers = {self.answers!r} applies to a benchmark source (kind 'benchmark'), not to "
                             f"kind {self.kind!r}")
        return self


class DataConfig(Section):
    """Data preparation (`burnqed data prepare`): sources → theorem index + tactic pairs (docs/data.md)."""

    sources: list[SourceSpec] = Field(
        default_factory=lambda: [SourceSpec(kind="bundled"), SourceSpec(kind="world")],
        description="Sources to convert, in order (earlier wins on duplicate theorems). Default: the bundled "
        "hand-written corpus' train split and the generated world's train and pool splits.",
        json_schema_extra=shapes("prepare-data", note="each source's file is stamped by content too"),
    )
    world_seed: int = Field(
        default=0,
        ge=0,
        description="Seed of the checked world (the 'world' source without a path and the embedded benchmark's "
        "world theorems; leankit.world.checked): its instances and their train/pool/test assignment.",
        json_schema_extra=shapes("prepare-data", note="search and eval: through their theorem set, by content"),
    )
    world_sketches: bool = Field(
        default=False,
        description="Add the sketch family to the checked world of data.world_seed (leankit.world.sketches: "
        "statements proved by establishing two or three facts with `have` first, three statements per situation "
        "sharing its facts, in train, pool and test). Off: the world of version 3 that the figures of "
        "docs/results.md were measured on.",
        json_schema_extra=shapes("prepare-data", note="search and eval: through their theorem set, by content"),
    )
    valid_fraction: float = Field(
        default=0.1, ge=0.0, lt=1.0, description="Share of theorems (by stable name hash) held out for validation.",
        json_schema_extra=shapes("prepare-data", "trace-data"),
    )
    split_salt: str = Field(default="burnqed", description="Salt of the stable name hash that assigns splits.",
                            json_schema_extra=shapes("prepare-data", "trace-data", "sft", "train-ebm", "joint-study"))
    contrastive_min_depth: int = Field(
        default=3, ge=1, description="Theorems with a proof of at least this many tactics form the contrastive "
        "(EBM) pool.",
        json_schema_extra=shapes("prepare-data", "trace-data"),
    )
    replay: bool = Field(
        default=True,
        description="Replay whole proofs tactic by tactic through the Lean edge so states come from Lean; "
        "off = keep only sources that already carry states (whole-proof sources give index entries only).",
        json_schema_extra=shapes("prepare-data"),
    )

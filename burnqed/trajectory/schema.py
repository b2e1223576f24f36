"""The trajectory format (docs/trajectories.md): the Arrow schema of one row per search edge, the on-storage layout of
a trajectory prefix, and its JSON manifests.

    {prefix}/part-000000.parquet   rows of some finished theorems (zstd)
    {prefix}/part-000000.json      PartManifest: the commit record; a data file without one does not count
    {prefix}/_SUCCESS.json         CompletionMarker: the writer finished (written last)

Build tables from `records.results.Edge` lists with `edges_to_table` (one theorem) or `theorems_to_table` (many,
column by column: the writer's fast path). `SCHEMA_VERSION` is recorded in every manifest; `ADDED_IN` names the
version that brought each column, and a part of a lower version reads with the columns it lacks at their defaults
(`column_default`), so every reader sees the columns of `SCHEMA`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from burnqed.records.results import Edge, TheoremResult

SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("iteration", pa.int32(), nullable=False),
        pa.field("theorem", pa.string(), nullable=False),
        pa.field("node_id", pa.int32(), nullable=False),
        pa.field("parent_id", pa.int32(), nullable=False),
        pa.field("depth", pa.int32(), nullable=False),
        pa.field("state_before", pa.string(), nullable=False),
        pa.field("tactic", pa.string(), nullable=False),
        pa.field("state_after", pa.string(), nullable=True),
        pa.field("outcome", pa.string(), nullable=False),  # EdgeOutcome value (ok, error, ..., prompt_rejected)
        pa.field("error", pa.string(), nullable=True),
        pa.field("logprob", pa.float64(), nullable=False),
        pa.field("n_tokens", pa.int32(), nullable=False),
        pa.field("score", pa.float64(), nullable=True),
        pa.field("energy", pa.float64(), nullable=True),
        pa.field("label", pa.string(), nullable=False),  # Label value: positive|negative|unknown
        pa.field("on_proof_path", pa.bool_(), nullable=False),
        pa.field("proof_complete", pa.bool_(), nullable=False),
        pa.field("lean_ms", pa.float64(), nullable=False),
        pa.field("gen_ms", pa.float64(), nullable=False),
        pa.field("timestamp_ms", pa.int64(), nullable=False),
        # version 2: repair (docs/search.md, "Repair"; records.results.Edge)
        pa.field("revision", pa.int32(), nullable=False),  # 0: a fresh attempt's row; k: made by its k-th revision
        pa.field("revises", pa.int32(), nullable=True),  # a revision's row: the row where the revised proof failed
        pa.field("feedback", pa.string(), nullable=True),  # where a proof failed: Lean's messages (Feedback JSON)
    ]
)
COLUMNS: tuple[str, ...] = tuple(SCHEMA.names)
SCHEMA_VERSION = 2
ADDED_IN: dict[str, int] = {"revision": 2, "revises": 2, "feedback": 2}  # every other column is in version 1

SUCCESS_NAME = "_SUCCESS.json"
PART_RE = re.compile(r"^part-(\d{6,})\.(parquet|json)$")


def columns_of(version: int) -> tuple[str, ...]:
    """The columns a part of schema `version` holds, in the schema's order."""
    return tuple(name for name in COLUMNS if ADDED_IN.get(name, 1) <= version)


def column_default(name: str, rows: int) -> pa.Array:
    """What a part of an older version reads as for a column it lacks: every row a fresh attempt's (revision 0, no
    revised row, no feedback recorded)."""
    field = SCHEMA.field(name)
    if name == "revision":
        return pa.array([0] * rows, type=field.type)
    return pa.nulls(rows, type=field.type)


def data_name(seq: int) -> str:
    """File name of part `seq`'s Parquet data."""
    return f"part-{seq:06d}.parquet"


def manifest_name(seq: int) -> str:
    """File name of part `seq`'s commit manifest."""
    return f"part-{seq:06d}.json"


class PartManifest(BaseModel):
    """The commit record of one part: written after its data file; a part without one does not exist."""

    model_config = ConfigDict(extra="forbid")

    part: int = Field(ge=0, description="Sequence number of the part within its prefix.")
    data: str = Field(description="Name of the part's Parquet file, relative to the prefix.")
    rows: int = Field(ge=0, description="Rows (edges) in the data file.")
    sha256: str | None = Field(default=None, pattern="^[0-9a-f]{64}$",
                               description="SHA-256 (hex) of the data file as written; None in parts written "
                               "before it was recorded (a merge then decodes every row instead).")
    theorems: list[TheoremResult] = Field(description="Every theorem whose search finished in this part, "
                                          "including theorems with no edges (start errors).")
    run_id: str = Field(description="Run the rows belong to.")
    iteration: int = Field(ge=0, description="Expert-iteration index the rows belong to.")
    written_at: datetime = Field(description="When the part was committed (UTC).")
    source: str | None = Field(default=None, description="Where a merge copied this part from (URI of the "
                               "source manifest); None for parts written by a search.")
    schema_version: int = Field(default=1, ge=1, le=SCHEMA_VERSION,
                                description="The trajectory schema its data file follows (1 in manifests written "
                                "before the field existed); a merge copies it with the part.")


class CompletionMarker(BaseModel):
    """`_SUCCESS.json`: the writer (or a merge) finished; its presence makes the prefix complete."""

    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(description="Run the trajectory belongs to.")
    iteration: int = Field(ge=0, description="Expert-iteration index.")
    parts: list[str] = Field(description="Manifest names of every committed part, in order.")
    theorems: int = Field(ge=0, description="Theorems recorded over all parts.")
    proved: int = Field(ge=0, description="Theorems proved over all parts.")
    rows: int = Field(ge=0, description="Rows (edges) over all parts.")
    written_at: datetime = Field(description="When the marker was written (UTC).")
    sources: list[str] = Field(default_factory=list, description="Input prefixes, for a merged trajectory.")
    extra: dict[str, object] = Field(default_factory=dict, description="Caller-supplied details (config digest, ...).")


def _edge_columns(edges: Sequence[Edge]) -> dict[str, list[object]]:
    return {
        "node_id": [e.node_id for e in edges],
        "parent_id": [e.parent_id for e in edges],
        "depth": [e.depth for e in edges],
        "state_before": [e.state_before for e in edges],
        "tactic": [e.tactic for e in edges],
        "state_after": [e.state_after for e in edges],
        "outcome": [e.outcome.value for e in edges],
        "error": [e.error for e in edges],
        "logprob": [e.logprob for e in edges],
        "n_tokens": [e.n_tokens for e in edges],
        "score": [e.score for e in edges],
        "energy": [e.energy for e in edges],
        "label": [e.label.value for e in edges],
        "on_proof_path": [e.on_proof_path for e in edges],
        "proof_complete": [e.proof_complete for e in edges],
        "lean_ms": [e.lean_ms for e in edges],
        "gen_ms": [e.gen_ms for e in edges],
        "timestamp_ms": [e.timestamp_ms for e in edges],
        "revision": [e.revision for e in edges],
        "revises": [e.revises for e in edges],
        "feedback": [e.feedback for e in edges],
    }


def theorems_to_table(run_id: str, iteration: int, theorems: Iterable[tuple[str, Sequence[Edge]]]) -> pa.Table:
    """One table of many theorems' edges (`(theorem name, edges)` pairs), built column by column."""
    names: list[object] = []
    edges: list[Edge] = []
    for name, theorem_edges in theorems:
        names.extend([name] * len(theorem_edges))
        edges.extend(theorem_edges)
    columns = _edge_columns(edges)
    columns["run_id"] = [run_id] * len(edges)
    columns["iteration"] = [iteration] * len(edges)
    columns["theorem"] = names
    arrays = [pa.array(columns[field.name], type=field.type) for field in SCHEMA]
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def edges_to_table(run_id: str, iteration: int, theorem: str, edges: Sequence[Edge]) -> pa.Table:
    """The rows of one theorem's search."""
    return theorems_to_table(run_id, iteration, [(theorem, edges)])


def empty_table(columns: Sequence[str] | None = None) -> pa.Table:
    """A table with no rows and the schema's (selected) columns."""
    schema = SCHEMA if columns is None else pa.schema([SCHEMA.field(name) for name in columns])
    return schema.empty_table()

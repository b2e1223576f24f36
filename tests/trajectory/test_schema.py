"""The trajectory row schema: docs/trajectories.md's columns, in order, with their types; tables from edges."""

from __future__ import annotations

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

from burnqed.records.results import EdgeOutcome
from burnqed.trajectory.schema import (
    COLUMNS,
    SCHEMA,
    SCHEMA_VERSION,
    columns_of,
    edges_to_table,
    empty_table,
    theorems_to_table,
)
from tests.trajectory.factories import edge

EXPECTED = [
    ("run_id", pa.string(), False),
    ("iteration", pa.int32(), False),
    ("theorem", pa.string(), False),
    ("node_id", pa.int32(), False),
    ("parent_id", pa.int32(), False),
    ("depth", pa.int32(), False),
    ("state_before", pa.string(), False),
    ("tactic", pa.string(), False),
    ("state_after", pa.string(), True),
    ("outcome", pa.string(), False),
    ("error", pa.string(), True),
    ("logprob", pa.float64(), False),
    ("n_tokens", pa.int32(), False),
    ("score", pa.float64(), True),
    ("energy", pa.float64(), True),
    ("label", pa.string(), False),
    ("on_proof_path", pa.bool_(), False),
    ("proof_complete", pa.bool_(), False),
    ("lean_ms", pa.float64(), False),
    ("gen_ms", pa.float64(), False),
    ("timestamp_ms", pa.int64(), False),
    # schema version 2: repair
    ("revision", pa.int32(), False),
    ("revises", pa.int32(), True),
    ("feedback", pa.string(), True),
]


def test_schema_has_the_design_columns_in_order_with_types():
    assert [(f.name, f.type, f.nullable) for f in SCHEMA] == EXPECTED
    assert [name for name, _, _ in EXPECTED] == list(COLUMNS)
    assert SCHEMA_VERSION == 2
    assert columns_of(1) == COLUMNS[:21] and columns_of(2) == COLUMNS


def test_a_revision_row_keeps_its_place_in_the_chain():
    revised = edge(2)
    revised.revision, revised.revises, revised.feedback = 1, 1, None
    failed = edge(1, outcome=EdgeOutcome.ERROR)
    failed.feedback = '{"proof":"simp","messages":[],"cut":0,"goal":null}'
    rows = edges_to_table("r", 0, "thm", [failed, revised]).to_pylist()
    assert [(r["revision"], r["revises"], r["feedback"]) for r in rows] == [(0, None, failed.feedback), (1, 1, None)]


def test_edges_to_table_one_row_per_edge_with_values():
    edges = [edge(1, 0), edge(2, 1, EdgeOutcome.ERROR, depth=2)]
    table = edges_to_table("r", 3, "thm", edges)
    assert table.schema == SCHEMA
    rows = table.to_pylist()
    assert rows[1] == {
        "run_id": "r", "iteration": 3, "theorem": "thm", "node_id": 2, "parent_id": 1, "depth": 2,
        "state_before": "state 1", "tactic": "tactic 2", "state_after": None, "outcome": "error",
        "error": "error at 2", "logprob": -1.0, "n_tokens": 5, "score": None, "energy": None,
        "label": "unknown", "on_proof_path": False, "proof_complete": False, "lean_ms": 12.0,
        "gen_ms": 102.0, "timestamp_ms": 1_700_000_000_002, "revision": 0, "revises": None, "feedback": None,
    }
    assert rows[0]["state_after"] == "state 1" and rows[0]["outcome"] == "ok"


def test_theorems_to_table_repeats_each_theorem_name_over_its_edges():
    table = theorems_to_table("r", 0, [("a", [edge(1), edge(2)]), ("empty", []), ("b", [edge(1)])])
    assert table.column("theorem").to_pylist() == ["a", "a", "b"]
    assert table.column("node_id").to_pylist() == [1, 2, 1]
    assert table.column("run_id").to_pylist() == ["r", "r", "r"]


def test_empty_tables_keep_the_schema():
    assert theorems_to_table("r", 0, []).schema == SCHEMA
    assert empty_table(["theorem", "depth"]).schema.names == ["theorem", "depth"]
    assert empty_table().num_rows == 0

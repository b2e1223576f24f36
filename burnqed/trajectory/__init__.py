"""Trajectories: the search's edges as chunked Parquet parts with commit manifests (docs/trajectories.md), the
labelling rule, resume, shard merge and summaries. See docs/trajectories.md.

    label_edges(edges, proof_leaves, proved)                        # once per finished theorem
    with TrajectoryWriter(uri, run_id=..., iteration=..., store=store) as w:     # search: append, checkpoint, finish
        w.add(result, edges); ...; w.finish()
    finished_theorems(uri, store=store) / read_edges(uri, columns, store=store) / summarize(uri, store=store)
    merge_trajectories(shards, out, store=store)
"""

from burnqed.trajectory.labels import label_edges
from burnqed.trajectory.merge import MergeReport, merge_trajectories
from burnqed.trajectory.reader import (
    committed_parts,
    finished_theorems,
    is_complete,
    read_edges,
    read_marker,
    read_results,
    require_trajectories,
)
from burnqed.trajectory.schema import (
    COLUMNS,
    SCHEMA,
    CompletionMarker,
    PartManifest,
    edges_to_table,
    theorems_to_table,
)
from burnqed.trajectory.summary import TrajectorySummary, render_summary, summarize
from burnqed.trajectory.writer import TrajectoryWriter

__all__ = [
    "COLUMNS",
    "SCHEMA",
    "CompletionMarker",
    "MergeReport",
    "PartManifest",
    "TrajectorySummary",
    "TrajectoryWriter",
    "committed_parts",
    "edges_to_table",
    "finished_theorems",
    "is_complete",
    "label_edges",
    "merge_trajectories",
    "read_edges",
    "read_marker",
    "read_results",
    "render_summary",
    "require_trajectories",
    "summarize",
    "theorems_to_table",
]

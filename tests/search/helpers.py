"""Theorems, settings and what to compare, for the search and eval tests."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from burnqed.data.index import bundled_index_path
from burnqed.records.theorem import Theorem
from burnqed.storage import Store
from burnqed.trajectory.reader import read_edges, read_results
from leankit.corpus import TheoremSpec
from minilean.replay.replay_server import LATENCY_VARIABLE


def as_forall_declaration(spec: TheoremSpec) -> Theorem:
    """The corpus theorem written as one ∀ statement, `theorem NAME : ∀ …` (no binders before the colon): it starts
    at the recorded root, the ∀ goal these tests' scripted policies branch on (`intro x` or `intro x h₀`). A theorem
    given only as a ∀ statement starts in binder form instead; tests/sft/test_prompt_identity.py and
    tests/lean/test_theorem_start.py search and start those."""
    theorem = Theorem.from_recorded(spec)
    return theorem.model_copy(update={"signature": f": {theorem.statement}"})


REPLAY = json.dumps([sys.executable, "-m", "minilean.replay"])


def slowed(ms: int) -> tuple[str, str]:
    """`--set` arguments slowing the replay Lean by `ms` per tactic, through lean.env (minilean.replay's latency
    variable): for the run a signal must land in, while the uninterrupted run and the resume use the same
    `lean.command` at full speed."""
    return "--set", f"lean.env={json.dumps({LATENCY_VARIABLE: str(ms)})}"


SLOWED = slowed(50)  # one theorem at a time (`one_at_a_time`) takes about half a second
# What may differ between two runs of the same search: when things happened, and the run's id.
TIMING_COLUMNS = ("run_id", "lean_ms", "gen_ms", "timestamp_ms")
TIMING_FIELDS = {"time_s", "policy_s", "lean_s", "value_s", "usage"}


def small_index(folder: Path, count: int = 6) -> Path:
    """The first `count` theorems of the bundled test split, as a theorem index of their own."""
    index = json.loads(bundled_index_path("test").read_text(encoding="utf-8"))
    index["name"], index["theorems"] = f"first-{count}", index["theorems"][:count]
    path = folder / "theorems.json"
    path.write_text(json.dumps(index), encoding="utf-8")
    return path


def one_at_a_time(model: Path) -> list[str]:
    """One theorem at a time on one worker (with `SLOWED`, about half a second each, so a kill lands between two
    commits)."""
    return ["--set", f"policy.model={model}", "--set", f"lean.command={REPLAY}", "--set", "lean.workers=1",
            "--set", "search.theorems_per_worker=1", "--set", "search.revisits=0", "--set", "search.max_nodes=4"]


def rows(uri: str, store: Store) -> list[dict[str, Any]]:
    table = read_edges(uri, store=store)
    kept = [name for name in table.column_names if name not in TIMING_COLUMNS]
    return sorted(table.select(kept).to_pylist(), key=lambda row: (row["theorem"], row["node_id"]))


def results(uri: str, store: Store) -> list[dict[str, Any]]:
    return sorted((r.model_dump(exclude=TIMING_FIELDS) for r in read_results(uri, store=store)),
                  key=lambda r: str(r["name"]))

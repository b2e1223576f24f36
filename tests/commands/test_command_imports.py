"""A command's process imports what its path calls: each start of a pod's or a test's `burnqed` pays its imports
(issue 89). Checked in a fresh interpreter, where `sys.modules` holds only what the imports named there loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from typing import Any

# One fresh interpreter, four steps; after each, which of the modules its path never calls were loaded, as JSON:
# - `burnqed fetch` (each pod's init containers): `check_packages` (the images' table) and a fetch from a folder;
# - `burnqed start` (commands/start.py's function and the reuse check it calls; `burnqed.eval.compare`: the eval
#   package's modules load one by one, the package re-exports none);
# - `open_pool` (data prepare, lean check, lean selftest);
# - the check of a trajectory prefix (`check_trajectory_prefix`: merge-trajectories, eval, search): the files a prefix
#   may hold and whose prefix it is (pyarrow with the parts' names, `trajectory.schema`: last).
LOADED = """
import json, sys, tempfile
from pathlib import Path
HEAVY = ("numpy", "pyarrow", "pandas", "burnqed.search.modes", "burnqed.eval.compare")
def loaded(*names):
    return [name for name in names if name in sys.modules]
import burnqed.cli
from burnqed.cluster.fetch import fetch
from burnqed.commands.kit import check_packages
from burnqed.config import Config
from burnqed.storage import Store
with tempfile.TemporaryDirectory() as folder:
    (Path(folder) / "source").mkdir()
    (Path(folder) / "source" / "a.txt").write_text("a")
    store = Store(cache_dir=Path(folder) / "cache")
    fetched = [check_packages("fetch", Config()), fetch(f"{folder}/source", Path(folder) / "dest", store=store).files]
    steps = {"fetch": loaded(*HEAVY, "s3fs", "burnqed.runner.plan", "burnqed.records.results")}
    import burnqed.commands.start, burnqed.eval.best_so_far, burnqed.layout, burnqed.runner.reuse
    from burnqed.eval.best_so_far import StartRecord, choose_start, load_results
    steps["start"] = loaded(*HEAVY)
    from burnqed.commands.edges import open_pool
    steps["open_pool"] = loaded(*HEAVY)
    from burnqed.commands.outputs import trajectory_file, trajectory_stage
    names = ("_EVAL.json", "_inflight/t/round-000000.json", "part-000000.parquet", "x.txt")
    found = [*[trajectory_file(name) for name in names], trajectory_stage(store, f"{folder}/source")]
    steps["prefix"] = loaded("burnqed.eval.identity", "burnqed.search.journal")
print(json.dumps({"fetched": fetched, "found": found, "loaded": steps}))
"""


@cache
def loaded() -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", LOADED], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_a_fetch_from_a_folder_loads_neither_s3_nor_pyarrow_nor_the_plan() -> None:
    """A fetch copies files: no trajectory or data format, no S3 client for a local source, and the images' table
    its check of its needs reads (`check_packages`) without the run plan's stages and their result records."""
    assert loaded()["fetched"] == [[], 1]  # no need of an extra, one file copied
    assert loaded()["loaded"]["fetch"] == []


def test_the_check_of_a_trajectory_prefix_loads_neither_the_eval_identity_nor_the_search_journal() -> None:
    """merge-trajectories checks its output prefix before it merges: the names an eval's identity and a hybrid
    search's journal have in a prefix come without the eval's identity (the search modes) or the journal."""
    assert loaded()["found"] == [True, True, True, False, None]  # a folder with a.txt alone is nobody's prefix yet
    assert loaded()["loaded"]["prefix"] == []


def test_a_start_and_a_lean_pool_load_neither_pyarrow_nor_the_search_machinery() -> None:
    """`burnqed start` reads eval.json documents (`EvalResult`): no trajectory or prepared-data format (pyarrow,
    numpy), no search mode and no other eval module; `open_pool`'s commands open Lean only: no search mode either."""
    assert {step: loaded()["loaded"][step] for step in ("start", "open_pool")} == {"start": [], "open_pool": []}

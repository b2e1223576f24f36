"""A command's process imports what its path calls: each start of a pod's or a test's `burnqed` pays its imports
(issue 89). Checked in a fresh interpreter, where `sys.modules` holds only what the imports named there loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# The modules `burnqed start` imports (commands/start.py's function and the reuse check it calls), then those of
# `open_pool` (data prepare, lean check, lean selftest); which of the modules neither path calls each step loaded, as
# JSON (`burnqed.eval.compare`: the eval package's modules load one by one, the package re-exports none).
LOADED = """
import json, sys
HEAVY = ("numpy", "pyarrow", "pandas", "burnqed.search.modes", "burnqed.eval.compare")
def heavy():
    return [name for name in HEAVY if name in sys.modules]
import burnqed.cli, burnqed.commands.start, burnqed.eval.best_so_far, burnqed.layout, burnqed.runner.reuse
from burnqed.eval.best_so_far import StartRecord, choose_start, load_results
start = heavy()
from burnqed.commands.edges import open_pool
print(json.dumps({"start": start, "open_pool": heavy()}))
"""


def test_a_start_and_a_lean_pool_load_neither_pyarrow_nor_the_search_machinery() -> None:
    """`burnqed start` reads eval.json documents (`EvalResult`): no trajectory or prepared-data format (pyarrow,
    numpy), no search mode and no other eval module; `open_pool`'s commands open Lean only: no search mode either."""
    done = subprocess.run([sys.executable, "-c", LOADED], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"start": [], "open_pool": []}


# `burnqed fetch SOURCE DEST` (each pod's init containers) run whole in a fresh interpreter, from a local folder; at
# its exit, which of these it loaded (JSON, into the file argv[1] names).
FETCH = """
import atexit, json, sys
HEAVY = ("numpy", "pyarrow", "pandas", "s3fs", "burnqed.runner.plan", "burnqed.records.results")
out, sys.argv = sys.argv[1], ["burnqed", "fetch", *sys.argv[2:]]
atexit.register(lambda: open(out, "w").write(json.dumps([name for name in HEAVY if name in sys.modules])))
from burnqed.cli import main
main()
"""


def test_a_fetch_from_a_folder_loads_neither_s3_nor_pyarrow_nor_the_plan(tmp_path: Path) -> None:
    """A fetch copies files: no trajectory or data format, no S3 client for a local source, and the images' table
    its check of its needs reads (`check_packages`) without the run plan's stages and their result records."""
    (tmp_path / "source").mkdir()
    (tmp_path / "source" / "a.txt").write_text("a")
    loaded = tmp_path / "loaded.json"
    argv = [str(loaded), str(tmp_path / "source"), str(tmp_path / "dest")]
    done = subprocess.run([sys.executable, "-c", FETCH, *argv], capture_output=True, text=True, timeout=120,
                          check=False)
    assert (done.returncode, done.stdout) == (0, f"fetched {tmp_path / 'source'} -> {tmp_path / 'dest'} (1 files, "
                                                 "0.0 MB)\n"), done.stderr
    assert json.loads(loaded.read_text()) == []


# What the check of a trajectory prefix (`check_trajectory_prefix`: merge-trajectories, eval, search) loads to tell
# the files a prefix may hold and whose prefix it is, as JSON.
PREFIX = """
import json, sys, tempfile
from pathlib import Path
from burnqed.commands.outputs import trajectory_file, trajectory_stage
from burnqed.storage import Store
with tempfile.TemporaryDirectory() as folder:
    names = ("_EVAL.json", "_inflight/t/round-000000.json", "part-000000.parquet", "x.txt")
    found = [trajectory_file(name) for name in names]
    found.append(trajectory_stage(Store(cache_dir=Path(folder) / "cache"), folder))
HEAVY = ("burnqed.eval.identity", "burnqed.search.journal", "burnqed.search.modes")
print(json.dumps({"found": found, "loaded": [name for name in HEAVY if name in sys.modules]}))
"""


def test_the_check_of_a_trajectory_prefix_loads_neither_the_eval_identity_nor_the_search_journal() -> None:
    """merge-trajectories checks its output prefix before it merges: the names an eval's identity and a hybrid
    search's journal have in a prefix come without the eval's identity (the search modes) or the journal."""
    done = subprocess.run([sys.executable, "-c", PREFIX], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"found": [True, True, True, False, None], "loaded": []}

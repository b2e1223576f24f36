"""A command's process imports what its path calls: each start of a pod's or a test's `burnqed` pays its imports
(issue 89). Checked in a fresh interpreter, where `sys.modules` holds only what the imports named there loaded."""

from __future__ import annotations

import json
import subprocess
import sys

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

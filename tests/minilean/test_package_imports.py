"""What a process that speaks only minilean's wire layer loads: the strict Pantograph double
(tests/doubles/lean_double.py, started ~550 times a test run) reads requests with `minilean.schema` and the replay
server's tactic rules (`minilean.replay.tactic_reader`), and neither package's `__init__` may pull in a server, the
parser, the corpus models or the generated world (0.31 CPU-s a start with them, 0.10 without; docs/results.md, "Cuts
of 2026-11-28, fifth session"). A fresh interpreter is the subject: this process has them all loaded already."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import DOUBLE

HEAVY = ("lark", "pydantic", "asyncio", "minilean.server", "minilean.frontend", "minilean.replay.replay_server",
         "leankit.corpus", "leankit.world")


def test_the_pantograph_double_loads_the_wire_layer_and_nothing_heavier() -> None:
    code = (
        "import importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('lean_double', {str(DOUBLE)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout))
    assert {"minilean.schema", "minilean.replay.tactic_reader", "leankit.names"} <= loaded  # what it reads with
    assert sorted(name for name in HEAVY if name in loaded) == []

"""What a stage's process imports: each stage of `burnqed iterate` is a process of its own (a pod on a cluster) that
pays for every package it imports (transformers' modeling code ~9 CPU-s, torch ~3.5, datasets with pandas ~2), so
a stage imports only what it uses. Each command runs as the runner runs it, in a fresh interpreter, on the shared
iteration 0 (tests/pipeline/iteration.py), and reports the heavy packages it loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pipeline.iteration import iterate_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # waits for the shared iteration 0

HEAVY = ("torch", "transformers", "trl", "peft", "datasets", "pandas")
# `burnqed ARGS` in this interpreter as `python -m burnqed.cli ARGS` runs it; then the heavy packages it loaded.
PROBE = """
import json, runpy, sys
heavy = json.loads(sys.argv[2])
sys.argv = ["burnqed", *json.loads(sys.argv[1])]
try:
    runpy.run_module("burnqed.cli", run_name="__main__")
except SystemExit as stop:
    code = stop.code
else:
    code = 0
print(json.dumps([code, sorted(m for m in heavy if m in sys.modules)]), file=sys.stderr)
"""


def loaded_by(env: dict[str, str], *args: str) -> tuple[int, str, list[str]]:
    """`burnqed ARGS` in a fresh interpreter: its exit code, stdout and the `HEAVY` packages it imported."""
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args), json.dumps(HEAVY)], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    code, modules = json.loads(done.stderr.strip().splitlines()[-1])
    return code, done.stdout, modules


def test_export_imports_no_datasets(iteration_0: Path, iterate_home: Path, tmp_path: Path) -> None:
    sft, output = iteration_0 / "run" / "iter_0" / "sft", tmp_path / "export"
    code, stdout, modules = loaded_by(iterate_env(iterate_home), "export", "--sft", str(sft), "--output", str(output))
    assert code == 0, stdout
    assert stdout.startswith(f"exported {sft} (full) -> {output}: 153,600 params, float32, ")
    assert modules == ["torch", "transformers"]  # the model it merges and checks; it builds no dataset

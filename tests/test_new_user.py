"""A new user's first mistakes, run as they run them (the real `burnqed` command): each is one line on stderr with the
documented exit code and the way forward, no traceback, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BURNQED = [sys.executable, "-m", "burnqed.cli"]


def burnqed(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BURNQED, *args], capture_output=True, text=True, timeout=120, check=False, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})


def error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one error line: the last line of stderr, with no traceback before it."""
    assert "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: "), done.stderr
    return last


@pytest.mark.slow  # one command start (it starts the Lean pool before the model)
def test_a_mistyped_model_path_is_bad_input_naming_the_folder_it_likely_meant(tmp_path: Path) -> None:
    (tmp_path / "models" / "tiny").mkdir(parents=True)
    done = burnqed("eval", "--output", "r.json", "--set", "policy.model=models/tyni", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert error_line(done) == "error: model folder models/tyni does not exist; did you mean models/tiny?"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models"]

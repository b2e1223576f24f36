"""Artifacts built once per test run and shared read-only by every test that needs them, across the worker
processes of `pytest -n` (pytest-xdist) as well: the tiny model, a BURNQED_HOME with the small generated world,
an embedded iteration. The first process to ask builds the artifact under a file lock; the others wait for it and
read the same folder.

    folder = shared_artifact(tmp_path_factory, "tiny-120", lambda target: build_tiny_model(target, steps=120))

A build that raises publishes nothing: the next process to ask builds again (and fails again, with its own
traceback). Tests must not write into a shared artifact; a test that needs to change one copies it first.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

DONE = ".shared-done"  # written beside an artifact once its build returned


def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder every process of this test run sees: the run's base temporary folder (under xdist, each worker's
    base folder is a child of it)."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared"
    root.mkdir(exist_ok=True)
    return root


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def shared_artifact(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """The folder `name` of this test run, built by `build(folder)` in the first process that asks for it."""
    root = shared_root(tmp_path_factory)
    home = root / name  # a folder of its own, holding the artifact alone (the lock and done marker stay outside)
    target = home / name
    done = root / f"{name}{DONE}"
    with _locked(root / f"{name}.lock"):
        if not done.exists():
            if home.exists():  # a build that failed part of the way: start again
                shutil.rmtree(home)
            home.mkdir()
            build(target)
            done.touch()
    return target

"""What a stage imports: each stage of `burnqed iterate` is a process of its own (a pod on a cluster) that pays for
every package it imports (transformers' modeling code ~7 CPU-s, torch ~3.5, datasets with pandas ~0.6 after
transformers), so a stage imports only what it uses. The commands run in this process (tests/processes.py `cli`)
on the shared iteration 0 (tests/pipeline/iteration.py) with the package they must not use made unimportable
(`sys.modules[name] = None`: an import of it raises ImportError), which a fresh interpreter would only show by its
CPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.pipeline.iteration import iterate_env
from tests.processes import cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # waits for the shared iteration 0


def test_export_builds_no_dataset_and_imports_no_datasets(iteration_0: Path, iterate_home: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from burnqed.cluster import images

    monkeypatch.setitem(sys.modules, "datasets", None)
    # export's early check asks for the whole `train` extra (tests/cluster/test_needs.py), datasets included, which
    # the image holds; here only its import is hidden, so the check is told every package is there
    monkeypatch.setattr(images, "missing", lambda wanted: [])
    sft, output = iteration_0 / "run" / "iter_0" / "sft", tmp_path / "export"
    exported = cli("export", "--sft", str(sft), "--output", str(output),
                   env={**iterate_env(iterate_home), "BURNQED_CONFIG": None})
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.startswith(f"exported {sft} (full) -> {output}: 153,600 params, float32, ")

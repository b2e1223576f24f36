"""The same iteration 0 with its run root on S3 (moto) gives the same artifacts as the local run of
tests/pipeline/test_iterate.py (the shared `iteration_0`); it runs beside that one under `pytest -n`."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnqed.storage import Store
from tests.pipeline.iteration import files_under, iterate, iterate_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def test_the_same_iteration_on_s3_produces_the_same_artifacts(iterate_home: Path, s3_root: str,
                                                             request: pytest.FixtureRequest, tmp_path: Path,
                                                             store: Store) -> None:
    # Without eval-base: the stage is the same eval command as `eval`, covered by the local run.
    done = iterate(s3_root, 0, iterate_env(iterate_home, {"BURNQED_PIPELINE__EVAL_BASE": "false"}))
    assert done.returncode == 0, done.stderr[-3000:]
    fs, path = store.resolve(s3_root)
    mirror = tmp_path / "mirror"
    fs.get(path + "/", str(mirror) + "/", recursive=True)
    remote_files = files_under(mirror)
    for stage in ("data", "sft", "export", "search/shard-0", "search/shard-1", "trajectories", "report"):
        assert f"iter_0/{stage}/_SUCCESS.json" in remote_files, stage
    # the local run, asked for only now: built meanwhile by another worker, or now by this one
    local_run: Path = request.getfixturevalue("iteration_0") / "run"
    local_files = {name for name in files_under(local_run) if name.startswith("iter_0/") and "/eval-base/" not in name}

    # the stopped local run committed its search in more (smaller) parts; everything else is the same
    def without_parts(names: set[str]) -> set[str]:
        return {n for n in names if "/search" not in n and "/trajectories/part-" not in n}

    assert without_parts(remote_files) == without_parts(local_files)
    local_pairs = (local_run / "iter_0" / "data" / "pairs.parquet").read_bytes()
    assert (mirror / "iter_0" / "data" / "pairs.parquet").read_bytes() == local_pairs


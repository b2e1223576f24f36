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
    # Without eval-base and the noise search: the same eval and search commands as `eval` and `search` (other
    # settings), whose S3 outputs are covered here; the local run has them.
    done = iterate(s3_root, 0, iterate_env(iterate_home, {"BURNQED_PIPELINE__EVAL_BASE": "false",
                                                          "BURNQED_PIPELINE__NOISE_TEMPERATURE": "null"}))
    assert done.returncode == 0, done.stderr[-3000:]
    fs, path = store.resolve(s3_root)
    mirror = tmp_path / "mirror"
    fs.get(path + "/", str(mirror) + "/", recursive=True)
    remote_files = files_under(mirror)
    for stage in ("data", "sft", "export", "search/shard-0", "search/shard-1", "trajectories", "report"):
        assert f"iter_0/{stage}/_SUCCESS.json" in remote_files, stage
    # the local run, asked for only now: built meanwhile by another worker, or now by this one
    local_run: Path = request.getfixturevalue("iteration_0") / "run"
    local_files = {name for name in files_under(local_run) if name.startswith("iter_0/")
                   and "/eval-base/" not in name and "/search-noise/" not in name}
    assert "iter_0/search-noise/shard-1/_SUCCESS.json" in files_under(local_run)  # what the S3 run leaves out
    assert not any("search-noise" in name for name in remote_files)

    # the stopped local run committed its search in more (smaller) parts and merged the noise search's too;
    # everything else is the same
    def without_parts(names: set[str]) -> set[str]:
        return {n for n in names if "/search/" not in n and "/trajectories/part-" not in n}

    assert without_parts(remote_files) == without_parts(local_files)
    assert {n for n in remote_files if "/search/" in n and n.endswith("_SUCCESS.json")} == {
        n for n in local_files if "/search/" in n and n.endswith("_SUCCESS.json")}
    local_pairs = (local_run / "iter_0" / "data" / "pairs.parquet").read_bytes()
    assert (mirror / "iter_0" / "data" / "pairs.parquet").read_bytes() == local_pairs


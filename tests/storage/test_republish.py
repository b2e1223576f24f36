"""A stage output published again over its earlier one (a redo: `--force`, or a run with other inputs) holds exactly
the new output's files: a file only the earlier output had is deleted, locally and on S3 (moto), where the publish
rewrites the prefix in place (burnqed/storage/s3.py `publish_prefix`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from burnqed.storage import Store


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_republished_output_holds_only_its_own_files(where: str, request: pytest.FixtureRequest,
                                                        tmp_path: Path, store: Store) -> None:
    root = request.getfixturevalue("s3_root") if where == "s3" else (tmp_path / "run").as_uri()
    uri = f"{root}/iter_0/export"
    with store.staged_output(uri, "export") as folder:
        (folder / "config.json").write_text("{}", encoding="utf-8")
        (folder / "adapter").mkdir()
        (folder / "adapter" / "weights.bin").write_bytes(b"old")
    with store.staged_output(uri, "export") as folder:  # the redo writes no adapter
        (folder / "config.json").write_text('{"redone": true}', encoding="utf-8")
    fs, path = store.resolve(uri)
    held = sorted(name[len(path) + 1:] for name in fs.find(path))
    assert held == ["_SUCCESS.json", "config.json"]
    assert sorted(json.loads(store.read_bytes(f"{uri}/_SUCCESS.json"))["files"]) == ["config.json"]
    assert store.read_bytes(f"{uri}/config.json") == b'{"redone": true}'

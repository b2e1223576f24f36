"""storage.py: URIs, atomic publish, staged outputs with completion markers, downloads — on local files and
on S3 through moto's server."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnqed import storage
from burnqed.errors import InputError


def test_normalize_makes_local_paths_absolute_file_uris(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert storage.normalize("file://./runs") == f"file://{tmp_path}/runs"
    assert storage.normalize("runs/x") == f"file://{tmp_path}/runs/x"
    assert storage.normalize("s3://b/p/") == "s3://b/p"
    assert storage.join("s3://b/p/", "/iter_0/", "sft") == "s3://b/p/iter_0/sft"
    assert storage.local_path("file:///tmp/a") == Path("/tmp/a")
    with pytest.raises(InputError, match="not a local path"):
        storage.local_path("s3://b/p")


def _check_roundtrip(root: str, cache: Path) -> None:
    out = storage.join(root, "iter_0", "sft")
    assert not storage.is_done(out)
    with pytest.raises(RuntimeError), storage.staged_output(out, "sft") as folder:
        (folder / "weights.bin").write_bytes(b"half")
        raise RuntimeError("crash mid-stage")
    assert not storage.is_done(out)
    assert not storage.exists(out)  # nothing published by a failed stage
    extra: dict[str, object] = {}
    with storage.staged_output(out, "sft", extra) as folder:
        (folder / "weights.bin").write_bytes(b"w" * 10)
        (folder / "sub").mkdir()
        (folder / "sub" / "tok.json").write_text("{}")
        extra["loss"] = 0.5
    assert storage.is_done(out)
    marker = storage.read_marker(out)
    assert marker is not None
    assert marker.stage == "sft"
    assert marker.files == {"sub/tok.json": 2, "weights.bin": 10}
    assert marker.extra == {"loss": 0.5}
    local = storage.local_input(out, cache_dir=cache)
    assert (local / "weights.bin").read_bytes() == b"w" * 10
    assert (local / "sub" / "tok.json").read_text() == "{}"
    result = storage.join(root, "iter_0", "eval", "eval.json")
    assert not storage.is_done(result)
    storage.write_bytes(result, b'{"a": 1}')
    assert storage.is_done(result)
    assert storage.read_bytes(result) == b'{"a": 1}'
    with pytest.raises(InputError, match="does not exist"):
        storage.read_bytes(storage.join(root, "missing.json"))
    with pytest.raises(InputError, match="does not exist"):
        storage.local_input(storage.join(root, "nothing-here"), cache_dir=cache)


@pytest.mark.slow
def test_local_roundtrip(tmp_path: Path) -> None:
    _check_roundtrip(f"file://{tmp_path}/run", tmp_path / "cache")


@pytest.mark.slow
def test_s3_roundtrip(s3_root: str, tmp_path: Path) -> None:
    _check_roundtrip(s3_root, tmp_path / "cache")


@pytest.mark.slow
def test_s3_download_is_cached_and_refreshed_when_republished(s3_root: str, tmp_path: Path) -> None:
    out = storage.join(s3_root, "export")
    with storage.staged_output(out, "export") as folder:
        (folder / "f").write_text("one")
    first = storage.local_input(out, cache_dir=tmp_path)
    assert storage.local_input(out, cache_dir=tmp_path) == first  # cached: same folder, no new download
    with storage.staged_output(out, "export") as folder:
        (folder / "f").write_text("two")
    second = storage.local_input(out, cache_dir=tmp_path)
    assert second != first
    assert (second / "f").read_text() == "two"


def test_configure_sets_the_s3_endpoint() -> None:
    import fsspec.config

    from burnqed.config import StorageConfig

    saved = dict(fsspec.config.conf)
    try:
        storage.configure(StorageConfig(endpoint_url="http://127.0.0.1:9", region="eu-west-1"))
        assert fsspec.config.conf["s3"]["client_kwargs"] == {
            "endpoint_url": "http://127.0.0.1:9", "region_name": "eu-west-1"}
    finally:
        fsspec.config.conf.clear()
        fsspec.config.conf.update(saved)


def test_published_artifacts_follow_the_umask_not_private_temp_modes(tmp_path: Path) -> None:
    import os

    old = os.umask(0o022)
    try:
        with storage.staged_output(f"file://{tmp_path}/out", "x") as folder:
            (folder / "a").write_text("1")
        storage.write_bytes(f"file://{tmp_path}/b.json", b"{}")
    finally:
        os.umask(old)
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "out" / "_SUCCESS.json").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "b.json").stat().st_mode & 0o777 == 0o644


def test_cache_dir_from_config_is_where_downloads_go(tmp_path: Path) -> None:
    from burnqed.config import StorageConfig

    storage.configure(StorageConfig(cache_dir=str(tmp_path / "c")))
    try:
        assert storage.default_cache_dir() == tmp_path / "c"
    finally:
        storage.configure(StorageConfig())
    assert storage.default_cache_dir({"BURNQED_HOME": "/h"}) == Path("/h/cache")

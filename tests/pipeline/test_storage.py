"""burnqed.storage: URIs, atomic publish, staged outputs with completion markers, downloads — on local files and
on S3 through moto's server."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from burnqed import storage
from burnqed.config import StorageConfig
from burnqed.errors import InputError
from burnqed.storage import Store


def test_normalize_makes_local_paths_absolute_file_uris(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert storage.normalize("file://./runs") == f"file://{tmp_path}/runs"
    assert storage.normalize("runs/x") == f"file://{tmp_path}/runs/x"
    assert storage.normalize("s3://b/p/") == "s3://b/p"
    assert storage.join("s3://b/p/", "/iter_0/", "sft") == "s3://b/p/iter_0/sft"
    assert storage.local_path("file:///tmp/a") == Path("/tmp/a")
    with pytest.raises(InputError, match="not a local path"):
        storage.local_path("s3://b/p")


def _check_roundtrip(root: str, store: Store) -> None:
    out = storage.join(root, "iter_0", "sft")
    assert not store.is_done(out)
    with pytest.raises(RuntimeError), store.staged_output(out, "sft") as folder:
        (folder / "weights.bin").write_bytes(b"half")
        raise RuntimeError("crash mid-stage")
    assert not store.is_done(out)
    assert not store.exists(out)  # nothing published by a failed stage
    extra: dict[str, object] = {}
    with store.staged_output(out, "sft", extra) as folder:
        (folder / "weights.bin").write_bytes(b"w" * 10)
        (folder / "sub").mkdir()
        (folder / "sub" / "tok.json").write_text("{}")
        extra["loss"] = 0.5
    assert store.is_done(out)
    marker = store.read_marker(out)
    assert marker is not None
    assert marker.stage == "sft"
    assert marker.files == {"sub/tok.json": 2, "weights.bin": 10}
    assert marker.extra == {"loss": 0.5}
    local = store.local_input(out)
    assert (local / "weights.bin").read_bytes() == b"w" * 10
    assert (local / "sub" / "tok.json").read_text() == "{}"
    result = storage.join(root, "iter_0", "eval", "eval.json")
    assert not store.is_done(result)
    store.write_bytes(result, b'{"a": 1}')
    assert store.is_done(result)
    assert store.read_bytes(result) == b'{"a": 1}'
    with pytest.raises(InputError, match="does not exist"):
        store.read_bytes(storage.join(root, "missing.json"))
    with pytest.raises(InputError, match="does not exist"):
        store.local_input(storage.join(root, "nothing-here"))


@pytest.mark.slow
def test_local_roundtrip(tmp_path: Path, store: Store) -> None:
    _check_roundtrip(f"file://{tmp_path}/run", store)


@pytest.mark.slow
def test_s3_roundtrip(s3_root: str, store: Store) -> None:
    _check_roundtrip(s3_root, store)


@pytest.mark.slow
def test_s3_download_is_cached_and_refreshed_when_republished(s3_root: str, store: Store) -> None:
    out = storage.join(s3_root, "export")
    with store.staged_output(out, "export") as folder:
        (folder / "f").write_text("one")
    first = store.local_input(out)
    assert first.is_relative_to(store.cache())  # downloads go to the store's cache folder
    assert store.local_input(out) == first  # cached: same folder, no new download
    with store.staged_output(out, "export") as folder:
        (folder / "f").write_text("two")
    second = store.local_input(out)
    assert second != first
    assert (second / "f").read_text() == "two"


@pytest.mark.slow
def test_downloads_of_the_same_input_at_once_each_finish_whole(s3_root: str, store: Store,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # Stages running side by side (`iterate --jobs`) fetch the same export at once. Every downloader waits for the
    # others inside its transfer, so all of them stage at the same moment: none may delete, overwrite or publish
    # another's half-written copy, and each gets the whole folder.
    out = storage.join(s3_root, "export")
    with store.staged_output(out, "export") as folder:
        for k in range(5):
            (folder / f"part-{k}").write_text(str(k))
    downloaders = 3
    together = threading.Barrier(downloaders, timeout=30)
    real_resolve = Store.resolve

    def resolve(self: Store, uri: str, *, probe: bool = True) -> tuple[object, str]:
        fs, path = real_resolve(self, uri, probe=probe)

        class Waiting:
            def __getattr__(self, name: str) -> object:
                return getattr(fs, name)

            def get(self, *args: object, **kwargs: object) -> object:
                together.wait()
                return fs.get(*args, **kwargs)

        return Waiting(), path

    monkeypatch.setattr(Store, "resolve", resolve)
    with ThreadPoolExecutor(downloaders) as pool:
        got = list(pool.map(lambda _: store.local_input(out), range(downloaders)))
    assert len(set(got)) == 1
    assert sorted(p.name for p in got[0].iterdir()) == ["_SUCCESS.json", *(f"part-{k}" for k in range(5))]
    assert [p.name for p in got[0].parent.iterdir()] == ["export"]  # no staging folder left behind


def test_the_store_takes_the_cache_folder_from_the_config_then_burnqed_home_then_xdg(tmp_path: Path) -> None:
    env = {"BURNQED_HOME": "/h", "XDG_CACHE_HOME": "/x", "HOME": "/home/u"}
    assert Store.from_config(StorageConfig(cache_dir=str(tmp_path / "c")), env).cache_dir == tmp_path / "c"
    assert Store.from_config(StorageConfig(cache_dir="~/c"), env).cache_dir == Path("/home/u/c")
    assert Store.from_config(StorageConfig(), env).cache_dir == Path("/h/cache")
    assert Store.from_config(StorageConfig(), {"XDG_CACHE_HOME": "/x"}).cache_dir == Path("/x/burnqed/artifacts")
    assert Store.from_config(StorageConfig(), {"HOME": "/home/u"}).cache().parts[-4:] == (
        "u", ".cache", "burnqed", "artifacts")
    assert storage.default_cache_dir(None, {"BURNQED_HOME": "/h"}) == Path("/h/cache")


def test_without_a_home_the_cache_is_asked_for_only_when_a_download_needs_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # HOME unset: the password database's home, as `~` does; a user id it does not know (a container's arbitrary
    # uid) has none, and then only a download says so, in one line: a command that downloads nothing works.
    def unknown(uid: int) -> object:
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    assert storage.user_home({}) is not None
    monkeypatch.setattr("burnqed.storage.home.pwd.getpwuid", unknown)
    assert storage.user_home({}) is None and storage.expand_home("~/c", {}) is None
    store = Store.from_config(StorageConfig(), {})
    assert store.cache_dir is None
    with pytest.raises(InputError) as caught:
        store.cache()  # what a download of an s3:// input (Store.local_input) asks for first
    assert str(caught.value) == (
        f"no folder for downloaded inputs (storage.cache_dir): HOME is not set and user id {os.getuid()} has no home "
        "directory; set BURNQED_HOME (or XDG_CACHE_HOME) to a writable folder")
    assert Store.from_config(StorageConfig(cache_dir="~/c"), {}).cache_dir is None
    assert Store.from_config(StorageConfig(), {"XDG_CACHE_HOME": str(tmp_path)}).cache() == (
        tmp_path / "burnqed" / "artifacts")
    local = tmp_path / "f.txt"
    local.write_text("x", encoding="utf-8")
    assert store.local_input(str(local)) == local  # local inputs need no cache


def test_the_store_keeps_the_configured_endpoint_and_region_and_nothing_from_the_environment() -> None:
    env = {"AWS_ENDPOINT_URL": "http://env:1", "AWS_DEFAULT_REGION": "us-west-2", "BURNQED_HOME": "/h"}
    configured = Store.from_config(StorageConfig(endpoint_url="http://127.0.0.1:9", region="eu-west-1"), env)
    assert (configured.endpoint_url, configured.region) == ("http://127.0.0.1:9", "eu-west-1")
    # Unset in the config: botocore picks AWS_ENDPOINT_URL(_S3) / AWS_DEFAULT_REGION itself, as before.
    assert (Store.from_config(StorageConfig(), env).endpoint_url, Store.from_config(StorageConfig(), env).region) == (
        None, None)


def test_the_preflight_prefers_the_configured_endpoint_then_aws_endpoint_url_s3_then_aws_endpoint_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from burnqed.errors import StorageError

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:7")  # closed ports: the error names the one tried
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:8")
    cache = tmp_path / "cache"
    with pytest.raises(StorageError, match=r"cannot reach http://127\.0\.0\.1:9 "):
        Store(cache, endpoint_url="http://127.0.0.1:9").check_writable("s3://b/run", folder=True)
    with pytest.raises(StorageError, match=r"cannot reach http://127\.0\.0\.1:8 "):
        Store(cache).check_writable("s3://b/run", folder=True)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3")
    with pytest.raises(StorageError, match=r"cannot reach http://127\.0\.0\.1:7 "):
        Store(cache).check_writable("s3://b/run", folder=True)


def test_an_s3_filesystem_gets_the_store_endpoint_and_region_and_fsspec_config_stays_untouched(
    tmp_path: Path,
) -> None:
    import fsspec.config

    before = repr(fsspec.config.conf)
    store = Store(tmp_path, endpoint_url="http://127.0.0.1:9", region="eu-west-1")
    fs, path = store.resolve("s3://bucket/run/iter_0/", probe=False)
    assert path == "bucket/run/iter_0"
    assert fs.client_kwargs == {"endpoint_url": "http://127.0.0.1:9", "region_name": "eu-west-1"}
    other, _ = Store(tmp_path, endpoint_url="http://127.0.0.1:10").resolve("s3://bucket/run", probe=False)
    assert other.client_kwargs == {"endpoint_url": "http://127.0.0.1:10"}
    assert other is not fs
    plain, _ = Store(tmp_path).resolve("s3://bucket/run", probe=False)
    assert plain.client_kwargs == {}
    local, local_path = store.resolve(f"file://{tmp_path}/x")
    assert local_path == f"{tmp_path}/x" and not hasattr(local, "client_kwargs")
    assert repr(fsspec.config.conf) == before


def test_client_options_from_the_user_fsspec_config_are_kept_beside_the_store_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fsspec.config

    monkeypatch.setitem(fsspec.config.conf, "s3", {"client_kwargs": {"verify": False, "endpoint_url": "http://old:1"}})
    fs, _ = Store(tmp_path, endpoint_url="http://127.0.0.1:11").resolve("s3://bucket/run", probe=False)
    assert fs.client_kwargs == {"verify": False, "endpoint_url": "http://127.0.0.1:11"}
    assert fsspec.config.conf["s3"] == {"client_kwargs": {"verify": False, "endpoint_url": "http://old:1"}}


@pytest.mark.slow
def test_two_stores_in_one_process_each_reach_their_own_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Positive evidence there is no shared state: a store on moto publishes and reads back, a store on a
    recording endpoint sends its requests there (and only there), and the first store still works after."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import s3fs

    from tests.doubles.s3 import moto_s3

    seen: list[str] = []

    class Recorder(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.append(f"{self.command} {self.path}")
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_HEAD = do_PUT = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_EC2_METADATA_DISABLED": "true"}.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)  # the stores are the only way to an endpoint
    recorder = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=recorder.serve_forever, daemon=True)
    thread.start()
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        with moto_s3("burnqed-two-stores") as endpoint:
            moto = Store(tmp_path / "a", endpoint_url=endpoint, region="us-east-1")
            other = Store(tmp_path / "b", endpoint_url=f"http://127.0.0.1:{recorder.server_address[1]}",
                          region="us-east-1")
            moto.write_bytes("s3://burnqed-two-stores/run/a.json", b"{}")
            assert not seen
            with pytest.raises(InputError, match="bucket 'elsewhere-bucket' does not exist"):  # answered 404
                other.exists("s3://elsewhere-bucket/run/b.json")
            assert any("elsewhere-bucket" in line for line in seen), seen
            assert moto.read_bytes("s3://burnqed-two-stores/run/a.json") == b"{}"
            assert all("burnqed-two-stores" not in line for line in seen), seen
    finally:
        recorder.shutdown()
        recorder.server_close()
        thread.join()
        s3fs.S3FileSystem.clear_instance_cache()


def test_published_artifacts_follow_the_umask_not_private_temp_modes(tmp_path: Path, store: Store) -> None:
    import os

    old = os.umask(0o022)
    try:
        with store.staged_output(f"file://{tmp_path}/out", "x") as folder:
            (folder / "a").write_text("1")
        store.write_bytes(f"file://{tmp_path}/b.json", b"{}")
    finally:
        os.umask(old)
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "out" / "_SUCCESS.json").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "b.json").stat().st_mode & 0o777 == 0o644

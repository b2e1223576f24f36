"""The replay server's corpus cache (`minilean.replay.corpus_cache`), in process: a second start reads the entry the
first wrote, a changed input (corpus file, package file) is a new key, and an entry that does not check is rebuilt."""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

import pytest

from leankit.corpus import Corpus, load_corpus
from minilean.replay import corpus_cache, replay_server
from minilean.replay.corpus_cache import Served, cache_folder, entry_key, load_served, read_entry, write_entry
from minilean.replay.replay_server import CONFORMANCE_CORPUS, ReplayServer, served_corpus


class Builds:
    """A build of a `--corpus` file's served corpus that counts its calls."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.calls = 0

    def __call__(self) -> Served:
        self.calls += 1
        return served_corpus(self.path)


@pytest.fixture
def corpus_file(tmp_path: Path) -> Path:
    """A one-theorem corpus file (the conformance corpus' first theorem)."""
    first = load_corpus(CONFORMANCE_CORPUS).theorems[0]
    path = tmp_path / "one.json"
    path.write_text(Corpus(name="one", theorems=[first]).model_dump_json(), encoding="utf-8")
    return path


def test_the_cache_folder_is_under_the_user_cache() -> None:
    assert cache_folder({"XDG_CACHE_HOME": "/x", "HOME": "/h"}) == Path("/x/burnqed/minilean")
    assert cache_folder({"HOME": "/h"}) == Path("/h/.cache/burnqed/minilean")
    assert cache_folder({"XDG_CACHE_HOME": "", "HOME": ""}) is None


def test_a_second_start_reads_the_entry_and_serves_the_same(corpus_file: Path, tmp_path: Path) -> None:
    build = Builds(corpus_file)
    first = load_served(build, corpus_file, tmp_path / "cache")
    second = load_served(build, corpus_file, tmp_path / "cache")
    assert build.calls == 1
    assert second == first == served_corpus(corpus_file)
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [f"{entry_key(corpus_file)}.pickle"]
    served = ReplayServer(second.corpus, vocabulary=second.vocabulary)
    assert served.handle("stat {}") == ReplayServer(first.corpus).handle("stat {}")
    assert served.vocabulary == ReplayServer(first.corpus).vocabulary


def test_a_changed_corpus_file_is_not_served_stale(corpus_file: Path, tmp_path: Path) -> None:
    build = Builds(corpus_file)
    assert load_served(build, corpus_file, tmp_path / "cache").corpus.name == "one"
    two = load_corpus(CONFORMANCE_CORPUS).theorems[:2]
    corpus_file.write_text(Corpus(name="two", theorems=two).model_dump_json(), encoding="utf-8")
    again = load_served(build, corpus_file, tmp_path / "cache")
    assert build.calls == 2
    assert again == served_corpus(corpus_file) and again.corpus.name == "two"


def test_the_key_covers_every_package_file_but_bytecode(tmp_path: Path) -> None:
    package = tmp_path / "package"
    (package / "__pycache__").mkdir(parents=True)
    (package / "world.py").write_text("A = 1\n")
    key = entry_key(None, (package,))
    (package / "__pycache__" / "world.cpython-311.pyc").write_bytes(b"\0")
    (package / "__pycache__" / "world.cpython-311.pyc.140234").write_bytes(b"\0")  # importlib's while it writes
    assert entry_key(None, (package,)) == key
    (package / "world.py").write_text("A = 2\n")
    changed = entry_key(None, (package,))
    (package / "data.json").write_text("{}")
    assert len({key, changed, entry_key(None, (package,))}) == 3
    assert key != entry_key(tmp_path / "package" / "world.py", (package,))  # a --corpus file is another key
    assert entry_key(None) != entry_key(None, corpus_cache.PACKAGES[:1])  # minilean.replay's files count


@pytest.mark.parametrize("damage", ["flip", "truncate", "not a corpus", "writable by others"])
def test_an_entry_that_does_not_check_is_rebuilt(damage: str, corpus_file: Path, tmp_path: Path) -> None:
    build = Builds(corpus_file)
    good = load_served(build, corpus_file, tmp_path / "cache")
    entry = tmp_path / "cache" / f"{entry_key(corpus_file)}.pickle"
    data = entry.read_bytes()
    if damage == "flip":
        entry.write_bytes(data[:-100] + bytes([data[-100] ^ 1]) + data[-99:])
    elif damage == "truncate":
        entry.write_bytes(data[:len(data) // 2])
    elif damage == "not a corpus":
        payload = pickle.dumps(("a", frozenset()))
        entry.write_bytes(corpus_cache.MAGIC + hashlib.sha256(payload).digest() + payload)
    else:
        os.chmod(entry, 0o666)
    assert read_entry(entry) is None
    assert load_served(build, corpus_file, tmp_path / "cache") == good
    assert build.calls == 2
    assert read_entry(entry) == good  # rewritten


def test_a_read_marks_its_entry_used(corpus_file: Path, tmp_path: Path) -> None:
    build = Builds(corpus_file)
    load_served(build, corpus_file, tmp_path / "cache")
    entry = tmp_path / "cache" / f"{entry_key(corpus_file)}.pickle"
    os.utime(entry, ns=(0, 0))
    load_served(build, corpus_file, tmp_path / "cache")
    assert build.calls == 1 and entry.stat().st_mtime_ns > 0  # the last one `MAX_ENTRIES` deletes


def test_a_start_reads_the_cache_and_a_bad_corpus_is_not_cached(corpus_file: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    servers: list[ReplayServer] = []

    def run(server: ReplayServer) -> int:  # instead of serving stdin
        servers.append(server)
        return 0

    monkeypatch.setattr("minilean.wire.run", run)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    broken = tmp_path / "broken.json"
    broken.write_text("{}")
    assert replay_server.main(["--corpus", str(broken)]) == 2
    assert replay_server.main(["--corpus", str(corpus_file)]) == 0
    assert len(list((tmp_path / "xdg" / "burnqed" / "minilean").glob("*.pickle"))) == 1

    def no_build(path: Path | None) -> Served:
        raise AssertionError(f"built {path} again")

    monkeypatch.setattr(replay_server, "served_corpus", no_build)
    assert replay_server.main(["--corpus", str(corpus_file)]) == 0
    assert servers[1].corpus == servers[0].corpus and servers[1].vocabulary == servers[0].vocabulary


def test_the_folder_keeps_the_most_recently_used_entries(tmp_path: Path) -> None:
    served = Served(Corpus(name="x", theorems=[]), frozenset({"a"}))
    for number in range(corpus_cache.MAX_ENTRIES + 2):
        write_entry(tmp_path / f"{number:02d}.pickle", served)
        os.utime(tmp_path / f"{number:02d}.pickle", ns=(number * 10**9, number * 10**9))
    write_entry(tmp_path / "new.pickle", served)
    kept = sorted(p.name for p in tmp_path.glob("*.pickle"))
    assert kept == [f"{n:02d}.pickle" for n in range(3, corpus_cache.MAX_ENTRIES + 2)] + ["new.pickle"]

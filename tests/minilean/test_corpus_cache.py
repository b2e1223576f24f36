"""The replay server's corpus cache (`minilean.replay.corpus_cache`) and minilean's parser tables in the embedded
Lean's cache, in process: a second start reads the entry the first wrote and serves the same, and a changed input
(a corpus file, a package's file, the grammar) is another key. `tests/minilean/test_cache.py` tests the entries."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
from lark import Lark

import leankit
from leankit.corpus import Corpus, load_corpus
from minilean import parser
from minilean.cache import write_entry
from minilean.replay import corpus_cache, replay_server
from minilean.replay.corpus_cache import Served, entry_key, load_served
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


def test_a_second_start_reads_the_entry_and_serves_the_same(corpus_file: Path, tmp_path: Path) -> None:
    build = Builds(corpus_file)
    first = load_served(build, corpus_file, tmp_path / "cache")
    second = load_served(build, corpus_file, tmp_path / "cache")
    assert build.calls == 1
    assert second == first == served_corpus(corpus_file)
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [f"{entry_key(corpus_file)}.pickle"]
    served = ReplayServer(second.corpus, vocabulary=second.vocabulary)
    assert served.vocabulary == ReplayServer(first.corpus).vocabulary
    request = f'goal.start {{"copyFrom": "{first.corpus.theorems[0].name}"}}'
    assert served.handle(request) == ReplayServer(first.corpus).handle(request)


def test_a_changed_corpus_file_is_not_served_stale(corpus_file: Path, tmp_path: Path) -> None:
    build = Builds(corpus_file)
    assert load_served(build, corpus_file, tmp_path / "cache").corpus.name == "one"
    two = load_corpus(CONFORMANCE_CORPUS).theorems[:2]
    corpus_file.write_text(Corpus(name="two", theorems=two).model_dump_json(), encoding="utf-8")
    again = load_served(build, corpus_file, tmp_path / "cache")
    assert build.calls == 2
    assert again == served_corpus(corpus_file) and again.corpus.name == "two"


def test_an_entry_that_is_not_a_served_corpus_is_built_again(corpus_file: Path, tmp_path: Path) -> None:
    for payload in [pickle.dumps(("a", frozenset())), pickle.dumps(Corpus(name="x", theorems=[])),
                    pickle.dumps((Corpus(name="x", theorems=[]), {"a"}))]:
        write_entry(tmp_path / f"{entry_key(corpus_file)}.pickle", payload)
        build = Builds(corpus_file)
        assert load_served(build, corpus_file, tmp_path) == served_corpus(corpus_file) and build.calls == 1


def test_the_key_covers_the_packages_and_the_corpus(corpus_file: Path, tmp_path: Path) -> None:
    packages = (Path(leankit.__file__).resolve().parent, Path(replay_server.__file__).resolve().parent)
    assert packages == corpus_cache.PACKAGES
    package = tmp_path / "package"
    package.mkdir()
    (package / "corpus.py").write_text("A = 1\n")
    key = entry_key(None, (package,))
    (package / "corpus.py").write_text("A = 2\n")
    assert entry_key(None, (package,)) != key
    assert len({entry_key(None), entry_key(corpus_file), entry_key(tmp_path)}) == 3  # embedded, a file, a folder


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


def test_the_parser_tables_come_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    text = "∀ (x : ℝ), 2 * x + 3 = 11 → x = 4 ∧ ¬ x ∈ ({1, 2} : Set ℝ)"
    real = Lark
    builds: list[str] = []

    class Counting:
        load = real.load

        def __new__(cls, grammar: str, **options: Any) -> Any:
            builds.append(grammar)
            return real(grammar, **options)

    monkeypatch.setattr("minilean.parser.Lark", Counting)
    try:
        parser._parser.cache_clear()
        built = parser._parser().parse(text)
        assert len(list((tmp_path / "burnqed" / "minilean").glob("*.pickle"))) == 1 and len(builds) == 1
        parser._parser.cache_clear()
        read = parser._parser()
        assert len(builds) == 1 and isinstance(read, real) and read.parse(text) == built
        monkeypatch.setattr(parser, "_GRAMMAR", parser._GRAMMAR + "\n")  # another grammar: another key, a build
        parser._parser.cache_clear()
        assert parser._parser().parse(text) == built and len(builds) == 2
    finally:
        parser._parser.cache_clear()

"""TrajectoryWriter: append-only parts every K theorems, commit manifests, resume, completion marker."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import fsspec  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
import pytest

from burnqed.errors import InputError
from burnqed.records.results import FailureReason
from burnqed.storage import Store
from burnqed.trajectory.reader import committed_parts, finished_theorems, is_complete, read_edges, read_results
from burnqed.trajectory.schema import SCHEMA, CompletionMarker, PartManifest
from burnqed.trajectory.writer import TrajectoryWriter
from tests.trajectory.factories import result, simple_theorem, write_trajectory


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_a_part_every_k_theorems_and_earlier_files_never_change(tmp_path: Path, store: Store):
    writer = TrajectoryWriter(str(tmp_path), run_id="r", iteration=1, checkpoint_every=3, store=store)
    snapshots = []
    for i in range(7):
        writer.add(*simple_theorem(f"t{i}", n_edges=i % 3 + 1, proved=i % 2 == 0))
        snapshots.append(digests(tmp_path))
    assert [len(s) for s in snapshots] == [0, 0, 2, 2, 2, 4, 4]
    assert writer.buffered == 1
    marker = writer.finish({"config_digest": "abc"})
    final = digests(tmp_path)
    assert sorted(final) == ["_SUCCESS.json", "part-000000.json", "part-000000.parquet", "part-000001.json",
                             "part-000001.parquet", "part-000002.json", "part-000002.parquet"]
    for name, digest in snapshots[2].items():
        assert final[name] == digest
    for name, digest in snapshots[5].items():
        assert final[name] == digest
    assert marker.parts == ["part-000000.json", "part-000001.json", "part-000002.json"]
    assert (marker.theorems, marker.proved, marker.rows) == (7, 4, 1 + 2 + 3 + 1 + 2 + 3 + 1)
    stored = CompletionMarker.model_validate_json((tmp_path / "_SUCCESS.json").read_text())
    assert stored.extra == {"config_digest": "abc"} and stored.run_id == "r" and stored.iteration == 1
    manifest = json.loads((tmp_path / "part-000001.json").read_text())
    assert set(manifest) == {"part", "data", "rows", "sha256", "theorems", "run_id", "iteration", "written_at",
                             "source", "schema_version"}
    assert manifest["schema_version"] == 2
    assert manifest["sha256"] == hashlib.sha256((tmp_path / "part-000001.parquet").read_bytes()).hexdigest()
    assert (manifest["part"], manifest["data"], manifest["rows"]) == (1, "part-000001.parquet", 2 + 3 + 1)
    assert [t["name"] for t in manifest["theorems"]] == ["t3", "t4", "t5"]
    data = pq.read_table(tmp_path / "part-000001.parquet")
    assert data.schema == SCHEMA
    assert pq.ParquetFile(tmp_path / "part-000001.parquet").metadata.row_group(0).column(0).compression == "ZSTD"
    assert data.column("theorem").to_pylist() == ["t3", "t4", "t4", "t5", "t5", "t5"]
    assert is_complete(str(tmp_path), store=store)


def test_zero_edge_theorems_are_recorded(tmp_path: Path, store: Store):
    start_error = result("bad", reason=FailureReason.START_ERROR)
    write_trajectory(str(tmp_path), [(start_error, []), simple_theorem("good", 2)], every=1, store=store)
    parts = committed_parts(str(tmp_path), store=store)
    assert [(p.part, p.rows, [t.name for t in p.theorems]) for p in parts] == [(0, 0, ["bad"]), (1, 2, ["good"])]
    assert read_results(str(tmp_path), store=store)[0].failure_reason is FailureReason.START_ERROR
    assert read_edges(str(tmp_path), store=store).column("theorem").to_pylist() == ["good", "good"]


def test_reopening_continues_numbering_and_knows_finished_theorems(tmp_path: Path, store: Store):
    write_trajectory(str(tmp_path), [simple_theorem(f"t{i}") for i in range(3)], every=2, finish=False, store=store)
    assert finished_theorems(str(tmp_path), store=store) == {"t0", "t1", "t2"}
    assert not is_complete(str(tmp_path), store=store)
    writer = TrajectoryWriter(str(tmp_path), run_id="run", iteration=0, checkpoint_every=2, store=store)
    assert writer.parts == ["part-000000.json", "part-000001.json"]
    with pytest.raises(ValueError, match="already recorded"):
        writer.add(*simple_theorem("t1"))
    writer.add(*simple_theorem("t3"))
    marker = writer.finish()
    assert [p.part for p in committed_parts(str(tmp_path), store=store)] == [0, 1, 2]
    assert (marker.theorems, marker.rows, len(marker.parts)) == (4, 8, 3)


def test_reopening_a_complete_prefix_or_another_run_is_refused(tmp_path: Path, store: Store):
    write_trajectory(str(tmp_path / "done"), [simple_theorem("t")], store=store)
    with pytest.raises(InputError, match="already complete"):
        TrajectoryWriter(str(tmp_path / "done"), run_id="run", iteration=0, store=store)
    write_trajectory(str(tmp_path / "open"), [simple_theorem("t")], finish=False, store=store)
    with pytest.raises(InputError, match="iteration 0, not run 'run' iteration 1"):
        TrajectoryWriter(str(tmp_path / "open"), run_id="run", iteration=1, store=store)


def test_writing_after_finish_or_close_is_an_error(tmp_path: Path, store: Store):
    writer = TrajectoryWriter(str(tmp_path / "a"), run_id="r", iteration=0, store=store)
    writer.finish()
    for call in (lambda: writer.add(*simple_theorem("x")), writer.flush, writer.finish):
        with pytest.raises(ValueError, match="closed"):
            call()
    with TrajectoryWriter(str(tmp_path / "b"), run_id="r", iteration=0, store=store) as other:
        other.add(*simple_theorem("x"))
    assert other.closed and not is_complete(str(tmp_path / "b"), store=store)
    assert finished_theorems(str(tmp_path / "b"), store=store) == {"x"}  # close() committed the buffer
    with pytest.raises(ValueError, match="closed"):
        other.add(*simple_theorem("y"))


def test_leaving_on_an_error_commits_the_buffer_like_close(tmp_path: Path, store: Store):
    """One error path: the theorems that finished are committed whether the block ends normally or not."""
    with pytest.raises(RuntimeError, match="search failed"), \
            TrajectoryWriter(str(tmp_path / "c"), run_id="r", iteration=0, checkpoint_every=10, store=store) as writer:
        writer.add(*simple_theorem("x"))
        raise RuntimeError("search failed")
    assert writer.closed and not is_complete(str(tmp_path / "c"), store=store)
    assert finished_theorems(str(tmp_path / "c"), store=store) == {"x"}


def test_a_commit_failing_on_the_way_out_keeps_the_first_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               store: Store):
    writer = TrajectoryWriter(str(tmp_path / "d"), run_id="r", iteration=0, checkpoint_every=10, store=store)

    def broken() -> None:
        raise OSError("disk full")

    with pytest.raises(RuntimeError, match="search failed"), writer:
        writer.add(*simple_theorem("x"))
        monkeypatch.setattr(writer, "_flush_locked", broken)
        raise RuntimeError("search failed")
    assert writer.closed and finished_theorems(str(tmp_path / "d"), store=store) == set()


def test_a_manifest_the_disk_refuses_takes_its_data_file_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               store: Store):
    """The disk fills while the second part's manifest is written (after its data file was published): the error
    goes on, and the folder holds the first, committed part only, also after leaving the writer tried once more."""
    from burnqed.trajectory import writer as module

    real = module._write_all
    manifests = 0

    def full_at_the_second_manifest(handle: object, data: bytes) -> None:
        nonlocal manifests
        if data.startswith(b"{"):
            manifests += 1
            if manifests >= 2:
                handle.write(data[:10])  # type: ignore[attr-defined]
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(handle, data)  # type: ignore[arg-type]

    monkeypatch.setattr(module, "_write_all", full_at_the_second_manifest)
    folder = tmp_path / "full"
    with pytest.raises(OSError, match="No space left") as raised, \
            TrajectoryWriter(str(folder), run_id="r", iteration=0, checkpoint_every=2, store=store) as writer:
        for i in range(4):
            writer.add(*simple_theorem(f"t{i}"))
    assert raised.value.filename == str(folder / "part-000001.json")
    assert manifests == 3  # the second part's manifest, then once more on the way out
    assert sorted(p.name for p in folder.iterdir()) == ["part-000000.json", "part-000000.parquet"]
    assert finished_theorems(str(folder), store=store) == {"t0", "t1"}


def test_finish_with_nothing_written_marks_an_empty_complete_prefix(tmp_path: Path, store: Store):
    marker = TrajectoryWriter(str(tmp_path / "x"), run_id="r", iteration=0, store=store).finish()
    assert (marker.parts, marker.theorems) == ([], 0)
    assert is_complete(str(tmp_path / "x"), store=store) and committed_parts(str(tmp_path / "x"), store=store) == []


def test_file_urls_work(tmp_path: Path, store: Store):
    uri = f"file://{tmp_path}/traj"
    write_trajectory(uri, [simple_theorem("a"), simple_theorem("b")], every=1, store=store)
    assert (tmp_path / "traj" / "part-000001.json").exists()
    assert finished_theorems(uri, store=store) == finished_theorems(str(tmp_path / "traj"), store=store) == {"a", "b"}


@pytest.fixture
def memory_uri() -> Iterator[str]:
    uri = f"memory://traj-{uuid.uuid4().hex}/iter_0/search"
    yield uri
    fs = fsspec.filesystem("memory")
    fs.rm(uri.removeprefix("memory://").split("/")[0], recursive=True)


def test_object_store_like_filesystem_round_trip(memory_uri: str, store: Store):
    """memory:// has no rename: parts are published with one put each, like S3."""
    write_trajectory(memory_uri, [simple_theorem("a", 3, proved=True), simple_theorem("b", 1)], every=1, store=store)
    parts = committed_parts(memory_uri, store=store)
    assert [(p.part, p.rows) for p in parts] == [(0, 3), (1, 1)]
    assert all(isinstance(p, PartManifest) for p in parts)
    edges = read_edges(memory_uri, ["theorem", "label"], store=store)
    assert edges.to_pydict() == {"theorem": ["a", "a", "a", "b"],
                                 "label": ["negative", "negative", "positive", "unknown"]}
    assert is_complete(memory_uri, store=store)
    fs = fsspec.filesystem("memory")
    assert not [p for p in fs.find(memory_uri.removeprefix("memory://")) if p.endswith(".tmp")]


def test_concurrent_adds_from_threads_commit_every_theorem_once(tmp_path: Path, store: Store):
    writer = TrajectoryWriter(str(tmp_path), run_id="r", iteration=0, checkpoint_every=7, store=store)

    def work(k: int) -> None:
        for i in range(25):
            writer.add(*simple_theorem(f"t{k}-{i}", n_edges=1 + i % 3))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    marker = writer.finish()
    parts = committed_parts(str(tmp_path), store=store)
    assert [len(p.theorems) for p in parts] == [7] * 28 + [4]
    assert (marker.theorems, len(finished_theorems(str(tmp_path), store=store))) == (200, 200)
    assert read_edges(str(tmp_path), ["node_id"],
                      store=store).num_rows == marker.rows == 8 * sum(1 + i % 3 for i in range(25))

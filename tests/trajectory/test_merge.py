"""Merging search shards into one trajectory prefix."""

from __future__ import annotations

import uuid
from pathlib import Path

import fsspec  # type: ignore[import-untyped,unused-ignore]
import pytest

from burnqed.errors import InputError
from burnqed.stages.merge import merge_trajectories
from burnqed.storage import Store
from burnqed.trajectory.reader import committed_parts, is_complete, read_edges, read_marker
from tests.trajectory.factories import simple_theorem, write_trajectory


def shards(tmp_path: Path, *, store: Store) -> list[str]:
    s0, s1 = str(tmp_path / "search" / "shard-0"), str(tmp_path / "search" / "shard-1")
    write_trajectory(s0, [simple_theorem("a", 1, proved=True), simple_theorem("b", 2), simple_theorem("c", 3)],
                     every=2, store=store)
    write_trajectory(s1, [simple_theorem("d", 4), simple_theorem("e", 5, proved=True)], every=1, store=store)
    return [s0, s1]


def test_merge_renumbers_parts_and_counts_add_up(tmp_path: Path, store: Store):
    inputs = shards(tmp_path, store=store)
    out = str(tmp_path / "trajectories")
    report = merge_trajectories(inputs, out, store=store)
    assert (report.parts, report.theorems, report.proved, report.rows, report.copied, report.skipped) == (
        4, 5, 2, 15, 4, False)
    parts = committed_parts(out, store=store)
    assert [(p.part, p.data, [t.name for t in p.theorems]) for p in parts] == [
        (0, "part-000000.parquet", ["a", "b"]),
        (1, "part-000001.parquet", ["c"]),
        (2, "part-000002.parquet", ["d"]),
        (3, "part-000003.parquet", ["e"]),
    ]
    assert parts[2].source == f"{inputs[1]}/part-000000.json"
    assert read_edges(out, ["theorem"], store=store).column("theorem").to_pylist() == list("abbcccddddeeeee")
    marker = read_marker(out, store=store)
    assert marker is not None and marker.sources == inputs and is_complete(out, store=store)
    assert sorted(p.name for p in (tmp_path / "trajectories").iterdir()) == [
        "_SUCCESS.json", *[f"part-00000{i}.{ext}" for i in range(4) for ext in ("json", "parquet")]]


def test_merge_again_is_a_no_op(tmp_path: Path, store: Store):
    inputs = shards(tmp_path, store=store)
    out = tmp_path / "trajectories"
    merge_trajectories(inputs, str(out), store=store)
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    again = merge_trajectories(inputs, str(out), store=store)
    assert (again.skipped, again.copied, again.theorems, again.parts) == (True, 0, 5, 4)
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before
    with pytest.raises(InputError, match="already complete, merged from"):
        merge_trajectories(inputs[:1], str(out), store=store)


def test_an_interrupted_merge_resumes_without_duplicates(tmp_path: Path, store: Store):
    inputs = shards(tmp_path, store=store)
    out = tmp_path / "trajectories"
    merge_trajectories(inputs, str(out), store=store)
    for name in ("_SUCCESS.json", "part-000003.json", "part-000002.json"):  # crashed after copying part 1
        (out / name).unlink()
    report = merge_trajectories(inputs, str(out), store=store)
    assert (report.copied, report.parts, report.theorems) == (2, 4, 5)
    assert [p.part for p in committed_parts(str(out), store=store)] == [0, 1, 2, 3]
    assert read_edges(str(out), store=store).num_rows == 15


def test_a_theorem_in_two_shards_is_refused(tmp_path: Path, store: Store):
    inputs = shards(tmp_path, store=store)
    dup = str(tmp_path / "search" / "shard-2")
    write_trajectory(dup, [simple_theorem("x"), simple_theorem("c")], store=store)
    with pytest.raises(InputError, match=r"'c' is recorded by two inputs of run .*: .*shard-0/part-000001\.json and "
                                         r".*shard-2/part-000000\.json"):
        merge_trajectories([*inputs, dup], str(tmp_path / "out"), store=store)
    assert not (tmp_path / "out").exists()


def test_incomplete_or_empty_inputs_are_refused_unless_allowed(tmp_path: Path, store: Store):
    inputs = shards(tmp_path, store=store)
    partial = str(tmp_path / "search" / "shard-2")
    write_trajectory(partial, [simple_theorem("x")], finish=False, store=store)
    with pytest.raises(InputError, match=r"shard-2 is not complete .*merge anyway with --allow-incomplete$"):
        merge_trajectories([*inputs, partial], str(tmp_path / "out"), store=store)
    report = merge_trajectories([*inputs, partial], str(tmp_path / "out"), allow_incomplete=True, store=store)
    assert (report.theorems, report.parts) == (6, 5)
    with pytest.raises(InputError, match=r"shard-9 has no committed parts"):
        merge_trajectories([*inputs, str(tmp_path / "search" / "shard-9")], str(tmp_path / "out2"), store=store)
    with pytest.raises(InputError, match="no trajectory inputs"):
        merge_trajectories([], str(tmp_path / "out3"), store=store)


def test_inputs_of_different_iterations_are_refused(tmp_path: Path, store: Store):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    write_trajectory(a, [simple_theorem("x")], iteration=0, store=store)
    write_trajectory(b, [simple_theorem("y")], iteration=1, store=store)
    with pytest.raises(InputError, match=r"mix iterations \[0, 1\]"):
        merge_trajectories([a, b], str(tmp_path / "out"), store=store)


def test_two_runs_of_one_iteration_may_share_theorems(tmp_path: Path, store: Store):
    main, noise = str(tmp_path / "search"), str(tmp_path / "noise")
    write_trajectory(main, [simple_theorem("x"), simple_theorem("y")], run_id="iter0", store=store)
    write_trajectory(noise, [simple_theorem("x")], run_id="iter0-noise", store=store)
    report = merge_trajectories([main, noise], str(tmp_path / "out"), store=store)
    assert (report.theorems, report.parts) == (3, 2)
    marker = read_marker(str(tmp_path / "out"), store=store)
    assert marker is not None and marker.extra == {"runs": ["iter0", "iter0-noise"]}


def test_an_output_with_foreign_parts_is_refused(tmp_path: Path, store: Store):
    inputs = shards(tmp_path, store=store)
    out = str(tmp_path / "out")
    write_trajectory(out, [simple_theorem("z")], finish=False, store=store)
    with pytest.raises(InputError, match="already holds parts not copied from these inputs"):
        merge_trajectories(inputs, out, store=store)


def test_merge_between_object_store_like_and_local_prefixes(tmp_path: Path, store: Store):
    bucket = f"merge-{uuid.uuid4().hex}"
    try:
        s0, s1 = f"memory://{bucket}/shard-0", f"memory://{bucket}/shard-1"
        write_trajectory(s0, [simple_theorem("a", 2), simple_theorem("b", 1)], every=1, store=store)
        write_trajectory(s1, [simple_theorem("c", 3)], every=1, store=store)
        to_memory = merge_trajectories([s0, s1], f"memory://{bucket}/merged", store=store)
        to_local = merge_trajectories([s0, s1], str(tmp_path / "merged"), store=store)
        for out in (f"memory://{bucket}/merged", str(tmp_path / "merged")):
            assert read_edges(out, ["theorem"],
                              store=store).column("theorem").to_pylist() == ["a", "a", "b", "c", "c", "c"]
        assert (to_memory.parts, to_memory.rows) == (to_local.parts, to_local.rows) == (3, 6)
    finally:
        fsspec.filesystem("memory").rm(bucket, recursive=True)


# ------------------------------------------------------------------------------------ damaged parts


def test_a_truncated_part_is_refused_before_anything_is_written(tmp_path: Path, store: Store):
    inputs = shards(tmp_path, store=store)
    data = Path(inputs[1]) / "part-000001.parquet"
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])  # a copy cut short: no footer
    out = tmp_path / "trajectories"
    with pytest.raises(InputError, match=r"trajectory part .*shard-1/part-000001\.parquet is damaged"):
        merge_trajectories(inputs, str(out), store=store)
    assert not out.exists()  # the parts of shard 0, which are fine, were not copied either


def test_a_part_whose_rows_differ_from_its_manifest_is_refused(tmp_path: Path, store: Store):
    inputs = shards(tmp_path, store=store)
    manifest = Path(inputs[0]) / "part-000000.json"
    manifest.write_text(manifest.read_text().replace('"rows": 3', '"rows": 4'))
    out = tmp_path / "trajectories"
    with pytest.raises(InputError, match=r"shard-0/part-000000\.parquet holds 3 rows, its manifest "
                       r"part-000000\.json records 4"):
        merge_trajectories(inputs, str(out), store=store)
    assert not out.exists()


def test_a_part_damaged_by_an_interrupted_merge_is_refused_without_a_marker(tmp_path: Path, store: Store):
    inputs = shards(tmp_path, store=store)
    out = tmp_path / "trajectories"
    merge_trajectories(inputs, str(out), store=store)
    (out / "_SUCCESS.json").unlink()  # crashed before the marker; then the disk damaged a copied part
    copied = out / "part-000002.parquet"
    copied.write_bytes(copied.read_bytes()[:10])
    with pytest.raises(InputError, match=r"trajectories/part-000002\.parquet is damaged"):
        merge_trajectories(inputs, str(out), store=store)
    assert not (out / "_SUCCESS.json").exists()


def _damage_a_data_page(data: Path) -> None:
    """Overwrite bytes in the middle of the data pages, leaving the magic and the footer intact."""
    raw = bytearray(data.read_bytes())
    footer = int.from_bytes(raw[-8:-4], "little") + 8
    middle = (4 + len(raw) - footer) // 2
    raw[middle:middle + 8] = bytes(b ^ 0xFF for b in raw[middle:middle + 8])
    data.write_bytes(bytes(raw))


def test_a_part_with_a_damaged_data_page_and_an_intact_footer_is_refused(tmp_path: Path, store: Store):
    inputs = shards(tmp_path, store=store)
    data = Path(inputs[0]) / "part-000001.parquet"
    _damage_a_data_page(data)
    import pyarrow.parquet as pq

    assert pq.ParquetFile(data).metadata.num_rows > 0  # the footer still reads: a footer check alone passes it
    out = tmp_path / "trajectories"
    with pytest.raises(InputError, match=r"shard-0/part-000001\.parquet is damaged \(its SHA-256"):
        merge_trajectories(inputs, str(out), store=store)
    assert not out.exists()


def test_a_damaged_data_page_is_refused_by_decoding_every_row_when_no_digest_was_recorded(
    tmp_path: Path, store: Store
):
    import json

    inputs = shards(tmp_path, store=store)
    manifest = Path(inputs[0]) / "part-000001.json"
    record = json.loads(manifest.read_text())
    assert len(record.pop("sha256")) == 64  # the writer records it; parts written before it did have none
    manifest.write_text(json.dumps(record))
    _damage_a_data_page(Path(inputs[0]) / "part-000001.parquet")
    out = tmp_path / "trajectories"
    with pytest.raises(InputError, match=r"shard-0/part-000001\.parquet is damaged \("):
        merge_trajectories(inputs, str(out), store=store)
    assert not out.exists()

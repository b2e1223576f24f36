"""Reader: only committed parts count; orphans, temp files, duplicates, malformed manifests, missing prefixes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from burnqed.errors import InputError
from burnqed.storage import Store
from burnqed.trajectory.reader import (
    committed_parts,
    finished_theorems,
    is_complete,
    read_edges,
    read_marker,
    read_results,
    require_trajectories,
)
from burnqed.trajectory.writer import TrajectoryWriter
from tests.trajectory.factories import simple_theorem, write_trajectory

ROOT = Path(__file__).parents[2]


def test_missing_prefix_reads_as_empty_but_require_says_what_to_do(tmp_path: Path, store: Store):
    missing = str(tmp_path / "nope")
    assert committed_parts(missing, store=store) == []
    assert read_results(missing, store=store) == []
    assert finished_theorems(missing, store=store) == set()
    assert not is_complete(missing, store=store) and read_marker(missing, store=store) is None
    table = read_edges(missing, store=store)
    assert table.num_rows == 0 and len(table.schema) == 24
    assert read_edges(missing, ["theorem", "label"], store=store).schema.names == ["theorem", "label"]
    with pytest.raises(InputError, match=r"no trajectory data under .*nope.*run the search"):
        require_trajectories(missing, store=store)
    with pytest.raises(InputError, match="unknown trajectory columns"):
        read_edges(missing, ["theorem", "goal"], store=store)


def test_orphan_data_and_temp_files_are_ignored_then_removed_on_reopen(tmp_path: Path, store: Store):
    write_trajectory(str(tmp_path), [simple_theorem("a"), simple_theorem("b")], every=1, finish=False, store=store)
    # A crash between the data write and the manifest write of part 2, and a leftover temp file.
    shutil.copy(tmp_path / "part-000001.parquet", tmp_path / "part-000002.parquet")
    (tmp_path / ".part-000003.parquet.x1y2.tmp").write_bytes(b"half")
    assert [p.part for p in require_trajectories(str(tmp_path), store=store)] == [0, 1]
    assert read_edges(str(tmp_path), store=store).num_rows == 4
    writer = TrajectoryWriter(str(tmp_path), run_id="run", iteration=0, checkpoint_every=1, store=store)
    assert writer.removed_orphans == [".part-000003.parquet.x1y2.tmp", "part-000002.parquet"]
    writer.add(*simple_theorem("c", 3))
    writer.finish()
    assert [(p.part, p.rows) for p in committed_parts(str(tmp_path), store=store)] == [(0, 2), (1, 2), (2, 3)]
    assert read_edges(str(tmp_path), ["theorem"],
                      store=store).column("theorem").to_pylist() == ["a"] * 2 + ["b"] * 2 + ["c"] * 3


def test_a_theorem_in_two_committed_parts_is_an_input_error(tmp_path: Path, store: Store):
    write_trajectory(str(tmp_path), [simple_theorem("a"), simple_theorem("b")], every=1, finish=False, store=store)
    manifest = json.loads((tmp_path / "part-000001.json").read_text())
    manifest["theorems"][0]["name"] = "a"
    (tmp_path / "part-000001.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match=r"'a' is recorded twice .*part-000000\.json and part-000001\.json"):
        finished_theorems(str(tmp_path), store=store)
    manifest["run_id"] = "another-run"  # a second run (e.g. the noise pass) may record the same theorem
    (tmp_path / "part-000001.json").write_text(json.dumps(manifest))
    assert finished_theorems(str(tmp_path), store=store) == {"a"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "part-000001.json is not valid JSON"),
        ('{"part": 1}', r"part-000001.json: data: Field required"),
        ("[]", "part-000001.json: top level"),
    ],
)
def test_a_malformed_manifest_names_the_file(tmp_path: Path, text: str, message: str, store: Store):
    write_trajectory(str(tmp_path), [simple_theorem("a"), simple_theorem("b")], every=1, finish=False, store=store)
    (tmp_path / "part-000001.json").write_text(text)
    with pytest.raises(InputError, match=message):
        read_results(str(tmp_path), store=store)


def test_a_manifest_without_its_data_or_renamed_is_an_input_error(tmp_path: Path, store: Store):
    write_trajectory(str(tmp_path), [simple_theorem("a"), simple_theorem("b")], every=1, finish=False, store=store)
    (tmp_path / "part-000001.parquet").unlink()
    with pytest.raises(InputError, match=r"names data file part-000001\.parquet, which is missing"):
        committed_parts(str(tmp_path), store=store)
    (tmp_path / "part-000001.json").rename(tmp_path / "part-000007.json")
    with pytest.raises(InputError, match="says it is part 1"):
        committed_parts(str(tmp_path), store=store)


def test_corrupt_committed_data_is_an_input_error(tmp_path: Path, store: Store):
    write_trajectory(str(tmp_path), [simple_theorem("a")], every=1, store=store)
    (tmp_path / "part-000000.parquet").write_bytes(b"PAR1 garbage")
    with pytest.raises(InputError, match=r"part-000000\.parquet is damaged \(its SHA-256"):
        read_edges(str(tmp_path), store=store)


CRASHING_WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from burnqed.storage import Store
    from burnqed.trajectory import writer as w
    from tests.trajectory.factories import simple_theorem

    real = w.publish_bytes
    def publish_bytes(fs, path, data):
        if path.endswith("part-000002.json"):
            print("data written", flush=True)
            time.sleep(60)  # SIGKILLed here: part 2's data is on disk, its manifest is not
        real(fs, path, data)
    w.publish_bytes = publish_bytes
    store = Store(cache_dir=Path(sys.argv[1]) / "cache")
    writer = w.TrajectoryWriter(sys.argv[1], run_id="run", iteration=0, checkpoint_every=2, store=store)
    for i in range(6):
        writer.add(*simple_theorem(f"t{i}", n_edges=i + 1))
    """
)


@pytest.mark.slow
def test_a_writer_killed_mid_flush_leaves_exactly_the_committed_theorems(tmp_path: Path, store: Store):
    prefix = tmp_path / "shard-0"
    proc = subprocess.Popen([sys.executable, "-c", CRASHING_WRITER, str(prefix)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "data written\n"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=10)
        assert proc.stdout is not None
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    assert (prefix / "part-000002.parquet").exists() and not (prefix / "part-000002.json").exists()
    assert finished_theorems(str(prefix), store=store) == {"t0", "t1", "t2", "t3"}
    assert read_edges(str(prefix), ["theorem"], store=store).num_rows == 1 + 2 + 3 + 4
    # Resume: the orphan goes, numbering continues at 2, the lost theorems are redone.
    writer = TrajectoryWriter(str(prefix), run_id="run", iteration=0, checkpoint_every=2, store=store)
    assert writer.removed_orphans == ["part-000002.parquet"]
    for i in (4, 5):
        writer.add(*simple_theorem(f"t{i}", n_edges=i + 1))
    writer.finish()
    assert [p.part for p in committed_parts(str(prefix), store=store)] == [0, 1, 2]
    assert read_edges(str(prefix), ["theorem"], store=store).num_rows == sum(range(1, 7))


def test_rows_come_by_search_whatever_order_the_searches_finished_in(tmp_path: Path, store: Store):
    """Parts hold theorems in the order their searches finished (timing); the rows read do not depend on it."""
    theorems = {name: simple_theorem(name, n) for name, n in (("a", 2), ("b", 3), ("c", 1))}
    first, second = tmp_path / "first", tmp_path / "second"
    write_trajectory(str(first), [theorems[n] for n in "abc"], every=1, store=store)
    write_trajectory(str(second), [theorems[n] for n in "cab"], every=2, store=store)
    columns = ["theorem", "node_id", "label"]
    one, other = (read_edges(str(p), columns, store=store).to_pylist() for p in (first, second))
    assert one == other
    assert [(r["theorem"], r["node_id"]) for r in one] == [("a", 1), ("a", 2), ("b", 1), ("b", 2), ("b", 3), ("c", 1)]
    # the order needs the run id and theorem, which are read for it but not returned unless asked for
    assert read_edges(str(second), ["node_id"], store=store).column("node_id").to_pylist() == [1, 2, 1, 2, 3, 1]
    assert read_edges(str(second), store=store).num_rows == 6

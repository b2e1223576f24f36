"""Reading source rows: JSON arrays and wrapped arrays, JSON lines with bad lines, Parquet, folders, splits,
limits, missing paths; the hub path is tested end to end in test_cli (it needs a fresh process)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from burnqed.data.rows import is_hub_name, read_rows
from burnqed.errors import InputError
from burnqed.storage import Store, hub_shaped
from tests.damage import damage, flip_in_page
from tests.data.samples import write_jsonl, write_parquet


def test_a_json_array_and_an_object_wrapping_one(tmp_path: Path, store: Store) -> None:
    array = tmp_path / "a.json"
    array.write_text(json.dumps([{"x": 1}, [2], {"x": 3}]), encoding="utf-8")
    rows = list(read_rows(str(array), store=store))
    assert [r.data for r in rows] == [{"x": 1}, None, {"x": 3}]
    assert rows[1].error == "not a JSON object but a list" and rows[1].where == f"{array}[1]"
    wrapped = tmp_path / "b.json"
    wrapped.write_text(json.dumps({"version": 2, "data": [{"x": 1}, {"x": 2}]}), encoding="utf-8")
    assert [r.data for r in read_rows(str(wrapped), store=store)] == [{"x": 1}, {"x": 2}]


def test_json_lines_keep_going_after_a_bad_line(tmp_path: Path, store: Store) -> None:
    path = write_jsonl(tmp_path / "rows.jsonl", [{"x": 1}, '{"x": ', "", "17", {"x": 4}])
    rows = list(read_rows(str(path), store=store))
    assert [r.data for r in rows] == [{"x": 1}, None, None, {"x": 4}]
    assert rows[1].where == f"{path}:2" and rows[1].error is not None and rows[1].error.startswith("invalid JSON")
    assert rows[2].error == "not a JSON object but a int"
    # a .json file holding JSON lines is read the same way
    as_json = tmp_path / "rows.json"
    as_json.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    assert [r.data for r in read_rows(str(as_json), store=store)] == [{"x": 1}, None, None, {"x": 4}]


def test_a_broken_json_array_is_one_clear_error(tmp_path: Path, store: Store) -> None:
    path = tmp_path / "broken.json"
    path.write_text('[{"x": 1}, {"x": ', encoding="utf-8")
    with pytest.raises(InputError, match=r"broken\.json is not valid JSON"):
        list(read_rows(str(path), store=store))


def test_parquet_rows_and_the_limit(tmp_path: Path, store: Store) -> None:
    path = write_parquet(tmp_path / "t.parquet", [{"a": str(i), "b": [i]} for i in range(5)])
    assert [r.data for r in read_rows(str(path), limit=2, store=store)] == [{"a": "0", "b": [0]}, {"a": "1", "b": [1]}]
    assert len(list(read_rows(f"file://{path}", store=store))) == 5
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet")
    with pytest.raises(InputError, match="not a readable Parquet file"):
        list(read_rows(str(bad), store=store))


def test_a_folder_reads_its_data_files_in_order_and_a_split_picks_files(tmp_path: Path, store: Store) -> None:
    folder = tmp_path / "snapshot"
    (folder / "data").mkdir(parents=True)
    write_jsonl(folder / "data" / "train-00000.jsonl", [{"s": "train"}])
    write_parquet(folder / "data" / "test-00000.parquet", [{"s": "test"}])
    write_jsonl(folder / ".cache.jsonl", [{"s": "hidden"}])
    (folder / "README.md").write_text("# card", encoding="utf-8")
    assert [r.data for r in read_rows(str(folder), store=store)] == [{"s": "test"}, {"s": "train"}]
    assert [r.data for r in read_rows(str(folder), split="train", store=store)] == [{"s": "train"}]
    assert [r.data for r in read_rows(str(folder), split="validation", store=store)] == [{"s": "test"}, {"s": "train"}]


def test_missing_paths_and_unsupported_files(tmp_path: Path, store: Store) -> None:
    with pytest.raises(InputError, match=r"does not exist"):
        list(read_rows(str(tmp_path / "nope.jsonl"), store=store))
    with pytest.raises(InputError, match=r"does not exist"):
        list(read_rows("./org/name", store=store))
    csv = tmp_path / "x.csv"
    csv.write_text("a,b\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"unsupported file type '\.csv'"):
        list(read_rows(str(csv), store=store))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"folder with no \.jsonl, \.json, \.parquet, \.lean files"):
        list(read_rows(str(tmp_path / "empty"), store=store))


def test_hub_names_are_org_slash_name_not_found_locally(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert is_hub_name("internlm/Lean-Workbook")
    assert is_hub_name("Goedel-LM/Goedel-Pset-v1")
    assert not is_hub_name("s3://bucket/data")
    assert not is_hub_name("data.jsonl")
    assert not is_hub_name("./org/name")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "name").mkdir()
    assert not is_hub_name("org/name")
    # one shape rule: where the files are not known (a pod's, at render: cluster.needs.hub_sources) a local name
    # is still a hub name by its shape; every other shape is neither here nor there
    assert hub_shaped("org/name")
    for written in ("internlm/Lean-Workbook", "s3://bucket/data", "data.jsonl", "./org/name", "/abs/org/name",
                    "~/org/name", "file://org/name", "file:org/name", "org/name/more"):
        assert is_hub_name(written) == hub_shaped(written), written


def test_a_damaged_parquet_source_is_one_error_naming_the_file(tmp_path: Path, store: Store) -> None:
    checked = tmp_path / "checked.parquet"  # written with page checksums, as current writers may
    pq.write_table(pa.table({"statement": [f"theorem t{k} : {k} = {k}" for k in range(50)]}), checked,
                   write_page_checksum=True)
    damage(checked, lambda raw: flip_in_page(raw, "statement"))
    with pytest.raises(InputError, match=rf"^data file {checked} is damaged after row 0 \(.*CRC.*\): restore it or "
                       r"remove it from data\.sources$"):
        list(read_rows(str(checked), store=store))
    unchecked = tmp_path / "unchecked.parquet"  # no checksums: text that is not UTF-8 is still caught
    column = pa.array(["ok", "fine"])
    values = bytearray(column.buffers()[2].to_pybytes())
    values[2] = 0xFF
    invalid = pa.Array.from_buffers(pa.string(), 2, [None, column.buffers()[1], pa.py_buffer(bytes(values))])
    pq.write_table(pa.table({"statement": invalid}), unchecked)
    with pytest.raises(InputError, match=rf"^data file {unchecked} is damaged after row 0 \(.*UTF8.*\)"):
        list(read_rows(str(unchecked), store=store))

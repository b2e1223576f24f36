"""Theorem index files: the documented format, and the prototype's published indexes (no top-level name)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from burnqed.data.index import load_theorem_index
from burnqed.errors import InputError
from burnqed.storage import Store

PROTOTYPE = {"theorems": [
    {"name": "mathd_algebra_10", "statement": "abs ((120 : ℝ) / 100 * 30 - 130 / 100 * 20) = 10"},
    {"name": "amc12a_2019_p21", "statement": "∀ (z : ℂ), z = (1 + Complex.I) / Real.sqrt 2 → True"},
]}


def test_a_prototype_index_loads_as_it_is_named_after_its_file(tmp_path: Path, store: Store) -> None:
    path = tmp_path / "minif2f_test.json"
    path.write_text(json.dumps(PROTOTYPE, ensure_ascii=False), encoding="utf-8")
    for source in (path, str(path), f"file://{path}"):
        index = load_theorem_index(source, store=store)
        assert index.name == "minif2f_test"
        assert [(t.name, t.statement is not None, t.header) for t in index.theorems] == [
            ("mathd_algebra_10", True, None), ("amc12a_2019_p21", True, None)]


def test_a_top_level_name_is_kept_and_other_problems_still_fail(tmp_path: Path, store: Store) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"name": "mine", **PROTOTYPE}, ensure_ascii=False), encoding="utf-8")
    assert load_theorem_index(path, store=store).name == "mine"
    path.write_text(json.dumps([PROTOTYPE]), encoding="utf-8")
    with pytest.raises(InputError, match=r"theorem index .*x\.json"):
        load_theorem_index(path, store=store)
    path.write_text(json.dumps({"theorems": [{"name": "a", "statement": "p", "proof": "by simp"}]}), encoding="utf-8")
    with pytest.raises(InputError, match=r"theorems\.0\.proof: Extra inputs are not permitted"):
        load_theorem_index(path, store=store)


def _prepare(path: str) -> str:
    return (f"prepare one with `burnqed data prepare --set 'data.sources=[{{\"kind\": \"minif2f\", \"path\": "
            f"\"{path}\"}}]' --output DIR` (a benchmark; other kinds of source in docs/data.md) and pass --theorems "
            "DIR/theorems.json")


def test_a_file_that_is_no_index_names_the_command_that_makes_one(tmp_path: Path, store: Store) -> None:
    lean, rows, other = tmp_path / "bench.lean", tmp_path / "bench.jsonl", tmp_path / "rows.json"
    lean.write_text("theorem t : 1 = 1 := by sorry\n", encoding="utf-8")
    rows.write_text('{"name": "t", "formal_statement": "theorem t : 1 = 1 := by sorry"}\n', encoding="utf-8")
    other.write_text('[{"name": "t", "formal_statement": "theorem t : 1 = 1 := by sorry"}]', encoding="utf-8")
    (tmp_path / "bench").mkdir()
    (tmp_path / "prepared").mkdir()
    (tmp_path / "prepared" / "theorems.json").write_text(json.dumps(PROTOTYPE), encoding="utf-8")
    expected = {
        str(lean): f"theorem index {lean} is a Lean source file, not a theorem index (JSON); {_prepare(str(lean))}",
        str(rows): f"theorem index {rows} is a JSON lines file, not a theorem index (JSON); {_prepare(str(rows))}",
        str(other): f"theorem index {other}: top level: Input should be a valid dictionary or instance of "
                    f"TheoremIndex; a theorem index is the theorems.json `burnqed data prepare` writes: "
                    f"{_prepare(str(other))}",
        str(tmp_path / "bench"): f"theorem index {tmp_path}/bench is a folder, not a theorem index file; "
                                 f"{_prepare(str(tmp_path / 'bench'))}",
        str(tmp_path / "prepared"): f"theorem index {tmp_path}/prepared is a folder, not a theorem index file; did "
                                    f"you mean {tmp_path}/prepared/theorems.json?",
        str(tmp_path / "none.json"): f"theorem index {tmp_path}/none.json does not exist",
        "s3://bucket/bench.lean": "theorem index s3://bucket/bench.lean is a Lean source file, not a theorem index "
                                  f"(JSON); {_prepare('s3://bucket/bench.lean')}",
    }
    for path, message in expected.items():
        with pytest.raises(InputError) as caught:
            load_theorem_index(path, store=store)
        assert str(caught.value) == message


@pytest.mark.parametrize("path", ["", "  "])
def test_an_empty_theorems_path_is_refused_never_read_as_the_default_benchmark(path: str, store: Store) -> None:
    with pytest.raises(InputError) as caught:
        load_theorem_index(path, store=store)
    assert str(caught.value) == ("--theorems is empty: give a theorem index file, or leave --theorems out to use the "
                                 "embedded benchmark")


def test_an_index_with_a_bad_entry_names_the_entry_not_the_way_to_prepare_one(tmp_path: Path, store: Store) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"theorems": [{"name": "a", "statement": 3}]}), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_theorem_index(path, store=store)
    assert str(caught.value) == f"theorem index {path}: theorems.0.statement: Input should be a valid string"

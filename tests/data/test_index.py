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

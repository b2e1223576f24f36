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


def _write(path: Path, theorems: list[dict[str, str]]) -> Path:
    path.write_text(json.dumps({"name": "odd", "theorems": theorems}, ensure_ascii=False), encoding="utf-8")
    return path


def _refusal(path: Path, store: Store) -> str:
    with pytest.raises(InputError) as caught:
        load_theorem_index(path, store=store)
    return str(caught.value)


def test_a_duplicate_name_is_refused_naming_both_entries(tmp_path: Path, store: Store) -> None:
    path = _write(tmp_path / "i.json", [{"name": "a", "statement": "p"}, {"name": "b", "statement": "p"},
                                        {"name": "a", "statement": "q"}])
    assert _refusal(path, store) == (
        f"theorem index {path}: theorems: Value error, duplicate theorem name 'a': theorems.0 and theorems.2 both "
        "declare it (names are unique within an index)")
    # Names are compared as Lean declares them: `x` under `namespace Ns` is `Ns.x`.
    scoped = _write(tmp_path / "s.json", [{"name": "Ns.x", "statement": "p"},
                                          {"name": "x", "statement": "p", "header": "namespace Ns"}])
    assert "duplicate theorem name 'Ns.x': theorems.0 and theorems.1 both declare it" in _refusal(scoped, store)


RULE = ("a theorem name is a Lean identifier: parts separated by single dots, each a letter or _ followed by letters, "
        "digits, _, ', !, ? or subscripts, and no part a keyword such as `theorem`")


@pytest.mark.parametrize(("name", "problem"), [
    ("numina-0001", "'numina-0001' contains '-', which Lean does not take in a name"),
    ("my thm", "'my thm' contains ' ', which Lean does not take in a name"),
    ("«my thm»", "'«my thm»' contains '«', which Lean does not take in a name"),
    ("1abc", "'1abc' has a part starting with a digit ('1abc')"),
    ("Nat.2", "'Nat.2' has a part starting with a digit ('2')"),
    ("theorem", "'theorem' has the keyword 'theorem' as a part"),
    ("Foo.fun", "'Foo.fun' has the keyword 'fun' as a part"),
    ("a..b", "'a..b' has an empty part (a leading, trailing or doubled dot)"),
    ("a.", "'a.' has an empty part (a leading, trailing or doubled dot)"),
    ("théorème", "'théorème' contains 'é', which Lean does not take in a name"),
    ("λx", "'λx' contains 'λ', which Lean does not take in a name"),
    ("_root_.x", "'_root_.x' has the part '_root_' (give the name the declaration makes, without it)"),
    ("two\nlines", "'two\\nlines' contains '\\n', which Lean does not take in a name"),
])
def test_a_name_lean_cannot_declare_is_refused_with_the_rule(tmp_path: Path, store: Store, name: str,
                                                             problem: str) -> None:
    path = _write(tmp_path / "i.json", [{"name": "fine", "statement": "p"}, {"name": name, "statement": "p"}])
    message = _refusal(path, store)
    assert message == f"theorem index {path}: theorems.1.name: Value error, theorem name {problem}: {RULE}"
    assert "\n" not in message


def test_names_lean_declares_as_written_load(tmp_path: Path, store: Store) -> None:
    names = ["h₀'", "α_1", "Nat.foo!", "ok?", "ℕ_lemma", "𝒜b", "mathd_algebra_478", "Ω.ω₁"]
    path = _write(tmp_path / "i.json", [{"name": name, "statement": "p"} for name in names])
    assert [t.name for t in load_theorem_index(path, store=store).theorems] == names


@pytest.mark.parametrize("field", ["name", "statement", "signature", "header", "source", "split"])
def test_a_nul_byte_in_any_field_is_refused(tmp_path: Path, store: Store, field: str) -> None:
    entry = {"name": "a", "statement": "1 = 1", "signature": ": 1 = 1", "header": "open Nat", "source": "s",
             "split": "test"}
    entry[field] = entry[field][:1] + "\x00" + entry[field][1:]
    path = _write(tmp_path / "i.json", [entry])
    assert _refusal(path, store) == (
        f"theorem index {path}: theorems.0: Value error, {field} contains a NUL byte (\\x00 at character 1)")


def test_line_breaks_and_a_200_kb_statement_load_as_they_are(tmp_path: Path, store: Store) -> None:
    statement = "∀ (n : ℕ)\n  (h : n = n),\n  n" + " + 0" * 50_000 + " = n"
    assert len(statement.encode()) > 200_000
    path = _write(tmp_path / "i.json", [{"name": "big", "statement": statement}])
    theorem = load_theorem_index(path, store=store).theorems[0]
    assert theorem.statement == statement
    declaration = theorem.declaration()
    assert declaration is not None and declaration.startswith("theorem big ")
    assert declaration.endswith(f"n{' + 0' * 50_000} = n")


def test_a_10_000_entry_index_is_checked_once_per_entry(tmp_path: Path, store: Store,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # Set-up is linear (benchmarks/index_setup.py times 1,000 against 10,000 entries): each entry's name is checked
    # once when the file is read, and selecting a split or a shard does not check the kept entries again.
    from burnqed.data.index import select_split
    from burnqed.records import theorem
    from burnqed.search.runner import select_shard

    checked: list[str] = []
    real = theorem.lean_name_problem

    def counted(name: str) -> str | None:
        checked.append(name)
        return real(name)

    monkeypatch.setattr(theorem, "lean_name_problem", counted)
    path = _write(tmp_path / "i.json", [{"name": f"t_{i}", "statement": f"{i} = {i}", "split": "test" if i % 2
                                         else "train"} for i in range(10_000)])
    index = load_theorem_index(path, store=store)
    assert len(checked) == 10_000 and len(set(checked)) == 10_000
    assert len(select_split(index, "test").theorems) == 5_000
    assert len(select_shard(index.theorems, 3, 4)) == 2_500
    assert len(checked) == 10_000


def _prepare(path: str) -> str:
    return (f"prepare one with `burnqed data prepare --source benchmark={path} --output DIR` (a benchmark; other kinds "
            "of source in docs/data.md), which reports what it read, and pass --theorems DIR")


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

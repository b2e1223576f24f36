"""Lean source files as rows: one row per theorem with the header in force before it (no imports, no other
theorems), names qualified by open namespaces; a folder of them (the miniF2F-lean4 layout) read as rows whose
split the path names, with the project's other files left alone."""

from __future__ import annotations

from pathlib import Path

from burnqed.data.leanfile import example_name, lean_file_declarations, lean_file_rows
from burnqed.data.rows import path_split, read_rows
from burnqed.data.sources import Item, convert_row
from burnqed.lean.start import START_FORM
from burnqed.records.theorem import lean_name_problem
from burnqed.storage import Store

# All theorems in one file, as miniF2F-lean4 once shipped its test split: a copyright comment, imports, options,
# a namespace, comments that mention sorry, a multi-line statement, `n !` and π, `open … in`, an attribute.
ONE_FILE = """/-
Copyright (c) 2021 OpenAI. All rights reserved.
-/
import Mathlib
import Aesop

set_option maxHeartbeats 400000

open BigOperators Real Nat Topology Rat

/-- The units digit: no sorry here. -/
theorem mathd_numbertheory_235 : (29 * 79 + 31 * 81) % 10 = 2 := by
  sorry

namespace Bench

-- a comment between theorems
theorem amc12a_2008_p8 (x y : ℝ) (h₀ : 0 < x ∧ 0 < y) (h₁ : y ^ 3 = 1)
    (h₂ : 6 * x ^ 2 = 2 * (6 * y ^ 2)) : x ^ 3 = 2 * Real.sqrt 2 := by
  sorry

@[simp]
lemma fact_three (n : ℕ) (h₀ : n ! = 6) : n = 3 := by sorry

end Bench

open Real in
theorem pi_pos' (x : ℝ) (h₀ : x = π) : 0 < x := by
  rw [h₀]
  exact pi_pos

#eval 1 + 1
"""

OPTIONS = "set_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat"
BENCH = "namespace Bench\nend Bench\nsection\nopen Bench"  # namespace Bench, registered, then opened


def test_each_theorem_of_a_file_is_a_row_with_the_header_before_it() -> None:
    rows = lean_file_rows(ONE_FILE)
    assert [row.get("name") for row in rows] == [
        "mathd_numbertheory_235", "Bench.amc12a_2008_p8", "Bench.fact_three", "pi_pos'"]
    # the namespace as a section opening it: `theorem Bench.fact_three` after it declares Bench.fact_three
    assert [row["header"] for row in rows] == [
        OPTIONS, f"{OPTIONS}\n{BENCH}", f"{OPTIONS}\n{BENCH}",
        f"{OPTIONS}\n{BENCH}\nend\nopen Real in"]
    assert rows[1]["formal_statement"] == (
        "theorem amc12a_2008_p8 (x y : ℝ) (h₀ : 0 < x ∧ 0 < y) (h₁ : y ^ 3 = 1)\n"
        "    (h₂ : 6 * x ^ 2 = 2 * (6 * y ^ 2)) : x ^ 3 = 2 * Real.sqrt 2 := by\n  sorry")
    assert rows[2]["formal_statement"] == "lemma fact_three (n : ℕ) (h₀ : n ! = 6) : n = 3 := by sorry"
    assert rows[3]["formal_statement"].endswith("exact pi_pos")  # the `#eval` after it is no part of it
    assert lean_file_rows("import Mathlib\nimport MiniF2F.Test.aime_1983_p1\n") == []


def test_nested_namespaces_and_sections_qualify_names_as_lean_does() -> None:
    text = ("namespace A.B\nsection S\nvariable (n : ℕ)\nnamespace C\ntheorem t1 : n = n := rfl\nend C\nend S\n"
            "theorem t2 : True := trivial\ntheorem _root_.t3 : True := trivial\nend A.B\n"
            "theorem t4 : True := trivial\n")
    rows = lean_file_rows(text)
    assert [row["name"] for row in rows] == ["A.B.C.t1", "A.B.t2", "t3", "t4"]
    opened = ("namespace A.B\nend A.B\nsection\nopen A.B\nsection S\nvariable (n : ℕ)\n"
              "namespace A.B.C\nend A.B.C\nsection\nopen A.B.C")
    assert rows[0]["header"] == opened  # each namespace registered first: `open` of an unknown one is an error
    assert rows[3]["header"] == f"{opened}\nend\nend S\nend"


def write_lean_project(root: Path) -> Path:
    """A miniF2F-lean4 checkout in miniature: one file per theorem under MiniF2F/Test and MiniF2F/Valid."""
    files = {
        "lakefile.lean": "import Lake\nopen Lake DSL\n\npackage «miniF2F» where\n\nlean_lib MiniF2F where\n",
        "lake-manifest.json": '{"version": 7, "packages": [{"name": "mathlib", "rev": "abc"}]}',
        "MiniF2F.lean": "import MiniF2F.Test\nimport MiniF2F.Valid\n",
        "MiniF2F/Test.lean": "import MiniF2F.Test.mathd_numbertheory_235\nimport MiniF2F.Test.amc12a_2008_p8\n",
        "MiniF2F/Test/mathd_numbertheory_235.lean": (
            "import Mathlib\n\nset_option maxHeartbeats 400000\n\nopen BigOperators Real Nat Topology Rat\n\n"
            "theorem mathd_numbertheory_235 : (29 * 79 + 31 * 81) % 10 = 2 := by sorry"),
        "MiniF2F/Test/amc12a_2008_p8.lean": (
            "import Mathlib\n\nset_option maxHeartbeats 400000\n\nopen BigOperators Real Nat Topology Rat\n\n"
            "theorem amc12a_2008_p8 (x y : ℝ) (h₀ : 0 < x ∧ 0 < y) (h₁ : y ^ 3 = 1)\n"
            "    (h₂ : 6 * x ^ 2 = 2 * (6 * y ^ 2)) : x ^ 3 = 2 * Real.sqrt 2 := by sorry"),
        "MiniF2F/Valid/mathd_algebra_10.lean": (
            "import Mathlib\n\nset_option maxHeartbeats 400000\n\nopen BigOperators Real Nat Topology Rat\n\n"
            "-- the valid split\ntheorem mathd_algebra_10 (x : ℝ) (h₀ : x + 1 = 2) : x = 1 := by sorry\n"),
        ".lake/packages/mathlib/Mathlib.lean": "theorem hidden : True := trivial\n",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_a_lean_project_folder_is_read_as_its_lean_files(tmp_path: Path, store: Store) -> None:
    root = write_lean_project(tmp_path / "miniF2F-lean4")
    rows = list(read_rows(str(root), store=store))
    assert [(row.data or {}).get("name") for row in rows] == [
        "amc12a_2008_p8", "mathd_numbertheory_235", "mathd_algebra_10"]  # no manifest, lakefile or hidden rows
    assert [row.path_split for row in rows] == ["test", "test", "valid"]
    assert all((row.data or {})["header"] == OPTIONS for row in rows)
    valid = list(read_rows(str(root), split="valid", store=store))
    assert [(row.data or {}).get("name") for row in valid] == ["mathd_algebra_10"]
    one = list(read_rows(str(root / "MiniF2F" / "Valid"), store=store))
    assert [row.path_split for row in one] == ["valid"]  # the folder given is itself named after a split


def test_the_split_a_path_names(tmp_path: Path) -> None:
    root = tmp_path / "bench"
    assert path_split(root, root / "MiniF2F" / "Test" / "aime_1983_p1.lean") == "test"
    assert path_split(root, root / "data" / "test-00000-of-00001.parquet") == "test"
    assert path_split(root / "minif2f_valid.json", root / "minif2f_valid.json") == "valid"
    assert path_split(root / "Test.lean", root / "Test.lean") == "test"
    assert path_split(root / "minif2f.jsonl", root / "minif2f.jsonl") is None
    assert path_split(root, root / "mathd_test_case" / "x_y.lean") is None  # a word inside a name is no split


def test_a_docstring_opens_its_theorems_statement_and_reaches_the_index_entry() -> None:
    rows = lean_file_rows(ONE_FILE + "\n/-- With an attribute. -/\n@[simp] theorem attr (n : ℕ) : n = n := rfl\n"
                          "/-- Above its attribute line. -/\n@[simp]\ntheorem attr_line : True := trivial\n")
    assert rows[0]["formal_statement"] == (
        "/-- The units digit: no sorry here. -/\n"
        "theorem mathd_numbertheory_235 : (29 * 79 + 31 * 81) % 10 = 2 := by\n  sorry")
    assert rows[0]["header"] == OPTIONS  # the docstring is no part of the header
    entries = [convert_row("benchmark", row) for row in rows]
    theorems = [entry.theorem for entry in entries if isinstance(entry, Item)]
    assert [(t.name, t.docstring) for t in theorems] == [
        ("mathd_numbertheory_235", "The units digit: no sorry here."), ("Bench.amc12a_2008_p8", None),
        ("Bench.fact_three", None), ("pi_pos'", None), ("attr", "With an attribute."),
        ("attr_line", "Above its attribute line.")]


def test_a_file_without_a_declaration_has_no_rows() -> None:
    for text in ("", "  \n\n\t\n", "-- only a comment\n/- and a block -/\n", "import Mathlib\nopen Real\n"):
        assert lean_file_rows(text) == [], repr(text)


def test_every_declaration_is_a_row_with_its_line_and_an_example_is_named_after_where_it_stands() -> None:
    text = ("import Mathlib\n\nnamespace N\n\n/-- doc -/\nexample (n : ℕ) (h : n = 3) : n + 0 = 3 := by\n  sorry\n\n"
            "end N\n\n@[simp]\ntheorem broken (x : ℕ) := by\n  sorry\n\nexample : := by sorry\n")
    declared = lean_file_declarations(text, "Test/x.lean")
    assert [(line, row.get("name")) for line, row in declared] == [
        (6, "N.Test_x_lean_6"), (12, "broken"), (15, "Test_x_lean_15")]
    # without the file's name an example has no name (the converter rejects it as `unnamed_theorem`)
    assert [row.get("name") for row in lean_file_rows(text)] == [None, "broken", None]
    theorem = convert_row("benchmark", declared[0][1])
    assert isinstance(theorem, Item)
    assert (theorem.name, theorem.theorem.signature, theorem.theorem.docstring) == (
        "N.Test_x_lean_6", "(n : ℕ) (h : n = 3) : n + 0 = 3", "doc")
    assert theorem.theorem.declaration(START_FORM) == (
        "/-- doc -/\ntheorem N.Test_x_lean_6 (n : ℕ) (h : n = 3) : n + 0 = 3")
    assert [convert_row("benchmark", row).reason for _, row in declared[1:]] == [  # type: ignore[union-attr]
        "unparsable_statement", "unparsable_statement"]


def test_an_examples_name_is_file_and_line_as_one_lean_identifier() -> None:
    assert example_name("x.lean", 12) == "x_lean_12"
    assert example_name("Test/1-a b.lean", 3) == "Test_1_a_b_lean_3"
    assert example_name("1-a.lean", 3) == "_1_a_lean_3"
    assert example_name("théorème.lean", 7) == "th_or_me_lean_7"
    for name in ("x_lean_12", "_1_a_lean_3", "th_or_me_lean_7"):
        assert lean_name_problem(name) is None


def test_a_declaration_lean_reads_as_a_command_is_a_row_also_indented_or_after_in_on_its_line() -> None:
    text = ("theorem a : True := trivial\n\n  theorem indented : 1 = 1 := rfl\n\n"
            "open Real in theorem inline : 2 = 2 := rfl\n\nnamespace N\n  /-- doc -/\n  theorem inns : 3 = 3 := rfl\n"
            "end N\ntheorem last : 4 = 4 := rfl\n")
    declared = lean_file_declarations(text, "f.lean")
    assert [(line, row["name"], row["header"]) for line, row in declared] == [
        (1, "a", ""), (3, "indented", ""), (5, "inline", "open Real in"),
        (9, "N.inns", "namespace N\nend N\nsection\nopen N"), (11, "last", "namespace N\nend N\nsection\nopen N\nend")]
    assert [row["formal_statement"] for _, row in declared][:2] == [
        "theorem a : True := trivial", "theorem indented : 1 = 1 := rfl"]  # no longer part of the proof before it
    assert declared[3][1]["formal_statement"] == "/-- doc -/\n  theorem inns : 3 = 3 := rfl"

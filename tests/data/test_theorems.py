"""What `--theorems PATH` reads (burnqed/data/theorems.py): an index, a prepared-data folder, or a benchmark as users
have it converted on the fly as `burnqed data prepare --source benchmark=PATH` converts it; what reads as neither is
refused in one line naming that command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from burnqed.config import DataConfig, SourceSpec
from burnqed.data.collect import collect
from burnqed.data.theorems import TAKES, load_index, load_theorems
from burnqed.errors import InputError
from burnqed.storage import Store
from tests.data.test_leanfile import write_lean_project

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "tests" / "fixtures" / "benchmark" / "MyBench.lean"
ROW = {"name": "t", "formal_statement": "theorem t (a b : ℕ) : a + b = b + a := by sorry"}


def test_a_lean_file_is_read_as_data_prepare_reads_a_minif2f_source(store: Store) -> None:
    index = load_theorems(str(BENCH), store=store)
    assert index.name == "MyBench"
    assert [(t.name, t.signature, t.split) for t in index.theorems] == [
        ("my_2023_div_7", ": 2023 % 7 = 0", "test"),
        ("my_gcd_12_18", ": Nat.gcd 12 18 = 6", "test"),
        ("my_two_x_le_sq_plus_one", "(x : ℝ) : 2 * x ≤ x ^ 2 + 1", "test"),
        ("my_demorgan_not_or", "(p q : Prop) (h₀ : ¬(p ∨ q)) : ¬p ∧ ¬q", "test"),
    ]
    assert index.theorems[0].docstring == "2023 is a multiple of 7."
    assert index.theorems[0].header == "set_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat"
    # exactly the entries `burnqed data prepare --source benchmark=PATH` writes to its theorems.json
    prepared = collect(DataConfig(sources=[SourceSpec(kind="benchmark", path=str(BENCH))]), store=store)
    assert index.theorems == [candidate.theorem for candidate in prepared.candidates]


def test_a_folder_jsonl_json_rows_and_a_prepared_folder_are_read_too(tmp_path: Path, store: Store) -> None:
    project = write_lean_project(tmp_path / "miniF2F")
    folder = load_theorems(str(project), store=store)
    assert folder.name == "miniF2F"
    assert sorted((t.name, t.split) for t in folder.theorems) == [
        ("amc12a_2008_p8", "test"), ("mathd_algebra_10", "valid"), ("mathd_numbertheory_235", "test")]
    (tmp_path / "rows.jsonl").write_text(json.dumps(ROW, ensure_ascii=False) + "\n", encoding="utf-8")
    (tmp_path / "rows.json").write_text(json.dumps([ROW], ensure_ascii=False), encoding="utf-8")
    for name in ("rows.jsonl", "rows.json"):
        index = load_theorems(str(tmp_path / name), store=store)
        signatures = [(t.name, t.signature) for t in index.theorems]
        assert (index.name, signatures) == ("rows", [("t", "(a b : ℕ) : a + b = b + a")])
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    (prepared / "theorems.json").write_text(json.dumps({"name": "mine", "theorems": [
        {"name": "u", "statement": "1 = 1"}]}), encoding="utf-8")
    assert [t.name for t in load_theorems(str(prepared), store=store).theorems] == ["u"]
    assert load_theorems(f"file://{prepared}/theorems.json", store=store).name == "mine"


def _hint(path: str) -> str:
    return (f"prepare one with `burnqed data prepare --source benchmark={path} --output DIR` (a benchmark; other kinds "
            "of source in docs/data.md), which reports what it read, and pass --theorems DIR")


def test_what_reads_as_neither_is_one_line_naming_the_command_that_prepares_an_index(tmp_path: Path,
                                                                                      store: Store) -> None:
    (tmp_path / "notes.lean").write_text("import Mathlib\n-- nothing declared yet\n", encoding="utf-8")
    (tmp_path / "garbage.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "other.json").write_text('{"rows": 3}', encoding="utf-8")
    (tmp_path / "empty").mkdir()
    expected = {
        "notes.lean": f"--theorems {tmp_path}/notes.lean: no theorem could be read from it (source 0 benchmark: "
                      f"0 rows, 0 rejected, 0 kept, 0 pairs; source 0 (benchmark, {tmp_path}/notes.lean): no rows "
                      "(no theorem, lemma or example is declared in it)); a theorem index is a theorems.json: "
                      f"{_hint(f'{tmp_path}/notes.lean')}",
        "garbage.json": f"theorem index {tmp_path}/garbage.json is not valid JSON: Expecting property name enclosed in "
                        "double quotes: line 1 column 2 (char 1); a theorem index is the theorems.json `burnqed data "
                        f"prepare` writes: {_hint(f'{tmp_path}/garbage.json')}",
        "other.json": f"--theorems {tmp_path}/other.json is a JSON object with the key rows, not theorems: {TAKES}",
        "empty": f"--theorems: data source {tmp_path}/empty is a folder with no .jsonl, .json, .parquet, .lean files",
        "missing.json": f"theorem index {tmp_path}/missing.json does not exist",
    }
    for name, message in expected.items():
        with pytest.raises(InputError) as caught:
            load_theorems(str(tmp_path / name), store=store)
        assert str(caught.value) == message, name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "garbage.json", "notes.lean", "other.json"]


# A benchmark file as a user writes one: an `example`, a statement that does not parse, two good theorems.
FOUR = """import Mathlib

open Real

theorem good_one (a : ℕ) (h : a = 2) : a + 1 = 3 := by
  sorry

example (n : ℕ) (h : n = 3) : n + 0 = 3 := by
  sorry

theorem broken (x : ℕ) := by
  sorry

theorem good_two : (2 : ℕ) + 2 = 4 := by
  sorry
"""


def test_every_declaration_of_a_lean_benchmark_is_a_theorem_or_skipped_with_line_and_reason(
        tmp_path: Path, store: Store) -> None:
    bench = tmp_path / "x.lean"
    bench.write_text(FOUR + "\ntheorem good_one (a : ℕ) (h : a = 2) : a + 1 = 3 := by\n  sorry\n\n"
                     "theorem same_as_two : (2 : ℕ) + 2 = 4 := by\n  sorry\n\n"
                     "theorem good_one (b : ℕ) : b = b := by\n  sorry\n", encoding="utf-8")
    index = load_theorems(str(bench), store=store)
    assert [(t.name, t.signature) for t in index.theorems] == [
        ("good_one", "(a : ℕ) (h : a = 2) : a + 1 = 3"), ("x_lean_8", "(n : ℕ) (h : n = 3) : n + 0 = 3"),
        ("good_two", ": (2 : ℕ) + 2 = 4")]
    assert [(s.name, s.file, s.line, s.reason, s.detail) for s in index.skipped] == [
        ("broken", str(bench), 11, "unparsable_statement", "no `theorem … : type` declaration found"),
        ("good_one", str(bench), 17, "duplicate_declaration",
         "good_one is declared before at line 5 with this statement: evaluated there"),
        ("same_as_two", str(bench), 20, "same_statement", "good_two states the same: evaluated as good_two"),
        ("good_one", str(bench), 23, "conflicting_statement", "good_one is declared before at line 5 with another "
         "statement"),
    ]
    assert index.model_dump().keys() == {"name", "theorems"}  # never written to an index file


def test_a_folders_skipped_declarations_name_their_file_and_follow_the_split(tmp_path: Path, store: Store) -> None:
    project = write_lean_project(tmp_path / "miniF2F")
    (project / "MiniF2F" / "Valid" / "bad.lean").write_text("example : := by sorry\n", encoding="utf-8")
    (project / "MiniF2F" / "Test" / "ex.lean").write_text("\nexample : 1 = 1 := by sorry\n", encoding="utf-8")
    index = load_index(str(project), None, store=store)
    assert "MiniF2F_Test_ex_lean_2" in [t.name for t in index.theorems]
    assert [(s.name, s.file, s.line, s.reason, s.split) for s in index.skipped] == [
        ("MiniF2F_Valid_bad_lean_1", f"{project}/MiniF2F/Valid/bad.lean", 1, "unparsable_statement", "valid")]
    assert load_index(str(project), "test", store=store).skipped == []
    assert len(load_index(str(project), "valid", store=store).skipped) == 1


def test_a_document_burnqed_writes_given_as_theorems_is_named_with_what_theorems_takes(tmp_path: Path,
                                                                                        store: Store) -> None:
    from datetime import UTC, datetime

    from burnqed.data.data_report import DataReport
    from burnqed.report.document import Report
    from tests.eval.test_report import publish

    publish(f"file://{tmp_path}/eval.json", {"world_0"}, store=store)  # what `burnqed eval --output` writes
    report = Report(root="file:///runs", iteration=0, rows=[], iterations=[], gates=[])
    (tmp_path / "report.json").write_text(report.model_dump_json(), encoding="utf-8")
    data = DataReport(created_at=datetime(2026, 1, 1, tzinfo=UTC), replay=False, lean_command=None,
                      valid_fraction=0.1, split_salt="s", contrastive_min_depth=2, sources=[], theorems=3, pairs=5,
                      splits={}, depth_histogram={}, contrastive=0, elapsed_s=1.0)
    (tmp_path / "data-report.json").write_text(data.model_dump_json(), encoding="utf-8")
    (tmp_path / "keys.json").write_text(json.dumps({k: 1 for k in "abcdefgh"}), encoding="utf-8")
    (tmp_path / "empty.json").write_text("{}", encoding="utf-8")
    expected = {
        "eval.json": "an eval result (the file `burnqed eval --output` writes)",
        "report.json": "an iteration report (the report.json `burnqed report` writes)",
        "data-report.json": "a data report (the report.json `burnqed data prepare` writes)",
        "keys.json": "a JSON object with the keys a, b, c, d, e, f and 2 more",
        "empty.json": "an empty JSON object",
    }
    for name, what in expected.items():
        for path in (str(tmp_path / name), f"memory://{tmp_path.name}/{name}"):
            if path.startswith("memory://"):
                store.write_bytes(path, (tmp_path / name).read_bytes())
            with pytest.raises(InputError) as caught:
                load_theorems(path, store=store)
            assert str(caught.value) == f"--theorems {path} is {what}, not theorems: {TAKES}", path
    assert TAKES == ("--theorems takes a theorem index (a JSON object with a `theorems` list, as the theorems.json "
                     "`burnqed data prepare` writes), a prepared-data folder, or a benchmark as you have it: a .lean "
                     "file or a folder of them, a DeepSeek/miniF2F .jsonl (formats: docs/data.md)")


def test_the_documents_above_data_are_known_by_the_fields_their_models_require() -> None:
    """data/ names the required fields of eval's and report's documents instead of importing them (it stands below
    both): the sets are the models' own, so a field made required there is one here too."""
    from burnqed.data.index import WRITTEN_ABOVE
    from burnqed.eval.result import EvalResult
    from burnqed.report.document import Report

    assert [(required, words.split(" (")[0]) for required, words in WRITTEN_ABOVE] == [
        (frozenset(name for name, field in model.model_fields.items() if field.is_required()), words)
        for model, words in ((EvalResult, "an eval result"), (Report, "an iteration report"))]


@pytest.mark.slow
def test_a_benchmark_folder_on_s3_is_read_as_the_same_folder_here(s3_root: str, tmp_path: Path) -> None:
    # what render's refusal of a local pipeline.benchmark folder says to do: `aws s3 cp --recursive` it and name the
    # prefix; a pod then reads the folder's .lean files as the local folder is read
    store = Store(cache_dir=tmp_path / "cache")
    folder = f"{s3_root}/burnqed-inputs/bench"
    store.write_bytes(f"{folder}/MyBench.lean", BENCH.read_bytes())
    assert load_theorems(folder, store=store).theorems == load_theorems(str(BENCH.parent), store=store).theorems
    prepared = f"{s3_root}/iter_0/data"  # a prepared-data folder: its theorems.json
    index = load_theorems(str(BENCH), store=store)
    store.write_bytes(f"{prepared}/theorems.json", index.model_dump_json().encode())
    assert load_theorems(prepared, store=store).theorems == index.theorems


def test_a_syntax_error_in_a_benchmark_is_named_with_its_line_not_sent_to_lean(tmp_path: Path, store: Store) -> None:
    # the new user's typo: filed as needs_real_lean ("Mathlib's names and notation") after the embedded Lean failed
    # to start it, which sent them to install Lean
    bench = tmp_path / "bench.lean"
    bench.write_text("import Mathlib\n\ntheorem good (x : ℕ) (h : x = 2) : x + 1 = 3 := by\n  sorry\n\n"
                     "/-- a docstring -/\ntheorem typo (x : ℕ)\n    (h : x + = 3) : x = 3 := by\n  sorry\n\n"
                     "theorem ring_hom (f : ℕ →+* ℕ) (s : Finset ℕ) : f (∑ i ∈ s, i) = ∑ i ∈ s, f i := by\n  sorry\n")
    index = load_theorems(str(bench), store=store)
    assert [t.name for t in index.theorems] == ["good", "ring_hom"]  # `→+*` is one token: no syntax error
    (skipped,) = index.skipped
    assert (skipped.name, skipped.file, skipped.line, skipped.reason, skipped.detail) == (
        "typo", str(bench), 8, "syntax_error",
        "a syntax error in the statement: `+ =` is two operators with no term between them, which no Lean parses")

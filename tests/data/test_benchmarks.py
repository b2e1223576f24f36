"""Benchmarks as users have them, through `burnqed data prepare` (source kind `benchmark`): the DeepSeek-Prover
JSONL, a miniF2F-lean4 folder of `.lean` files, an id-only layout and a prototype index each enter alone, without
tactic pairs, keeping every theorem's header (no imports) and binder-form signature; eval's index reader takes
the result. Training data is decontaminated against the benchmark: a training statement equal to a benchmark
statement up to renaming is dropped and reported, the bundled training set's copy of mathd_numbertheory_235
included."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from burnqed.config import DataConfig
from burnqed.data.data_report import read_report
from burnqed.data.index import load_theorem_index
from burnqed.data.pairs import read_pairs
from burnqed.data.prepare import PreparedData, prepare_data
from burnqed.data.theorems import load_index
from burnqed.records.enums import DeclarationForm
from burnqed.storage import Store
from tests.data.samples import GUARD, replay_opener, sample_corpus, write_jsonl
from tests.data.test_leanfile import write_lean_project
from tests.processes import cli

DEEPSEEK_HEADER = ("import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 0\n\n"
                   "open BigOperators Real Nat Topology Rat\n\n")
OPTIONS = "set_option maxHeartbeats 0\nopen BigOperators Real Nat Topology Rat"

# DeepSeek-Prover-V1.5's datasets/minif2f.jsonl layout: name, split, informal_prefix, formal_statement, goal, header.
DEEPSEEK: list[dict[str, Any]] = [
    {"name": "mathd_numbertheory_235", "split": "test", "informal_prefix": "/-- What is the units digit? -/\n",
     "formal_statement": "theorem mathd_numbertheory_235 : (29 * 79 + 31 * 81) % 10 = 2 := by\n",
     "goal": "⊢ (29 * 79 + 31 * 81) % 10 = 2", "header": DEEPSEEK_HEADER},
    {"name": "amc12a_2008_p8", "split": "test", "informal_prefix": "",
     "formal_statement": "theorem amc12a_2008_p8 (x y : ℝ) (h₀ : 0 < x ∧ 0 < y) (h₁ : y ^ 3 = 1)\n"
                         "  (h₂ : 6 * x ^ 2 = 2 * (6 * y ^ 2)) : x ^ 3 = 2 * Real.sqrt 2 := by\n",
     "goal": "", "header": DEEPSEEK_HEADER},
    {"name": "mathd_numbertheory_1124", "split": "test", "informal_prefix": "",
     "formal_statement": "theorem mathd_numbertheory_1124 (n : ℕ) (h₀ : n ≤ 9) (h₁ : 18 ∣ 374 * 10 + n) :\n"
                         "  n = 4 := by\n", "goal": "", "header": DEEPSEEK_HEADER},
    {"name": "imo_pi_fact", "split": "valid", "informal_prefix": "",
     "formal_statement": "theorem imo_pi_fact (n : ℕ) (x : ℝ) (h₀ : n ! = 6) (h₁ : x = π) :\n"
                         "  0 < x * n := by\n", "goal": "", "header": DEEPSEEK_HEADER},
]


@contextmanager
def no_progress(label: str, total: int) -> Iterator[Callable[[int], None]]:
    def advance(n: int = 1) -> None:
        pass

    yield advance


def prepare(sources: list[dict[str, Any]], store: Store, **settings: Any) -> PreparedData:
    config = DataConfig.model_validate({"sources": sources, **settings})
    return asyncio.run(prepare_data(config, open_lean=replay_opener(sample_corpus()), guard=GUARD,
                                    progress=no_progress, store=store))


def test_a_deepseek_jsonl_enters_alone_with_headers_and_signatures(tmp_path: Path, store: Store) -> None:
    path = write_jsonl(tmp_path / "minif2f.jsonl", DEEPSEEK)
    prepared = prepare([{"kind": "benchmark", "path": str(path)}], store)
    assert prepared.pairs == [] and prepared.report.warnings == []
    entries = [(t.name, t.split, t.signature, t.header) for t in prepared.index.theorems]
    assert entries == [
        ("mathd_numbertheory_235", "test", ": (29 * 79 + 31 * 81) % 10 = 2", OPTIONS),
        ("amc12a_2008_p8", "test", "(x y : ℝ) (h₀ : 0 < x ∧ 0 < y) (h₁ : y ^ 3 = 1) (h₂ : 6 * x ^ 2 = 2 * (6 * y ^ 2)) "
         ": x ^ 3 = 2 * Real.sqrt 2", OPTIONS),
        ("mathd_numbertheory_1124", "test", "(n : ℕ) (h₀ : n ≤ 9) (h₁ : 18 ∣ 374 * 10 + n) : n = 4", OPTIONS),
        ("imo_pi_fact", "valid", "(n : ℕ) (x : ℝ) (h₀ : n ! = 6) (h₁ : x = π) : 0 < x * n", OPTIONS),
    ]
    # Its docstrings are DeepSeek's `informal_prefix` column.
    assert [t.docstring for t in prepared.index.theorems] == ["What is the units digit?", None, None, None]
    fact = prepared.index.theorems[3]
    assert fact.statement == "∀ (n : ℕ) (x : ℝ) (h₀ : n ! = 6) (h₁ : x = π), 0 < x * n"
    assert fact.declaration() == "theorem imo_pi_fact (n : ℕ) (x : ℝ) (h₀ : n ! = 6) (h₁ : x = π) : 0 < x * n"
    assert fact.declaration(DeclarationForm.FORALL) == f"theorem imo_pi_fact : {fact.statement}"


def test_a_lean_folder_enters_with_the_split_its_paths_name(tmp_path: Path, store: Store) -> None:
    root = write_lean_project(tmp_path / "miniF2F-lean4")
    prepared = prepare([{"kind": "benchmark", "path": str(root)}], store)
    assert [(t.name, t.split, t.signature) for t in prepared.index.theorems] == [
        ("amc12a_2008_p8", "test", "(x y : ℝ) (h₀ : 0 < x ∧ 0 < y) (h₁ : y ^ 3 = 1) (h₂ : 6 * x ^ 2 = 2 * (6 * y ^ 2)) "
         ": x ^ 3 = 2 * Real.sqrt 2"),
        ("mathd_numbertheory_235", "test", ": (29 * 79 + 31 * 81) % 10 = 2"),
        ("mathd_algebra_10", "valid", "(x : ℝ) (h₀ : x + 1 = 2) : x = 1"),
    ]
    assert {t.header for t in prepared.index.theorems} == {
        "set_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat"}
    assert prepared.report.sources[0].rejected_rows == {} and prepared.pairs == []
    only_valid = prepare([{"kind": "benchmark", "path": str(root), "split": "valid"}], store)
    assert [t.name for t in only_valid.index.theorems] == ["mathd_algebra_10"]


def test_an_id_only_layout_keeps_names_and_never_collides_across_splits(tmp_path: Path, store: Store) -> None:
    rows = [  # ids numbered per split, as some exports do; the declared names are the theorems' names
        {"id": "0", "split": "test",
         "formal_statement": "theorem mathd_algebra_478 (b : ℝ) (h₀ : b = 30) : b = 30 := by"},
        {"id": "1", "split": "test", "formal_statement": "theorem shared_name : (2 : ℕ) + 2 = 4 := by sorry"},
        {"id": "0", "split": "validation", "formal_statement": "theorem amc12_2000_p5 : (1 : ℕ) < 2 := by"},
        {"id": "1", "split": "validation", "formal_statement": "theorem shared_name : (3 : ℕ) + 3 = 6 := by sorry"},
        {"id": "hole", "split": "test", "formal_statement": "example : True := by sorry"},
    ]
    path = write_jsonl(tmp_path / "minif2f_ids.jsonl", rows)
    prepared = prepare([{"kind": "benchmark", "path": str(path)}], store)
    assert [(t.name, t.split, t.statement) for t in prepared.index.theorems] == [
        ("mathd_algebra_478", "test", "∀ (b : ℝ) (h₀ : b = 30), b = 30"),
        ("shared_name", "test", "(2 : ℕ) + 2 = 4"),
        ("amc12_2000_p5", "valid", "(1 : ℕ) < 2"),
        ("shared_name_valid", "valid", "(3 : ℕ) + 3 = 6"),
        ("hole", "test", "True"),  # an `example` is named by its id
    ]
    report = prepared.report.sources[0]
    assert (report.rows, report.kept, report.renamed, report.rejected) == (5, 5, 1, 0)


def test_a_prototype_index_enters_with_signatures_from_its_binders(tmp_path: Path, store: Store) -> None:
    index = {"theorems": [  # the prototype's published form, as for PutnamBench and ProverBench
        {"name": "putnam_1988_b1", "statement": "∀ (a b : ℕ), a ≥ 2 → b ≥ 2 → ∃ x y z : ℕ, x > 0 ∧ a * b = x * y + z"},
        {"name": "proverbench_1", "statement": "∀ (x : ℝ) (h₀ : 0 < x), 0 < x ^ 2",
         "header": "import Mathlib\nopen Real"},
    ]}
    path = tmp_path / "putnam_valid.json"
    path.write_text(json.dumps(index, ensure_ascii=False), encoding="utf-8")
    prepared = prepare([{"kind": "benchmark", "path": str(path)}], store)
    entries = [(t.name, t.split, t.binder_signature, t.header) for t in prepared.index.theorems]
    assert entries == [
        ("putnam_1988_b1", "valid", "(a b : ℕ) : a ≥ 2 → b ≥ 2 → ∃ x y z : ℕ, x > 0 ∧ a * b = x * y + z", None),
        ("proverbench_1", "valid", "(x : ℝ) (h₀ : 0 < x) : 0 < x ^ 2", "open Real"),
    ]
    (tmp_path / "bench.json").write_text(json.dumps(index, ensure_ascii=False), encoding="utf-8")
    named = prepare([{"kind": "benchmark", "path": str(tmp_path / "bench.json")}], store)
    assert {t.split for t in named.index.theorems} == {"test"}  # a benchmark without a split is a test set


def test_a_planted_training_duplicate_is_dropped_and_reported(tmp_path: Path, store: Store) -> None:
    benchmark = write_jsonl(tmp_path / "minif2f.jsonl", DEEPSEEK)
    training = write_jsonl(tmp_path / "workbook.jsonl", [
        {"id": "lw_planted", "formal_statement":  # amc12a_2008_p8 with its variables and hypotheses renamed
         "theorem lw_planted (a b : ℝ) (ha : 0 < a ∧ 0 < b) (hb : b ^ 3 = 1)\n    (hc : 6 * a ^ 2 = 2 * (6 * b ^ 2)) :"
         " a ^ 3 = 2 * Real.sqrt 2 := by sorry"},
        {"id": "lw_other", "formal_statement": "theorem lw_other (a : ℝ) (ha : 0 < a) : 0 < a ^ 3 := by sorry"},
    ])
    sources = [{"kind": "bundled"}, {"kind": "lean-workbook", "path": str(training)},
               {"kind": "benchmark", "path": str(benchmark)}]
    prepared = prepare(sources, store, valid_fraction=0.0)
    overlaps = [(o.training, o.training_source, o.benchmark, o.benchmark_source, o.benchmark_split)
                for o in prepared.report.overlaps]
    assert overlaps == [
        ("nt_units_digit_sum_products", "bundled", "mathd_numbertheory_235", "benchmark", "test"),
        ("lw_planted", "lean-workbook", "amc12a_2008_p8", "benchmark", "test"),
    ]
    names = {t.name for t in prepared.index.theorems}
    assert "lw_other" in names and not names & {"lw_planted", "nt_units_digit_sum_products"}
    assert {p.theorem for p in prepared.pairs}.isdisjoint({"nt_units_digit_sum_products"})
    assert [s.rejected_theorems for s in prepared.report.sources] == [
        {"benchmark_overlap": 1}, {"benchmark_overlap": 1}, {}]
    assert [t.split for t in prepared.index.theorems if t.source == "benchmark"] == ["test", "test", "test", "valid"]


def test_the_documented_route_then_report_and_eval_read_it(tmp_path: Path, store: Store) -> None:
    benchmark = write_lean_project(tmp_path / "miniF2F-lean4")
    alone = tmp_path / "benchmark"
    result = cli("data", "prepare", "--output", str(alone), "--set",
                 json_sources([{"kind": "benchmark", "path": str(benchmark)}]))
    assert result.returncode == 0, result.stderr
    assert "prepared data · 3 theorems · 0 pairs" in result.stdout
    assert read_pairs(alone) == []
    test = load_index(str(alone / "theorems.json"), "test", store=store)  # what `burnqed eval --split test` reads
    assert [t.declaration() for t in test.theorems] == [
        "theorem amc12a_2008_p8 (x y : ℝ) (h₀ : 0 < x ∧ 0 < y) (h₁ : y ^ 3 = 1) (h₂ : 6 * x ^ 2 = 2 * (6 * y ^ 2)) "
        ": x ^ 3 = 2 * Real.sqrt 2",
        "theorem mathd_numbertheory_235 : (29 * 79 + 31 * 81) % 10 = 2",
    ]

    mixed = tmp_path / "mixed"
    result = cli("data", "prepare", "--output", str(mixed), "--set",
                 json_sources([{"kind": "bundled"}, {"kind": "benchmark", "path": str(benchmark)}]))
    assert result.returncode == 0, result.stderr
    shown = cli("data", "report", str(mixed))
    assert shown.returncode == 0
    assert ("decontamination: 1 training theorems dropped as restating a benchmark theorem (sources: 1, "
            "pipeline.benchmark: 0)\n"
            "  compared with: benchmark (sources, 3 theorems), embedded-test (pipeline.benchmark, 71 theorems)\n"
            "  nt_units_digit_sum_products (bundled) = mathd_numbertheory_235 (benchmark, test)") in shown.stdout
    as_json = json.loads(cli("data", "report", str(mixed), "--json").stdout)
    assert as_json["overlaps"][0]["training"] == "nt_units_digit_sum_products"
    assert read_report(str(mixed), store=store).sources[0].rejected_theorems == {"benchmark_overlap": 1}
    index = load_theorem_index(mixed / "theorems.json", store=store)
    assert "nt_units_digit_sum_products" not in {t.name for t in index.theorems}


def json_sources(sources: list[dict[str, Any]]) -> str:
    return f"data.sources={json.dumps(sources)}"


# A benchmark file as published exports write it: docstrings (one above an attribute line), comments in statements.
WITH_DOCSTRINGS = """import Mathlib

open BigOperators Real Nat Topology Rat

/-- What is the units digit of $29 \\cdot 79 + 31 \\cdot 81$? Show that it is 2. -/
theorem mathd_numbertheory_235 : (29 * 79 + 31 * 81) % 10 = 2 := by  -- copy 0
  sorry

/-- If $x + 1 = 2$, then $x = 1$.
    (A docstring on two lines.) -/
@[simp]
theorem mathd_algebra_10 (x : ℝ) -- the unknown
    (h₀ : x + 1 = /- nested /- comment -/ -/ 2) : x = 1 := by
  sorry

-- no docstring here
theorem plain (n : ℕ) : n + 0 = n := by sorry
"""


@pytest.mark.slow
def test_data_prepare_keeps_the_docstrings_of_a_lean_file_in_the_index(tmp_path: Path, store: Store) -> None:
    source = tmp_path / "bench.lean"
    source.write_text(WITH_DOCSTRINGS, encoding="utf-8")
    out = tmp_path / "prepared"
    result = cli("data", "prepare", "--output", str(out), "--set",
                 json_sources([{"kind": "benchmark", "path": str(source)}]))
    assert result.returncode == 0, result.stderr
    written = json.loads((out / "theorems.json").read_text(encoding="utf-8"))["theorems"]
    assert [(t["name"], t.get("docstring"), t["signature"]) for t in written] == [
        ("mathd_numbertheory_235", "What is the units digit of $29 \\cdot 79 + 31 \\cdot 81$? Show that it is 2.",
         ": (29 * 79 + 31 * 81) % 10 = 2"),
        ("mathd_algebra_10", "If $x + 1 = 2$, then $x = 1$.\n    (A docstring on two lines.)",
         "(x : ℝ) (h₀ : x + 1 = 2) : x = 1"),
        ("plain", None, "(n : ℕ) : n + 0 = n"),
    ]
    index = load_theorem_index(out / "theorems.json", store=store)
    assert index.theorems[1].declaration() == (
        "/-- If $x + 1 = 2$, then $x = 1$.\n    (A docstring on two lines.) -/\n"
        "theorem mathd_algebra_10 (x : ℝ) (h₀ : x + 1 = 2) : x = 1")

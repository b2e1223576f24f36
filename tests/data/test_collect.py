"""Collecting sources before Lean: the sorry filter drops whole theorems, dedup by name and statement
(earlier wins, equal theorems merge), stable splits, split and limit selection, loud warnings."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from burnqed.config import DataConfig, SourceSpec
from burnqed.data.collect import collect
from burnqed.errors import InputError
from burnqed.records.theorem import stable_split
from burnqed.storage import Store
from tests.data.samples import (
    GOEDEL_PROOFS,
    LEAN_GITHUB,
    LEAN_WORKBOOK,
    MINIF2F,
    write_json,
    write_jsonl,
    write_parquet,
)


def config(*sources: SourceSpec, **settings: object) -> DataConfig:
    return DataConfig.model_validate({"sources": [s.model_dump() for s in sources], **settings})


@pytest.mark.slow
def test_a_sorry_anywhere_drops_the_whole_theorem(tmp_path: Path, store: Store) -> None:
    github = write_parquet(tmp_path / "gh.parquet", LEAN_GITHUB)
    extra = {**LEAN_WORKBOOK[0], "proof": [LEAN_WORKBOOK[0]["proof"][0], "nlinarith [h₀]\n  admit"]}
    workbook = write_json(tmp_path / "wb.json", [extra])
    collection = collect(config(SourceSpec(kind="lean-github", path=str(github)),
                                SourceSpec(kind="lean-workbook", path=str(workbook))), store=store)
    # Repo.cheater's good first step goes too; lean_workbook_1 loses its good proof with the bad one.
    assert [c.name for c in collection.candidates] == ["Repo.add_zero'"]
    github_report, workbook_report = collection.reports
    assert (github_report.rows, github_report.theorems, github_report.rejected_theorems) == (4, 2, {"sorry": 1})
    assert workbook_report.rejected_theorems == {"sorry": 1}
    assert workbook_report.examples == ["lean_workbook_1: uses sorry/admit/cheat in 'nlinarith [h₀]\\n  admit'"]
    assert collection.warnings == ["source 1 (lean-workbook): none of its 1 theorems was kept (sorry 1)"]


def test_dedup_by_name_and_statement_earlier_source_wins(tmp_path: Path, store: Store) -> None:
    first = write_jsonl(tmp_path / "first.jsonl", [
        {"problem_id": "p1", "formal_statement": "theorem p1 (x : ℕ) : x + 0 = x := by sorry"},
        {"problem_id": "p2", "formal_statement": "theorem p2 : (2 : ℕ) + 2 = 4 := by sorry"},
    ])
    second = write_jsonl(tmp_path / "second.jsonl", [
        {"problem_id": "p1", "full_proof": "theorem p1 (x : ℕ) : x + 0 = x := by simp"},  # same theorem: merged
        {"problem_id": "p2", "full_proof": "theorem p2 : (2 : ℕ) + 3 = 5 := by norm_num"},  # another statement
        {"problem_id": "q9", "full_proof": "theorem q9 (x : ℕ) :\n  x + 0 = x := by\n  rfl"},  # p1's statement
    ])
    collection = collect(config(SourceSpec(kind="goedel-pset", path=str(first)),
                                SourceSpec(kind="goedel-proofs", name="proofs", path=str(second))), store=store)
    assert [(c.name, c.statement, c.label) for c in collection.candidates] == [
        ("p1", "∀ (x : ℕ), x + 0 = x", "goedel-pset"),
        ("p2", "(2 : ℕ) + 2 = 4", "goedel-pset"),
    ]
    p1 = collection.candidates[0]
    assert [(ref.tactics, ref.source) for ref in p1.proofs] == [(("simp",), 1), (("rfl",), 1)]
    second_report = collection.reports[1]
    assert (second_report.theorems, second_report.merged, second_report.kept) == (3, 2, 0)
    assert second_report.rejected_theorems == {"duplicate_name": 1}
    assert second_report.examples == ["p2: name already used by source 0 (goedel-pset) with another statement"]
    assert collection.warnings == []


def test_rows_of_one_theorem_merge_and_a_restated_name_is_rejected(tmp_path: Path, store: Store) -> None:
    source = write_jsonl(tmp_path / "s.jsonl", [
        {"problem_id": "a", "full_proof": "theorem a (x : ℕ) : x + 0 = x := by simp"},
        {"problem_id": "a", "full_proof": "theorem a (x : ℕ) :\n    x + 0 = x := by\n  omega"},
        {"problem_id": "a", "full_proof": "theorem a (x : ℕ) : 0 + x = x := by simp"},
    ])
    collection = collect(config(SourceSpec(kind="goedel-proofs", path=str(source))), store=store)
    assert [(c.name, [ref.tactics for ref in c.proofs]) for c in collection.candidates] == [
        ("a", [("simp",), ("omega",)])]
    assert collection.reports[0].rejected_rows == {"conflicting_statement": 1}
    assert (collection.reports[0].theorems, collection.reports[0].merged) == (1, 0)


def test_splits_are_stable_by_name_and_fixed_where_the_source_fixes_them(tmp_path: Path, store: Store) -> None:
    assert [stable_split(n, 0.5) for n in ("nt_prime_two_le", "mathd_algebra_478", "lean_workbook_1",
                                           "numina-0001")] == ["valid", "valid", "train", "train"]
    assert [stable_split(n, 0.5, "other") for n in ("nt_prime_two_le", "numina-0001", "goedel_pset_1")] == [
        "train", "valid", "valid"]
    assert stable_split("anything", 0.0) == "train"
    minif2f = write_jsonl(tmp_path / "m.jsonl", MINIF2F)
    collection = collect(config(SourceSpec(kind="bundled"), SourceSpec(kind="benchmark", path=str(minif2f))),
                         store=store)
    splits = {c.name: c.split for c in collection.candidates}
    assert splits["mathd_algebra_10"] == "valid" and splits["mathd_numbertheory_3"] == "test"
    valid = [name for name, split in splits.items() if split == "valid" and name != "mathd_algebra_10"]
    assert valid == ["algebra_linear_function_value", "sets_inter_self"]
    again = collect(config(SourceSpec(kind="bundled"), valid_fraction=0.5, split_salt="other"), store=store)
    assert [(c.name, c.split) for c in again.candidates[:4]] == [
        ("algebra_2x_plus_3_eq_11", "train"), ("algebra_linear_system_sum_diff", "valid"),
        ("algebra_mul_eq_zero_cases", "train"), ("algebra_linear_function_value", "valid")]


def test_a_benchmark_theorem_restated_by_an_earlier_training_source_drops_the_training_one(
        tmp_path: Path, store: Store) -> None:
    # `leaky` restates mathd_algebra_10 with other names (y, h): decontamination drops it whatever the order.
    pset = write_jsonl(tmp_path / "pset.jsonl", [
        {"problem_id": "leaky", "formal_statement": "theorem leaky (y : ℝ) (h : y + 1 = 2) : y = 1 := by sorry"},
        {"problem_id": "mathd_numbertheory_3", "formal_statement": "theorem mathd_numbertheory_3 : 1 = 1 := by sorry"},
        {"problem_id": "clean", "formal_statement": "theorem clean (y : ℝ) (h : y + 2 = 3) : y = 1 := by sorry"},
    ])
    minif2f = write_jsonl(tmp_path / "m.jsonl", MINIF2F)
    collection = collect(config(SourceSpec(kind="goedel-pset", path=str(pset)),
                                SourceSpec(kind="benchmark", path=str(minif2f))), store=store)
    splits = [(c.name, c.split, c.label) for c in collection.candidates]
    assert splits == [("clean", "valid", "goedel-pset"),  # clean: valid by the stable hash
                       ("mathd_algebra_10", "valid", "benchmark"),
                      ("mathd_numbertheory_3", "test", "benchmark")]
    assert [(ref.tactics, ref.source) for ref in collection.candidates[1].proofs] == [(("linarith",), 1)]
    assert [(o.training, o.training_source, o.benchmark, o.benchmark_source, o.benchmark_split)
            for o in collection.overlaps] == [("leaky", "goedel-pset", "mathd_algebra_10", "benchmark", "valid")]
    assert collection.reports[0].rejected_theorems == {"benchmark_overlap": 1, "duplicate_name": 1}
    assert collection.reports[0].examples == [
        "mathd_numbertheory_3: name already used by source 1 (benchmark) with another statement"]


def test_bundled_reads_the_train_split_by_default_and_test_on_request(store: Store) -> None:
    train = collect(config(SourceSpec(kind="bundled")), store=store)
    assert (train.reports[0].rows, train.reports[0].skipped_rows, len(train.candidates)) == (36, 15, 36)
    # 119 recorded proofs, 116 of which run from the binder-form start the theorems begin at; the other 3 were
    # recorded only from the ∀ root without introducing the binders first (a lone `tauto`, ...).
    assert sum(len(c.proofs) for c in train.candidates) == 116
    test = collect(config(SourceSpec(kind="bundled", split="test", limit=4)), store=store)
    assert len(test.candidates) == 4 and {c.split for c in test.candidates} == {"test"}
    with pytest.raises(InputError, match=r"\(bundled\): split 'valid' is not one of train, pool, test"):
        collect(config(SourceSpec(kind="bundled", split="valid")), store=store)


def test_the_world_source_gives_train_proofs_and_pool_statements(store: Store) -> None:
    from leankit.world.checked import embedded_world

    checked = embedded_world(0)
    counts = Counter(t.split for t in checked.theorems)
    world = collect(config(SourceSpec(kind="world")), store=store)
    assert (world.reports[0].rows, world.reports[0].skipped_rows) == (counts["train"] + counts["pool"], counts["test"])
    pooled = [c for c in world.candidates if c.split == "pool"]
    assert len(pooled) == counts["pool"] and all(not c.proofs and c.statement for c in pooled)
    traps = {t.name for t in checked.theorems if t.role == "trap"}
    assert all(bool(c.proofs) != (c.name in traps) for c in world.candidates if c.split != "pool")
    assert {c.split for c in world.candidates} == {"train", "valid", "pool"}  # valid: the stable hash of train
    held_out = collect(config(SourceSpec(kind="world", split="test", limit=3)), store=store)
    assert [c.split for c in held_out.candidates] == ["test"] * 3 and all(c.proofs for c in held_out.candidates)
    # the proofs are the world's own, from the binder-form start (no intro of the ∀ binders)
    first = next(t for t in checked.theorems if t.split == "train" and t.role == "taught")
    assert [list(ref.tactics) for ref in next(c for c in world.candidates if c.name == first.name).proofs] == \
        first.proofs


def test_the_world_source_follows_data_world_seed(store: Store) -> None:
    zero = collect(config(SourceSpec(kind="world", limit=5)), store=store)
    one = collect(config(SourceSpec(kind="world", limit=5), world_seed=1), store=store)
    assert [c.name for c in zero.candidates] == [c.name for c in one.candidates]
    assert [c.statement for c in zero.candidates] != [c.statement for c in one.candidates]


@pytest.mark.slow
def test_the_world_source_follows_data_world_sketches(store: Store) -> None:
    from leankit.world.checked import embedded_world

    family = [t for t in embedded_world(0, sketches=True).theorems if t.role == "sketch" and t.split == "test"]
    plain = collect(config(SourceSpec(kind="world", split="test")), store=store)
    with_sketches = collect(config(SourceSpec(kind="world", split="test"), world_sketches=True), store=store)
    assert [c.name for c in with_sketches.candidates] == [*(c.name for c in plain.candidates),
                                                           *(t.name for t in family)]
    first = next(c for c in with_sketches.candidates if c.name == family[0].name)
    assert [list(ref.tactics) for ref in first.proofs] == family[0].proofs  # `have` steps and all


def test_split_and_limit_select_rows(tmp_path: Path, store: Store) -> None:
    minif2f = write_jsonl(tmp_path / "m.jsonl", MINIF2F)
    collection = collect(config(SourceSpec(kind="benchmark", path=str(minif2f), split="test")), store=store)
    assert [c.name for c in collection.candidates] == ["mathd_numbertheory_3"]
    assert (collection.reports[0].rows, collection.reports[0].skipped_rows) == (1, 1)
    limited = collect(config(SourceSpec(kind="benchmark", path=str(minif2f), limit=1)), store=store)
    assert [c.name for c in limited.candidates] == ["mathd_algebra_10"]
    # the limit counts rows of the wanted split: the first test row is the second row of the file
    limited_test = collect(config(SourceSpec(kind="benchmark", path=str(minif2f), split="test", limit=1)), store=store)
    assert [c.name for c in limited_test.candidates] == ["mathd_numbertheory_3"]


def test_a_missing_column_is_counted_per_row_and_warned_about_by_name(tmp_path: Path, store: Store) -> None:
    renamed = [{"problem_id": row["problem_id"], "proof_text": row["full_proof"]} for row in GOEDEL_PROOFS]
    path = write_parquet(tmp_path / "renamed.parquet", renamed)
    collection = collect(config(SourceSpec(kind="bundled", limit=1), SourceSpec(kind="goedel-proofs", path=str(path))),
                         store=store)
    report = collection.reports[1]
    assert (report.rows, report.rejected_rows, report.theorems) == (2, {"missing_column:full_proof": 2}, 0)
    assert collection.warnings == [
        f"source 1 (goedel-proofs, {path}): required column 'full_proof' is missing from every row "
        "(columns found: problem_id, proof_text)"
    ]


def test_all_rows_rejected_and_no_rows_are_warned_about(tmp_path: Path, store: Store) -> None:
    bad = write_jsonl(tmp_path / "bad.jsonl", ['{"broken', {"uuid": "u", "formal_statement": "garbage"}])
    empty = write_jsonl(tmp_path / "m.jsonl", MINIF2F)
    collection = collect(config(SourceSpec(kind="numina-lean", path=str(bad)),
                                SourceSpec(kind="benchmark", path=str(empty), split="train")), store=store)
    assert collection.reports[0].rejected_rows == {"malformed_row": 1, "unparsable_statement": 1}
    assert collection.warnings == [
        f"source 0 (numina-lean, {bad}): all 2 rows were rejected (malformed_row 1, unparsable_statement 1)",
        f"source 1 (benchmark, {empty}): no rows (2 rows of other splits than 'train')",
    ]


def test_a_source_without_a_path_is_an_input_error(store: Store) -> None:
    with pytest.raises(InputError, match=r"data.sources\[0\] \(benchmark\) needs a `path`"):
        collect(config(SourceSpec(kind="benchmark")), store=store)


def test_a_row_no_converter_expects_is_one_rejected_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        store: Store) -> None:
    import burnqed.data.collect as collect_module
    from burnqed.data.sources import convert_row

    def fragile(kind: str, data: dict[str, object]) -> object:
        if data.get("name") == "mathd_numbertheory_3":
            raise IndexError("string index out of range")
        return convert_row(kind, data)

    monkeypatch.setattr(collect_module, "convert_row", fragile)
    minif2f = write_jsonl(tmp_path / "m.jsonl", MINIF2F)
    collection = collect(config(SourceSpec(kind="benchmark", path=str(minif2f))), store=store)
    assert [c.name for c in collection.candidates] == ["mathd_algebra_10"]
    assert collection.reports[0].rejected_rows == {"malformed_row": 1}
    assert collection.reports[0].examples == [
        f"{minif2f}:2: cannot convert: IndexError: string index out of range"]

"""The data stage end to end in-process: every source kind in its own schema, replayed through in-process
replay workers over a test corpus; exact report counts, pairs, index, splits, depths and contrastive pool;
the folder layout read back by the readers SFT uses; Lean opened only when needed; no pairs is an error."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from burnqed.config import DataConfig, SourceSpec
from burnqed.data.data_report import read_report, render_report
from burnqed.data.index import load_theorem_index
from burnqed.data.pairs import PAIRS_FILE, TacticPair, corpus_pairs, read_contrastive, read_pairs, write_pairs
from burnqed.data.prepare import LeanOpener, PreparedData, prepare_data, write_prepared
from burnqed.errors import InputError
from burnqed.storage import Store
from tests.damage import damage, flip_in_footer, flip_in_page, truncate
from tests.data.samples import GUARD, INDEX_HEADER, replay_opener, sample_corpus, write_all_sources

ORDER = ("lean-workbook", "goedel-proofs", "numina-lean", "benchmark", "lean-github", "pairs", "goedel-pset")


@contextmanager
def no_progress(label: str, total: int) -> Iterator[Callable[[int], None]]:
    def advance(n: int = 1) -> None:
        pass

    yield advance


def prepare(config: DataConfig, open_lean: LeanOpener | None, *, store: Store) -> PreparedData:
    return asyncio.run(prepare_data(config, open_lean=open_lean, guard=GUARD, lean_command=["replay"],
                                    progress=no_progress, store=store))


@pytest.fixture
def sources(tmp_path: Path) -> dict[str, Path]:
    return write_all_sources(tmp_path / "sources")


def all_sources(sources: dict[str, Path], **settings: object) -> DataConfig:
    specs = [{"kind": kind, "path": str(sources[kind])} for kind in ORDER]
    return DataConfig.model_validate({"sources": specs, **settings})


@pytest.mark.slow
def test_every_source_kind_end_to_end(sources: dict[str, Path], tmp_path: Path, store: Store) -> None:
    opened: list[int] = []
    prepared = prepare(all_sources(sources), replay_opener(sample_corpus(), opened=opened), store=store)
    assert opened == [2]
    report = prepared.report
    counts = [(s.kind, s.rows, s.theorems, s.kept, s.merged, s.proofs, s.proofs_replayed, s.proofs_failed,
               s.replay_failed, s.pairs, s.duplicate_pairs, s.statement_only) for s in report.sources]
    assert counts == [
        # Each replayed proof runs from its theorem's binder-form start: no `intro` of the binders, one pair less.
        ("lean-workbook", 3, 3, 2, 0, 1, 1, 0, 0, 1, 0, 0),
        ("goedel-proofs", 2, 2, 0, 2, 2, 1, 1, 1, 1, 0, 0),
        ("numina-lean", 3, 1, 1, 0, 1, 1, 0, 0, 3, 0, 0),
        ("benchmark", 2, 2, 2, 0, 1, 1, 0, 0, 1, 0, 1),
        ("lean-github", 4, 2, 1, 0, 0, 0, 0, 0, 2, 0, 0),
        ("pairs", 2, 2, 2, 0, 0, 0, 0, 0, 2, 0, 0),
        ("goedel-pset", 2, 2, 1, 1, 0, 0, 0, 0, 0, 0, 1),
    ]
    assert [s.rejected_rows for s in report.sources][2] == {"malformed_row": 1, "empty_field:formal_statement": 1}
    assert [s.rejected_theorems for s in report.sources] == [{"sorry": 1}, {}, {}, {}, {"sorry": 1}, {}, {}]
    failure = report.sources[1].replay_failures[0]
    assert (failure.theorem, failure.proof, failure.step, failure.tactic, failure.error) == (
        "lean_workbook_2", 0, 0, "linarith", "error: linarith failed to find a contradiction")
    assert (report.theorems, report.pairs, report.contrastive) == (9, 10, 1)
    assert report.depth_histogram == {1: 5, 2: 1, 3: 1}
    assert {k: (v.theorems, v.pairs) for k, v in report.splits.items()} == {
        "test": (2, 1), "train": (6, 8), "valid": (1, 1)}
    assert report.warnings == [] and report.lean_command == ["replay"]

    assert [(t.name, t.source, t.split) for t in prepared.index.theorems] == [
        ("lean_workbook_1", "lean-workbook", "train"), ("lean_workbook_2", "lean-workbook", "train"),
        ("number_theory_1", "numina-lean", "train"), ("mathd_algebra_10", "benchmark", "valid"),
        ("mathd_numbertheory_3", "benchmark", "test"), ("Repo.add_zero'", "lean-github", "train"),
        ("custom_one", "pairs", "train"), ("custom_test", "pairs", "test"), ("goedel_pset_1", "goedel-pset", "train"),
    ]
    numina = [p for p in prepared.pairs if p.theorem == "number_theory_1"]
    hyps = "n : ℕ\nh : n % 2 = 1"
    assert [(p.depth, p.tactic, p.state_before) for p in numina] == [
        # The theorem starts as written, `n` and `h` in context: the proof's first tactic is its first step.
        (0, "have h2 : n ^ 2 = n * n", f"{hyps}\n⊢ n ^ 2 % 2 = 1"),
        (1, "ring", f"{hyps}\n⊢ n ^ 2 = n * n\n\n{hyps}\nh2 : n ^ 2 = n * n\n⊢ n ^ 2 % 2 = 1"),
        (2, "rw [h2, Nat.mul_mod, h]", f"{hyps}\nh2 : n ^ 2 = n * n\n⊢ n ^ 2 % 2 = 1"),
    ]
    assert numina[-1].state_after == "no goals"
    workbook = [(p.source, p.tactic, p.depth) for p in prepared.pairs if p.theorem == "lean_workbook_1"]
    # Both sources' proofs run from the binder-form start (`x` and `h₀` in context): no intro step to share.
    assert workbook == [("lean-workbook", "linarith", 0), ("goedel-proofs", "nlinarith [h₀]", 0)]
    assert [p for p in prepared.pairs if p.theorem == "custom_test"] == [
        TacticPair("custom_test", "handmade", "test", "⊢ 2 + 2 = 4", "rfl", "no goals", 0)]

    folder = tmp_path / "out"
    write_prepared(folder, prepared)
    assert read_pairs(folder) == prepared.pairs
    # mathd_algebra_10's one step from its binder-form start
    assert [p.theorem for p in read_pairs(folder, splits=["valid"])] == ["mathd_algebra_10"]
    assert load_theorem_index(folder / "theorems.json", store=store) == prepared.index
    assert read_contrastive(folder).theorems == ["number_theory_1"] and read_contrastive(folder).min_depth == 3
    assert read_report(str(folder), store=store) == report
    table = render_report(report)
    assert "2 numina-lean" in table and "malformed_row 1" in table and "proof lengths: 1:5, 2:1, 3:1" in table


def test_lean_is_not_started_without_proofs_to_replay(sources: dict[str, Path], store: Store) -> None:
    opened: list[int] = []
    config = DataConfig(sources=[SourceSpec(kind="lean-github", path=str(sources["lean-github"])),
                                 SourceSpec(kind="goedel-pset", path=str(sources["goedel-pset"]))])
    prepared = prepare(config, replay_opener(sample_corpus(), opened=opened), store=store)
    assert opened == [] and prepared.report.lean_command is None
    assert len(prepared.pairs) == 2 and prepared.report.theorems == 3


def test_replay_off_keeps_whole_proof_sources_as_index_entries_only(sources: dict[str, Path], store: Store) -> None:
    opened: list[int] = []
    prepared = prepare(all_sources(sources, replay=False), replay_opener(sample_corpus(), opened=opened), store=store)
    assert opened == [] and prepared.report.replay is False
    assert sorted({p.source for p in prepared.pairs}) == ["handmade", "lean-github"]
    assert [s.proofs_rejected for s in prepared.report.sources[:4]] == [
        {"replay_off": 1}, {"replay_off": 2}, {"replay_off": 1}, {"replay_off": 1}]
    assert prepared.report.theorems == 9 and prepared.report.pairs == 4


def test_no_pairs_at_all_is_an_input_error_saying_why(sources: dict[str, Path], tmp_path: Path, store: Store) -> None:
    config = DataConfig(sources=[SourceSpec(kind="goedel-pset", path=str(sources["goedel-pset"])),
                                 SourceSpec(kind="goedel-proofs", path=str(sources["lean-github"]))])
    with pytest.raises(InputError) as caught:
        prepare(config, replay_opener(sample_corpus()), store=store)
    message = str(caught.value)
    assert message.startswith("no tactic pairs resulted from data.sources: source 0 goedel-pset: 2 rows, 0 rejected, "
                              "2 kept, 0 pairs; source 1 goedel-proofs: 4 rows, 4 rejected "
                              "(missing_column:full_proof 4), 0 kept, 0 pairs; ")
    assert "required column 'full_proof' is missing from every row" in message


def test_without_a_lean_edge_proofs_are_counted_not_replayed(sources: dict[str, Path], store: Store) -> None:
    config = DataConfig(sources=[SourceSpec(kind="benchmark", path=str(sources["benchmark"])),
                                 SourceSpec(kind="pairs", path=str(sources["pairs"]))])
    prepared = prepare(config, None, store=store)
    assert prepared.report.sources[0].proofs_rejected == {"no_lean": 1}
    assert prepared.report.pairs == 2


def test_a_prepared_folder_is_a_pairs_source_with_its_statements(sources: dict[str, Path], tmp_path: Path,
                                                                 store: Store) -> None:
    first = prepare(all_sources(sources), replay_opener(sample_corpus()), store=store)
    folder = tmp_path / "prepared"
    write_prepared(folder, first)
    again = prepare(DataConfig(sources=[SourceSpec(kind="pairs", name="reused", path=str(folder))]), None, store=store)
    assert [p.tactic for p in again.pairs] == [p.tactic for p in first.pairs]
    statements = {t.name: t.statement for t in again.index.theorems}
    assert statements["number_theory_1"] == "∀ (n : ℕ) (h : n % 2 = 1), n ^ 2 % 2 = 1"
    entries = {t.name: (t.signature, t.header, t.source) for t in again.index.theorems}
    assert entries["lean_workbook_1"] == ("(x : ℝ) (h₀ : 2 * x + 3 = 11) : x = 4", INDEX_HEADER, "reused")
    assert {t.split for t in again.index.theorems if t.name == "custom_test"} == {"test"}


@pytest.mark.parametrize("how", [truncate, lambda raw: flip_in_page(raw, "tactic"), flip_in_footer],
                         ids=["truncated", "bit flipped in the tactics", "bit flipped in the footer"])
def test_damaged_pairs_are_one_error_naming_the_file(tmp_path: Path, how: Callable[[bytes], bytes]) -> None:
    path = tmp_path / PAIRS_FILE
    pairs = corpus_pairs(limit=3)
    write_pairs(path, pairs)
    assert read_pairs(tmp_path) == pairs
    damage(path, how)
    with pytest.raises(InputError) as refused:
        read_pairs(tmp_path)
    message = str(refused.value)
    assert message.startswith(f"tactic pairs {path} are not a readable Parquet file (") and "\n" not in message
    assert message.endswith("): restore it, or run `burnqed data prepare` again")

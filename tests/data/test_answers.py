"""Answer-bearing benchmark theorems through `burnqed data prepare`: a header definition `:= sorry` the statement uses
is the answer slot; the theorem as written is the answer-produced entry, PutnamBench's rewrite_solutions.py form the
answer-given entry `NAME_given`; the source option `answers` selects them; training rows restating either form are
dropped. Made-up problems in PutnamBench's form only (its authors ask that no proof of theirs be published)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from burnqed.config import DataConfig, SourceSpec
from burnqed.data.collect import collect
from burnqed.data.decontaminate import benchmark_statements
from burnqed.data.theorems import load_index
from burnqed.records.theorem import Answer, AnswerTask, Theorem
from burnqed.storage import Store
from tests.data.samples import write_jsonl
from tests.data.test_benchmarks import prepare
from tests.putnambench import putnam_files, putnam_names

EASY = """import Mathlib

open Real

abbrev putnam_easy_solution : ℕ := sorry
-- 2

/-- What is 1 + 1? -/
theorem putnam_easy : 1 + 1 = putnam_easy_solution := sorry
"""
# a slot a later definition uses, a let in the statement, and no reference answer under the slot
PAIR = """import Mathlib

noncomputable abbrev putnam_pair_solution : ℕ × ℕ := sorry
-- (1, 2)

def putnam_pair_sum : ℕ := putnam_pair_solution.1 + putnam_pair_solution.2

theorem putnam_pair (n : ℕ) (hn : n = putnam_pair_sum) :
    let (a, b) := putnam_pair_solution
    a + b = n := sorry
"""
NO_REFERENCE = "abbrev putnam_open_solution : ℕ := sorry\n\ntheorem putnam_open : putnam_open_solution = 0 := sorry\n"
PLAIN = "theorem putnam_plain (x : ℕ) : x + 0 = x := sorry\n"


def write_bench(root: Path) -> Path:
    src = root / "src"
    src.mkdir(parents=True)
    for name, text in (("putnam_easy", EASY), ("putnam_open", NO_REFERENCE), ("putnam_pair", PAIR),
                       ("putnam_plain", PLAIN)):
        (src / f"{name}.lean").write_text(text, encoding="utf-8")
    return src


def test_both_tasks_become_entries_held_out_and_counted(tmp_path: Path, store: Store) -> None:
    prepared = prepare([{"kind": "benchmark", "path": str(write_bench(tmp_path))}], store)
    entries = {t.name: t for t in prepared.index.theorems}
    assert list(entries) == ["putnam_easy", "putnam_easy_given", "putnam_open", "putnam_pair", "putnam_pair_given",
                             "putnam_plain"]
    assert {t.split for t in entries.values()} == {"test"}
    easy, given = entries["putnam_easy"], entries["putnam_easy_given"]
    assert (easy.signature, easy.header) == (": 1 + 1 = putnam_easy_solution",
                                             "open Real\nabbrev putnam_easy_solution : ℕ := sorry")
    assert easy.answer == Answer(name="putnam_easy_solution", type="ℕ", task=AnswerTask.PRODUCED, reference="2")
    assert easy.answer_open and easy.docstring == "What is 1 + 1?"
    assert (given.signature, given.statement, given.header) == (": 1 + 1 = ((2) : ℕ)", "1 + 1 = ((2) : ℕ)",
                                                                "open Real")
    assert given.answer == Answer(name="putnam_easy_solution", type="ℕ", task=AnswerTask.GIVEN, value="2",
                                  reference="2")
    assert not given.answer_open and given.docstring == "What is 1 + 1?"
    pair = entries["putnam_pair_given"]
    # the value as written, in its own parentheses (PutnamBench's script strips a value's outer pair, which would
    # cut `(a) + (b)`): the same term
    assert pair.header == "def putnam_pair_sum : ℕ := (((1, 2)) : ℕ × ℕ).1 + (((1, 2)) : ℕ × ℕ).2"
    assert pair.signature == "(n : ℕ) (hn : n = putnam_pair_sum) : let (a, b) := (((1, 2)) : ℕ × ℕ); a + b = n"
    assert entries["putnam_open"].answer == Answer(name="putnam_open_solution", type="ℕ", task=AnswerTask.PRODUCED)
    assert entries["putnam_plain"].answer is None
    report = prepared.report.sources[0]
    assert (report.rows, report.answer_bearing, report.answer_produced, report.answer_given, report.kept) == \
        (4, 3, 3, 2, 6)
    assert report.answer_without_reference == ["putnam_open"]


@pytest.mark.parametrize(("answers", "names"), [
    ("produced", ["putnam_easy", "putnam_open", "putnam_pair", "putnam_plain"]),
    ("given", ["putnam_easy_given", "putnam_pair_given", "putnam_plain"]),
])
def test_the_answers_option_selects_a_task(answers: str, names: list[str], tmp_path: Path, store: Store) -> None:
    prepared = prepare([{"kind": "benchmark", "path": str(write_bench(tmp_path)), "answers": answers}], store)
    assert [t.name for t in prepared.index.theorems] == names
    report = prepared.report.sources[0]
    assert (report.answer_bearing, report.answer_produced, report.answer_given) == \
        (3, 3 if answers == "produced" else 0, 2 if answers == "given" else 0)


def test_the_answers_option_is_a_benchmark_sources() -> None:
    assert SourceSpec(kind="lean-workbook", path="x.jsonl").answers is None  # unset: both, on a benchmark
    with pytest.raises(ValidationError, match="answers = 'given' applies to a benchmark source"):
        SourceSpec(kind="lean-workbook", path="x.jsonl", answers="given")


def test_both_forms_of_an_answer_bearing_theorem_are_compared_with() -> None:
    produced = Theorem(name="putnam_easy", signature=": 1 + 1 = putnam_easy_solution",
                       header="abbrev putnam_easy_solution : ℕ := sorry",
                       answer=Answer(name="putnam_easy_solution", type="ℕ", task=AnswerTask.PRODUCED, reference="2"))
    forms = ["1 + 1 = putnam_easy_solution", "1 + 1 = ((2) : ℕ)", "1 + 1 = (2)"]
    assert benchmark_statements(produced) == forms
    given = Theorem(name="putnam_easy_given", signature=": 1 + 1 = ((2) : ℕ)",
                    answer=Answer(name="putnam_easy_solution", type="ℕ", task=AnswerTask.GIVEN, value="2",
                                  reference="2"))
    assert benchmark_statements(given) == forms
    assert benchmark_statements(Theorem(name="t", signature=": 1 = 1")) == ["1 = 1"]


@pytest.mark.parametrize("answers", ["both", "produced", "given"])
def test_training_rows_restating_either_form_are_dropped(answers: str, tmp_path: Path, store: Store) -> None:
    training = write_jsonl(tmp_path / "workbook.jsonl", [
        {"id": "lw_slot", "header": "abbrev putnam_easy_solution : ℕ := sorry",
         "formal_statement": "theorem lw_slot : 1 + 1 = putnam_easy_solution := by sorry"},
        {"id": "lw_given", "formal_statement": "theorem lw_given : 1 + 1 = ((2) : ℕ) := by sorry"},
        {"id": "lw_plain", "formal_statement": "theorem lw_plain : (1 + 1) = 2 := by sorry"},
        {"id": "lw_other", "formal_statement": "theorem lw_other : 1 + 1 = 3 := by sorry"},
    ])
    sources = [{"kind": "lean-workbook", "path": str(training)},
               {"kind": "benchmark", "path": str(write_bench(tmp_path)), "answers": answers}]
    collection = collect(DataConfig.model_validate({"sources": sources, "replay": False}), store=store)
    overlaps = sorted((o.training, o.benchmark.removesuffix("_given")) for o in collection.overlaps)
    assert overlaps == [("lw_given", "putnam_easy"), ("lw_plain", "putnam_easy"), ("lw_slot", "putnam_easy")]
    assert [c.name for c in collection.candidates if c.label == "lean-workbook"] == ["lw_other"]


@pytest.mark.slow
def test_putnambench_as_published_prepares_whole(tmp_path: Path, store: Store) -> None:
    """All 672 files (docs/data.md, "PutnamBench as published"): every theorem indexed, none skipped, no statement
    cut short, each answer-bearing one with both entries."""
    prepared = prepare([{"kind": "benchmark", "path": str(putnam_files(tmp_path))}], store)
    report = prepared.report.sources[0]
    assert (report.rows, report.theorems, report.kept, report.rejected) == (672, 1018, 1018, 0)
    assert (report.answer_bearing, report.answer_produced, report.answer_given) == (346, 346, 346)
    assert report.answer_without_reference == [] and prepared.report.warnings == []
    entries = {t.name: t for t in prepared.index.theorems}
    assert {t.split for t in entries.values()} == {"test"}
    assert sorted(name for name in entries if not name.endswith("_given")) == putnam_names()
    assert sum(t.answer is not None and t.answer.task is AnswerTask.GIVEN for t in entries.values()) == 346
    assert all(t.answer.name not in (t.header or "") + (t.signature or "")
               for t in entries.values() if t.answer is not None and t.answer.task is AnswerTask.GIVEN)
    # statements read whole: the declaration's own `:=` ends each, never a `let` of it
    assert entries["putnam_1965_b4"].signature is not None
    assert entries["putnam_1965_b4"].signature.endswith(
        ":= putnam_1965_b4_solution; (∀ x, v n x ≠ 0 → v (n + 1) x ≠ 0 → q (f n) x ≠ 0 → f (n + 1) x = p (f n) x / "
        "q (f n) x) ∧ s = {x | ∃ l, Tendsto (fun n ↦ f n x) atTop (𝓝 l)} ∧ ∀ x ∈ s, Tendsto (fun n ↦ f n x) atTop "
        "(𝓝 (g x))")
    index = load_index(str(putnam_files(tmp_path / "again")), None, store=store)  # --theorems reads it the same
    assert len(index.theorems) == 1018 and index.skipped == []


def test_a_putnambench_file_that_lost_its_slot_or_its_imports_is_said_so(tmp_path: Path, store: Store) -> None:
    """Four published files, one without its `…_solution := sorry` line (its statement still uses the name), one
    without its `import`/`open` lines: the first is not indexed (`undeclared_answer_slot`, listed as skipped with
    why), the second is indexed with one warning line naming it; the intact files say nothing."""
    from tests.putnambench import putnam_text

    src = tmp_path / "src"
    src.mkdir()
    for name in ("putnam_1962_a1", "putnam_1962_a2"):
        (src / f"{name}.lean").write_text(putnam_text(name), encoding="utf-8")
    lines = putnam_text("putnam_1965_b4").splitlines(keepends=True)
    at = next(k for k, line in enumerate(lines) if "abbrev putnam_1965_b4_solution" in line)
    (src / "putnam_1965_b4.lean").write_text("".join(lines[:at] + lines[at + 2:]), encoding="utf-8")
    bare = [line for line in putnam_text("putnam_1988_b1").splitlines(keepends=True)
            if not line.startswith(("import ", "open "))]
    (src / "putnam_1988_b1.lean").write_text("".join(bare), encoding="utf-8")

    collection = collect(DataConfig(sources=[SourceSpec(kind="benchmark", path=str(src))], replay=False), store=store)
    assert sorted(c.theorem.name for c in collection.candidates) == [
        "putnam_1962_a1", "putnam_1962_a2", "putnam_1962_a2_given", "putnam_1988_b1"]
    assert [(s.name, s.reason, s.detail) for s in collection.skipped] == [
        ("putnam_1965_b4", "undeclared_answer_slot", "its statement uses putnam_1965_b4_solution, which nothing "
         "before it declares (its answer slot line, `abbrev putnam_1965_b4_solution : TYPE := sorry`, is missing): "
         "Lean cannot start it")]
    assert collection.reports[0].rejected_rows == {"undeclared_answer_slot": 1}
    assert collection.warnings == [
        f"source 0 (benchmark): {src / 'putnam_1988_b1.lean'} has no `import Mathlib` line, which 3 of its 4 .lean "
        "files have: its theorems are started under the Lean REPL's imports (lean.command), and an `open` line it "
        "lost too shows only as Lean's unknown identifier at their start (`burnqed lean check`)"]

"""Each converter on rows in its dataset's own schema (tests/data/samples.py): names, ∀-statements, headers,
fixed splits, the proofs to replay (binder intro first) and the recorded steps; bad rows as reasons."""

from __future__ import annotations

from typing import Any

import pytest

from burnqed.data.sources import Item, Reject, TracedStep, convert_row
from tests.data.samples import (
    GOEDEL_PROOFS,
    GOEDEL_PSET,
    INDEX_HEADER,
    LEAN_GITHUB,
    LEAN_WORKBOOK,
    MINIF2F,
    NUMINA_ROWS,
    PAIRS,
)


def item(kind: str, row: Any) -> Item:
    converted = convert_row(kind, row)
    assert isinstance(converted, Item), converted
    return converted


def test_lean_workbook_rows() -> None:
    first = item("lean-workbook", LEAN_WORKBOOK[0])
    assert (first.name, first.statement, first.header) == (
        "lean_workbook_1", "∀ (x : ℝ) (h₀ : 2 * x + 3 = 11), x = 4", INDEX_HEADER)
    assert first.theorem.signature == "(x : ℝ) (h₀ : 2 * x + 3 = 11) : x = 4"
    assert first.proofs == [("linarith",)]
    assert first.row_split == "lean_workbook" and first.split is None
    second = item("lean-workbook", LEAN_WORKBOOK[1])
    assert (second.statement, second.header, second.proofs) == ("∀ (a b : ℝ), a ^ 2 + b ^ 2 ≥ 2 * a * b", None, [])
    third = item("lean-workbook", LEAN_WORKBOOK[2])  # a bare-body proof gets the statement's intro
    assert third.proofs == [("have hy : 0 < y := h\n  sorry",)]
    single = item("lean-workbook", {**LEAN_WORKBOOK[1], "proof": "nlinarith [sq_nonneg (a - b)]"})
    assert single.proofs == [("nlinarith [sq_nonneg (a - b)]",)]


def test_goedel_proofs_and_pset_rows() -> None:
    proof = item("goedel-proofs", GOEDEL_PROOFS[0])
    assert (proof.name, proof.statement) == ("lean_workbook_1", "∀ (x : ℝ) (h₀ : 2 * x + 3 = 11), x = 4")
    assert proof.proofs == [("nlinarith [h₀]",)] and proof.header == INDEX_HEADER
    pset = item("goedel-pset", GOEDEL_PSET[1])
    assert (pset.name, pset.statement, pset.proofs) == ("goedel_pset_2", "∀ (a b : ℝ), a ^ 2 + b ^ 2 ≥ 2 * a * b", [])
    stated = item("goedel-proofs", {"problem_id": "p", "full_proof": "theorem p : True := by sorry"})
    assert stated.proofs == [] and stated.proof_rejects == ["empty_proof"]


def test_numina_uses_the_complete_human_proof_and_the_prover_proof() -> None:
    row = NUMINA_ROWS[0]
    assert isinstance(row, dict)
    numina = item("numina-lean", row)
    # The uuid `numina-0001` is no name Lean can declare: the theorem keeps the one its statement declares.
    assert (numina.name, numina.statement, numina.header) == (
        "number_theory_1", "∀ (n : ℕ) (h : n % 2 = 1), n ^ 2 % 2 = 1", None)  # `import Mathlib` alone: no header
    assert numina.proofs == [("have h2 : n ^ 2 = n * n", "ring", "rw [h2, Nat.mul_mod, h]")]
    partial = item("numina-lean", {**row, "ground_truth_type": "statement"})
    assert partial.proofs == []
    prover = item("numina-lean", {**row, "ground_truth_type": "statement",
                                  "formal_proof": "theorem other (n : ℕ) : n = n := by rfl"})
    assert prover.proofs == [] and prover.proof_rejects == ["proof_states_another_theorem"]


def test_minif2f_keeps_its_split_and_proofs() -> None:
    valid = item("benchmark", MINIF2F[0])
    assert (valid.name, valid.split, valid.statement, valid.header) == (
        "mathd_algebra_10", "valid", "∀ (x : ℝ) (h₀ : x + 1 = 2), x = 1", INDEX_HEADER)
    assert valid.proofs == [("linarith",)]
    test = item("benchmark", MINIF2F[1])
    assert (test.split, test.statement, test.proofs) == (
        "test", "(∑ x in Finset.range 10, (x + 1) ^ 2) % 10 = 5", [])
    cat_searcher = item("benchmark", {"id": "amc12a_2019_p21", "split": "validation", "header": "import Mathlib",
                                    "formal_statement": "theorem amc12a_2019_p21 : (2 : ℝ) ≤ 3 := by",
                                    "informal_stmt": "", "informal_proof": ""})
    assert (cat_searcher.name, cat_searcher.split) == ("amc12a_2019_p21", "valid")
    # a benchmark theorem stays when a proof of it uses sorry: only that proof is dropped
    partial = item("benchmark", {**MINIF2F[0], "formal_proof": "theorem mathd_algebra_10 (x : ℝ) (h₀ : x + 1 = 2) : "
                                                             "x = 1 := by\n  nlinarith\n  sorry"})
    assert (partial.name, partial.proofs, partial.proof_rejects) == ("mathd_algebra_10", [], ["sorry_proof"])
    prototype = item("benchmark", {"name": "p", "statement": "∀ (x : ℕ), x + 0 = x", "split": "test"})
    assert (prototype.theorem.signature, prototype.theorem.binder_signature, prototype.split) == (
        None, "(x : ℕ) : x + 0 = x", "test")


def test_traced_rows_are_recorded_steps() -> None:
    github = item("lean-github", LEAN_GITHUB[1])
    assert github.name == "Repo.add_zero'" and github.statement is None and github.proofs == []
    assert github.traced == [TracedStep("n : ℕ\n⊢ n + 0 = n", "simp", "no goals", None)]
    pair = item("pairs", PAIRS[1])
    assert (pair.name, pair.split) == ("custom_test", "test")
    assert pair.traced == [TracedStep("⊢ 2 + 2 = 4", "rfl", "no goals", 0, "handmade")]
    assert item("pairs", {**PAIRS[1], "split": "valid"}).split is None


@pytest.mark.parametrize(
    ("kind", "row", "reason"),
    [
        ("lean-workbook", {"id": "x", "proof": []}, "missing_column:formal_statement"),
        ("goedel-proofs", {"problem_id": "x", "full_proof": "   "}, "empty_field:full_proof"),
        ("numina-lean", {"uuid": "x", "formal_statement": 42}, "malformed_row"),
        ("benchmark", {"name": "x", "formal_statement": "not lean at all"}, "unparsable_statement"),
        ("goedel-pset", {"formal_statement": "example : True := trivial"}, "unnamed_theorem"),
        ("lean-github", {"full_name": "x", "tactic": "simp"}, "missing_column:state_before"),
        ("pairs", {"theorem": "x", "state_before": "⊢ True", "tactic": "trivial", "depth": -1}, "malformed_row"),
        ("lean-github", {"full_name": "x", "tactic": "simp", "state_before": "no goals"}, "no_goals_state"),
        # Names Lean cannot declare as written (records.theorem.lean_name_problem): no declared name to fall back on.
        ("benchmark", {"name": "my thm", "statement": "1 + 1 = 2"}, "undeclarable_name"),
        ("goedel-pset", {"problem_id": "1-a", "formal_statement": "theorem «1-a» : True := trivial"},
         "undeclarable_name"),
        ("lean-github", {"full_name": "Nat.fun", "tactic": "simp", "state_before": "⊢ True"}, "undeclarable_name"),
        ("pairs", {"theorem": "a\nb", "state_before": "⊢ True", "tactic": "trivial"}, "undeclarable_name"),
    ],
)
def test_bad_rows_are_rejected_with_a_reason(kind: str, row: dict[str, Any], reason: str) -> None:
    converted = convert_row(kind, row)
    assert isinstance(converted, Reject) and converted.reason == reason


def test_docstrings_and_comments_of_benchmark_rows() -> None:
    deepseek = item("benchmark", MINIF2F[0])  # DeepSeek's layout: the docstring in `informal_prefix`
    assert deepseek.theorem.docstring == "If x + 1 = 2 then x = 1."
    assert item("benchmark", MINIF2F[1]).theorem.docstring is None  # an empty `informal_prefix`
    inline = item("benchmark", {"name": "d", "formal_statement": "/-- Inline. -/\ntheorem d (x : ℕ) -- x\n"
                              "  : x + 0 = x := by sorry", "informal_prefix": "/-- Not this one. -/\n"})
    assert (inline.theorem.docstring, inline.theorem.signature) == ("Inline.", "(x : ℕ) : x + 0 = x")
    # A prototype index entry: comments go before the spacing is collapsed (a `--` must not swallow the type).
    prototype = item("benchmark", {"name": "p", "statement": "/-- Doc. -/ ∀ (x : ℕ), -- x\n  x + 0 = x /- done -/"})
    assert (prototype.statement, prototype.theorem.docstring) == ("∀ (x : ℕ), x + 0 = x", "Doc.")
    assert item("lean-workbook", {"formal_statement": "/-- Workbook. -/\ntheorem w : 1 = 1 := by sorry"}
                ).theorem.docstring == "Workbook."
    assert convert_row("benchmark", {"name": "c", "statement": "-- only a comment"}) == Reject(
        "unparsable_statement", "the statement is all comments")
    assert convert_row("benchmark", {"name": "c", "statement": "p /- open"}) == Reject(
        "unparsable_statement", "the statement ends inside an unterminated block comment")


def test_an_id_lean_cannot_declare_gives_way_to_the_declared_name() -> None:
    row = {"problem_id": "pset-7", "formal_statement": "theorem pset_7 (n : ℕ) : n = n := by sorry"}
    assert item("goedel-pset", row).name == "pset_7"
    rejected = convert_row("goedel-pset", {**row, "formal_statement": "theorem pset-7 : True := by sorry"})
    assert isinstance(rejected, Reject) and rejected.reason == "undeclarable_name"
    assert rejected.detail == "theorem name 'pset-7' contains '-', which Lean does not take in a name"

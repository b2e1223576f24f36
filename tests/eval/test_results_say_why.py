"""An eval says why a figure is what it is, in one line (issue 68): theorems the embedded Lean cannot start (Mathlib's
names and notation: PutnamBench on minilean) are counted apart as needing a real Lean, never a 0 % row; a sketch eval
of a planner never trained on sketches says so before the search; a planner whose sketches never elaborated is named
in the report's headline."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from burnqed.eval.run import needs_real_lean
from burnqed.records.results import FailureReason
from burnqed.report.sketches import SketchCounts, SketchRow, sketch_headline
from tests.processes import burnqed_in_process
from tests.putnambench import putnam_text
from tests.rl.helpers import write_index
from tests.rl.test_theorem_choice import sft_record
from tests.trajectory.factories import result

# What the commands make of Lean's replies is the subject, not the worker's process: minilean answers in this
# process (tests/conftest.py `minilean_in_process`).
pytestmark = pytest.mark.usefixtures("minilean_in_process")

DIFFERENTIABLE = "Lean could not start the goal: the theorem does not elaborate: unknown identifier 'Differentiable'"


def test_only_a_theorem_no_attempt_could_start_on_the_embedded_lean_needs_a_real_one() -> None:
    start = FailureReason.START_ERROR
    attempts = [[result("mathlib", reason=start, detail=DIFFERENTIABLE),
                 result("once", reason=start, detail=DIFFERENTIABLE),
                 result("no_statement", reason=start, detail="whole mode needs the theorem's statement"),
                 result("tried", reason=FailureReason.MAX_PROOFS)],
                [result("mathlib", reason=start, detail=DIFFERENTIABLE), result("once", reason=FailureReason.EXHAUSTED),
                 result("no_statement", reason=start, detail="whole mode needs the theorem's statement"),
                 result("tried", reason=FailureReason.MAX_PROOFS)]]
    expected = {"mathlib": "the theorem does not elaborate: unknown identifier 'Differentiable'"}
    assert needs_real_lean(attempts, "minilean") == expected
    assert needs_real_lean(attempts, "replay") == expected
    assert needs_real_lean(attempts, "pantograph") == {}  # a real Lean's start error is the theorem's own


@pytest.mark.slow  # one eval of three PutnamBench problems on minilean
def test_putnambench_on_minilean_counts_what_needs_mathlib_apart(tmp_path: Path) -> None:
    bench = tmp_path / "putnam"
    bench.mkdir()
    for name in ("putnam_1962_a4", "putnam_1962_a6", "putnam_1962_b3"):
        (bench / f"{name}.lean").write_text(putnam_text(name), encoding="utf-8")
    output = tmp_path / "eval.json"
    done = burnqed_in_process("eval", "--theorems", str(bench), "--budgets", "1", "--set", "search.mode=whole",
                              "--output", str(output), "--no-trajectories-out")
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stdout.splitlines() if line.startswith("needs a real Lean")]
    assert said == [
        "needs a real Lean: 2 of the 3 theorems cannot start on minilean (Mathlib's names and notation: unknown "
        "identifier 'Differentiable' (1); unknown identifier 'Set' (1)), counted apart, not in the rates: 0/1 is of "
        "the others; run them on a Lean with Mathlib (lean.command, docs/lean.md)"]
    written = json.loads(output.read_text(encoding="utf-8"))
    assert (written["total"], [row["total"] for row in written["budgets"]]) == (1, [1])
    assert [p["name"] for p in written["per_theorem"]] == ["putnam_1962_a6"]
    assert [(s["name"], s["reason"]) for s in written["not_evaluated"]] == [
        ("putnam_1962_a4", "needs_real_lean"), ("putnam_1962_b3", "needs_real_lean")]
    assert "start_error" not in written["failure_reasons"]


@pytest.mark.slow  # one sketch eval of three theorems with the tiny model
def test_a_sketch_eval_of_a_model_never_trained_on_sketches_says_so_before_the_search(
        tiny_model_dir: Path, tmp_path: Path) -> None:
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, tmp_path / "copy")
    sft_record(model)  # an SFT output's record counting no sketch example, beside the tiny model's files
    for path in (tmp_path / "copy").iterdir():
        shutil.copyfile(path, model / path.name)
    index = write_index(tmp_path / "theorems.json")
    done = burnqed_in_process("eval", "--model", str(model), "--theorems", str(index), "--budgets", "1", "--set",
                              "search.mode=sketch", "--output", str(tmp_path / "eval.json"), "--no-trajectories-out")
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith("warning:")] == [
        f"warning: sketch mode, but the policy {model} was never trained on sketches (no SFT of it trained a sketch "
        "example: sft.sketch_examples was off): expect empty or unreadable sketches and no theorem proved through "
        "one; train it with sft.sketch_examples = true"]


def test_the_headline_names_a_planner_whose_sketches_never_elaborated() -> None:
    def counts(sketches: int, elaborated: int, unreadable: int, rejected: int) -> SketchCounts:
        return SketchCounts(searches=5, sketches=sketches, elaborated=elaborated, refused=0, unreadable=unreadable,
                            rejected=rejected, replans=0, replanned_sketches=0, subgoals=0, by_search=0,
                            from_cache=0, kept=0, lookups=0, proved=0, via_sketch=0)

    rows = [SketchRow(iteration=0, source="sketch", budget="64 expansions", trajectories="t",
                      counts=counts(20, 0, 15, 5)),
            SketchRow(iteration=0, source="search", trajectories="s", counts=counts(20, 3, 10, 7)),
            SketchRow(iteration=0, source="other", trajectories="o", problem="unfinished")]
    assert sketch_headline(rows) == [
        "  warning: sketch at 64 expansions: none of the 20 sketches of 5 sketch searches elaborated (15 held no "
        "sketch, 5 rejected by Lean, 0 refused by the guard): the planner proved nothing through a sketch"]

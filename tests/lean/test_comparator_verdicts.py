"""comparator's verdict read with exact values where the mutation run (scripts/mutation.py, docs/results.md) found no
test reading it: a kernel's refusal in the report, the okay line only as the last line, a report's acceptance and
refusal under exit 0, a refused definition hole, the last uncaught line."""

from __future__ import annotations

import json

from burnqed.lean.comparator import JudgeCase, JudgeVerdict, read_verdicts


def case(name: str, definition: str | None = None) -> JudgeCase:
    return JudgeCase(name, "", f"theorem {name} : 1 = 1", "", f"theorem {name} : 1 = 1 := by\n  rfl\n", definition)


def outcome(target: str, accepted: bool, kind: str = "theorem", message: str | None = None) -> dict[str, object]:
    return {"target": target, "targetKind": kind, "accepted": accepted,
            "failureCategory": None if accepted else "mismatch", "failureMessage": message}


def test_a_kernel_that_refuses_the_solution_refuses_every_theorem_with_its_message_and_names_the_other_kernel() -> None:
    report = json.dumps({"outcomes": [], "kernelAccepted": False, "kernelFailureMessage": "(kernel) bad",
                         "nanodaAccepted": True})
    assert read_verdicts([case("a")], 1, "uncaught exception: Child exited with 1\n", report) == [
        JudgeVerdict("a", False, "run", "the kernel refused the solution: (kernel) bad", ("nanoda",))]
    accepted = json.dumps({"outcomes": [], "kernelAccepted": True, "nanodaAccepted": False})
    assert read_verdicts([case("a")], 1, "uncaught exception: Child exited with 1\n", accepted) == [
        JudgeVerdict("a", False, "run", "Child exited with 1", ("lean",))]


def test_the_okay_line_counts_only_as_stdouts_last_line() -> None:
    said = "Lean default kernel accepts the solution\nYour solution is okay!\n"
    assert read_verdicts([case("a")], 0, "", None, said + "then something else\n") == [JudgeVerdict(
        "a", False, "run", "comparator exited with 0 without saying 'Your solution is okay!'", ("lean",))]
    assert read_verdicts([case("a")], 0, "", None, said) == [JudgeVerdict("a", True, kernels=("lean",))]


def test_under_exit_0_the_report_refuses_its_theorem_and_hole_and_accepts_the_others() -> None:
    report = json.dumps({"outcomes": [
        outcome("a", True), outcome("b", False, message="b differs"), outcome("c", True),
        outcome("sol", False, "definition", "sol differs"), outcome("d", True, "definition")],
        "kernelAccepted": True})
    batch = [case("a"), case("b"), case("c", "sol"), case("e", "d"), case("f", "sol")]
    assert read_verdicts(batch, 0, "", report) == [
        JudgeVerdict("a", True, kernels=("lean",)), JudgeVerdict("b", False, "mismatch", "b differs", ("lean",)),
        JudgeVerdict("c", False, "mismatch", "sol differs", ("lean",)), JudgeVerdict("e", True, kernels=("lean",)),
        JudgeVerdict("f", False, "mismatch", "sol differs", ("lean",))]


def test_a_definition_outcome_named_like_a_theorem_is_not_that_theorems_verdict() -> None:
    report = json.dumps({"outcomes": [outcome("a", False, "definition", "a differs")], "kernelAccepted": True})
    assert read_verdicts([case("a")], 0, "", report) == [JudgeVerdict("a", True, kernels=("lean",))]
    theorem = json.dumps({"outcomes": [outcome("sol", False, message="no")], "kernelAccepted": True})
    assert read_verdicts([case("a", "sol")], 0, "", theorem) == [JudgeVerdict("a", True, kernels=("lean",))]


def test_the_last_uncaught_line_of_stderr_is_the_reason_and_exit_0_without_stdout_is_lean_s() -> None:
    stderr = "uncaught exception: first\nother\nuncaught exception:  second \n"
    assert read_verdicts([case("a")], 2, stderr, None) == [JudgeVerdict("a", False, "run", "second")]
    assert read_verdicts([case("a")], 3, "no exception line\n", None) == [
        JudgeVerdict("a", False, "run", "comparator exited with 3")]

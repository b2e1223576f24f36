"""Lean's comparator as the judge (`burnqed/lean/comparator.py`; docs/lean.md, "Lean's comparator"): the Lake project
it is given, batched per header, its exit code and report read into verdicts, run against the strict double
(tests/doubles/comparator_double.py), and `lean.judge`'s settings."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from pydantic import ValidationError

from burnqed.base.sandbox import CAP_KILL, CAP_SETGID, CAP_SETUID, effective_capabilities
from burnqed.config import LeanConfig
from burnqed.errors import ConfigError
from burnqed.lean.comparator import (
    ComparatorSettings,
    JudgeCase,
    JudgeVerdict,
    batches,
    challenge_text,
    comparator_config,
    judge,
    judge_batch,
    read_verdicts,
    solution_text,
)

DOUBLE = str(Path(__file__).parents[1] / "doubles" / "comparator_double.py")


def settings(*extra: str, timeout_s: float = 120.0, log: Path | None = None) -> ComparatorSettings:
    logged = ("--log", str(log)) if log is not None else ()
    return ComparatorSettings((sys.executable, DOUBLE, "--config", "{config}", *logged, *extra), timeout_s=timeout_s)


def case(name: str, statement: str, body: str, *, header: str = "", solution_header: str | None = None,
         definition: str | None = None, written: str | None = None) -> JudgeCase:
    declaration = f"theorem {name} {statement}"
    return JudgeCase(name, header, declaration, header if solution_header is None else solution_header,
                     f"theorem {name} {written or statement} := by\n  {body}\n", definition)


def test_cases_are_batched_per_header_and_a_name_once_a_batch() -> None:
    a1, b1 = case("a", ": 1 = 1", "rfl"), case("b", ": 2 = 2", "rfl")
    a2 = case("a", ": 1 = 1", "decide")
    other = case("c", ": 3 = 3", "rfl", header="open Nat")
    assert batches([a1, other, b1, a2]) == [[a1, b1], [other], [a2]]


def test_the_project_is_the_header_the_statement_with_sorry_and_the_proofs() -> None:
    hole = "abbrev sol : Nat := sorry"
    first = case("p", ": 3 ≤ sol", "decide", header=hole, solution_header="abbrev sol : Nat := (5)",
                 definition="sol")
    assert challenge_text([first]) == f"{hole}\n\ntheorem p : 3 ≤ sol := by\n  sorry\n"
    assert solution_text([first]) == "abbrev sol : Nat := (5)\n\ntheorem p : 3 ≤ sol := by\n  decide\n"
    assert comparator_config([first], settings(), Path("/r.json")) == {
        "challenge_module": "Challenge", "solution_module": "Solution", "theorem_names": ["p"],
        "definition_names": ["sol"], "permitted_axioms": ["propext", "Quot.sound", "Classical.choice"],
        "json_output_path": "/r.json"}


def test_the_command_line_carries_the_config_paranoid_and_the_sandbox_opt_out() -> None:
    lake = ComparatorSettings(("lake", "comparator", "--config", "{config}"), paranoid=True, no_sandbox=True)
    assert lake.argv(Path("/p/c.json")) == ["lake", "comparator", "--config", "/p/c.json", "--paranoid",
                                            "--inadvisably-no-sandbox"]
    assert ComparatorSettings.of(LeanConfig(judge="comparator", command=["repl"])).argv(Path("c.json")) == [
        "lake", "comparator", "--config", "c.json"]


def test_a_run_without_a_report_refuses_every_theorem_with_the_uncaught_line() -> None:
    batch = [case("a", ": 1 = 1", "rfl"), case("b", ": 2 = 2", "rfl")]
    stderr = "Building Solution\nuncaught exception: Child exited with 1\n"
    assert read_verdicts(batch, 1, stderr, None) == [
        JudgeVerdict("a", False, "run", "Child exited with 1"), JudgeVerdict("b", False, "run", "Child exited with 1")]
    assert read_verdicts(batch, 0, "", None) == [JudgeVerdict("a", True, kernels=("lean",)),
                                                JudgeVerdict("b", True, kernels=("lean",))]


def test_an_exit_0_counts_only_with_comparators_okay_line_and_its_kernels_are_the_transcripts() -> None:
    """comparator's stdout (Main.lean at 19e111e): one `X kernel accepts the solution` line per kernel, then `Your
    solution is okay!`; an exit 0 that did not say it accepts nothing (positive evidence only)."""
    batch = [case("a", ": 1 = 1", "rfl")]
    transcript = ("Building Challenge\nRunning nanoda kernel on solution\nnanoda kernel accepts the solution\n"
                  "Running Lean default kernel on solution.\nLean default kernel accepts the solution\n"
                  "Your solution is okay!\n")
    assert read_verdicts(batch, 0, "", None, transcript) == [JudgeVerdict("a", True, kernels=("nanoda", "lean"))]
    assert read_verdicts(batch, 0, "", None, "Building Challenge\n") == [JudgeVerdict(
        "a", False, "run", "comparator exited with 0 without saying 'Your solution is okay!'")]
    assert read_verdicts(batch, 0, "", None, "") == [JudgeVerdict(
        "a", False, "run", "comparator exited with 0 without saying 'Your solution is okay!'")]


def test_a_report_names_the_theorem_it_refuses_and_the_kernels() -> None:
    batch = [case("a", ": 1 = 1", "rfl"), case("b", ": 2 = 2", "rfl")]
    report = json.dumps({"outcomes": [
        {"target": "a", "targetKind": "theorem", "accepted": True, "failureCategory": None, "failureMessage": None,
         "unpermittedAxioms": [], "transitiveAxioms": []},
        {"target": "b", "targetKind": "theorem", "accepted": False, "failureCategory": "axioms",
         "failureMessage": "Illegal axiom detected: 'helper'", "unpermittedAxioms": ["helper"],
         "transitiveAxioms": ["helper"]}], "kernelAccepted": True, "nanodaAccepted": True})
    assert read_verdicts(batch, 1, "", report) == [
        JudgeVerdict("a", False, "run", "comparator exited with 1", ("lean", "nanoda")),
        JudgeVerdict("b", False, "axioms", "Illegal axiom detected: 'helper'", ("lean", "nanoda"))]
    with pytest.raises(ValidationError):  # strict: a verdict is a JSON boolean, never "true"
        read_verdicts(batch, 0, "", report.replace('"accepted": true', '"accepted": "true"'))


def judged(cases: list[JudgeCase], tmp_path: Path, **kw: object) -> list[JudgeVerdict]:
    return asyncio.run(judge(cases, settings(**kw), tmp_path))  # type: ignore[arg-type]


@pytest.mark.slow
def test_the_double_accepts_honest_proofs_in_one_run(tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    verdicts = judged([case("a", "(n : Nat) : n + 0 = n", "simp"), case("b", ": 2 + 2 = 4", "decide")],
                      tmp_path / "work", log=log)
    assert [(v.name, v.accepted, v.kernels) for v in verdicts] == [("a", True, ("lean",)), ("b", True, ("lean",))]
    (run,) = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert run["config"]["theorem_names"] == ["a", "b"]


@pytest.mark.slow
def test_the_double_refuses_a_sorry_a_changed_statement_and_a_command_the_challenge_lacks(tmp_path: Path) -> None:
    """One batch: the two refused by name, the third judged again alone and accepted (`batch-0-r`)."""
    cases = [case("s", ": 2 + 2 = 4", "sorry"), case("c", "(n : Nat) : n + 0 = n", "rfl", written="(n : Nat) : n = n"),
             case("h", ": 1 = 1", "rfl")]
    verdicts = judged(cases, tmp_path / "one")
    assert [(v.name, v.accepted, v.category, v.reason) for v in verdicts] == [
        ("s", False, "axioms", "Illegal axiom detected: 'sorryAx'"),
        ("c", False, "comparison", "Challenge and solution theorem statement do not match: 'c'"),
        ("h", True, None, None)]
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == ["batch-0", "batch-0-r"]
    # a scope the challenge does not have (minilean has no `notation`: `open` changes how names read the same way)
    opened = case("t", ": 2 + 2 = 4", "decide", solution_header="open Nat")
    (refused,) = judged([opened], tmp_path / "two")
    assert (refused.accepted, refused.category, refused.reason) == (
        False, "global_precheck", "Solution command not in the challenge: 'open Nat'")


@pytest.mark.slow
def test_a_proof_that_does_not_build_refuses_no_other_of_its_batch(tmp_path: Path) -> None:
    verdicts = judged([case("a", ": 2 + 2 = 4", "decide"), case("b", ": 1 = 1", "exact nonsense_lemma")], tmp_path)
    assert [(v.name, v.accepted, v.category, v.reason) for v in verdicts] == [
        ("a", True, None, None), ("b", False, "run", "Child exited with 1")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["batch-0", "batch-0-0", "batch-0-1"]


@pytest.mark.slow
def test_a_definition_hole_of_another_type_is_refused(tmp_path: Path) -> None:
    hole = "abbrev sol : Nat := sorry"
    right = case("p", ": 3 ≤ sol", "decide", header=hole, solution_header="abbrev sol : Nat := 5", definition="sol")
    wrong = case("p", ": 3 ≤ sol", "decide", header=hole, solution_header="abbrev sol : Int := 5", definition="sol")
    assert [(v.accepted, v.reason) for v in judged([right], tmp_path / "r")] == [(True, None)]
    (refused,) = judged([wrong], tmp_path / "w")
    assert (refused.accepted, refused.category, refused.reason) == (
        False, "comparison", "Const does not match between challenge and target 'sol'")


def test_a_run_past_its_deadline_refuses_its_batch(tmp_path: Path) -> None:
    slow = ComparatorSettings((sys.executable, "-c", "import time; time.sleep(30)"), timeout_s=0.5)
    (verdict,) = asyncio.run(judge([case("a", ": 1 = 1", "rfl")], slow, tmp_path))
    assert (verdict.accepted, verdict.category, verdict.reason) == (
        False, "run", "comparator ran past lean.comparator_timeout_s (0.5 s)")


def test_minilean_has_no_comparator() -> None:
    with pytest.raises(ValidationError, match="the embedded minilean has no comparator"):
        LeanConfig(judge="comparator")
    assert LeanConfig(judge="comparator", command=["repl"]).judge == "comparator"


can_switch = os.geteuid() == 0 and all(effective_capabilities() >> bit & 1 for bit in (CAP_SETUID, CAP_SETGID,
                                                                                       CAP_KILL))


@pytest.mark.skipif(not can_switch, reason="needs root with CAP_SETUID, CAP_SETGID and CAP_KILL (as the cluster's "
                    "Lean containers run burnqed)")
def test_comparator_runs_as_leans_uid_never_as_burnqeds() -> None:
    work = Path(tempfile.mkdtemp())
    try:
        as_lean = ComparatorSettings(("sh", "-c", "id -u > whoami; touch .lake-written; echo 'Your solution is okay!'"),
                                     run_as_uid=1001)
        (verdict,) = asyncio.run(judge_batch([case("a", ": 1 = 1", "rfl")], as_lean, work / "b"))
        assert verdict.accepted
        assert (work / "b" / "whoami").read_text(encoding="utf-8").strip() == "1001"
    finally:
        shutil.rmtree(work)


def test_comparator_as_root_is_refused_before_it_runs(tmp_path: Path) -> None:
    as_root = ComparatorSettings(("sh", "-c", "touch ran"), run_as_uid=0)
    with pytest.raises(ConfigError, match=r"lean\.run_as_uid = 0 is root"):
        asyncio.run(judge_batch([case("a", ": 1 = 1", "rfl")], as_root, tmp_path / "b"))
    assert not (tmp_path / "b" / "ran").exists()


def test_a_comparator_that_cannot_start_is_no_verdict(tmp_path: Path) -> None:
    missing = ComparatorSettings((str(tmp_path / "no-comparator"), "{config}"))
    with pytest.raises(ConfigError, match="no-comparator' cannot run: No such file or directory"):
        asyncio.run(judge([case("a", ": 1 = 1", "rfl")], missing, tmp_path / "work"))


@pytest.mark.slow
def test_a_theorem_with_its_docstring_is_found_in_both(tmp_path: Path) -> None:
    documented = JudgeCase("d", "", "/-- Two and two. -/\ntheorem d : 2 + 2 = 4", "",
                           "/-- Two and two. -/\ntheorem d : 2 + 2 = 4 := by\n  decide\n")
    assert [(v.accepted, v.reason) for v in judged([documented], tmp_path)] == [(True, None)]

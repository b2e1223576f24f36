"""`burnqed eval` with Lean's comparator as the judge (`lean.judge = "comparator"`; docs/search.md, "The judge"), end to
end on a made-up problem set: the Lean is the Pantograph double (tests/doubles/lean_double.py, which closes any goal
with `done`: a Lean-side hole burnqed's own checks cannot see), the comparator its strict double
(tests/doubles/comparator_double.py, on minilean). Honest proofs are counted with the judge recorded; the proof of a
false statement the double's Lean let through is a soundness alarm: listed by name with comparator's reason, not
counted, exit SOUNDNESS_ALARM_EXIT; a PutnamBench-form answer slot goes to comparator as a definition hole, with the
answer check's verdict beside comparator's. On the embedded minilean the judge is burnqed and eval.json says why;
`compare` refuses results counted by different judges."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from burnqed.errors import InputError
from burnqed.eval.compare import compare_results
from burnqed.eval.result import EvalResult
from burnqed.records.theorem import Answer, AnswerTask, Theorem, TheoremIndex
from burnqed.search.judge import SOUNDNESS_ALARM_EXIT
from tests.conftest import double_argv
from tests.doubles.fault_server import FaultServer
from tests.processes import cli

COMPARATOR = [sys.executable, str(Path(__file__).parents[1] / "doubles" / "comparator_double.py"), "--config",
              "{config}"]
SLOT = "putnam_judged_solution"
THEOREMS = [
    Theorem(name="honest_sum", statement="(2 : Nat) + 2 = 4", source="made-up"),
    Theorem(name="false_claim", statement="(1 : Nat) = 2", source="made-up"),
    Theorem(name="putnam_judged", signature=f": 3 ≤ {SLOT}", header=f"abbrev {SLOT} : Nat := sorry", source="putnam",
            answer=Answer(name=SLOT, type="Nat", task=AnswerTask.PRODUCED, reference="5")),
]


def answer(prompt: str) -> str:
    """The model: `decide` for the true statements (the answer 5 for the slot), `done` for the false one."""
    if SLOT in prompt:
        return f" 5\n\ntheorem putnam_judged : 3 ≤ {SLOT} := by\n  decide\n```"
    return "  done\n```" if "false_claim" in prompt else "  decide\n```"


def run_eval(tmp_path: Path, *sets: str) -> tuple[int, str, dict[str, dict[str, Any]], Path]:
    index = tmp_path / "index.json"
    index.write_text(TheoremIndex(name="judge-made-up", theorems=THEOREMS).model_dump_json(), encoding="utf-8")
    out = tmp_path / "eval.json"
    with FaultServer(completions=answer) as server:
        done = cli("eval", "--theorems", str(index), "--output", str(out), "--budgets", "1", "--no-trajectories-out",
                   "--set", "policy.backend=sglang", "--set", f"policy.url={server.url}", "--set", "search.mode=whole",
                   "--set", "policy.prompt_format=deepseek-tactic", "--set", "search.num_proofs=1", "--set",
                   "search.min_proofs=1", "--set", "search.timeout_s=30", "--set", "lean.workers=1", *sets)
    rows = {row["name"]: row for row in json.loads(out.read_text(encoding="utf-8"))["per_theorem"]} \
        if out.exists() else {}
    return done.returncode, done.stdout + done.stderr, rows, out


@pytest.mark.slow
def test_comparator_counts_the_honest_proofs_and_raises_the_alarm_on_the_other(tmp_path: Path) -> None:
    sets = ("--set", f"lean.command={json.dumps(double_argv())}", "--set", "lean.judge=comparator",
            "--set", f"lean.comparator_command={json.dumps(COMPARATOR)}")
    code, said, rows, out = run_eval(tmp_path, *sets)
    assert code == SOUNDNESS_ALARM_EXIT, said
    assert {name: (row["proved"], row["failure_reason"]) for name, row in rows.items()} == {
        "honest_sum": (True, None), "false_claim": (False, "judge_refused"), "putnam_judged": (True, None)}
    judged = {name: {k: row["judge"][k] for k in ("judge", "accepted", "category", "alarm", "kernels", "sandboxed")}
              for name, row in rows.items()}
    assert judged == {
        "honest_sum": {"judge": "comparator", "accepted": True, "category": None, "alarm": False,
                       "kernels": ["lean"], "sandboxed": True},
        "false_claim": {"judge": "comparator", "accepted": False, "category": "run", "alarm": True,
                        "kernels": [], "sandboxed": True},
        "putnam_judged": {"judge": "comparator", "accepted": True, "category": None, "alarm": False,
                          "kernels": ["lean"], "sandboxed": True}}
    assert rows["false_claim"]["judge"]["reason"] == "Child exited with 1"  # minilean cannot build `done` of 1 = 2
    assert rows["false_claim"]["detail"] == "comparator refused it (run): Child exited with 1"
    # the answer slot: comparator judged the filled hole's type, the answer check its value
    assert (rows["putnam_judged"]["answer"], rows["putnam_judged"]["answer_check"]) == ("5", "equal")
    assert ("soundness alarm: false_claim: burnqed counted its proof, comparator refused it (run: Child exited "
            "with 1); not counted") in said
    assert "judge: comparator, toolchain not pinned" in said
    result = EvalResult.model_validate_json(out.read_text(encoding="utf-8"))
    assert (result.cumulative_solved, result.total) == (2, 3)
    # the finished result reused: its alarm said again, the same exit; judged otherwise now: refused, one line
    again, said_again, _, _ = run_eval(tmp_path, *sets)
    assert again == SOUNDNESS_ALARM_EXIT and "reusing" in said_again and "soundness alarm: false_claim" in said_again
    other, said_other, _, _ = run_eval(tmp_path, "--set", f"lean.command={json.dumps(double_argv())}")
    assert other == 2, said_other
    assert f"error: {out} was counted by comparator, not by burnqed (lean.judge): --force evaluates again" in said_other


@pytest.mark.slow
def test_the_embedded_lean_is_judged_by_burnqed_and_says_why_and_compare_refuses_mixed_judges(tmp_path: Path) -> None:
    code, said, rows, out = run_eval(tmp_path)
    assert code == 0, said
    assert {name: row["judge"] for name, row in rows.items()} == {name: {
        "judge": "burnqed", "why": "the embedded Lean (minilean) has no comparator", "toolchain": None,
        "command": None, "paranoid": False, "sandboxed": True, "kernels": [], "accepted": None, "category": None,
        "reason": None, "alarm": False} for name in rows}
    assert "judge: burnqed (the embedded Lean (minilean) has no comparator)" in said
    embedded = EvalResult.model_validate_json(out.read_text(encoding="utf-8"))
    judged = embedded.model_copy(update={"per_theorem": [
        row.model_copy(update={"judge": row.judge.model_copy(update={"judge": "comparator", "why": None})})
        for row in embedded.per_theorem if row.judge is not None]})
    with pytest.raises(InputError, match=r"counted by different judges \(a: burnqed; b: comparator\)"):
        compare_results([("a", embedded), ("b", judged)])


def test_asking_for_comparator_on_the_embedded_lean_is_one_line(tmp_path: Path) -> None:
    done = cli("eval", "--theorems", str(tmp_path / "none.json"), "--output", str(tmp_path / "e.json"),
               "--set", "lean.judge=comparator")
    assert done.returncode == 2
    assert "the embedded minilean has no comparator" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_comparator_that_is_not_there_is_one_line_before_the_search(tmp_path: Path) -> None:
    code, said, rows, _ = run_eval(tmp_path, "--set", f"lean.command={json.dumps(double_argv())}", "--set",
                                   "lean.judge=comparator", "--set", 'lean.comparator_command=["no-such-comparator"]')
    assert (code, rows) == (2, {})
    assert ("error: lean.comparator_command: 'no-such-comparator' is not a program here (not on PATH): install "
            "comparator (lake comparator: Lean >= v4.35.0-rc2) or set lean.judge = 'burnqed'") in said


def test_the_reports_provenance_says_who_judged_and_the_alarms() -> None:
    from datetime import UTC, datetime

    from burnqed.report.runs import _provenance_markdown
    from burnqed.report.tables import Provenance

    row = Provenance(iteration=0, arm="llm", uri="u", timestamp=datetime(2026, 11, 29, tzinfo=UTC), model="m",
                     ebm=None, benchmark="b", total=3, pass_n=1, mode="whole", seed=None, config_digest="c",
                     git_commit=None, burnqed_version="0.1.0", lean_backend="pantograph", pantograph_version="0.3.16",
                     judge="comparator, toolchain leanprover/lean4:v4.35.0 (--paranoid)",
                     alarms=["soundness alarm: f: burnqed counted its proof, comparator refused it (axioms: Illegal "
                             "axiom detected: 'helper'); not counted"])
    markdown = _provenance_markdown([row], [])
    (line,) = [text for text in markdown if text.startswith("| iteration 0 llm")]
    assert ("**iteration 0 llm: soundness alarm: f: burnqed counted its proof, comparator refused it (axioms: Illegal "
            "axiom detected: 'helper'); not counted**") in markdown
    assert line.endswith("| pantograph (Pantograph 0.3.16); judge: comparator, toolchain leanprover/lean4:v4.35.0 "
                         "(--paranoid) | 2026-11-29 00:00 UTC |")


def test_a_lake_project_without_a_lakefile_toml_is_refused_before_the_search(tmp_path: Path) -> None:
    """The judge's projects take lean.cwd's requirements from its lakefile.toml: without one (Mathlib's own checkout
    has a lakefile.lean) every header that imports would fail to build, each proof a false alarm."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "lakefile.lean").write_text("import Lake\n", encoding="utf-8")
    judged = ("--set", f"lean.command={json.dumps(double_argv())}", "--set", "lean.judge=comparator",
              "--set", f"lean.comparator_command={json.dumps(COMPARATOR)}")
    code, said, rows, _ = run_eval(tmp_path, *judged, "--set", f"lean.cwd={project}")
    assert (code, rows) == (2, {})
    assert f"{project} has none (a lakefile.lean is not read)" in " ".join(said.split())

"""`burnqed judge`, the judge step (docs/cluster.md, "The judge step"; `burnqed.eval.judge_step`): a finished eval
whose judge is `pending` (an eval run with --defer-judge) judged apart by comparator's strict double
(tests/doubles/comparator_double.py, on minilean): the honest proofs accepted with the judge recorded, the proof of a
false statement refused (a soundness alarm, exit 4) and un-counted at every budget, in every group and task row; an
answer slot judged as a definition hole with the answer check's verdict kept beside comparator's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from burnqed.config import Config
from burnqed.eval.judge_step import counted_proof, uncounted
from burnqed.eval.pass_at import build_eval_result
from burnqed.eval.result import EvalResult
from burnqed.lean.comparator import JudgeRecord
from burnqed.lean.soundness import assemble_proof
from burnqed.lean.stored_proof import assembled_header
from burnqed.records.results import FailureReason, TheoremResult
from burnqed.records.theorem import Theorem, TheoremIndex
from burnqed.runner.plan import iteration_of
from burnqed.search.answer_check import AnswerCheck, AnswerJudgement
from burnqed.search.judge import PENDING_WHY, SOUNDNESS_ALARM_EXIT
from tests.conftest import double_argv
from tests.eval.test_judge import COMPARATOR, SLOT, THEOREMS, run_eval
from tests.processes import cli

PROOFS = {"honest_sum": "decide", "false_claim": "done", "putnam_judged": "decide"}


def _proof(theorem: Theorem) -> str:
    header = theorem.header.replace("sorry", "(5)") if theorem.header else None
    proof = assemble_proof(theorem.model_copy(update={"header": header}), [PROOFS[theorem.name]])
    assert proof is not None
    return proof


def unjudged() -> EvalResult:
    """The eval a --defer-judge run writes: every theorem proved at budget 1 (false_claim by the double's hole)."""
    attempts = [[TheoremResult(name=t.name, proved=True, proof=_proof(t), tactics=[PROOFS[t.name]], budget_at_proof=1,
                               nodes_expanded=1, answer="5" if t.answer else None) for t in THEOREMS]]
    check = AnswerJudgement(AnswerCheck.EQUAL, "5", "5", "Lean proved the answer equal to the reference")
    result = build_eval_result(
        attempts, [1, 2], benchmark="judge-made-up", model="m", ebm=None, lean_backend="pantograph", iteration=0,
        config_digest="c", git_commit=None, theorem_names=[t.name for t in THEOREMS],
        theorem_sources={t.name: t.source for t in THEOREMS},
        theorem_tasks={t.name: "answer produced" if t.answer else "no answer" for t in THEOREMS},
        answer_checks={("putnam_judged", "5"): check})
    pending = JudgeRecord(judge="pending", why=PENDING_WHY)
    return result.model_copy(update={"per_theorem": [row.model_copy(update={"judge": pending})
                                                     for row in result.per_theorem]})


def test_the_recorded_proof_gives_back_the_header_it_compiled_under() -> None:
    """The header the judge batches by is read from eval.json's proof alone (no tactics are kept there)."""
    putnam = THEOREMS[2]
    row = next(r for r in unjudged().per_theorem if r.name == "putnam_judged")
    found = counted_proof(row, putnam)
    assert found is not None
    assert assembled_header(found.proof or "", putnam, found.tactics) == f"abbrev {SLOT} : Nat := (5)"
    assert found.tactics == ["decide"]


def test_a_refused_theorem_is_uncounted_in_every_row() -> None:
    result = unjudged()
    assert (result.cumulative_solved, [r.solved for r in result.budgets]) == (3, [3, 3])
    after = uncounted(result, {"putnam_judged": "comparator refused it (run): x"})
    assert (after.cumulative_solved, after.solved_names) == (2, ["false_claim", "honest_sum"])
    assert [(r.solved, r.rate) for r in after.budgets] == [(2, 2 / 3), (2, 2 / 3)]
    assert [(r.group, r.budget, r.solved) for r in after.groups] == [
        ("made-up", 1, 2), ("made-up", 2, 2), ("putnam", 1, 0), ("putnam", 2, 0)]
    assert [(r.group, r.budget, r.solved) for r in after.tasks] == [
        ("no answer", 1, 2), ("no answer", 2, 2), ("answer produced", 1, 0), ("answer produced", 2, 0),
        ("answer produced (reference answer)", 1, 0), ("answer produced (reference answer)", 2, 0)]
    row = next(r for r in after.per_theorem if r.name == "putnam_judged")
    assert (row.proved, row.failure_reason, row.proof, row.answer, row.reference_at_proof, row.detail) == (
        False, FailureReason.JUDGE_REFUSED, None, None, None, "comparator refused it (run): x")
    assert after.failure_reasons == {"judge_refused": 1}


def test_the_judge_step_judges_a_pending_eval_and_raises_the_alarm(tmp_path: Path) -> None:
    index = tmp_path / "index.json"
    index.write_text(TheoremIndex(name="judge-made-up", theorems=THEOREMS).model_dump_json(), encoding="utf-8")
    pending, out = tmp_path / "eval.unjudged.json", tmp_path / "eval.json"
    pending.write_text(unjudged().model_dump_json(), encoding="utf-8")
    sets = ("--set", f"lean.command={json.dumps(double_argv())}", "--set", "lean.judge=comparator",
            "--set", f"lean.comparator_command={json.dumps(COMPARATOR)}")
    done = cli("judge", "--input", str(pending), "--theorems", str(index), "--output", str(out), *sets)
    assert done.returncode == SOUNDNESS_ALARM_EXIT, done.stdout + done.stderr
    judged = EvalResult.model_validate_json(out.read_text(encoding="utf-8"))
    rows = {row.name: row for row in judged.per_theorem}
    assert {name: (row.proved, row.judge and (row.judge.judge, row.judge.accepted, row.judge.alarm))
            for name, row in rows.items()} == {
        "honest_sum": (True, ("comparator", True, False)), "false_claim": (False, ("comparator", False, True)),
        "putnam_judged": (True, ("comparator", True, False))}
    assert (judged.cumulative_solved, [r.solved for r in judged.budgets]) == (2, [2, 2])
    assert (rows["putnam_judged"].answer, rows["putnam_judged"].answer_check) == ("5", "equal")
    assert ("soundness alarm: false_claim: burnqed counted its proof, comparator refused it (run: Child exited "
            "with 1); not counted") in done.stdout
    again = cli("judge", "--input", str(pending), "--theorems", str(index), "--output", str(out), *sets)
    assert again.returncode == SOUNDNESS_ALARM_EXIT
    assert again.stdout.startswith(f"reusing {out} (judged already; --force judges again)\n")
    # the eval done again (another result at --input): judged again, never the old verdict reused
    redone = unjudged()  # built again: another timestamp
    pending.write_text(redone.model_dump_json(), encoding="utf-8")
    third = cli("judge", "--input", str(pending), "--theorems", str(index), "--output", str(out), *sets)
    assert third.stdout.startswith(f"judging {pending} again: it is not the eval {out} was judged from\n")
    assert EvalResult.model_validate_json(out.read_text(encoding="utf-8")).timestamp == redone.timestamp


def test_the_judge_step_needs_comparator(tmp_path: Path) -> None:
    pending = tmp_path / "eval.unjudged.json"
    pending.write_text(unjudged().model_dump_json(), encoding="utf-8")
    done = cli("judge", "--input", str(pending), "--output", str(tmp_path / "eval.json"))
    assert done.returncode == 2
    assert done.stderr.strip() == (f"error: {pending}: nothing to judge with: burnqed judges a pantograph Lean's "
                                   "proofs here (the embedded Lean (minilean) has no comparator); the judge step needs "
                                   "comparator")


REPL = ["pantograph-repl", "Mathlib"]
AUTO = ("lean.judge = 'auto' and {}: `lake comparator` ships with Lean >= v4.35.0-rc2; lean.judge = 'comparator' "
        "runs the standalone comparator (lean.comparator_command)")


@pytest.mark.parametrize(("lean", "judged"), [
    ({}, ("burnqed", "the embedded Lean (minilean) has no comparator")),
    ({"command": REPL, "toolchain": "leanprover/lean4:v4.35.0-rc2"}, ("comparator", None)),
    ({"command": REPL, "toolchain": "4.36.1"}, ("comparator", None)),
    ({"command": REPL, "pantograph_version": "0.3.16/v4.35.0"}, ("comparator", None)),
    ({"command": REPL, "toolchain": "leanprover/lean4:v4.35.0-rc1"},
     ("burnqed", AUTO.format("Lean leanprover/lean4:v4.35.0-rc1 (lean.toolchain)"))),
    ({"command": REPL, "pantograph_version": "0.3.13"},
     ("burnqed", AUTO.format("no Lean version is configured (lean.toolchain)"))),
    ({"command": REPL, "toolchain": "4.36.0", "judge": "burnqed"}, ("burnqed", "lean.judge = 'burnqed'")),
    ({"command": REPL, "toolchain": "4.27.0", "judge": "comparator"}, ("comparator", None)),
])
def test_auto_judges_with_comparator_where_the_toolchain_ships_it(lean: dict[str, object],
                                                                  judged: tuple[str, str | None]) -> None:
    cfg = Config.model_validate({"lean": lean})
    assert cfg.lean.judged_by() == judged
    steps = [s.name for s in iteration_of(cfg, "s3://b/run", 0).stages if s.name.startswith("judge-")]
    assert steps == (["judge-eval-base", "judge-eval"] if judged[0] == "comparator" else [])


YES_MACHINE = [sys.executable, "-c", "print('Your solution is okay!')", "{config}"]  # accepts whatever it is given


def test_a_comparator_that_accepts_everything_is_refused_before_judging_or_searching(tmp_path: Path) -> None:
    """Positive evidence first (`lean.selftest.comparator_evidence`): an honest proof accepted and a sorryAx refused,
    before the judge step judges and before a judged eval searches."""
    pending = tmp_path / "eval.unjudged.json"
    pending.write_text(unjudged().model_dump_json(), encoding="utf-8")
    sets = ("--set", f"lean.command={json.dumps(double_argv())}", "--set", "lean.judge=comparator",
            "--set", f"lean.comparator_command={json.dumps(YES_MACHINE)}")
    said = (f"error: lean.judge = 'comparator': comparator ({' '.join(YES_MACHINE)}) accepted it: a sorryAx must be "
            "refused; `burnqed lean selftest` shows each case (fix lean.comparator_command, or set lean.judge = "
            "'burnqed')")
    done = cli("judge", "--input", str(pending), "--output", str(tmp_path / "eval.json"), *sets)
    assert (done.returncode, done.stderr.strip()) == (2, said)
    assert not (tmp_path / "eval.json").exists()
    code, output, rows, _ = run_eval(tmp_path, *sets)
    assert (code, rows) == (2, {})
    assert said in output

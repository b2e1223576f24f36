"""`burnqed eval --resume` counts a committed proof only once it verifies again (issue 67, build point 7): a trajectory
part is a file anyone can edit. Whole mode on minilean (made-up problems, one in PutnamBench's answer form): an honest
resume scores what the interrupted eval did; a part edited so that its proof is false (its last tactic `sorry`, a
wrong answer, another statement, no text, tactics that are not the text's, a denied tactic) is scored not proved,
`recheck_failed`, the detail saying why, and the other theorems still count. Step mode on the replay double too.
Lean answers in this process (`InProcessReplayPool`: what the recheck makes of a reply is the subject, not the pipe)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from burnqed.config import LeanConfig, load_config
from burnqed.eval.identity import EvalJobSettings
from burnqed.eval.per_theorem import render_theorem_table
from burnqed.eval.rendering import render_eval_table
from burnqed.eval.result import EvalResult
from burnqed.eval.resume import recheck_committed
from burnqed.eval.run import eval_job
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplayPool
from burnqed.records.results import FailureReason, TheoremResult
from burnqed.records.theorem import Answer, AnswerTask, Theorem, TheoremIndex
from burnqed.storage import Store
from burnqed.trajectory.reader import is_complete, read_results
from leankit.corpus import load_corpus
from leankit.version import PantographVersion
from minilean.replay.replay_server import ReplayServer
from tests.doubles.line_servers import MiniLean
from tests.doubles.policy_double import ScriptedPolicy, corpus_oracle

SLOT = "putnam_mock_solution"
MOCK = Theorem(name="putnam_mock", signature=f": 3 ≤ {SLOT}", header=f"abbrev {SLOT} : ℕ := sorry\n-- 5",
               source="putnam", answer=Answer(name=SLOT, type="ℕ", task=AnswerTask.PRODUCED, reference="5"))
PLAIN = Theorem(name="plain_sum", statement="2 + 2 = 4", source="made-up")
INDEX = TheoremIndex(name="made-up", theorems=[MOCK, PLAIN])
MINILEAN = [sys.executable, "-m", "minilean", "--pantograph-version", "0.3.4"]
LEAN = LeanConfig(command=MINILEAN, pantograph_version="0.3.4", tactic_timeout_s=10.0, compile_timeout_s=10.0,
                  ready_timeout_s=20.0)
VERSION = PantographVersion.parse("0.3.4")
GUARD = TacticGuard.from_config(LEAN)
MOCK_FILE = f"abbrev {SLOT} : ℕ := (5)\n-- 5\n\ntheorem putnam_mock : 3 ≤ {SLOT} := by\n  norm_num [{SLOT}]\n"
PLAIN_FILE = "theorem plain_sum : 2 + 2 = 4 := by\n  norm_num\n"
NOT_RECHECKED = "the committed proof did not check again"
TIMING = {"time_s", "policy_s", "lean_s", "value_s"}


def answer(prompt: str) -> list[tuple[str, float]]:
    """The policy: an honest answer and proof for each theorem."""
    if "putnam_mock" in prompt:
        return [(f" 5\n\ntheorem putnam_mock : 3 ≤ {SLOT} := by\n  norm_num [{SLOT}]", -0.1)]
    return [("  norm_num", -0.1)]


def evaluate(prefix: Path, store: Store, *, resume: bool = False) -> tuple[EvalResult, ScriptedPolicy]:
    cfg = load_config(sets=["search.mode=whole", "policy.prompt_format=deepseek-tactic", "search.num_proofs=1",
                            "search.min_proofs=1", "search.timeout_s=30"])
    policy = ScriptedPolicy(answer, key=lambda prompt: prompt)

    async def go() -> EvalResult:
        async with minilean_pool() as pool:
            return await eval_job(INDEX, EvalJobSettings.from_config(cfg, [1, 2]), pass_n=1, pool=pool, pool_size=1,
                                  policy=policy, trajectories=str(prefix), resume=resume, store=store)

    return asyncio.run(go()), policy


def minilean_pool() -> InProcessReplayPool:
    """One minilean worker at 0.3.4 in this process, four theorems a lease."""
    return InProcessReplayPool(lambda: MiniLean(version=VERSION), 1, theorems_per_worker=4)


def scored(result: EvalResult) -> list[dict[str, Any]]:
    return [entry.model_dump(exclude=TIMING) for entry in result.per_theorem]


def edit(prefix: Path, name: str, change: Callable[[dict[str, Any]], None]) -> None:
    """Rewrite, in the committed part that holds `name`, that theorem's result as `change` alters its JSON."""
    for path in sorted(prefix.glob("part-*.json")):
        manifest = json.loads(path.read_text())
        for result in manifest["theorems"]:
            if result["name"] == name:
                change(result)
                path.write_text(json.dumps(manifest))
                return
    raise AssertionError(f"no committed part holds {name}")


def copy(prefix: Path, to: Path) -> Path:
    shutil.copytree(prefix, to)
    return to


def recheck(results: list[TheoremResult], guard: TacticGuard = GUARD) -> list[TheoremResult]:
    """`eval.resume.recheck_committed` on a one-worker minilean pool."""
    async def go() -> list[TheoremResult]:
        async with minilean_pool() as pool:
            return await recheck_committed(results, INDEX.theorems, pool, guard)

    return asyncio.run(go())


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, EvalResult]:
    """An eval of both theorems, finished: each committed, proved by the policy's honest proof."""
    folder = tmp_path_factory.mktemp("honest")
    result, _ = evaluate(folder / "traj", Store(cache_dir=folder / "cache"))
    return folder / "traj", result


@pytest.mark.slow  # three small evals on minilean
def test_an_honest_resume_scores_what_the_interrupted_eval_did(honest: tuple[Path, EvalResult], tmp_path: Path,
                                                                store: Store) -> None:
    prefix, whole = honest
    assert [(t.name, t.proved, t.answer, t.proof) for t in whole.per_theorem] == [
        ("putnam_mock", True, "5", MOCK_FILE), ("plain_sum", True, None, PLAIN_FILE)]
    assert [(r.name, r.tactics, r.answer) for r in read_results(str(prefix), store=store)] == [
        ("putnam_mock", [f"norm_num [{SLOT}]"], "5"), ("plain_sum", ["norm_num"], None)]
    # the finished pass resumed: both committed proofs verify again, nothing is searched, the same scores
    finished, policy = evaluate(copy(prefix, tmp_path / "finished"), store, resume=True)
    assert (finished.resumed, policy.calls) == (2, [])
    assert scored(finished) == scored(whole)
    # interrupted after its first theorem: that one is checked again and counted, the other searched
    cut = copy(prefix, tmp_path / "cut")
    for name in ("part-000001.json", "part-000001.parquet", "_SUCCESS.json"):
        (cut / name).unlink()
    resumed, policy = evaluate(cut, store, resume=True)
    assert resumed.resumed == 1 and len(policy.calls) == 1 and "plain_sum" in policy.calls[0][0]
    assert scored(resumed) == scored(whole) and is_complete(str(cut), store=store)


@pytest.mark.slow  # two small evals on minilean
def test_a_part_edited_into_a_false_proof_is_not_counted_on_resume(honest: tuple[Path, EvalResult], tmp_path: Path,
                                                                    store: Store) -> None:
    """The committed answer `5` edited into `1` (its header and result both: `3 ≤ 1` is false), `plain_sum` left
    as it was: the resume counts only `plain_sum`, and says why `putnam_mock` is not counted."""
    prefix, whole = honest
    forged = copy(prefix, tmp_path / "forged")

    def wrong_answer(result: dict[str, Any]) -> None:
        result["proof"] = result["proof"].replace(":= (5)", ":= (1)")
        result["answer"] = "1"

    edit(forged, "putnam_mock", wrong_answer)
    result, policy = evaluate(forged, store, resume=True)
    assert (result.resumed, policy.calls) == (2, [])
    mock, plain = result.per_theorem
    assert (mock.proved, mock.failure_reason, mock.proof, mock.answer, mock.detail) == (
        False, FailureReason.RECHECK_FAILED, None, None,
        f"{NOT_RECHECKED}: the proof text does not compile: unsolved goals")
    assert (plain.proved, plain.proof) == (True, PLAIN_FILE)
    assert (result.cumulative_solved, result.failure_reasons) == (1, {"recheck_failed": 1})
    assert "cumulative solved: 1/2; failures: recheck_failed 1\n" in render_eval_table(result)
    rows = [[cell.strip() for cell in line.split("│")] for line in render_theorem_table(result, width=300).splitlines()
            if line.startswith("│ putnam_mock")]  # `burnqed eval --show-theorems`
    assert [(row[2], row[-2]) for row in rows] == [("recheck_failed", mock.detail)]
    assert (mock.tokens, mock.lean_calls) == (whole.per_theorem[0].tokens, whole.per_theorem[0].lean_calls)
    # the last tactic replaced by `sorry` (text and tactics both): refused, also with an empty deny list, by Lean
    sorried = copy(prefix, tmp_path / "sorried")

    def sorry(result: dict[str, Any]) -> None:
        result["proof"] = result["proof"].replace("  norm_num\n", "  sorry\n")
        result["tactics"] = ["sorry"]

    edit(sorried, "plain_sum", sorry)
    result, _ = evaluate(sorried, store, resume=True)
    assert [(t.name, t.proved, t.detail) for t in result.per_theorem] == [
        ("putnam_mock", True, None),
        ("plain_sum", False, f"{NOT_RECHECKED}: tactic 'sorry' on the path is denied: matches deny pattern "
         r"'\\bsorry\\b'")]


@pytest.mark.slow  # one minilean worker
def test_each_edit_is_refused_with_its_reason_and_honest_results_pass_unchanged(
        honest: tuple[Path, EvalResult], store: Store) -> None:
    prefix, _ = honest
    mock, plain = read_results(str(prefix), store=store)

    def forged(result: TheoremResult, **changes: Any) -> TheoremResult:
        return result.model_copy(update=changes)

    unsolved = TheoremResult(name="plain_sum", mode=plain.mode, proved=False, failure_reason="max_proofs",
                             proofs_sampled=2)
    cases = [
        # a proof of another statement (it compiles): never compiled, the text is not this theorem restated
        forged(plain, proof=PLAIN_FILE.replace("2 + 2 = 4", "2 + 2 = 2 + 2")),
        forged(plain, tactics=["rfl"]),  # tactics that are not the text's
        forged(plain, proof=None),
        forged(plain, proof=PLAIN_FILE.replace("norm_num", "native_decide"), tactics=["native_decide"]),
        forged(mock, answer=None),
        forged(mock, proof=MOCK_FILE.replace(":= (5)", ":= (sorry)"), answer="sorry"),
        forged(mock, proof=MOCK_FILE.replace(":= (5)", ":= (1)"), answer="1"),  # 3 ≤ 1: Lean refuses it
    ]
    checked = recheck([mock, plain, unsolved, *cases])
    assert checked[:3] == [mock, plain, unsolved]
    restated = "its text does not restate this theorem: it is not the index's header and declaration followed by " \
        "the result's tactics"
    assert [(r.name, r.proved, r.failure_reason, r.detail) for r in checked[3:]] == [
        (name, False, FailureReason.RECHECK_FAILED, f"{NOT_RECHECKED}: {reason}") for name, reason in [
            ("plain_sum", restated), ("plain_sum", restated),
            ("plain_sum", "the result is marked proved but holds no proof text"),
            ("plain_sum", "tactic 'native_decide' on the path is denied: matches deny pattern "
             r"'\\bnative_decide\\b'"),
            ("putnam_mock", "the result gives no answer for the theorem's open answer slot"),
            ("putnam_mock", "its answer is refused: the answer is left `sorry`"),
            ("putnam_mock", "the proof text does not compile: unsolved goals")]]
    assert all((r.proof, r.tactics, r.budget_at_proof, r.answer) == (None, [], None, None) for r in checked[3:])
    # with an empty deny list Lean's own evidence refuses the `sorry`
    sorried = forged(plain, proof=PLAIN_FILE.replace("norm_num", "sorry"), tactics=["sorry"])
    assert [r.detail for r in recheck([sorried], TacticGuard([]))] == [
        f"{NOT_RECHECKED}: the proof text does not compile: (kernel) declaration has metavariables 'plain_sum'"]


@pytest.mark.slow  # two small evals in-process
def test_in_step_mode_a_last_tactic_replaced_is_not_counted_on_resume(tmp_path: Path, store: Store) -> None:
    """Step mode on the replay double (corpus theorems): the honest part resumes as it was, the part whose last tactic
    was replaced (`linarith` by `rfl`, text and tactics both) is refused by Lean's compile."""
    corpus = load_corpus()
    index = TheoremIndex(name="some", theorems=[Theorem.from_recorded(spec) for spec in corpus.theorems[:2]])
    settings = EvalJobSettings.from_config(load_config(sets=["search.concurrency=1"]), [2, 4])

    def run(resume: bool = False) -> EvalResult:
        async def go() -> EvalResult:
            pool = InProcessReplayPool(lambda: ReplayServer(corpus), size=1)
            try:
                return await eval_job(index, settings, pass_n=1, pool=pool, pool_size=1,
                                      policy=ScriptedPolicy(corpus_oracle(corpus)), trajectories=str(tmp_path / "t"),
                                      resume=resume, store=store)
            finally:
                await pool.close()

        return asyncio.run(go())

    whole = run()
    assert [(t.name, t.proved) for t in whole.per_theorem] == [
        ("algebra_2x_plus_3_eq_11", True), ("algebra_linear_system_sum_diff", True)]

    def replaced(result: dict[str, Any]) -> None:
        assert result["tactics"] == ["intro h₀", "linarith"]
        result["proof"] = result["proof"].replace("  linarith\n", "  rfl\n")
        result["tactics"] = ["intro h₀", "rfl"]

    edit(tmp_path / "t", "algebra_2x_plus_3_eq_11", replaced)
    resumed = run(resume=True)
    assert [(t.name, t.proved, t.failure_reason, t.detail) for t in resumed.per_theorem] == [
        ("algebra_2x_plus_3_eq_11", False, FailureReason.RECHECK_FAILED,
         f"{NOT_RECHECKED}: the proof text does not compile: The rfl tactic failed. Possible reasons:"),
        ("algebra_linear_system_sum_diff", True, None, None)]
    assert resumed.per_theorem[1] == whole.per_theorem[1].model_copy(
        update={name: getattr(resumed.per_theorem[1], name) for name in TIMING})


@pytest.mark.slow  # one minilean worker
def test_a_committed_file_with_lemmas_is_rechecked_with_them_and_a_lemma_the_guard_refuses_is_refused() -> None:
    lemma = "theorem burnqed_lemma_1 : (2 : ℕ) + 2 = 4 := by\n  norm_num\n\n"
    proved = TheoremResult(name="plain_sum", mode="whole", proved=True, proof=f"{lemma}theorem plain_sum : 2 + 2 = 4 "
                           ":= by\n  exact burnqed_lemma_1\n", tactics=["exact burnqed_lemma_1"])
    assert proved.proof is not None
    denied = proved.model_copy(update={"proof": proved.proof.replace("  norm_num", "  native_decide")})
    checked = recheck([proved, denied])
    assert checked[0] == proved
    assert (checked[1].proved, checked[1].detail) == (False, f"{NOT_RECHECKED}: lemma burnqed_lemma_1 is refused: its "
                                                      "proof: tactic 'native_decide' on the path is denied: matches "
                                                      r"deny pattern '\\bnative_decide\\b'")

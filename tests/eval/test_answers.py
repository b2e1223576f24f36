"""An eval of answer-bearing theorems (docs/search.md, "Answers"): the answer beside the proof per theorem, the two
tasks counted apart, both shown in the eval's table, the per-theorem table and the report's proofs; the theorem set's
digest follows the header and the answer. The produced answer checked against the reference (on minilean, a made-up
problem in PutnamBench's form): `100` for `3 ≤ SOL` (reference 5) is proved and counted "answer produced", never
"answer produced (reference answer)", in the table, eval.json's fields, the report's proofs and `compare`; `burnqed
eval` end to end judges the slot's constant under the proof's header, so `if decl_name% == `SOL then 100 else 5` (5
only outside its slot) is `different` too, both headers' digests in eval.json. minilean answers in this process
(`InProcessReplayPool`, `minilean_in_process`; tests/search/test_answer_check.py checks one through a process)."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from burnqed.config import LeanConfig, load_config
from burnqed.eval.compare import compare_results, render_comparison
from burnqed.eval.identity import EvalJobSettings, theorem_digest
from burnqed.eval.pass_at import AnswerChecks, answer_task, build_eval_result
from burnqed.eval.per_theorem import render_theorem_table
from burnqed.eval.rendering import render_eval_table
from burnqed.eval.result import EvalResult
from burnqed.eval.run import check_answers, eval_job
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplayPool
from burnqed.records.enums import SearchMode
from burnqed.records.results import TheoremResult
from burnqed.records.theorem import Answer, AnswerTask, Theorem, TheoremIndex
from burnqed.report.core import _proofs_markdown
from burnqed.report.tables import ProofRow
from burnqed.search.answer_check import AnswerCheck, header_digest, judged_header
from burnqed.storage import Store
from leankit.version import PantographVersion
from tests.doubles.fault_server import FaultServer
from tests.doubles.line_servers import MiniLean
from tests.doubles.policy_double import ScriptedPolicy
from tests.processes import cli
from tests.search.test_answers import completion, search

PRODUCED = Theorem(name="putnam_easy", signature=": 1 + 1 = putnam_easy_solution",
                   header="abbrev putnam_easy_solution : ℕ := sorry\n-- 2", source="putnam",
                   answer=Answer(name="putnam_easy_solution", type="ℕ", task=AnswerTask.PRODUCED, reference="2"))
GIVEN = Theorem(name="putnam_easy_given", signature=": 1 + 1 = ((2) : ℕ)", source="putnam",
                answer=Answer(name="putnam_easy_solution", type="ℕ", task=AnswerTask.GIVEN, value="2"))
PLAIN = Theorem(name="plain", statement="2 + 2 = 4", source="putnam")
FILE = ("abbrev putnam_easy_solution : ℕ := 2\n-- 2\n\ntheorem putnam_easy : 1 + 1 = putnam_easy_solution := by\n"
        "  norm_num [putnam_easy_solution]\n")


def results() -> list[TheoremResult]:
    whole = {"mode": SearchMode.WHOLE, "proofs_sampled": 4}
    return [
        TheoremResult(name="putnam_easy", proved=True, budget_at_proof=3, proof=FILE, answer="2", **whole),
        TheoremResult(name="putnam_easy_given", proved=False, failure_reason="max_proofs", answer=None, **whole),
        TheoremResult(name="plain", proved=True, budget_at_proof=1, proof="theorem plain : 2 + 2 = 4 := by\n  rfl\n",
                      **whole),
    ]


def build(theorems: list[Theorem]) -> EvalResult:
    return build_eval_result([results()], [2, 4], benchmark="putnam-made-up", model="m", ebm=None,
                             lean_backend="pantograph", iteration=0, config_digest="c", git_commit=None,
                             theorem_names=[t.name for t in theorems], mode=SearchMode.WHOLE,
                             timestamp=datetime(2026, 11, 27, tzinfo=UTC),
                             theorem_sources={t.name: t.source for t in theorems},
                             theorem_tasks={t.name: answer_task(t) for t in theorems})


def test_the_answer_is_beside_the_proof_and_the_tasks_are_counted_apart() -> None:
    result = build([PRODUCED, GIVEN, PLAIN])
    assert [(t.name, t.task, t.answer, t.proof) for t in result.per_theorem] == [
        ("putnam_easy", "answer produced", "2", FILE),
        ("putnam_easy_given", "answer given", None, None),
        ("plain", "no answer", None, "theorem plain : 2 + 2 = 4 := by\n  rfl\n"),
    ]
    assert [(g.group, g.budget, g.solved, g.total) for g in result.tasks] == [
        ("answer produced", 2, 0, 1), ("answer produced", 4, 1, 1),
        ("answer given", 2, 0, 1), ("answer given", 4, 0, 1),
        ("no answer", 2, 1, 1), ("no answer", 4, 1, 1),
    ]
    assert [(g.group, g.budget, g.solved, g.total) for g in result.groups] == [("putnam", 2, 1, 3), ("putnam", 4, 2, 3)]
    assert "by answer task at budget 4: answer produced 1/1 (100.0 %), answer given 0/1 (0.0 %), no answer 1/1 " \
        "(100.0 %)\n" in render_eval_table(result)
    rows = [line.split("│") for line in render_theorem_table(result, width=200).splitlines() if line[:1] == "│"]
    assert rows[0][-2].strip() == "answer: 2; norm_num [putnam_easy_solution]"  # text, not rich markup
    assert build([PLAIN.model_copy(update={"name": n}) for n in ("putnam_easy", "putnam_easy_given", "plain")]
                 ).tasks == []  # no answer slot in the benchmark: no per-task rows


def test_the_report_shows_the_answer_beside_the_proof() -> None:
    rows = [ProofRow(iteration=1, arm="llm", theorem="putnam_easy", budget_at_proof=3, proof=FILE, answer="2",
                     new=False)]
    lines = _proofs_markdown(rows, 1, [])
    assert lines[-2] == "| `putnam_easy` | 3 | `answer: 2 · norm_num [putnam_easy_solution]` |"


def test_the_theorem_set_changes_with_a_header_or_an_answer_not_with_equal_records() -> None:
    digest = theorem_digest([PRODUCED, PLAIN])
    assert digest == theorem_digest([PRODUCED.model_copy(), Theorem(name="plain", statement="2 + 2 = 4",
                                                                     source="putnam")])
    other_header = PRODUCED.model_copy(update={"header": "open Real\n" + (PRODUCED.header or "")})
    assert theorem_digest([other_header, PLAIN]) != digest
    assert theorem_digest([PRODUCED.with_answer("2"), PLAIN]) != digest
    assert theorem_digest([GIVEN, PLAIN]) != theorem_digest(
        [GIVEN.model_copy(update={"answer": GIVEN.answer.model_copy(update={"value": "3"})}), PLAIN])  # type: ignore[union-attr]
    assert theorem_digest([PLAIN]) == "0198cfec0141737d60d5fd3de298bdba412c02c2edd6c882b60a25c4137cf7bf"


# --------------------------------------------------------------------------------- the answer checked (issue 67)

SLOT = "putnam_mock_solution"
AT_LEAST_THREE = Theorem(name="putnam_mock", signature=f": 3 ≤ {SLOT}", header=f"abbrev {SLOT} : ℕ := sorry\n-- 5",
                         source="putnam", answer=Answer(name=SLOT, type="ℕ", task=AnswerTask.PRODUCED, reference="5"))
MINILEAN = [sys.executable, "-m", "minilean", "--pantograph-version", "0.3.4"]
LEAN = LeanConfig(command=MINILEAN, pantograph_version="0.3.4", tactic_timeout_s=10.0, compile_timeout_s=10.0,
                  ready_timeout_s=20.0)


def minilean_pool() -> InProcessReplayPool:
    """One minilean worker at 0.3.4 in this process, two theorems a lease."""
    return InProcessReplayPool(lambda: MiniLean(version=PantographVersion.parse("0.3.4")), 1, theorems_per_worker=2)


def mock_file(answer: str) -> str:
    return (f"abbrev {SLOT} : ℕ := ({answer})\n-- 5\n\ntheorem putnam_mock : 3 ≤ {SLOT} := by\n"
            f"  norm_num [{SLOT}]\n")


def whole_mock(answer: str) -> TheoremResult:
    """A whole-mode search of AT_LEAST_THREE on minilean, the policy answering `answer` with an honest proof."""
    theorem = "theorem putnam_mock : 3 ≤ putnam_mock_solution := by\n"
    outcome = search("0.3.4", AT_LEAST_THREE, [completion(answer, f"  norm_num [{SLOT}]", theorem=theorem)],
                     Path("unused.log"), minilean=True)
    return outcome.result


def checked(attempts: list[list[TheoremResult]], theorems: list[Theorem]) -> AnswerChecks:
    """`eval.run.check_answers` on a one-worker minilean pool."""
    async def go() -> AnswerChecks:
        async with minilean_pool() as pool:
            return await check_answers(theorems, attempts, pool, TacticGuard.from_config(LEAN))

    return asyncio.run(go())


@pytest.mark.slow
def test_a_wrong_answer_is_proved_but_not_counted_with_the_reference_answer() -> None:
    wrong, right = whole_mock("100"), whole_mock("5")
    # `100` proves `3 ≤ SOL`: whole mode counts it, and it is the answer beside the proof
    assert (wrong.proved, wrong.answer, wrong.proof) == (True, "100", mock_file("100"))
    assert (right.proved, right.answer) == (True, "5")
    failed = TheoremResult(name="putnam_mock", proved=False, failure_reason="max_proofs", mode=SearchMode.WHOLE,
                           proofs_sampled=4)
    wrong, right = (r.model_copy(update={"budget_at_proof": b}) for r, b in ((wrong, 1), (right, 3)))
    theorems = [AT_LEAST_THREE, PLAIN]
    plain = TheoremResult(name="plain", proved=True, budget_at_proof=1, proof="theorem plain : 2 + 2 = 4 := by\n"
                          "  rfl\n", mode=SearchMode.WHOLE, proofs_sampled=1)
    passes = [[wrong, plain], [failed, plain]]
    checks = checked(passes, theorems)
    assert {key: judged.verdict for key, judged in checks.items()} == {("putnam_mock", "100"): AnswerCheck.DIFFERENT}
    first = scored(passes, theorems, checks)
    assert [(g.group, g.budget, g.solved, g.total) for g in first.tasks] == [
        ("answer produced", 2, 1, 1), ("answer produced", 4, 1, 1),
        ("answer produced (reference answer)", 2, 0, 1), ("answer produced (reference answer)", 4, 0, 1),
        ("no answer", 2, 1, 1), ("no answer", 4, 1, 1)]
    mocked = first.per_theorem[0]
    assert (mocked.answer, mocked.answer_check, mocked.reference, mocked.reference_at_proof) == (
        "100", "different", "5", None)
    assert mocked.answer_check_detail == "Lean proved the answer different from the reference"
    assert ("by answer task at budget 4: answer produced 1/1 (100.0 %), answer produced (reference answer) 0/1 "
            "(0.0 %), no answer 1/1 (100.0 %)\n") in render_eval_table(first)
    rows = [line.split("│") for line in render_theorem_table(first, width=200).splitlines() if line[:1] == "│"]
    assert rows[0][-2].strip() == "answer: 100 (different from the reference 5); norm_num [putnam_mock_solution]"
    # a second eval whose second pass gives the reference answer at budget 3: counted there from budget 4 on
    passes = [[wrong, plain], [right, plain]]
    checks = checked(passes, theorems)
    assert {key: judged.verdict for key, judged in checks.items()} == {
        ("putnam_mock", "100"): AnswerCheck.DIFFERENT, ("putnam_mock", "5"): AnswerCheck.EQUAL}
    second = scored(passes, theorems, checks)
    assert [(g.budget, g.solved) for g in second.tasks if g.group == "answer produced (reference answer)"] == [
        (2, 0), (4, 1)]
    assert (second.per_theorem[0].answer_check, second.per_theorem[0].reference_at_proof) == ("different", 3)
    comparison = compare_results([("first", first), ("second", second)])
    assert [(t.task, [e.solved for e in t.entries], t.delta_solved) for t in comparison.budgets[-1].tasks] == [
        ("answer produced", [1, 1], 0), ("answer produced (reference answer)", [0, 1], 1), ("no answer", [1, 1], 0)]
    assert ("answer produced (reference answer): first 0/1 (0.0 %), second 1/1 (100.0 %), Δ +1 (+100.0 pts)\n"
            in render_comparison(comparison))


def scored(passes: list[list[TheoremResult]], theorems: list[Theorem], checks: AnswerChecks) -> EvalResult:
    return build_eval_result(passes, [2, 4], benchmark="putnam-made-up", model="m", ebm=None,
                             lean_backend="minilean", iteration=0, config_digest="c", git_commit=None,
                             theorem_names=[t.name for t in theorems], mode=SearchMode.WHOLE,
                             timestamp=datetime(2026, 11, 27, tzinfo=UTC),
                             theorem_tasks={t.name: answer_task(t) for t in theorems}, answer_checks=checks)


def test_the_report_shows_the_check_beside_the_answer() -> None:
    rows = [ProofRow(iteration=1, arm="llm", theorem="putnam_mock", budget_at_proof=1, proof=mock_file("100"),
                     answer="100", answer_check="different", reference="5", new=False),
            ProofRow(iteration=1, arm="llm", theorem="putnam_other", budget_at_proof=2, proof=mock_file("x"),
                     answer="x", answer_check="undecided", reference="5", new=False)]
    lines = _proofs_markdown(rows, 1, [])
    assert lines[-3:-1] == [
        "| `putnam_mock` | 1 | `answer: 100 (different from the reference 5) · norm_num [putnam_mock_solution]` |",
        "| `putnam_other` | 2 | `answer: x (undecided; the reference: 5) · norm_num [putnam_mock_solution]` |"]


@pytest.mark.slow
def test_an_eval_on_minilean_counts_a_wrong_answer_proved_but_not_with_the_reference(store: Store) -> None:
    """`burnqed eval`'s stage (`eval_job`), whole mode on minilean: the policy answers `100` for `3 ≤ SOL` with an
    honest proof; the result counts it 'answer produced' and not 'answer produced (reference answer)'."""
    theorem = "theorem putnam_mock : 3 ≤ putnam_mock_solution := by\n"
    wrong = completion("100", f"  norm_num [{SLOT}]", theorem=theorem)
    cfg = load_config(sets=["search.mode=whole", "policy.prompt_format=deepseek-tactic", "search.num_proofs=1",
                            "search.min_proofs=1", "search.timeout_s=30"])

    async def go() -> EvalResult:
        async with minilean_pool() as pool:
            return await eval_job(TheoremIndex(name="putnam-made-up", theorems=[AT_LEAST_THREE]),
                                  EvalJobSettings.from_config(cfg, [1, 2]), pass_n=1, pool=pool, pool_size=1,
                                  policy=ScriptedPolicy(lambda _: [(wrong, -0.1)], key=lambda prompt: prompt),
                                  store=store)

    result = asyncio.run(go())
    assert [(g.group, g.budget, g.solved) for g in result.tasks] == [
        ("answer produced", 1, 1), ("answer produced", 2, 1),
        ("answer produced (reference answer)", 1, 0), ("answer produced (reference answer)", 2, 0)]
    mocked = result.per_theorem[0]
    assert (mocked.proved, mocked.answer, mocked.answer_check, mocked.reference, mocked.reference_at_proof) == (
        True, "100", "different", "5", None)


# ----------------------------------------------------------- the constant judged, not the text (issue 87)

# 100 where it is elaborated in the slot's abbrev (`decl_name%` is the slot), 5 in any other declaration
NAMED = f"if decl_name% == `{SLOT} then 100 else 5"


@pytest.mark.slow
@pytest.mark.usefixtures("minilean_in_process")
@pytest.mark.parametrize(("answer", "verdict"), [(NAMED, "different"), ("100", "different"), ("5", "equal")])
def test_burnqed_eval_judges_the_constant_the_proof_compiled_under(tmp_path: Path, answer: str, verdict: str) -> None:
    """`burnqed eval`, whole mode on minilean, the policy (SGLang's API, tests/doubles/fault_server.py) answering
    `answer` with `decide`, which proves `3 ≤ SOL` for 100 and for 5: eval.json's answer check judges the slot's
    constant under the header the proof compiled under (both digests recorded), so the value that reads 5 only outside
    its slot is `different`, as the plain 100 is; the honest 5 is `equal`."""
    index = tmp_path / "index.json"
    index.write_text(TheoremIndex(name="putnam-made-up", theorems=[AT_LEAST_THREE]).model_dump_json(),
                     encoding="utf-8")
    text = completion(answer, "  decide", theorem="theorem putnam_mock : 3 ≤ putnam_mock_solution := by\n")
    out = tmp_path / "eval.json"
    with FaultServer(completions=lambda _: text) as server:
        done = cli("eval", "--theorems", str(index), "--output", str(out), "--budgets", "1", "--set",
                   "policy.backend=sglang", "--set", f"policy.url={server.url}", "--set", "search.mode=whole",
                   "--set", "policy.prompt_format=deepseek-tactic", "--set", "search.num_proofs=1", "--set",
                   "search.min_proofs=1", "--set", "search.timeout_s=30", "--set", "lean.workers=1")
    assert done.returncode == 0, done.stderr
    (mocked,) = json.loads(out.read_text(encoding="utf-8"))["per_theorem"]
    header = judged_header(AT_LEAST_THREE, answer)
    assert (mocked["proved"], mocked["answer"], mocked["answer_check"], mocked["reference"]) == (
        True, answer, verdict, "5")
    assert mocked["proof"] == f"{header}\n\ntheorem putnam_mock : 3 ≤ putnam_mock_solution := by\n  decide\n"
    assert mocked["answer_check_header"] == mocked["proof_header"] == header_digest(header)
    solved = {g["group"]: g["solved"] for g in json.loads(out.read_text(encoding="utf-8"))["tasks"]}
    assert solved == {"answer produced": 1, "answer produced (reference answer)": int(verdict == "equal")}


def test_a_proof_not_assembled_under_its_theorem_is_judged_undecided_with_both_digests() -> None:
    """eval's check takes the header each proof's text holds (`lean.stored_proof.assembled_header`): a proof whose text
    is not its theorem's header with the answer filled (an edited trajectory part) is no `equal`, whatever Lean would
    say of the answer; `3 ≤ SOL` with 5 filled elsewhere is asked about 100."""
    proof = mock_file("5")
    forged = TheoremResult(name="putnam_mock", proved=True, budget_at_proof=1, proof=proof, answer="100",
                           tactics=[f"norm_num [{SLOT}]"], mode=SearchMode.WHOLE, proofs_sampled=1)
    (judged,) = checked([[forged]], [AT_LEAST_THREE]).values()
    stored = judged_header(AT_LEAST_THREE, "5")
    assert (judged.verdict, judged.header_sha256, judged.compiled_sha256) == (
        AnswerCheck.UNDECIDED, header_digest(judged_header(AT_LEAST_THREE, "100")), header_digest(stored))

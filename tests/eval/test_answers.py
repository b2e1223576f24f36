"""An eval of answer-bearing theorems (docs/search.md, "Answers"): the answer beside the proof per theorem, the two
tasks counted apart, both shown in the eval's table, the per-theorem table and the report's proofs; the theorem set's
digest follows the header and the answer."""

from __future__ import annotations

from datetime import UTC, datetime

from burnqed.eval.pass_at import answer_task, build_eval_result
from burnqed.eval.per_theorem import render_theorem_table
from burnqed.eval.rendering import render_eval_table
from burnqed.eval.report_markdown import _proofs_markdown
from burnqed.eval.report_model import ProofRow
from burnqed.eval.result import EvalResult
from burnqed.eval.run import theorem_digest
from burnqed.records import Answer, AnswerTask, Theorem, TheoremResult
from burnqed.text.prompt import SearchMode

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

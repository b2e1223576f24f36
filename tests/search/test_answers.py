"""Answers in search (docs/search.md, "Answers"): made-up problems in PutnamBench's form, whole mode on the strict
Pantograph double at 0.3.4 and at the newest supported version, and on minilean (the embedded Lean,
which elaborates the filled answer and decides the statement under it: a wrong answer fails as in Lean), both in
this process (what the search makes of an answer is the subject, not the pipe), with scripted completions.

An answer left `sorry` never counts; a right answer with its proof counts (answer produced) and so does the
answer-given form; a wrong answer does not; an answer that smuggles `native_decide` or an axiom is refused by the
guard; a completion that states the theorem otherwise, or gives no answer, is refused by name; a repair keeps the
answer of the attempt it revises unless it gives another; step and hybrid mode refuse an open answer before any
work.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from burnqed.config import LeanConfig
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay
from burnqed.lean.soundness import check_answer
from burnqed.policy.base import Sampling
from burnqed.records.enums import SearchMode
from burnqed.records.results import EdgeOutcome
from burnqed.records.theorem import Answer, AnswerTask, Theorem, TheoremIndex
from burnqed.search.answer import AnswerSlot
from burnqed.search.modes import mode_refusal, prove_theorem
from burnqed.search.repair import RepairSettings
from burnqed.search.step import SearchOutcome, StepSettings
from burnqed.search.whole import WholeSettings, prove_whole
from burnqed.text.prompt import PromptFormat
from leankit.recheck import recheck_command
from leankit.version import SUPPORTED, PantographVersion
from minilean.server import SUPPORTED as MINILEAN_SUPPORTED
from tests.doubles.line_servers import DoubleServer, MiniLean
from tests.doubles.policy_double import ScriptedPolicy

DEFAULT_GUARD = TacticGuard.from_config(LeanConfig())
OPEN_GUARD = TacticGuard([], builtin=False)  # as if every rule missed a spelling: only Lean's evidence is left
VERSIONS = ["0.3.4", str(SUPPORTED[-1])]
SLOT = "putnam_easy_solution"
OPEN = Theorem(name="putnam_easy", signature=": 1 + 1 = putnam_easy_solution", docstring="What is 1 + 1",
               header=f"abbrev {SLOT} : ℕ := sorry\n-- 2", source="putnam",
               answer=Answer(name=SLOT, type="ℕ", task=AnswerTask.PRODUCED, reference="2"))
GIVEN = Theorem(name="putnam_easy", signature=": 1 + 1 = ((2) : ℕ)", docstring="What is 1 + 1", source="putnam",
                answer=Answer(name=SLOT, type="ℕ", task=AnswerTask.GIVEN, value="2", reference="2"))
THEOREM = "/-- What is 1 + 1 -/\ntheorem putnam_easy : 1 + 1 = putnam_easy_solution := by\n"
PROOF = "  norm_num [putnam_easy_solution]"


def completion(answer: str, proof: str = PROOF, theorem: str = THEOREM) -> str:
    """What a model writes after an answer prompt's prime (`… := `): the answer, the theorem again, the proof."""
    return f" {answer}\n\n{theorem}{proof}\n```"


def search(version: str, theorem: Theorem, answers: list[str], log: Path, *, guard: TacticGuard = DEFAULT_GUARD,
           fmt: PromptFormat = PromptFormat.DEEPSEEK_WHOLE, repair: RepairSettings | None = None,
           prompts: list[str] | None = None, minilean: bool = False) -> SearchOutcome:
    """Whole mode on the double at `version` (on minilean, the embedded Lean, with `minilean`), the policy answering
    `answers` in turn (the prompts it was sent are added to `prompts`)."""
    stream = iter(answers)
    server = (MiniLean(version=PantographVersion.parse(version)) if minilean
              else DoubleServer(version, log=log))
    settings = WholeSettings(fmt=fmt, sampling=Sampling(n=1, max_new_tokens=256, stop=("```",)),
                             max_proofs=len(answers), timeout_s=30.0, repair=repair or RepairSettings())
    policy = ScriptedPolicy(lambda _: [(next(stream), -0.1)], key=lambda prompt: prompt)
    outcome = asyncio.run(prove_whole(theorem, InProcessReplay(server), policy, settings, guard))
    if prompts is not None:
        prompts.extend(key for call in policy.calls for key in call)
    return outcome


def compiled(log: Path) -> list[str]:
    """The files the double was asked to compile (`frontend.process` with `#print axioms`)."""
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    sent = [json.loads(line.split(" ", 1)[1]) for line in lines if line.startswith("frontend.process ")]
    return [str(payload["file"]) for payload in sent if "#print axioms" in str(payload.get("file"))]


def filled(answer: str, proof: str = PROOF) -> str:
    """The file stored for a proof of OPEN with `answer`: its header with the slot filled, the theorem, the proof."""
    return f"abbrev {SLOT} : ℕ := ({answer})\n-- 2\n\n{THEOREM}{proof}\n"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_right_answer_with_its_proof_counts_and_the_whole_file_is_stored(version: str, tmp_path: Path) -> None:
    prompts: list[str] = []
    outcome = search(version, OPEN, [completion("2")], tmp_path / "log", prompts=prompts)
    result = outcome.result
    assert result.proved and result.answer == "2"
    assert result.proof == filled("2")
    assert compiled(tmp_path / "log") == [f"{filled('2')}\n#print axioms putnam_easy\n\n"
                                          f"{recheck_command('putnam_easy')}"]
    # the prompt showed the slot open, never the reference answer written under it
    assert prompts == [
        "<｜User｜>Complete the following Lean 4 code:\n\n```lean4\nabbrev putnam_easy_solution : ℕ := sorry\n\n"
        f"{THEOREM}  sorry\n```<｜Assistant｜>```lean4\nabbrev putnam_easy_solution : ℕ :="]
    assert [(e.tactic, e.outcome) for e in outcome.edges] == [("norm_num [putnam_easy_solution]", EdgeOutcome.CLOSED)]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_answer_given_form_counts(version: str, tmp_path: Path) -> None:
    outcome = search(version, GIVEN, ["norm_num\n```"], tmp_path / "log", fmt=PromptFormat.PLAIN_WHOLE)
    assert outcome.result.proved and outcome.result.answer == "2"
    assert outcome.result.proof == "/-- What is 1 + 1 -/\ntheorem putnam_easy : 1 + 1 = ((2) : ℕ) := by\n  norm_num\n"


@pytest.mark.parametrize("guard", [DEFAULT_GUARD, OPEN_GUARD], ids=["default-guard", "open-guard"])
@pytest.mark.parametrize("version", VERSIONS)
def test_an_answer_left_sorry_never_counts(version: str, guard: TacticGuard, tmp_path: Path) -> None:
    outcome = search(version, OPEN, [completion("sorry"), completion("(sorry : ℕ) -- a comment")], tmp_path / "log",
                     guard=guard)
    assert not outcome.result.proved and outcome.result.answer is None
    assert [(e.outcome, e.error) for e in outcome.edges] == [(EdgeOutcome.REFUSED, "the answer is left `sorry`")] * 2
    assert compiled(tmp_path / "log") == []  # refused before Lean


@pytest.mark.parametrize("version", [v for v in VERSIONS if PantographVersion.parse(v) not in MINILEAN_SUPPORTED])
def test_a_wrong_answer_does_not_count_beyond_the_versions_minilean_emulates(version: str, tmp_path: Path) -> None:
    # The double cannot evaluate `1 + 1 = 3`: its FAILCOMPILE marker stands for the proof Lean rejects under the
    # wrong answer, at the versions minilean (which decides it: the test below) does not emulate.
    outcome = search(version, OPEN, [completion("3", "  norm_num [putnam_easy_solution]\n  FAILCOMPILE")],
                     tmp_path / "log")
    assert not outcome.result.proved and outcome.result.answer is None
    assert [(e.outcome, e.error) for e in outcome.edges] == [
        (EdgeOutcome.ERROR, "not counted: the proof text does not compile: unsolved goals")]
    assert len(compiled(tmp_path / "log")) == 1 and "abbrev putnam_easy_solution : ℕ := (3)\n" in compiled(
        tmp_path / "log")[0]


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.3.4", str(MINILEAN_SUPPORTED[-1])])
def test_on_minilean_a_wrong_answer_does_not_count_and_a_right_one_does(version: str, tmp_path: Path) -> None:
    """minilean elaborates the filled answer and decides `1 + 1 = putnam_easy_solution` as Lean does."""
    wrong = search(version, OPEN, [completion("3", "  decide")], tmp_path / "log", minilean=True)
    assert not wrong.result.proved and wrong.result.answer is None
    assert [(e.outcome, e.error) for e in wrong.edges] == [
        (EdgeOutcome.ERROR, "not counted: the proof text does not compile: tactic 'decide' proved that the "
         "proposition")]  # … `1 + 1 = putnam_easy_solution` is false: the filled answer 3 was compiled
    right = search(version, OPEN, [completion("2", "  decide")], tmp_path / "log", minilean=True)
    assert right.result.proved and right.result.answer == "2"
    assert right.result.proof == filled("2", "  decide")
    given = search(version, GIVEN, ["decide\n```"], tmp_path / "log", fmt=PromptFormat.PLAIN_WHOLE, minilean=True)
    assert given.result.proved and given.result.answer == "2"
    assert given.result.proof == "/-- What is 1 + 1 -/\ntheorem putnam_easy : 1 + 1 = ((2) : ℕ) := by\n  decide\n"


SMUGGLED = {
    "native_decide": "if (by native_decide : 1 + 1 = 2) then 2 else 0",
    "axiom": ("(by_elab do Lean.addDecl (.axiomDecl {name := `smuggled_two, levelParams := [], type := .const `Nat [], "
              "isUnsafe := false}); return .const `smuggled_two [])"),
}
SMUGGLED_AXIOM = {"native_decide": "Lean.ofReduceBool", "axiom": "smuggled_false"}  # the double's markers' axioms
DENIED_BY = {"native_decide": r"\bnative_decide\b", "axiom": r"\bby_elab\b"}  # the first deny rule each matches


@pytest.mark.parametrize("smuggled", sorted(SMUGGLED))
@pytest.mark.parametrize("version", VERSIONS)
def test_an_answer_that_smuggles_native_decide_or_an_axiom_is_refused_by_the_guard(version: str, smuggled: str,
                                                                                   tmp_path: Path) -> None:
    outcome = search(version, OPEN, [completion(SMUGGLED[smuggled])], tmp_path / "log")
    assert not outcome.result.proved
    (edge,) = outcome.edges
    assert edge.outcome is EdgeOutcome.REFUSED and edge.error is not None
    assert edge.error == f"the answer {SMUGGLED[smuggled]!r} is denied: matches deny pattern {DENIED_BY[smuggled]!r}"
    assert compiled(tmp_path / "log") == []


@pytest.mark.parametrize("smuggled", sorted(SMUGGLED))
def test_with_an_open_guard_a_smuggling_answer_is_stopped_by_the_axioms_check(smuggled: str, tmp_path: Path) -> None:
    outcome = search("0.3.4", OPEN, [completion(SMUGGLED[smuggled])], tmp_path / "log", guard=OPEN_GUARD)
    assert len(compiled(tmp_path / "log")) == 1
    assert not outcome.result.proved
    assert [(e.outcome, e.error) for e in outcome.edges] == [
        (EdgeOutcome.ERROR, f"not counted: the proof depends on axioms beyond Classical.choice, Quot.sound, propext: "
         f"{SMUGGLED_AXIOM[smuggled]}")]


@pytest.mark.parametrize("version", VERSIONS)
def test_no_answer_another_statement_or_no_theorem_is_refused_by_name(version: str, tmp_path: Path) -> None:
    answers = [
        completion(""),  # the slot's `:=`, no value, then the theorem and its proof
        completion("2", "  norm_num", theorem="theorem putnam_easy : 1 + 1 = 2 := by\n"),
        completion("2", "", theorem="-- nothing else\n"),
    ]
    outcome = search(version, OPEN, answers, tmp_path / "log")
    assert [(e.outcome, e.error) for e in outcome.edges] == [
        (EdgeOutcome.REFUSED, "no answer: the completion gives putnam_easy_solution no value"),
        (EdgeOutcome.REFUSED, "the completion states putnam_easy otherwise ('1 + 1 = 2'): only the theorem as given "
         "counts"),
        (EdgeOutcome.REFUSED, "no `theorem putnam_easy … :=` in the completion: no proof to read"),
    ]
    assert not outcome.result.proved and compiled(tmp_path / "log") == []


def test_a_revision_keeps_the_answer_it_revises_unless_it_gives_another(tmp_path: Path) -> None:
    plan = "The answer is 3.\n```lean4\n"
    failed = f"{plan}abbrev {SLOT} : ℕ := 3\n\n{THEOREM}  FAILCOMPILE\n```"
    kept = f"{plan}{THEOREM}{PROOF}\n```"  # its last block restates only the theorem: the answer 3 is kept
    repair = RepairSettings(rounds=1, fmt=PromptFormat.DEEPSEEK_REPAIR_COT)
    prompts: list[str] = []
    outcome = search("0.3.4", OPEN, [failed, kept], tmp_path / "log", fmt=PromptFormat.DEEPSEEK_WHOLE_COT,
                     repair=repair, prompts=prompts)
    assert outcome.result.proved and outcome.result.answer == "3" and outcome.result.revision_at_proof == 1
    assert outcome.result.proof == filled("3")
    repair_prompt = prompts[1]
    assert f"<｜Assistant｜>```lean4\nabbrev {SLOT} : ℕ := (3)\n\n{THEOREM}  FAILCOMPILE\n```<｜end▁of▁sentence｜>" in \
        repair_prompt
    assert "-- 2" not in repair_prompt


def test_step_mode_refuses_an_open_answer_before_any_work() -> None:
    assert mode_refusal(OPEN, SearchMode.STEP) == (
        "its answer putnam_easy_solution is open (to be produced) and step mode searches tactics from a goal that "
        "needs it: search it in whole or hybrid mode")
    assert mode_refusal(OPEN, SearchMode.HYBRID) is None and mode_refusal(OPEN, SearchMode.WHOLE) is None
    assert mode_refusal(GIVEN, SearchMode.STEP) is None
    policy = ScriptedPolicy(lambda _: [("norm_num", -0.1)])
    with pytest.raises(ValueError, match="step mode does not search putnam_easy: its answer putnam_easy_solution"):
        asyncio.run(prove_theorem(OPEN, None, policy, StepSettings(), DEFAULT_GUARD))  # type: ignore[arg-type]
    assert policy.calls == []


def test_the_answer_slot_answers_each_question_in_one_place() -> None:
    """`AnswerSlot` for the theorem with its slot open, the one with the answer given, a filled one and one with no
    slot: the prompt's slot, the start, the reference check, a record's repair, the theorem compiled, the answer
    stored and the one kept once a proof is dropped."""
    filled = OPEN.with_answer("2")
    plain = Theorem(name="plain", statement="1 + 1 = 2")
    rows = [(slot.name, slot.open, slot.started, slot.judged, slot.record_repairable)
            for slot in map(AnswerSlot, (OPEN, GIVEN, filled, plain))]
    assert rows == [(SLOT, True, False, True, False), (None, False, True, False, True),
                    (None, False, True, False, True), (None, False, True, False, True)]

    opened = AnswerSlot(OPEN)
    assert opened.stored("3") == "3" and opened.stored(None) is None
    assert opened.dropped("3") is None
    assert opened.compiled(None, DEFAULT_GUARD) == "the result gives no answer for the theorem's open answer slot"
    assert opened.compiled("sorry", DEFAULT_GUARD) == "its answer is refused: the answer is left `sorry`"
    assert opened.compiled(" 2 ", DEFAULT_GUARD) == filled
    assert filled.header == f"abbrev {SLOT} : ℕ := (2)\n-- 2"

    for theorem, held in ((GIVEN, "2"), (filled, "2"), (plain, None)):
        slot = AnswerSlot(theorem)
        assert slot.stored("3") == held and slot.stored(None) == held
        assert slot.dropped("3") == "3" and slot.dropped(None) is None
        assert slot.compiled(None, DEFAULT_GUARD) is theorem and slot.compiled("sorry", DEFAULT_GUARD) is theorem


def test_the_eval_lists_an_open_answer_as_not_evaluated_in_step_mode() -> None:
    from burnqed.eval.identity import evaluable

    plain = Theorem(name="plain", statement="1 + 1 = 2")
    index = TheoremIndex(name="putnam-made-up", theorems=[OPEN, plain])
    stepped = evaluable(index, SearchMode.STEP)
    assert [t.name for t in stepped.theorems] == ["plain"]
    assert [(s.name, s.file, s.line, s.reason, s.detail) for s in stepped.skipped] == [
        ("putnam_easy", "putnam", None, "open_answer", mode_refusal(OPEN, SearchMode.STEP))]
    assert evaluable(index, SearchMode.WHOLE) is index


def test_an_attempts_proof_keeps_its_have_blocks_whole_and_a_statement_is_read_exactly() -> None:
    """The proof read from an answer completion is its top-level tactics, a `have … := by` block whole (as whole mode
    reads proofs); a restated theorem without its type, or with another, is refused with what it said."""
    from burnqed.search.answer import read_attempt, statement_problem

    raw = completion("2", proof="  have h : 1 + 1 = 2 := by\n    norm_num\n  simpa [putnam_easy_solution] using h")
    attempt = read_attempt(OPEN, PromptFormat.DEEPSEEK_WHOLE, raw, DEFAULT_GUARD)
    assert attempt.refusal is None
    assert attempt.tactics == ["have h : 1 + 1 = 2 := by\n  norm_num", "simpa [putnam_easy_solution] using h"]
    assert statement_problem(OPEN, "1 + 1 = putnam_easy_solution") == (
        "the completion's `theorem putnam_easy` has no `: TYPE`: '1 + 1 = putnam_easy_solution'")
    longer = ": 1 + 1 = putnam_easy_solution + " + " + ".join(["0"] * 60)
    assert statement_problem(OPEN, longer) == (
        "the completion states putnam_easy otherwise ('1 + 1 = putnam_easy_solution + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 "
        "+ 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0 + 0'): only the theorem as given counts")


@pytest.mark.parametrize("value", ["", "  \n\t"])
def test_an_empty_answer_is_refused_by_the_answer_rule_itself(value: str) -> None:
    # The rule's own refusal, not the deny list's: an open guard has nothing to say about an empty value.
    verdict = check_answer(value, OPEN_GUARD)
    assert (verdict.ok, verdict.reason) == (False, "empty answer")
    assert check_answer(" 2 ", OPEN_GUARD).ok

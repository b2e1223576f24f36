"""Answers in search: a theorem whose answer slot is open (`records.Theorem.answer_open`, PutnamBench's task "answer
produced") is proved with the answer a completion gives it (docs/search.md, "Answers").

    attempt = read_attempt(theorem, fmt, completion.text, guard)           # whole, hybrid; a repair: kept=its answer
    attempt.refusal          # why the completion is no attempt (no answer, no theorem, another statement, …)
    attempt.theorem          # theorem.with_answer(attempt.answer): what is then compiled and stored
    refused = mode_refusal(theorem, mode)           # step: one line, before any work; whole, hybrid: None

The completion writes the whole file from the slot on (`text.prompt.answer_prime`): its answer is the value it gives
the slot, its proof the body of its `theorem NAME`, whose statement must be the theorem's up to renaming
(`leankit.normal_form`). Helpers it restates are not read: the file compiled is the theorem's own header, the slot
filled, then its declaration and the proof.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from burnqed.lean.guard import TacticGuard
from burnqed.lean.soundness import check_answer
from burnqed.records.enums import SearchMode
from burnqed.records.replies import first_line
from burnqed.records.theorem import Theorem, split_signature
from burnqed.text.completion import answer_file, read_answer_file, split_proof
from burnqed.text.prompt import PromptFormat, answer_prime
from leankit.normal_form import statement_normal_form


@dataclass(frozen=True, slots=True)
class AnswerAttempt:
    """One completion of an answer prompt, read: the answer and the proof's top-level tactics, the theorem filled with
    the answer, or why it is no attempt."""

    answer: str | None
    tactics: list[str] = field(default_factory=list)
    theorem: Theorem | None = None  # the theorem with its slot filled; None when refused
    refusal: str | None = None


def read_attempt(theorem: Theorem, fmt: PromptFormat, raw: str, guard: TacticGuard, *,
                 kept: str | None = None) -> AnswerAttempt:
    """The attempt a completion `raw` (in whole or repair format `fmt`) makes at `theorem` (whose answer is open).
    `kept`: the answer of the attempt a repair revises, used when the revision gives none (docs/search.md,
    "Answers")."""
    assert theorem.answer is not None and theorem.header is not None and theorem.statement is not None
    slot = theorem.answer.name
    read = read_answer_file(answer_file(fmt, raw, answer_prime(theorem.header, slot)), slot, theorem.name)
    answer = read.answer or kept
    tactics = split_proof(read.body, split_have=False)
    if answer is None:
        return AnswerAttempt(None, tactics, refusal=f"no answer: the completion gives {slot} no value")
    if read.signature is None:
        return AnswerAttempt(answer, tactics, refusal=f"no `theorem {theorem.name} … :=` in the completion: no "
                             "proof to read")
    problem = statement_problem(theorem, read.signature)
    if problem is not None:
        return AnswerAttempt(answer, tactics, refusal=problem)
    verdict = check_answer(answer, guard)
    if not verdict.ok:
        return AnswerAttempt(answer, tactics, refusal=verdict.reason)
    return AnswerAttempt(answer, tactics, theorem.with_answer(answer))


def statement_problem(theorem: Theorem, signature: str) -> str | None:
    """Why the `signature` a completion declares its theorem with is not the theorem's statement (compared up to
    renaming, `leankit.normal_form.statement_normal_form`); None when it is."""
    assert theorem.statement is not None
    split = split_signature(signature)
    if split is None:
        return f"the completion's `theorem {theorem.name}` has no `: TYPE`: {first_line(signature)!r}"
    binders, type_ = split
    stated = f"∀ {binders}, {type_}" if binders else type_
    if statement_normal_form(stated) != statement_normal_form(theorem.statement):
        return (f"the completion states {theorem.name} otherwise ({' '.join(stated.split())[:120]!r}): only the "
                "theorem as given counts")
    return None


def mode_refusal(theorem: Theorem, mode: SearchMode) -> str | None:
    """Why `mode` does not search `theorem` (one line, said before any work), or None. Step and sketch modes refuse a
    theorem whose answer is open: they sample single tactics or a sketch from a started goal, which needs the answer,
    and neither carries one; whole and hybrid mode read the answer from each completion of the answer prompt
    (docs/search.md, "Answers")."""
    if mode not in (SearchMode.STEP, SearchMode.SKETCH) or not theorem.answer_open:
        return None
    assert theorem.answer is not None
    what = "tactics" if mode is SearchMode.STEP else "a sketch"
    return (f"its answer {theorem.answer.name} is open (to be produced) and {mode} mode searches {what} from a goal "
            "that needs it: search it in whole or hybrid mode")

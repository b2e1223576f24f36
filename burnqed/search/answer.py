"""Answers in search: a theorem whose answer slot is open (`AnswerSlot`, PutnamBench's task "answer produced") is
proved with the answer a completion gives it (docs/search.md, "Answers").

    slot = AnswerSlot(theorem)     # where its slot stands, decided here once for every module (below)
    attempt = read_attempt(theorem, fmt, completion.text, guard)           # whole, hybrid; a repair: kept=its answer
    attempt.refusal          # why the completion is no attempt (no answer, no theorem, another statement, …)
    attempt.theorem          # theorem.with_answer(attempt.answer): what is then compiled and stored
    refused = open_answer_refusal(theorem, mode, "tactics")   # step, sketch (Mode.refusal): one line, before any work

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
from leankit.normal_form import statement_normal_form, tokenize


@dataclass(frozen=True, slots=True)
class AnswerSlot:
    """Where `theorem`'s answer slot stands: the one place that decides how a theorem whose slot is open (task *answer
    produced*, no value yet: `records.theorem.Theorem.answer_open`) is treated otherwise than any theorem
    (docs/search.md, "Answers"). A theorem without a slot, with its answer given, or filled by a proof has no open
    slot.

        slot = AnswerSlot(theorem)
        slot.name                     # the open slot the whole and repair prompts open, else None
        slot.open                     # prompts are answer prompts and completions are read as files
        slot.started                  # the theorem is started before its search (never with an open slot)
        slot.judged                   # a proof's answer is judged against the reference (eval, the RL reward)
        slot.record_repairable        # a failed proof's record is enough for its repair prompt
        slot.compiled(answer, guard)  # the theorem a proof giving `answer` is compiled as, or why none
        slot.stored(found)            # the answer a result records
        slot.dropped(recorded)        # the answer a result keeps once its proof no longer counts
    """

    theorem: Theorem

    @property
    def name(self) -> str | None:
        """The open slot's name, which the whole prompt (`text.prompt.build_statement_prompt`), the repair prompt and
        hybrid's open root show open; None when the theorem has no open slot (its prompts are the plain ones)."""
        answer = self.theorem.answer
        if answer is None or not self.theorem.answer_open:
            return None
        return answer.name

    @property
    def open(self) -> bool:
        """The slot is open: the theorem's prompts are answer prompts (the file, slot `:= sorry` and all) and each
        completion is read as a file (`read_attempt`), its answer with its proof."""
        return self.name is not None

    @property
    def started(self) -> bool:
        """The theorem is started before its search (a goal to replay a failed proof from, hybrid's plain root): not
        with an open slot, whose `sorry` would be Pantograph's coupled goals; each answer's theorem is started apart."""
        return self.name is None

    @property
    def judged(self) -> bool:
        """A proof's answer is judged against the benchmark's reference (`search.answer_check`) before it counts as
        the answer: only an open slot's, which the proof wrote; a given answer is the statement's own."""
        return self.name is not None

    @property
    def record_repairable(self) -> bool:
        """A failed proof's trajectory record is all its repair prompt needs: not with an open slot, whose repair
        prompt shows the failed attempt's answer, which the record does not hold."""
        return self.name is None

    def compiled(self, answer: str | None, guard: TacticGuard) -> Theorem | str:
        """The theorem a proof that gives `answer` is compiled as (its header the one compiled under): the theorem
        itself without an open slot (`answer` unread); with one, the theorem with `answer` filled in
        (`records.theorem.Theorem.with_answer`), or why there is none: no answer, or one `lean.soundness.check_answer`
        refuses."""
        if self.name is None:
            return self.theorem
        if answer is None:
            return "the result gives no answer for the theorem's open answer slot"
        answered = check_answer(answer, guard)
        if not answered.ok:
            return f"its answer is refused: {answered.reason}"
        return self.theorem.with_answer(answer)

    def stored(self, found: str | None) -> str | None:
        """The answer a result records: `found`, the counted (or shown) proof's, for an open slot; else the answer the
        theorem holds (the given one, a filled one's value, None without a slot)."""
        if self.name is not None:
            return found
        answer = self.theorem.answer
        return answer.value if answer is not None else None

    def dropped(self, recorded: str | None) -> str | None:
        """The answer a result keeps once its proof no longer counts (eval's recheck): None for an open slot, whose
        answer was the proof's; else `recorded`, the one the result holds."""
        return None if self.name is not None else recorded


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
    "Answers"). A completion over the cap (`TacticGuard.over_cap`) is refused unread."""
    assert theorem.answer is not None and theorem.header is not None and theorem.statement is not None
    over = guard.over_cap(raw)
    if over is not None:
        return AnswerAttempt(None, refusal=f"the completion has {over}")
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
    renaming, `leankit.normal_form.statement_normal_form`); None when it is. A statement with more than half again
    the theorem's tokens and 64 more is another without being normalised: the normal form's parentheses cost more
    than linear time, so only text of about the trusted statement's size reaches it."""
    assert theorem.statement is not None
    split = split_signature(signature)
    if split is None:
        return f"the completion's `theorem {theorem.name}` has no `: TYPE`: {first_line(signature)!r}"
    binders, type_ = split
    stated = f"∀ {binders}, {type_}" if binders else type_
    size = len(tokenize(theorem.statement))
    if len(tokenize(stated)) > size + size // 2 + 64 or (
            statement_normal_form(stated) != statement_normal_form(theorem.statement)):
        return (f"the completion states {theorem.name} otherwise ({' '.join(stated.split())[:120]!r}): only the "
                "theorem as given counts")
    return None


def open_answer_refusal(theorem: Theorem, mode: SearchMode, what: str) -> str | None:
    """Why `mode`, which samples `what` (tactics, a sketch) from a started goal, does not search `theorem` (one line,
    said before any work), or None: a goal needs the answer, so a theorem whose answer is open is refused (step and
    sketch mode; whole and hybrid mode read the answer from each completion of the answer prompt: docs/search.md,
    "Answers")."""
    slot = AnswerSlot(theorem).name
    if slot is None:
        return None
    return (f"its answer {slot} is open (to be produced) and {mode} mode searches {what} from a goal "
            "that needs it: search it in whole or hybrid mode")

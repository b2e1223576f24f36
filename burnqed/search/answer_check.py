"""A produced answer judged against the benchmark's reference answer (docs/search.md, "Answers: is it the reference
answer?"): Lean proves `((VALUE) : T) = ((REFERENCE) : T)` with a fixed tactic list (`equal`), or `≠` (`different`),
or neither (`undecided`: both values kept for a person to judge); a theorem with no reference is `no reference`.

    judged = await judge_answer(lean, theorem, "100", guard)   # theorem: the index's, its answer slot open
    judged.verdict           # AnswerCheck.DIFFERENT; only AnswerCheck.EQUAL counts "with the reference answer"
    judged.answer, judged.reference, judged.reason           # both values side by side, and why
    check_file(theorem, "100", "5", "≠")                     # the file compiled for one side (pure)

Each side is compiled through the soundness compile path proofs take (`soundness.check_proof_text`: the compile, the
`#print axioms` check and the kernel recheck), under the theorem's header with the slot dropped
(`leankit.answer.drop_slot`, so its `open`s hold and the answer cannot name the slot). The answer is model text: it
passes `soundness.check_answer` (one term as Lean reads it, `leankit.commands.term_problem`: brackets that pair, no
command keyword; its comments are dropped) before Lean sees it, and so must the reference (an index is input too).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from burnqed.lean.env import LeanEnv
from burnqed.lean.guard import TacticGuard
from burnqed.lean.soundness import Verdict, check_answer, check_proof_text
from burnqed.records.replies import first_line
from burnqed.records.theorem import Theorem
from burnqed.search.answer import AnswerSlot
from leankit.answer import drop_slot
from leankit.text import mask_comments

CHECK_NAME = "burnqed_answer_check"  # the theorem each side declares (its unit must declare it, as a proof's must)
# The fixed tactic lists, tried in order inside one `first`: an equality closed by computation, by normalisation, or
# pointwise (sets by `ext`, functions by `funext`); a difference by deciding it or normalising it to `False`.
EQUAL_TACTICS: tuple[str, ...] = ("rfl", "decide", "norm_num", "simp", "(ext <;> simp)", "(funext <;> simp)")
DIFFERENT_TACTICS: tuple[str, ...] = ("decide", "norm_num", "simp")
Relation = Literal["=", "≠"]


class AnswerCheck(StrEnum):
    """What the check found: only `equal` counts a produced answer as the reference answer."""

    EQUAL = "equal"  # Lean proved VALUE = REFERENCE
    DIFFERENT = "different"  # Lean proved VALUE ≠ REFERENCE
    UNDECIDED = "undecided"  # neither list closed either side (or a side was refused): for a person to judge
    NO_REFERENCE = "no reference"  # the benchmark records no reference answer: nothing to judge against


@dataclass(frozen=True, slots=True)
class AnswerJudgement:
    """One answer judged: the verdict, both values side by side, and why (the side Lean proved, or each side's
    failure)."""

    verdict: AnswerCheck
    answer: str
    reference: str | None
    reason: str
    answered: bool = True  # every side sent to Lean came back with Lean's verdict (not a timeout or a crash)

    @property
    def equal(self) -> bool:
        return self.verdict is AnswerCheck.EQUAL


def check_statement(answer: str, reference: str, type_: str, relation: Relation) -> str:
    """`((VALUE) : T) = ((REFERENCE) : T)` (or `≠`): both sides ascribed the slot's type, each in its own parentheses;
    a value of several lines keeps its lines, indented under the statement."""
    return f"{_ascribed(answer, type_)} {relation} {_ascribed(reference, type_)}"


def _ascribed(value: str, type_: str) -> str:
    lines = mask_comments(value).strip().split("\n")  # a comment would swallow what follows it on the statement's line
    return "((" + "\n      ".join(line.rstrip() for line in lines) + f") : {type_})"


def check_file(theorem: Theorem, answer: str, reference: str, relation: Relation) -> str:
    """The file one side of the check compiles: the theorem's header without its slot, then `theorem CHECK_NAME :
    STATEMENT := by first | …` with the side's fixed tactic list. ValueError when `theorem` has no open slot."""
    if not AnswerSlot(theorem).judged or theorem.answer is None or theorem.header is None:
        raise ValueError(f"theorem {theorem.name} has no open answer slot: there is no produced answer to check")
    header = drop_slot(theorem.header, theorem.answer.name)
    tactics = EQUAL_TACTICS if relation == "=" else DIFFERENT_TACTICS
    statement = check_statement(answer, reference, theorem.answer.type, relation)
    body = "".join(f"\n  | {tactic}" for tactic in tactics)
    head = f"{header.rstrip()}\n\n" if header else ""
    return f"{head}theorem {CHECK_NAME} : {statement} := by\n  first{body}\n"


def verdict_of(equal: Verdict | None, different: Verdict | None) -> AnswerCheck:
    """The rule: `equal` when the `=` side verified, else `different` when the `≠` side did, else `undecided` (a side
    not compiled, None, proves nothing)."""
    if equal is not None and equal.verified:
        return AnswerCheck.EQUAL
    if different is not None and different.verified:
        return AnswerCheck.DIFFERENT
    return AnswerCheck.UNDECIDED


async def judge_answer(lean: LeanEnv, theorem: Theorem, answer: str, guard: TacticGuard) -> AnswerJudgement:
    """Judge `answer`, which a proof gave `theorem`'s open slot, against its reference (module docstring): `=` first,
    `≠` only when `=` did not verify. A Lean that cannot start raises (`LeanStartError`, as `check_proof_text`
    does); any other failure is a side that proved nothing. ValueError when `theorem` has no open slot."""
    if not AnswerSlot(theorem).judged or theorem.answer is None:
        raise ValueError(f"theorem {theorem.name} has no open answer slot: there is no produced answer to check")
    reference = theorem.answer.reference
    if reference is None or not reference.strip():
        return AnswerJudgement(AnswerCheck.NO_REFERENCE, answer, None,
                               f"the benchmark records no reference answer for {theorem.answer.name}")
    for what, value in (("answer", answer), ("reference", reference)):
        refused = check_answer(value, guard)
        if not refused.ok:
            return AnswerJudgement(AnswerCheck.UNDECIDED, answer, reference,
                                   f"the {what} is not checked: {refused.reason}")
    header = drop_slot(theorem.header or "", theorem.answer.name)  # the check file's header: the index's, its slot out
    equal = await check_proof_text(lean, CHECK_NAME, check_file(theorem, answer, reference, "="), index_header=header)
    if equal.verified:
        return AnswerJudgement(AnswerCheck.EQUAL, answer, reference, "Lean proved the answer equal to the reference")
    different = await check_proof_text(lean, CHECK_NAME, check_file(theorem, answer, reference, "≠"),
                                       index_header=header)
    verdict = verdict_of(equal, different)
    if verdict is AnswerCheck.DIFFERENT:
        return AnswerJudgement(verdict, answer, reference, "Lean proved the answer different from the reference")
    return AnswerJudgement(verdict, answer, reference,
                           f"neither side proved: `=`: {first_line(equal.reason)}; `≠`: {first_line(different.reason)}",
                           answered=equal.compiled and different.compiled)

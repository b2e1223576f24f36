"""A produced answer judged against the benchmark's reference answer (docs/search.md, "Answers: is it the reference
answer?"): Lean proves `(SLOT : T) = ((REFERENCE) : T)` with a fixed tactic list (`equal`), or `≠` (`different`),
or neither (`undecided`: both values kept for a person to judge); a theorem with no reference is `no reference`.

    judged = await judge_answer(lean, theorem, "100", guard, compiled_under=filled.header)   # the proof's header
    judged.verdict           # AnswerCheck.DIFFERENT; only AnswerCheck.EQUAL counts "with the reference answer"
    judged.answer, judged.reference, judged.reason           # both values side by side, and why
    judged.header_sha256, judged.compiled_sha256             # the header judged, the one the proof compiled under
    check_file(theorem, "100", "≠")                          # the file compiled for one side (pure)

The value is elaborated once, where it counts: each side compiles the header the proof compiled under, byte for byte
(the theorem's header with its slot filled, `records.theorem.Theorem.with_answer`), then a theorem about the slot's
constant, never the value's text a second time (in another declaration or another layout a text can read otherwise:
`decl_name%` names the declaration being elaborated). A header that is not the proof's (`compiled_under`) is
`undecided`, both digests named. Each side goes through the soundness compile path proofs take
(`soundness.check_proof_text`: the shape pinned to the index's header with the slot filled, the `#print axioms` check,
the kernel recheck). The answer is model text: it passes `soundness.check_answer` (one term as Lean reads it,
`leankit.commands.term_problem`: brackets that pair, no command keyword) before Lean sees it, and so must the
reference (an index is input too), which must not name the slot (it would be the answer itself).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from burnqed.lean.env import LeanEnv
from burnqed.lean.guard import TacticGuard
from burnqed.lean.soundness import Verdict, check_answer, check_proof_text
from burnqed.records.replies import first_line
from burnqed.records.theorem import Answer, Theorem
from burnqed.search.answer import AnswerSlot
from leankit.answer import uses_name
from leankit.text import mask_comments

CHECK_NAME = "burnqed_answer_check"  # the theorem each side declares (its unit must declare it, as a proof's must)
# The fixed tactic lists, tried in order inside one `first`, after the slot's constant is unfolded to the value it was
# elaborated to (`try`: a tactic below unfolds it too): an equality closed by computation, by normalisation, or
# pointwise (sets by `ext`, functions by `funext`); a difference by deciding it or normalising it to `False`.
EQUAL_TACTICS: tuple[str, ...] = ("rfl", "decide", "norm_num", "simp", "(ext <;> simp)", "(funext <;> simp)")
DIFFERENT_TACTICS: tuple[str, ...] = ("decide", "norm_num", "simp")
Relation = Literal["=", "≠"]


class AnswerCheck(StrEnum):
    """What the check found: only `equal` counts a produced answer as the reference answer."""

    EQUAL = "equal"  # Lean proved SLOT = REFERENCE, the slot filled with the answer
    DIFFERENT = "different"  # Lean proved SLOT ≠ REFERENCE
    UNDECIDED = "undecided"  # neither list closed either side (or a side was refused): for a person to judge
    NO_REFERENCE = "no reference"  # the benchmark records no reference answer: nothing to judge against


@dataclass(frozen=True, slots=True)
class AnswerJudgement:
    """One answer judged: the verdict, both values side by side, why (the side Lean proved, or each side's failure),
    and the sha256 of the header judged under and of the header the proof compiled under (None where no header was
    judged: no reference, or a value refused before Lean)."""

    verdict: AnswerCheck
    answer: str
    reference: str | None
    reason: str
    answered: bool = True  # every side sent to Lean came back with Lean's verdict (not a timeout or a crash)
    header_sha256: str | None = None  # the header the check compiled (`judged_header`)
    compiled_sha256: str | None = None  # the header the proof compiled under (`judge_answer`'s `compiled_under`)

    @property
    def equal(self) -> bool:
        return self.verdict is AnswerCheck.EQUAL


def header_digest(header: str) -> str:
    """The sha256 (hex) of a header as a compiled file holds it (trailing blanks gone, as `assemble_proof` writes
    it)."""
    return hashlib.sha256(header.rstrip().encode("utf-8")).hexdigest()


def _open_slot(theorem: Theorem) -> Answer:
    """`theorem`'s open answer slot (`search.answer.AnswerSlot.judged`); ValueError when it has none."""
    if not AnswerSlot(theorem).judged or theorem.answer is None:
        raise ValueError(f"theorem {theorem.name} has no open answer slot: there is no produced answer to check")
    return theorem.answer


def judged_header(theorem: Theorem, answer: str) -> str:
    """The header both sides compile: `theorem`'s, its open slot filled with `answer` (`Theorem.with_answer`, what a
    proof giving `answer` is compiled as), trailing blanks gone. ValueError when `theorem` has no open slot or
    `answer` is no single term."""
    _open_slot(theorem)
    return (theorem.with_answer(answer).header or "").rstrip()


def check_statement(slot: str, reference: str, type_: str, relation: Relation) -> str:
    """`(SLOT : T) = ((REFERENCE) : T)` (or `≠`): the slot's constant and the reference, both ascribed the slot's type;
    a reference of several lines keeps its lines, indented under the statement."""
    return f"({slot} : {type_}) {relation} {_ascribed(reference, type_)}"


def _ascribed(value: str, type_: str) -> str:
    lines = mask_comments(value).strip().split("\n")  # a comment would swallow what follows it on the statement's line
    return "((" + "\n      ".join(line.rstrip() for line in lines) + f") : {type_})"


def check_file(theorem: Theorem, answer: str, relation: Relation) -> str:
    """The file one side of the check compiles: `judged_header(theorem, answer)`, then `theorem CHECK_NAME : STATEMENT
    := by`, the slot unfolded (`try unfold SLOT`) and `first | …` with the side's fixed tactic list. ValueError when
    `theorem` has no open slot or no reference, or `answer` is no single term."""
    header = judged_header(theorem, answer)
    slot = _open_slot(theorem)
    if slot.reference is None:
        raise ValueError(f"theorem {theorem.name} records no reference answer to check against")
    tactics = EQUAL_TACTICS if relation == "=" else DIFFERENT_TACTICS
    statement = check_statement(slot.name, slot.reference, slot.type, relation)
    body = "".join(f"\n  | {tactic}" for tactic in tactics)
    head = f"{header}\n\n" if header else ""
    return f"{head}theorem {CHECK_NAME} : {statement} := by\n  try unfold {slot.name}\n  first{body}\n"


def verdict_of(equal: Verdict | None, different: Verdict | None) -> AnswerCheck:
    """The rule: `equal` when the `=` side verified, else `different` when the `≠` side did, else `undecided` (a side
    not compiled, None, proves nothing)."""
    if equal is not None and equal.verified:
        return AnswerCheck.EQUAL
    if different is not None and different.verified:
        return AnswerCheck.DIFFERENT
    return AnswerCheck.UNDECIDED


def _refusal(slot: str, answer: str, reference: str, guard: TacticGuard) -> str | None:
    """Why the pair is not sent to Lean: a value `soundness.check_answer` refuses, or a reference naming the slot."""
    for what, value in (("answer", answer), ("reference", reference)):
        refused = check_answer(value, guard)
        if not refused.ok:
            return f"the {what} is not checked: {refused.reason}"
    named = uses_name(reference, slot)
    return f"the reference is not checked: it names the answer slot {slot} (it would be the answer)" if named else None


async def judge_answer(lean: LeanEnv, theorem: Theorem, answer: str, guard: TacticGuard, *,
                       compiled_under: str) -> AnswerJudgement:
    """Judge `answer`, which a proof gave `theorem`'s open slot, against its reference (module docstring): `=` first,
    `≠` only when `=` did not verify. `compiled_under`: the header the proof compiled under; the check compiles the
    same, else it is `undecided`. A Lean that cannot start raises (`LeanStartError`, as `check_proof_text` does);
    any other failure is a side that proved nothing. ValueError when `theorem` has no open slot."""
    slot = _open_slot(theorem)
    reference = slot.reference
    if reference is None or not reference.strip():
        return AnswerJudgement(AnswerCheck.NO_REFERENCE, answer, None,
                               f"the benchmark records no reference answer for {slot.name}")
    refused = _refusal(slot.name, answer, reference, guard)
    if refused is not None:
        return AnswerJudgement(AnswerCheck.UNDECIDED, answer, reference, refused)
    header = judged_header(theorem, answer)
    judged, compiled = header_digest(header), header_digest(compiled_under)

    def judgement(verdict: AnswerCheck, reason: str, answered: bool = True) -> AnswerJudgement:
        return AnswerJudgement(verdict, answer, reference, reason, answered, judged, compiled)

    if header != compiled_under.rstrip():
        return judgement(AnswerCheck.UNDECIDED, f"the header judged (sha256 {judged}) is not the header the proof "
                         f"compiled under (sha256 {compiled})")
    sides: dict[Relation, Verdict] = {}
    for relation in ("=", "≠"):
        sides[relation] = await check_proof_text(lean, CHECK_NAME, check_file(theorem, answer, relation),
                                                 index_header=theorem.header, header=header)
        if sides[relation].verified:
            break
    verdict = verdict_of(sides.get("="), sides.get("≠"))
    if verdict is AnswerCheck.EQUAL:
        return judgement(verdict, "Lean proved the answer equal to the reference")
    if verdict is AnswerCheck.DIFFERENT:
        return judgement(verdict, "Lean proved the answer different from the reference")
    equal, different = sides["="], sides["≠"]
    return judgement(verdict, f"neither side proved: `=`: {first_line(equal.reason)}; `≠`: "
                     f"{first_line(different.reason)}", answered=equal.compiled and different.compiled)

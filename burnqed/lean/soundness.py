"""What counts as a proof (docs/lean.md, "Soundness"). The search calls `verify_proof` before it counts anything.

    verdict = await verify_proof(lean, theorem, tactics, final, guard, index_header=index.header)
    verdict.ok, verdict.compiled, verdict.reason                         # ok and compiled: a verified proof
    verdict = await check_proof_text(lean, name, proof, index_header=index.header, header=filled.header)
    verdict = check_answer(value, guard)                                 # an answer a completion gave its slot
    verdict = check_header(index.header, filled.header)                 # a filled header's shape, before a start
    verdict = check_lemmas(lemmas, theorem, guard)                      # a file's lemmas (`FileLemma`), before Lean
    verdict = await check_proof_text(lean, name, proof, index_header=index.header, lemmas=lemmas)

A proof counts only on positive evidence: the final state closed with no sorry flag, no denied tactic on the path, a
complete root term, then the compile (its shape pinned: the index header's commands, the file's lemmas, the theorem,
`#print axioms` of each lemma and of NAME, the recheck, one unit each; each lemma and NAME declared, no axiom beyond
the standard three, the kernel recheck's report), each rule a pure function, Lean asked only when the cheap ones
pass. A Lean failure is a failed verdict, except `LeanStatesLostError` and `LeanStartError`, which are raised.
`compile=False` stops before the compile.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from burnqed.errors import LeanError, LeanStartError, LeanStatesLostError
from burnqed.lean.declared_lemmas import LEMMA_PREFIX, FileLemma, lemma_block
from burnqed.lean.env import LeanEnv
from burnqed.lean.guard import TacticGuard
from burnqed.lean.start import START_FORM
from burnqed.records.replies import CompileResult, CompileUnit, RootInfo, TacticResult, first_line
from burnqed.records.theorem import Theorem
from burnqed.text.completion import join_tactics
from leankit.answer import find_slots
from leankit.commands import command_starts, term_problem, tokens
from leankit.recheck import recheck_command
from leankit.statements import append_code
from leankit.text import mask_comments, read_as_lean

ALLOWED_AXIOMS: frozenset[str] = frozenset({"propext", "Classical.choice", "Quot.sound"})
_SORRY = re.compile(r"(?<![\w'.])sorry(?![\w'!?])")
_IMPORT_LINE = re.compile(r"^[ \t]*import\b.*(?:\n|$)", re.MULTILINE)
_ENDS_WITH_IN = re.compile(r"(?<![\w'.])in\s*$")  # `open X in` / `set_option … in`: one command with the next
# Lean's `#print axioms` report ('NAME' for the Lean versions Pantograph 0.2.25-0.3.4 build on; `NAME` later).
# The recheck's one information message (`leankit.recheck.RECHECK_REPORT`), read back.
_RECHECK_REPORT = re.compile(r"burnqed kernel recheck: (?P<name>.+) ok \((?P<count>[1-9][0-9]*) constants\)")
_AXIOMS_REPORT = re.compile(
    r"['`](?P<name>.+?)['`] (?:depends on axioms: \[(?P<axioms>[^\]]*)\]|does not depend on any axioms)\s*",
    re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a proof counts, why not, and the proof text that was (or would be) checked.

    `ok` with `compiled` is a verified proof; `ok` without `compiled` is an unverified one (the compile was
    skipped): it passed the step-level rules only.
    """

    ok: bool
    reason: str = ""
    proof: str | None = None
    compiled: bool = False
    result: CompileResult | None = None  # the compile's reply, when the proof was compiled (repair reads its messages)

    @property
    def verified(self) -> bool:
        return self.ok and self.compiled


@dataclass(frozen=True, slots=True)
class CompileText:
    """What `frontend.process` gets for one proof, and the shape Lean must report for it: where each unit starts."""

    name: str
    text: str
    print_start: int  # UTF-8 byte offset of `#print axioms NAME`
    recheck_start: int  # UTF-8 byte offset of the kernel recheck command (`recheck_command`)
    # UTF-8 byte offsets where Lean's units must start, one each: the index header's commands, the lemmas, the
    # theorem, `#print axioms` of each lemma and of NAME, the recheck (the first unit may start at 0: Lean's first
    # command position is the file's start).
    unit_starts: tuple[int, ...]
    problem: str | None = None  # why the text has no pinned shape (not the index's header): refused before Lean
    # the file's lemmas (`FileLemma.name`), in order: one unit each before the theorem, one `#print axioms` each
    # before NAME's
    lemmas: tuple[str, ...] = ()


def check_lemmas(lemmas: Sequence[FileLemma], theorem: Theorem, guard: TacticGuard) -> Verdict:
    """Rule 2 for a file's lemmas, before Lean (docs/lean.md, "One file"): names burnqed's own, numbered 1, 2, … in
    the file's order, none the theorem's or a name the header has; each statement bounded (`TacticGuard.over_cap`),
    not `sorry`, one binder list and type as Lean reads it (`term_problem`: no command keyword, brackets paired), not
    the theorem's statement restated (as written, blanks aside), nothing the guard refuses; each proof's tactics as
    the theorem's (`check_path`)."""
    header_names = {token.text for token in tokens(mask_comments(theorem.header or ""))}
    for number, lemma in enumerate(lemmas, start=1):
        if lemma.index != number:
            return Verdict(False, f"lemma {lemma.name} stands where {LEMMA_PREFIX}{number} must: the lemmas are "
                           "numbered 1, 2, … in the file's order")
        if lemma.name == theorem.name or lemma.name in header_names:
            return Verdict(False, f"lemma {lemma.name}'s name collides with a name the "
                           f"{'theorem' if lemma.name == theorem.name else 'header'} has")
        reason = _statement_refusal(lemma.statement, theorem, guard)
        if reason is None:
            path = check_path(lemma.tactics, guard)
            reason = None if path.ok else f"its proof: {path.reason}"
        if reason is not None:
            return Verdict(False, f"lemma {lemma.name} is refused: {reason}")
    return Verdict(True)


def _statement_refusal(statement: str, theorem: Theorem, guard: TacticGuard) -> str | None:
    """Why a lemma's statement (model text) cannot stand in the file, or None."""
    over = guard.over_cap(statement)
    if over is not None:
        return f"its statement has {over}"
    if _SORRY.search(read_as_lean(mask_comments(statement))):
        return "its statement holds `sorry`"
    problem = term_problem(statement)
    if problem is not None:
        return f"its statement is not one binder list and type: {problem}"
    own = theorem.declaration(START_FORM)
    restated = own is not None and own.split(f"theorem {theorem.name}", 1)[-1].split() == statement.split()
    if restated:
        return "its statement restates the theorem"
    reason = guard.check(statement)
    return None if reason is None else f"its statement is denied: {reason}"


def assemble_proof(theorem: Theorem, tactics: Sequence[str], lemmas: Sequence[FileLemma] = ()) -> str | None:
    """The proof as a Lean file (what is stored): header, the lemmas (`lemma_block`), the theorem's declaration in
    the form it was started in (`burnqed.lean.start.START_FORM`; its docstring line first, when it has one) with
    ` := by`, and the tactics, indented. None when the theorem has no statement (started with copyFrom): there is
    nothing to restate."""
    declaration = theorem.declaration(START_FORM)
    if declaration is None:
        return None
    body = join_tactics(tactics)
    header = f"{theorem.header.rstrip()}\n\n" if theorem.header else ""
    return f"{header}{lemma_block(lemmas)}{append_code(declaration, ':= by')}\n{body}\n"


def compile_text(proof: str, name: str, index_header: str | None, header: str | None = None,
                 lemmas: Sequence[FileLemma] = ()) -> CompileText:
    """The text compiled in the REPL's environment: `proof` without `import` lines (with `readHeader: false`
    an `import` is a parse error there; `open` and `set_option` lines stay), then `#print axioms` of each of its
    `lemmas` and of NAME, then the kernel recheck of NAME (`recheck_command`), and its pinned shape
    (`pinned_starts`): `index_header` is the theorem's header as the index gives it (trusted text), `header` the one
    `proof` was assembled under when it differs (the index's with its answer slot filled: the value is model text and
    adds no unit); `lemmas` the ones `proof` was assembled with (`assemble_proof`)."""
    body = _IMPORT_LINE.sub("", proof).strip("\n")
    printed = f"{body}\n\n"
    prints: list[int] = []
    for printed_name in (*(lemma.name for lemma in lemmas), name):
        prints.append(len(printed.encode("utf-8")))
        printed += f"#print axioms {printed_name}\n\n"
    print_start, recheck_start = prints[-1], len(printed.encode("utf-8"))
    text = printed + recheck_command(name)
    names = tuple(lemma.name for lemma in lemmas)
    pinned = pinned_starts(body, index_header, index_header if header is None else header, lemmas)
    if isinstance(pinned, str):
        return CompileText(name, text, print_start, recheck_start, (), pinned, names)
    starts = tuple(len(body[:at].encode("utf-8")) for at in pinned)
    return CompileText(name, text, print_start, recheck_start, (*starts, *prints, recheck_start), lemmas=names)


def pinned_starts(body: str, index_header: str | None, header: str | None,
                  lemmas: Sequence[FileLemma] = ()) -> list[int] | str:
    """Where, in `body` (a proof's file without its `import` lines), Lean must start a unit before `#print axioms`:
    at each command of the index's header (`leankit.commands.command_starts` of the trusted text, moved past the
    answer slot's value when `header` is it filled), at each of `lemmas` (where `lemma_block` puts them: never read
    from their text), then at the theorem (its first token after them; a header ending with `open X in` is one
    command with it). A reason instead when `body` does not begin with `header`, `header` is neither the index's nor
    it with one slot's `sorry` replaced, or the lemmas are not where they were assembled."""
    index_head, head = _header_text(index_header), _header_text(header)
    if not body.startswith(head) or (head and body[len(head) : len(head) + 1].strip()):
        return "the compiled file does not begin with the header it was assembled under"
    starts = _moved_starts(index_head, head)
    if isinstance(starts, str):
        return starts
    starts, at = list(starts), len(head)
    if lemmas:
        first = next(tokens(body[at:]), None)
        block = lemma_block(lemmas)
        if first is None or not body.startswith(block, at + first.start):
            return "the compiled file's lemmas are not the ones it was assembled with, where they were put"
        if _ENDS_WITH_IN.search(mask_comments(index_head)):
            return "the header ends with `open … in` (one command with the next): no lemma can stand before the theorem"
        at += first.start
        for lemma in lemmas:
            starts.append(at)
            at += len(lemma.text()) + 1
    theorem = next(tokens(body[at:]), None)
    if theorem is None:
        return "the compiled file has nothing after its header: no theorem"
    if starts and not lemmas and _ENDS_WITH_IN.search(mask_comments(index_head)):
        return starts  # `open X in` / `set_option … in` as the header's last command: the theorem's unit starts there
    return [*starts, at + theorem.start]


def check_header(index_header: str | None, header: str | None) -> Verdict:
    """The pinned shape of a header alone, read by `leankit.commands` before Lean sees it (the hybrid forest's start
    of a theorem filled with an answer, whose `frontend.distil` reports no units): `header` holds exactly the index
    header's commands, each where it must start (an answer's value adds none). Lean's own units pin the compile."""
    index_head, head = _header_text(index_header), _header_text(header)
    moved = _moved_starts(index_head, head)
    if isinstance(moved, str):
        return Verdict(False, moved)
    read = command_starts(head)
    if len(read) != len(moved):
        return Verdict(False, f"the header holds {len(read)} commands where the index's has {len(moved)}: a command "
                       "the index's header does not have would run")
    for number, (start, want) in enumerate(zip(read, moved, strict=True)):
        if start != want:
            return Verdict(False, f"the header's command {number + 1} starts at character {start}, where the index's "
                           f"starts at {want}")
    return Verdict(True)


def _header_text(header: str | None) -> str:
    """A header as `assemble_proof` writes it and `compile_text` keeps it: trailing blanks and `import` lines gone."""
    return _IMPORT_LINE.sub("", header.rstrip()).strip("\n") if header else ""


def _moved_starts(index_head: str, head: str) -> list[int] | str:
    """The command starts of the trusted `index_head` (`command_starts`), where they stand in `head`: the same text,
    or the same with one answer slot's `sorry` replaced by a value that is not blank, its `:=` kept
    (`leankit.answer.fill_slot`; starts after the slot move by the value's length, never read from it). A reason
    when `head` is neither, or when two slots could explain it."""
    trusted = command_starts(index_head)
    if head == index_head:
        return trusted
    moved: set[tuple[int, ...]] = set()
    for slot in find_slots(index_head):
        tail = index_head[slot.sorry_end :]
        value = head[slot.sorry_start : len(head) - len(tail)]  # empty when the kept ends would overlap
        if (value.strip() and head.startswith(index_head[: slot.sorry_start]) and head.endswith(tail)
                and not any(slot.assign < at < slot.sorry_end for at in trusted)):
            shift = len(head) - len(index_head)
            moved.add(tuple(at if at <= slot.assign else at + shift for at in trusted))
    if len(moved) != 1:
        return ("the header compiled is not the index's header, nor it with an answer slot filled" if not moved else
                "the header compiled fills more than one way an answer slot of the index's header")
    return list(moved.pop())


def check_final(final: TacticResult) -> Verdict:
    """Rule 1: Lean itself says every goal is closed, with no sorry and nothing unsafe (when it reports that)."""
    if not final.closed_all_goals:
        return Verdict(False, f"the last tactic did not close all goals ({final.kind.value})")
    if final.has_sorry:
        return Verdict(False, "Lean reports sorry in the closing step")
    if final.has_unsafe:
        return Verdict(False, "Lean reports unsafe code in the closing step")
    return Verdict(True)


def check_path(tactics: Sequence[str], guard: TacticGuard) -> Verdict:
    """Rule 2: no tactic on the path is denied. The path is a whole proof's top-level tactics (or a step path, each
    tactic checked with the tactic cap when it was sent): bounded as a whole by `lean.max_text_chars`, each tactic
    read by every rule but the tactic cap (`TacticGuard.check_in_proof`)."""
    if not tactics:
        return Verdict(False, "empty proof")
    over = guard.over_cap(sum(len(tactic) + 1 for tactic in tactics) - 1)  # their length joined by newlines
    if over is not None:
        return Verdict(False, f"the proof has {over}")
    for tactic in tactics:
        reason = guard.check_in_proof(tactic)
        if reason is not None:
            return Verdict(False, f"tactic {tactic!r} on the path is denied: {reason}")
    return Verdict(True)


def check_answer(value: str, guard: TacticGuard) -> Verdict:
    """Rule 2, for the answer a completion gives an answer slot (docs/lean.md, "Answers"), whatever the deny list
    says: a term, not `sorry` (read as Lean reads it: an answer left `sorry` is no answer), one term as Lean reads it
    (`leankit.commands.term_problem`: brackets balanced and never closed before opened, every comment and string
    closed, no command keyword: Lean would end the value there and run the rest as commands of its own); then nothing
    the tactic guard refuses (`native_decide`, `by_elab`, a kernel switch: the answer is untrusted code as a tactic
    is). An answer over the cap (`TacticGuard.over_cap`) is refused before anything reads it."""
    over = guard.over_cap(value)
    if over is not None:
        return Verdict(False, f"the answer has {over}")
    if not value.strip():
        return Verdict(False, "empty answer")
    if _SORRY.search(read_as_lean(mask_comments(value))):
        return Verdict(False, "the answer is left `sorry`")
    problem = term_problem(value)
    if problem is not None:
        shown = " ".join(value.split())  # every line: what follows the first is what Lean would not read as the value
        return Verdict(False, f"the answer {shown[:120]!r} is not one term: {problem}")
    reason = guard.check(value)
    if reason is not None:
        return Verdict(False, f"the answer {first_line(value)!r} is denied: {reason}")
    return Verdict(True)


def check_root(info: RootInfo) -> Verdict:
    """Rule 3: the assembled proof term exists and is complete and honest (as far as Lean reports)."""
    if info.root is None:
        return Verdict(False, "Lean printed no root proof term (the root is not assigned: not a finished proof)")
    if not info.flags_reported:
        return Verdict(True)  # Pantograph < 0.3.1 has no root flags: only the compile decides (verify_proof)
    if info.has_sorry:
        return Verdict(False, "the proof term contains sorry")
    if info.has_unsafe:
        return Verdict(False, "the proof term uses unsafe code")
    if info.has_mvar:
        return Verdict(False, "the proof term still has metavariables (a goal was left open)")
    return Verdict(True)


def parse_axioms(text: str, name: str) -> tuple[str, ...] | None:
    """The axioms a `#print axioms NAME` report lists, or None when `text` is no report about `name`."""
    match = _AXIOMS_REPORT.fullmatch(text.strip())
    if match is None or match.group("name") != name:
        return None
    listed = match.group("axioms")
    return tuple(a.strip() for a in listed.split(",") if a.strip()) if listed is not None else ()


def check_shape(result: CompileResult, expected: CompileText) -> Verdict:
    """Rule 4's pin: Lean split the text into exactly the pinned units (`CompileText.unit_starts`): the index
    header's commands, the lemmas, the theorem, `#print axioms` of each lemma and of NAME, the recheck; no unit more or
    less, each where it must start. A command smuggled anywhere (an answer's value, a tactic, a lemma, a proof) is a
    unit the pin does not have."""
    if expected.problem is not None:
        return Verdict(False, f"the compiled file's shape cannot be pinned: {expected.problem}")
    pinned, count = expected.unit_starts, len(expected.lemmas)
    starts = [unit.start for unit in result.units]
    if len(starts) != len(pinned):
        lemmas = f"{count} lemmas, " if count else ""
        prints = "`#print axioms` of each" if count else "`#print axioms`"
        return Verdict(False, f"Lean reports {len(starts)} compilation units where the file's pinned shape has "
                       f"{len(pinned)} (the index header's {len(pinned) - 3 - 2 * count} commands, {lemmas}the "
                       f"theorem, {prints} and the kernel recheck): a command the header does not have was run")
    for number, (start, want) in enumerate(zip(starts, pinned, strict=True)):
        if start != want and not (number == 0 and start == 0):
            return Verdict(False, f"Lean's unit {number + 1} starts at byte {start}, where the pinned shape starts "
                           f"{_unit_name(number, len(pinned), expected)} at byte {want}: the text was not split as "
                           "written")
    return Verdict(True)


def _unit_name(number: int, size: int, expected: CompileText) -> str:
    """What the pinned shape's unit `number` (0-based) of `size` is, in words."""
    count = len(expected.lemmas)
    header = size - 3 - 2 * count
    if number < header:
        return f"the header's command {number + 1}"
    if number < header + count:
        return f"lemma {expected.lemmas[number - header]}"
    if number == header + count:
        return "the theorem"
    if number < size - 2:
        return f"`#print axioms {expected.lemmas[number - header - count - 1]}`"
    return "`#print axioms`" if number == size - 2 else "the kernel recheck"


def check_compile(result: CompileResult, expected: CompileText) -> Verdict:
    """Rule 4: the compile text compiled cleanly in its pinned shape (`check_shape`), declared each lemma and the
    theorem, each lemma and the theorem use only the standard axioms (`#print axioms` reaches what they use), and the
    theorem passed the kernel recheck (which re-adds every constant of the file it uses, the lemmas among them)."""
    name = expected.name
    for verdict in (_compiled_cleanly(result, expected), check_shape(result, expected)):
        if not verdict.ok:
            return verdict
    count = len(expected.lemmas)
    last = result.units[-1]
    header = len(result.units) - 3 - 2 * count
    declaring = [*zip(expected.lemmas, result.units[header : header + count], strict=True),
                 (name, result.units[-3 - count])]
    for declared_name, unit in declaring:
        declared = unit.new_constants
        if declared is None:
            owner = "the theorem" if declared_name == name else f"lemma {declared_name}"
            return Verdict(False, f"the compile reply lists no newConstants for {owner}'s unit")
        if declared_name not in declared:
            where = "the unit before `#print axioms`" if declared_name == name else f"lemma {declared_name}'s unit"
            return Verdict(False, f"{where} does not declare {declared_name} (newConstants: {list(declared)[:5]})")
    for printed_name, printed in zip((*expected.lemmas, name), result.units[-2 - count : -1], strict=True):
        axioms = _axioms_verdict(printed, printed_name)
        if not axioms.ok:
            return axioms
    if not recheck_passed(_only_information(last), name):
        shown = [first_line(m.text) for m in last.messages][:3]
        return Verdict(False, f"no kernel recheck report for {name} in the compile reply (messages: {shown})")
    return Verdict(True)


def _axioms_verdict(printed: CompileUnit, name: str) -> Verdict:
    """`#print axioms NAME`'s unit: its one information message lists nothing beyond the standard axioms."""
    axioms = parse_axioms(_only_information(printed), name)
    if axioms is None:
        shown = [first_line(m.text) for m in printed.messages][:3]
        return Verdict(False, f"no `#print axioms {name}` report in the compile reply (messages: {shown})")
    extra = sorted(set(axioms) - ALLOWED_AXIOMS)
    if extra:
        owner = "the proof" if not name.startswith(LEMMA_PREFIX) else f"lemma {name}"
        return Verdict(False, f"{owner} depends on axioms beyond {', '.join(sorted(ALLOWED_AXIOMS))}: "
                       f"{', '.join(extra)}")
    return Verdict(True)


def _compiled_cleanly(result: CompileResult, expected: CompileText) -> Verdict:
    """Units, none with an error or a sorry warning (a text without a pinned shape: `check_shape`'s refusal)."""
    if expected.problem is not None:
        return check_shape(result, expected)
    if not result.units:
        return Verdict(False, "the compile reply has no compilation units: nothing was shown to be declared")
    if result.errors:
        return Verdict(False, f"the proof text does not compile: {first_line(result.errors[0].text)}")
    if result.has_sorry:
        return Verdict(False, "the proof text compiles only with sorry")
    return Verdict(True)


def _only_information(unit: CompileUnit) -> str:
    """The text of the unit's message when it has exactly one and that is information, else ""."""
    if len(unit.messages) != 1 or unit.messages[0].severity != "information":
        return ""
    return unit.messages[0].text


def recheck_passed(text: str, name: str) -> bool:
    """Whether `text` is the kernel recheck's report that NAME and its N ≥ 1 constants were re-checked."""
    match = _RECHECK_REPORT.fullmatch(text.strip())
    return match is not None and match.group("name") == name


async def check_proof_text(lean: LeanEnv, name: str, proof: str, *, index_header: str | None,
                           header: str | None = None, lemmas: Sequence[FileLemma] = ()) -> Verdict:
    """Rule 4 alone on a stored proof text (a Lean file declaring `name`): does it still verify? `index_header`: the
    theorem's header as the index gives it; `header`: the one `proof` was assembled under when it differs (an answer
    filled in); `lemmas`: the ones `proof` was assembled with (their statements and proofs read by `check_lemmas`
    first). A file whose shape cannot be pinned is refused without Lean."""
    expected = compile_text(proof, name, index_header, header, lemmas)
    if expected.problem is not None:
        return Verdict(False, check_shape(CompileResult(()), expected).reason, proof)
    try:
        result = await lean.compile(expected.text)
    except LeanStartError:
        raise  # Lean cannot be started: no verdict on the proof
    except LeanError as exc:
        return Verdict(False, f"verification failed: {exc}", proof)
    verdict = check_compile(result, expected)
    return Verdict(verdict.ok, verdict.reason, proof, compiled=True, result=result)


def body_line(proof: str, tactics: Sequence[str]) -> int | None:
    """The line of `compile_text(proof, …)` where the body of `proof` (`assemble_proof(theorem, tactics)`) starts,
    1-based; None when `proof` is not such an assembly. The compile text drops the header's `import` lines, so a
    message's line in the compile maps onto the body by this offset."""
    body = join_tactics(tactics)
    if not body or not proof.endswith(f"\n{body}\n"):
        return None
    head = _IMPORT_LINE.sub("", proof[: len(proof) - len(body) - 1]).lstrip("\n")
    return head.count("\n") + 1


async def verify_proof(
    lean: LeanEnv,
    theorem: Theorem,
    tactics: Sequence[str],
    final: TacticResult,
    guard: TacticGuard,
    *,
    compile: bool = True,
    index_header: str | None,
) -> Verdict:
    """Apply the rules (docs/lean.md, "Soundness"); `final` is the result of the last tactic of `tactics`.
    `index_header`: `theorem`'s header as the index gives it (the compile's pinned shape; `theorem.header` may be it
    with an answer filled in)."""
    proof = assemble_proof(theorem, tactics)
    for verdict in (check_final(final), check_path(tactics, guard)):
        if not verdict.ok:
            return Verdict(False, verdict.reason, proof)
    assert final.state_id is not None  # check_final guarantees it
    try:
        info = await lean.root_info(final.state_id)
        root = check_root(info)
        if not root.ok:
            return Verdict(False, root.reason, proof)
        if not compile:
            if not (final.flags_reported and info.flags_reported):
                return Verdict(False, "this Pantograph reports no sorry flags: only the compile can count a proof "
                               "(search.verify is off)", proof)
            return Verdict(True, proof=proof)
        if proof is None:
            return Verdict(False, "cannot compile: the theorem has no statement to restate", proof)
        expected = compile_text(proof, theorem.name, index_header, theorem.header)
        if expected.problem is not None:
            return Verdict(False, check_shape(CompileResult(()), expected).reason, proof)
        compiled = check_compile(await lean.compile(expected.text), expected)
    except (LeanStatesLostError, LeanStartError):
        raise  # not a verdict: the caller rebuilds the state on the new process / the run stops
    except LeanError as exc:
        return Verdict(False, f"verification failed: {exc}", proof)
    return Verdict(compiled.ok, compiled.reason, proof, compiled=True)

"""Shared nouns of burnqed: goals, tactic results, theorems. No I/O here.

Wire formats are parsed into these records once, at the edge (`burnqed.lean.protocol` for Lean replies,
`Theorem`/`TheoremIndex` for theorem index files), and everything inside works on records.
Hot-path records are frozen slotted dataclasses; file formats are pydantic models (validated on load).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from enum import StrEnum
from itertools import pairwise
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from burnqed.text.prompt import DeclarationForm, SearchMode
from leankit.answer import fill_slot
from leankit.declaration import scoped_header
from leankit.text import (
    doc_comment,
    doc_comment_problem,
    find_depth0,
    mask_comments,
    read_statement,
    split_leading_binders,
    strip_comments,
)


@dataclass(frozen=True, slots=True)
class Variable:
    """One hypothesis of a goal: `name : type` (or `name : type := value` for a let binding)."""

    name: str
    type: str
    value: str | None = None
    inaccessible: bool = False


@dataclass(frozen=True, slots=True)
class Goal:
    """One open Lean goal, pretty-printed the way Lean shows it in the infoview."""

    target: str
    variables: tuple[Variable, ...] = ()
    case: str | None = None  # Lean's userName of the goal (`case inl`), if any
    mvar: str | None = None  # Lean's internal metavariable name; opaque, never compared

    def pretty(self) -> str:
        """Lean's rendering: optional `case` line, hypotheses (consecutive ones of equal type grouped), `⊢ target`."""
        lines: list[str] = []
        if self.case:
            lines.append(f"case {self.case}")
        group: list[str] = []
        group_type: str | None = None
        for var in self.variables:
            if var.value is None and group and var.type == group_type:
                group.append(var.name)
                continue
            if group:
                lines.append(f"{' '.join(group)} : {group_type}")
                group = []
            if var.value is not None:
                lines.append(f"{var.name} : {var.type} := {var.value}")
                group_type = None
            else:
                group = [var.name]
                group_type = var.type
        if group:
            lines.append(f"{' '.join(group)} : {group_type}")
        lines.append(f"⊢ {self.target}")
        return "\n".join(lines)

    @classmethod
    def from_pretty(cls, text: str) -> Goal:
        """The goal `pretty` printed (the inverse up to grouping: `x y : ℕ` is two variables): an optional `case`
        line, `NAMES : TYPE` or `NAME : TYPE := VALUE` lines, the `⊢ TARGET` line; a line indented deeper continues
        the one before. A name holding `✝` is inaccessible. ValueError when `text` is not one goal (no `⊢` line, or
        a second goal after a blank line)."""
        entries: list[str] = []
        for line in text.strip("\n").split("\n"):
            if not line.strip():
                raise ValueError("a blank line: a state of several goals is not one goal")
            if entries and line[:1].isspace():
                entries[-1] += "\n" + line
            else:
                entries.append(line)
        case = entries.pop(0).removeprefix("case ").strip() if entries and entries[0].startswith("case ") else None
        if not entries or not entries[-1].startswith("⊢"):
            raise ValueError("no `⊢` line ends the text: it is not a goal")
        variables: list[Variable] = []
        for entry in entries[:-1]:
            names, colon, rest = entry.partition(" : ")
            if not colon or not names.split() or entry.startswith("⊢"):
                raise ValueError(f"{first_line(entry)!r} is no hypothesis (`NAME : TYPE`) of one goal")
            assign = find_depth0(rest, " := ")
            type_, value = (rest, None) if assign < 0 else (rest[:assign], rest[assign + len(" := "):])
            variables += [Variable(name, type_, value, "✝" in name) for name in names.split()]
        return cls(entries[-1].removeprefix("⊢").strip(), tuple(variables), case or None)


def pretty_state(goals: tuple[Goal, ...] | list[Goal]) -> str:
    """A whole tactic state as text: goals separated by a blank line; `no goals` when closed."""
    if not goals:
        return "no goals"
    return "\n\n".join(goal.pretty() for goal in goals)


def first_line(text: str) -> str:
    """The first line of a (possibly empty, possibly multi-line) message."""
    return text.split("\n", 1)[0]


class TacticKind(StrEnum):
    """What became of one tactic application."""

    SUCCESS = "success"  # Lean accepted it: `goals` is the new state (empty = all goals closed)
    ERROR = "error"  # Lean rejected it (elaboration/tactic failure); the old state is still valid
    PARSE_ERROR = "parse_error"  # the text did not parse as a tactic
    TIMEOUT = "timeout"  # Lean-side interrupt, or the client watchdog fired (then states_lost is True)
    CRASH = "crash"  # the Lean process died or sent garbage; the worker was restarted, states are lost
    REFUSED = "refused"  # the tactic guard refused it before it reached Lean


@dataclass(frozen=True, slots=True)
class TacticResult:
    """The typed outcome of `goal.tactic`. Domain failures are values of this type, not exceptions."""

    kind: TacticKind
    state_id: int | None = None  # the new state id; set only when kind is SUCCESS
    goals: tuple[Goal, ...] = ()  # the new state's goals; meaningful only when kind is SUCCESS
    errors: tuple[str, ...] = ()  # error-severity messages, parse error or refusal reason
    warnings: tuple[str, ...] = ()  # other messages Lean attached (info/warning)
    has_sorry: bool = False
    has_unsafe: bool = False
    # Lean reported hasSorry/hasUnsafe (Pantograph >= 0.3.1). When False both flags are unknown, not false:
    # only the compile can then show that the proof is free of sorry (burnqed.lean.soundness).
    flags_reported: bool = True
    states_lost: bool = False  # the worker was restarted: every state id of this worker is invalid now
    elapsed_ms: float = 0.0

    @property
    def closed_all_goals(self) -> bool:
        """Lean reported no goals left. Necessary for a proof, not sufficient: see `burnqed.lean.soundness`."""
        return self.kind is TacticKind.SUCCESS and self.state_id is not None and not self.goals

    @property
    def reason(self) -> str:
        """One line saying why the tactic failed (empty on success)."""
        if self.kind is TacticKind.SUCCESS:
            return ""
        first = first_line(self.errors[0]) if self.errors else ""
        return f"{self.kind.value}: {first}" if first else self.kind.value


@dataclass(frozen=True, slots=True)
class Subgoal:
    """One hole of a sketch (`have NAME : P := by sorry`) as Lean made it a goal (docs/lean.md, "Sketches")."""

    name: str  # the have's name, as Lean reads it
    statement: str  # its statement as the sketch wrote it
    state_id: int  # the state that holds every subgoal of the sketch
    goal_id: int  # this subgoal's index among that state's goals (`goal.tactic`'s goalId)
    goal: Goal  # as Lean printed it: the binders and the holes before this one in context, the target P


@dataclass(frozen=True, slots=True)
class SketchResult:
    """What Lean made of a sketch. SUCCESS: one subgoal per hole, in the sketch's order, and the skeleton's closing
    tactics accepted with the holes in scope. Otherwise no subgoals and `errors` says why: Lean's messages (ERROR,
    PARSE_ERROR), the guard's refusal (REFUSED, nothing sent), or the worker's fate (TIMEOUT, CRASH)."""

    kind: TacticKind
    route: str  # "draft" (goal.tactic), "distil" (frontend.distil) or "process" (frontend.process sorrys); "" refused
    state_id: int | None = None
    subgoals: tuple[Subgoal, ...] = ()
    errors: tuple[str, ...] = ()
    states_lost: bool = False
    elapsed_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class RootInfo:
    """What `goal.print {rootExpr: true}` says about the proof term assembled so far.

    `root` is None when Lean printed no root: the root metavariable is not assigned (nothing proved yet).
    `flags_reported` is False for Pantograph < 0.3.1, which has no root flags: the three are unknown then.
    """

    has_sorry: bool
    has_unsafe: bool
    has_mvar: bool
    root: str | None = None
    flags_reported: bool = True


@dataclass(frozen=True, slots=True)
class CompileMessage:
    """One message of `frontend.process` (Pantograph < 0.3.4 sends strings: their severity is read from the
    `file:line:col: error: ` prefix Lean writes; a string without one is an information message)."""

    severity: str  # "error" | "warning" | "information"
    text: str
    kind: str = ""
    line: int | None = None  # 1-based, in the compiled file
    column: int | None = None  # 0-based (in codepoints, as Lean counts them), on `line`

    @property
    def is_sorry_warning(self) -> bool:
        return self.kind == "hasSorry" or "declaration uses 'sorry'" in self.text.replace("`", "'")


@dataclass(frozen=True, slots=True)
class CompileUnit:
    """One compilation unit (one top-level command) of `frontend.process`."""

    start: int  # boundary: UTF-8 byte offsets [start, end) of the command in the file
    end: int
    messages: tuple[CompileMessage, ...] = ()
    new_constants: tuple[str, ...] | None = None  # None: the reply did not list them (never "no constants")


@dataclass(frozen=True, slots=True)
class CompileResult:
    """Outcome of compiling a whole file with `frontend.process`: its units, in file order."""

    units: tuple[CompileUnit, ...]

    @property
    def messages(self) -> tuple[CompileMessage, ...]:
        return tuple(m for unit in self.units for m in unit.messages)

    @property
    def errors(self) -> tuple[CompileMessage, ...]:
        return tuple(m for m in self.messages if m.severity == "error")

    @property
    def has_sorry(self) -> bool:
        return any(m.is_sorry_warning for m in self.messages)

    @property
    def ok(self) -> bool:
        """No error and no sorry warning. Necessary, not sufficient for a proof: see `burnqed.lean.soundness`."""
        return bool(self.units) and not self.errors and not self.has_sorry


def split_signature(signature: str) -> tuple[str, str] | None:
    """(binders, type) of a signature `(x : ℝ) (h : p) : T` (binders "" for `: T`); None without a type. Comments
    are read as Lean reads them and left out (`leankit.text.strip_comments`)."""
    signature = strip_comments(signature)
    colon = find_depth0(signature, ":", not_followed_by="=")
    if colon < 0 or not signature[colon + 1 :].strip():
        return None
    return " ".join(signature[:colon].split()), " ".join(signature[colon + 1 :].split())


# Lean 4's identifier characters (`isIdFirst`, `isIdRest`, `isLetterLike`, `isSubScriptAlnum` in Init/Meta/Defs.lean)
# as every supported Lean reads them: ASCII letters, Greek but λ Π Σ, Coptic, polytonic Greek, the letter-like
# block (ℕ, ℝ) and the mathematical alphanumerics (𝒜); `'`, `!`, `?`, digits and subscripts after the first. Lean
# releases of 2025 on also take Latin-1 letters (é); the Lean of a v4.9-era Mathlib does not, so they are left out.
_ID_FIRST = "A-Za-z_\u03b1-\u03ba\u03bc-\u03c9\u0391-\u039f\u03a1\u03a2\u03a4-\u03a9\u03ca-\u03fb\u1f00-\u1ffe" \
            "\u2100-\u214f\U0001d49c-\U0001d59f"
_ID_REST = _ID_FIRST + "0-9'!?\u2080-\u2089\u2090-\u209c\u1d62-\u1d6a"
_IDENTIFIER = re.compile(f"[{_ID_FIRST}][{_ID_REST}]*")
# Reserved words of Lean 4 and Mathlib that read as identifiers: as a name (or a part of one) they are keywords, so
# `theorem fun : …` does not parse. Tactic names are keywords too where their syntax is in scope; those show as a
# start error of that theorem instead.
LEAN_KEYWORDS = frozenset({
    "abbrev", "at", "attribute", "axiom", "break", "by", "calc", "catch", "class", "continue", "decreasing_by",
    "def", "deriving", "do", "elab", "elab_rules", "else", "end", "example", "export", "extends", "finally", "for",
    "forall", "from", "fun", "have", "hiding", "if", "import", "in", "include", "inductive", "infix", "infixl",
    "infixr", "initialize", "instance", "lemma", "let", "local", "macro", "macro_rules", "match", "mut", "mutual",
    "namespace", "nofun", "nomatch", "noncomputable", "notation", "omit", "opaque", "open", "partial", "postfix",
    "prefix", "private", "protected", "renaming", "return", "scoped", "section", "set_option", "show", "sorry",
    "structure", "suffices", "syntax", "termination_by", "then", "theorem", "this", "try", "universe", "unless",
    "unsafe", "variable", "where", "with", "Prop", "Sort", "Type",
})
NAME_RULE = ("a theorem name is a Lean identifier: parts separated by single dots, each a letter or _ followed by "
             "letters, digits, _, ', !, ? or subscripts, and no part a keyword such as `theorem`")


def lean_name_problem(name: str) -> str | None:
    """Why Lean cannot declare `theorem NAME` as written (None when it can): `NAME_RULE`. burnqed writes the name
    into declarations, `#print axioms NAME` and the kernel recheck as it is, and matches Lean's `newConstants` and
    axiom reports against it, so a name that needs Lean's `«…»` quoting is refused rather than quoted."""
    for part in name.split("."):
        if not part:
            return f"{name!r} has an empty part (a leading, trailing or doubled dot)"
        if _IDENTIFIER.fullmatch(part) is None:
            if part[0].isdigit():
                return f"{name!r} has a part starting with a digit ({part!r})"
            start = _IDENTIFIER.match(part)
            bad = part[0] if start is None else part[start.end()]
            return f"{name!r} contains {bad!r}, which Lean does not take in a name"
        if part in LEAN_KEYWORDS:
            return f"{name!r} has the keyword {part!r} as a part"
        if part == "_root_":  # `theorem _root_.x` declares `x`: Lean's constant would not be the index's name
            return f"{name!r} has the part '_root_' (give the name the declaration makes, without it)"
    return None


class AnswerTask(StrEnum):
    """PutnamBench's two tasks for a problem whose answer the theorem uses (docs/data.md, "Answer-bearing problems")."""

    PRODUCED = "produced"  # the prover writes the answer and the proof (the slot stays `sorry` in the header)
    GIVEN = "given"  # the answer is written into the statement (`((VALUE) : TYPE)`); only the proof is asked for


class Answer(BaseModel):
    """The answer slot of an answer-bearing theorem: a definition of its header whose value is `sorry` and which
    its statement uses (`leankit.answer`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="The slot's constant (`putnam_1965_b4_solution`).")
    type: str = Field(min_length=1, description="The slot's type as written.")
    task: AnswerTask = Field(description="produced: the slot is open in the header and the prover fills it; given: "
                             "the answer is written into the statement and the header has no slot.")
    value: str | None = Field(default=None, description="The answer the header or statement holds: the given one "
                              "(task given), the one a proof filled the slot with (task produced, on a filled "
                              "theorem); None while the slot is open.")
    reference: str | None = Field(default=None, description="The answer the benchmark's file writes under the slot "
                                  "(PutnamBench's comment line). Never shown to the model.")


class Theorem(BaseModel):
    """One entry of a theorem index (docs/data.md).

    Statements are read at the door, as a Lean user writes them (`leankit.text.read_statement`): the record holds
    `statement` and `signature` without their comments, and a doc comment opening either as `docstring`, so every
    use (the start, the compile, prompts, normal forms, the eval's theorem digest) sees the same clean text and
    no comment can reach the place after the type where `:= by …` goes. A statement without comments is kept
    byte for byte, so the indexes, results and trajectories that hold it read back unchanged. A statement, signature or
    header left inside a block comment or a string literal at its end is refused, as Lean would refuse it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="Fully qualified theorem name; unique within an index.")
    statement: str | None = Field(
        default=None,
        description="The type as Lean source (∀-form), passed to `goal.start expr`; without it the goal is "
        "started with `goal.start copyFrom=name` (the theorem must exist in the Lean environment). Comments are "
        "dropped when the index is read; a leading `/-- … -/` becomes `docstring`.",
    )
    signature: str | None = Field(
        default=None,
        description="The declaration as written after its name: binders, colon, type (`(x : ℝ) (h₀ : 0 < x) : "
        "x ^ 2 > 0`; `: 1 + 1 = 2` without binders). Without it, the leading ∀ binders of `statement` are used. "
        "Comments are dropped when the index is read, as in `statement`.",
    )
    header: str | None = Field(
        default=None,
        description="The file's header without its imports (opens, options, namespace): in force when the theorem "
        "is started and when its proof is compiled.",
    )
    docstring: str | None = Field(
        default=None,
        description="The theorem's docstring, the text of the `/-- … -/` before its declaration (miniF2F's and "
        "Lean Workbook's informal statements), or of one opening `statement`/`signature`. It is restated on its "
        "own line before the declaration wherever the declaration is written out (the start, the compile, "
        "prompts).",
    )
    source: str | None = Field(default=None, description="Where the theorem comes from (dataset name).")
    split: str | None = Field(default=None, description="train | valid | test, when the source defines one.")
    answer: Answer | None = Field(
        default=None, description="The answer slot, for a theorem whose statement uses a definition of its header "
        "whose value is `sorry` (PutnamBench's `…_solution`); None for every other theorem.")

    @model_validator(mode="before")
    @classmethod
    def _no_nul(cls, data: object) -> object:
        """A NUL byte ends a C string in Lean's runtime and in the tools around it: no field of an entry has one."""
        if isinstance(data, dict):
            for key, value in data.items():
                if isinstance(value, str) and "\x00" in value:
                    raise ValueError(f"{key} contains a NUL byte (\\x00 at character {value.index(chr(0))})")
        return data

    @field_validator("name")
    @classmethod
    def _declarable_name(cls, value: str) -> str:
        problem = lean_name_problem(value)
        if problem is not None:
            raise ValueError(f"theorem name {problem}: {NAME_RULE}")
        return value

    @field_validator("docstring")
    @classmethod
    def _docstring_restates(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        problem = doc_comment_problem(value.strip())
        if problem is not None:
            raise ValueError(f"docstring {value[:60]!r} cannot be written as a `/-- … -/` doc comment: {problem}")
        return value.strip()

    @model_validator(mode="after")
    def _read_as_written(self) -> Theorem:
        """Comments out of `statement` and `signature`, a leading doc comment into `docstring` (see the class
        docstring); then the statement of a signature-only entry."""
        docstring = self.docstring
        for field_name in ("statement", "signature"):
            value = getattr(self, field_name)
            if value is None:
                continue
            read = read_statement(value)
            if read.unterminated is not None:
                raise ValueError(f"{field_name} {_shown(value)} ends inside an unterminated {read.unterminated}")
            if not read.code:
                raise ValueError(f"{field_name} is blank" if not value.strip() else
                                 f"{field_name} {_shown(value)} holds only comments")
            if field_name == "signature" and split_signature(read.code) is None:
                raise ValueError(f"signature {_shown(value)} has no `: TYPE` after its binders")
            docstring = docstring or read.docstring
            if mask_comments(value) != value:  # kept as written when it has no comment
                object.__setattr__(self, field_name, read.code)
        if docstring != self.docstring:
            object.__setattr__(self, "docstring", docstring)
        left = read_statement(self.header).unterminated if self.header else None
        if left is not None:  # it would swallow the declaration written after it
            raise ValueError(f"header {_shown(self.header or '')} ends inside an unterminated {left}")
        if self.statement is None and self.signature is not None:
            binders, type_ = split_signature(self.signature) or ("", "")
            object.__setattr__(self, "statement", f"∀ {binders}, {type_}" if binders else type_)
        return self

    @model_validator(mode="after")
    def _no_open_namespace(self) -> Theorem:
        """A header that opens a namespace keeps it as a section opening it, and the theorem is named by the
        constant its declaration makes there (`Ns.name`): the start, the compile's `newConstants` and
        `#print axioms` then all name the same constant (`leankit.declaration.scoped_header`)."""
        header, name = scoped_header(self.header, self.name)
        if header != self.header or name != self.name:
            object.__setattr__(self, "header", header)
            object.__setattr__(self, "name", name)
        return self

    @property
    def binder_signature(self) -> str | None:
        """`signature`, else the one the statement's leading ∀ binders give; None without a statement."""
        if self.signature is not None:
            return " ".join(self.signature.split())
        if self.statement is None:
            return None
        binders, type_ = split_leading_binders(self.statement)
        return f"{binders} : {type_}" if binders else f": {type_}"

    def declaration(self, form: DeclarationForm = DeclarationForm.BINDER) -> str | None:
        """`theorem NAME <binders> : T` (BINDER, as a Lean user writes it: the binders are hypotheses in context)
        or `theorem NAME : ∀ …, T` (FORALL), after the docstring's `/-- … -/` line when the theorem has one;
        None when the theorem has no statement (started with copyFrom). Every prompt, the start and the compile
        take the theorem's declaration from here."""
        if self.statement is None:
            return None
        doc = f"{doc_comment(self.docstring)}\n" if self.docstring else ""
        if form is DeclarationForm.FORALL:
            return f"{doc}theorem {self.name} : {self.statement}"
        return f"{doc}theorem {self.name} {self.binder_signature}"

    @property
    def record(self) -> str:
        """The index record as read, its unset fields left out: what a digest of the theorem reads (eval's theorem
        set), so a changed header, statement or answer is another theorem, and a
        field added to the record later changes no digest of an entry that does not set it."""
        return self.model_dump_json(exclude_none=True)

    @property
    def answer_open(self) -> bool:
        """The theorem's answer is still to be produced: its header's slot is `sorry`."""
        return self.answer is not None and self.answer.task is AnswerTask.PRODUCED and self.answer.value is None

    def with_answer(self, value: str) -> Theorem:
        """This theorem with its open slot filled with `value` (the header's `:= sorry` becomes `:= (VALUE)`,
        `leankit.answer.fill_slot`): what a produced answer is proved against and stored as. ValueError when the
        theorem has no open slot, or when `value` is no single term."""
        if not self.answer_open or self.answer is None or self.header is None:
            raise ValueError(f"theorem {self.name} has no open answer slot to fill")
        header = fill_slot(self.header, self.answer.name, value)
        answer = self.answer.model_copy(update={"value": value.strip()})
        return self.model_copy(update={"header": header, "answer": answer})

    @classmethod
    def from_recorded(cls, theorem: RecordedTheorem) -> Theorem:
        """A theorem of a leankit corpus or of the checked world as an index entry."""
        return cls(name=theorem.name, statement=theorem.statement, header=theorem.header, source=theorem.source,
                   split=theorem.split)


class RecordedTheorem(Protocol):
    """What an index entry takes from a recorded theorem (`leankit.corpus.TheoremSpec`,
    `leankit.world.checked.WorldTheorem`)."""

    @property
    def name(self) -> str: ...
    @property
    def statement(self) -> str: ...
    @property
    def header(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def split(self) -> str: ...


def _shown(value: str) -> str:
    """A field's value in an error line: its start, quoted, on one line."""
    return repr(value if len(value) <= 60 else value[:57] + "...")


class SkippedDeclaration(BaseModel):
    """A declaration of a benchmark that is none of its theorems, where it stands and why (docs/data.md): a
    statement that does not parse, a name Lean cannot declare, a second declaration of one name or statement."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(description="The name it declares, when one could be read.")
    file: str = Field(min_length=1, description="The benchmark file, as the benchmark path names it.")
    line: int | None = Field(ge=1, description="Its line in `file` (1-based; a JSON-lines row's line), None where "
                             "the file has no lines to name (a Parquet or JSON-document row).")
    reason: str = Field(min_length=1, description="Why, as `burnqed data prepare` counts it (`unparsable_statement`, "
                        "`undeclarable_name`, `conflicting_statement`, `duplicate_declaration`, `same_statement`, …).")
    detail: str = Field(default="", description="What was found, in words.")
    split: str | None = Field(default=None, description="The split its row or path names (test when none).")

    @property
    def where(self) -> str:
        """`FILE:LINE` (`FILE` alone without a line)."""
        return self.file if self.line is None else f"{self.file}:{self.line}"


class TheoremIndex(BaseModel):
    """A named list of theorems, as stored in a theorem index JSON file (docs/data.md)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="Name of this index (benchmark or dataset).")
    theorems: list[Theorem] = Field(description="The theorems, in a stable order.")
    skipped: list[SkippedDeclaration] = Field(
        default_factory=list, exclude=True,
        description="The benchmark's declarations that are none of `theorems`, when it was read on the fly "
        "(`burnqed.data.theorems.benchmark_index`); an eval lists them. Never written to an index file.")

    @field_validator("theorems")
    @classmethod
    def _unique_names(cls, theorems: list[Theorem]) -> list[Theorem]:
        seen: dict[str, int] = {}
        for position, theorem in enumerate(theorems):
            first = seen.setdefault(theorem.name, position)
            if first != position:
                raise ValueError(f"duplicate theorem name {theorem.name!r}: theorems.{first} and theorems.{position} "
                                 "both declare it (names are unique within an index)")
        return theorems


# -------------------------------------------------------------------------------------------- search


class EdgeOutcome(StrEnum):
    """What happened when one tactic was applied to one node (a trajectory row's `outcome`)."""

    OK = "ok"  # Lean accepted it; goals remain
    CLOSED = "closed"  # Lean reports no goals left (counted as a proof only after verification)
    ERROR = "error"  # Lean rejected it (error message, parse error, worker crash)
    TIMEOUT = "timeout"  # Lean-side interrupt or client watchdog
    REFUSED = "refused"  # the tactic guard refused it; Lean never saw it
    PROMPT_REJECTED = "prompt_rejected"  # no tactic: the policy could not be asked about this node (the prompt
    # is too long for the model's context, or the server refused it); `error` says why


class Label(StrEnum):
    """Training label of an edge: positive iff it lies on any verified proof path."""

    POSITIVE = "positive"
    NEGATIVE = "negative"
    UNKNOWN = "unknown"


@dataclass(slots=True)
class Edge:
    """One tactic applied to one node during search: a trajectory row without the run-level columns.

    Invariants: `node_id` is unique within a theorem's search and larger than `parent_id`; the root
    node is 0 and has no edge. `depth` is the child's depth (parent's + 1). `state_after` is set only
    for OK and CLOSED ("" for CLOSED). `logprob`/`n_tokens` are the tactic's own (not cumulative).
    A PROMPT_REJECTED edge records a failed expansion of its parent: `tactic` is "", no child exists.
    `score` is the child's frontier priority (None when it never entered the frontier). The labels
    are filled in once the theorem's search ends.
    """

    node_id: int
    parent_id: int
    depth: int
    state_before: str
    tactic: str
    state_after: str | None
    outcome: EdgeOutcome
    error: str | None
    logprob: float
    n_tokens: int
    score: float | None
    energy: float | None
    lean_ms: float
    gen_ms: float
    timestamp_ms: int
    on_proof_path: bool = False
    proof_complete: bool = False
    label: Label = Label.UNKNOWN
    # Repair (docs/search.md, "Repair"): a row a revision created holds its place in the chain, `revision` k ≥ 1 and
    # `revises` the id of the row where the proof it revises failed; a fresh attempt's rows hold 0 and None. A row
    # where a whole proof failed holds Lean's messages on it (`burnqed.text.feedback.Feedback` as JSON), else None.
    revision: int = 0
    revises: int | None = None
    feedback: str | None = None


class FailureReason(StrEnum):
    """Why a theorem's search ended without a proof."""

    START_ERROR = "start_error"  # Lean could not elaborate the statement
    EXHAUSTED = "exhausted"  # the frontier ran empty
    MAX_NODES = "max_nodes"  # the expansion budget was spent (step mode)
    MAX_PROOFS = "max_proofs"  # the proof budget was spent: max_proofs whole proofs sampled (whole, hybrid)
    MAX_ROUNDS = "max_rounds"  # hybrid: search.max_rounds node expansions
    TIMEOUT = "timeout"  # the wall-clock budget was spent
    LEAN_ERROR = "lean_error"  # the Lean worker failed and the search could not continue
    UNVERIFIED = "unverified"  # a proof passed the step-level rules but was not compiled (search.verify=false)
    PROMPT_REJECTED = "prompt_rejected"  # the frontier ran empty after the policy refused prompts (too long)
    RECHECK_FAILED = "recheck_failed"  # eval --resume: a committed proof did not verify again (the part was edited)


class BudgetUsage(BaseModel):
    """What one search had spent when its budget reached a mark (eval asks for one per budget rung)."""

    model_config = ConfigDict(extra="forbid")

    budget: int = Field(ge=1, description="The mark, in the mode's budget unit (expansions or proofs sampled).")
    tokens: int = Field(ge=0, description="Tokens generated by then (every completion, used or not).")
    lean_calls: int = Field(ge=0, description="Lean requests sent by then.")
    time_s: float = Field(ge=0.0, description="Wall time by then.")


class UsageCurve(BaseModel):
    """What a search (or a theorem's attempts together) had spent after every unit of budget: `tokens[k - 1]` tokens
    generated and `lean_calls[k - 1]` Lean requests sent once k units (expansions, or proofs sampled) were fully
    spent, recorded where a search with budget k would have stopped, up to where the search ended. Beyond its end
    the totals hold (`at`)."""

    model_config = ConfigDict(extra="forbid")

    tokens: list[int] = Field(default_factory=list, description="Tokens generated by the end of each unit of budget.")
    lean_calls: list[int] = Field(default_factory=list, description="Lean requests sent by the end of each unit.")

    @model_validator(mode="after")
    def _cumulative(self) -> UsageCurve:
        if len(self.tokens) != len(self.lean_calls):
            raise ValueError(f"tokens has {len(self.tokens)} entries, lean_calls {len(self.lean_calls)}: one each "
                             "per unit of budget")
        for name, values in (("tokens", self.tokens), ("lean_calls", self.lean_calls)):
            if values and (values[0] < 0 or any(b < a for a, b in pairwise(values))):
                raise ValueError(f"{name} must be non-negative and non-decreasing (cumulative), got {values[:8]}…")
        return self

    def at(self, budget: int, totals: tuple[int, int]) -> tuple[int, int]:
        """(tokens, Lean requests) within `budget` (≥ 1) units: the curve's entry, or `totals` beyond its end."""
        if budget < 1:
            raise ValueError(f"budget must be at least 1, got {budget}")
        if budget <= len(self.tokens):
            return self.tokens[budget - 1], self.lean_calls[budget - 1]
        return totals


# The search modes whose budget counts node expansions (`nodes_expanded`): step, and sketch, whose planner requests and
# subgoal searches spend step's unit; whole and hybrid count proofs sampled (`proofs_sampled`).
EXPANSION_MODES: frozenset[SearchMode] = frozenset({SearchMode.STEP, SearchMode.SKETCH})


class SketchOutcome(StrEnum):
    """What became of one sketch the planner wrote (a `SketchAttempt`'s `outcome`)."""

    UNREADABLE = "unreadable"  # no sketch in the completion (`text.sketch.read_sketch` says why in `detail`)
    REFUSED = "refused"  # the tactic guard refused its skeleton (or a hole); Lean never saw it
    ERROR = "error"  # Lean rejected it (its messages in `detail`), or the worker failed on it
    ELABORATED = "elaborated"  # Lean made one subgoal per hole: `subgoals` says what their searches gave


class SubgoalSource(StrEnum):
    """Where a proved subgoal's proof came from (a `SubgoalAttempt`'s `source`)."""

    SEARCH = "search"  # its own search in this sketch
    CACHE = "cache"  # the run's subgoal cache, re-checked in this context
    KEPT = "kept"  # an earlier sketch of this theorem proved the same subgoal in the same context (re-planning)


class SubgoalAttempt(BaseModel):
    """One subgoal of an elaborated sketch and what its search gave."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The hole's name (`have NAME : P := by sorry`), as Lean reads it.")
    statement: str = Field(description="The hole's statement as the sketch wrote it.")
    goal: str = Field(description="The subgoal as Lean printed it: its context (the theorem's binders and the holes "
                      "before it) and its target.")
    proved: bool = Field(description="A proof of it was found and accepted by Lean in this context.")
    tactics: list[str] = Field(default_factory=list, description="That proof's tactics, in order (empty when not "
                               "proved).")
    source: SubgoalSource | None = Field(default=None, description="Where the proof came from; None if not proved.")
    spent: int = Field(default=0, ge=0, description="Budget its search spent, in the subgoal search's unit.")
    detail: str | None = Field(default=None, description="Why it was not proved (the search's failure reason, or "
                               "Lean's message when it was refuted).")


class SketchAttempt(BaseModel):
    """One sketch of a sketch search: what the planner wrote, what Lean made of it, and its subgoals' searches."""

    model_config = ConfigDict(extra="forbid")

    round: int = Field(ge=0, description="0 for a first plan; k for the k-th re-plan (search.sketch_rounds).")
    body: str = Field(description="The sketch as the planner wrote it (the proof body, dedented); the completion's "
                      "text when it held no sketch.")
    outcome: SketchOutcome = Field(description="What became of the sketch.")
    detail: str | None = Field(default=None, description="Why it is unreadable, refused or an error.")
    subgoals: list[SubgoalAttempt] = Field(default_factory=list, description="One per hole, in the sketch's order "
                                           "(elaborated sketches only).")
    tokens: int = Field(default=0, ge=0, description="Tokens the planner generated for this sketch.")
    verified: bool = Field(default=False, description="Every subgoal was proved and the assembled proof passed the "
                           "soundness path (guard, compile, axioms check): the theorem's proof.")


class TheoremResult(BaseModel):
    """The outcome of one theorem's search: what trajectories' manifests and eval results store."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Theorem name.")
    mode: SearchMode = Field(default=SearchMode.STEP, description="The search mode that produced this result.")
    proved: bool = Field(description="A proof passed every soundness rule, the compile included.")
    unverified: bool = Field(
        default=False,
        description="A proof passed the step-level rules but was never compiled (search.verify=false): `proof` "
        "and `tactics` hold it, `proved` is false, failure_reason is 'unverified'. It is neither counted nor "
        "trained on; eval compiles every proof it counts.",
    )
    proof: str | None = Field(
        default=None, description="The proof text (Lean source): verified when proved, else the unverified one."
    )
    tactics: list[str] = Field(default_factory=list, description="The proof's tactics, in order.")
    declaration: str | None = Field(
        default=None,
        description="The theorem's declaration as this search's prompts showed it (`theorem NAME <binders> : T`, "
        "`Theorem.declaration`): training rebuilds the search's prompts from it, never from the proof text.",
    )
    header: str | None = Field(
        default=None, description="The theorem's header (opens, options) as the whole-proof prompt showed it."
    )
    answer: str | None = Field(
        default=None, description="For a theorem with an answer slot (`Theorem.answer`): the answer `proof` gives it "
        "(task produced: the value the completion wrote, filled into `proof`'s header) or the one written into the "
        "statement (task given); None for every other theorem, and for an open answer no proof was found for.")
    failure_reason: FailureReason | None = Field(default=None, description="Why no proof, when not proved.")
    detail: str | None = Field(default=None, description="More on the failure (e.g. the start error).")
    nodes_expanded: int = Field(
        default=0, description="Node expansions spent (step mode's budget unit; hybrid: rounds; sketch: planner "
        "requests plus its subgoal searches' expansions or rounds, its budget unit; whole: 0)."
    )
    proofs_sampled: int = Field(
        default=0, description="Whole proofs sampled (the budget unit of whole and hybrid modes; step: 0)."
    )
    budget_at_proof: int | None = Field(
        default=None,
        description="Budget spent when the proof was found, in the mode's unit: expansions (step, sketch), or proofs "
        "sampled up to and including the one that gave the proof (whole, hybrid).",
    )
    edges: int = Field(default=0, description="Tactics applied (trajectory rows).")
    depth: int | None = Field(default=None, description="Length of the proof in tactics.")
    rejected_proofs: int = Field(default=0, description="Closing paths that failed verification.")
    rejected_prompts: int = Field(
        default=0, description="Expansions the policy could not answer (prompt too long for the model's context)."
    )
    time_s: float = Field(default=0.0, description="Wall time of the search.")
    policy_s: float = Field(default=0.0, description="Time waiting for the policy.")
    lean_s: float = Field(default=0.0, description="Time waiting for Lean (tactics and verification).")
    value_s: float = Field(default=0.0, description="Time waiting for the value model.")
    tokens: int = Field(default=0, description="Tokens the policy generated for this search (every completion, used "
                        "or not: duplicates, empty and cut-off answers included).")
    lean_calls: int = Field(default=0, description="Requests sent to Lean for this search (tactics, goal starts and "
                            "prints, compiles, replays after a worker restart); a worker's own loads of the "
                            "theorem's header scope before them are not counted.")
    usage: list[BudgetUsage] = Field(
        default_factory=list,
        description="What the search had spent at each budget mark it was given (eval's budgets), ascending; a mark "
        "beyond the end of the search records its totals. Empty without marks.",
    )
    curve: UsageCurve | None = Field(
        default=None,
        description="Tokens and Lean requests after every unit of budget up to the search's end (beyond it: `tokens` "
        "and `lean_calls`). None in results of a burnqed that did not record it.",
    )
    repaired: int = Field(
        default=0, ge=0,
        description="Failed whole proofs (whole mode) or failed attempts from a state (hybrid) the policy was asked to "
        "revise with Lean's messages (search.repair_rounds; docs/search.md, 'Repair').",
    )
    revisions: int = Field(
        default=0, ge=0, description="Revisions sampled (each one of proofs_sampled; their tokens are in tokens)."
    )
    revision_at_proof: int | None = Field(
        default=None, ge=0,
        description="Where the counted proof stands in its repair chain: 0 a fresh attempt, k its k-th revision; "
        "None when not proved.",
    )
    sketches: list[SketchAttempt] = Field(
        default_factory=list,
        description="Sketch mode: every sketch the planner wrote, in order, with its subgoals' searches (what the "
        "report counts: sketches tried, subgoals proved, re-plans, cache hits). Empty in every other mode.",
    )

    def spent(self) -> int:
        """Budget spent, in the mode's unit."""
        return self.nodes_expanded if self.mode in EXPANSION_MODES else self.proofs_sampled


def stable_split(name: str, valid_fraction: float, salt: str = "burnqed") -> str:
    """'valid' for about `valid_fraction` of theorem names, else 'train'; the same on every machine and run
    (sha256 of salt + name, never Python's randomised hash)."""
    digest = hashlib.sha256(f"{salt}\0{name}".encode()).digest()
    unit = int.from_bytes(digest[:8], "big") / 2**64
    return "valid" if unit < valid_fraction else "train"

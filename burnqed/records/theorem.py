"""A theorem as an index holds it, and its name: `Theorem`, `TheoremIndex`, the answer slot, the name rules, the split.

    index = TheoremIndex.model_validate_json(path.read_text())    # validated on load (docs/data.md)
    declaration = index.theorems[0].declaration()                 # `theorem NAME <binders> : T`
    lean_name_problem("foo.fun")                                  # why Lean cannot declare it, or None
    stable_split(name, 0.1)                                       # "valid" or "train", the same everywhere

Statements are read at the door as a Lean user writes them (`Theorem`'s docstring); a name is a Lean identifier
(`NAME_RULE`). No I/O here.
"""

from __future__ import annotations

import hashlib
import re
from enum import StrEnum
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from burnqed.records.enums import DeclarationForm
from leankit.answer import fill_slot
from leankit.declaration import scoped_header
from leankit.statements import read_statement, split_leading_binders, strip_comments
from leankit.text import ID_FIRST, ID_REST, doc_comment, doc_comment_problem, find_depth0, mask_comments


def split_signature(signature: str) -> tuple[str, str] | None:
    """(binders, type) of a signature `(x : ℝ) (h : p) : T` (binders "" for `: T`); None without a type. Comments
    are read as Lean reads them and left out (`leankit.statements.strip_comments`)."""
    signature = strip_comments(signature)
    colon = find_depth0(signature, ":", not_followed_by="=")
    if colon < 0 or not signature[colon + 1 :].strip():
        return None
    return " ".join(signature[:colon].split()), " ".join(signature[colon + 1 :].split())


_IDENTIFIER = re.compile(f"{ID_FIRST}{ID_REST}*")  # one component of a name
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

    Statements are read at the door, as a Lean user writes them (`leankit.statements.read_statement`): the record holds
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


def stable_split(name: str, valid_fraction: float, salt: str = "burnqed") -> str:
    """'valid' for about `valid_fraction` of theorem names, else 'train'; the same on every machine and run
    (sha256 of salt + name, never Python's randomised hash)."""
    digest = hashlib.sha256(f"{salt}\0{name}".encode()).digest()
    unit = int.from_bytes(digest[:8], "big") / 2**64
    return "valid" if unit < valid_fraction else "train"

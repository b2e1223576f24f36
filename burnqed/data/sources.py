"""Converters from the public data sources' own schemas to theorem items (name, ∀-statement, header, proofs to
replay, recorded tactic steps). One function per `SourceSpec.kind`; nothing here talks to Lean.

    items = convert_row("goedel-proofs", row.data)     # Item, or Reject("missing_column:full_proof")

The kinds and the columns each reads are docs/data.md's "Source kinds" table; naming, docstrings and whole proofs
are its "From a formal statement to an index entry". Every item carries its index entry as one
`records.theorem.Theorem`, built here once; the collector merges entries with `merge_theorems` only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from burnqed.records.theorem import Answer, AnswerTask, Theorem, lean_name_problem
from leankit.answer import answer_slot, drop_slot, inline_answer, reference_answer, uses_name
from leankit.declaration import (
    Declaration,
    body_tactics,
    parse_declaration,
    proof_tactics,
    strip_imports,
    uses_sorry,
)
from leankit.statements import adjacent_operators, read_statement

Kind = str
NO_GOALS = "no goals"


@dataclass(frozen=True, slots=True)
class TracedStep:
    """A recorded (state before, tactic, state after) step of an already-traced source."""

    state_before: str
    tactic: str
    state_after: str | None
    depth: int | None  # None: the position within the theorem
    source: str | None = None  # a per-row source name (the `pairs` format's `source`), if any


@dataclass(slots=True)
class Item:
    """What one row says about one theorem: its index entry and where its pairs come from. Rows of one theorem
    are merged by the collector."""

    theorem: Theorem  # the index entry; `split` is a split the source fixes (miniF2F test/valid), None = by hash
    row_split: str | None = None  # the row's own `split` value, for `SourceSpec.split` filtering
    proofs: list[tuple[str, ...]] = field(default_factory=list)
    traced: list[TracedStep] = field(default_factory=list)
    proof_rejects: list[str] = field(default_factory=list)  # reasons for proofs dropped here
    file: str | None = None  # the file of its row, as the source's path names it (None: not from a file)
    line: int | None = None  # the row's line in `file`, where it has one

    @property
    def name(self) -> str:
        return self.theorem.name

    @property
    def statement(self) -> str | None:
        return self.theorem.statement

    @property
    def header(self) -> str | None:
        return self.theorem.header

    @property
    def split(self) -> str | None:
        return self.theorem.split


@dataclass(frozen=True, slots=True)
class Reject:
    """Why a row was not used: a stable reason key (counted in the report) and a detail line."""

    reason: str
    detail: str = ""
    line: int = 0  # where in the row the problem is, in lines after its first (a statement's syntax error)


REQUIRED_COLUMNS: dict[Kind, tuple[str, ...]] = {
    "lean-workbook": ("formal_statement",),
    "goedel-pset": ("formal_statement",),
    "goedel-proofs": ("full_proof",),
    "numina-lean": ("formal_statement",),
    "benchmark": ("formal_statement",),
    "lean-github": ("full_name", "tactic", "state_before"),
    "pairs": ("theorem", "state_before", "tactic"),
}


# A required column another column may stand in for: a prototype index row has a ∀-form `statement`.
ALTERNATIVE_COLUMNS: dict[tuple[Kind, str], str] = {("benchmark", "formal_statement"): "statement"}


def convert_row(kind: Kind, data: Mapping[str, Any]) -> Item | Reject:
    """Convert one row of a source of `kind` (required columns are checked first)."""
    for required in REQUIRED_COLUMNS[kind]:
        alternative = ALTERNATIVE_COLUMNS.get((kind, required))
        column = alternative if required not in data and alternative is not None and alternative in data else required
        if column not in data:
            return Reject(f"missing_column:{column}", f"no column {column!r}")
        value = data[column]
        if value is None or (isinstance(value, str) and not value.strip()):
            return Reject(f"empty_field:{column}", f"{column!r} is empty")
        if not isinstance(value, str):
            return Reject("malformed_row", f"{column!r} is a {type(value).__name__}, not a string")
    if "state_before" in REQUIRED_COLUMNS[kind] and data["state_before"].strip() == NO_GOALS:
        return Reject("no_goals_state", "a step recorded on a closed state ('no goals')")
    return _CONVERTERS[kind](data)


# ------------------------------------------------------------------------------------ statement sources


def _statement_item(data: Mapping[str, Any], text: str, name_column: str) -> tuple[Item, Declaration] | Reject:
    """The theorem declared in `text` (a `formal_statement`), named by `name_column` when present."""
    given = _optional_str(data, name_column)
    decl = parse_declaration(text, given)
    if decl is None:
        return Reject("unparsable_statement", "no `theorem … : type` declaration found")
    if (syntax := _syntax_error(decl)) is not None:
        return syntax
    name = given or decl.name
    if given is not None and decl.name is not None and lean_name_problem(given) is not None:
        name = decl.name  # an id Lean cannot declare (NuminaMath's uuids) gives way to the name the statement declares
    if not name:
        return Reject("unnamed_theorem", "no name column and the declaration is an `example`")
    if (undeclarable := _undeclarable(name)) is not None:
        return undeclarable
    header = strip_imports(_optional_str(data, "header") or decl.header)
    docstring = decl.docstring or read_statement(_optional_str(data, "informal_prefix") or "").docstring
    theorem = Theorem(name=name, statement=decl.statement, signature=decl.signature, header=header,
                      docstring=docstring)
    return Item(theorem, row_split=_optional_str(data, "split")), decl


def _syntax_error(decl: Declaration) -> Reject | None:
    """A statement Lean cannot parse whatever notation is in scope (`leankit.statements.adjacent_operators`:
    `x + = 3`), as a `syntax_error` at its line, counted from the declaration's keyword; None otherwise. Only the
    statement is read (after the keyword, to the `:=`)."""
    start, end = decl.source_statement if decl.source_statement[0] >= 0 else (0, len(decl.source))
    found = adjacent_operators(decl.source[start:end])
    if found is None:
        return None
    offset, pair = found
    return Reject("syntax_error", f"a syntax error in the statement: `{pair}` is two operators with no term between "
                  "them, which no Lean parses", line=decl.source[: start + offset].count("\n"))


def _add_proof(item: Item, decl: Declaration, proof: str) -> None:
    """Add a whole proof (a declaration or a bare body) of `decl` to `item`, or record why it is dropped."""
    proof_decl = parse_declaration(proof, decl.name)
    if proof_decl is not None:
        if _key(proof_decl.statement) != _key(decl.statement):
            item.proof_rejects.append("proof_states_another_theorem")
            return
        tactics = proof_tactics(proof_decl)
    else:
        tactics = body_tactics(proof)
    if not tactics:
        item.proof_rejects.append("empty_proof")
        return
    item.proofs.append(tuple(tactics))


def _lean_workbook(data: Mapping[str, Any]) -> Item | Reject:
    converted = _statement_item(data, data["formal_statement"], "id")
    if isinstance(converted, Reject):
        return converted
    item, decl = converted
    raw = data.get("proof")
    proofs = raw if isinstance(raw, list) else [raw] if isinstance(raw, str) else []
    for proof in proofs:
        if isinstance(proof, str) and proof.strip():
            _add_proof(item, decl, proof)
    if decl.has_proof:
        _add_proof(item, decl, decl.source)
    return item


def _goedel_pset(data: Mapping[str, Any]) -> Item | Reject:
    converted = _statement_item(data, data["formal_statement"], "problem_id")
    return converted if isinstance(converted, Reject) else converted[0]


def _goedel_proofs(data: Mapping[str, Any]) -> Item | Reject:
    converted = _statement_item(data, data["full_proof"], "problem_id")
    if isinstance(converted, Reject):
        return converted
    item, decl = converted
    if decl.has_proof:
        _add_proof(item, decl, decl.source)
    else:
        item.proof_rejects.append("empty_proof")
    return item


def _numina(data: Mapping[str, Any]) -> Item | Reject:
    converted = _statement_item(data, data["formal_statement"], "uuid")
    if isinstance(converted, Reject):
        return converted
    item, decl = converted
    prover = _optional_str(data, "formal_proof")
    if prover:
        _add_proof(item, decl, prover)
    human = _optional_str(data, "formal_ground_truth")
    if human and (_optional_str(data, "ground_truth_type") or "complete") == "complete":
        _add_proof(item, decl, human)
    return item


def _minif2f(data: Mapping[str, Any]) -> Item | Reject:
    """A benchmark row: a declaration (`formal_statement`) or a prototype index entry (∀-form `statement`)."""
    if not isinstance(data.get("formal_statement"), str):
        return _prototype_entry(data)
    # Names are kept: the `name` column, else the name the statement declares; the id only when there is neither
    # (an id-only layout's ids may differ from the declared names).
    name = _optional_str(data, "name") or _declared_name(data["formal_statement"]) or _optional_str(data, "id")
    converted = _statement_item({**data, "name": name}, data["formal_statement"], "name")
    if isinstance(converted, Reject):
        return converted
    item, decl = converted
    item.theorem = _with_answer_slot(item.theorem.model_copy(update={"split": normalize_split(item.row_split)}),
                                     data)
    if (missing := _undeclared_slot(item.theorem)) is not None:
        return missing
    proofs = [proof for column in ("formal_proof", "proof") if (proof := _optional_str(data, column))]
    if decl.has_proof:
        proofs.append(decl.source)
    for proof in proofs:
        if uses_sorry(proof):
            item.proof_rejects.append("sorry_proof")  # a benchmark statement stays; only the proof goes
        else:
            _add_proof(item, decl, proof)
    return item


def _prototype_entry(data: Mapping[str, Any]) -> Item | Reject:
    name = _optional_str(data, "name") or _optional_str(data, "id")
    if name is None:
        return Reject("unnamed_theorem", "a statement row without a name or id")
    if (undeclarable := _undeclarable(name)) is not None:
        return undeclarable
    # Comments out before the spacing is collapsed: a `--` comment would otherwise swallow the lines after it.
    statement = read_statement(data["statement"])
    if statement.unterminated is not None or not statement.code:
        left = f"ends inside an unterminated {statement.unterminated}" if statement.unterminated else "is all comments"
        return Reject("unparsable_statement", f"the statement {left}")
    theorem = Theorem(
        name=name,
        statement=" ".join(statement.code.split()),
        docstring=statement.docstring,
        signature=_optional_str(data, "signature"),
        header=strip_imports(_optional_str(data, "header")),
        split=normalize_split(_optional_str(data, "split")),
    )
    theorem = _with_answer_slot(theorem, data)
    if (missing := _undeclared_slot(theorem)) is not None:
        return missing
    return Item(theorem, row_split=_optional_str(data, "split"))


# The answer-given entry of an answer-bearing theorem is named NAME + this (docs/data.md, "Answer-bearing problems").
GIVEN_SUFFIX = "_given"


def _with_answer_slot(theorem: Theorem, data: Mapping[str, Any]) -> Theorem:
    """`theorem` marked answer-bearing when its statement uses an answer slot of its header (`leankit.answer`): task
    produced, the reference answer from the row's `answer` column, else from the comment line under the slot in the
    row's header as written."""
    if theorem.statement is None:
        return theorem
    slot = answer_slot(theorem.header, theorem.statement)
    if slot is None:
        return theorem
    reference = _optional_str(data, "answer") or reference_answer(_optional_str(data, "header") or "", slot.name)
    answer = Answer(name=slot.name, type=slot.type, task=AnswerTask.PRODUCED,
                    reference=reference.strip() if reference else None)
    return theorem.model_copy(update={"answer": answer})


SLOT_SUFFIX = "_solution"  # PutnamBench names a theorem's answer slot NAME_solution


def _undeclared_slot(theorem: Theorem) -> Reject | None:
    """`undeclared_answer_slot` when the statement uses `NAME_solution` (NAME: the theorem's own name, PutnamBench's
    answer slot) and nothing before it names it: the file lost its `abbrev NAME_solution … := sorry` line, and
    Lean would refuse the start (unknown identifier)."""
    if theorem.answer is not None or theorem.statement is None:
        return None
    slot = theorem.name.rsplit(".", 1)[-1] + SLOT_SUFFIX
    if not uses_name(theorem.statement, slot) or uses_name(theorem.header or "", slot):
        return None
    return Reject("undeclared_answer_slot", f"its statement uses {slot}, which nothing before it declares (its "
                  f"answer slot line, `abbrev {slot} : TYPE := sorry`, is missing): Lean cannot start it")


def answer_given(item: Item) -> Item | None:
    """The answer-given entry of an answer-bearing benchmark item (PutnamBench's `rewrite_solutions.py` form): named
    NAME + `GIVEN_SUFFIX`, the slot dropped from the header and every use of its constant in the statement, the
    signature and the header's later definitions written `((VALUE) : TYPE)`, with the reference as VALUE; no proofs
    (those prove the theorem as written). None when the item has no slot or its slot no reference answer."""
    theorem = item.theorem
    answer = theorem.answer
    if answer is None or answer.reference is None or theorem.header is None or theorem.statement is None:
        return None
    slot = answer_slot(theorem.header, theorem.statement)
    if slot is None:
        return None
    value = answer.reference
    header = drop_slot(theorem.header, slot.name)
    given = Theorem(
        name=theorem.name + GIVEN_SUFFIX,
        statement=inline_answer(theorem.statement, slot, value),
        signature=inline_answer(theorem.signature, slot, value) if theorem.signature is not None else None,
        header=inline_answer(header, slot, value) if header is not None else None,
        docstring=theorem.docstring,
        source=theorem.source,
        split=theorem.split,
        answer=answer.model_copy(update={"task": AnswerTask.GIVEN, "value": value}),
    )
    return Item(given, row_split=item.row_split, file=item.file, line=item.line)


def _declared_name(text: str) -> str | None:
    decl = parse_declaration(text)
    return decl.name if decl is not None else None


# -------------------------------------------------------------------------------------- traced sources


def _lean_github(data: Mapping[str, Any]) -> Item | Reject:
    if (undeclarable := _undeclarable(data["full_name"])) is not None:
        return undeclarable
    step = TracedStep(
        state_before=data["state_before"],
        tactic=data["tactic"],
        state_after=_optional_str(data, "state_after"),
        depth=None,
    )
    return Item(Theorem(name=data["full_name"], statement=_optional_str(data, "statement")), traced=[step])


def _pairs(data: Mapping[str, Any]) -> Item | Reject:
    if (undeclarable := _undeclarable(data["theorem"])) is not None:
        return undeclarable
    depth = data.get("depth")
    if depth is not None and (not isinstance(depth, int) or isinstance(depth, bool) or depth < 0):
        return Reject("malformed_row", f"'depth' is {depth!r}, not a non-negative integer")
    split = _optional_str(data, "split")
    step = TracedStep(
        state_before=data["state_before"],
        tactic=data["tactic"],
        state_after=_optional_str(data, "state_after"),
        depth=depth,
        source=_optional_str(data, "source"),
    )
    theorem = Theorem(name=data["theorem"], statement=_optional_str(data, "statement"),
                      split="test" if split == "test" else None)
    return Item(theorem, row_split=split, traced=[step])


_CONVERTERS: dict[Kind, Callable[[Mapping[str, Any]], Item | Reject]] = {
    "lean-workbook": _lean_workbook,
    "goedel-pset": _goedel_pset,
    "goedel-proofs": _goedel_proofs,
    "numina-lean": _numina,
    "benchmark": _minif2f,
    "lean-github": _lean_github,
    "pairs": _pairs,
}


# -------------------------------------------------------------------------------------------- helpers


def normalize_split(value: str | None) -> str | None:
    """`valid`/`validation`/`val`/`dev` → valid, `test` → test, `train` → train, anything else → None."""
    if value is None:
        return None
    lowered = value.strip().lower()
    if lowered in ("valid", "validation", "val", "dev"):
        return "valid"
    if lowered in ("test", "train"):
        return lowered
    return None


def _undeclarable(name: str) -> Reject | None:
    """A row whose theorem Lean could not declare under its name (`records.theorem.lean_name_problem`)."""
    problem = lean_name_problem(name)
    return None if problem is None else Reject("undeclarable_name", f"theorem name {problem}")


def _optional_str(data: Mapping[str, Any], column: str) -> str | None:
    value = data.get(column)
    return value if isinstance(value, str) and value.strip() else None


def _key(statement: str) -> str:
    return "".join(statement.split())

"""Answer slots: a definition in a theorem's header whose value is `sorry` and which the theorem uses is the answer
the problem asks for (PutnamBench's `abbrev putnam_X_solution : T := sorry`, the answer written on the comment line
under it). Pure text work, for data preparation (marking and the answer-given form) and for search (filling it).

    slot = answer_slot(header, statement)       # Slot(name="putnam_easy_solution", type="ℕ", …) or None
    reference_answer(text, slot.name)           # "2": the `-- 2` line under the slot in the file as published
    fill_slot(header, slot.name, "2")           # the header with `abbrev putnam_easy_solution : ℕ := (2)`
    drop_slot(header, slot.name)                # the header without the slot (the answer-given form)
    inline_answer("1 + 1 = putnam_easy_solution", slot, "2")   # "1 + 1 = ((2) : ℕ)" (PutnamBench's rewrite)
    head, tail = split_at_slot(header, slot.name)   # head ends with the slot's `:=`, tail is the header after it

The forms and why: docs/data.md, "Answer-bearing problems".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from leankit.commands import term_problem
from leankit.text import LINE_COMMENT, mask_comments, normalize_newlines, regions

# A definition at column 0 whose value is `sorry` (attributes and modifiers before it), without binders, within its
# command (no line of it starts at column 0): the slot.
_SLOT = re.compile(
    r"^(?:@\[[^\]\n]*\][ \t]*)?(?:(?:noncomputable|private|protected)[ \t]+)*(?P<keyword>abbrev|def)[ \t]+"
    r"(?P<name>[^\s:(\[{⟨⦃]+)[ \t]*:(?P<type>(?:(?!:=|\n\S).)+?):=[ \t]*(?:\n[ \t]+)?(?P<sorry>sorry)(?![\w'])",
    re.MULTILINE | re.DOTALL,
)
_COMMENT_LINE = re.compile(r"[ \t]*--(?P<text>[^\n]*)")


@dataclass(frozen=True, slots=True)
class Slot:
    """One answer slot of a header: its constant, its type (whitespace collapsed), its keyword, and where its
    `sorry` stands in the header text (offsets into the header as given)."""

    name: str
    type: str
    keyword: str
    sorry_start: int
    sorry_end: int
    assign: int  # where its `:=` starts


def find_slots(header: str | None) -> list[Slot]:
    """Every definition of `header` (comments ignored) whose value is exactly `sorry`, in order."""
    if not header:
        return []
    masked = mask_comments(header)
    slots: list[Slot] = []
    for found in _SLOT.finditer(masked):
        assign = masked.index(":=", found.end("type"))
        slots.append(Slot(name=found.group("name"), type=" ".join(found.group("type").split()),
                          keyword=found.group("keyword"), sorry_start=found.start("sorry"),
                          sorry_end=found.end("sorry"), assign=assign))
    return slots


def uses_name(text: str, name: str) -> bool:
    """`text` (comments ignored) names the constant `name` as a whole identifier."""
    return _name_pattern(name).search(mask_comments(text)) is not None


def answer_slot(header: str | None, statement: str) -> Slot | None:
    """The slot the theorem's `statement` uses (the first, when several do); None when it uses none."""
    for slot in find_slots(header):
        if uses_name(statement, slot.name):
            return slot
    return None


def reference_answer(text: str, name: str) -> str | None:
    """The answer a file writes on the comment line right under slot `name` (`-- 2`), as PutnamBench's files do
    (`scripts/rewrite_solutions.py` reads the same line); None when that line is no comment or is empty."""
    text = normalize_newlines(text)
    for slot in find_slots(text):
        if slot.name != name:
            continue
        line_end = text.find("\n", slot.sorry_end)
        if line_end < 0 or text[slot.sorry_end:line_end].strip():
            return None
        found = _COMMENT_LINE.match(text, line_end + 1)
        answer = found.group("text").strip() if found is not None else ""
        return answer or None
    return None


def _slot(header: str, name: str) -> Slot:
    for slot in find_slots(header):
        if slot.name == name:
            return slot
    raise ValueError(f"the header has no answer slot {name!r} (a definition whose value is `sorry`)")


def fill_slot(header: str, name: str, value: str) -> str:
    """`header` with slot `name`'s `sorry` replaced by `(VALUE)`: one term whatever VALUE says, since Lean ends a
    definition's value at the first token that cannot continue it and reads what follows as commands of its own. A
    value of several lines is indented under the definition; a value whose last line ends in a line comment gets its
    `)` on a line of its own (the comment would swallow it). ValueError when there is no such slot, or when `value`
    is no single term (`leankit.commands.term_problem`: unbalanced brackets, a command keyword, an unterminated
    comment or string; docs/lean.md, "Answers")."""
    slot = _slot(header, name)
    if not value.strip():
        raise ValueError(f"no value to fill the answer slot {name!r} with")
    problem = term_problem(value)
    if problem is not None:
        raise ValueError(f"the value for {name!r} is not one term: {problem}")
    lines = value.strip().split("\n")
    written = lines[0] + "".join(f"\n  {line}" if line.strip() else "\n" for line in lines[1:])
    closer = "\n  )" if _ends_in_line_comment(written) else ")"
    return f"{header[: slot.sorry_start]}({written}{closer}{header[slot.sorry_end :]}"


def _ends_in_line_comment(text: str) -> bool:
    """Whether a `--` comment runs to the end of `text` (what is written after it on that line is comment)."""
    return any(region.kind == LINE_COMMENT and region.end == len(text) for region in regions(text))


def split_at_slot(header: str, name: str) -> tuple[str, str]:
    """`header` cut right after slot `name`'s `:=`, and what follows its `sorry` (ValueError without the slot)."""
    slot = _slot(header, name)
    return header[: slot.assign + 2], header[slot.sorry_end :]


def drop_slot(header: str, name: str) -> str | None:
    """`header` without slot `name`'s command (up to the next column-0 command); None when nothing is left."""
    slot = _slot(header, name)
    masked = mask_comments(header)
    begin = masked.rfind("\n", 0, slot.assign) + 1
    while begin > 0 and _SLOT.match(masked, begin) is None:
        begin = masked.rfind("\n", 0, begin - 1) + 1
    after = re.search(r"^\S", masked[slot.sorry_end :], re.MULTILINE)
    end = len(header) if after is None else slot.sorry_end + after.start()
    kept = "\n".join(line for line in (header[:begin] + header[end:]).split("\n") if line.strip())
    return kept or None


def inline_answer(text: str, slot: Slot, value: str) -> str:
    """`text` with every use of the slot's constant written as `((VALUE) : TYPE)`, PutnamBench's answer-given form
    (`scripts/rewrite_solutions.py`), as whole identifiers only (comments and other names untouched)."""
    masked = mask_comments(text)
    written = inlined(value, slot.type)
    out: list[str] = []
    last = 0
    for found in _name_pattern(slot.name).finditer(masked):
        out.append(text[last : found.start()])
        out.append(written)
        last = found.end()
    out.append(text[last:])
    return "".join(out)


def inlined(value: str, type_: str) -> str:
    """How the answer-given form writes an answer: `((VALUE) : TYPE)`, VALUE on one line."""
    return f"(({' '.join(value.split())}) : {type_})"


def _name_pattern(name: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w'.!?])" + re.escape(name) + r"(?![\w'!?])")

"""Lean source files for the replay server's `frontend.process`: top-level commands, theorem
declarations and the tactic blocks of their `by` bodies."""

from __future__ import annotations

import re
from dataclasses import dataclass

from leankit import declaration as shared
from leankit.declaration import COMMAND_START
from leankit.statements import doc_comments
from leankit.text import SORRY_WORDS, mask_comments
from minilean.replay.tactic_reader import block_depth

# ---------------------------------------------------------------------------------------------------
# Lean source files: commands, declarations, tactic blocks. The declaration itself (name, binders, type, where
# its `:=` is) is read by burnqed's one declaration parser, `leankit.declaration`; this module adds the
# positions Lean reports and the tactic blocks the replay runs.


@dataclass(frozen=True)
class Command:
    """One top-level command of a file, with its UTF-8 byte boundary and first line (1-based)."""

    text: str
    start_byte: int
    end_byte: int
    line: int


@dataclass(frozen=True)
class Block:
    """A top-level tactic of a `by` block and where it starts (line 1-based, column 0-based)."""

    pos: tuple[int, int]
    text: str


@dataclass(frozen=True)
class Declaration:
    keyword: str
    name: str
    label_span: tuple[tuple[int, int], tuple[int, int]]
    statement: str | None
    binders: list[str]
    target: str | None
    blocks: list[Block]
    term: str | None
    term_pos: tuple[int, int]
    by_pos: tuple[int, int]
    end_pos: tuple[int, int]
    sorry_spans: list[tuple[int, int]]


def split_commands(text: str, header: bool = True) -> list[Command]:
    """Commands after the `import` header: each runs from its keyword to the next command's keyword, or from the
    doc comment `/-- … -/` at column 0 that opens it (to Lean a doc comment is a token of the declaration, so its
    unit's boundary starts there). With `header=False` (the REPL's environment, no header read) `import` lines
    are commands like any other."""
    masked = mask_comments(text)
    doc_starts = {region.start for region in doc_comments(text)}
    starts: list[tuple[int, int]] = []  # (char offset, line number)
    pending: tuple[int, int] | None = None  # a doc comment waiting for its declaration
    offset = 0
    in_header = header
    for number, line in enumerate(masked.split("\n"), start=1):
        if offset in doc_starts:
            pending = pending or (offset, number)
        elif not line.strip() or (in_header and re.match(r"(import|prelude)\b", line)):
            pass
        elif (not line[0].isspace() and COMMAND_START.match(line)) or not starts:
            in_header = False
            starts.append(pending or (offset, number))
            pending = None
        else:
            in_header = False
        offset += len(line) + 1
    commands = []
    for index, (start, number) in enumerate(starts):
        end = starts[index + 1][0] if index + 1 < len(starts) else len(text)
        start_byte = len(text[:start].encode("utf-8"))
        end_byte = start_byte + len(text[start:end].encode("utf-8"))
        commands.append(Command(text=text[start:end], start_byte=start_byte, end_byte=end_byte, line=number))
    return commands


def _position(command: Command, index: int) -> tuple[int, int]:
    before = command.text[:index]
    line = command.line + before.count("\n")
    return line, index - (before.rfind("\n") + 1)


def is_declaration(command: Command) -> bool:
    """The command opens a `theorem`/`lemma`/`example` (whether or not it parses)."""
    return shared.is_declaration(command.text)


def parse_declaration(command: Command) -> Declaration | None:
    """A `theorem`/`lemma`/`example` command split into name, statement and proof, or None (no `:=`, no type,
    an unreadable name: `leankit.declaration.declaration_in`)."""
    text = command.text
    decl = shared.declaration_in(text)
    if decl is None or decl.assign < 0:
        return None
    body_start = decl.assign + 2
    body = text[body_start:]
    binders = shared.binder_hypotheses(decl.binders)
    # The ∀ form of a binder-form declaration (what a theorem index records; how the corpus is looked up by
    # statement): its binders as written, then the target. Binders the replay cannot read leave no target.
    target = decl.type if binders is not None else None
    statement = decl.statement if binders is not None else None
    last = len(text.rstrip())
    sorry_spans = [
        (
            command.start_byte + len(text[: body_start + m.start()].encode("utf-8")),
            command.start_byte + len(text[: body_start + m.end()].encode("utf-8")),
        )
        for m in SORRY_WORDS.finditer(body)
    ]
    if decl.name_span[0] >= 0:
        label = decl.name_span
    else:  # `example`: Lean reports at the keyword
        keyword_at = re.search(r"\bexample\b", text)
        label = (keyword_at.start(), keyword_at.end()) if keyword_at is not None else (0, 0)
    label_span = (_position(command, label[0]), _position(command, label[1]))
    by = re.match(r"\s*by\b", body)
    blocks: list[Block] = []
    term: str | None = None
    term_index = body_start + len(body) - len(body.lstrip())
    by_index = term_index
    if by is not None:
        by_index = body_start + by.end() - 2
        blocks = _tactic_blocks(command, body_start + by.end())
    else:
        term = body.strip()
    return Declaration(
        keyword=decl.keyword,
        name=decl.name or "",
        label_span=label_span,
        statement=statement,
        binders=binders or [],
        target=target,
        blocks=blocks,
        term=term,
        term_pos=_position(command, term_index),
        by_pos=_position(command, by_index),
        end_pos=_position(command, last),
        sorry_spans=sorry_spans,
    )


def _tactic_blocks(command: Command, start: int) -> list[Block]:
    """Top-level tactics after `by`: a line at the base indentation starts one, deeper lines continue it."""
    text = command.text
    first_line_end = text.find("\n", start)
    first_line_end = len(text) if first_line_end < 0 else first_line_end
    # Column-faithful lines: the text after `by` is padded to the column it sits at.
    lines: list[tuple[int, str]] = []
    column = _position(command, start)[1]
    if text[start:first_line_end].strip():
        lines.append((start, " " * column + text[start:first_line_end]))
    offset = first_line_end + 1
    for line in text[first_line_end + 1 :].split("\n"):
        if line.strip() and not line.strip().startswith("--"):
            lines.append((offset - _position(command, offset)[1], line))
        offset += len(line) + 1
    if not lines:
        return []
    base = min(len(line) - len(line.lstrip(" ")) for _, line in lines)
    blocks: list[tuple[int, list[str]]] = []
    for line_start, line in lines:
        indent = len(line) - len(line.lstrip(" "))
        # `| zero => …` alternatives at the base indentation belong to the `induction … with` above.
        if blocks and (indent > base or line.lstrip().startswith("|") or block_depth(blocks[-1][1]) > 0):
            blocks[-1][1].append(line[base:])
        else:
            blocks.append((line_start + indent, [line[base:]]))
    result = []
    for index, block_lines in blocks:
        pos = _position(command, index) if index >= start else _position(command, start)
        result.append(Block(pos=pos, text="\n".join(block_lines).strip("\n").lstrip(" ")))
    return result


def term_tactic(term: str) -> str:
    return "sorry" if SORRY_WORDS.fullmatch(term.strip()) else f"exact {term}"

"""Lean source files for the replay server's `frontend.process`: top-level commands, theorem
declarations and the tactic blocks of their `by` bodies."""

from __future__ import annotations

import re
from dataclasses import dataclass

from burnqed.lean.corpus import (
    GoalSpec,
    split_hypothesis,
)
from burnqed.lean.replay.tactics import block_depth
from burnqed.lean.text import (
    CLOSE_BRACKETS,
    MODIFIERS_PATTERN,
    OPEN_BRACKETS,
    SORRY_WORDS,
    THEOREM_KEYWORDS,
    find_depth0,
    matching_close,
)

# ---------------------------------------------------------------------------------------------------
# Lean source files: commands, declarations, tactic blocks.

_COMMAND_START = re.compile(
    r"(?:@\[|#[a-z]|(?:import|prelude|theorem|lemma|example|def|abbrev|instance|structure|inductive|class|open|"
    r"namespace|section|end|variable|universe|set_option|noncomputable|private|protected|attribute|axiom|opaque|"
    r"macro|syntax|notation|local|scoped|run_cmd)\b)"
)
# The shared modifier and keyword lists; the attribute may span lines here (a whole command is matched).
_DECLARATION = re.compile(r"(?:@\[[^\]]*\]\s*)?" + MODIFIERS_PATTERN + "(" + "|".join(THEOREM_KEYWORDS) + r")\b")


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

    def synthetic_goal(self) -> GoalSpec | None:
        """The goal a binder-form signature states (for sorry'd declarations outside the corpus)."""
        if self.target is None:
            return None
        try:
            for hyp in self.binders:
                split_hypothesis(hyp)
        except ValueError:
            return None
        return GoalSpec(hyps=self.binders, target=self.target)


def split_commands(text: str, header: bool = True) -> list[Command]:
    """Commands after the `import` header: each runs from its keyword to the next command's keyword. With
    `header=False` (the REPL's environment, no header read) `import` lines are commands like any other."""
    starts: list[tuple[int, int]] = []  # (char offset, line number)
    offset = 0
    in_header = header
    in_comment = False
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        stripped = line.strip()
        if in_comment:
            in_comment = "-/" not in line
        elif stripped.startswith("/-"):
            in_comment = "-/" not in stripped[2:]
        elif not stripped or stripped.startswith("--") or (in_header and re.match(r"(import|prelude)\b", line)):
            pass
        elif not line[0].isspace() and (_COMMAND_START.match(line) or not starts):
            in_header = False
            starts.append((offset, number))
        else:
            in_header = False
            if not starts:
                starts.append((offset, number))
        offset += len(line)
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


def _top_level_assign(text: str) -> int:
    """Index of the first `:=` outside brackets, or -1."""
    depth = 0
    for index, char in enumerate(text):
        if char in OPEN_BRACKETS:
            depth += 1
        elif char in CLOSE_BRACKETS:
            depth -= 1
        elif depth == 0 and text.startswith(":=", index):
            return index
    return -1


def _binders(signature: str) -> tuple[list[str], str | None]:
    """`(x y : ℝ) (h : p) : target` → (["x y : ℝ", "h : p"], "target"); instance binders are dropped."""
    hyps: list[str] = []
    rest = signature.strip()
    while rest and rest[0] in OPEN_BRACKETS:
        close = matching_close(rest)
        if close < 0:
            return hyps, None
        inner, rest = rest[1:close], rest[close + 1 :].strip()
        names, sep, type_ = inner.partition(":")
        if sep:
            hyps.append(f"{' '.join(names.split())} : {' '.join(type_.split())}")
    if not rest.startswith(":"):
        return hyps, None
    return hyps, " ".join(rest[1:].split())


def is_declaration(command: Command) -> bool:
    """The command opens a `theorem`/`lemma`/`example` (whether or not it parses)."""
    return _DECLARATION.match(command.text) is not None


def parse_declaration(command: Command) -> Declaration | None:
    """A `theorem`/`lemma`/`example` command split into name, statement and proof, or None."""
    text = command.text
    match = _DECLARATION.match(text)
    if match is None:
        return None
    keyword = match.group(1)
    cursor = match.end()
    name = ""
    label = (match.start(1), match.end(1))
    if keyword != "example":
        named = re.compile(r"\s+([^\s:(\[{⦃]+)").match(text, cursor)
        if named is None:
            return None
        name, cursor = named.group(1), named.end()
        label = (named.start(1), named.end(1))
    assign = _top_level_assign(text[cursor:])
    if assign < 0:
        return None
    signature = text[cursor : cursor + assign]
    body_start = cursor + assign + 2
    body = text[body_start:]
    binders, target = _binders(signature)
    # The ∀ form of a binder-form declaration (what a theorem index records; how the corpus is looked up by
    # statement): its binders as written, then the target.
    colon = find_depth0(signature, ":", not_followed_by="=")
    written = " ".join(signature[:colon].split()) if colon >= 0 else ""
    statement = target if not written or target is None else f"∀ {written}, {target}"
    last = len(text.rstrip())
    sorry_spans = [
        (
            command.start_byte + len(text[: body_start + m.start()].encode("utf-8")),
            command.start_byte + len(text[: body_start + m.end()].encode("utf-8")),
        )
        for m in SORRY_WORDS.finditer(body)
    ]
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
        keyword=keyword,
        name=name,
        label_span=label_span,
        statement=statement,
        binders=binders,
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

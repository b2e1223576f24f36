"""A Lean file's text as minilean's frontend reads it: its commands, its comments blanked as Lean skips them, a
declaration's parts, a `by` block's tactics with their offsets, and positions as Lean reports them.

    commands = split_commands(text, header=False)     # Command(text, start, line) for each command
    decl = parse_decl(command.text)                     # keyword, name, binders, statement, body

Nothing here elaborates or runs a tactic: `minilean.frontend` compiles what these read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from leankit.commands import commands, tokens
from minilean.elab import ElabError
from minilean.tactic_parse import parse_problem
from minilean.tactics import split_blocks

DEFINITIONS = ("def", "abbrev")
DECL = re.compile(
    r"(?:@\[[^\]]*\]\s*)?(?:(?:private|protected|noncomputable)\s+)*(theorem|lemma|example|def|abbrev)\b")


@dataclass(frozen=True)
class Command:
    text: str
    start: int  # character offset in the file
    line: int  # 1-based


def split_commands(text: str, header: bool) -> list[Command]:
    """Top-level commands where Lean's parser finds them (`leankit.commands.commands`): at a command keyword at any
    column, after a term on the same line or on an indented line too (`abbrev s : ℕ := 1\n  instance(…)…` is two
    commands), a declaration's command from the doc comment, attribute or modifier that opens it; each runs to the
    next. Text before the first command is a command of its own (Lean's `expected command`). With `header`, leading
    `import` lines (and blank lines, comments) form the header and are no command."""
    masked, _ = blank_comments(text)
    begin = 0
    if header:
        for found in re.finditer(r"[^\n]*(?:\n|$)", masked):
            line = found.group()
            if found.start() >= len(masked) or not (not line.strip() or re.match(r"(import|prelude)\b", line)):
                begin = found.start()
                break
        else:
            begin = len(masked)
    starts = [command.start for command in commands(text)
              if command.start >= begin and not _tactic_prefix(text[command.start : command.end], command.keyword)]
    first = next((at for at in range(begin, len(masked)) if not masked[at].isspace()), None)
    if first is not None and (not starts or starts[0] > first):
        starts.insert(0, first)
    return [Command(text[start : (starts[i + 1] if i + 1 < len(starts) else len(text))], start,
                    text.count("\n", 0, start) + 1) for i, start in enumerate(starts)]


def _tactic_prefix(command: str, keyword: str) -> bool:
    """`open X in tac` / `set_option o v in tac` inside a proof: Lean's tactic (or term) `… in`, no command (the
    reader takes every `open` for one)."""
    if keyword not in ("open", "set_option"):
        return False
    listed = list(tokens(command))
    for at, token in enumerate(listed[:-1]):
        if token.kind == "ident" and token.text == "in":
            following = listed[at + 1]
            return following.kind not in ("keyword", "doc") and following.text != "@["
    return False


def blank_comments(text: str) -> tuple[str, list[int]]:
    """`text` with its comments blanked as Lean's whitespace reader skips them (`--` to the end of its line, `/- -/`
    nested, none inside a string literal), every line break and column kept; and where each doc comment `/--`
    starts."""
    chars = list(text)
    docs: list[int] = []
    index = 0
    while index < len(text):
        if text[index] == '"':
            index += 1
            while index < len(text) and text[index] != '"':
                index += 2 if text[index] == "\\" else 1
            index += 1
            continue
        end = _comment_end(text, index)
        if end < 0:
            index += 1
            continue
        if text.startswith("/--", index):
            docs.append(index)
        for at in range(index, end):
            if chars[at] not in _LINE_BREAKS:
                chars[at] = " "
        index = end
    return "".join(chars), docs


_LINE_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")  # what str.splitlines breaks at


def _comment_end(text: str, index: int) -> int:
    """Where the comment opening at `index` ends (the end of the text when never closed); -1 when none opens."""
    if text.startswith("--", index):
        end = text.find("\n", index)
        return len(text) if end < 0 else end
    if not text.startswith("/-", index):
        return -1
    depth, end = 0, index
    while end < len(text):
        if text.startswith("/-", end):
            depth, end = depth + 1, end + 2
        elif text.startswith("-/", end):
            depth, end = depth - 1, end + 2
            if depth == 0:
                return end
        else:
            end += 1
    return len(text)


def byte_offset(text: str, char_offset: int) -> int:
    return len(text[:char_offset].encode("utf-8"))


def line_column(text: str, char_offset: int) -> tuple[int, int]:
    before = text[:char_offset]
    return before.count("\n") + 1, char_offset - (before.rfind("\n") + 1)


def balanced(code: str) -> bool:
    """Every bracket of `code` (comments blanked) is closed."""
    return sum(code.count(opener) for opener in "([{⟨⦃") == sum(code.count(closer) for closer in ")]}⟩⦄")


@dataclass
class Decl:
    keyword: str
    name: str
    name_span: tuple[int, int]  # char offsets within the command
    binders: str
    statement: str
    body: str
    body_start: int


def parse_decl(text: str) -> Decl | None:
    """A `theorem`/`lemma`/`example`/`def`/`abbrev` command (after its doc comment) as name, binders, statement (a
    definition's type, empty when it has none) and body, read with its comments blanked as Lean reads them; None
    when it is no declaration or never reaches `:=`."""
    masked = blank_comments(text)[0]
    match = DECL.match(masked, len(masked) - len(masked.lstrip()))
    if match is None:
        return None
    keyword = match.group(1)
    cursor = match.end()
    name, span = "", (match.start(1), match.end(1))
    if keyword != "example":
        named = re.compile(r"\s+([^\s:(\[{⦃]+)").match(masked, cursor)
        if named is None:
            return None
        name, span, cursor = named.group(1), (named.start(1), named.end(1)), named.end()
    depth = 0
    colon = assign = -1
    for index in range(cursor, len(masked)):
        char = masked[index]
        if char in "([{⟨⦃":
            depth += 1
        elif char in ")]}⟩⦄":
            depth -= 1
        elif depth == 0 and masked.startswith(":=", index):
            assign = index
            break
        elif depth == 0 and char == ":" and colon < 0:
            colon = index
    if assign < 0 or (colon < 0 and keyword not in DEFINITIONS):
        return None
    if colon < 0:  # a definition whose type its value gives
        return Decl(keyword, name, span, masked[cursor:assign], "", text[assign + 2 :], assign + 2)
    return Decl(keyword, name, span, masked[cursor:colon], masked[colon + 1 : assign], text[assign + 2 :], assign + 2)


_BINDER = re.compile(r"[({⦃\[]")


def split_binders(text: str) -> list[tuple[str, str]]:
    """`(x y : ℝ) {n : ℕ} (h : p)` → [("x", "ℝ"), ("y", "ℝ"), ("n", "ℕ"), ("h", "p")]."""
    result: list[tuple[str, str]] = []
    rest = text.strip()
    closers = {"(": ")", "{": "}", "⦃": "⦄", "[": "]"}
    while rest:
        opener = rest[0]
        if opener not in closers:
            raise ElabError(f"unexpected token '{rest[:10]}'; expected ':'")
        depth = 0
        end = -1
        for index, char in enumerate(rest):
            if char in closers:
                depth += 1
            elif char in closers.values():
                depth -= 1
                if depth == 0:
                    end = index
                    break
        if end < 0:
            raise ElabError("unexpected end of input; expected ')'")
        inner, rest = rest[1:end], rest[end + 1 :].strip()
        names, sep, ty = inner.partition(":")
        if opener == "[" or not sep:
            raise ElabError("instance and anonymous binders are outside minilean's fragment")
        result.extend((name, ty.strip()) for name in names.split())
    return result


def syntax_error(block: str) -> tuple[int, str] | None:
    """Where Lean's parser stops in a tactic block and what it says, as `goal.tactic`'s `parseError` does
    (`tactic_parse.parse_problem`): a bracket that closes nothing or another one, one left open, an `intro` name Lean
    cannot bind (`intro b)]` binds nothing, it is `unexpected token ')'; expected term`), a broken character (U+FFFD);
    None otherwise (an unknown tactic name is the engine's error). The offset is in `block`, comments blanked."""
    masked = re.sub(r"--[^\n]*", lambda comment: " " * len(comment.group()), block)
    found = re.fullmatch(r"<input>:1:(\d+): (.*)", parse_problem(masked, single=False) or "", re.DOTALL)
    if found is None or found.group(2) == "unknown tactic":
        return None
    return int(found.group(1)), found.group(2)


def file_offset(text: str, start: int, block: str, index: int) -> int:
    """The file offset of `block[index]`, the block starting at `start` (its later lines are dedented by
    `split_blocks`: the file line's own indentation is put back; the first block may keep the body's leading blank)."""
    lead = len(block) - len(block.lstrip())
    block, index = block[lead:], max(index - lead, 0)
    row = block.count("\n", 0, index)
    column = index - (block.rfind("\n", 0, index) + 1)
    if row == 0:
        return start + column
    position = start
    for _ in range(row):
        position = text.index("\n", position) + 1
    end = text.find("\n", position)
    file_line = text[position : end if end >= 0 else len(text)]
    piece_line = block.split("\n")[row]
    indent = (len(file_line) - len(file_line.lstrip())) - (len(piece_line) - len(piece_line.lstrip()))
    return position + column + indent


def tactic_blocks(body: str, offset: int, text: str) -> list[tuple[int, str]]:
    """Top-level tactics of a `by` block with their character offsets in the file."""
    pieces = split_blocks(body)
    result = []
    cursor = 0
    for piece in pieces:
        first = piece.strip().split("\n")[0].strip()
        found = body.find(first, cursor) if first else -1
        start = offset + (found if found >= 0 else cursor)
        cursor = found + len(first) if found >= 0 else cursor
        result.append((start, piece))
    return result


__all__ = ["DECL", "DEFINITIONS", "Command", "Decl", "balanced", "blank_comments", "byte_offset", "file_offset",
           "line_column", "parse_decl", "split_binders", "split_commands", "syntax_error", "tactic_blocks"]

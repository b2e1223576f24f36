"""Statements as users write them: comments (a `-- copy 0` after the type, a `/- … -/` between binders), a
docstring before them, line breaks anywhere. burnqed restates a statement after `theorem NAME` and before
`:= by …`, so a comment in it must never reach Lean (a line comment would swallow the `:=`): the text is kept
as written with its comments removed, and a leading doc comment is kept apart, to be restated on its own line.

    read_statement("/-- Doc. -/ ∀ n : ℕ, n = n -- c")  # Statement("∀ n : ℕ, n = n", "Doc.", None)

Built on `leankit.text.regions`, the one reader of comments and literals: `read_statement`, `strip_comments`,
`append_code`, `doc_comment_before`; a tactic's head and the operators Lean never parses side by side too.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from typing import NamedTuple

from leankit.text import (
    DOC_COMMENT,
    LINE_COMMENT,
    LITERAL,
    OPEN_BRACKETS,
    Region,
    find_depth0,
    mask_comments,
    matching_close,
    normalize_newlines,
    regions,
)


class Statement(NamedTuple):
    """A statement or signature as written, read: its code without comments (layout otherwise kept, stripped),
    the text of the doc comment that opens it (None when there is none), and what is left unterminated at its
    end ("block comment", "string literal"; None when nothing), which Lean would refuse."""

    code: str
    docstring: str | None
    unterminated: str | None


def strip_comments(text: str) -> str:
    """`text` with its comments removed (doc comments too) and the layout otherwise kept: a comment on a line
    of its own goes with its line, one at the end of a line with the blanks before it, one between two tokens
    leaves one space (`a/- x -/b` is `a b`, as Lean reads it); literals are untouched."""
    if "--" not in text and "/-" not in text:
        return text
    out: list[str] = []
    index = 0
    last = ""  # the last character written ("" before any)
    for region in regions(text):
        if not region.is_comment:
            continue
        before = text[index : region.start]
        kept = before.rstrip(" \t")
        last = kept[-1] if kept else last
        line_start = last in ("", "\n")
        after = region.end
        while after < len(text) and text[after] in " \t":
            after += 1
        if after == len(text) or text[after] == "\n":  # nothing follows on the comment's line
            out.append(kept)
            index = after + 1 if line_start and after < len(text) else after  # a comment's own line goes whole
        elif line_start:
            out.append(before)  # the indentation of what follows stays
            index = after
        else:
            out.append(kept if last == " " else kept + " ")
            last = " "
            index = after
    out.append(text[index:])
    return "".join(out)


def read_statement(text: str) -> Statement:
    """Read a statement or signature as a user wrote it (see `Statement`); newlines normalised. A doc comment
    counts as the statement's docstring only when it opens the text; its text is stripped (None when empty)."""
    text = normalize_newlines(text)
    docstring: str | None = None
    unterminated: str | None = None
    first = len(text) - len(text.lstrip())
    for region in regions(text):
        if region.kind == DOC_COMMENT and region.start == first and region.closed:
            docstring = doc_text(text, region)
        if not region.closed:
            unterminated = "string literal" if region.kind == LITERAL else region.kind
    return Statement(strip_comments(text).strip(), docstring, unterminated)


def doc_comment_before(text: str, index: int, docs: Sequence[Region] | None = None) -> Region | None:
    """The doc comment `/-- … -/` that ends right before `index` (blanks between them only), as Lean attaches a
    docstring to the declaration after it; None when there is none. `docs`: the text's doc comments, in order
    (`doc_comments`), for many lookups in one text."""
    if docs is None:
        docs = doc_comments(text[:index])
    at = bisect.bisect_right(docs, index, key=lambda region: region.end)
    if at == 0 or text[docs[at - 1].end : index].strip():
        return None
    return docs[at - 1]


def doc_comments(text: str) -> list[Region]:
    """The closed doc comments `/-- … -/` of `text`, in order."""
    return [region for region in regions(text) if region.kind == DOC_COMMENT and region.closed]


def doc_text(text: str, region: Region) -> str | None:
    """What a doc comment says: the text between `/--` and `-/`, stripped (None when empty)."""
    return text[region.start + 3 : region.end - 2].strip() or None


def append_code(text: str, code: str) -> str:
    """`text` (a declaration) followed by `code` (`:= by sorry`): on the same line, unless `text` ends in a line
    comment, which would swallow it; then on the next line, indented."""
    text = text.rstrip()
    last: Region | None = None
    if "--" in text:
        for region in regions(text):
            last = region
    if last is not None and last.kind == LINE_COMMENT and last.end == len(text):
        return f"{text}\n  {code}"
    return f"{text} {code}"


_FORALL = re.compile(r"\s*(?:∀|forall)(?![\w'])\s*")
_IDENT = re.compile(r"(?!\d)[\w'!?.₀-₉ₐ-ₜ]+")  # a binder name (`x`, `h₀`, `x'`), not a binder predicate (`x ∈ S`)


def split_leading_binders(statement: str) -> tuple[str, str]:
    """A ∀-form statement's leading binders in declaration form, and the rest:
    `∀ (x y : ℝ) (h : 0 < x), T` → (`(x y : ℝ) (h : 0 < x)`, `T`); `∀ a b : ℕ, ∀ c, P` → (`(a b : ℕ) (c)`, `P`).

    Only the ∀s that open the statement become binders (an implication `p → q` stays in the type: its
    hypothesis has no name to give it). ("", statement) when the statement opens with no ∀ or a binder cannot
    be read. This is how an index of ∀ statements (the burn-qed prototype's form) gets the signature a Lean user
    would write. Comments are read as Lean reads them and left out (`strip_comments`).
    """
    binders: list[str] = []
    statement = strip_comments(statement)
    rest = statement.strip()
    while True:
        found = _FORALL.match(rest)
        if found is None:
            break
        comma = find_depth0(rest, ",", found.end())
        if comma < 0:
            break
        group = rest[found.end() : comma].strip()
        parsed = _binder_groups(group)
        if parsed is None:
            break
        binders.extend(parsed)
        rest = rest[comma + 1 :].strip()
    if not binders or not rest:
        return "", statement.strip()
    return " ".join(binders), rest


def _binder_groups(group: str) -> list[str] | None:
    """The binder groups of one `∀ … ,`: bracketed groups as written, a bare `x y : T` as `(x y : T)`, bare
    names as `(x)`; None when the text is no binder list."""
    if not group:
        return None
    if group[0] not in OPEN_BRACKETS:
        names, sep, type_ = group.partition(":")
        if not names.split() or any(not _IDENT.fullmatch(n) for n in names.split()):
            return None
        if sep:
            return [f"({' '.join(names.split())} : {' '.join(type_.split())})"] if type_.strip() else None
        return [f"({name})" for name in names.split()]
    groups: list[str] = []
    index = 0
    while index < len(group):
        if group[index].isspace():
            index += 1
            continue
        if group[index] not in OPEN_BRACKETS:
            return None
        close = matching_close(group, index)
        if close < 0:
            return None
        groups.append(" ".join(group[index : close + 1].split()))
        index = close + 1
    return groups


def tactic_head(text: str) -> str:
    """The first word of a tactic, after focus bullets and opening parentheses."""
    stripped = text.strip().lstrip("·").strip()
    if stripped.startswith(". "):
        stripped = stripped[2:].lstrip()
    # `| succ k ih => tac` alternatives of `induction … with` / `match` carry no head of their own.
    if not stripped or stripped[0] in "([⟨{|":
        return ""
    word = stripped.split(None, 1)[0]
    # `simp?`/`norm_num!` style suffixes belong to the head; `exact?` too.
    return word


# Operators that only ever stand between two terms, in core Lean and in Mathlib alike: none opens a term (`-`, `¬`, `↑`,
# `!`, `∑` do, and are not here), so two of them with white space alone between is a parse error whatever notation
# is in scope. An operator glued to other symbols is another token (`→+*`, `Type*`, `^[`) and is not one of these.
INFIX_ONLY = frozenset({"=", "≠", "!=", "<", ">", "≤", "≥", "<=", ">=", "+", "*", "/", "%", "^", "∧", "∨", "→", "->",
                        "↔", "<->", "∣", "∈", "∉", "⊆", "⊂", "∪", "∩", "×", "∘", "•", "≡"})


def adjacent_operators(text: str) -> tuple[int, str] | None:
    """The first place where two operators of INFIX_ONLY follow each other with white space alone between them
    (`x + = 3`), which Lean cannot parse: the first one's offset in `text` and the two as written ("+ ="); None when
    there is none. Comments and literals are not read; one pass over the text."""
    masked = mask_comments(text)
    code = list(masked)
    for region in regions(masked):
        if not region.is_comment:  # a literal is an operand
            code[region.start : region.end] = "x" * (region.end - region.start)
    previous: re.Match[str] | None = None
    for chunk in re.finditer(r"\S+", "".join(code)):
        if previous is not None and previous.group() in INFIX_ONLY and chunk.group() in INFIX_ONLY:
            return previous.start(), f"{previous.group()} {chunk.group()}"
        previous = chunk
    return None

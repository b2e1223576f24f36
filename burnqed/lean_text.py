"""Lean source as text, the way every part of burnqed reads it: brackets, comments, string literals, declaration
keywords and the words that make a proof no proof. Pure string work, no Lean; the proof splitter
(`burnqed.tactic_text`), the data stage's declaration parser (`burnqed.lean_declaration`) and the replay server
(`burnqed.lean.replay`) share it. One walk over the characters (`code_chars`: outside string literals) underlies
the bracket scanners: `depth0_chars`, `find_depth0`, `bracket_delta`; `matching_close` pairs one bracket.
The replay server's tactic reader (`burnqed.lean.replay.tactics`) keeps a few scanners of its own: they track
line and column for Lean-style parse errors and read quotes without escapes, so moving them here would change
what the replay server answers.

    mask_comments("simp -- uses sorry")          # "simp              ": columns and newlines kept
    NOT_A_PROOF_WORDS.search("exact cheat")      # a match: the data stage drops such a proof
    SORRY_WORDS.search("exact cheat")            # None: Lean 4 has no `cheat`, it is an unknown identifier

Two word lists, on purpose. `SORRY_WORDS` are what Lean 4 itself elaborates to `sorryAx` (`sorry` and its tactic
synonym `admit`): the replay server answers them the way Lean does, with `hasSorry`, and must not do so for
anything else. `NOT_A_PROOF_WORDS` adds `cheat`, the Lean 3 placeholder that still turns up in scraped data:
a recorded proof that uses any of them is dropped before it is replayed, and the tactic guard refuses all three
(`burnqed.config.DEFAULT_DENY`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

BRACKET_PAIRS: dict[str, str] = {"(": ")", "[": "]", "{": "}", "⟨": "⟩", "⦃": "⦄"}
OPEN_BRACKETS = "".join(BRACKET_PAIRS)
CLOSE_BRACKETS = "".join(BRACKET_PAIRS.values())
OPENER_OF: dict[str, str] = {close: opener for opener, close in BRACKET_PAIRS.items()}

# Words Lean 4 elaborates to `sorryAx`: a tactic that uses one closes its goal with `hasSorry`.
SORRY_WORDS = re.compile(r"(?<![\w.'])(sorry|admit)(?![\w'])")
# Words that make a written proof no proof (see the module docstring for `cheat`).
NOT_A_PROOF_WORDS = re.compile(r"(?<![\w.'])(sorry|admit|cheat)(?![\w'])")

# The modifiers that may precede a declaration keyword, and the keywords of a theorem.
DECLARATION_MODIFIERS: tuple[str, ...] = ("private", "protected", "noncomputable", "nonrec", "unsafe", "partial")
THEOREM_KEYWORDS: tuple[str, ...] = ("theorem", "lemma", "example")
MODIFIERS_PATTERN = r"(?:(?:" + "|".join(DECLARATION_MODIFIERS) + r")\s+)*"
ATTRIBUTE_PATTERN = r"(?:@\[[^\]\n]*\][ \t]*\n?[ \t]*)?"  # one `@[simp]`-style attribute, on its own line or not

_SPECIAL = re.compile(r'"|--|/-')
_NOT_NEWLINE = re.compile(r"[^\n]")


def normalize_newlines(text: str) -> str:
    """CRLF and lone CR line ends as `\\n`."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def block_comment_end(text: str, start: int) -> int:
    """Index just past the (nested) `/- … -/` comment opening at `start`; len(text) when unterminated."""
    depth = 0
    index = start
    while index < len(text):
        if text.startswith("/-", index):
            depth += 1
            index += 2
        elif text.startswith("-/", index):
            depth -= 1
            index += 2
            if depth == 0:
                return index
        else:
            index += 1
    return len(text)  # unterminated: the rest is comment


def string_end(text: str, start: int) -> int:
    """Index just past the closing quote of a string literal whose body starts at `start` (len(text) when
    unterminated); a backslash escapes the next character."""
    index = start
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        index += 1
        if char == '"':
            return index
    return len(text)


def mask_comments(text: str) -> str:
    """`--` and (nested) `/- -/` comments replaced by spaces, newlines and columns kept; strings untouched (a
    `--` inside a string literal is no comment)."""
    if "--" not in text and "/-" not in text:
        return text
    out: list[str] = []
    index = 0
    while True:
        found = _SPECIAL.search(text, index)
        if found is None:
            out.append(text[index:])
            return "".join(out)
        out.append(text[index : found.start()])
        token = found.group()
        if token == '"':
            end = string_end(text, found.end())
            out.append(text[found.start() : end])
        elif token == "--":
            newline = text.find("\n", found.start())
            end = len(text) if newline < 0 else newline
            out.append(" " * (end - found.start()))
        else:
            end = block_comment_end(text, found.start())
            out.append(_NOT_NEWLINE.sub(" ", text[found.start() : end]))
        index = end


def code_chars(text: str) -> Iterator[tuple[int, str]]:
    """(index, char) of every character outside string literals (the quotes themselves excluded)."""
    in_string = False
    escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        else:
            yield index, char


def depth0_chars(text: str) -> Iterator[tuple[int, str]]:
    """(index, char) of every character outside string literals and brackets (a stray closer is ignored)."""
    depth = 0
    for index, char in code_chars(text):
        if char in OPEN_BRACKETS:
            depth += 1
        elif char in CLOSE_BRACKETS:
            depth = max(0, depth - 1)
        elif depth == 0:
            yield index, char


def find_depth0(text: str, needle: str, start: int = 0, *, not_followed_by: str = "") -> int:
    """Index of the first `needle` outside string literals and brackets, scanning from `start` (at depth 0 there),
    that is not followed by `not_followed_by`; -1 if none. `find_depth0("(a : T) : U", ":")` is 8."""
    for index, _ in depth0_chars(text[start:]):
        at = start + index
        if text.startswith(needle, at) and not (
            not_followed_by and text.startswith(not_followed_by, at + len(needle))
        ):
            return at
    return -1


def matching_close(text: str, start: int = 0) -> int:
    """Index of the bracket that closes the one at `start` (every bracket counted, string literals not looked
    at: binder lists have none); -1 when it is never closed."""
    depth = 0
    for index in range(start, len(text)):
        char = text[index]
        if char in OPEN_BRACKETS:
            depth += 1
        elif char in CLOSE_BRACKETS:
            depth -= 1
            if depth == 0:
                return index
    return -1


def bracket_delta(line: str) -> int:
    """Opening minus closing brackets outside string literals."""
    delta = 0
    for _, char in code_chars(line):
        if char in OPEN_BRACKETS:
            delta += 1
        elif char in CLOSE_BRACKETS:
            delta -= 1
    return delta


_FORALL = re.compile(r"\s*(?:∀|forall)(?![\w'])\s*")
_IDENT = re.compile(r"(?!\d)[\w'!?.₀-₉ₐ-ₜ]+")  # a binder name (`x`, `h₀`, `x'`), not a binder predicate (`x ∈ S`)


def split_leading_binders(statement: str) -> tuple[str, str]:
    """A ∀-form statement's leading binders in declaration form, and the rest:
    `∀ (x y : ℝ) (h : 0 < x), T` → (`(x y : ℝ) (h : 0 < x)`, `T`); `∀ a b : ℕ, ∀ c, P` → (`(a b : ℕ) (c)`, `P`).

    Only the ∀s that open the statement become binders (an implication `p → q` stays in the type: its
    hypothesis has no name to give it). ("", statement) when the statement opens with no ∀ or a binder cannot
    be read. This is how an index of ∀ statements (the burn-qed prototype's form) gets the signature a Lean user
    would write.
    """
    binders: list[str] = []
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

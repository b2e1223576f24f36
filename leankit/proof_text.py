"""Proof text as Lean reads it: the top-level tactics of a proof body, and where `;` separates tactics.

    split_proof("by\\n  intro x\\n  have h : 0 < x := by positivity\\n  linarith")
    # ["intro x", "have h : 0 < x", "positivity", "linarith"]
    split_sequence("simp; ring")       # ["simp", "ring"]; `all_goals simp; ring` and `t1 <;> t2` stay one
    first_separator("simp; ring")      # 4: where a lone `tactic` parse would stop

Lines are grouped into tactics by indentation and continuation markers, a typed `have h : T := by …` is split into
`have h : T` and its body's tactics, comments are dropped, and a leading declaration or `by` is removed; the rules
are in docs/search.md ("Splitting a proof into tactics"). burnqed reads completions with it (`burnqed.text.completion`),
the data stage and the replay server read declarations' proofs with it (`leankit.declaration`, `minilean.replay`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from leankit.text import (
    ATTRIBUTE_PATTERN,
    CLOSE_BRACKETS,
    MODIFIERS_PATTERN,
    THEOREM_KEYWORDS,
    bracket_delta,
    depth0_chars,
    find_depth0,
    mask_comments,
    normalize_newlines,
)

TAB_WIDTH = 2  # the columns a tab stands for when a proof's layout is read

_CONTINUATION_STARTS = ("<;>", "|", "_", ":=", *CLOSE_BRACKETS)
_CONTINUATION_ENDS = ("<;>", ":=", "=>", ",")
_CONTINUATION_END_WORDS = frozenset({"by", "with"})

# Tactics whose argument is a tactic sequence: a `;` after them belongs to that sequence.
_SEQUENCE_TACTICS = frozenset(
    {
        "·",
        ".",
        "try",
        "repeat",
        "repeat'",
        "repeat1",
        "iterate",
        "all_goals",
        "any_goals",
        "focus",
        "first",
        "case",
        "case'",
        "next",
        "on_goal",
        "classical",
        "with_reducible",
        "with_reducible_and_instances",
        "with_unfolding_all",
        "unhygienic",
        "fail_if_success",
        "success_if_fail",
        "solve",
        "conv",
    }
)
_SEQUENCE_OPENER = re.compile(r"(?<![\w'.])(?:by|fun|λ)(?![\w'])|=>")

# Tactics that act on the whole goal list: after a `have` split they would also see the main goal.
_GOAL_LIST_TACTIC = re.compile(
    r"(?<![\w'.])(?:all_goals|any_goals|swap|rotate_left|rotate_right|pick_goal|on_goal|case'?)(?![\w'])"
)
_TYPED_HAVE = re.compile(r"have(?:\s+[^\s:()\[\]{}⟨⟩⦃⦄]+)?\s*:(?!=)")
_DECLARATION = re.compile(  # any declaration a model may echo before its proof
    r"^" + ATTRIBUTE_PATTERN + MODIFIERS_PATTERN + r"(?:" + "|".join((*THEOREM_KEYWORDS, "def", "abbrev", "instance"))
    + r")(?![\w'])",
    re.MULTILINE,
)
_BY_WORD = re.compile(r"by(?![\w'])")
_PREAMBLE_LINE = re.compile(
    r"(?:import|open|set_option|namespace|section|variable|universe|noncomputable|attribute|end)(?![\w'])"
)
# A column-0 line starting a new command ends the proof (models often write a second theorem).
_COMMAND_LINE = re.compile(
    r"^(?:@\[|#\w|(?:private|protected|noncomputable|nonrec|unsafe|partial|theorem|lemma|example"
    r"|def|abbrev|instance|end|namespace|section|import)(?![\w']))",
    re.MULTILINE,
)


def tactic_groups(text: str) -> Iterator[str]:
    """The top-level tactics of a proof body (or `by …`, or a whole declaration) as written, each dedented: lines
    grouped by indentation and continuation markers, `t1; t2` kept whole, typed `have`s not split."""
    return _group_lines(_proof_body(mask_comments(normalize_layout(text))))


def split_proof(text: str, *, split_have: bool = True) -> list[str]:
    """The top-level tactics of a proof body (or `by …`, or a whole declaration), each dedented.

    With `split_have`, typed `have h : T := by …` blocks are split into `have h : T` and the body's
    tactics (docs/search.md, "Splitting a proof into tactics", has the rules and their goal semantics).
    """
    tactics: list[str] = []
    for group in tactic_groups(text):
        for tactic in _split_semicolons(group):
            tactics.extend(_split_have(tactic) if split_have else [tactic])
    return tactics


def split_sequence(tactic: str) -> list[str]:
    """The tactics Lean reads in `tactic` when it stands in a tactic block: `t1; t2` → [t1, t2]. A `;` after a
    tactic that takes a tactic sequence (`all_goals`, `·`, `by`, `=>`, …) belongs to that sequence, and `<;>`
    is a combinator, not a separator; so `all_goals simp; ring` and `t1 <;> t2` are one tactic."""
    return _split_semicolons(mask_comments(normalize_layout(tactic)))


def first_separator(tactic: str) -> int | None:
    """Index (in `tactic` with tabs expanded) of the first `;` that would end a lone tactic, a trailing one
    included; None when Lean's parser of one `tactic` reads the whole text as one."""
    return next(_separators(mask_comments(normalize_layout(tactic))), None)


def _proof_body(text: str) -> str:
    """Drop a leading declaration or `:= by`/`by` prefix, keeping every column where it was: Lean's
    layout rules are about columns, so the prefix is blanked rather than cut."""
    match = _DECLARATION.search(text)
    if match is not None and _is_preamble(text[: match.start()]):
        assign = _find_depth0_after(text, ":=", match.end())
        if assign < 0:
            return ""
        after = assign + len(":=")
        by_match = _BY_WORD.match(text, _skip_space(text, after))
        if by_match is None:
            term = _cut_at_command(text, after)[after:].strip()
            return f"exact {term}" if term else ""
        return _cut_at_command(_blank_prefix(text, by_match.end()), by_match.end())
    start = _skip_space(text, 0)
    if text.startswith(":=", start):
        start = _skip_space(text, start + len(":="))
    by_match = _BY_WORD.match(text, start)
    if by_match is not None:
        return _cut_at_command(_blank_prefix(text, by_match.end()), by_match.end())
    return _cut_at_command(text, 0)


def _is_preamble(text: str) -> bool:
    """True when `text` holds only file-level commands (imports, `open`, …): a declaration after
    it is the one being proved. After proof text, a declaration is a model's extra output."""
    return all(not line.strip() or _PREAMBLE_LINE.match(line) for line in text.split("\n"))


def _cut_at_command(text: str, start: int) -> str:
    match = _COMMAND_LINE.search(text, start)
    return text if match is None else text[: match.start()]


def _group_lines(body: str) -> Iterator[str]:
    """Group lines into top-level tactics by indentation and continuation markers."""
    lines = [line.rstrip() for line in body.split("\n") if line.strip()]
    if not lines:
        return
    base = min(indent_of(line) for line in lines)
    group: list[str] = []
    depth = 0
    for line in lines:
        if group and not _continues(line, group[-1], base, depth):
            yield _dedent_group(group)
            group, depth = [], 0
        group.append(line)
        depth = max(0, depth + bracket_delta(line))
    if group:
        yield _dedent_group(group)


def _continues(line: str, previous: str, base: int, depth: int) -> bool:
    if indent_of(line) > base or depth > 0:
        return True
    stripped = line.strip()
    if stripped.startswith(_CONTINUATION_STARTS):
        return True
    last = previous.rstrip()
    if last.endswith(_CONTINUATION_ENDS):
        return True
    words = last.split()
    return bool(words) and words[-1] in _CONTINUATION_END_WORDS


def _dedent_group(group: list[str]) -> str:
    shift = min(indent_of(line) for line in group)
    lines = [line[shift:] for line in group]
    lines[0] = lines[0].lstrip()
    return "\n".join(lines)


def _split_semicolons(tactic: str) -> list[str]:
    """Split at depth-0 `;` until the tactic so far opens a tactic sequence, which owns the rest."""
    pieces: list[str] = []
    start = 0
    for index in _separators(tactic):
        if tactic[start:index].strip():
            pieces.append(_dedent_text(tactic[start:index]))
        start = index + 1
    tail = tactic[start:]
    if tail.strip():
        pieces.append(_dedent_text(tail))
    return pieces


def _separators(tactic: str) -> Iterator[int]:
    """Indices of the depth-0 `;` that separate top-level tactics (not `<;>`), up to the first tactic that
    takes a tactic sequence: that sequence owns the rest of the text."""
    start = 0
    for index, char in depth0_chars(tactic):
        if char != ";" or tactic[index - 1 : index + 2] == "<;>":
            continue
        if _opens_sequence(tactic[start:index].strip()):
            return
        yield index
        start = index + 1


def _opens_sequence(head: str) -> bool:
    first = head.split(maxsplit=1)[0] if head else ""
    return first in _SEQUENCE_TACTICS or first.startswith("·") or bool(_SEQUENCE_OPENER.search(head))


def _split_have(tactic: str) -> list[str]:
    """`have h : T := by body` → [`have h : T`, *body tactics]; anything else → [tactic]."""
    if not _TYPED_HAVE.match(tactic):
        return [tactic]
    if any(indent_of(line) == 0 for line in tactic.split("\n")[1:]):
        return [tactic]  # a base-level continuation (`<;>`) applies to the whole `have`
    assign = find_depth0(tactic, ":=")
    if assign < 0:
        return [tactic]
    by_match = _BY_WORD.match(tactic, _skip_space(tactic, assign + len(":=")))
    if by_match is None:
        return [tactic]
    body = _blank_prefix(tactic, by_match.end())
    if not body.strip() or _GOAL_LIST_TACTIC.search(body):
        return [tactic]
    header = tactic[:assign].rstrip()
    return [header, *split_proof(body)]



# ----------------------------------------------------------------------------------- text helpers


def normalize_layout(text: str) -> str:
    """`text` with Lean's newlines and every tab expanded to `TAB_WIDTH` columns: the layout the splitter reads."""
    return "\n".join(line.expandtabs(TAB_WIDTH) for line in normalize_newlines(text).split("\n"))


def indent_of(line: str) -> int:
    """The columns of spaces a line starts with."""
    return len(line) - len(line.lstrip(" "))


def _dedent_text(text: str) -> str:
    lines = [line.rstrip() for line in text.split("\n") if line.strip()]
    return _dedent_group(lines) if lines else ""


def _skip_space(text: str, index: int) -> int:
    while index < len(text) and text[index].isspace():
        index += 1
    return index


def _blank_prefix(text: str, end: int) -> str:
    return re.sub(r"[^\n]", " ", text[:end]) + text[end:]


def _find_depth0_after(text: str, needle: str, start: int) -> int:
    """`find_depth0`, but with brackets counted from the text's start: the first depth-0 `needle` at or after
    `start` of the whole text (a declaration's `:=` after its name)."""
    for index, _ in depth0_chars(text):
        if index >= start and text.startswith(needle, index):
            return index
    return -1

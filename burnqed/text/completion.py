"""Model text back into Lean: a tactic or a proof out of a raw completion, and the whole-proof → tactics splitter.

    body = extract_completion(fmt, raw)                 # the tactic or proof body of a completion in format `fmt`
    tactic = normalize_tactic(extract_tactic(raw))      # one generated line is one step; the key search dedups on
    tactics = split_proof(proof)                        # top-level tactics, for whole-proof replay
    code = "theorem X : S := by\\n" + join_tactics(tactics)  # the inverse, for the verification path
    sent = as_single_tactic("t1; t2")                   # "(t1; t2)": Pantograph's goal.tactic parses one tactic

A step `t1; t2` stays whole in search (trajectory row, SFT completion, proof path); `split_proof` splits it for
whole-proof replay. The splitter's rules: docs/search.md, "Splitting a proof into tactics". The prompts are in
`burnqed.text.prompt`. Pure: standard library only, no I/O, nothing runs at import.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from burnqed.text.prompt import (
    BLOCK_INDENT,
    CODE_FENCE,
    EOS_TEXT,
    TAB_WIDTH,
    PromptFormat,
    is_cot_format,
    is_proof_format,
)
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

# ------------------------------------------------------------------------------------- extraction


def extract_completion(fmt: PromptFormat, raw: str) -> str:
    """The tactic or proof body in a raw generation, per `fmt` ("" when there is none). A CoT answer's proof is
    its last ```lean4 block (its plan may quote Lean too)."""
    if is_cot_format(fmt):
        return extract_proof(last_code_block(raw))
    return extract_proof(raw) if is_proof_format(fmt) else extract_tactic(raw)


def last_code_block(raw: str) -> str:
    """The body of the last ```lean4 (or ```lean) block of an answer, closed or cut off; "" when it has none."""
    text = normalize_newlines(raw)
    if EOS_TEXT in text:
        text = text[: text.index(EOS_TEXT)]
    starts = [m.end() for m in re.finditer(r"^[ \t]*```lean4?[ \t]*\n", text, re.MULTILINE)]
    if not starts:
        return ""
    body = text[starts[-1] :]
    end = re.search(r"^[ \t]*```", body, re.MULTILINE)
    return body if end is None else body[: end.start()]


def extract_tactic(raw: str) -> str:
    """The first step of a raw generation, dedented ("" when there is none).

    Fences, stop strings, comments, an echoed declaration and a leading `by` are dropped. One generated
    line is one step: `t1; t2` and `t1 <;> t2` stay whole (the model wrote them as one step, as the burn-qed
    prototype and BFS-Prover send them), and a multi-line tactic (a `have … := by` block, a bullet) stays whole and is
    not have-split. Lines after the step are discarded, and so is a trailing `;` (which no tactic follows).
    `split_proof` still splits `t1; t2` for whole-proof replay. The Lean edge sends a step with a top-level
    `;` as `(t1; t2)`: see `as_single_tactic`.
    """
    body = _proof_body(mask_comments(_normalize_layout(_strip_generation(raw))))
    for group in _group_lines(body):
        return _drop_trailing_semicolon(group)
    return ""


def split_sequence(tactic: str) -> list[str]:
    """The tactics Lean reads in `tactic` when it stands in a tactic block: `t1; t2` → [t1, t2]. A `;` after a
    tactic that takes a tactic sequence (`all_goals`, `·`, `by`, `=>`, …) belongs to that sequence, and `<;>`
    is a combinator, not a separator; so `all_goals simp; ring` and `t1 <;> t2` are one tactic."""
    return _split_semicolons(mask_comments(_normalize_layout(tactic)))


def as_single_tactic(tactic: str) -> str:
    """`tactic` as ONE tactic of Lean's `tactic` syntax category, which is what Pantograph's `goal.tactic`
    parses (`Parser.runParserCategory … `tactic`, which must reach the end of the input). That category has
    no `;` combinator, so a step `t1; t2` would be a parse error; it is sent as the `paren` tactic
    `(t1; t2)`, which runs the sequence without requiring the goal to be closed (unlike `· t1; t2`).
    Anything else is returned unchanged."""
    if len(split_sequence(tactic)) < 2:
        return tactic
    return f"({tactic.strip()})"


def extract_proof(raw: str) -> str:
    """The proof body of a raw generation: its top-level tactics one per block, dedented.

    Comments are dropped on purpose: a comment mentioning `sorry` must not trip the deny list.
    """
    return join_tactics(split_proof(_strip_generation(raw), split_have=False), indent="")


def normalize_tactic(tactic: str) -> str:
    """The dedup key of a tactic: comments dropped, blank lines dropped, dedented, runs of spaces
    inside each line collapsed to one. Leading indentation is kept, since it carries the structure
    of a multi-line tactic."""
    lines = [line.rstrip() for line in mask_comments(_normalize_layout(tactic)).split("\n")]
    kept = [line for line in lines if line]
    if not kept:
        return ""
    base = min(_indent_of(line) for line in kept)
    return "\n".join(" " * (_indent_of(line) - base) + re.sub(r"\s+", " ", line.strip()) for line in kept)


def _strip_generation(raw: str) -> str:
    text = normalize_newlines(raw)
    if EOS_TEXT in text:
        text = text[: text.index(EOS_TEXT)]
    stripped = text.lstrip()
    # Only a fence with a language tag opens code; a bare fence first means an empty answer.
    if stripped.startswith(CODE_FENCE + "lean"):
        newline = stripped.find("\n")
        text = "" if newline < 0 else stripped[newline + 1 :]
    if CODE_FENCE in text:
        text = text[: text.index(CODE_FENCE)]
    return text


# --------------------------------------------------------------------------------------- splitter

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


def split_proof(text: str, *, split_have: bool = True) -> list[str]:
    """The top-level tactics of a proof body (or `by …`, or a whole declaration), each dedented.

    With `split_have`, typed `have h : T := by …` blocks are split into `have h : T` and the body's
    tactics (the exact rules and their goal semantics: docs/search.md, "Splitting a proof into tactics").
    """
    body = _proof_body(mask_comments(_normalize_layout(text)))
    tactics: list[str] = []
    for group in _group_lines(body):
        for tactic in _split_semicolons(group):
            tactics.extend(_split_have(tactic) if split_have else [tactic])
    return tactics


def join_tactics(tactics: Sequence[str], indent: str = BLOCK_INDENT) -> str:
    """A proof body from top-level tactics: ``f"theorem X : S := by\\n" + join_tactics(ts)`` compiles
    when the tactics do. Multi-line tactics keep their relative indentation; no trailing newline."""
    lines: list[str] = []
    for tactic in tactics:
        lines.extend(indent + line if line.strip() else "" for line in tactic.strip("\n").split("\n"))
    return "\n".join(lines)


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
    base = min(_indent_of(line) for line in lines)
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
    if _indent_of(line) > base or depth > 0:
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
    shift = min(_indent_of(line) for line in group)
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


def first_separator(tactic: str) -> int | None:
    """Index (in `tactic` with tabs expanded) of the first `;` that would end a lone tactic, a trailing one
    included; None when Lean's parser of one `tactic` reads the whole text as one."""
    return next(_separators(mask_comments(_normalize_layout(tactic))), None)


def _drop_trailing_semicolon(tactic: str) -> str:
    """`t;` → `t`: a separator with nothing after it (Lean's parser of one tactic would refuse it)."""
    last = None
    for index, char in depth0_chars(tactic):
        if char == ";" and tactic[index - 1 : index + 2] != "<;>":
            last = index
    if last is not None and not tactic[last + 1 :].strip():
        return tactic[:last].rstrip()
    return tactic


def _opens_sequence(head: str) -> bool:
    first = head.split(maxsplit=1)[0] if head else ""
    return first in _SEQUENCE_TACTICS or first.startswith("·") or bool(_SEQUENCE_OPENER.search(head))


def _split_have(tactic: str) -> list[str]:
    """`have h : T := by body` → [`have h : T`, *body tactics]; anything else → [tactic]."""
    if not _TYPED_HAVE.match(tactic):
        return [tactic]
    if any(_indent_of(line) == 0 for line in tactic.split("\n")[1:]):
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


def _normalize_layout(text: str) -> str:
    return "\n".join(line.expandtabs(TAB_WIDTH) for line in normalize_newlines(text).split("\n"))


def _indent_of(line: str) -> int:
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



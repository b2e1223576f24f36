"""Tactic text for the replay server: what parses and how scripts split into steps. The Lean-style messages
for tactics a corpus does not know are `leankit.world.messages`'."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from leankit.proof_text import first_separator
from leankit.statements import tactic_head
from leankit.text import BRACKET_PAIRS, CLOSE_BRACKETS, OPEN_BRACKETS, OPENER_OF

MAX_SLEEP_MS = 600_000
MAX_NESTING = 128


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Heads the tactic parser accepts; anything else is a `parseError` like Lean's "unknown tactic".
KNOWN_TACTICS = _words(
    """
    abel absurd ac_rfl admit aesop all_goals any_goals apply apply_assumption apply_fun apply_mod_cast
    apply_rules assumption assumption_mod_cast bound by_cases by_contra by_contra' calc cancel_denoms case
    case' cases cases' casesm change choose clear congr constructor constructorm continuity contradiction
    contrapose conv dsimp decide done exact exact_mod_cast exacts exfalso exists existsi ext ext1 fail
    field_simp filter_upwards fin_cases first focus funext gcongr generalize group have haveI induction
    induction' infer_instance injection interval_cases intro intros iterate left let lift linarith
    linear_combination match mod_cases module native_decide next nlinarith noncomm_ring norm_cast norm_num
    norm_num1 nth_rewrite nth_rw obtain omega on_goal polyrith positivity push_cast push_neg qify rcases
    refine refine' rename_i repeat revert rewrite rfl right ring ring1 ring_nf rintro rw rw_mod_cast rwa
    set set_option show simp simp_all simp_arith simp_rw simpa skip sleep solve_by_elim sorry specialize split
    split_ands split_ifs subst subst_vars suffices symm tauto trans trivial try unfold use use! wlog zify
    exact? apply? simp? rw? aesop? says omega_nat bv_omega decreasing_tactic field_simp? nlinarith!
    linarith! norm_num! ring_nf! positivity! exists_intro and_intros rel
    """
)

_SEQ = re.compile(r"<;>|;")


# ---------------------------------------------------------------------------------------------------
# Tactic text: parsing checks, splitting.


def strip_comments(text: str) -> str:
    return re.sub(r"--[^\n]*", "", text)


def parse_problem(text: str) -> str | None:
    """Pantograph's `parseError` text for syntactically broken tactic input, or None if it parses."""
    if not text.strip():
        return "<input>:1:0: unexpected end of input"
    stack: list[tuple[str, int, int]] = []
    line, col = 1, 0
    in_string = False
    for char in text:
        if char == '"':
            in_string = not in_string
        elif not in_string and char in OPEN_BRACKETS:
            stack.append((char, line, col))
        elif not in_string and char in CLOSE_BRACKETS:
            if not stack or stack[-1][0] != OPENER_OF[char]:
                return f"<input>:{line}:{col}: unexpected token '{char}'; expected term"
            stack.pop()
        if char == "\n":
            line, col = line + 1, 0
        else:
            col += 1
    if in_string:
        return f"<input>:{line}:{col}: unterminated string literal; expected '\"'"
    if stack:
        return f"<input>:{line}:{col}: unexpected end of input; expected '{BRACKET_PAIRS[stack[-1][0]]}'"
    for segment_line, segment in _segments(text):
        head = tactic_head(segment)
        if head and head not in KNOWN_TACTICS and head.rstrip("!?") not in KNOWN_TACTICS:
            column = len(segment) - len(segment.lstrip(" ·."))
            return f"<input>:{segment_line}:{column}: unknown tactic"
    return None


def sequence_problem(text: str) -> str | None:
    """Pantograph parses `goal.tactic`'s text as ONE tactic (`runParserCategory` on `tactic`, which must reach
    the end of the input; the category has no `;` combinator): a top-level `t1; t2`, or a trailing `;`, is
    the parse error Lean gives where the first tactic ends. `(t1; t2)` and `t1 <;> t2` parse."""
    index = first_separator(text)
    if index is None:
        return None
    before = text.expandtabs(2)[:index]
    line = before.count("\n") + 1
    column = len(before) - (before.rfind("\n") + 1)
    return f"<input>:{line}:{column}: expected end of input"


def _segments(text: str) -> Iterable[tuple[int, str]]:
    """Top-level tactic segments (split at newlines, `;`, `<;>`) with their 1-based line numbers."""
    for number, line in enumerate(text.split("\n"), start=1):
        for piece in split_top(line, _SEQ):
            if piece.strip():
                yield number, piece
            # Only the first line's pieces and lines at block starts carry tactic heads; continuation
            # lines inside brackets are skipped because split_top keeps bracketed text together.


def split_top(text: str, separator: re.Pattern[str]) -> list[str]:
    """Split at `separator` matches outside brackets and strings (the pieces keep their text)."""
    pieces: list[str] = []
    depth = 0
    in_string = False
    start = 0
    index = 0
    while index < len(text):
        char = text[index]
        if char == '"':
            in_string = not in_string
        elif not in_string and char in OPEN_BRACKETS:
            depth += 1
        elif not in_string and char in CLOSE_BRACKETS:
            depth = max(0, depth - 1)
        elif not in_string and depth == 0:
            match = separator.match(text, index)
            if match is not None and match.end() > index:
                pieces.append(text[start:index])
                index = start = match.end()
                continue
        index += 1
    pieces.append(text[start:])
    return pieces


def dedent(text: str) -> str:
    lines = text.split("\n")
    indents = [len(line) - len(line.lstrip(" ")) for line in lines if line.strip()]
    cut = min(indents, default=0)
    return "\n".join(line[cut:] for line in lines).strip("\n")


def split_blocks(text: str) -> list[str]:
    """Top-level tactics of a script: a line at the base indentation starts one, deeper lines continue it."""
    blocks: list[list[str]] = []
    for line in dedent(text).split("\n"):
        if not line.strip():
            continue
        if blocks and (line.startswith((" ", "|")) or block_depth(blocks[-1]) > 0):
            blocks[-1].append(line)
        else:
            blocks.append([line])
    return ["\n".join(block) for block in blocks]


def max_depth(text: str) -> int:
    depth = deepest = 0
    for char in text:
        if char in OPEN_BRACKETS:
            depth += 1
            deepest = max(deepest, depth)
        elif char in CLOSE_BRACKETS:
            depth -= 1
    return deepest


def block_depth(lines: Sequence[str]) -> int:
    depth = 0
    for char in "\n".join(lines):
        if char in OPEN_BRACKETS:
            depth += 1
        elif char in CLOSE_BRACKETS:
            depth -= 1
    return depth

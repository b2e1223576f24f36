"""Pantograph's `parseError` for minilean's tactic text: what Lean's parser refuses before any tactic runs.

    parse_problem("intro h₀, h₁")   # "<input>:1:8: unexpected token ','; expected term"
    parse_problem("simp; ring")      # a top-level `;`: Pantograph parses ONE tactic
    parse_problem("simp; ring", single=False)   # None: a block of a `by` body may hold several
"""

from __future__ import annotations

import re

from minilean.tactics import OUTSIDE_FRAGMENT, TACTIC_NAMES, split_top

_BRACKETS = {"(": ")", "[": "]", "{": "}", "⟨": "⟩"}


def parse_problem(text: str, single: bool = True) -> str | None:
    """Pantograph's `parseError` for tactic text, or None: empty input, unbalanced brackets, an unknown tactic
    head, and (for `tactic`, which Pantograph parses as ONE tactic) a top-level `;`."""
    stripped = re.sub(r"--[^\n]*", "", text)
    if not stripped.strip():
        return "<input>:1:0: unexpected end of input"
    unbalanced = _unbalanced(stripped)
    if unbalanced is not None:
        return unbalanced
    if single:
        pieces = split_top(stripped.strip(), ";")
        if len(pieces) > 1:
            column = len(pieces[0]) + (len(stripped) - len(stripped.lstrip()))
            return f"<input>:1:{column}: unexpected token ';'; expected end of input"
    stray = stripped.find("\ufffd")
    if stray >= 0:  # what a byte-level model writes for a broken character: no Lean token starts with it
        return f"<input>:1:{stray}: unexpected token '\ufffd'; expected term"
    return _bad_head(stripped)


def _unbalanced(stripped: str) -> str | None:
    """The parse error of the first bracket closed by the wrong one, or of one left open."""
    stack: list[str] = []
    for index, char in enumerate(stripped):
        if char in _BRACKETS:
            stack.append(_BRACKETS[char])
        elif char in _BRACKETS.values():
            if not stack or stack[-1] != char:
                return f"<input>:1:{index}: unexpected token '{char}'; expected term"
            stack.pop()
    if stack:
        return f"<input>:1:{len(stripped)}: unexpected end of input; expected '{stack[-1]}'"
    return None


def _bad_head(stripped: str) -> str | None:
    """The parse error of the first line whose head is not a tactic (or whose `intro` names do not parse)."""
    for line in stripped.split("\n"):
        head = re.match(r"\s*(?:[·.]\s*)?([A-Za-z_][\w'!?]*)", line)
        if head is None:
            continue
        word = head.group(1)
        bad = _bad_intro_name(word, line[head.end():])
        if bad is not None:
            return f"<input>:1:{head.end() + bad[0]}: unexpected token '{bad[1]}'; expected term"
        if word in TACTIC_NAMES or word in _STRUCTURAL or word in OUTSIDE_FRAGMENT:
            continue
        if line.strip().startswith("|"):
            continue
        return f"<input>:1:{head.start(1)}: unknown tactic"
    return None


# A name `intro`/`intros` binds: an identifier without dots, or `_` (`intro ⟨a, b⟩` and `intro (h)` are patterns,
# which `rintro` reads). `intro h₀, h₁` and `intro h.1` do not parse in Lean.
_BINDER_NAME = re.compile(r"_|[A-Za-z_α-κμ-ωΑ-Ωℕℤℚℝ𝔽][A-Za-z_0-9'!?α-ωΑ-Ω₀-₉ₐ-ₜ]*")


def _bad_intro_name(head: str, rest: str) -> tuple[int, str] | None:
    """(offset in `rest`, offending character) of the first name `intro`/`intros` cannot bind, else None."""
    if head not in ("intro", "intros") or any(c in rest for c in "⟨(|"):
        return None
    for found in re.finditer(r"\S+", rest):
        if not _BINDER_NAME.fullmatch(found.group()):
            word = found.group()
            valid = _BINDER_NAME.match(word)
            offset = valid.end() if valid is not None and valid.end() > 0 else 0
            return found.start() + offset, word[offset]
    return None


_STRUCTURAL = frozenset({"all_goals", "any_goals", "try", "focus", "repeat", "iterate", "first", "case", "next",
                         "skip", "done", "with", "at", "only", "using"})


__all__ = ["parse_problem"]

"""How a tactic script splits, as Lean parses a tactic sequence: at a separator outside brackets, into top-level
blocks by indentation, and a tactic's `at h₁ h₂` locations.

    split_top("constructor <;> simp; rfl", ";")        # ["constructor <;> simp", " rfl"]
    split_blocks("intro x\nsimp at x")                 # ["intro x", "simp at x"]
"""

from __future__ import annotations

import re

_OPEN = "([{⟨"

_CLOSE = ")]}⟩"


def split_top(text: str, sep: str) -> list[str]:
    """Split at `sep` outside brackets (`;` never splits `<;>`)."""
    parts: list[str] = []
    depth = 0
    start = 0
    index = 0
    while index < len(text):
        char = text[index]
        if char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth -= 1
        elif depth == 0 and text.startswith(sep, index):
            if sep == ";" and (text.startswith("<;>", index - 1) or text.startswith(";>", index)):
                index += 1
                continue
            if sep == "|" and text.startswith("|>", index):
                index += 1
                continue
            parts.append(text[start:index])
            index += len(sep)
            start = index
            continue
        index += 1
    parts.append(text[start:])
    return parts


def split_blocks(text: str) -> list[str]:
    """Top-level tactics of a multi-line script: a line at the base indentation starts one; deeper lines and
    lines inside open brackets continue it."""
    lines = [line for line in text.split("\n") if line.strip()]
    if len(lines) <= 1:
        return [text]
    base = min(len(line) - len(line.lstrip(" ")) for line in lines)
    blocks: list[list[str]] = []
    depth = 0
    for line in lines:
        indent = len(line) - len(line.lstrip(" "))
        if blocks and (indent > base or depth > 0 or line.lstrip().startswith("|")):
            blocks[-1].append(line[base:])
        else:
            blocks.append([line[base:]])
        depth += sum(line.count(c) for c in _OPEN) - sum(line.count(c) for c in _CLOSE)
    return ["\n".join(block) for block in blocks]


def _strip_comments(text: str) -> str:
    return re.sub(r"--[^\n]*", "", text)


def _split_at(rest: str) -> tuple[str, list[str] | None]:
    """`[…] at h₁ h₂` → (`[…]`, ["h₁", "h₂"]); `at ⊢` targets the goal."""
    depth = 0
    for index in range(len(rest)):
        char = rest[index]
        if char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth -= 1
        elif depth == 0 and re.match(r"\bat\b", rest[index:]) and (index == 0 or rest[index - 1].isspace()):
            return rest[:index].strip(), rest[index + 2:].split()
    return rest.strip(), None

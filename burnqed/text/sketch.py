"""A proof sketch: `have NAME : P := by sorry` holes, then the tactics that close the goal from them.

    sketch = read_sketch("have h₁ : 0 < x := by sorry\\nhave h₂ : 0 < y := by sorry\\nnlinarith [h₁, h₂]")
    sketch.holes        # (Hole("h₁", "0 < x"), Hole("h₂", "0 < y"))
    sketch.draft_term() # "by\\n  have h₁ : 0 < x := by sorry\\n  …": the term Pantograph's `draft` elaborates
    sketch.skeleton     # the body with each hole's `:= by sorry` dropped: what the tactic guard reads
    sketch.filled([["positivity"], ["linarith"]])   # the holes' `sorry`s replaced by proofs: the assembled body
    read_sketch("sorry")   # -> a str: why this is no sketch (a `sorry` outside a hole)

A hole is a top-level tactic (a line at the body's indentation with its more-indented continuation lines) that is
exactly `have NAME : P := by sorry` (or `:= sorry`), NAME written once in the sketch; every other top-level tactic
is the skeleton's, which must hold no `sorry`/`admit`/`sorryAx` at all. Lean makes each hole a goal whose context
holds the theorem's binders and the holes before it (docs/lean.md, "Sketches"); `burnqed.lean.commands` sends it.
Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from leankit.proof_text import indent_of
from leankit.text import mask_comments, normalize_newlines, read_as_lean

# `have NAME : P := by sorry` as one top-level tactic (whitespace and line breaks inside are Lean's whitespace).
_HOLE = re.compile(r"have(?:\s+([^\s:()\[\]{}⟨⟩]+))?\s*:\s*(.+?)\s*:=\s*(?:by\s+)?sorry", re.DOTALL)
# What elaborates to `sorryAx` (Lean's `sorry` term and tactic, `admit`) or names it.
_HOLE_END = re.compile(r":=\s*(?:by\s+)?sorry\s*$")  # where a hole's `sorry` is replaced by its proof
_SORRY_WORD = re.compile(r"(?<![\w.'])(?:sorry|admit|sorryAx)(?![\w'])")
SORRY_OUTSIDE_HOLE = "a `sorry` outside a `have NAME : P := by sorry` hole"


@dataclass(frozen=True, slots=True)
class Hole:
    """One `have NAME : P := by sorry` of a sketch: `name` as Lean reads it (`«h₁»` is `h₁`), `statement` as
    written (comments dropped, whitespace collapsed)."""

    name: str
    statement: str


@dataclass(frozen=True, slots=True)
class Sketch:
    """A sketch read by `read_sketch`. `body` is the sketch dedented to column 0 (comments kept, as Lean reads
    them); `skeleton` the comment-masked body with each hole written `have NAME : P` (no `sorry` left)."""

    body: str
    holes: tuple[Hole, ...]
    skeleton: str

    def draft_term(self) -> str:
        """The term Pantograph's `goal.tactic {draft}` elaborates against the goal: `by` and the body indented."""
        return "by\n" + "\n".join(f"  {line}" if line.strip() else "" for line in self.body.splitlines())

    def filled(self, proofs: Sequence[Sequence[str]]) -> str:
        """The body with hole k's `:= by sorry` (or `:= sorry`) replaced by `:= by` and `proofs[k]`'s tactics, one a
        line two columns deeper than the hole (comments after the `sorry` go with it): the assembled proof's body,
        at column 0 (`Sketch.proof_body`'s indentation is the caller's, `join_tactics`)."""
        if len(proofs) != len(self.holes):
            raise ValueError(f"{len(proofs)} proof(s) for a sketch with {len(self.holes)} hole(s)")
        lines = self.body.splitlines()
        masked = mask_comments(self.body).splitlines()
        out: list[str] = []
        hole = 0
        for block in _blocks(masked):
            code = "\n".join(masked[number] for number in block)
            original = "\n".join(lines[number] for number in block)
            found = _HOLE.fullmatch(code.strip())
            if found is None:
                out.append(original)
                continue
            if not proofs[hole]:
                raise ValueError(f"an empty proof for the hole '{self.holes[hole].name}'")
            end = _HOLE_END.search(code)
            assert end is not None  # the block is a hole: it ends in `:= (by) sorry`
            tactics = "\n".join(f"  {line}" if line.strip() else "" for tactic in proofs[hole]
                                 for line in tactic.strip("\n").split("\n"))
            out.append(f"{original[: end.start()].rstrip()} := by\n{tactics}")
            hole += 1
        return "\n".join(out)

    def proof_body(self, indent: int = 2) -> str:
        """The body as the tactic block of a declaration (`theorem … := by` then these lines)."""
        pad = " " * indent
        return "\n".join(f"{pad}{line}" if line.strip() else "" for line in self.body.splitlines())


def _dedent(text: str) -> list[str]:
    lines = normalize_newlines(text).expandtabs(2).splitlines()
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    base = min((indent_of(line) for line in lines if line.strip()), default=0)
    return [line[base:] if line.strip() else "" for line in lines]


def _blocks(masked_lines: list[str]) -> list[list[int]]:
    """The top-level tactics of a dedented body, as line numbers: a line at column 0 starts one, deeper lines (and
    blank ones) continue it."""
    blocks: list[list[int]] = []
    for number, line in enumerate(masked_lines):
        if not line.strip():
            continue
        if indent_of(line) == 0 or not blocks:
            blocks.append([number])
        else:
            blocks[-1].append(number)
    return blocks


def read_sketch(text: str) -> Sketch | str:
    """The sketch in `text` (a proof body, without `by`), or why it is none: empty, no hole, a hole without a name
    of its own, a top-level line indented deeper than the first, or a `sorry` outside a hole."""
    lines = _dedent(text)
    body = "\n".join(lines)
    if not body.strip():
        return "an empty sketch"
    masked_lines = mask_comments(body).splitlines()
    blocks = _blocks(masked_lines)
    holes: list[Hole] = []
    skeleton: list[str] = []
    for block in blocks:
        code = "\n".join(masked_lines[number] for number in block)
        found = _HOLE.fullmatch(code.strip())
        if found is None:
            skeleton.append(code)
            continue
        if found.group(1) is None or read_as_lean(found.group(1)) == "this" or found.group(1).startswith("_"):
            return f"the hole `{' '.join(code.split())}` needs a name of its own (not `this` or `_`)"
        name = read_as_lean(found.group(1))
        statement = " ".join(found.group(2).split())
        if name in {hole.name for hole in holes}:
            return f"two holes are named '{name}': each hole needs a name of its own"
        holes.append(Hole(name, statement))
        skeleton.append(f"have {found.group(1)} : {found.group(2).strip()}")
    joined = "\n".join(skeleton)
    if _SORRY_WORD.search(read_as_lean(joined)):
        return SORRY_OUTSIDE_HOLE
    if not holes:
        return "a sketch without a `have NAME : P := by sorry` hole"
    return Sketch(body, tuple(holes), joined)

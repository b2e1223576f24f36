"""A proof sketch: `have NAME : P := by sorry` holes, then the tactics that close the goal from them.

    sketch = read_sketch("have h₁ : 0 < x := by sorry\\nhave h₂ : 0 < y := by sorry\\nnlinarith [h₁, h₂]")
    sketch.holes        # (Hole("h₁", "0 < x"), Hole("h₂", "0 < y"))
    sketch.draft_term() # "by\\n  have h₁ : 0 < x := by sorry\\n  …": the term Pantograph's `draft` elaborates
    sketch.skeleton     # the body with each hole's `:= by sorry` dropped: what the tactic guard reads
    sketch.filled([["positivity"], ["linarith"]])   # the holes' `sorry`s replaced by proofs: the assembled body
    read_sketch("sorry")   # -> a str: why this is no sketch (a `sorry` outside a hole)
    sketch_of_proof("have h : 0 < x := by positivity\nlinarith")   # the sketch a proof is: its haves' proofs sorry
    subgoal_declaration("t.h₁", goal)   # "theorem t.h₁ (x : ℝ) (h₀ : 0 < x) : 0 < x ^ 2": a subgoal as a theorem

A hole is a top-level tactic (a line at the body's indentation with its more-indented continuation lines) that is
exactly `have NAME : P := by sorry` (or `:= sorry`), NAME written once in the sketch; every other top-level tactic
is the skeleton's, which must hold no `sorry`/`admit`/`sorryAx` at all. Lean makes each hole a goal whose context
holds the theorem's binders and the holes before it (docs/lean.md, "Sketches"); `burnqed.lean.commands` sends it.
SFT trains the planner on the sketches verified proofs are and on proved subgoals as theorems of their own
(docs/training.md, "Sketch examples"). Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from burnqed.records.replies import Goal
from leankit.proof_text import indent_of
from leankit.text import find_depth0, mask_comments, normalize_newlines, read_as_lean

# `have NAME : P := by sorry` as one top-level tactic (whitespace and line breaks inside are Lean's whitespace).
# The statement (group 2) runs up to the `:=` and keeps the blanks before it (`\s*:=` there would walk back over a
# run of blanks from each of its characters: quadratic in a blank run).
_HOLE = re.compile(r"have(?:\s+([^\s:()\[\]{}⟨⟩]+))?\s*:(.+?):=\s*(?:by\s+)?sorry", re.DOTALL)
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
    """The top-level tactics of a dedented, comment-masked body, as their non-blank line numbers: a line at column 0
    starts one, deeper lines continue it."""
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


# ------------------------------------------------------------------------------------ sketches of proofs

# A typed, named `have` at the start of a top-level tactic: `have NAME :` (not `:=`), its statement and proof after.
_PROVED_HAVE = re.compile(r"have\s+([^\s:()\[\]{}⟨⟩]+)\s*:(?!=)")


def sketch_of_proof(body: str) -> Sketch | None:
    """The sketch a proof's `have` structure is (docs/training.md, "Sketch examples"): `body` (a proof body, without
    `by`) with the proof of each top-level `have NAME : P := <proof>` replaced by `by sorry` and every other line kept
    as written, comments included (those inside a replaced proof go with it); None when no top-level `have` gives a
    hole or the result is no sketch (`read_sketch`: e.g. two holes of one name). Top-level tactics are
    `read_sketch`'s (a line at the body's indentation and its deeper continuation lines); a `have` nested in another
    tactic stays inside it, proof and all, and so does a `have` Lean names itself (`have : P`, `this`, `_h`), one
    without a statement (`have h := …`) or with binders (`have h (x : ℕ) : P x := …`): the skeleton keeps them
    proved."""
    lines = _dedent(body)
    masked = mask_comments("\n".join(lines)).split("\n")
    blocks = {block[0]: block[-1] for block in _blocks(masked)}
    out: list[str] = []
    holes = 0
    number = 0
    while number < len(lines):
        last = blocks.get(number)
        hole = _as_hole("\n".join(masked[number : last + 1])) if last is not None else None
        if hole is None:
            out.append(lines[number])
            number += 1
            continue
        out.append(hole)
        holes += 1
        number = (last or number) + 1
        while number < len(lines) and not masked[number].strip() and indent_of(lines[number]) > 0:
            number += 1  # a comment inside the proof the hole replaces
    if not holes:
        return None
    read = read_sketch("\n".join(out))
    return read if isinstance(read, Sketch) else None


def _as_hole(code: str) -> str | None:
    """A top-level tactic (comment-masked) `have NAME : P := <proof>` as the hole `have NAME : P := by sorry`, or None
    when it is no such `have` (see `sketch_of_proof`)."""
    found = _PROVED_HAVE.match(code)
    if found is None or read_as_lean(found.group(1)) == "this" or found.group(1).startswith("_"):
        return None
    assign = find_depth0(code, ":=", found.end())
    if assign < 0 or not code[found.end() : assign].strip():
        return None
    head = "\n".join(line.rstrip() for line in code[:assign].rstrip().split("\n"))
    return f"{head} := by sorry"


# ------------------------------------------------------------------------------- subgoals as theorems

# A metavariable Lean prints (`?m.5`, `?u.12`, `?_`): no declaration can write it. `get?` is a name, not one.
_METAVARIABLE = re.compile(r"(?<![\w'!?.])\?[\w_]")
_ASSIGNED_HOLE = re.compile(r"\?m\.\d+")  # a draft's value of an earlier hole (docs/lean.md, "Sketches")


class Unrenderable(ValueError):
    """A subgoal no declaration can state as Lean printed it (`subgoal_declaration` says why)."""


def subgoal_name(theorem: str, hole: str) -> str:
    """The name a proved subgoal trains under as a theorem of its own: the hole's name inside the theorem's."""
    return f"{theorem}.{hole}"


def subgoal_declaration(name: str, goal: Goal) -> str:
    """The declaration of `goal` (a sketch's subgoal, as Lean printed it) as a theorem `name` of its own:
    `theorem NAME (x y : ℝ) (h₀ : 0 < x) : P`, each hypothesis a binder (consecutive ones of one type grouped, as
    Lean prints them), the target after the colon, so that its start state is `goal` again (binder form, whatever
    `policy.declaration_form`). A draft's `?m.N` value of an earlier hole is dropped (the hole is a hypothesis).
    `Unrenderable` when Lean's text cannot be written back as a declaration: an inaccessible hypothesis (`x✝`,
    `inst✝`: a name no binder can give, an anonymous instance among them), a `let` value (`n : ℕ := 5`: a binder has
    no value), or a metavariable in a type or the target (`?m.3`, `?u.7`)."""
    binders: list[tuple[list[str], str]] = []
    for variable in goal.variables:
        if variable.inaccessible or "✝" in variable.name:
            raise Unrenderable(f"the hypothesis {variable.name} is inaccessible: no binder can name it")
        if variable.value is not None and not _ASSIGNED_HOLE.fullmatch(variable.value.strip()):
            raise Unrenderable(f"the hypothesis {variable.name} has a value ({' '.join(variable.value.split())}): "
                               "a binder has none")
        type_ = " ".join(variable.type.split())
        if _METAVARIABLE.search(type_) or "✝" in type_:
            raise Unrenderable(f"the type of {variable.name} names what no declaration can write: {type_}")
        if binders and binders[-1][1] == type_:
            binders[-1][0].append(variable.name)
        else:
            binders.append(([variable.name], type_))
    target = " ".join(goal.target.split())
    if _METAVARIABLE.search(target) or "✝" in target:
        raise Unrenderable(f"the target names what no declaration can write: {target}")
    shown = "".join(f" ({' '.join(names)} : {type_})" for names, type_ in binders)
    return f"theorem {name}{shown} : {target}"

"""Model text back into Lean: a tactic or a proof out of a raw completion, and proofs joined back into a body.

    body = extract_completion(fmt, raw)                 # the tactic or proof body of a completion in format `fmt`
    tactic = normalize_tactic(extract_tactic(raw))      # one generated line is one step; the key search dedups on
    tactics = split_proof(proof)                        # top-level tactics, for whole-proof replay
    code = "theorem X : S := by\\n" + join_tactics(tactics)  # the inverse, for the verification path
    sent = as_single_tactic("t1; t2")                   # "(t1; t2)": Pantograph's goal.tactic parses one tactic
    read = read_answer_file(answer_file(fmt, raw, prime), slot, name)   # an answer prompt's completion: the
                                                        # slot's value, the theorem's signature and its proof body

A step `t1; t2` stays whole in search (trajectory row, SFT completion, proof path); `split_proof` splits it for
whole-proof replay. The splitter is `leankit.proof_text`, shared with the embedded Lean (its rules: docs/search.md,
"Splitting a proof into tactics"). The prompts are in `burnqed.text.prompt`. Pure: no I/O, nothing runs at import.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from burnqed.text.prompt import (
    BLOCK_INDENT,
    CODE_FENCE,
    EOS_TEXT,
    FENCE_OPEN,
    PromptFormat,
    is_cot_format,
    is_proof_format,
)
from leankit.proof_text import indent_of, normalize_layout, split_proof, split_sequence, tactic_groups
from leankit.text import depth0_chars, find_depth0, mask_comments, normalize_newlines

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


@dataclass(frozen=True, slots=True)
class AnswerFile:
    """What the file an answer prompt's completion writes gives (`read_answer_file`)."""

    answer: str | None  # the slot's value, comments dropped, continuation lines dedented; None when it has none
    signature: str | None  # what `theorem NAME` declares after its name, up to its `:=`; None without that theorem
    body: str  # that theorem's proof body (`extract_proof`); "" without it


# A column-0 definition or theorem of one name (attributes and modifiers before its keyword), comments masked.
_MODIFIED = r"^(?:@\[[^\]\n]*\][ \t]*)?(?:(?:noncomputable|private|protected|nonrec)[ \t]+)*"


def answer_file(fmt: PromptFormat, raw: str, prime: str) -> str:
    """The file a completion of an answer prompt writes (docs/search.md, "Prompt formats"): the text the prompt
    primed (`text.prompt.answer_prime`, its fence left out) followed by the generation up to its closing fence; a
    generation that opens a ```lean4 block of its own restates the file, which is then that block alone (read by its
    own `abbrev SLOT … :=`, never the primed `:=` followed by the block's first line); for a CoT format, the answer's
    last lean4 block (the prompt primes nothing there)."""
    if is_cot_format(fmt):
        return last_code_block(raw)
    if _opens_block(raw):
        return _strip_generation(raw)
    return prime.removeprefix(FENCE_OPEN) + _strip_generation(raw)


def read_answer_file(text: str, slot: str, name: str) -> AnswerFile:
    """The value `text` gives the definition `slot` (from its `:=` up to the next column-0 line, comments dropped:
    everything a model wrote there, which `lean.soundness.check_answer` then refuses unless it is one term), and the
    signature and proof body of its `theorem name` (or `lemma`); each the first such declaration of the file."""
    masked = mask_comments(normalize_newlines(text))
    answer = None
    found = re.search(_MODIFIED + r"(?:abbrev|def)[ \t]+" + re.escape(slot) + r"(?![\w'!?])", masked, re.MULTILINE)
    assign = find_depth0(masked, ":=", found.end()) if found is not None else -1
    if assign >= 0:
        after = re.search(r"\n(?=\S)", masked[assign:])
        value = masked[assign + 2 : len(masked) if after is None else assign + after.start()]
        answer = _dedent_value(value) or None
    found = re.search(_MODIFIED + r"(?:theorem|lemma)[ \t]+" + re.escape(name) + r"(?![\w'!?.])", masked,
                      re.MULTILINE)
    assign = find_depth0(masked, ":=", found.end()) if found is not None else -1
    if found is None or assign < 0:
        return AnswerFile(answer, None, "")
    return AnswerFile(answer, masked[found.end() : assign].strip(), extract_proof(masked[found.start() :]))


def _dedent_value(value: str) -> str:
    """A definition's value as one term: its first line stripped, the lines after it dedented together."""
    lines = [line.rstrip() for line in value.strip().split("\n")]
    rest = [line for line in lines[1:] if line.strip()]
    base = min((indent_of(line) for line in rest), default=0)
    return "\n".join([lines[0].strip(), *(line[base:] for line in lines[1:] if line.strip())]).strip()


def extract_tactic(raw: str) -> str:
    """The first step of a raw generation, dedented ("" when there is none).

    Fences, stop strings, comments, an echoed declaration and a leading `by` are dropped. One generated
    line is one step: `t1; t2` and `t1 <;> t2` stay whole (the model wrote them as one step, as the burn-qed
    prototype and BFS-Prover send them), and a multi-line tactic (a `have … := by` block, a bullet) stays whole and is
    not have-split. Lines after the step are discarded, and so is a trailing `;` (which no tactic follows).
    `split_proof` still splits `t1; t2` for whole-proof replay. The Lean edge sends a step with a top-level
    `;` as `(t1; t2)`: see `as_single_tactic`.
    """
    for group in tactic_groups(_strip_generation(raw)):
        return _drop_trailing_semicolon(group)
    return ""


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
    lines = [line.rstrip() for line in mask_comments(normalize_layout(tactic)).split("\n")]
    kept = [line for line in lines if line]
    if not kept:
        return ""
    base = min(indent_of(line) for line in kept)
    return "\n".join(" " * (indent_of(line) - base) + re.sub(r"\s+", " ", line.strip()) for line in kept)


def _opens_block(raw: str) -> bool:
    """Whether a generation starts with a ```lean4 (or ```lean) fence of its own (blanks before it only)."""
    text = normalize_newlines(raw)
    if EOS_TEXT in text:
        text = text[: text.index(EOS_TEXT)]
    return text.lstrip().startswith(CODE_FENCE + "lean")


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


def join_tactics(tactics: Sequence[str], indent: str = BLOCK_INDENT) -> str:
    """A proof body from top-level tactics: ``f"theorem X : S := by\\n" + join_tactics(ts)`` compiles
    when the tactics do. Multi-line tactics keep their relative indentation; no trailing newline."""
    lines: list[str] = []
    for tactic in tactics:
        lines.extend(indent + line if line.strip() else "" for line in tactic.strip("\n").split("\n"))
    return "\n".join(lines)


def _drop_trailing_semicolon(tactic: str) -> str:
    """`t;` → `t`: a separator with nothing after it (Lean's parser of one tactic would refuse it)."""
    last = None
    for index, char in depth0_chars(tactic):
        if char == ";" and tactic[index - 1 : index + 2] != "<;>":
            last = index
    if last is not None and not tactic[last + 1 :].strip():
        return tactic[:last].rstrip()
    return tactic


__all__ = [
    "AnswerFile",
    "answer_file",
    "as_single_tactic",
    "extract_completion",
    "extract_proof",
    "extract_tactic",
    "join_tactics",
    "last_code_block",
    "normalize_tactic",
    "read_answer_file",
    "split_proof",
    "split_sequence",
]

"""Prompt formats and the prompts built from them: the one source of truth for the text the model sees.

    fmt = format_for(PromptFormat.DEEPSEEK_TACTIC, "hybrid")    # the configured family's variant for a search mode
    prompt = build_prompt(fmt, state, context)                  # step and hybrid; whole: build_statement_prompt
    stops = stop_strings(fmt)                                   # read back with text.completion.extract_completion
    pair = (prompt, build_completion(fmt, tactic))              # what SFT trains on
    text = build_embedding_text(fmt, state)                     # what the EBM embeds
    repair = build_repair_prompt(repair_format(fmt), declaration, header, feedback)   # the family's repair turn
    plan = build_sketch_prompt(sketch_format(fmt), declaration, header)               # the planner's prompt
    again = build_replan_prompt(sketch_format(fmt), declaration, header, sketch, failures)   # a failed sketch's

SFT, search and the EBM call the same functions, so the training prompt is byte-identical to the inference prompt.
Every format's text, why it has that shape and when to pass ``bos=True``: docs/search.md, "Prompt formats". Pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum

from burnqed.records.enums import SearchMode
from burnqed.text.feedback import Feedback, FeedbackMessage, quoted_line
from leankit.answer import fill_slot, find_slots, split_at_slot
from leankit.statements import append_code
from leankit.text import normalize_newlines

__all__ = [
    "ASSISTANT_TOKEN",
    "BOS_TEXT",
    "CODE_FENCE",
    "EOS_TEXT",
    "FENCE_OPEN",
    "USER_TOKEN",
    "PromptFamily",
    "PromptFormat",
    "answer_header",
    "answer_prime",
    "build_completion",
    "build_embedding_text",
    "build_prompt",
    "build_repair_prompt",
    "build_replan_prompt",
    "build_sketch_prompt",
    "build_statement_prompt",
    "family_of",
    "format_for",
    "format_state_comment",
    "is_cot_format",
    "is_proof_format",
    "is_repair_format",
    "is_sketch_format",
    "is_statement_format",
    "repair_format",
    "sketch_format",
    "stop_strings",
    "whole_format_of",
]

# DeepSeek chat tokens. The bars are U+FF5C (FULLWIDTH VERTICAL LINE), the spaces U+2581.
BOS_TEXT = "<｜begin▁of▁sentence｜>"
EOS_TEXT = "<｜end▁of▁sentence｜>"
USER_TOKEN = "<｜User｜>"
ASSISTANT_TOKEN = "<｜Assistant｜>"

FENCE_OPEN = "```lean4\n"
CODE_FENCE = "```"
# The closing fence on its own line ends every completion: unambiguous, since Lean code never
# contains a line starting with three backticks, and native to DeepSeek-Prover-V2's answers.
STOP_MARKER = "\n" + CODE_FENCE

TACTIC_INSTRUCTION = "Complete the following Lean 4 code with the next tactic:"
PROOF_INSTRUCTION = "Complete the following Lean 4 code:"
# DeepSeek-Prover-V2's CoT instruction, word for word from its model card (README, "Quick Start").
COT_INSTRUCTION = (
    "Before producing the Lean 4 code to formally prove the given theorem, provide a detailed proof plan outlining "
    "the main proof steps and strategies.\nThe plan should highlight key ideas, intermediate lemmas, and proof "
    "structures that will guide the construction of the final formal proof."
)
# The repair prompts' texts (docs/search.md, "Prompt formats"); Goedel-Prover-V2's word for word from its inference
# code.
REPAIR_INSTRUCTION = "This Lean 4 proof does not compile:"
REPAIR_MESSAGES = "Lean's messages:"
REPAIR_GOAL = "The goal at the first error:"
GOEDEL_FEEDBACK = ("The proof (Round {round}) is not correct. Following is the compilation error message, where we use "
                   "<error></error> to signal the position of the error.")
GOEDEL_COT_REQUEST = ("Before producing the Lean 4 code to formally prove the given theorem, provide a detailed "
                      "analysis of the error message.")
# The planner's instruction (sketch formats): the subgoals as `have`s left `sorry`, then the tactics that use them.
SKETCH_INSTRUCTION = ("Sketch a proof of the following Lean 4 code: state the intermediate facts it needs as "
                      "`have NAME : P := by sorry`, then close the goal from them:")
# A re-plan (sketch formats): the failed sketch and what failed in it, then the planner's prompt again.
REPLAN_INSTRUCTION = "This Lean 4 proof sketch failed:"
REPLAN_FAILURES = "What failed:"
REPLAN_TURN = "The sketch is not correct. What failed:"
ANONYMOUS_DECLARATION = "example"
STATE_COMMENT_OPEN = "/- tactic state:"
STATE_COMMENT_CLOSE = "-/"
BLOCK_INDENT = "  "  # the proof block's indentation inside `:= by`


class PromptFormat(StrEnum):
    """A prompt format. `policy.prompt_format` names one of the first four (its family, see `format_for`); the
    whole-proof formats are picked by `search.mode = "whole"`."""

    DEEPSEEK_TACTIC = "deepseek-tactic"
    DEEPSEEK_PROOF = "deepseek-proof"
    PLAIN_TACTIC = "plain-tactic"
    PLAIN_PROOF = "plain-proof"
    DEEPSEEK_WHOLE = "deepseek-whole"
    DEEPSEEK_WHOLE_COT = "deepseek-whole-cot"
    PLAIN_WHOLE = "plain-whole"
    DEEPSEEK_REPAIR = "deepseek-repair"
    DEEPSEEK_REPAIR_COT = "deepseek-repair-cot"
    PLAIN_REPAIR = "plain-repair"
    DEEPSEEK_SKETCH = "deepseek-sketch"
    PLAIN_SKETCH = "plain-sketch"


class PromptFamily(StrEnum):
    """Which model's text a format is: DeepSeek-Prover's chat format, or the plain one of the tiny model."""

    DEEPSEEK = "deepseek"
    PLAIN = "plain"


_CHAT_FORMATS = frozenset(
    {PromptFormat.DEEPSEEK_TACTIC, PromptFormat.DEEPSEEK_PROOF, PromptFormat.DEEPSEEK_WHOLE,
     PromptFormat.DEEPSEEK_WHOLE_COT, PromptFormat.DEEPSEEK_REPAIR, PromptFormat.DEEPSEEK_REPAIR_COT,
     PromptFormat.DEEPSEEK_SKETCH}
)
_SKETCH_FORMATS = frozenset({PromptFormat.DEEPSEEK_SKETCH, PromptFormat.PLAIN_SKETCH})
_SKETCH_OF = {PromptFamily.DEEPSEEK: PromptFormat.DEEPSEEK_SKETCH, PromptFamily.PLAIN: PromptFormat.PLAIN_SKETCH}
_REPAIR_FORMATS = frozenset({PromptFormat.DEEPSEEK_REPAIR, PromptFormat.DEEPSEEK_REPAIR_COT, PromptFormat.PLAIN_REPAIR})
_COT_FORMATS = frozenset({PromptFormat.DEEPSEEK_WHOLE_COT, PromptFormat.DEEPSEEK_REPAIR_COT})
_STATEMENT_FORMATS = frozenset({PromptFormat.DEEPSEEK_WHOLE, PromptFormat.DEEPSEEK_WHOLE_COT, PromptFormat.PLAIN_WHOLE})
_PROOF_FORMATS = frozenset({PromptFormat.DEEPSEEK_PROOF, PromptFormat.PLAIN_PROOF, *_STATEMENT_FORMATS,
                            *_REPAIR_FORMATS, *_SKETCH_FORMATS})
_VARIANTS: dict[tuple[PromptFamily, SearchMode], PromptFormat] = {
    (PromptFamily.DEEPSEEK, SearchMode.STEP): PromptFormat.DEEPSEEK_TACTIC,
    (PromptFamily.DEEPSEEK, SearchMode.HYBRID): PromptFormat.DEEPSEEK_PROOF,
    (PromptFamily.DEEPSEEK, SearchMode.WHOLE): PromptFormat.DEEPSEEK_WHOLE,
    (PromptFamily.PLAIN, SearchMode.STEP): PromptFormat.PLAIN_TACTIC,
    (PromptFamily.PLAIN, SearchMode.HYBRID): PromptFormat.PLAIN_PROOF,
    (PromptFamily.PLAIN, SearchMode.WHOLE): PromptFormat.PLAIN_WHOLE,
    (PromptFamily.DEEPSEEK, SearchMode.SKETCH): PromptFormat.DEEPSEEK_SKETCH,
    (PromptFamily.PLAIN, SearchMode.SKETCH): PromptFormat.PLAIN_SKETCH,
}

_REPAIR_OF: dict[PromptFormat, PromptFormat] = {  # whole format → its repair turn
    PromptFormat.DEEPSEEK_WHOLE: PromptFormat.DEEPSEEK_REPAIR,
    PromptFormat.DEEPSEEK_WHOLE_COT: PromptFormat.DEEPSEEK_REPAIR_COT,
    PromptFormat.PLAIN_WHOLE: PromptFormat.PLAIN_REPAIR,
}
_WHOLE_OF = {repair: whole for whole, repair in _REPAIR_OF.items()}

# ------------------------------------------------------------------------------------------ prompts


def is_proof_format(fmt: PromptFormat) -> bool:
    """True when the completion is a whole proof body (hybrid and whole search), False for one tactic."""
    return fmt in _PROOF_FORMATS


def is_statement_format(fmt: PromptFormat) -> bool:
    """True for the whole-proof formats, whose prompt shows the theorem's statement instead of a state."""
    return fmt in _STATEMENT_FORMATS


def is_repair_format(fmt: PromptFormat) -> bool:
    """True for the repair formats: a failed proof and Lean's messages on it → a revised whole proof."""
    return fmt in _REPAIR_FORMATS


def is_cot_format(fmt: PromptFormat) -> bool:
    """True for the formats whose answer is a plan, then the code (the proof is the answer's last lean4 block)."""
    return fmt in _COT_FORMATS


def is_sketch_format(fmt: PromptFormat) -> bool:
    """True for the sketch formats: a theorem's statement → a sketch of `have NAME : P := by sorry` subgoals."""
    return fmt in _SKETCH_FORMATS


def family_of(fmt: PromptFormat) -> PromptFamily:
    """The model family a format belongs to."""
    return PromptFamily.DEEPSEEK if fmt in _CHAT_FORMATS else PromptFamily.PLAIN


def format_for(fmt: PromptFormat, mode: SearchMode | str, *, cot: bool = False) -> PromptFormat:
    """The format the search `mode` sends, in the family of the configured `fmt`: the tactic format for step,
    the proof-from-state format for hybrid, the whole format (DeepSeek's CoT variant when `cot`) for whole, the
    planner's sketch format (`sketch_format`) for sketch (its subgoals are searched in their own mode's format).

    `cot` exists only in the deepseek family (ValueError otherwise); it changes only the whole format.
    """
    family = family_of(fmt)
    if cot and family is not PromptFamily.DEEPSEEK:
        raise ValueError(f"CoT is an option of the deepseek prompt family; {fmt} is a {family} format")
    chosen = _VARIANTS[(family, SearchMode(mode))]
    if cot and chosen is PromptFormat.DEEPSEEK_WHOLE:
        return PromptFormat.DEEPSEEK_WHOLE_COT
    return chosen


def repair_format(fmt: PromptFormat, *, cot: bool = False) -> PromptFormat:
    """The format of a repair round, for the configured `fmt` (`policy.prompt_format`: its family): the repair turn
    of the family's whole format (`format_for`), Goedel's CoT turn with `cot`. Search, its context checks before
    work and SFT's repair examples all ask here."""
    return _REPAIR_OF[format_for(fmt, SearchMode.WHOLE, cot=cot)]


def sketch_format(fmt: PromptFormat) -> PromptFormat:
    """The planner's format for the configured `fmt`: the sketch format of its family. Sketch search and SFT's sketch
    examples both ask here."""
    return _SKETCH_OF[family_of(fmt)]


def whole_format_of(fmt: PromptFormat) -> PromptFormat:
    """The whole format whose prompt a repair format `fmt` builds on."""
    return _WHOLE_OF.get(fmt, PromptFormat.PLAIN_WHOLE)


def format_state_comment(state: str, indent: str = BLOCK_INDENT) -> str:
    """The tactic state as a `/- tactic state: … -/` comment at `indent`, its lines two spaces deeper.

    Multi-goal states keep Lean's blank lines between goals (written empty, no trailing spaces).
    The result ends with a newline.
    """
    inner = indent + "  "
    lines = normalize_newlines(state).strip("\n").split("\n")
    body = "\n".join(inner + line.rstrip() if line.strip() else "" for line in lines)
    return f"{indent}{STATE_COMMENT_OPEN}\n{body}\n{indent}{STATE_COMMENT_CLOSE}\n"


def build_prompt(fmt: PromptFormat, state: str, context: str | None = None, *, bos: bool = False) -> str:
    """The policy prompt for `state` (pretty-printed goals), optionally under a theorem declaration.

    `context` is the declaration up to its statement, e.g. ``theorem foo (x : ℕ) : x + 0 = x``
    (a trailing ``:= by``/``sorry`` is dropped); without it the proof is an anonymous `example`.
    `bos` prepends BOS_TEXT (chat formats only; when: docs/search.md, "Prompt formats"). The whole-proof formats
    show a statement, not a state: they are built with `build_statement_prompt` (ValueError here).
    """
    if is_statement_format(fmt) or is_repair_format(fmt) or is_sketch_format(fmt):
        raise ValueError(f"{fmt} prompts show the theorem's statement: use build_statement_prompt, "
                         "build_repair_prompt or build_sketch_prompt")
    instruction = PROOF_INSTRUCTION if is_proof_format(fmt) else TACTIC_INSTRUCTION
    code = f"{FENCE_OPEN}{append_code(_declaration(context), ':= by')}\n{format_state_comment(state)}"
    if fmt in _CHAT_FORMATS:
        prefix = BOS_TEXT if bos else ""
        return f"{prefix}{USER_TOKEN}{instruction}{ASSISTANT_TOKEN}{code}"
    return f"{instruction}\n{code}"


def build_statement_prompt(fmt: PromptFormat, declaration: str, header: str | None = None, *, slot: str | None = None,
                           bos: bool = False) -> str:
    """The whole-proof prompt of a theorem (`fmt` a whole format): `declaration` is ``theorem NAME <binders> : T``
    (`records.theorem.Theorem.declaration`; a trailing ``:= by``/``sorry`` is dropped), `header` its imports and
    opens (shown by the deepseek formats only). With `slot`, the name of the header's open answer slot
    (`search.answer.AnswerSlot.name`), every format shows the whole file, slot `:= sorry` included, and the answer
    starts at the slot (`answer_file_prompt`). Each format's exact text: docs/search.md, "Prompt formats"."""
    if not is_statement_format(fmt):
        raise ValueError(f"{fmt} prompts do not show the statement alone: use build_prompt or build_repair_prompt")
    opened = append_code(_declaration(declaration), ":= by")
    prefix = BOS_TEXT if bos else ""
    if slot is not None:
        return prefix + _answer_file_prompt(fmt, opened, answer_header(header or "", slot), slot)
    if fmt is PromptFormat.PLAIN_WHOLE:
        return f"{PROOF_INSTRUCTION}\n{FENCE_OPEN}{opened}\n"
    head = normalize_newlines(header).strip("\n") + "\n\n" if header and header.strip() else ""
    question = f"{PROOF_INSTRUCTION}\n\n{FENCE_OPEN}{head}{opened}\n{BLOCK_INDENT}sorry\n{CODE_FENCE}"
    if fmt is PromptFormat.DEEPSEEK_WHOLE_COT:
        return f"{prefix}{USER_TOKEN}{question}\n\n{COT_INSTRUCTION}{ASSISTANT_TOKEN}"
    return f"{prefix}{USER_TOKEN}{question}{ASSISTANT_TOKEN}{FENCE_OPEN}{head}{opened}\n"


def answer_header(header: str, slot: str) -> str:
    """The header as an answer prompt shows it: the theorem's header with slot `slot` still `sorry`, less the comment
    lines right under the slot, where PutnamBench writes the reference answer (`leankit.answer.reference_answer`): a
    prompt never shows it. ValueError when the header has no such slot."""
    header = normalize_newlines(header).strip("\n")
    found = next((s for s in find_slots(header) if s.name == slot), None)
    if found is None:
        raise ValueError(f"the header has no answer slot {slot!r} (a definition whose value is `sorry`)")
    line_end = header.find("\n", found.sorry_end)
    if line_end < 0:
        return header
    rest = header[line_end + 1 :].split("\n")
    under = 0
    while under < len(rest) and rest[under].strip().startswith("--"):
        under += 1
    return header[:line_end] + "".join(f"\n{line}" for line in rest[under:])


def answer_prime(header: str, slot: str) -> str:
    """What an answer prompt primes the answer with: the opening fence and the shown header (`answer_header`) up to
    and including the slot's `:=`. A completion is read back as this text followed by the generation
    (`text.completion.answer_file`)."""
    return FENCE_OPEN + split_at_slot(answer_header(header, slot), slot)[0]


def _answer_file_prompt(fmt: PromptFormat, opened: str, shown: str, slot: str) -> str:
    """The whole prompt of a theorem whose answer is open (`fmt` a whole format; `opened` its declaration with
    `:= by`, `shown` its header as `answer_header` gives it): the file, the slot `:= sorry` and the theorem
    `:= by sorry`, in a lean4 block, under the instruction; the answer primed at the slot (`answer_prime`), so the
    model writes the answer's value, then the rest of the file and the proof, as DeepSeek-Prover-V2 and
    Goedel-Prover-V2 complete a Lean code block. The deepseek formats in their chat turns (CoT: the user turn and
    the plan request, nothing primed); plain-whole is the same text without chat tokens."""
    question = f"{PROOF_INSTRUCTION}\n\n{FENCE_OPEN}{shown}\n\n{opened}\n{BLOCK_INDENT}sorry\n{CODE_FENCE}"
    primed = answer_prime(shown, slot)
    if fmt is PromptFormat.PLAIN_WHOLE:
        return f"{question}\n{primed}"
    if fmt is PromptFormat.DEEPSEEK_WHOLE_COT:
        return f"{USER_TOKEN}{question}\n\n{COT_INSTRUCTION}{ASSISTANT_TOKEN}"
    return f"{USER_TOKEN}{question}{ASSISTANT_TOKEN}{primed}"


def build_repair_prompt(fmt: PromptFormat, declaration: str, header: str | None, feedback: Feedback, *,
                        round_: int = 0, slot: str | None = None, answer: str | None = None, bos: bool = False) -> str:
    """The repair prompt of a proof that failed (`fmt` a repair format; docs/search.md, "Prompt formats"):
    `declaration` and `header` as the whole prompt shows them, `feedback` the failed proof's body as it was checked and
    Lean's messages on it (already capped: `burnqed.text.feedback.cap_messages`), `round_` the failed proof's place in
    its repair chain (0: a fresh attempt; Goedel-Prover-V2's prompt names it). The completion is a whole proof body, as
    for the whole formats (`build_completion`). With `slot` (the header's open answer slot) and `answer` (the failed
    attempt's), the failed proof is shown as its whole file, the slot filled with `answer`, and the whole prompt
    under it is the answer prompt (`build_statement_prompt` with `slot`): the revision starts at the slot again."""
    if not is_repair_format(fmt):
        raise ValueError(f"{fmt} is not a repair format: use build_prompt or build_statement_prompt")
    opened = append_code(_declaration(declaration), ":= by")
    failed = f"{opened}\n{_indent(feedback.proof)}"
    whole = build_statement_prompt(whole_format_of(fmt), declaration, header, slot=slot)
    if slot is not None:
        head = fill_slot(answer_header(header or "", slot), slot, answer or "sorry") + "\n\n"
    else:
        head = normalize_newlines(header).strip("\n") + "\n\n" if header and header.strip() else ""
    if fmt is PromptFormat.PLAIN_REPAIR:
        shown = head if slot is not None else ""  # plain-whole shows no header, but an answer is part of the file
        lines = [REPAIR_INSTRUCTION, f"{FENCE_OPEN}{shown}{failed}", CODE_FENCE, REPAIR_MESSAGES]
        lines += [_plain_message(m, opened, shown.count("\n")) for m in feedback.messages]
        if feedback.cut:
            lines.append(f"({feedback.cut} more not shown)")
        if feedback.goal is not None:
            lines += [REPAIR_GOAL, normalize_newlines(feedback.goal).strip("\n")]
        return "\n".join(lines) + "\n" + whole
    question, primed = whole.split(ASSISTANT_TOKEN, 1)
    reply = f"{FENCE_OPEN}{head}{failed}\n{CODE_FENCE}{EOS_TEXT}"
    errors = "".join(_goedel_message(index, m, feedback.proof, opened, head.count("\n"))
                     for index, m in enumerate(feedback.messages, start=1))
    if feedback.cut:
        errors += f"\n... [Omitted {feedback.cut} more errors] ...\n"
    if feedback.goal is not None:
        errors += f"\n{REPAIR_GOAL}\n{FENCE_OPEN}{normalize_newlines(feedback.goal).strip(chr(10))}\n{CODE_FENCE}\n"
    turn = f"{GOEDEL_FEEDBACK.format(round=round_)}\n\n{errors}"
    prefix = BOS_TEXT if bos else ""
    if fmt is PromptFormat.DEEPSEEK_REPAIR_COT:
        return f"{prefix}{question}{ASSISTANT_TOKEN}{reply}{USER_TOKEN}{turn}\n\n{GOEDEL_COT_REQUEST}{ASSISTANT_TOKEN}"
    return f"{prefix}{question}{ASSISTANT_TOKEN}{reply}{USER_TOKEN}{turn}{ASSISTANT_TOKEN}{primed}"


def _indent(body: str) -> str:
    return "\n".join(BLOCK_INDENT + line if line.strip() else "" for line in normalize_newlines(body).split("\n"))


def _shown_position(message: FeedbackMessage, opened: str, before: int) -> tuple[int, int] | None:
    """A message's (line, column) in the code block the prompt shows: `before` lines (a header) precede the
    declaration `opened` (ending in `:= by`), the body follows it indented by BLOCK_INDENT."""
    if message.line is None:
        return None
    declaration_lines = opened.count("\n") + 1
    if message.line == 0:
        return before + declaration_lines, len(opened.rsplit("\n", 1)[-1]) - len("by")
    return before + declaration_lines + message.line, len(BLOCK_INDENT) + (message.column or 0)


def _plain_message(message: FeedbackMessage, opened: str, before: int) -> str:
    position = _shown_position(message, opened, before)
    label = f"{position[0]}:{position[1]}: " if position else ""
    return f"{label}{message.severity}: {normalize_newlines(message.text)}"


def _goedel_message(index: int, message: FeedbackMessage, proof: str, opened: str, before: int) -> str:
    position = _shown_position(message, opened, before)
    where = f" (line {position[0]}, column {position[1]})" if position else ""
    code = ""
    if message.line == 0:
        line = opened.rsplit("\n", 1)[-1]
        code = line[: -len("by")] + "<error>by</error>"
    elif quoted := quoted_line(proof, message):
        column = min(message.column or 0, len(quoted))
        code = f"{BLOCK_INDENT}{quoted[:column]}<error>{quoted[column:]}</error>"
    excerpt = f"\nCorresponding Code:\n{FENCE_OPEN}{code}\n{CODE_FENCE}\n" if code else ""
    return f"\nError {index}{where}:\n{excerpt}\nError Message: {normalize_newlines(message.text)}\n"


# Bump when `build_embedding_text` (or `build_prompt`, which it returns) changes what a state's text is: the
# value model's encoder identity records it, so embeddings of the old text are never mixed with the new.
EMBEDDING_TEXT_VERSION = "prompt-v1"


def build_sketch_prompt(fmt: PromptFormat, declaration: str, header: str | None = None, *, bos: bool = False) -> str:
    """The planner's prompt for a theorem (`fmt` a sketch format, `sketch_format`): the statement as whole mode shows
    it (`declaration` and, in the deepseek format, `header`) under SKETCH_INSTRUCTION, the answer primed to the proof
    body, which is the sketch (`burnqed.text.sketch.read_sketch` reads it; `build_completion` is its SFT target).
    Each format's exact text: docs/search.md, "Prompt formats"."""
    if not is_sketch_format(fmt):
        raise ValueError(f"{fmt} is not a sketch format: use sketch_format(policy.prompt_format)")
    opened = append_code(_declaration(declaration), ":= by")
    if fmt is PromptFormat.PLAIN_SKETCH:
        return f"{SKETCH_INSTRUCTION}\n{FENCE_OPEN}{opened}\n"
    head = normalize_newlines(header).strip("\n") + "\n\n" if header and header.strip() else ""
    question = f"{SKETCH_INSTRUCTION}\n\n{FENCE_OPEN}{head}{opened}\n{BLOCK_INDENT}sorry\n{CODE_FENCE}"
    prefix = BOS_TEXT if bos else ""
    return f"{prefix}{USER_TOKEN}{question}{ASSISTANT_TOKEN}{FENCE_OPEN}{head}{opened}\n"


def build_replan_prompt(fmt: PromptFormat, declaration: str, header: str | None, sketch: str,
                        failures: Sequence[str], *, bos: bool = False) -> str:
    """The planner's prompt after a sketch failed (`fmt` a sketch format; docs/search.md, "Prompt formats"): the failed
    `sketch` (its body, dedented) as the proof of `declaration`, what failed in it (`failures`, one entry each: the
    subgoal that was not proved and why, or Lean's message on the sketch), then the sketch prompt again
    (`build_sketch_prompt`), so the completion is a new sketch read as the first one is."""
    if not is_sketch_format(fmt):
        raise ValueError(f"{fmt} is not a sketch format: use sketch_format(policy.prompt_format)")
    if not failures:
        raise ValueError("a re-plan says what failed: no failure given")
    opened = append_code(_declaration(declaration), ":= by")
    failed = f"{opened}\n{_indent(normalize_newlines(sketch).strip(chr(10)))}"
    shown = "\n".join(normalize_newlines(failure).strip("\n") for failure in failures)
    plan = build_sketch_prompt(fmt, declaration, header)
    if fmt is PromptFormat.PLAIN_SKETCH:
        return f"{REPLAN_INSTRUCTION}\n{FENCE_OPEN}{failed}\n{CODE_FENCE}\n{REPLAN_FAILURES}\n{shown}\n{plan}"
    head = normalize_newlines(header).strip("\n") + "\n\n" if header and header.strip() else ""
    question, primed = plan.split(ASSISTANT_TOKEN, 1)
    reply = f"{FENCE_OPEN}{head}{failed}\n{CODE_FENCE}{EOS_TEXT}"
    prefix = BOS_TEXT if bos else ""
    return f"{prefix}{question}{ASSISTANT_TOKEN}{reply}{USER_TOKEN}{REPLAN_TURN}\n\n{shown}{ASSISTANT_TOKEN}{primed}"


def build_embedding_text(fmt: PromptFormat, state: str, context: str | None = None) -> str:
    """The text the EBM embeds for a state: the policy prompt itself, so the encoder reads what the
    policy reads (the BOS, if any, comes from the tokenizer). Versioned by EMBEDDING_TEXT_VERSION."""
    return build_prompt(fmt, state, context)


def build_completion(fmt: PromptFormat, text: str, *, with_eos: bool = True) -> str:
    """The SFT target for a tactic (tactic formats) or proof body (proof formats).

    The text is indented into the proof block and followed by the stop marker (the closing fence),
    so training supervises stopping; chat formats also end with EOS_TEXT when `with_eos` (TRL does
    not append a second EOS to a completion that already ends with it). Plain formats carry no EOS
    text: the tiny model's tokenizer adds its own. There is no target for the CoT format (its answers are a
    plan, then the code; burnqed has no plans to train on): ValueError.
    """
    if is_cot_format(fmt):
        raise ValueError(f"{fmt} answers are a plan then code: train its non-CoT variant instead")
    lines = normalize_newlines(text).strip("\n").split("\n")
    body = "\n".join(BLOCK_INDENT + line if line.strip() else "" for line in lines)
    eos = EOS_TEXT if with_eos and fmt in _CHAT_FORMATS else ""
    return f"{body}{STOP_MARKER}{eos}"


def stop_strings(fmt: PromptFormat) -> tuple[str, ...]:
    """The stop strings the policy must generate with for this format. The CoT format stops at EOS only: its
    answer opens and closes code fences before the proof."""
    if is_cot_format(fmt):
        return (EOS_TEXT,)
    if fmt in _CHAT_FORMATS:
        return (CODE_FENCE, EOS_TEXT)
    return (CODE_FENCE,)


def _declaration(context: str | None) -> str:
    if context is None or not context.strip():
        return ANONYMOUS_DECLARATION
    decl = normalize_newlines(context).strip()
    decl = re.sub(r"\s*:=\s*(?:by)?\s*(?:sorry)?\s*$", "", decl)
    return decl

"""Prompt formats and the whole-proof → tactics splitter: the one source of truth for model text.

SFT builds (prompt, completion) pairs with `build_prompt` + `build_completion`; search sends
`build_prompt` to the policy with `stop_strings` and reads the answer back with `extract_completion`
(then dedups with `normalize_tactic`); the EBM embeds `build_embedding_text`. Because all three call
the same functions, the training prompt is byte-identical to the inference prompt.

Formats (`PromptFormat`, config key `policy.prompt_format`), shown for the state `x : ℕ ⊢ x + 0 = x`
with no theorem context and ``bos=False``::

    deepseek-tactic   <｜User｜>Complete the following Lean 4 code with the next tactic:<｜Assistant｜>```lean4
                      example := by
                        /- tactic state:
                          x : ℕ
                          ⊢ x + 0 = x
                        -/
    completion          "  simp\\n```<｜end▁of▁sentence｜>"

    deepseek-proof    same, with the instruction "Complete the following Lean 4 code:"; the completion
                      is the whole proof body (indented two spaces) then "\\n```" and EOS.

    plain-tactic /    the deepseek text without chat tokens: instruction + "\\n" + the same code block.
    plain-proof       For the tiny embedded model, whose tokenizer has no special tokens; completions
                      end with the closing fence only (the trainer appends that tokenizer's EOS).

Whole-proof formats show the theorem's statement instead of a state (`build_statement_prompt`), for the
theorem ``theorem t : 1 + 1 = 2`` with the header ``import Mathlib``::

    deepseek-whole    <｜User｜>Complete the following Lean 4 code:⏎⏎```lean4⏎import Mathlib⏎⏎theorem t : 1 + 1 = 2
                      := by⏎  sorry⏎```<｜Assistant｜>```lean4⏎import Mathlib⏎⏎theorem t : 1 + 1 = 2 := by⏎
                      DeepSeek-Prover-V2's non-CoT prompt (its paper, appendix A.1) word for word in the user
                      turn; the answer is primed with what the model writes first anyway (the fence and the
                      file up to `:= by`), so the completion is the proof body, ended by the closing fence.
    deepseek-whole-cot the same user turn followed by "⏎⏎Before producing the Lean 4 code to formally prove
                      the given theorem, provide a detailed proof plan …" (the model card's CoT prompt, exact),
                      nothing primed: the model writes its plan, then the code; the proof is the LAST ```lean4
                      block of the answer. It stops only at EOS (a fence may open and close many times).
    plain-whole       "Complete the following Lean 4 code:⏎```lean4⏎theorem t : 1 + 1 = 2 := by⏎" (no header:
                      the tiny model has no use for `import Mathlib`).

The configured format names a *family* (deepseek or plain); the search mode picks the variant
(`format_for`): the tactic format for step, the proof-from-state format for hybrid, the whole format
(CoT when asked) for whole.

Why this shape: DeepSeek-Prover-V2 is chat-tuned (`<｜User｜>…<｜Assistant｜>`, no whitespace around
the role tokens) and answers with a ```lean4 block; its V1.5 ancestor was trained on code with
`/- tactic state: … -/` comments at the cursor, two spaces deeper than the tactic block. Priming the
assistant turn with the fence, the declaration and the state comment puts the model exactly where
the next tactic goes, with no `[GOAL]`/`[PROOFSTEP]` tokens. Every prompt ends with a newline so
the completion starts on a token boundary (a trailing space would merge into the first token).

BOS: tokenizers (DeepSeek's `add_bos_token`, TRL, SGLang's `/generate` on text) add BOS themselves,
so prompts carry no BOS by default; pass ``bos=True`` only when the consumer tokenizes with
``add_special_tokens=False``. Never both, or the model sees a double BOS it was not trained on.

Splitter (`split_proof`) rules, decided here once:
- a line deeper than the block's base indentation continues the previous tactic (bullets `·`/`.`,
  `calc` steps, `case … =>` bodies, nested `by` blocks, `induction … with` alternatives);
- a line at the base indentation also continues when it starts with `<;>`, `|`, `_`, a closing
  bracket or `:=`, when brackets are still open, or when the previous line ends with `<;>`, `by`,
  `:=`, `=>`, `with` or `,`;
- `;` at bracket depth 0 separates top-level tactics (Lean reads `t1; t2` as `t1⏎t2`), except once
  the tactic so far takes a tactic sequence (`by`, `=>`, `fun`, bullets, `try`, `all_goals`, …):
  that sequence swallows the rest of the line, so nothing after it is split;
- a typed `have h : T := by body` (also `have : T := by …`) becomes `have h : T` followed by the
  body's tactics, so Lean checks them one by one. `have h : T` without a value is Mathlib's
  goal-creating form: the goals become [T, main], and the body tactics, emitted right after the
  `have`, run on T first, exactly as they did inside the nested `by`. It is not split when the body
  uses goal-list tactics (`all_goals`, `swap`, `case`, …), which would then also see the main goal,
  when the `have` has binders or no type, or when a base-level continuation (`<;>`) follows it;
- term-mode `have h : T := term`, `calc` blocks and bullet blocks stay one tactic;
- comments (`--`, nested `/- -/`, doc comments) are removed, blank lines ignored, CRLF and tabs
  normalised; a leading declaration (`theorem … := by`, with any imports before it) or a bare
  `by`/`:= by` prefix is dropped; a term-mode declaration body becomes `exact term`.

Steps (`extract_tactic`): one generated line is one step. `t1; t2` on one line stays whole in search (the
trajectory row, the SFT completion and the proof path all carry it as written), while `split_proof` splits
it for whole-proof replay. `as_single_tactic` is how such a step reaches Pantograph, whose `goal.tactic`
parses exactly one tactic: as `(t1; t2)`.

`join_tactics` is the inverse for the verification path: ``f"theorem X : S := by\\n" + body``.
Pure: standard library only, no I/O, nothing runs at import.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from enum import StrEnum

__all__ = [
    "ASSISTANT_TOKEN",
    "BOS_TEXT",
    "CODE_FENCE",
    "EOS_TEXT",
    "FENCE_OPEN",
    "USER_TOKEN",
    "PromptFamily",
    "PromptFormat",
    "SearchMode",
    "as_single_tactic",
    "build_completion",
    "build_embedding_text",
    "build_prompt",
    "build_statement_prompt",
    "extract_completion",
    "extract_proof",
    "extract_tactic",
    "family_of",
    "first_separator",
    "format_for",
    "format_state_comment",
    "is_proof_format",
    "is_statement_format",
    "join_tactics",
    "last_code_block",
    "normalize_tactic",
    "split_proof",
    "split_sequence",
    "stop_strings",
    "theorem_declaration",
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
ANONYMOUS_DECLARATION = "example"
STATE_COMMENT_OPEN = "/- tactic state:"
STATE_COMMENT_CLOSE = "-/"
BLOCK_INDENT = "  "  # the proof block's indentation inside `:= by`
TAB_WIDTH = 2


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


class PromptFamily(StrEnum):
    """Which model's text a format is: DeepSeek-Prover's chat format, or the plain one of the tiny model."""

    DEEPSEEK = "deepseek"
    PLAIN = "plain"


class SearchMode(StrEnum):
    """How a theorem is searched (`search.mode`, docs/search.md)."""

    STEP = "step"  # best-first over single tactics: the tactic format
    WHOLE = "whole"  # pass@N over whole proofs sampled from the statement: the whole format
    HYBRID = "hybrid"  # whole proofs sampled from proof states, replayed through a trie: the proof format


_CHAT_FORMATS = frozenset(
    {PromptFormat.DEEPSEEK_TACTIC, PromptFormat.DEEPSEEK_PROOF, PromptFormat.DEEPSEEK_WHOLE,
     PromptFormat.DEEPSEEK_WHOLE_COT}
)
_STATEMENT_FORMATS = frozenset({PromptFormat.DEEPSEEK_WHOLE, PromptFormat.DEEPSEEK_WHOLE_COT, PromptFormat.PLAIN_WHOLE})
_PROOF_FORMATS = frozenset({PromptFormat.DEEPSEEK_PROOF, PromptFormat.PLAIN_PROOF, *_STATEMENT_FORMATS})
_VARIANTS: dict[tuple[PromptFamily, SearchMode], PromptFormat] = {
    (PromptFamily.DEEPSEEK, SearchMode.STEP): PromptFormat.DEEPSEEK_TACTIC,
    (PromptFamily.DEEPSEEK, SearchMode.HYBRID): PromptFormat.DEEPSEEK_PROOF,
    (PromptFamily.DEEPSEEK, SearchMode.WHOLE): PromptFormat.DEEPSEEK_WHOLE,
    (PromptFamily.PLAIN, SearchMode.STEP): PromptFormat.PLAIN_TACTIC,
    (PromptFamily.PLAIN, SearchMode.HYBRID): PromptFormat.PLAIN_PROOF,
    (PromptFamily.PLAIN, SearchMode.WHOLE): PromptFormat.PLAIN_WHOLE,
}

# ------------------------------------------------------------------------------------------ prompts


def is_proof_format(fmt: PromptFormat) -> bool:
    """True when the completion is a whole proof body (hybrid and whole search), False for one tactic."""
    return fmt in _PROOF_FORMATS


def is_statement_format(fmt: PromptFormat) -> bool:
    """True for the whole-proof formats, whose prompt shows the theorem's statement instead of a state."""
    return fmt in _STATEMENT_FORMATS


def family_of(fmt: PromptFormat) -> PromptFamily:
    """The model family a format belongs to."""
    return PromptFamily.DEEPSEEK if fmt in _CHAT_FORMATS else PromptFamily.PLAIN


def format_for(fmt: PromptFormat, mode: SearchMode | str, *, cot: bool = False) -> PromptFormat:
    """The format the search `mode` sends, in the family of the configured `fmt`: the tactic format for step,
    the proof-from-state format for hybrid, the whole format (DeepSeek's CoT variant when `cot`) for whole.

    `cot` exists only in the deepseek family (ValueError otherwise); it changes only the whole format.
    """
    family = family_of(fmt)
    if cot and family is not PromptFamily.DEEPSEEK:
        raise ValueError(f"CoT is an option of the deepseek prompt family; {fmt} is a {family} format")
    chosen = _VARIANTS[(family, SearchMode(mode))]
    if cot and chosen is PromptFormat.DEEPSEEK_WHOLE:
        return PromptFormat.DEEPSEEK_WHOLE_COT
    return chosen


def theorem_declaration(name: str, statement: str) -> str:
    """`theorem NAME : STATEMENT`: what a whole-proof prompt shows and the compile restates."""
    return f"theorem {name} : {statement}"


def format_state_comment(state: str, indent: str = BLOCK_INDENT) -> str:
    """The tactic state as a `/- tactic state: … -/` comment at `indent`, its lines two spaces deeper.

    Multi-goal states keep Lean's blank lines between goals (written empty, no trailing spaces).
    The result ends with a newline.
    """
    inner = indent + "  "
    lines = _normalize_newlines(state).strip("\n").split("\n")
    body = "\n".join(inner + line.rstrip() if line.strip() else "" for line in lines)
    return f"{indent}{STATE_COMMENT_OPEN}\n{body}\n{indent}{STATE_COMMENT_CLOSE}\n"


def build_prompt(fmt: PromptFormat, state: str, context: str | None = None, *, bos: bool = False) -> str:
    """The policy prompt for `state` (pretty-printed goals), optionally under a theorem declaration.

    `context` is the declaration up to its statement, e.g. ``theorem foo (x : ℕ) : x + 0 = x``
    (a trailing ``:= by``/``sorry`` is dropped); without it the proof is an anonymous `example`.
    `bos` prepends BOS_TEXT (chat formats only; see the module docstring for when). The whole-proof formats
    show a statement, not a state: they are built with `build_statement_prompt` (ValueError here).
    """
    if is_statement_format(fmt):
        raise ValueError(f"{fmt} prompts show the theorem's statement: use build_statement_prompt")
    instruction = PROOF_INSTRUCTION if is_proof_format(fmt) else TACTIC_INSTRUCTION
    code = f"{FENCE_OPEN}{_declaration(context)} := by\n{format_state_comment(state)}"
    if fmt in _CHAT_FORMATS:
        prefix = BOS_TEXT if bos else ""
        return f"{prefix}{USER_TOKEN}{instruction}{ASSISTANT_TOKEN}{code}"
    return f"{instruction}\n{code}"


def build_statement_prompt(fmt: PromptFormat, declaration: str, header: str | None = None, *, bos: bool = False) -> str:
    """The whole-proof prompt of a theorem (`fmt` a whole format): `declaration` is ``theorem NAME : STATEMENT``
    (`theorem_declaration`; a trailing ``:= by``/``sorry`` is dropped), `header` its imports and opens (shown by
    the deepseek formats only). See the module docstring for each format's exact text."""
    if not is_statement_format(fmt):
        raise ValueError(f"{fmt} prompts show a proof state: use build_prompt")
    decl = _declaration(declaration)
    if fmt is PromptFormat.PLAIN_WHOLE:
        return f"{PROOF_INSTRUCTION}\n{FENCE_OPEN}{decl} := by\n"
    head = _normalize_newlines(header).strip("\n") + "\n\n" if header and header.strip() else ""
    question = f"{PROOF_INSTRUCTION}\n\n{FENCE_OPEN}{head}{decl} := by\n{BLOCK_INDENT}sorry\n{CODE_FENCE}"
    prefix = BOS_TEXT if bos else ""
    if fmt is PromptFormat.DEEPSEEK_WHOLE_COT:
        return f"{prefix}{USER_TOKEN}{question}\n\n{COT_INSTRUCTION}{ASSISTANT_TOKEN}"
    return f"{prefix}{USER_TOKEN}{question}{ASSISTANT_TOKEN}{FENCE_OPEN}{head}{decl} := by\n"


# Bump when `build_embedding_text` (or `build_prompt`, which it returns) changes what a state's text is: the
# value model's encoder identity records it, so embeddings of the old text are never mixed with the new.
EMBEDDING_TEXT_VERSION = "prompt-v1"


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
    if fmt is PromptFormat.DEEPSEEK_WHOLE_COT:
        raise ValueError("deepseek-whole-cot answers are a plan then code: train deepseek-whole instead")
    lines = _normalize_newlines(text).strip("\n").split("\n")
    body = "\n".join(BLOCK_INDENT + line if line.strip() else "" for line in lines)
    eos = EOS_TEXT if with_eos and fmt in _CHAT_FORMATS else ""
    return f"{body}{STOP_MARKER}{eos}"


def stop_strings(fmt: PromptFormat) -> tuple[str, ...]:
    """The stop strings the policy must generate with for this format. The CoT format stops at EOS only: its
    answer opens and closes code fences before the proof."""
    if fmt is PromptFormat.DEEPSEEK_WHOLE_COT:
        return (EOS_TEXT,)
    if fmt in _CHAT_FORMATS:
        return (CODE_FENCE, EOS_TEXT)
    return (CODE_FENCE,)


def _declaration(context: str | None) -> str:
    if context is None or not context.strip():
        return ANONYMOUS_DECLARATION
    decl = _normalize_newlines(context).strip()
    decl = re.sub(r"\s*:=\s*(?:by)?\s*(?:sorry)?\s*$", "", decl)
    return decl


# ------------------------------------------------------------------------------------- extraction


def extract_completion(fmt: PromptFormat, raw: str) -> str:
    """The tactic or proof body in a raw generation, per `fmt` ("" when there is none). A CoT answer's proof is
    its last ```lean4 block (its plan may quote Lean too)."""
    if fmt is PromptFormat.DEEPSEEK_WHOLE_COT:
        return extract_proof(last_code_block(raw))
    return extract_proof(raw) if is_proof_format(fmt) else extract_tactic(raw)


def last_code_block(raw: str) -> str:
    """The body of the last ```lean4 (or ```lean) block of an answer, closed or cut off; "" when it has none."""
    text = _normalize_newlines(raw)
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
    line is one step: `t1; t2` and `t1 <;> t2` stay whole (the model wrote them as one step, as the prototype
    and BFS-Prover send them), and a multi-line tactic (a `have … := by` block, a bullet) stays whole and is
    not have-split. Lines after the step are discarded, and so is a trailing `;` (which no tactic follows).
    `split_proof` still splits `t1; t2` for whole-proof replay. The Lean edge sends a step with a top-level
    `;` as `(t1; t2)`: see `as_single_tactic`.
    """
    body = _proof_body(_mask_comments(_normalize_layout(_strip_generation(raw))))
    for group in _group_lines(body):
        return _drop_trailing_semicolon(group)
    return ""


def split_sequence(tactic: str) -> list[str]:
    """The tactics Lean reads in `tactic` when it stands in a tactic block: `t1; t2` → [t1, t2]. A `;` after a
    tactic that takes a tactic sequence (`all_goals`, `·`, `by`, `=>`, …) belongs to that sequence, and `<;>`
    is a combinator, not a separator; so `all_goals simp; ring` and `t1 <;> t2` are one tactic."""
    return _split_semicolons(_mask_comments(_normalize_layout(tactic)))


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
    lines = [line.rstrip() for line in _mask_comments(_normalize_layout(tactic)).split("\n")]
    kept = [line for line in lines if line]
    if not kept:
        return ""
    base = min(_indent_of(line) for line in kept)
    return "\n".join(" " * (_indent_of(line) - base) + re.sub(r"\s+", " ", line.strip()) for line in kept)


def _strip_generation(raw: str) -> str:
    text = _normalize_newlines(raw)
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

_OPEN_BRACKETS = "([{⟨⦃"
_CLOSE_BRACKETS = ")]}⟩⦄"
_CONTINUATION_STARTS = ("<;>", "|", "_", ":=", *_CLOSE_BRACKETS)
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
_DECLARATION = re.compile(
    r"^(?:@\[[^\]\n]*\][ \t]*\n?[ \t]*)?"
    r"(?:(?:private|protected|noncomputable|nonrec|unsafe|partial)\s+)*"
    r"(?:theorem|lemma|example|def|abbrev|instance)(?![\w'])",
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
    tactics (see the module docstring for the exact rules and their goal semantics).
    """
    body = _proof_body(_mask_comments(_normalize_layout(text)))
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
        assign = _find_depth0(text, ":=", match.end())
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
        depth = max(0, depth + _bracket_delta(line))
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
    for index, char in _depth0_chars(tactic):
        if char != ";" or tactic[index - 1 : index + 2] == "<;>":
            continue
        if _opens_sequence(tactic[start:index].strip()):
            return
        yield index
        start = index + 1


def first_separator(tactic: str) -> int | None:
    """Index (in `tactic` with tabs expanded) of the first `;` that would end a lone tactic, a trailing one
    included; None when Lean's parser of one `tactic` reads the whole text as one."""
    return next(_separators(_mask_comments(_normalize_layout(tactic))), None)


def _drop_trailing_semicolon(tactic: str) -> str:
    """`t;` → `t`: a separator with nothing after it (Lean's parser of one tactic would refuse it)."""
    last = None
    for index, char in _depth0_chars(tactic):
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
    assign = _find_depth0(tactic, ":=", 0)
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


def _normalize_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _normalize_layout(text: str) -> str:
    return "\n".join(line.expandtabs(TAB_WIDTH) for line in _normalize_newlines(text).split("\n"))


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


def _mask_comments(text: str) -> str:
    """Replace `--` and (nested) `/- -/` comments with spaces, keeping newlines and columns."""
    out: list[str] = []
    index = 0
    in_string = False
    while index < len(text):
        char = text[index]
        if in_string:
            out.append(char)
            if char == "\\" and index + 1 < len(text):
                out.append(text[index + 1])
                index += 1
            elif char == '"':
                in_string = False
            index += 1
        elif char == '"':
            in_string = True
            out.append(char)
            index += 1
        elif text.startswith("--", index):
            end = text.find("\n", index)
            end = len(text) if end < 0 else end
            out.append(" " * (end - index))
            index = end
        elif text.startswith("/-", index):
            end = block_comment_end(text, index)
            out.append(re.sub(r"[^\n]", " ", text[index:end]))
            index = end
        else:
            out.append(char)
            index += 1
    return "".join(out)


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


def _code_chars(text: str) -> Iterator[tuple[int, str]]:
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


def _depth0_chars(text: str) -> Iterator[tuple[int, str]]:
    """(index, char) of every character outside string literals and brackets."""
    depth = 0
    for index, char in _code_chars(text):
        if char in _OPEN_BRACKETS:
            depth += 1
        elif char in _CLOSE_BRACKETS:
            depth = max(0, depth - 1)
        elif depth == 0:
            yield index, char


def _find_depth0(text: str, needle: str, start: int) -> int:
    for index, _ in _depth0_chars(text):
        if index >= start and text.startswith(needle, index):
            return index
    return -1


def _bracket_delta(line: str) -> int:
    """Opening minus closing brackets outside string literals."""
    delta = 0
    for _, char in _code_chars(line):
        if char in _OPEN_BRACKETS:
            delta += 1
        elif char in _CLOSE_BRACKETS:
            delta -= 1
    return delta

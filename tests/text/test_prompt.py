"""Tests for burnqed.text.prompt: exact prompt bytes, completions, extraction, normalisation, splitter."""

from __future__ import annotations

import pytest

from burnqed.records.enums import SearchMode
from burnqed.records.theorem import Theorem
from burnqed.text.completion import (
    as_single_tactic,
    extract_completion,
    extract_proof,
    extract_tactic,
    join_tactics,
    normalize_tactic,
    split_proof,
    split_sequence,
)
from burnqed.text.feedback import Feedback, FeedbackMessage, cap_messages
from burnqed.text.prompt import (
    ASSISTANT_TOKEN,
    BOS_TEXT,
    EOS_TEXT,
    USER_TOKEN,
    PromptFormat,
    build_completion,
    build_embedding_text,
    build_prompt,
    build_repair_prompt,
    build_replan_prompt,
    build_sketch_prompt,
    build_statement_prompt,
    format_for,
    format_state_comment,
    is_cot_format,
    is_proof_format,
    is_repair_format,
    is_sketch_format,
    is_statement_format,
    repair_format,
    sketch_format,
    stop_strings,
    whole_format_of,
)

STATE_FORMATS = [f for f in PromptFormat
                 if not is_statement_format(f) and not is_repair_format(f) and not is_sketch_format(f)]
STATE = "x : ℕ\n⊢ x + 0 = x"
CODE = "```lean4\nexample := by\n  /- tactic state:\n    x : ℕ\n    ⊢ x + 0 = x\n  -/\n"


# ------------------------------------------------------------------------------------ chat tokens


def test_chat_tokens_use_fullwidth_bars_and_lower_blocks() -> None:
    assert BOS_TEXT == "<\uff5cbegin\u2581of\u2581sentence\uff5c>"
    assert EOS_TEXT == "<\uff5cend\u2581of\u2581sentence\uff5c>"
    assert USER_TOKEN == "<\uff5cUser\uff5c>"
    assert ASSISTANT_TOKEN == "<\uff5cAssistant\uff5c>"


def test_prompt_format_names_are_the_config_values() -> None:
    assert [f.value for f in PromptFormat] == [
        "deepseek-tactic",
        "deepseek-proof",
        "plain-tactic",
        "plain-proof",
        "deepseek-whole",
        "deepseek-whole-cot",
        "plain-whole",
        "deepseek-repair",
        "deepseek-repair-cot",
        "plain-repair",
        "deepseek-sketch",
        "plain-sketch",
    ]
    assert PromptFormat("deepseek-proof") is PromptFormat.DEEPSEEK_PROOF
    with pytest.raises(ValueError):
        PromptFormat("bfs")


# ---------------------------------------------------------------------------------------- prompts


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        (
            PromptFormat.DEEPSEEK_TACTIC,
            "<｜User｜>Complete the following Lean 4 code with the next tactic:<｜Assistant｜>" + CODE,
        ),
        (PromptFormat.DEEPSEEK_PROOF, "<｜User｜>Complete the following Lean 4 code:<｜Assistant｜>" + CODE),
        (PromptFormat.PLAIN_TACTIC, "Complete the following Lean 4 code with the next tactic:\n" + CODE),
        (PromptFormat.PLAIN_PROOF, "Complete the following Lean 4 code:\n" + CODE),
    ],
)
def test_prompt_bytes(fmt: PromptFormat, expected: str) -> None:
    prompt = build_prompt(fmt, STATE)
    assert prompt == expected
    assert prompt.endswith("-/\n")


def test_bos_is_opt_in_and_only_for_chat_formats() -> None:
    assert build_prompt(PromptFormat.DEEPSEEK_TACTIC, STATE, bos=True) == BOS_TEXT + build_prompt(
        PromptFormat.DEEPSEEK_TACTIC, STATE
    )
    assert BOS_TEXT not in build_prompt(PromptFormat.DEEPSEEK_TACTIC, STATE)
    assert build_prompt(PromptFormat.PLAIN_TACTIC, STATE, bos=True) == build_prompt(PromptFormat.PLAIN_TACTIC, STATE)


def test_prompt_with_context_and_multi_goal_state() -> None:
    state = "case inl\nh : p\n⊢ q\n\ncase inr\nh : r\n⊢ q\n"
    context = "theorem foo (p q r : Prop) : p ∨ r → q := by\n  sorry"
    assert build_prompt(PromptFormat.DEEPSEEK_PROOF, state, context) == (
        "<｜User｜>Complete the following Lean 4 code:<｜Assistant｜>```lean4\n"
        "theorem foo (p q r : Prop) : p ∨ r → q := by\n"
        "  /- tactic state:\n"
        "    case inl\n"
        "    h : p\n"
        "    ⊢ q\n"
        "\n"
        "    case inr\n"
        "    h : r\n"
        "    ⊢ q\n"
        "  -/\n"
    )


@pytest.mark.parametrize(
    "context",
    ["theorem t : 1 = 1", "theorem t : 1 = 1 :=", "theorem t : 1 = 1 := by", "theorem t : 1 = 1 := by sorry"],
)
def test_context_loses_its_trailing_assignment(context: str) -> None:
    assert "```lean4\ntheorem t : 1 = 1 := by\n  /- tactic state:" in build_prompt(
        PromptFormat.PLAIN_TACTIC, "⊢ 1 = 1", context
    )


def test_blank_context_is_an_example() -> None:
    assert build_prompt(PromptFormat.PLAIN_TACTIC, STATE, "  ") == build_prompt(PromptFormat.PLAIN_TACTIC, STATE)


def test_state_comment_normalises_crlf_and_trailing_space() -> None:
    assert format_state_comment("x : ℕ  \r\n⊢ P\r\n") == "  /- tactic state:\n    x : ℕ\n    ⊢ P\n  -/\n"
    assert format_state_comment("⊢ P", "    ") == "    /- tactic state:\n      ⊢ P\n    -/\n"


def test_embedding_text_is_the_prompt() -> None:
    for fmt in STATE_FORMATS:
        assert build_embedding_text(fmt, STATE, "theorem t : P") == build_prompt(fmt, STATE, "theorem t : P")


def test_prompt_plus_completion_is_continuous_lean() -> None:
    text = build_prompt(PromptFormat.PLAIN_PROOF, STATE) + build_completion(PromptFormat.PLAIN_PROOF, "simp")
    assert text.endswith("  -/\n  simp\n```")


# ------------------------------------------------------------------------------------ completions


@pytest.mark.parametrize(
    ("fmt", "text", "expected"),
    [
        (PromptFormat.DEEPSEEK_TACTIC, "simp", "  simp\n```<｜end▁of▁sentence｜>"),
        (
            PromptFormat.DEEPSEEK_TACTIC,
            "have h : x = 1 := by\n  simp",
            "  have h : x = 1 := by\n    simp\n```<｜end▁of▁sentence｜>",
        ),
        (PromptFormat.DEEPSEEK_PROOF, "intro x\n\nsimp\n", "  intro x\n\n  simp\n```<｜end▁of▁sentence｜>"),
        (PromptFormat.PLAIN_TACTIC, "simp", "  simp\n```"),
        (PromptFormat.PLAIN_PROOF, "intro x\r\nsimp", "  intro x\n  simp\n```"),
    ],
)
def test_completion_bytes(fmt: PromptFormat, text: str, expected: str) -> None:
    assert build_completion(fmt, text) == expected


def test_completion_without_eos() -> None:
    assert build_completion(PromptFormat.DEEPSEEK_TACTIC, "simp", with_eos=False) == "  simp\n```"


def test_stop_strings() -> None:
    assert stop_strings(PromptFormat.DEEPSEEK_TACTIC) == ("```", EOS_TEXT)
    assert stop_strings(PromptFormat.DEEPSEEK_PROOF) == ("```", EOS_TEXT)
    assert stop_strings(PromptFormat.PLAIN_TACTIC) == ("```",)
    assert stop_strings(PromptFormat.PLAIN_PROOF) == ("```",)


def test_is_proof_format() -> None:
    assert [is_proof_format(f) for f in PromptFormat] == [False, True, False, True] + [True] * 8
    assert [is_statement_format(f) for f in PromptFormat] == [False] * 4 + [True] * 3 + [False] * 5
    assert [is_repair_format(f) for f in PromptFormat] == [False] * 7 + [True] * 3 + [False] * 2
    assert [is_sketch_format(f) for f in PromptFormat] == [False] * 10 + [True] * 2
    assert {f for f in PromptFormat if is_cot_format(f)} == {PromptFormat.DEEPSEEK_WHOLE_COT,
                                                               PromptFormat.DEEPSEEK_REPAIR_COT}


@pytest.mark.parametrize("fmt", [f for f in PromptFormat if not is_cot_format(f)])
def test_completion_round_trips_through_extraction(fmt: PromptFormat) -> None:
    body = "intro x\nhave h : x = x := by\n  rfl\nexact h"
    extracted = extract_completion(fmt, build_completion(fmt, body))
    assert extracted == (body if is_proof_format(fmt) else "intro x")


# ------------------------------------------------------------------------------- whole-proof prompts

DECL = Theorem(name="t", statement="1 + 1 = 2").declaration() or ""
# DeepSeek-Prover-V2's own prompts: the paper's appendix A.1 (non-CoT) and the model card's Quick Start (CoT).
DEEPSEEK_QUESTION = (
    "Complete the following Lean 4 code:\n\n```lean4\nimport Mathlib\n\ntheorem t : 1 + 1 = 2 := by\n  sorry\n```"
)
COT = ("Before producing the Lean 4 code to formally prove the given theorem, provide a detailed proof plan outlining "
       "the main proof steps and strategies.\nThe plan should highlight key ideas, intermediate lemmas, and proof "
       "structures that will guide the construction of the final formal proof.")


def test_whole_prompt_bytes() -> None:
    assert build_statement_prompt(PromptFormat.DEEPSEEK_WHOLE, DECL, "import Mathlib") == (
        f"<｜User｜>{DEEPSEEK_QUESTION}<｜Assistant｜>```lean4\nimport Mathlib\n\ntheorem t : 1 + 1 = 2 := by\n"
    )
    assert build_statement_prompt(PromptFormat.DEEPSEEK_WHOLE_COT, DECL, "import Mathlib") == (
        f"<｜User｜>{DEEPSEEK_QUESTION}\n\n{COT}<｜Assistant｜>"
    )
    assert build_statement_prompt(PromptFormat.PLAIN_WHOLE, DECL, "import Mathlib") == (
        "Complete the following Lean 4 code:\n```lean4\ntheorem t : 1 + 1 = 2 := by\n"
    )
    assert build_statement_prompt(PromptFormat.DEEPSEEK_WHOLE, DECL + " := by sorry") == (
        "<｜User｜>Complete the following Lean 4 code:\n\n```lean4\ntheorem t : 1 + 1 = 2 := by\n  sorry\n```"
        "<｜Assistant｜>```lean4\ntheorem t : 1 + 1 = 2 := by\n"
    )
    with pytest.raises(ValueError, match="statement"):
        build_prompt(PromptFormat.PLAIN_WHOLE, STATE)
    with pytest.raises(ValueError, match="state"):
        build_statement_prompt(PromptFormat.PLAIN_PROOF, DECL)


def test_whole_prompt_plus_completion_is_the_theorem() -> None:
    prompt = build_statement_prompt(PromptFormat.DEEPSEEK_WHOLE, DECL, "import Mathlib")
    answer = build_completion(PromptFormat.DEEPSEEK_WHOLE, "norm_num", with_eos=False)
    code = prompt.split("<｜Assistant｜>")[1] + answer
    assert code == "```lean4\nimport Mathlib\n\ntheorem t : 1 + 1 = 2 := by\n  norm_num\n```"
    with pytest.raises(ValueError, match="plan"):
        build_completion(PromptFormat.DEEPSEEK_WHOLE_COT, "norm_num")


def test_cot_stops_at_eos_and_its_proof_is_the_last_lean4_block() -> None:
    assert stop_strings(PromptFormat.DEEPSEEK_WHOLE_COT) == (EOS_TEXT,)
    assert stop_strings(PromptFormat.DEEPSEEK_WHOLE) == ("```", EOS_TEXT)
    assert stop_strings(PromptFormat.PLAIN_WHOLE) == ("```",)
    answer = (
        "### Plan\nFirst a lemma:\n```lean4\ntheorem aux : 2 = 2 := by rfl\n```\nThen the proof.\n\n"
        "```lean4\nimport Mathlib\n\nopen Real\n\n/-- 1 + 1 is 2 -/\ntheorem t : 1 + 1 = 2 := by\n"
        "  have h : (1 : ℕ) + 1 = 2 := by\n    norm_num\n  exact h\n```<｜end▁of▁sentence｜>"
    )
    expected = "have h : (1 : ℕ) + 1 = 2 := by\n  norm_num\nexact h"
    assert extract_completion(PromptFormat.DEEPSEEK_WHOLE_COT, answer) == expected
    cut_off = "plan…\n```lean4\ntheorem t : 1 + 1 = 2 := by\n  norm_num\n  simp"  # hit the token limit
    assert extract_completion(PromptFormat.DEEPSEEK_WHOLE_COT, cut_off) == "norm_num\nsimp"
    assert extract_completion(PromptFormat.DEEPSEEK_WHOLE_COT, "no code at all") == ""


@pytest.mark.parametrize(
    ("fmt", "mode", "cot", "expected"),
    [
        (PromptFormat.DEEPSEEK_TACTIC, "step", False, PromptFormat.DEEPSEEK_TACTIC),
        (PromptFormat.DEEPSEEK_PROOF, "step", False, PromptFormat.DEEPSEEK_TACTIC),
        (PromptFormat.DEEPSEEK_TACTIC, "hybrid", False, PromptFormat.DEEPSEEK_PROOF),
        (PromptFormat.DEEPSEEK_TACTIC, "whole", False, PromptFormat.DEEPSEEK_WHOLE),
        (PromptFormat.DEEPSEEK_PROOF, "whole", True, PromptFormat.DEEPSEEK_WHOLE_COT),
        (PromptFormat.DEEPSEEK_TACTIC, "hybrid", True, PromptFormat.DEEPSEEK_PROOF),
        (PromptFormat.PLAIN_TACTIC, "whole", False, PromptFormat.PLAIN_WHOLE),
        (PromptFormat.PLAIN_PROOF, "step", False, PromptFormat.PLAIN_TACTIC),
        (PromptFormat.PLAIN_TACTIC, SearchMode.HYBRID, False, PromptFormat.PLAIN_PROOF),
        (PromptFormat.DEEPSEEK_PROOF, "sketch", False, PromptFormat.DEEPSEEK_SKETCH),
        (PromptFormat.DEEPSEEK_TACTIC, SearchMode.SKETCH, True, PromptFormat.DEEPSEEK_SKETCH),
        (PromptFormat.PLAIN_TACTIC, SearchMode.SKETCH, False, PromptFormat.PLAIN_SKETCH),
    ],
)
def test_the_mode_picks_the_variant_of_the_family(fmt: PromptFormat, mode: str, cot: bool,
                                                   expected: PromptFormat) -> None:
    assert format_for(fmt, mode, cot=cot) is expected


def test_cot_belongs_to_the_deepseek_family() -> None:
    with pytest.raises(ValueError, match="deepseek"):
        format_for(PromptFormat.PLAIN_TACTIC, "whole", cot=True)


# ------------------------------------------------------------------------------------- extraction


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("  simp\n", "simp"),
        ("  simp", "simp"),
        ("simp\n```", "simp"),
        ("  nlinarith [sq_nonneg (a - b)]\n```<｜end▁of▁sentence｜>", "nlinarith [sq_nonneg (a - b)]"),
        ("by simp", "simp"),
        ("by\n  norm_num", "norm_num"),
        ("  by_contra h\n", "by_contra h"),
        ("```lean4\ntheorem foo : P := by\n  simp\n  ring\n```", "simp"),
        ("  have h : 1 = 1 := by\n    rfl\n  exact h\n```", "have h : 1 = 1 := by\n  rfl"),
        ("  -- use the hypothesis\n  exact h", "exact h"),
        # One generated line is one step: a `;` sequence and a `<;>` combination stay whole.
        ("  intro x; simp", "intro x; simp"),
        ("  constructor <;> simp", "constructor <;> simp"),
        ("  intro x; simp\n  ring", "intro x; simp"),
        ("  intro x; exact ⟨x, rfl⟩; done\n```", "intro x; exact ⟨x, rfl⟩; done"),
        ("  intro x;\n", "intro x"),
        ("  intro x; -- then simp\n", "intro x"),
        ("  constructor <;>\n  simp", "constructor <;>\nsimp"),
        ("  all_goals simp; ring", "all_goals simp; ring"),
        ('  trace "a; b"', 'trace "a; b"'),
        ("  · simp\n    ring", "· simp\n  ring"),
        ("  /- tactic state:\n    ⊢ P\n  -/\n  trivial", "trivial"),
        ("```\n\nSome prose", ""),
        ("", ""),
        ("   \n  ", ""),
    ],
)
def test_extract_tactic(raw: str, expected: str) -> None:
    assert extract_tactic(raw) == expected


@pytest.mark.parametrize(
    ("tactic", "pieces", "sent"),
    [
        ("intro x; simp", ["intro x", "simp"], "(intro x; simp)"),
        ("intro x;simp", ["intro x", "simp"], "(intro x;simp)"),
        ("constructor <;> simp", ["constructor <;> simp"], "constructor <;> simp"),
        ("constructor <;> simp; ring", ["constructor <;> simp", "ring"], "(constructor <;> simp; ring)"),
        ("all_goals simp; ring", ["all_goals simp; ring"], "all_goals simp; ring"),
        ("· simp; ring", ["· simp; ring"], "· simp; ring"),
        ("exact fun h => h; done", ["exact fun h => h; done"], "exact fun h => h; done"),
        ("simp [a, b]", ["simp [a, b]"], "simp [a, b]"),
        ("rcases h with ⟨x; y⟩", ["rcases h with ⟨x; y⟩"], "rcases h with ⟨x; y⟩"),
        ('trace "a; b"', ['trace "a; b"'], 'trace "a; b"'),
        ("simp -- a; b", ["simp"], "simp -- a; b"),
        ("have h : P := by\n  simp; ring", ["have h : P := by\n  simp; ring"], "have h : P := by\n  simp; ring"),
    ],
)
def test_a_step_reaches_lean_as_one_tactic(tactic: str, pieces: list[str], sent: str) -> None:
    """Pantograph's goal.tactic parses ONE tactic of Lean's `tactic` category, which has no `;` combinator: a
    step with a top-level `;` goes as the `paren` tactic, anything else unchanged."""
    assert split_sequence(tactic) == pieces
    assert as_single_tactic(tactic) == sent


@pytest.mark.parametrize(
    "tactic",
    ["intro x; simp", "constructor <;> simp", "nlinarith [sq_nonneg (a - b), sq_nonneg (a + b)]",
     "have h : 1 = 1 := by\n  rfl", "· simp\n  ring", "rw [h]; exact rfl"],
)
@pytest.mark.parametrize("fmt", [PromptFormat.DEEPSEEK_TACTIC, PromptFormat.PLAIN_TACTIC])
def test_the_training_completion_of_a_step_is_what_search_extracts(fmt: PromptFormat, tactic: str) -> None:
    """SFT trains on `build_completion(step)`; search reads a generation back with `extract_completion`: a
    model that learnt the completion must give back the same step, `;` sequences included."""
    assert extract_completion(fmt, build_completion(fmt, tactic)) == tactic


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("  intro x\n  simp\n```", "intro x\nsimp"),
        ("```lean4\nimport Mathlib\n\ntheorem foo : P := by\n  simp -- done\n  ring\n```\nExplanation", "simp\nring"),
        ("by simp<｜end▁of▁sentence｜>", "simp"),
        ("  intro x; exact x", "intro x\nexact x"),
        ("  have h : 1 = 1 := by\n    rfl\n  exact h", "have h : 1 = 1 := by\n  rfl\nexact h"),
        ("  simp\n\ntheorem helper : Q := by\n  sorry", "simp"),
        ("  /- sorry, this is hard -/\n  decide", "decide"),
    ],
)
def test_extract_proof(raw: str, expected: str) -> None:
    assert extract_proof(raw) == expected


@pytest.mark.parametrize(
    ("tactic", "expected"),
    [
        ("simp", "simp"),
        ("  simp   [a,  b]  ", "simp [a, b]"),
        ("simp\t[a]", "simp [a]"),
        ("simp -- comment", "simp"),
        ("simp /- note -/ [a]", "simp [a]"),
        ("have h : x = 1 := by\r\n\r\n    simp", "have h : x = 1 := by\n    simp"),
        ("  constructor\n  <;>   simp", "constructor\n<;> simp"),
        ("", ""),
    ],
)
def test_normalize_tactic(tactic: str, expected: str) -> None:
    assert normalize_tactic(tactic) == expected


def test_normalize_keeps_line_structure_meaningful() -> None:
    assert normalize_tactic("· simp\n  ring") != normalize_tactic("· simp ring")
    assert normalize_tactic("simp  [a]") == normalize_tactic("simp [a]")


# --------------------------------------------------------------------------------------- splitter

SPLIT_CASES: list[tuple[str, list[str]]] = [
    # plain sequences
    ("intro x\nsimp", ["intro x", "simp"]),
    ("  intro x\n  simp\n", ["intro x", "simp"]),
    ("", []),
    ("\n\n   \n", []),
    ("intro x\n\n\nsimp", ["intro x", "simp"]),
    # CRLF and tabs
    ("intro x\r\nsimp\r\n", ["intro x", "simp"]),
    ("\tintro x\n\tsimp", ["intro x", "simp"]),
    ("· intro x\n\tsimp", ["· intro x\n  simp"]),
    # comments
    ("intro x -- introduce\nsimp", ["intro x", "simp"]),
    ("-- first\nintro x\n-- then\nsimp", ["intro x", "simp"]),
    ("intro x\n/- a\n   multi-line\n   comment -/\nsimp", ["intro x", "simp"]),
    ("/- outer /- nested -/ still comment -/\nsimp", ["simp"]),
    ("/-- doc comment -/\ntrivial", ["trivial"]),
    ('trace "-- not a comment"\nsimp', ['trace "-- not a comment"', "simp"]),
    # `by` headers and declarations
    ("by simp", ["simp"]),
    (":= by simp", ["simp"]),
    ("by\n  intro x\n  exact x", ["intro x", "exact x"]),
    ("theorem foo : P := by simp", ["simp"]),
    ("theorem foo : P := by\n  intro h\n  exact h", ["intro h", "exact h"]),
    ("theorem foo (x : ℕ) :\n    x + 0 = x := by\n  simp", ["simp"]),
    ("import Mathlib\nopen Real\n\nlemma foo : P := by\n  simp\n  ring", ["simp", "ring"]),
    ("example : 1 = 1 := by rfl", ["rfl"]),
    ("theorem foo : P := by\n  simp\n\ntheorem bar : Q := by\n  ring", ["simp"]),
    ("theorem foo (h : P) : P := h", ["exact h"]),
    ("theorem foo (f : ℕ → ℕ := id) : True := by trivial", ["trivial"]),
    ("by_contra h\npush_neg at h", ["by_contra h", "push_neg at h"]),
    # indentation blocks
    ("intro x\n  y", ["intro x\n  y"]),
    ("refine ⟨?_, ?_⟩\n· simp\n· ring", ["refine ⟨?_, ?_⟩", "· simp", "· ring"]),
    (
        "constructor\n· intro h\n  simp at h\n  exact h\n· intro h\n  linarith",
        [
            "constructor",
            "· intro h\n  simp at h\n  exact h",
            "· intro h\n  linarith",
        ],
    ),
    ("constructor\n. simp\n. ring", ["constructor", ". simp", ". ring"]),
    ("· linarith", ["· linarith"]),
    ("case inl h =>\n  exact h\ncase inr h =>\n  simp", ["case inl h =>\n  exact h", "case inr h =>\n  simp"]),
    # `<;>` chains
    ("constructor <;> simp", ["constructor <;> simp"]),
    ("constructor\n  <;> simp\nring", ["constructor\n  <;> simp", "ring"]),
    ("constructor\n<;> simp\n<;> linarith", ["constructor\n<;> simp\n<;> linarith"]),
    ("constructor <;>\nsimp", ["constructor <;>\nsimp"]),
    # open brackets
    (
        "nlinarith [sq_nonneg (a - b),\nsq_nonneg (a + b)]\nlinarith",
        [
            "nlinarith [sq_nonneg (a - b),\nsq_nonneg (a + b)]",
            "linarith",
        ],
    ),
    ("exact ⟨1,\n2⟩", ["exact ⟨1,\n2⟩"]),
    # match alternatives at the base column
    (
        "induction n with\n| zero => simp\n| succ n ih =>\n  simp [ih]",
        ["induction n with\n| zero => simp\n| succ n ih =>\n  simp [ih]"],
    ),
    ("rcases h with h | h\n· exact h\n· simp", ["rcases h with h | h", "· exact h", "· simp"]),
    # calc stays one tactic
    ("calc a = b := by simp\n  _ = c := by ring", ["calc a = b := by simp\n  _ = c := by ring"]),
    ("calc a = b := by simp\n_ = c := by ring\nlinarith", ["calc a = b := by simp\n_ = c := by ring", "linarith"]),
    ("calc\n    a = b := by simp\n    _ = c := h", ["calc\n    a = b := by simp\n    _ = c := h"]),
    # `;`
    ("intro x; simp; ring", ["intro x", "simp", "ring"]),
    ("intro x;", ["intro x"]),
    ("simp <;> ring; linarith", ["simp <;> ring", "linarith"]),
    ("constructor <;> (simp; ring)", ["constructor <;> (simp; ring)"]),
    ("try simp; ring", ["try simp; ring"]),
    ("all_goals simp; ring", ["all_goals simp; ring"]),
    ("· simp; ring", ["· simp; ring"]),
    ("intro x; · simp; ring", ["intro x", "· simp; ring"]),
    ("exact fun x => by simp; ring", ["exact fun x => by simp; ring"]),
    ('trace "a;b"; simp', ['trace "a;b"', "simp"]),
    ("rcases h with ⟨x, hx⟩ | h; simp", ["rcases h with ⟨x, hx⟩ | h", "simp"]),
    # typed `have … := by` is split
    ("have h : x = 1 := by\n  simp\n  ring\nlinarith", ["have h : x = 1", "simp", "ring", "linarith"]),
    ("have h : x = 1 := by simp\nexact h", ["have h : x = 1", "simp", "exact h"]),
    ("have : 0 < x := by positivity\nlinarith", ["have : 0 < x", "positivity", "linarith"]),
    ("have h: 0 < x := by positivity", ["have h: 0 < x", "positivity"]),
    ("have h : x = 1 := by simp; ring", ["have h : x = 1", "simp", "ring"]),
    ("have h : x = 1 :=\n  by simp", ["have h : x = 1", "simp"]),
    ("have h :\n    x = 1 := by\n  simp", ["have h :\n    x = 1", "simp"]),
    ("have h : f (a := 1) = 1 := by\n  rfl", ["have h : f (a := 1) = 1", "rfl"]),
    ("have h : a = b := by\n  rw [foo]\n  <;> simp", ["have h : a = b", "rw [foo]\n<;> simp"]),
    (
        "have h₁ : a = b := by\n  have h₂ : b = b := by rfl\n  exact h₂",
        [
            "have h₁ : a = b",
            "have h₂ : b = b",
            "rfl",
            "exact h₂",
        ],
    ),
    ("have h : P := by\n  · simp\n    ring", ["have h : P", "· simp\n  ring"]),
    # … but not when it would change meaning
    ("have h : x = 1 := foo x\nexact h", ["have h : x = 1 := foo x", "exact h"]),
    ("have h := by simp\nexact h", ["have h := by simp", "exact h"]),
    ("have h (y : ℕ) : y = y := by simp", ["have h (y : ℕ) : y = y := by simp"]),
    ("have ⟨y, hy⟩ : ∃ y, y = 1 := by simp", ["have ⟨y, hy⟩ : ∃ y, y = 1 := by simp"]),
    ("haveI : Fact p := by simp", ["haveI : Fact p := by simp"]),
    ("have h : P := by\n  all_goals simp", ["have h : P := by\n  all_goals simp"]),
    ("have h : P := by\n  swap\n  simp", ["have h : P := by\n  swap\n  simp"]),
    ("have h : P := by\n  simp\n<;> linarith", ["have h : P := by\n  simp\n<;> linarith"]),
    ("have h : P := by", ["have h : P := by"]),
]


@pytest.mark.parametrize(("text", "expected"), SPLIT_CASES)
def test_split_proof(text: str, expected: list[str]) -> None:
    assert split_proof(text) == expected


def test_split_without_have_splitting_keeps_the_block() -> None:
    text = "have h : x = 1 := by\n  simp\nlinarith"
    assert split_proof(text, split_have=False) == ["have h : x = 1 := by\n  simp", "linarith"]


def test_split_has_enough_cases() -> None:
    assert len(SPLIT_CASES) >= 30


# -------------------------------------------------------------------------------------------- join


def test_join_tactics_bytes() -> None:
    tactics = ["intro x", "· simp\n  ring", "constructor\n<;> linarith", "have h : P"]
    assert join_tactics(tactics) == "  intro x\n  · simp\n    ring\n  constructor\n  <;> linarith\n  have h : P"
    assert join_tactics(["simp"], indent="") == "simp"
    assert join_tactics([]) == ""


ROUND_TRIPS: list[list[str]] = [
    ["simp"],
    ["intro x", "simp", "ring"],
    ["constructor", "· intro h\n  exact h", "· simp"],
    ["constructor\n<;> simp\n<;> linarith"],
    ["nlinarith [sq_nonneg (a - b),\n  sq_nonneg (a + b)]"],
    ["induction n with\n| zero => simp\n| succ n ih =>\n  simp [ih]"],
    ["calc a = b := by simp\n  _ = c := by ring", "linarith"],
    ["have h : x = 1", "simp", "exact h"],
    ["have h : x = 1 := foo", "exact h"],
    ["try simp; ring"],
    ["case inl h =>\n  exact h", "case inr h =>\n  simp"],
    ["rcases h with ⟨x, hx⟩", "exact ⟨x, hx⟩"],
]


@pytest.mark.parametrize("tactics", ROUND_TRIPS)
def test_split_inverts_join(tactics: list[str]) -> None:
    assert split_proof(join_tactics(tactics)) == tactics
    assert split_proof("theorem X : S := by\n" + join_tactics(tactics)) == tactics


def test_a_docstring_is_shown_on_its_line_before_the_theorem_as_deepseek_prover_v2_prompts_it() -> None:
    # The model card's Quick Start: the informal statement as a docstring right before the theorem.
    theorem = Theorem(name="mathd_algebra_10", statement=(
        "/-- What is the positive difference between $120\\%$ of 30 and $130\\%$ of 20? Show that it is 10.-/\n"
        "abs ((120 : ℝ) / 100 * 30 - 130 / 100 * 20) = 10"))
    code = ("/-- What is the positive difference between $120\\%$ of 30 and $130\\%$ of 20? Show that it is 10. -/\n"
            "theorem mathd_algebra_10 : abs ((120 : ℝ) / 100 * 30 - 130 / 100 * 20) = 10 := by\n")
    header = ("import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\n"
              "open BigOperators Real Nat Topology Rat")
    prompt = build_statement_prompt(PromptFormat.DEEPSEEK_WHOLE, theorem.declaration() or "", header)
    assert prompt == (f"<｜User｜>Complete the following Lean 4 code:\n\n```lean4\n{header}\n\n{code}  sorry\n```"
                      f"<｜Assistant｜>```lean4\n{header}\n\n{code}")
    assert build_prompt(PromptFormat.PLAIN_TACTIC, "⊢ p", theorem.declaration()) == (
        f"Complete the following Lean 4 code with the next tactic:\n```lean4\n{code}"
        "  /- tactic state:\n    ⊢ p\n  -/\n")
    # A context handed in with a line comment at its end never has `:= by` behind the comment.
    assert build_prompt(PromptFormat.PLAIN_TACTIC, "⊢ p", "theorem t : p -- note") == (
        "Complete the following Lean 4 code with the next tactic:\n```lean4\ntheorem t : p -- note\n  := by\n"
        "  /- tactic state:\n    ⊢ p\n  -/\n")


# ------------------------------------------------------------------------------------------ repair prompts

FAILED = Feedback(
    "intro h\nlinarith",
    (FeedbackMessage("error", "linarith failed to find a contradiction\nx : ℝ\nh : 0 < x\n⊢ False\nfailed", 2, 0),),
    goal="x : ℝ\nh : 0 < x\n⊢ x ≤ 2",
)
REPAIR_DECL = "theorem t (x : ℝ) : 0 < x → x ≤ 2"


def test_plain_repair_prompt_shows_the_failed_proof_the_messages_at_their_place_and_the_goal_then_asks_again() -> None:
    prompt = build_repair_prompt(PromptFormat.PLAIN_REPAIR, REPAIR_DECL, "import Mathlib", FAILED)
    assert prompt == (
        "This Lean 4 proof does not compile:\n```lean4\ntheorem t (x : ℝ) : 0 < x → x ≤ 2 := by\n  intro h\n"
        "  linarith\n```\nLean's messages:\n3:2: error: linarith failed to find a contradiction\nx : ℝ\n"
        "h : 0 < x\n⊢ False\nfailed\nThe goal at the first error:\nx : ℝ\nh : 0 < x\n⊢ x ≤ 2\n"
        "Complete the following Lean 4 code:\n```lean4\ntheorem t (x : ℝ) : 0 < x → x ≤ 2 := by\n")
    # Line 3, column 2 of the block is where `linarith` stands: the position is mapped onto the shown proof.
    block = prompt.split("```lean4\n")[1].split("\n```")[0].split("\n")
    assert block[3 - 1][2:].startswith("linarith")
    # A message on the declaration (`unsolved goals` at `by`) points at the `by`; one without a position has none;
    # the messages the cap left out are counted.
    other = Feedback("intro h", (FeedbackMessage("error", "unsolved goals\n⊢ p", 0, None),
                                 FeedbackMessage("warning", "unused", None, None)), cut=2)
    shown = build_repair_prompt(PromptFormat.PLAIN_REPAIR, REPAIR_DECL, None, other)
    assert "\n1:37: error: unsolved goals\n⊢ p\nwarning: unused\n(2 more not shown)\nComplete" in shown
    assert "theorem t (x : ℝ) : 0 < x → x ≤ 2 := by"[37:] == "by"


def test_deepseek_repair_prompt_is_goedel_prover_v2s_self_correction_turn() -> None:
    header = "import Mathlib\nopen Real"
    code = "```lean4\nimport Mathlib\nopen Real\n\ntheorem t (x : ℝ) : 0 < x → x ≤ 2 := by\n"
    prompt = build_repair_prompt(PromptFormat.DEEPSEEK_REPAIR, REPAIR_DECL, header, FAILED, round_=1)
    assert prompt == (
        f"<｜User｜>Complete the following Lean 4 code:\n\n{code}  sorry\n```<｜Assistant｜>{code}  intro h\n"
        "  linarith\n```<｜end▁of▁sentence｜><｜User｜>The proof (Round 1) is not correct. Following is the "
        "compilation error message, where we use <error></error> to signal the position of the error.\n\n"
        "\nError 1 (line 6, column 2):\n\nCorresponding Code:\n```lean4\n  <error>linarith</error>\n```\n\n"
        "Error Message: linarith failed to find a contradiction\nx : ℝ\nh : 0 < x\n⊢ False\nfailed\n"
        f"\nThe goal at the first error:\n```lean4\nx : ℝ\nh : 0 < x\n⊢ x ≤ 2\n```\n<｜Assistant｜>{code}")
    cot = build_repair_prompt(PromptFormat.DEEPSEEK_REPAIR_COT, REPAIR_DECL, header, FAILED)
    assert cot.endswith("```\n\n\nBefore producing the Lean 4 code to formally prove the given theorem, provide a "
                        "detailed analysis of the error message.<｜Assistant｜>")
    assert "The proof (Round 0) is not correct." in cot
    assert stop_strings(PromptFormat.DEEPSEEK_REPAIR_COT) == (EOS_TEXT,)
    assert extract_completion(PromptFormat.DEEPSEEK_REPAIR_COT, "analysis\n```lean4\ntheorem t := by\n  simp\n```") \
        == "simp"


def test_the_repair_variant_follows_the_whole_variant_and_is_no_prompt_format_of_its_own() -> None:
    for family in (PromptFormat.PLAIN_TACTIC, PromptFormat.PLAIN_PROOF):
        assert repair_format(family) is PromptFormat.PLAIN_REPAIR
    for family in (PromptFormat.DEEPSEEK_TACTIC, PromptFormat.DEEPSEEK_PROOF):
        assert repair_format(family) is PromptFormat.DEEPSEEK_REPAIR
        assert repair_format(family, cot=True) is PromptFormat.DEEPSEEK_REPAIR_COT
    with pytest.raises(ValueError, match="CoT is an option of the deepseek prompt family"):
        repair_format(PromptFormat.PLAIN_TACTIC, cot=True)
    # The repair prompt builds on the whole prompt of its own family and CoT form.
    deepseek = PromptFormat.DEEPSEEK_PROOF
    turns = [(PromptFormat.PLAIN_PROOF, False), (deepseek, False), (deepseek, True)]
    assert [whole_format_of(repair_format(family, cot=cot)) for family, cot in turns] == [
        PromptFormat.PLAIN_WHOLE, PromptFormat.DEEPSEEK_WHOLE, PromptFormat.DEEPSEEK_WHOLE_COT]
    with pytest.raises(ValueError, match="build_statement_prompt, build_repair_prompt or build_sketch_prompt"):
        build_prompt(PromptFormat.PLAIN_REPAIR, STATE)
    with pytest.raises(ValueError, match="not a repair format"):
        build_repair_prompt(PromptFormat.PLAIN_WHOLE, REPAIR_DECL, None, FAILED)


def test_the_cap_keeps_errors_first_whole_messages_while_they_fit_and_counts_what_it_cut() -> None:
    proof = "intro h\nnlinarith [sq_nonneg x]\nlinarith"
    messages = [FeedbackMessage("warning", "unused variable", 1, 6),
                FeedbackMessage("error", "line one\nline two\nline three", 3, 0),
                FeedbackMessage("error", "unknown identifier 'sq_nonneg'", 2, 11)]
    whole = cap_messages(messages, proof, budget=1000, goal="⊢ p")
    assert [m.text for m in whole.messages] == ["unknown identifier 'sq_nonneg'", "line one\nline two\nline three",
                                                "unused variable"]
    assert (whole.cut, whole.goal) == (0, "⊢ p")
    # costs (text + quoted line + label): 30 + 23 + 32 = 85 for the first error, 28 + 8 + 32 = 68 for the second
    cut = cap_messages(messages, proof, budget=85 + 32 + 8 + 17)
    assert [m.text for m in cut.messages] == ["unknown identifier 'sq_nonneg'", "line one\nline two"]
    assert (cut.cut, cut.goal) == (2, None)
    tiny = cap_messages(messages, proof, budget=32 + 23 + 7)
    assert [m.text for m in tiny.messages] == ["unknown"] and tiny.cut == 3
    assert Feedback.from_json(cut.to_json()) == cut
    with pytest.raises(ValueError, match="not a repair feedback record"):
        Feedback.from_json('{"proof": 1}')


# ------------------------------------------------------------------------------------ sketch prompts

SKETCH_ASK = ("Sketch a proof of the following Lean 4 code: state the intermediate facts it needs as "
              "`have NAME : P := by sorry`, then close the goal from them:")


def test_sketch_prompt_bytes() -> None:
    assert build_sketch_prompt(PromptFormat.PLAIN_SKETCH, DECL, "import Mathlib") == (
        f"{SKETCH_ASK}\n```lean4\ntheorem t : 1 + 1 = 2 := by\n"
    )
    assert build_sketch_prompt(PromptFormat.DEEPSEEK_SKETCH, DECL, "import Mathlib", bos=True) == (
        f"{BOS_TEXT}<｜User｜>{SKETCH_ASK}\n\n```lean4\nimport Mathlib\n\ntheorem t : 1 + 1 = 2 := by\n  sorry\n```"
        "<｜Assistant｜>```lean4\nimport Mathlib\n\ntheorem t : 1 + 1 = 2 := by\n"
    )


def test_the_sketch_format_follows_the_family_and_refuses_the_other_builders() -> None:
    assert sketch_format(PromptFormat.DEEPSEEK_TACTIC) is PromptFormat.DEEPSEEK_SKETCH
    assert sketch_format(PromptFormat.PLAIN_PROOF) is PromptFormat.PLAIN_SKETCH
    with pytest.raises(ValueError, match="not a sketch format"):
        build_sketch_prompt(PromptFormat.PLAIN_WHOLE, DECL)
    with pytest.raises(ValueError, match="build_sketch_prompt"):
        build_prompt(PromptFormat.PLAIN_SKETCH, STATE)
    with pytest.raises(ValueError, match="use build_prompt"):
        build_statement_prompt(PromptFormat.PLAIN_SKETCH, DECL)


def test_a_sketch_prompt_plus_its_completion_is_the_sketched_theorem() -> None:
    body = "have h₁ : 1 = 1 := by sorry\nhave h₂ : 2 = 2 := by sorry\nsimp"
    completion = build_completion(PromptFormat.PLAIN_SKETCH, body)
    assert extract_completion(PromptFormat.PLAIN_SKETCH, completion) == body
    text = build_sketch_prompt(PromptFormat.PLAIN_SKETCH, DECL) + completion
    assert text.endswith("theorem t : 1 + 1 = 2 := by\n  have h₁ : 1 = 1 := by sorry\n  have h₂ : 2 = 2 := by sorry\n"
                         "  simp\n```")


FAILED_SKETCH = "have h₁ : 1 = 1 := by sorry\nsimp [h₁]"
FAILURES = ["the subgoal h₁ : 1 = 1 was not proved: its share of the budget (8 expansions) was spent",
            "Lean did not accept the sketch: unknown identifier 'h₂'\n⊢ 1 + 1 = 2"]


def test_replan_prompt_bytes() -> None:
    assert build_replan_prompt(PromptFormat.PLAIN_SKETCH, DECL, "import Mathlib", FAILED_SKETCH, FAILURES) == (
        "This Lean 4 proof sketch failed:\n```lean4\ntheorem t : 1 + 1 = 2 := by\n  have h₁ : 1 = 1 := by sorry\n"
        "  simp [h₁]\n```\nWhat failed:\nthe subgoal h₁ : 1 = 1 was not proved: its share of the budget (8 expansions) "
        "was spent\nLean did not accept the sketch: unknown identifier 'h₂'\n⊢ 1 + 1 = 2\n"
        f"{SKETCH_ASK}\n```lean4\ntheorem t : 1 + 1 = 2 := by\n"
    )
    assert build_replan_prompt(PromptFormat.DEEPSEEK_SKETCH, DECL, "import Mathlib", FAILED_SKETCH, FAILURES[:1],
                               bos=True) == (
        f"{BOS_TEXT}<｜User｜>{SKETCH_ASK}\n\n```lean4\nimport Mathlib\n\ntheorem t : 1 + 1 = 2 := by\n  sorry\n```"
        "<｜Assistant｜>```lean4\nimport Mathlib\n\ntheorem t : 1 + 1 = 2 := by\n  have h₁ : 1 = 1 := by sorry\n"
        "  simp [h₁]\n```<｜end▁of▁sentence｜><｜User｜>The sketch is not correct. What failed:\n\n"
        "the subgoal h₁ : 1 = 1 was not proved: its share of the budget (8 expansions) was spent"
        "<｜Assistant｜>```lean4\nimport Mathlib\n\n"
        "theorem t : 1 + 1 = 2 := by\n"
    )


def test_a_replan_prompt_ends_as_the_sketch_prompt_and_says_what_failed() -> None:
    for fmt in (PromptFormat.PLAIN_SKETCH, PromptFormat.DEEPSEEK_SKETCH):
        again = build_replan_prompt(fmt, DECL, "import Mathlib", FAILED_SKETCH, FAILURES)
        plan = build_sketch_prompt(fmt, DECL, "import Mathlib")
        assert again.endswith(plan.split(ASSISTANT_TOKEN)[-1])  # the completion is read as a first sketch's
    with pytest.raises(ValueError, match="not a sketch format"):
        build_replan_prompt(PromptFormat.PLAIN_WHOLE, DECL, None, FAILED_SKETCH, FAILURES)
    with pytest.raises(ValueError, match="no failure given"):
        build_replan_prompt(PromptFormat.PLAIN_SKETCH, DECL, None, FAILED_SKETCH, [])

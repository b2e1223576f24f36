"""False refusals: honest text the guard must pass on every route (Mathlib's factorial `n !` written after a numeral,
`5!`), the glued numerals it must still refuse, and benchmarks/guard_refusals.py's reading of Lean files, on
made-up problems."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from benchmarks import guard_refusals
from benchmarks.guard_refusals import Tally, check_lean_file, compfiles_text, determine_values, own_text, rule_of
from burnqed.config import LeanConfig
from burnqed.lean.guard import TacticGuard
from burnqed.lean.soundness import Verdict, check_answer, check_path
from burnqed.text.completion import split_proof
from burnqed.text.sketch import Sketch

GUARD = TacticGuard.from_config(LeanConfig())

# Mathlib's `scoped notation:10000 n "!" => Nat.factorial n` (`open Nat`): after a numeral no numeral reader of Lean
# takes `!`, so `5!` is `5` then `!`, as `(n)!` and `n !` are.
FACTORIALS = (
    "5!", "10! / 7!", "2 * 3!", "(n)!", "n !", "(n + 1)! = (n + 1) * n !", "5!!", "2 ^ 5! % 7", "(5)! + 0!",
    "Nat.gcd 6! 1000", "↑4! * (2 : ℝ)", "0x1F! + 0b1!", "5! - 4!.succ",
)


@pytest.mark.parametrize("term", FACTORIALS)
def test_a_factorial_after_a_numeral_passes_every_route(term: str) -> None:
    tactic = f"have h : {term} = {term} := by norm_num [Nat.factorial]"
    assert GUARD.check(tactic) is None
    assert GUARD.check(f"exact {term}") is None
    assert check_path(split_proof(f"{tactic}\nexact h", split_have=False), GUARD) == Verdict(True)
    assert check_answer(term, GUARD) == Verdict(True)
    assert isinstance(GUARD.check_sketch(f"have h : {term} = {term} := by sorry\nexact h"), Sketch)


# Where Lean's numeral reader runs on past these readers' numeral and breaks off inside it, then reads on from there:
# what these readers take for a name is code to Lean.
GLUED = (
    ("exact 0xopen Foo in simp", "has a numeral glued to a name at '0xope': Lean's numeral may end elsewhere"),
    ("exact 1eopen Foo in simp", "has a numeral glued to a name at '1eope': Lean's numeral may end elsewhere"),
    ("exact 0bend", "has a numeral glued to a name at '0bend': Lean's numeral may end elsewhere"),
    ("exact 5.eopen Foo in simp", "has a numeral glued to a name at '5.eopen': Lean reads an exponent there"),
    ("exact 2.E+x", "has a numeral glued to a name at '2.E+x': Lean reads an exponent there"),
    ("exact 1_!", "has a numeral ending in `_` at '1_!': Lean's numeral needs a digit after it"),
)


@pytest.mark.parametrize(("text", "reason"), GLUED)
def test_a_numeral_lean_reads_on_past_is_refused_on_every_route(text: str, reason: str) -> None:
    assert GUARD.check(text) == reason
    assert check_path([text], GUARD) == Verdict(False, f"tactic {text!r} on the path is denied: {reason}")
    value = text.removeprefix("exact ")
    assert check_answer(value, GUARD) == Verdict(False, f"the answer {value!r} is denied: {reason}")
    assert GUARD.check_sketch(f"have h : True := by sorry\n{text}") == f"the sketch {reason}"


# Core's `xs[i]'h` (`]'` is a token of every table): the proof after it is a name that may end in a quote.
GETELEM = ("xs[t]'ht'", "xs[t]'h' + xs[0]'h₀'", "(l.get! 0) + xs[(i)]'hi'")


@pytest.mark.parametrize("term", GETELEM)
def test_a_primed_proof_after_cores_getelem_token_passes_every_route(term: str) -> None:
    tactic = f"have h : {term} = {term} := rfl"
    assert GUARD.check(tactic) is None
    assert check_path(split_proof(f"{tactic}\nexact h", split_have=False), GUARD) == Verdict(True)
    assert check_answer(term, GUARD) == Verdict(True)
    assert isinstance(GUARD.check_sketch(f"have h : {term} = {term} := by sorry\nexact h"), Sketch)


def test_a_quote_after_cores_getelem_token_still_opens_where_lean_opens_one() -> None:
    assert GUARD.check("exact xs[i]''\" #eval 1 --\"") == (
        "has a quote at '\\'\" #eval' that Lean reads as a character literal it cannot close")
    assert GUARD.check("exact xs[[a, b]]'h' x") == (
        "has a quote or comment opener glued to a symbol at \"]]'h'\": Lean reads it by the notation tokens in scope "
        "(put a space before it)")


def test_a_field_index_is_no_numeral_lean_reads_an_exponent_after() -> None:
    """`h.2.elim` is the field 2 of `h` (Lean's `fieldIdx` reads digits only), after a name, `)`, `⟩` alike."""
    assert GUARD.check("exact (h.2.elim, (f x).1.eq_def, ⟨a, b⟩.2.elim, h₁.1.elim)") is None
    assert GUARD.check("exact [1..5.elim]") == ("has a numeral glued to a name at '5.elim]': Lean reads an "
                                                "exponent there")


MADE_UP = """import Mathlib

open Nat

/-- A made-up problem. -/
problem made_up_one (n : ℕ) (h : 3 ≤ n) : 3! ∣ n ! := by
  have h3 : 3! ∣ n ! := Nat.factorial_dvd_factorial h
  exact h3

include h in
theorem made_up_two : 2 + 2 = 4 :=
by
  set_option maxRecDepth 1000 in decide

determine answer : Set ℕ :=
{ 1, 2,
  3 }
/-- the next -/
theorem made_up_three : ∀ n : ℕ, n = n :=
fun n => rfl

end
"""


def test_the_benchmark_reads_each_declaration_up_to_the_next_command() -> None:
    text = compfiles_text(MADE_UP)
    assert "theorem made_up_one" in text and "snip" not in text
    source = "theorem t : P := by\n  simp\n  ring\ninclude h in\ntheorem u : Q := by simp"
    assert own_text(source, source.index(":=")) == "theorem t : P := by\n  simp\n  ring"
    term = "theorem t : P :=\nfun n => x\n  y\n\nend A\n"
    assert own_text(term, term.index(":=")) == "theorem t : P :=\nfun n => x\n  y\n"
    assert list(determine_values(MADE_UP)) == [(15, "{ 1, 2,\n  3 }")]


def test_the_benchmark_lists_each_refusal_with_its_rule() -> None:
    tally = Tally("made up", "here")
    check_lean_file(tally, "Made.lean", compfiles_text(MADE_UP), proofs=True)
    assert tally.checked == Counter({"step": 3, "whole": 3, "restated": 3, "sketch": 4})
    rule = "holds the command keyword 'set_option': Lean would run a command of its own there"
    assert tally.refused == [("step", "Made.lean:11", rule, "set_option maxRecDepth 1000 in decide"),
                             ("whole", "Made.lean:11", rule, "set_option maxRecDepth 1000 in decide")]
    assert tally.skipped == 0


def test_a_long_top_level_tactic_is_refused_on_the_step_route_only_the_whole_route_naming_its_own_rule() -> None:
    """A whole proof's one top-level tactic (an `induction … with` and its long arms) over lean.max_tactic_chars: the
    whole route bounds the proof by lean.max_text_chars and reads the tactic by every other rule, named as it
    refuses; the step route sends it alone, capped."""
    long_have = "induction n with\n  | zero => simp\n  | succ n ih =>\n    " + "\n    ".join(["simp"] * 1000)
    body = f"  {long_have}\n  exact h"
    tally = Tally("made up", "here")
    check_lean_file(tally, "Long.lean", f"theorem t : 1 = 1 := by\n{body}\n", proofs=True)
    cap = "7046 characters, over the cap of 4000 (lean.max_tactic_chars)"  # read from the file: two spaces less a line
    assert [(route, rule) for route, _, rule, _ in tally.refused] == [("step", cap)]
    assert tally.checked["whole"] == 1
    assert check_path(split_proof(body, split_have=False), GUARD) == Verdict(True)
    assert GUARD.check(long_have) == "9050 characters, over the cap of 4000 (lean.max_tactic_chars)"
    tally = Tally("made up", "here")
    check_lean_file(tally, "Long.lean", f"theorem t : 1 = 1 := by\n{body}\n  native_decide\n", proofs=True)
    assert [(route, rule) for route, _, rule, _ in tally.refused] == [
        ("step", cap), ("whole", "matches deny pattern '\\\\bnative_decide\\\\b'")]


def test_a_proof_holding_sorry_is_skipped_and_the_rule_drops_the_place() -> None:
    tally = Tally("made up", "here")
    check_lean_file(tally, "S.lean", "theorem s : 1 = 1 := by\n  sorry\n", proofs=True)
    assert (tally.skipped, tally.checked) == (1, Counter({"restated": 1, "sketch": 1}))
    assert rule_of("has a numeral glued to a name at '0xope': Lean's numeral may end elsewhere") == (
        "has a numeral glued to a name at …: Lean's numeral may end elsewhere")
    assert rule_of("has a quote at \"'a\" that Lean reads") == "has a quote at … that Lean reads"


def test_the_report_counts_per_route_and_lists_the_refusals(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    proofs = tmp_path / "proofs.jsonl"
    proofs.write_text('{"name": "made_up", "formal_statement": "theorem made_up : 5! = 120 := by\\n", '
                      '"formal_proof": "  native_decide"}\n', encoding="utf-8")
    tally = Tally("miniF2F proofs", str(proofs))
    for item, text in guard_refusals.lean_texts([proofs]):
        check_lean_file(tally, item, text, proofs=True)
    guard_refusals.report([tally], show=5, seconds=0.25)
    out = capsys.readouterr().out.splitlines()
    assert " ".join(out[1].split()) == "miniF2F proofs 1 of 1 1 of 1 0 of 1 0 of 1 - 0"
    assert out[2] == f"read: miniF2F proofs: {proofs}"
    deny = "matches deny pattern '\\\\bnative_decide\\\\b'"
    assert out[4:] == ["2 refusals of 4 checks (0.2 s). By corpus and rule (routes):",
                       f"  miniF2F proofs: 2  {deny} (step 1, whole 1)", "",
                       "The refusals (2 of 2 shown):",
                       f"  [miniF2F proofs / step] proofs.jsonl:made_up:1: {deny}", "      native_decide",
                       f"  [miniF2F proofs / whole] proofs.jsonl:made_up:1: {deny}", "      native_decide"]

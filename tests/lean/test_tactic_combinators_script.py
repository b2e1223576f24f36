"""`scripts/tactic_combinators.py`: where it reads a tactic to start in Lean sources (each way a tactic argument is
declared: the syntax DSL, named pieces, `leading_parser` bodies) and its comparison with `burnqed.lean.tactic_starts`.
The texts are written here in the shapes the sources use; the scan of the real sources is in docs/results.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.scripts import load_script

TC = load_script("tactic_combinators")

CORE = '''namespace Lean.Parser.Tactic
/-- "not_a_combinator " tacticSeq : tactic in a doc comment -/
syntax (name := case) "case " sepBy1(caseArg, " | ") " => " tacticSeq : tactic
macro "try " t:tacticSeq : tactic => `(tactic| first | $t | skip)
syntax (name := first) "first " withPosition((ppDedent(ppLine) colGe "| " tacticSeq)+) : tactic
macro:1 x:tactic tk:" <;> " y:tactic:2 : tactic => `(tactic| focus $x)
syntax (name := paren) "(" withoutPosition(tacticSeq) ")" : tactic
syntax (name := iterate) "iterate" (ppSpace num)? ppSpace tacticSeq : tactic
syntax discharger := atomic(" (" patternIgnore(&"discharger" <|> &"disch")) " := " withoutPosition(tacticSeq) ")"
syntax inductionAlts := " with" (ppSpace tactic)? withPosition((colGe inductionAlt)+)
syntax cdotTk := patternIgnore("· " <|> ". ")
syntax (name := cdot) cdotTk tacticSeqIndentGt : tactic
syntax (name := ite)
  ppRealGroup(ppRealFill(ppIndent("if " term " then") ppSpace matchRhsTacticSeq)
    ppDedent(ppSpace) ppRealFill("else " matchRhsTacticSeq)) : tactic
syntax (name := exact) "exact " term : tactic
-- syntax "commented_out " tacticSeq : tactic
def tacticSeqBracketed := leading_parser
  "{" >> sepByIndentSemicolon tacticParser >> ppDedent (ppLine >> "}")
@[builtin_term_parser] def byTactic := leading_parser:leadPrec
  ppAllowUngrouped >> "by " >> Tactic.tacticSeqIndentGt
def matchRhs  := Term.hole <|> Term.syntheticHole <|> tacticSeq
def matchAlts := Term.matchAlts (rhsParser := matchRhs)
@[builtin_tactic_parser] def «match» := leading_parser:leadPrec
  "match " >> sepBy1 Term.matchDiscr ", " >> " with " >> ppDedent matchAlts
'''

LIBRARY = '''syntax (name := successIfFailWithMsg) "success_if_fail_with_msg " term:max tacticSeq : tactic
macro "brand_new_combinator " seq:tacticSeq : tactic => `(tactic| $seq)
elab "#count_heartbeats " tac:tacticSeq : tactic => pure ()
syntax normStx := atomic(" (" &"norm" " := ") withoutPosition(tactic) ")"
local syntax "conv_combinator" " => " convSeq : conv
'''


def test_the_tokens_before_each_tactic_argument_of_core_shapes() -> None:
    found = list(TC.declarations(CORE, "src", "F.lean"))
    assert {(f.before, f.head, f.line) for f in found} == {
        ("=>", "case", 3), ("try", "try", 4), ("|", "first", 5), ("(start)", "<;>", 6), ("<;>", "<;>", 6),
        ("(", "(", 7), ("iterate", "iterate", 8), ("{num}", "iterate", 8), (":=", "(", 9), ("with", "with", 10),
        ("·", "·", 12), (".", "·", 12), ("then", "if", 13), ("else", "if", 13), ("{", "{", 18), (";", "{", 18),
        ("by", "by", 20), ("{rhsParser}", "match", 24),
    }
    assert {f.pair for f in found if f.before == ":="} == {"disch", "discharger"}  # the option's name
    assert all(TC.covered(f) for f in found)


def test_library_shapes_and_what_the_guard_must_know_of_them() -> None:
    found = {f.before: f for f in TC.declarations(LIBRARY, "lib", "F.lean")}
    assert set(found) == {"{term}", "brand_new_combinator", "#count_heartbeats", ":=", "=>"}
    assert found["{term}"].head == "success_if_fail_with_msg" and TC.covered(found["{term}"])
    assert found[":="].pair == "norm" and TC.covered(found[":="])
    assert TC.covered(found["#count_heartbeats"])  # a `#…` word is refused whole as a command
    assert not TC.covered(found["brand_new_combinator"])
    assert found["=>"].category == "conv"


@pytest.mark.parametrize(("before", "head", "pair", "covered"), [
    ("try", "try", "", True), ("<|>", "<|>", "", True), ("{num}", "iterate", "", True), ("(start)", "<;>", "", True),
    ("{rhsParser}", "match", "", True), (":=", "(", "disch", True), (":=", "(", "config", False),
    ("{term}", "new_word", "", False), ("new_word", "new_word", "", False),
])
def test_covered_is_what_the_guard_reads_as_a_tactic_start(before: str, head: str, pair: str, covered: bool) -> None:
    assert TC.covered(TC.Before(before, head, "tactic", "src", "F.lean", 1, pair)) is covered


def test_the_script_reads_a_work_tree_and_a_git_dir_alike(tmp_path: Path) -> None:
    tree = tmp_path / "lib"
    (tree / "Lib").mkdir(parents=True)
    (tree / "Lib" / "Comb.lean").write_text(CORE + LIBRARY)
    (tree / "LibTest").mkdir()
    (tree / "LibTest" / "T.lean").write_text('syntax "test_only_combinator " tacticSeq : tactic\n')
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    outputs = []
    for root in (tree, tree / ".git"):
        done = subprocess.run([sys.executable, str(TC.__file__), f"lib={root}"], capture_output=True, text=True,
                              check=True)
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    missing = outputs[0].split("\nknown to the guard")[0].splitlines()[1:]
    assert [line.split()[0] for line in missing] == ["brand_new_combinator"]
    assert "Lib/Comb.lean:27" in missing[0]
    assert "test_only_combinator" not in outputs[0]  # tests are skipped
    assert "lib 18 (at " in outputs[0]

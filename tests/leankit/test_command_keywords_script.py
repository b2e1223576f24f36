"""`scripts/command_keywords.py`: the command heads it reads out of Lean sources (each way a command is declared)
and its comparison with `leankit.commands.COMMAND_KEYWORDS`. The texts are written here in the shapes the sources
use; the scan of the real sources is in docs/results.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.scripts import load_script

CK = load_script("command_keywords")

CORE = '''namespace Command
/-- "not_a_head" in a doc comment -/
def «abbrev» := leading_parser
  "abbrev " >> declId
def definition := leading_parser
  "def " >> declId
def «instance» := leading_parser
  Term.attrKind >> "instance" >> optNamedPrio
def classInductive := leading_parser
  atomic (group (symbol "class " >> "inductive ")) >> declId
def structureTk := leading_parser
  "structure "
def classTk := leading_parser
  "class "
def «structure» := leading_parser
    (structureTk <|> classTk) >> declId
@[builtin_command_parser] def declaration := leading_parser
  declModifiers false >>
  («abbrev» <|> definition <|> «instance» <|> classInductive <|> «structure»)
def sectionHeader := leading_parser
  optional ("@[" >> nonReservedSymbol "expose" >> "] ") >> optional ("public ")
@[builtin_command_parser] def «section» := leading_parser
  sectionHeader >> "section" >> optional ident
def initializeKeyword := leading_parser
  "initialize " <|> "builtin_initialize "
@[builtin_command_parser] def «initialize» := leading_parser
  declModifiers false >> initializeKeyword >> Term.doSeq
@[builtin_command_parser] def «register_tactic_tag» := leading_parser
  optional (docComment >> ppLine) >>
  "register_tactic_tag " >> ident >> strLit
@[builtin_command_parser, builtin_doc] def eval := leading_parser
  "#eval " >> termParser
-- @[builtin_command_parser] def commented := leading_parser "commented_out"
@[builtin_term_parser] def notCommand := leading_parser "term_only"
namespace InternalSyntax
  scoped syntax (name := end_local_scope) "end_local_scope" : command
end InternalSyntax
'''

LIBRARY = '''open Lean Elab Command in
/-- The `#list_things` command. -/
elab "#list_things" : command => pure ()
syntax (name := foo) (priority := low) withPosition("brand_new_cmd " colGt ident) : command
elab (name := alias) mods:declModifiers "alias " alias:ident " := " nameStx:ident : command => do
  pure ()
macro tk:"#instances" bi:(ppSpace bracketedBinder)* " : " t:term : command =>
  `(example : True := trivial)
local macro "file_only_cmd" n:ident : command => `(def $n := 1)
syntax "nonreserved_first" : command
syntax &"soft_head" ident : command
macro_rules | `(brand_new_cmd $x) => `(def $x := 1)
elab_rules : command | `(#list_things) => pure ()
macro "a_tactic" : tactic => `(tactic| skip)
syntax "a_term" : term
def f := `(command| $x:command)
'''


def _heads(text: str) -> dict[str, str]:
    return {head.token: head.how for head in CK.heads_of_file(text, "src", "F.lean")}


def test_a_core_parser_gives_its_first_atom_past_the_modifiers_read_through_the_parsers_it_names() -> None:
    heads = _heads(CORE)
    assert heads == {
        "abbrev": "builtin_command_parser", "def": "builtin_command_parser", "instance": "builtin_command_parser",
        "class": "builtin_command_parser", "structure": "builtin_command_parser",
        "section": "builtin_command_parser", "initialize": "builtin_command_parser",
        "builtin_initialize": "builtin_command_parser", "register_tactic_tag": "builtin_command_parser",
        "#eval": "builtin_command_parser", "end_local_scope": "scoped syntax",
    }


def test_syntax_macro_and_elab_of_the_command_category_give_their_first_string_atom() -> None:
    heads = {head.token: (head.how, head.reserved) for head in CK.heads_of_file(LIBRARY, "lib", "F.lean")}
    assert heads == {
        "#list_things": ("elab", True), "brand_new_cmd": ("syntax", True), "alias": ("elab", True),
        "#instances": ("macro", True), "file_only_cmd": ("local macro", True),
        "nonreserved_first": ("syntax", True), "soft_head": ("syntax", False),
    }


@pytest.mark.parametrize(("token", "covered"), [
    ("def", True), ("#anything_new", True), ("gen_injective_theorems%", True), ("variable?", True),
    ("brand_new_cmd", False), ("where", False),
])
def test_covered_is_what_the_guard_refuses(token: str, covered: bool) -> None:
    assert CK.covered(token) is covered


def test_a_help_listing_gives_its_word_heads() -> None:
    listing = ("## \\#check\nDefined in: `Lean.Parser.Command.check`\n\n## /--\nDefined in: `x.addDocString`\n\n"
               "## Examples\n\n```lean\n## first\nDefined in: `Parser.tactic.first`\n```\n"
               "## sudo\nDefined in: `Mathlib.sudo`\n")
    assert [(h.token, h.line) for h in CK.listing_heads(listing, "help", "c.md")] == [("#check", 1), ("sudo", 13)]


def test_the_script_reads_a_work_tree_and_a_git_dir_alike(tmp_path: Path) -> None:
    tree = tmp_path / "lib"
    (tree / "Lib").mkdir(parents=True)
    (tree / "Lib" / "Cmd.lean").write_text(LIBRARY)
    (tree / "LibTest").mkdir()
    (tree / "LibTest" / "T.lean").write_text('syntax "test_only_cmd" : command\n')
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    outputs = []
    for root in (tree, tree / ".git"):
        done = subprocess.run([sys.executable, str(CK.__file__), f"lib={root}"], capture_output=True, text=True,
                              check=True)
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    missing = outputs[0].split("in COMMAND_KEYWORDS")[0]
    assert "brand_new_cmd" in missing and "Lib/Cmd.lean:4" in missing
    assert "file_only_cmd" in missing and "(local: its file only)" in missing
    assert "test_only_cmd" not in outputs[0]  # tests are skipped
    assert "7 tokens in 7 declarations" in outputs[0]

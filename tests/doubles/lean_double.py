"""A fault-injecting stand-in for Pantograph's `repl`, for tests and benchmarks; as strict as the real one.

    python tests/doubles/lean_double.py [--pantograph-version V] [--ready-delay S] [--no-ready CODE]
                                        [--stderr-bytes N] [--preamble TEXT] [--log FILE] [--starts FILE]
                                        [--env-dump FILE] [--without COMMAND] [--closes TACTIC]
                                        [--mis-scope]
    python tests/doubles/lean_double.py --version

It emulates one Pantograph version (default 0.3.4): requests are parsed like that version's Protocol.lean
(`minilean.schema`: a missing required field or a wrong type is answered `Unable to parse json: …`),
and replies have that version's shapes (messages as strings before 0.3.4, `tacticErrors` and no sorry flags
before 0.3.1). `--version` prints the version and exits, but, like `repl`, only without module arguments.

Process-level faults come from flags; per-request behaviour from the tactic text of `goal.tactic`
(or the expression of `goal.start`), so one process can misbehave on demand:

    hang          never answers                 crash       SIGKILLs itself (exit 137)
    garbage       a line that is not JSON       partial     half a JSON line, then exits
    eof           closes stdout, exits 0        interrupt   {"error":"internal","desc":"interrupt"}
    huge:N        a goal whose target has N characters
    echo ...      success; the goal's target is the tactic text exactly as received
    sleep:MS      answers after MS milliseconds
    allocate:MIB  takes MIB MiB while elaborating; past the process's memory limit it ends as Lean does out of
                  memory (`INTERNAL PANIC: out of memory` on stderr, exit 1), else goes on as the tactic `allocate`
    done          closes all goals, cleanly     sorry       goals [] with hasSorry
    a --closes TACTIC  closes all goals, cleanly (its scoped names must resolve first, as below)
    unsafe        goals [] with hasUnsafe       bullet      goals [] but the root keeps a metavariable
    noroot        goals [] but goal.print shows no root (unassigned: all flags false, as Pantograph does)
    noflags       goals [] and no hasSorry/hasUnsafe keys (a reply lacking fields)
    nogoals       success shape without goals   nullstate   nextStateId null, goals []
    parse         {"parseError": ...}           strmsg      failure with plain-string messages
    legacy-ok / legacy-err   v0.2.x shapes      error       a failure with an error message
    anything containing by_elab, +native or native_decide: closes all goals, as Lean accepts them
    set_option debug.skipKernelTC true in decide +kernel (and `decide (config := { kernel := true })`,
    `decide!`; the option name read as Lean reads it, `«debug».skipKernelTC` too): closes all goals, cleanly
          flagged, whatever the goal: with the kernel off the auxiliary lemma is never checked
    set_option maxRecDepth N in … (N > 10000): the stack overflows and the process dies (exit 134)
    anything else success with one new goal `after <tactic>`
    uses N…       success if every N (read as Lean reads a name: `«a b»` is `a b`) names a hypothesis of the
                  goal, else `unknown identifier 'N'` (an inaccessible `x✝` is never found, as in Lean)
    scope         success; the goal's target describes the REPL scope (`opens … | options … | namespace …`)
    hyps N…       success with one goal whose hypotheses are the names N… (Lean source form: `h₀`, `«a b»`,
                  `a.b`; a trailing `✝`, with superscripts, makes the name inaccessible as `sanitizeNames` does)
    tagged N [hyg]  success with one goal whose case is N (with `hyg`, N with macro scopes, as tactics tag goals)
A new state's root is unassigned (goal.print prints no root) until a tactic ran on it; a new goal keeps the
hypotheses of the goal the tactic ran on (`goalId`'s; an index past the state's goals is Pantograph's `index` error).
`options.set automaticMode` is accepted and not followed: a reply holds the tactic's new goals only, as Pantograph's
does with automaticMode false (the other goals of the state are not appended).

Names, as Pantograph writes them (leankit.names, from Pantograph's Delate.lean and Protocol.lean): a hypothesis or
case name is Lean's `Name.toString` (components that are not identifiers escaped with `«»`, never an inaccessible
name); up to 0.3.14 that string is wrapped in `"` quotes when it holds `«`, and a case keeps its macro scopes; from
0.3.15 names are `Name`s (`ToJson Name`), a case without macro scopes. Binder names of a statement are read as Lean
reads them (`(«a b» : ℕ)` binds `a b`, `(«h₀» : …)` binds `h₀`).

Scope, as Pantograph has it from 0.3.0 (`Repl.lean`: `State.scope`, read by `runCoreM` for `goal.start`,
`goal.tactic` and `goal.print`): the REPL starts with an empty scope, and only `frontend.process` with
`inheritEnv: true` changes it, to the scope its text leaves (`open`, `set_option`, `namespace` lines), whatever
it was before; `reset` keeps it. `frontend.process` and `frontend.distil` elaborate their text from an empty
scope (`Command.mkState`): only the text's own header lines count there. Names that need an open namespace
(`π` and the `Real` lemmas `pi_pos`, `sqrt_nonneg`, …: `open Real`; `n !` and `factorial_pos`: `open Nat`) are
refused outside it, as Lean does: `unknown identifier` (a parse error for `!`); `![a, b]` is Mathlib's vector
literal (the token `![`), no factorial.

Environment, as Pantograph has it (`Repl.lean` v0.3.4: only `frontend.process {inheritEnv: true}` writes the REPL's
environment; `frontend.process`/`frontend.distil` elaborate on top of it; a goal state carries its own): the
constants a text declares (`theorem`/`lemma`, and `def`, `abbrev`, `instance NAME`, `structure`/`class` with its
`mk`, `inductive` with its `| constructors`, `opaque`, modifiers and attributes before them) persist when the text was
loaded with `inheritEnv: true`; a text that declares one of them again fails with Lean's `'NAME' has already been
declared` (the unit's error; distil's `io` error). A goal state remembers its environment: `goal.start`'s is the
REPL's, a sorry goal's the REPL's plus the file's constants declared before the theorem, a tactic's the state's it
ran on; `uses NAME` resolves a hypothesis or a constant of it. `open X` fails with `unknown namespace 'X'` when X is a
namespace the double saw some text's declarations create (a prefix of a declared name) and the environment the text is
elaborated in lacks it — neither a constant in it nor a `namespace X` command (of that text, or of a text an
`inheritEnv: true` load kept) registered it, as Lean's `addScope` does; a library's namespaces it cannot know, so any
other `open` passes (more lenient than Lean, which refuses any namespace nothing registered). A definition whose value
is `sorry`: `frontend.distil` makes it a target of its own (its type, the goal named by it), or, when a later
theorem's statement uses it, the first goal of that theorem's target, whose own goal then reads `?NAME`
(PyPantograph's test_distil_coupled); `frontend.process {sorrys: true}` gives its unit a goal of its type
(`Frontend.collectSorrys` collects the `sorry` term), beside the theorem's unit; the compile warns `declaration uses
'sorry'`. A statement is read whole: its binders (`(…)`, `{…}`, `⦃…⦄`; nested brackets read whole) end at the colon at
bracket depth 0, and the type is the rest up to the declaration's `:= by sorry` (a `let … :=` inside it is part of
it). More lenient than Lean: a definition's type is taken as written (binders before its colon are written `∀ binders,
T`), and an anonymous `instance : C` declares nothing the double tracks.

Sorry goals: `frontend.process {sorrys: true}` (up to 0.3.6) gives a `theorem NAME <binders> : T := by sorry`
unit its goal (`goalStateId`, `goals`, `goalSrcBoundaries`); `frontend.distil {file, ignoreValues}` (from
0.3.6) one target per sorry'd declaration: with `ignoreValues: false` the binders are hypotheses and the target
T, with `true` the goal is `∀ <binders>, T` with no hypotheses (the value, hence the intro, is dropped). A file
that does not elaborate is an `io` error for distil and an error message in its unit for process.

Sketches (docs/lean.md, "Sketches"; Pantograph's `Tactic/Assign.lean` evalDraft, PyPantograph's test_load_sorry,
Test/Frontend/Distil.lean): `goal.tactic {draft: "by …"}` (every version; exactly one tactic field, as `Repl.lean`
checks) elaborates the block on the goal: each `have NAME : T := by sorry` (or `:= sorry`) is a new goal T with the
hypotheses before it, NAME a hypothesis after it (from 0.3.7, whose Lean makes `have` a `let`, with the value
`?m.N`), a top-level `sorry` a goal of the target; the goals in source order, no hasSorry. A statement or tactic that
names what the scope lacks is `unknown identifier`, `error` fails as linarith does, `uses N…` checks the context, a
bracket closed or left open is a parse error, a block with no closing tactic `unsolved goals`. A theorem whose proof is
such a block gives the same goals (plain hypotheses) from `frontend.process {sorrys}` (one unit, source order) and
`frontend.distil` (one target, last hole first). More lenient than Lean: any other closing tactic closes the goal; a
`sorry` inside a have's proof other than the whole proof, and a draft that is not `by …` or `sorry`, are refused.

Where it is more lenient than Pantograph, and why: its request parsing is the product's own table of Pantograph's
fields (`minilean.schema`), so a wrong entry there would be wrong here too; tests/lean/test_requests.py checks
that table against REQUESTS.md (tests/fixtures/pantograph), transcribed independently. It has no Lean, so any tactic
not named above succeeds and any name outside `SCOPED_NAMES` resolves (it tests the client's protocol and scope
handling, not proofs; the fixed list covers what miniF2F's header opens); `goal.print` does not consult the scope
(Lean only pretty-prints there). A header's `variable (x : T)` binders that the statement names become the sorry
goal's first hypotheses, as Lean adds the variables a declaration uses (only explicit `(…)` binders are read;
instance binders are not added: stricter than Lean). Inside `namespace Ns` (its `end` closes it) `theorem n`
declares `Ns.n`, in `newConstants` and for `#print axioms n`, as Lean does.

`frontend.process` splits the file into units where Lean's parser splits it, with the double's own token reader (not
leankit's: a bug there must not hide here): a command keyword outside comments, literals and brackets starts one AT
ANY COLUMN — a term or tactic block cannot continue with one, so Lean ends it there and runs a command: `abbrev X : ℕ
:= 1\n  instance(priority:=high)evil:HAdd ℕ ℕ ℕ:=⟨fun a b=>a*b⟩` is TWO units, and so is `… := 2 open Real` on one
line; `axiom«x»` is the keyword `axiom` and the name `x`; a declaration's unit starts at the doc comment, attribute or
modifier that opens it, as Lean's boundaries do; `open X in`/`set_option o v in` is one unit with the command it
prefixes and none before a tactic (`open Real in simp`); `deriving` opens one only as `deriving instance`, `mutual …
end` is one; a command keyword inside a bracket (an attribute list aside) is Lean's `unexpected token 'KW'; expected
term`; boundaries in UTF-8 bytes. It lists `newConstants` when asked, and answers `#print axioms NAME` for
this file's theorems. Comments are read as Lean's whitespace reader reads them (`blank_comments`, the double's own
reader: `--` to the end of the line, nested `/- -/`, none inside a string), as strictly as Lean: a theorem whose
`:=` a line comment swallowed (`theorem t : T -- c := by sorry`, what burnqed once wrote) is Lean's parse error
`unexpected end of input; expected ':=', 'where' or '|'` (`unexpected token '#print'; …` when a command follows):
no goal from `frontend.process {sorrys}`, an `io` error from `frontend.distil`, nothing declared by a compile.
More lenient than Lean there: character literals are not read (a `'"'` would open a string; no test sends one).
A theorem's fate comes from markers in the file (outside comments): FAILCOMPILE (an error), sorry (the sorry
warning and sorryAx), by_elab (its metaprogram added the axiom `smuggled_false`), +native/native_decide
(Lean.ofReduceBool), the kernel-off route above (NAME and its unchecked, axiom-free `NAME.proof_1` among the
newConstants, `#print axioms` clean); emptycompile makes the reply `{"units": []}`, noconstants leaves
`newConstants` out. A definition's sorry, by_elab and native markers are its axioms too (sorry with the warning),
and, as Lean's `#print axioms` follows every constant a declaration uses, a theorem (or definition) reports the
axioms of each constant of the file before it and of the REPL's environment that its text names (read as Lean
resolves a name: as written, in the open namespace or one around it, or in an opened namespace; `«…»` escapes
not read), theirs already holding what they use: a filled answer `abbrev s : ℕ := by native_decide` puts
Lean.ofReduceBool in the report of a theorem that uses `s`. More lenient than Lean: a name the text writes is
taken as used, whether or not the elaborated term keeps it. The kernel recheck command
(`leankit.recheck.recheck_command(NAME)`, character for character; any other `run_cmd` is an error, as the double
cannot run metaprograms) reports `burnqed kernel recheck: NAME ok (N constants)` for a theorem of this file, N
counting the theorem's own constants and the `def`/`abbrev`/`instance`/`opaque` and theorems it reaches so
(an inductive, structure or class and its constructors are the kernel's, not re-added), and fails with the
kernel's error on the unchecked lemma of the kernel-off route. compilehang makes the compile outrun any bound:
from 0.3.4 (Pantograph's frontend.process honours `options.set timeout`) it answers after that timeout with every unit
interrupted (no messages, no constants); before 0.3.4, or with no timeout set, it never answers.
Without readHeader (from 0.3.0; before, for `file`) an `import` line is an error, as in the REPL's environment.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
from typing import Any

from leankit.names import LeanName, case_wire_name, wire_name
from leankit.version import PantographVersion
from minilean.replay.tactic_reader import sequence_problem
from minilean.schema import request_problem
from minilean.wire import echo_numeral

OK_GOAL_VARS = [{"userName": "x", "type": {"pp": "ℕ"}, "name": "_uniq.1", "isInaccessible": False}]
STANDARD_AXIOMS = ["propext", "Classical.choice", "Quot.sound"]
# The keywords that start a command wherever they stand (any column, after a term on the same line): Lean's term and
# tactic parsers cannot continue with them, so its command parser takes over (docs/lean.md, "The strict doubles").
COMMAND_KEYWORDS = frozenset({
    "import", "open", "set_option", "variable", "universe", "theorem", "lemma", "example", "namespace", "section",
    "end", "axiom", "run_cmd", "run_elab", "run_meta", "def", "abbrev", "instance", "structure", "inductive", "class",
    "opaque",
    "attribute", "notation", "notation3", "infix", "infixl", "infixr", "prefix", "postfix", "macro", "macro_rules",
    "syntax", "elab", "elab_rules", "binder_predicate", "unif_hint", "export", "alias", "irreducible_def", "mutual",
    "omit", "include", "initialize", "builtin_initialize", "declare_syntax_cat", "add_decl_doc", "deriving",
    "register_option", "register_simp_attr", "assert_not_exists", "suppress_compilation",
})
# Words that open a command and let the next command keyword continue it (`noncomputable def`, `local notation`).
COMMAND_MODIFIERS = frozenset({"private", "protected", "noncomputable", "partial", "unsafe", "nonrec", "local",
                               "scoped"})
# The double's own token reader (on purpose not leankit's: a bug there must not hide here): a name (dotted, `«»`
# parts, Lean's subscripts and primes), a `#command`, a string, a char literal, a bracket; other characters skipped.
_NAME_PART = r"(?:«[^»]*»|[^\W\d][\w'!?₀-₉ₐ-ₜᵢ-ᵪⱼ]*)"  # `axiom«x»` is two: a `«»` part opens a name or follows a dot
_WORD = re.compile(rf"{_NAME_PART}(?:\.{_NAME_PART})*|#[a-z_]+")
_CHAR_LITERAL = re.compile(r"'(?:\\.[^']*|[^'\\])'")
# Where Lean's whitespace reader stops outside comments: a string literal's quote, a line or a block comment's opener
_READER_STOP = re.compile(r'"|--|/-')
_BLOCK_MARK = re.compile(r"/-|-/")  # a block comment's nested openers and closers
_STRING_BODY = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)  # a string literal's characters and escapes
_NOT_NEWLINE = re.compile(r"[^\n]")
_OPENERS, _CLOSERS = "([{⟨⦃", ")]}⟩⦄"
# What opens a declaration before its keyword: an attribute, modifiers (its docstring is blanked with the comments).
DECLARATION_PREFIX = re.compile(r"(?:@\[[^\]]*\]\s*)?(?:(?:private|protected|noncomputable|partial|unsafe)\s+)*")
# A declaration that is not a theorem, and the constant it adds (an anonymous `instance : C` adds none the double
# tracks); an inductive adds its constructors (`| c`), a structure or class its `mk`.
DEFINITION = re.compile(r"(def|abbrev|instance|structure|inductive|class|opaque)\s+([^\s(\[{⟨⦃:]+)")
# The declarations the kernel recheck re-adds (`leankit.recheck`); an inductive, a structure or a class (and their
# constructors) are referred to under their own names.
CHECKED_KINDS = frozenset({"def", "abbrev", "instance", "opaque"})
# A name as a declaration's text writes it (`a.b`, `x'`, `h₀`); `«…»` escapes are not read (no test writes one there).
NAME_TOKEN = re.compile(r"(?<![\w.'])[^\W\d][\w.'!?]*")
ALREADY_DECLARED = "'{name}' has already been declared"
MISSING_ASSIGN = "expected ':=', 'where' or '|'"
# `decide` checked by the kernel alone, under an option that switches the kernel off (as Lean reads the name).
KERNEL_OFF = re.compile(r"set_option\s+debug\.skipKernelTC\s+true\s+in\s+(?:by\s+)?"
                        r"decide(?:\s*\+kernel|\s*\(config\s*:=\s*\{\s*kernel\s*:=\s*true\s*\}\)|!)")
DEEP_RECURSION = re.compile(r"set_option\s+maxRecDepth\s+(\d+)")
FRONTEND_TIMEOUT_FROM = PantographVersion(0, 3, 4)  # Repl.lean: frontend.process spawns a cancel token from then
IMPORT_ERROR = "invalid 'import' command, it must be used in the beginning of the file"
# Names that resolve only with a namespace open (Mathlib's scoped notation `π`/`n !`, unqualified lemma names).
SCOPED_NAMES: dict[str, str] = {
    "π": "Real", "pi_pos": "Real", "pi_gt_three": "Real", "sqrt_nonneg": "Real", "sqrt_pos": "Real",
    "sq_sqrt": "Real", "sqrt_sq": "Real", "exp_pos": "Real", "factorial_pos": "Nat", "!": "Nat",
}
# Mathlib's factorial `n !` (a space after a name) or `(n + 1)!`; `decide!` and `n!` are single tokens (a tactic,
# an identifier), and so are `![` (Mathlib's vector literal `![P, Q]`) and `!₂[` (EuclideanSpace's `!₂[x, y]`): Lean's
# tokenizer reads the longest token; no factorial.
FACTORIAL = re.compile(r"(?:(?<=\w)\s+!|(?<=\))\s*!)(?![=\[]|[₀-₉]+\[)")
# A theorem proved by a sketch: its signature and its tactic block (holes `have h : P := by sorry` among them).
SKETCH_DECLARATION = re.compile(r"(?:theorem|lemma)\s+(\S+)\s*(.*?)\s*:=\s*by\s*\n(.*)$", re.DOTALL)
# From 0.3.7 (Lean v4.22) `have` elaborates to a non-dependent `let`: a draft hole's `have` is in the later holes'
# context with its value, the earlier hole's metavariable (PyPantograph v0.3.8's test_load_sorry: `v="?m.19"`).
LET_HAVE_FROM = PantographVersion(0, 3, 7)
DECLARATION = re.compile(r"(?:theorem|lemma)\s+(\S+)\s*(.*?)\s*:=\s*(?:by\s+)?sorry\s*$", re.DOTALL)
BINDER = re.compile(r"\(([^():]+):([^()]*(?:\([^()]*\)[^()]*)*)\)")
IDENT = re.compile(r"(?:«[^»]*»|[^\s«])+")  # one identifier as written, `«…»` escapes holding spaces included
INACCESSIBLE_SUFFIX = re.compile(r"✝[⁰¹²³⁴⁵⁶⁷⁸⁹]*$")


def lean_name(written: str) -> LeanName:
    """The name Lean reads from `written` (`String.toName`); a trailing `✝…` makes it inaccessible, as Lean's
    `sanitizeNames` names a hygienic hypothesis; text Lean cannot read as a name stays one component."""
    suffix = INACCESSIBLE_SUFFIX.search(written)
    stem = written[: suffix.start()] if suffix else written
    name = LeanName.parse(stem)
    if name.anonymous:
        name = LeanName.simple(stem)
    return name.append_after(suffix.group(0)) if suffix else name


def qualify(name: str, namespace: str) -> str:
    """The constant `theorem name` declares inside `namespace` ("" for none; `_root_.x` is `x`)."""
    if name.startswith("_root_."):
        return name.removeprefix("_root_.")
    return f"{namespace}.{name}" if namespace else name


class Scope:
    """What `open`, `set_option` and `namespace` lines leave: Lean's `Command.Scope`, as far as names go."""

    def __init__(self, text: str = "") -> None:
        self.opens: list[str] = []
        self.options: dict[str, str] = {}
        self.namespace = ""
        self.variables: list[tuple[list[str], str]] = []  # `variable (x y : T)` binders: (names, type)
        for line in text.splitlines():
            words = line.split()
            if words[:1] == ["variable"]:
                self.variables += [(b.group(1).split(), " ".join(b.group(2).split())) for b in BINDER.finditer(line)]
            if words[:1] == ["open"]:
                self.opens += [w for w in words[1:] if w not in self.opens]
            elif words[:1] == ["set_option"] and len(words) >= 3:
                self.options[words[1]] = words[2]
            elif words[:1] == ["namespace"] and len(words) >= 2:
                self.namespace = words[1]

    def missing(self, text: str) -> str | None:
        """The first name in `text` this scope cannot resolve, or None."""
        for name, namespace in SCOPED_NAMES.items():
            if namespace in self.opens:
                continue
            if name == "!":
                if FACTORIAL.search(text):
                    return name
            elif re.search(rf"(?<![\w.']){re.escape(name)}(?![\w'])", text):
                return name
        return None

    def text(self) -> str:
        """Header lines that rebuild this scope."""
        lines = [f"open {' '.join(self.opens)}"] if self.opens else []
        lines += [f"set_option {k} {v}" for k, v in self.options.items()]
        lines += [f"variable ({' '.join(names)} : {type_})" for names, type_ in self.variables]
        return "\n".join(lines + ([f"namespace {self.namespace}"] if self.namespace else []))

    def describe(self) -> str:
        options = ",".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        return f"opens {' '.join(self.opens) or '-'} | options {options or '-'} | namespace {self.namespace or '-'}"


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


class Double:
    def __init__(self, out: Any, version: PantographVersion, without: tuple[str, ...] = (),
                 closes: tuple[str, ...] = (), mis_scope: bool = False) -> None:
        self.out = out
        self.version = version
        self.without = without  # commands this build lacks (a "0.3.6" from before frontend.distil)
        self.closes = frozenset(closes)  # tactics that close every goal, cleanly (the selftest's proofs)
        self.mis_scope = mis_scope  # a broken REPL: header loads leave its scope as it was
        self.states: dict[int, dict[str, Any]] = {}
        self.next_id = 0
        self.scope = Scope()  # the REPL's scope (module docstring)
        self.timeout_ms = 0  # options.set timeout (0: none, as in Pantograph)
        self.unchecked: dict[str, str] = {}  # theorem -> its auxiliary lemma the kernel never checked
        self.constants: dict[str, int] = {}  # theorem -> how many constants its kernel recheck re-adds
        self.reach: dict[str, frozenset[str]] = {}  # this file's constant -> the checked constants it reaches
        self.env_axioms: dict[str, list[str]] = {}  # the REPL environment's constants: their axioms
        self.env_reach: dict[str, frozenset[str]] = {}  # … and the checked constants each reaches
        self.env: set[str] = set()  # the REPL's environment: what `frontend.process {inheritEnv: true}` declared
        self.file_namespaces: set[str] = set()  # namespaces some text's declarations created (module docstring)
        self.registered: set[str] = set()  # namespaces a `namespace` command registered in the REPL environment
        self.text_registered: set[str] = set()  # ... in the text being elaborated
        self.context_env: frozenset[str] = frozenset()  # the environment of the goal state a request works on

    def emit(self, text: str) -> None:
        self.out.write(text.encode("utf-8") + b"\n")
        self.out.flush()

    # -- shapes of this version ---------------------------------------------------------------------------

    def goal(self, target: str, variables: list[dict[str, Any]] | None = None,
             case: LeanName | None = None) -> dict[str, Any]:
        shape: dict[str, Any] = {"vars": OK_GOAL_VARS if variables is None else variables, "target": {"pp": target},
                                 "name": "_uniq.2"}
        shape.update({"fragment": "tactic"} if self.version.goal_fragment else {"isConversion": False})
        if case is not None:
            shape["userName"] = case_wire_name(case, self.version)
        return shape

    def hypothesis(self, name: LeanName, type_: str, index: int, value: str | None = None) -> dict[str, Any]:
        """A hypothesis as this version writes it (module docstring, "Names"); `value` for a let-bound one."""
        shape: dict[str, Any] = {"userName": wire_name(str(name), self.version), "type": {"pp": type_},
                                 "name": f"_uniq.{10 + index}", "isInaccessible": name.inaccessible}
        if value is not None:
            shape["value"] = {"pp": value}
        return shape

    def message(self, text: str, severity: str = "error", file_name: str = "<Pantograph>", line: int = 0) -> Any:
        if self.version.message_objects:
            return {"severity": severity, "pos": {"line": line, "column": 0},
                    "kind": "hasSorry" if "sorry" in text else "[anonymous]", "keepFullRange": False,
                    "isSilent": False, "fileName": file_name, "endPos": None, "data": text, "caption": ""}
        if severity == "information":
            return text + "\n"
        return f"{file_name}:{line}:0: {severity}: {text}\n"

    def flags(self, sorry: bool = False, unsafe: bool = False) -> dict[str, bool]:
        return {"hasUnsafe": unsafe, "hasSorry": sorry} if self.version.sorry_flags else {}

    def failure(self, text: str) -> str:
        if self.version.tactic_errors:
            return dumps({"tacticErrors": [text]})
        return dumps({"messages": [self.message(text)], **self.flags()})

    # -- goal states ---------------------------------------------------------------------------------------

    def new_state(self, *, sorry: bool = False, mvar: bool = True, root: bool = True,
                  goals: list[dict[str, Any]] | None = None, env: frozenset[str] | None = None) -> int:
        """A goal state; it carries its environment (`env`, else the one of the state the request works on)."""
        sid = self.next_id
        self.next_id += 1
        self.states[sid] = {"sorry": sorry, "mvar": mvar, "root": root, "goals": goals,
                            "env": self.context_env if env is None else env}
        return sid

    def success(self, goals: list[dict[str, Any]], *, sorry: bool = False, unsafe: bool = False,
                mvar: bool | None = None, root: bool = True) -> str:
        sid = self.new_state(sorry=sorry, mvar=bool(goals) if mvar is None else mvar, root=root, goals=goals)
        reply: dict[str, Any] = {"nextStateId": sid, "goals": goals}
        if self.version.sorry_flags:
            reply.update({"messages": [], **self.flags(sorry, unsafe)})
        return dumps(reply)

    def die(self, signum: int | None = None) -> None:
        """The process ends: killed by `signum`, else it exits 0 (tests/doubles/line_servers.py's in-process double
        raises instead: a process-level fault needs the process)."""
        if signum is None:
            os._exit(0)
        os.kill(os.getpid(), signum)

    def hang(self) -> None:
        """The process never answers (as `die`: the in-process double raises)."""
        time.sleep(3600)

    def behave(self, word: str) -> str | None:
        """Process-level misbehaviour shared by goal.start and goal.tactic; None = not a fault word."""
        if word == "hang":
            self.hang()
        if word == "crash":
            self.die(signal.SIGKILL)
        if word == "garbage":
            return "this is not json at all"
        if word == "partial":
            self.out.write(b'{"nextStateId":1,"goa')
            self.out.flush()
            self.die()
        if word == "eof":
            self.out.close()
            self.die()
        if word == "interrupt":
            return dumps({"error": self.version.interrupt_kind, "desc": "interrupt"})
        if word.startswith("sleep:"):
            time.sleep(int(word.split(":", 1)[1]) / 1000)
        if word.startswith("allocate:"):
            self.allocate(int(word.split(":", 1)[1]))
        return None

    def allocate(self, mib: int) -> None:
        """Elaborating takes `mib` MiB (code Lean runs, a huge term); past the process's memory limit the allocation
        fails and the process ends as Lean's runtime ends it (`lean_internal_panic_out_of_memory`: the message on
        stderr, exit 1)."""
        try:
            held = bytearray(mib * 2**20)
        except MemoryError:
            sys.stderr.write("INTERNAL PANIC: out of memory\n")
            sys.stderr.flush()
            os._exit(1)
        del held

    def tactic(self, payload: dict[str, Any]) -> str:
        from leankit.text import read_as_lean  # here, not at the top: `--version` must start on any checkout

        sid = payload.get("stateId")
        if sid not in self.states:
            return dumps({"error": "index", "desc": f"Invalid state index {sid}"})
        self.context_env = self.states[sid]["env"]  # Pantograph restores the state's own environment first
        if payload.get("draft") is not None:
            return self.draft(sid, payload)
        tactic = str(payload.get("tactic", ""))
        problem = sequence_problem(tactic)
        if problem is not None:  # Pantograph parses ONE tactic: `t1; t2` is a parse error, `(t1; t2)` is not
            return dumps({"parseError": problem, **self.flags()})
        word = tactic.split(maxsplit=1)[0] if tactic.split() else ""
        faulty = self.behave(word)
        if faulty is not None:
            return faulty
        missing = self.scope.missing(tactic)
        if missing is not None:
            return self.failure(f"unknown identifier '{missing}'")
        variables = self._worked_on(sid, payload)  # a new goal keeps the hypotheses of the one worked on
        reply = variables if isinstance(variables, str) else self._goal_word(word, tactic, variables)
        if reply is not None:
            return reply
        assert not isinstance(variables, str)
        deep = DEEP_RECURSION.search(read_as_lean(tactic))
        if deep is not None and int(deep.group(1)) > 10000:
            self.die(signal.SIGABRT)  # Lean's stack overflow takes the whole process
        if KERNEL_OFF.search(read_as_lean(tactic)):
            return self.success([], mvar=False)
        if word == "done" or tactic.strip() in self.closes or any(
                trick in tactic for trick in ("by_elab", "+native", "native_decide")):
            return self.success([], mvar=False)
        reply = self._closing_word(word) or self._scripted_reply(word)
        if reply is not None:
            return reply
        return self.success([self.goal(f"after {tactic}", variables)])

    def _worked_on(self, sid: int, payload: dict[str, Any]) -> list[dict[str, Any]] | str | None:
        """The hypotheses of the goal a tactic works on (`goalId`'s, else the first; None: a state whose goals the
        double does not hold), or Pantograph's index error for a goal the state does not have."""
        stored = self.states[sid]["goals"]
        goal_id = int(payload.get("goalId") or 0)
        if stored and goal_id >= len(stored):
            return dumps({"error": "index", "desc": f"Invalid goal index {goal_id}"})
        return stored[goal_id]["vars"] if stored else None

    def _goal_word(self, word: str, tactic: str, variables: list[dict[str, Any]] | None) -> str | None:
        """The test words that answer with one new goal: `uses`, `scope`, `huge:N`, `echo`; None for others."""
        if word == "uses":
            # names resolve as Lean reads them; an inaccessible one (x✝) cannot be named at all
            known = {LeanName.parse(_unquoted(str(v["userName"]))) for v in
                     (variables if variables is not None else OK_GOAL_VARS)}
            known |= {LeanName.parse(constant) for constant in self.context_env}  # the goal state's environment
            unknown = [name for name in IDENT.findall(tactic)[1:] if LeanName.parse(name) not in known
                       or LeanName.parse(name).anonymous]
            if unknown:
                return self.failure(f"unknown identifier '{unknown[0]}'")
            return self.success([self.goal(f"after {tactic}", variables)])
        if word == "hyps":
            names = [lean_name(written) for written in IDENT.findall(tactic)[1:]]
            return self.success([self.goal(f"after {tactic}", [self.hypothesis(name, "ℕ", index)
                                                               for index, name in enumerate(names)])])
        if word == "tagged":
            written = tactic.split()[1:]
            case = lean_name(written[0]) if written else LeanName.simple("h")
            if written[1:] == ["hyg"]:  # a tag a tactic made hygienic: `h._@.Test._hyg.7`
                case = LeanName((*case.parts, "_@", "Test", "_hyg", 7))
            return self.success([self.goal(f"after {tactic}", variables, case)])
        if word == "scope":
            return self.success([self.goal(self.scope.describe(), variables)])
        if word.startswith("huge:"):
            return self.success([self.goal("x = " + "a" * int(word.split(":", 1)[1]))])
        if word == "echo":
            return self.success([self.goal(tactic)])
        return None

    def _closing_word(self, word: str) -> str | None:
        """The test words that close the goal with given flags; None for others."""
        if word == "sorry":
            return self.success([], sorry=True, mvar=False)
        if word == "unsafe":
            return self.success([], unsafe=True, mvar=False)
        if word == "bullet":
            return self.success([], mvar=True)
        if word == "noroot":
            return self.success([], mvar=False, root=False)
        return None

    def _scripted_reply(self, word: str) -> str | None:
        """The test words that answer with an odd or old-style reply, or a plain failure; None for others."""
        if word == "noflags":
            return dumps({"nextStateId": self.new_state(mvar=False), "messages": [], "goals": []})
        if word == "nogoals":
            sid2 = self.new_state()
            return dumps({"nextStateId": sid2, "messages": [], **self.flags()})
        if word == "nullstate":
            return dumps({"nextStateId": None, "messages": [], **self.flags(), "goals": []})
        if word == "parse":
            return dumps({"parseError": "<input>:1:5: unexpected token", **self.flags()})
        if word == "strmsg":
            return dumps({"messages": ["unknown identifier 'foo'"], **self.flags()})
        if word == "legacy-ok":
            sid2 = self.new_state()
            return dumps({"nextStateId": sid2, "goals": [{"vars": [], "target": {"pp": "p"}, "name": "_uniq.3",
                                                          "isConversion": False}]})
        if word == "legacy-err":
            return dumps({"tacticErrors": ["tactic 'assumption' failed\n⊢ p"]})
        if word == "error":
            return self.failure("linarith failed to find a contradiction")
        return None

    # -- sketches: goal.tactic {draft} and the theorem files of frontend.distil/process ----------------------

    def draft(self, sid: int, payload: dict[str, Any]) -> str:
        """`goal.tactic {draft}` (every version, `Tactic/Assign.lean`'s evalDraft): the term elaborated against
        the goal, each `sorry` in it a new goal (module docstring, "Sketches")."""
        from minilean.wire import tactic_field

        field = tactic_field(self.version, payload)
        if not isinstance(field, str):
            return dumps(field)
        stored = self.states[sid]["goals"]
        goal_id = int(payload.get("goalId") or 0)
        if stored is not None and goal_id >= len(stored):
            return dumps({"error": "index", "desc": f"Invalid goal index {goal_id}"})
        goal = stored[goal_id] if stored else self.goal("start")
        term = str(payload["draft"]).strip()
        if term == "sorry":
            return self.success([self.goal(goal["target"]["pp"], goal["vars"])])
        if not re.match(r"by\b", term):
            return self.failure("the double elaborates only `by …` drafts")
        holes = self.draft_goals(term[2:], goal["target"]["pp"], list(goal["vars"]), self.scope,
                                 lets=self.version >= LET_HAVE_FROM)
        if isinstance(holes, tuple):
            kind, text = holes
            if kind == "parse":
                return dumps({"parseError": text, **self.flags()})
            return self.failure(text)
        return self.success(holes, mvar=True)

    def draft_goals(self, block: str, target: str, variables: list[dict[str, Any]], scope: Scope, *,
                    lets: bool = False) -> list[dict[str, Any]] | tuple[str, str]:
        """The goals of a sketch's tactic block on `target` (hypotheses `variables`), one per `sorry` in source
        order, each with the hypotheses before it (a hole's `have` in scope after it; with `lets`, a draft's from
        0.3.7, whose Lean elaborates `have` to a `let`, with the value `?m.N`); or ("parse" | "error", Lean's
        text)."""
        tactics = _top_level_tactics(block)
        if isinstance(tactics, tuple):
            return tactics
        holes: list[dict[str, Any]] = []
        context = list(variables)
        closed = False
        for tactic in tactics:
            have = re.fullmatch(r"have\s+(\S+)\s*:\s*(.+?)\s*:=\s*(.+)", tactic)
            if have is not None:
                problem = self._have(have, holes, context, scope, lets)
                if problem is not None:
                    return "error", problem
                continue
            if closed:
                return "error", "no goals to be proved"
            problem = self._closing(tactic, target, holes, context, scope)
            if problem is not None:
                return "error", problem
            closed = True
        if not closed:
            shown = "\n".join([f"{v['userName']} : {v['type']['pp']}" for v in context] + [f"⊢ {target}"])
            return "error", f"unsolved goals\n{shown}"
        return holes

    def _have(self, have: re.Match[str], holes: list[dict[str, Any]], context: list[dict[str, Any]], scope: Scope,
              lets: bool) -> str | None:
        """A sketch's `have NAME : T := …`: a hole when its proof is `sorry`; NAME in `context` after it."""
        missing = scope.missing(have.group(2))
        if missing is not None:
            return f"unknown identifier '{missing}'"
        value = None
        if re.fullmatch(r"(?:by\s+)?sorry", have.group(3)):
            holes.append(self.goal(have.group(2), list(context)))
            value = f"?m.{len(holes) * 2 + 5}" if lets else None
        elif re.search(r"(?<![\w.'])sorry(?![\w'])", have.group(3)):
            return "the double reads a `sorry` in a have only as its whole proof"
        context.append(self.hypothesis(lean_name(have.group(1)), have.group(2), len(context), value))
        return None

    def _closing(self, tactic: str, target: str, holes: list[dict[str, Any]], context: list[dict[str, Any]],
                 scope: Scope) -> str | None:
        """A sketch's closing tactic on the main goal (closed by it, as any tactic the double does not name): `sorry`
        a hole of the target; `error` Lean's failure; `uses N…` checked against the context, the holes in it."""
        word = tactic.split(maxsplit=1)[0]
        if tactic == "sorry":
            holes.append(self.goal(target, list(context)))
        elif word == "error":
            return "linarith failed to find a contradiction"
        elif word == "uses":
            known = {LeanName.parse(_unquoted(str(v["userName"]))) for v in context}
            unknown = [name for name in IDENT.findall(tactic)[1:] if LeanName.parse(name) not in known]
            if unknown:
                return f"unknown identifier '{unknown[0]}'"
        missing = scope.missing(tactic)
        return None if missing is None else f"unknown identifier '{missing}'"

    def sketch_goals(self, source: str, scope: Scope) -> list[dict[str, Any]] | str | None:
        """The holes of `theorem NAME <binders> : T := by <sketch>` as goals in source order (the binders
        hypotheses), Lean's error text, or None for any other command."""
        match = SKETCH_DECLARATION.match(DECLARATION_PREFIX.sub("", source.strip(), count=1))
        if match is None or re.search(r"(?<![\w.'])sorry(?![\w'])", match.group(3)) is None:
            return None
        start = self.sorry_target(f"theorem {match.group(1)} {match.group(2)} := by sorry", scope,
                                  ignore_values=False)
        if not isinstance(start, dict):
            return start
        holes = self.draft_goals(match.group(3), start["target"]["pp"], list(start["vars"]), scope)
        return holes[1] if isinstance(holes, tuple) else holes

    def _sketch_target(self, block: str, scope: Scope, env: frozenset[str]) -> dict[str, Any] | str | None:
        """distil's target of a theorem proved by a sketch: its holes, last first (Test/Frontend/Distil.lean,
        test_distil_induction); Lean's error text; None for any other command."""
        sketched = self.sketch_goals(block, scope)
        if isinstance(sketched, str):
            return sketched
        if not sketched:
            return None
        goals = sketched[::-1]
        return {"stateId": self.new_state(root=False, goals=goals, env=env), "goals": goals}

    def print_state(self, payload: dict[str, Any]) -> str:
        state = self.states.get(payload["stateId"])
        if state is None:
            return dumps({"error": "index", "desc": f"Invalid state index {payload['stateId']}"})
        goals = state["goals"] if state["goals"] is not None else [self.goal("start")]
        reply: dict[str, Any] = {"goals": goals if payload.get("goals") else [], "extraMVars": []}
        root = state["root"]
        if self.version.sorry_flags:  # an unassigned root: no root printed and every flag false
            reply.update({"rootHasUnsafe": False, "rootHasSorry": root and state["sorry"],
                          "rootHasMVar": root and state["mvar"]})
        if payload.get("rootExpr") and root:
            reply["root"] = {"pp": "fun x => ?m.1" if state["mvar"] else "fun x => x"}
        return dumps(reply)

    # -- frontend.process ----------------------------------------------------------------------------------

    def compile(self, payload: dict[str, Any]) -> str:
        from leankit.text import read_as_lean

        text = payload.get("file")
        if text is None:
            return dumps({"error": "arguments", "desc": "Exactly one of {fileName, file} must be supplied"})
        if "emptycompile" in text:
            return dumps({"units": []})
        if "forged_reply" in text:  # code in the file (an `#eval`) prints a line to the process's stdout first:
            twin = dict(payload, file=text.replace("forged_reply", "trivial".ljust(12)))  # an honest twin's reply
            self.out.write((self.compile(twin) + "\n").encode())
            self.out.flush()
        masked = blank_comments(text)[0]
        if self.version.repl_scope and payload.get("inheritEnv") and not self.mis_scope:
            # Pantograph takes the scope the text leaves, starting from an empty one (Repl.lean, v0.3.0+).
            self.scope = Scope(masked)
        self.unchecked, self.constants, self.reach = {}, {}, {}  # this file's declarations only
        deep = DEEP_RECURSION.search(read_as_lean(text))
        if deep is not None and int(deep.group(1)) > 10000:
            self.die(signal.SIGABRT)  # elaborating the file overflows the stack as the tactic did
        interrupted = self._compile_hang(text)
        read_header = bool(payload.get("readHeader")) if self.version.header_flags else False
        starts = _command_starts(text, read_header)
        declared: dict[str, list[str]] = {}
        units = []
        file_scope = Scope()  # the text's own header lines: the compile never sees the REPL's scope
        namespaces: list[str] = []  # open `namespace`s ("" for a section): a theorem in one declares `Ns.name`
        self.text_registered = set()
        for index, (start, number) in enumerate(starts):
            end = starts[index + 1][0] if index + 1 < len(starts) else len(text)
            source = masked[start:end].strip()  # as Lean reads the command: comments are whitespace
            boundary = [len(text[:start].encode()), len(text[:end].encode())]
            namespaces = _track_namespaces(source, namespaces)
            self.text_registered |= registered_namespaces(source, namespaces)
            if source.startswith(("open", "set_option", "namespace", "variable")):
                file_scope = Scope(f"{file_scope.text()}\n{source}")
            if interrupted:
                units.append({"messages": [], "boundary": boundary,
                              **({"newConstants": []} if payload.get("newConstants") else {})})
                continue
            prefix = ".".join(part for part in namespaces if part)
            following = masked[end:].strip().split(maxsplit=1)[0] if masked[end:].strip() else None
            units.append(self._compiled_unit(source, number, declared, payload, boundary, prefix, file_scope,
                                             following))
        self.file_namespaces |= namespaces_of(set(declared))
        if self.version.header_flags and payload.get("inheritEnv"):
            self.env |= set(declared)  # Pantograph keeps the environment the text leaves (Repl.lean, v0.3.0+)
            self.registered |= self.text_registered
            self.env_axioms.update(declared)
            self.env_reach.update(self.reach)
        return dumps({"units": units})

    def _compile_hang(self, text: str) -> bool:
        """`compilehang` in the text: wait out the frontend timeout (forever before it exists); True when it fired."""
        if "compilehang" not in text:
            return False
        if self.version < FRONTEND_TIMEOUT_FROM or not self.timeout_ms:
            self.hang()
        time.sleep(self.timeout_ms / 1000)
        return True  # the cancel token fired: every command is cut short, silently

    def _compiled_unit(self, source: str, number: int, declared: dict[str, list[str]], payload: dict[str, Any],
                       boundary: list[int], prefix: str, file_scope: Scope, following: str | None) -> dict[str, Any]:
        """One command's unit, with the error for a name the text's header cannot resolve and any sorry's goal. A
        theorem whose `:=` Lean never reaches (a comment swallowed it) is a parse error and declares nothing."""
        before = frozenset(self.env | set(declared))  # the environment the command is elaborated in
        problem = _parse_problem(source, following) or _stray_keyword(source) or self.open_problem(source, before)
        if problem is not None:
            unit: dict[str, Any] = {"messages": [self.message(problem, file_name="<anonymous>", line=number)],
                                    "boundary": boundary}
            if payload.get("newConstants"):
                unit["newConstants"] = []
            return unit
        unit = self.unit(source, number, declared, payload, boundary, prefix, tuple(file_scope.opens))
        sorrys = self.version.process_sorrys and payload.get("sorrys")
        other = definition(source, prefix)
        if other is not None and other[1] is not None and sorrys and not _has_error(unit["messages"]):
            # Frontend.collectSorrys: the definition's `sorry` term is a goal of its unit, of the definition's type
            slot = self.goal(other[1], [])
            unit.update({"goals": [slot], "goalStateId": self.new_state(root=False, goals=[slot], env=before),
                         "goalSrcBoundaries": [boundary]})
        theorem = re.match(r"(?:theorem|lemma)\s+(\S+)", DECLARATION_PREFIX.sub("", source, count=1))
        missing = file_scope.missing(source) if theorem is not None else None
        if theorem is not None and missing is not None:  # the text's header lacks the open it needs
            unit["messages"] = [self.message(f"unknown identifier '{missing}'", file_name="<anonymous>",
                                             line=number)]
            declared.get(qualify(theorem.group(1), prefix), []).append("sorryAx")
            return unit
        target = self.sorry_target(source, file_scope, ignore_values=False)
        if isinstance(target, str):
            unit["messages"] = [self.message(target, file_name="<anonymous>", line=number)]
        elif target is not None and sorrys and not _has_error(unit["messages"]):
            unit.update({"goals": [target], "goalStateId": self.new_state(root=False, goals=[target], env=before),
                         "goalSrcBoundaries": [boundary]})
        elif target is None and theorem is not None and sorrys:
            sketched = self.sketch_goals(source, file_scope)
            if isinstance(sketched, str):
                unit["messages"] = [self.message(sketched, file_name="<anonymous>", line=number)]
            elif sketched and not _has_error(unit["messages"]):  # Frontend.collectSorrys: source order
                unit.update({"goals": sketched, "goalStateId": self.new_state(root=False, goals=sketched, env=before),
                             "goalSrcBoundaries": [boundary] * len(sketched)})
        return unit

    def open_problem(self, source: str, env: frozenset[str]) -> str | None:
        """Lean's error for `open X` when X is no namespace of `env`: only for the namespaces the double knows a
        text's declarations create (`file_namespaces`), as it cannot know a library's (module docstring)."""
        known = namespaces_of(env) | self.registered | self.text_registered
        for name in opened(source):
            if name in self.file_namespaces and name not in known:
                return f"unknown namespace '{name}'"
        return None

    def sorry_target(self, source: str, scope: Scope, *, ignore_values: bool) -> dict[str, Any] | str | None:
        """The goal of a `theorem NAME <binders> : T := by sorry` elaborated under `scope`; the error text when a
        name does not resolve there; None for any other command."""
        match = DECLARATION.match(DECLARATION_PREFIX.sub("", source.strip(), count=1))
        if match is None:
            return None
        signature = match.group(2)
        missing = scope.missing(signature)
        if missing is not None:
            return f"unknown identifier '{missing}'" if missing != "!" else "unexpected token '!'; expected term"
        # The binders are what comes before the statement's colon at bracket depth 0; its type, all after it
        # (a `let … :=` or `∃ (x : T)` inside the type is no binder).
        colon = _depth0(signature, ":")
        head = signature[:colon] if colon >= 0 else signature
        binders = _binder_groups(head)
        if colon < 0 or binders is None:
            return "unexpected token; expected ':'"
        # Lean makes the header's variables that the statement uses binders of the theorem, first.
        used = [([name], type_) for names, type_ in scope.variables for name in names
                if re.search(rf"(?<![\w.']){re.escape(name)}(?![\w'])", signature)]
        binders = used + binders
        target = " ".join(signature[colon + 1 :].split())
        first = target.split(maxsplit=1)[0] if target.split() else ""
        if first in ("crash", "hang"):
            self.behave(first)  # the statement's fault, as on `goal.start`: the process dies or never answers
        if target.startswith("bad"):
            return f"unknown identifier '{target}'"
        if ignore_values and binders:
            bound = " ".join(f"({' '.join(names)} : {type_})" for names, type_ in binders)
            return self.goal(f"∀ {bound}, {target}", [])
        variables = [self.hypothesis(lean_name(name), type_, i)
                     for i, (name, type_) in enumerate((n, t) for names, t in binders for n in names)]
        return self.goal(target, variables)

    def distil(self, payload: dict[str, Any]) -> str:
        """`frontend.distil`: one target per sorry'd theorem, elaborated under the file's own header lines, on the
        REPL's environment and the file's declarations before it (which its goal state carries). A definition left
        `sorry` is a target of its own (its type, the goal named by it), or, when a theorem after it uses it, the
        first goal of that theorem's target, whose goal then holds `?NAME` (PyPantograph's test_distil_coupled)."""
        text = str(payload["file"])
        if text.lstrip().startswith("import"):
            return dumps({"error": "io", "desc": f"<anonymous>:1:0: error: {IMPORT_ERROR}"})
        masked = blank_comments(text)[0]
        scope_lines: list[str] = []
        targets: list[dict[str, Any]] = []
        declared: list[str] = []  # the file's constants so far
        slots: dict[str, dict[str, Any]] = {}  # definitions left sorry, not yet used by a theorem: their goals
        starts = _command_starts(text, read_header=False)
        self.text_registered = set()
        open_namespaces: list[str] = []
        for index, (start, _) in enumerate(starts):
            end = starts[index + 1][0] if index + 1 < len(starts) else len(text)
            block = masked[start:end].strip()
            open_namespaces = _track_namespaces(block, open_namespaces)
            self.text_registered |= registered_namespaces(block, open_namespaces)
            env = frozenset(self.env | set(declared))
            if block.startswith(("open", "set_option", "namespace", "variable")):
                problem = self.open_problem(block, env)
                if problem is not None:
                    return dumps({"error": "io", "desc": f"<anonymous>:1:0: error: {problem}"})
                scope_lines.append(block)
                continue
            following = masked[end:].strip().split(maxsplit=1)[0] if masked[end:].strip() else None
            problem = _parse_problem(block, following) or _stray_keyword(block)
            other = definition(block, "")
            theorem = re.match(r"(?:theorem|lemma)\s+(\S+)", DECLARATION_PREFIX.sub("", block, count=1))
            names = other[0] if other is not None else [theorem.group(1)] if theorem is not None else []
            clash = next((name for name in names if name in env), None)
            if problem is None and clash is not None:
                problem = ALREADY_DECLARED.format(name=clash)
            if problem is not None:
                return dumps({"error": "io", "desc": f"<anonymous>:1:0: error: {problem}"})
            declared += names
            if other is not None and other[1] is not None:
                slots[other[0][0]] = self.goal(other[1], [], LeanName.parse(other[0][0]))
                continue
            target = self.sorry_target(block, Scope("\n".join(scope_lines)),
                                       ignore_values=bool(payload["ignoreValues"]))
            if isinstance(target, str):
                return dumps({"error": "io", "desc": f"<anonymous>:1:0: error: {target}"})
            if target is None:
                sketched = self._sketch_target(block, Scope("\n".join(scope_lines)), env)
                if isinstance(sketched, str):
                    return dumps({"error": "io", "desc": f"<anonymous>:1:0: error: {sketched}"})
                targets += [sketched] if sketched is not None else []
                continue
            coupled = [name for name in slots if re.search(rf"(?<![\w.']){re.escape(name)}(?![\w'])", block)]
            for name in coupled:
                target["target"]["pp"] = re.sub(rf"(?<![\w.'?]){re.escape(name)}(?![\w'])", f"?{name}",
                                                target["target"]["pp"])
            goals = [*(slots.pop(name) for name in coupled), target]
            targets += [{"stateId": self.new_state(root=False, goals=[goal], env=env), "goals": [goal]}
                        for goal in slots.values()]  # the unused slots before it: targets of their own
            slots.clear()
            targets.append({"stateId": self.new_state(root=False, goals=goals, env=env), "goals": goals})
        targets += [{"stateId": self.new_state(root=False, goals=[goal], env=frozenset(self.env | set(declared))),
                     "goals": [goal]} for goal in slots.values()]
        self.file_namespaces |= namespaces_of(set(declared))
        return dumps({"targets": targets})

    def unit(self, source: str, line: int, declared: dict[str, list[str]], payload: dict[str, Any],
             boundary: list[int], namespace: str = "", opens: tuple[str, ...] = ()) -> dict[str, Any]:
        messages: list[Any] = []
        constants: list[str] = []
        theorem = re.match(r"(?:theorem|lemma)\s+(\S+)", DECLARATION_PREFIX.sub("", source, count=1))
        printed = re.match(r"#print\s+axioms\s+(\S+)", source)
        recheck = re.match(r"run_cmd\b.*?``(\S+)\]", source, re.DOTALL)
        if source.startswith("import"):
            messages.append(self.message(IMPORT_ERROR, file_name="<anonymous>", line=line))
        elif theorem is not None and (qualify(theorem.group(1), namespace) in self.env
                                      or qualify(theorem.group(1), namespace) in declared):
            messages.append(self.message(ALREADY_DECLARED.format(name=qualify(theorem.group(1), namespace)),
                                         file_name="<anonymous>", line=line))
        elif theorem is not None:
            # inside `namespace Ns`, `theorem n` declares `Ns.n`
            used = self._uses(source, declared, namespace, opens)
            self._declare(source, line, qualify(theorem.group(1), namespace), declared, messages, constants, used)
        elif definition(source, namespace) is not None:
            used = self._uses(source, declared, namespace, opens)
            self._define(source, line, namespace, declared, messages, constants, used)
        elif printed is not None:
            messages.append(self._print_axioms(printed.group(1), namespace, declared, line))
        elif source.startswith("run_cmd"):
            messages.append(self.recheck(source, recheck.group(1) if recheck else None, declared, line))
        unit: dict[str, Any] = {"messages": messages, "boundary": boundary}
        if payload.get("newConstants") and "noconstants" not in source:
            unit["newConstants"] = constants
        return unit

    def _uses(self, source: str, declared: dict[str, list[str]], namespace: str,
              opens: tuple[str, ...]) -> list[str]:
        """The constants of the file so far and of the REPL's environment that a declaration's text names, read as
        Lean resolves a name: as written, in the open namespace or one around it, or in an opened namespace."""
        known = set(declared) | set(self.env_axioms)
        parts = namespace.split(".") if namespace else []
        around = [".".join(parts[:cut]) for cut in range(len(parts), 0, -1)]
        used: list[str] = []
        for token in NAME_TOKEN.findall(source):
            written = token.rstrip(".")
            candidates = [written, *(f"{outer}.{written}" for outer in [*around, *opens])]
            found = next((name for name in candidates if name in known), None)
            if found is not None and found not in used:
                used.append(found)
        return used

    def _inherit(self, used: list[str], declared: dict[str, list[str]]) -> tuple[list[str], frozenset[str]]:
        """What a declaration takes from the constants it uses: their axioms (Lean's `#print axioms` follows every
        constant a declaration uses, transitively) and the checked constants they reach (the kernel recheck
        re-adds each, the declaration's own included)."""
        axioms: list[str] = []
        reached: set[str] = set()
        for name in used:
            axioms += declared.get(name, self.env_axioms.get(name, []))
            reached |= self.reach.get(name, self.env_reach.get(name, frozenset()))
        return axioms, frozenset(reached)

    def _define(self, source: str, line: int, namespace: str, declared: dict[str, list[str]], messages: list[Any],
                constants: list[str], used: list[str]) -> None:
        """A definition's constants (none when one is declared already: Lean's error), its sorry warning, and its
        axioms: its own markers' and those of the constants it uses."""
        found = definition(source, namespace)
        kind = DEFINITION.match(DECLARATION_PREFIX.sub("", source, count=1))
        assert found is not None and kind is not None
        names, slot = found
        clash = next((name for name in names if name in self.env or name in declared), None)
        if clash is not None:
            messages.append(self.message(ALREADY_DECLARED.format(name=clash), file_name="<anonymous>", line=line))
            return
        sorry = slot is not None or "sorry" in source
        if sorry:
            messages.append(self.message("declaration uses 'sorry'", "warning", "<anonymous>", line))
        inherited, reached = self._inherit(used, declared)
        axioms = _merged(STANDARD_AXIOMS, ["sorryAx"] if sorry else [], marker_axioms(source), inherited)
        checked = kind.group(1) in CHECKED_KINDS  # an inductive's constants are the kernel's, not re-added
        for name in names:
            declared[name] = axioms
            self.reach[name] = reached | {names[0]} if checked else reached
        constants += names

    def _declare(self, source: str, line: int, name: str, declared: dict[str, list[str]], messages: list[Any],
                 constants: list[str], used: list[str]) -> None:
        """A theorem's messages, constants and axioms, read from the test words in its source and taken from the
        constants it uses (`used`: a definition's `sorry`, native code or smuggled axiom is the theorem's too)."""
        from leankit.text import read_as_lean

        constants.append(name)
        axioms = list(STANDARD_AXIOMS)
        if "FAILCOMPILE" in source:
            messages.append(self.message("unsolved goals", file_name="<anonymous>", line=line + 2))
            axioms.append("sorryAx")
        elif "sorry" in source:
            messages.append(self.message("declaration uses 'sorry'", "warning", "<anonymous>", line))
            axioms.append("sorryAx")
        axioms += marker_axioms(source)
        if KERNEL_OFF.search(read_as_lean(source)):
            # decide +kernel's auxiliary lemma, added without a kernel check: it proves the goal, true or
            # not, and brings no axiom (the theorem only applies it).
            axioms = [a for a in axioms if a == "sorryAx"]
            constants.append(f"{name}.proof_1")
            self.unchecked[name] = f"{name}.proof_1"
        inherited, reached = self._inherit(used, declared)
        declared[name] = _merged(axioms, inherited)
        self.reach[name] = reached | set(constants)
        self.constants[name] = len(self.reach[name])

    def _print_axioms(self, name: str, namespace: str, declared: dict[str, list[str]], line: int) -> Any:
        """`#print axioms NAME`: the axioms NAME depends on, or the unknown constant."""
        known = {**self.env_axioms, **declared}  # the REPL environment's constants and the file's
        if namespace and qualify(name, namespace) in known:  # names resolve in the open namespace first
            name = qualify(name, namespace)
        if name not in known:
            return self.message(f"unknown constant '{name}'", file_name="<anonymous>", line=line)
        if known[name]:
            listed = ", ".join(known[name])
            return self.message(f"'{name}' depends on axioms: [{listed}]", "information", "<anonymous>", line)
        return self.message(f"'{name}' does not depend on any axioms", "information", "<anonymous>", line)

    def recheck(self, source: str, name: str | None, declared: dict[str, list[str]], line: int) -> Any:
        """burnqed's kernel recheck of NAME: what Lean would log for it (the double runs no other metaprogram)."""
        from leankit.recheck import RECHECK_REPORT, recheck_command

        if name is None or source.rstrip("\n") != recheck_command(name).rstrip("\n"):
            return self.message("the double cannot run this metaprogram", file_name="<anonymous>", line=line)
        if name not in declared:
            return self.message(f"unknown constant '{name}'", file_name="<anonymous>", line=line)
        lemma = self.unchecked.get(name)
        if lemma is not None:
            return self.message(f"(kernel) declaration type mismatch, '_burnqed_recheck.{lemma}' has type\n"
                                "  decide p = true\nbut it is expected to have type\n  p",
                                file_name="<anonymous>", line=line)
        return self.message(RECHECK_REPORT.format(name=name, count=self.constants[name]), "information",
                            "<anonymous>", line)

    # -- dispatch ------------------------------------------------------------------------------------------

    def handle(self, line: str) -> str:
        command, _, raw = line.partition(" ")
        try:
            payload = json.loads(raw) if raw.strip() else None
        except json.JSONDecodeError as exc:
            return dumps({"error": "command", "desc": f"Unable to parse json: {exc}"})
        args = payload if isinstance(payload, dict) else {}
        known = ["options.set", "goal.start", "goal.tactic", "goal.print", "goal.delete", "frontend.process",
                 "reset", "stat", "expr.echo"]
        if self.version.distil:
            known.append("frontend.distil")
        if command not in known or command in self.without:
            return dumps({"error": "command", "desc": f"Unknown command {command}"})
        problem = request_problem(self.version, command, args)
        if problem is not None:
            return dumps({"error": "command", "desc": f"Unable to parse json: {problem}"})
        return self._dispatch(command, args)

    def _dispatch(self, command: str, args: dict[str, Any]) -> str:
        """A known command with a well-formed request: its reply."""
        if command == "options.set":
            if isinstance(args.get("timeout"), int):
                self.timeout_ms = args["timeout"]
            return "{}"
        if command == "goal.start":
            return self._goal_start(args)
        if command == "goal.tactic":
            return self.tactic(args)
        if command == "goal.print":
            return self.print_state(args)
        if command == "goal.delete":
            for sid in args["stateIds"]:
                self.states.pop(sid, None)
            return "{}"
        if command == "frontend.process":
            return self.compile(args)
        if command == "expr.echo":
            return dumps(echo_numeral(args))
        if command == "frontend.distil":
            return self.distil(args)
        count = len(self.states)
        if command == "reset":
            self.states.clear()
            self.next_id = 0
        return dumps({"nGoals": count})

    def _goal_start(self, args: dict[str, Any]) -> str:
        expr = str(args.get("expr") or args.get("copyFrom") or "")
        faulty = self.behave(expr.split(maxsplit=1)[0] if expr.split() else "")
        if faulty is not None:
            return faulty
        if expr.startswith("bad"):
            return dumps({"error": "elab", "desc": f"unknown identifier '{expr}'"})
        missing = self.scope.missing(expr)
        if missing is not None:  # goal.start elaborates in the REPL's scope
            return dumps({"error": "elab", "desc": f"unknown identifier '{missing}'"})
        return dumps({"stateId": self.new_state(root=False, env=frozenset(self.env)), "root": "_uniq.1"})


def _top_level_tactics(block: str) -> list[str] | tuple[str, str]:
    """A tactic block's top-level tactics (a line at the block's indentation starts one, deeper lines continue it),
    whitespace collapsed; ("parse", Lean's text) for a bracket closed or left open."""
    masked = blank_comments(block)[0]
    depth = 0
    for char in masked:
        depth += (char in "([{⟨⦃") - (char in ")]}⟩⦄")
        if depth < 0:
            return "parse", f"<Pantograph>:1:0: unexpected token '{char}'; expected term"
    if depth:
        return "parse", "<Pantograph>:1:0: unexpected end of input; expected ')'"
    lines = [line for line in masked.splitlines() if line.strip()]
    base = min((len(line) - len(line.lstrip()) for line in lines), default=0)
    tactics: list[str] = []
    for line in lines:
        if len(line) - len(line.lstrip()) == base or not tactics:
            tactics.append(line.strip())
        else:
            tactics[-1] += " " + line.strip()
    return [" ".join(tactic.split()) for tactic in tactics]


def marker_axioms(source: str) -> list[str]:
    """The axioms a declaration's markers bring: `by_elab` (its metaprogram added `smuggled_false`), `+native` or
    `native_decide` (`Lean.ofReduceBool`)."""
    axioms = ["smuggled_false"] if "by_elab" in source else []
    return axioms + (["Lean.ofReduceBool"] if "+native" in source or "native_decide" in source else [])


def _merged(*lists: list[str]) -> list[str]:
    """The axioms of `lists` in order, each once."""
    return list(dict.fromkeys(axiom for axioms in lists for axiom in axioms))


def _has_error(messages: list[Any]) -> bool:
    """An error among a unit's messages (objects from 0.3.4, strings before)."""
    return any(message.get("severity") == "error" if isinstance(message, dict) else ": error:" in str(message)
               for message in messages)


def _unquoted(wire: str) -> str:
    """A hypothesis name as written before 0.3.15 without the quotes Pantograph put around an escaped one."""
    return wire[1:-1] if len(wire) >= 2 and wire[0] == wire[-1] == '"' else wire


def blank_comments(text: str) -> tuple[str, list[int]]:
    """`text` with its comments blanked (newlines kept) as Lean's whitespace reader skips them (`--` to the end of
    the line; `/- -/` nested; not inside a string literal), and where each doc comment `/--` starts. The double's
    own reading, on purpose not burnqed's (a bug there must not hide here) and not minilean's twin of it (an
    independent peer; importing it would load minilean's whole server into every double). Character literals are
    not read (no statement the tests send has one)."""
    pieces: list[str] = []
    docs: list[int] = []
    kept = index = 0  # the text before `kept` is in `pieces`; the reader stands at `index`
    while (found := _READER_STOP.search(text, index)) is not None:
        start = found.start()
        if found.group() == '"':
            index = _string_end(text, start)
            continue
        end = _comment_end(text, start)
        if text.startswith("/--", start):
            docs.append(start)
        pieces += (text[kept:start], _NOT_NEWLINE.sub(" ", text[start:end]))
        kept = index = end
    pieces.append(text[kept:])
    return "".join(pieces), docs


def _comment_end(text: str, index: int) -> int:
    """Where the comment opening at `index` ends (the end of the text when never closed); -1 when none opens."""
    if text.startswith("--", index):
        end = text.find("\n", index)
        return len(text) if end < 0 else end
    if not text.startswith("/-", index):
        return -1
    depth = 0
    for mark in _BLOCK_MARK.finditer(text, index):  # left to right, each mark read once: `/-/` opens, never closes
        depth += 1 if mark.group() == "/-" else -1
        if depth == 0:
            return mark.end()
    return len(text)


def _command_starts(text: str, read_header: bool) -> list[tuple[int, int]]:
    """(char offset, line number) of each command, as Lean's parser finds them: at a command keyword
    (`COMMAND_KEYWORDS`) outside brackets and comments, at ANY column — after a term on the same line (`abbrev s : ℕ
    := 2 open Real`) or on an indented line (`  instance(priority:=high)evil:…`): a term or tactic block cannot
    continue with a command keyword, so Lean ends it there and runs a command. A declaration's command starts at its
    doc comment, attribute (`@[…]`) or modifiers (`noncomputable`, `local`); `open X in` / `set_option o v in` is
    one command with the command it prefixes, and no command before a tactic or term (`open Real in simp`);
    `deriving` starts one only as `deriving instance`; `mutual … end` is one. With `read_header`, the leading
    imports are none."""
    return [(start, text.count("\n", 0, start) + 1) for start in _read_commands(text, read_header)[0]]


def _stray_keyword(source: str) -> str | None:
    """A command keyword inside a bracket of `source` (one command's text, comments blanked), as Lean's term parser
    meets it: `unexpected token 'KW'; expected term`; None when there is none (an attribute list's `instance` is
    none)."""
    strays = _read_commands(source, False)[1]
    return f"unexpected token '{strays[0]}'; expected term" if strays else None


def _read_commands(text: str, read_header: bool) -> tuple[list[int], list[str]]:
    """Where commands start in `text` (character offsets), and the command keywords met inside brackets."""
    masked, docs = blank_comments(text)
    starts: list[int] = []
    strays: list[str] = []
    pending: int | None = None  # where a prefix (doc comment, attribute, modifier, `open X in`) opened a command
    in_mutual = False
    words = _words(text, masked, docs)
    at = 0
    while at < len(words):
        offset, word, depth, attribute_list = words[at]
        at += 1
        scoped = word in ("open", "set_option") and _ends_in(masked, offset) > 0
        if depth > 0:
            if word in COMMAND_KEYWORDS and not attribute_list and not scoped:
                strays.append(word)
        elif not (word in COMMAND_KEYWORDS or word in COMMAND_MODIFIERS or word[0] in "#/@"):
            pending = None  # `open Real in simp`: a tactic's (or term's) prefix, no command
        elif in_mutual:
            in_mutual = word != "end"
        elif word in ("/--", "@[") or word in COMMAND_MODIFIERS or scoped:
            pending = offset if pending is None else pending
            while scoped and at < len(words) and words[at][0] < _ends_in(masked, offset):
                at += 1  # its names and values, up to its `in`
        elif word == "deriving" and not (at < len(words) and words[at][1] == "instance"):
            pass  # a declaration's `deriving C` clause
        elif read_header and word == "import" and not starts:
            pending = None
        else:
            starts.append(offset if pending is None else pending)
            pending, in_mutual = None, word == "mutual"
            if word == "deriving" or (word == "class" and at < len(words) and words[at][1] in ("inductive", "abbrev")):
                at += 1  # `deriving instance`, `class inductive`: one command
    return starts, strays


def _words(text: str, masked: str, docs: list[int]) -> list[tuple[int, str, int, bool]]:
    """The double's own tokens of `text` that can matter for commands, comments and literals skipped: names (a
    `«»` part opens a name or follows a dot: `axiom«x»` is two), `#commands`, doc comments (`/--`) and attribute
    openers (`@[`), each with its bracket depth and whether it stands inside an attribute list (`@[`, `attribute [`).
    `masked`, `docs`: `blank_comments(text)`."""
    doc_starts = set(docs)
    words: list[tuple[int, str, int, bool]] = []
    stack: list[bool] = []  # per open bracket: is it an attribute list
    index = 0
    while index < len(masked):
        char = masked[index]
        found = _WORD.match(masked, index)
        literal = _CHAR_LITERAL.match(masked, index) if char == "'" else None
        if index in doc_starts:
            words.append((index, "/--", len(stack), any(stack)))
            index = _comment_end(text, index)
        elif char == '"':
            index = _string_end(masked, index)
        elif literal is not None:
            index = literal.end()
        elif found is not None:
            if index == 0 or masked[index - 1] != ".":  # `h.def` is no keyword: a field of `h`
                words.append((index, found.group(), len(stack), any(stack)))
            index = found.end()
        else:
            if char in _OPENERS:
                attribute = char == "[" and (masked[index - 1 : index] == "@" or (
                    not stack and bool(words) and words[-1][1] == "attribute"))
                if masked[index - 1 : index] == "@" and char == "[":
                    words.append((index - 1, "@[", len(stack), any(stack)))
                stack.append(attribute)
            elif char in _CLOSERS and stack:
                stack.pop()
            index += 1
    return words


def _string_end(text: str, index: int) -> int:
    """Where the string literal opening at `index` ends (escapes read): after its closing quote, or at the end of
    the text when it is never closed."""
    return _STRING_BODY.match(text, index + 1).end() + 1  # type: ignore[union-attr]  # it matches the empty string


def _ends_in(masked: str, offset: int) -> int:
    """Where the `in` of an `open …`/`set_option …` at `offset` ends when the command is a prefix (`open Real in`),
    on its line; 0 when it is a command of its own."""
    line_end = masked.find("\n", offset)
    found = re.match(r"(?:open|set_option)(?:[ \t]+(?!in(?![\w'!?.]))[^\s]+)+[ \t]+in(?![\w'!?.])",
                     masked[offset : len(masked) if line_end < 0 else line_end])
    return offset + found.end() if found is not None else 0


def _parse_problem(source: str, following: str | None) -> str | None:
    """Lean's parse error for a theorem declaration that never reaches its `:=` at bracket depth 0: a line comment
    swallowed it (the command runs into the next one or to the end of the file), or a bracket is never closed (the
    `:=` inside it is no term); None for a declaration that parses."""
    if re.match(r"(?:theorem|lemma)\b", DECLARATION_PREFIX.sub("", source, count=1)) is None:
        return None
    depth = 0
    for index, char in enumerate(source):
        depth += (char in "([{⟨⦃") - (char in ")]}⟩⦄")
        if depth == 0 and source.startswith(":=", index):
            return None
    unexpected = "end of input" if following is None else f"token '{following}'"
    if depth != 0:
        return "unexpected token ':='; expected term" if ":=" in source else f"unexpected {unexpected}; expected ')'"
    return f"unexpected {unexpected}; {MISSING_ASSIGN}"


def _track_namespaces(source: str, namespaces: list[str]) -> list[str]:
    """The open namespaces ("" for a section) after `source`: `namespace`/`section` opens one, `end` closes one."""
    scope_word = re.match(r"(namespace|section|end)\b\s*(\S*)", source)
    if scope_word is None:
        return namespaces
    if scope_word.group(1) == "end":
        return namespaces[:-1]
    namespaces.append(scope_word.group(2) if scope_word.group(1) == "namespace" else "")
    return namespaces


def _depth0(text: str, needle: str) -> int:
    """Where `needle` first occurs in `text` outside brackets (-1 when never): the double's own bracket reading."""
    depth = 0
    for index, char in enumerate(text):
        depth += (char in "([{⟨⦃") - (char in ")]}⟩⦄")
        if depth == 0 and text.startswith(needle, index) and not (needle == ":" and text.startswith(":=", index)):
            return index
    return -1


def _binder_groups(head: str) -> list[tuple[list[str], str]] | None:
    """The explicit and implicit binders `(x y : T)`, `{n : ℕ}`, `⦃a : α⦄` of a signature's head, nested brackets
    read whole (instance binders `[…]` are skipped: stricter than Lean, which names them `inst✝`); None when the
    head holds anything else."""
    binders: list[tuple[list[str], str]] = []
    index = 0
    while index < len(head):
        if head[index].isspace():
            index += 1
            continue
        if head[index] not in "({⦃[":
            return None
        depth, end = 0, index
        while end < len(head):
            depth += (head[end] in "([{⟨⦃") - (head[end] in ")]}⟩⦄")
            end += 1
            if depth == 0:
                break
        inner = head[index + 1 : end - 1]
        if head[index] != "[":
            colon = _depth0(inner, ":")
            if colon < 0:
                return None
            binders.append((IDENT.findall(inner[:colon]), " ".join(inner[colon + 1 :].split())))
        index = end
    return binders


def definition(source: str, namespace: str) -> tuple[list[str], str | None] | None:
    """A non-theorem declaration's constants (the declared name first) and, when its value is `sorry`, its type
    (an answer slot); None for any other command."""
    found = DEFINITION.match(DECLARATION_PREFIX.sub("", source, count=1))
    if found is None:
        return None
    name = qualify(found.group(2), namespace)
    constants = [name]
    if found.group(1) == "inductive":
        constants += [f"{name}.{ctor}" for ctor in re.findall(r"^\s*\|\s*([^\s(:{\[]+)", source, re.MULTILINE)]
    elif found.group(1) in ("structure", "class"):
        constants.append(f"{name}.mk")
    rest = DECLARATION_PREFIX.sub("", source, count=1)[found.end():]
    assign = _depth0(rest, ":=")
    slot = None
    if assign >= 0 and rest[assign + 2:].strip() in ("sorry", "by sorry", "by\n  sorry"):
        colon = _depth0(rest[:assign], ":")
        binders = rest[:colon].strip() if colon >= 0 else ""
        type_ = " ".join(rest[colon + 1 : assign].split()) if colon >= 0 else "?"
        slot = f"∀ {binders}, {type_}" if binders else type_
    return constants, slot


def registered_namespaces(source: str, namespaces: list[str]) -> set[str]:
    """The namespaces a `namespace X` command registers (Lean's `addScope`: X under the enclosing namespaces, and
    each prefix of it); none for any other command. `namespaces`: the open ones after the command."""
    if not re.match(r"namespace(?![\w'])", source):
        return set()
    full = ".".join(part for part in namespaces if part)
    return namespaces_of({f"{full}._"})


def namespaces_of(names: set[str] | frozenset[str]) -> set[str]:
    """The namespaces Lean registers for these constants (every proper prefix: `A.B.c` → `A`, `A.B`)."""
    parts = [name.split(".") for name in names]
    return {".".join(split[:cut]) for split in parts for cut in range(1, len(split))}


def opened(source: str) -> list[str]:
    """The namespaces an `open` command names (`open scoped X`, `open X in` read alike)."""
    words = source.split()
    if words[:1] != ["open"]:
        return []
    return [word for word in words[1:] if word not in ("scoped", "in") and re.fullmatch(r"[\w.'«»]+", word)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pantograph-version", default="0.3.4", help="the Pantograph version to emulate")
    parser.add_argument("--version", action="store_true", help="print the version and exit (without modules)")
    parser.add_argument("--ready-delay", type=float, default=0.0)
    parser.add_argument("--no-ready", type=int, default=None, help="exit with this code instead of `ready.`")
    parser.add_argument("--stderr-bytes", type=int, default=0, help="write this much to stderr first")
    parser.add_argument("--preamble", default=None, help="a stdout line before `ready.`")
    parser.add_argument("--log", default=None, help="append every request line (raw bytes) to this file")
    parser.add_argument("--starts", default=None, help="append one line per process start to this file")
    parser.add_argument("--env-dump", default=None, help="append this process's environment (a JSON line) here")
    parser.add_argument("--without", action="append", default=[],
                        help="a command this build lacks although its version has it (answered `Unknown command`)")
    parser.add_argument("--closes", action="append", default=[],
                        help="a tactic that closes every goal, cleanly (like `done`; its names still need their scope)")
    parser.add_argument("--mis-scope", action="store_true",
                        help="a broken REPL: `frontend.process {inheritEnv: true}` leaves the scope as it was")
    args, modules = parser.parse_known_args()
    version = PantographVersion.parse(args.pantograph_version)
    if args.env_dump:
        with open(args.env_dump, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(dict(os.environ)) + "\n")
    if args.version:
        if modules:  # `repl Mathlib --version` reads `--version` as a Lean option and fails
            sys.stderr.write("uncaught exception: Options cannot be parsed: invalid configuration option entry, "
                             "it must be of the form '<key> = <value>'\n")
            sys.exit(1)
        print(version)
        return
    if args.starts:
        with open(args.starts, "a") as handle:
            handle.write(f"{os.getpid()}\n")
    if args.stderr_bytes:
        sys.stderr.write("w" * args.stderr_bytes + "\n")
        sys.stderr.flush()
    if args.no_ready is not None:
        sys.stderr.write("error: unknown package 'Mathlib'\n")
        sys.exit(args.no_ready)
    time.sleep(args.ready_delay)
    out = sys.stdout.buffer
    if args.preamble:
        out.write(args.preamble.encode() + b"\n")
    out.write(b"ready.\n")
    out.flush()
    double = Double(out, version, tuple(args.without), tuple(args.closes), args.mis_scope)
    log = open(args.log, "ab") if args.log else None  # noqa: SIM115 - lives as long as the process
    for raw in sys.stdin.buffer:
        if log is not None:
            log.write(raw)
            log.flush()
        line = raw.decode("utf-8").rstrip("\n")
        if not line.strip():
            return
        double.emit(double.handle(line))


if __name__ == "__main__":
    main()

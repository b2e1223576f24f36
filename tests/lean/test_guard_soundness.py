"""The tactic guard and the soundness rules, the latter against the strict double (in this process: the rules are the
subject, not the pipe; tests/lean/test_client.py covers the pipe)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import pytest

from burnqed.config import DEFAULT_DENY, LeanConfig
from burnqed.errors import LeanCrashError, LeanStartError, LeanStatesLostError
from burnqed.lean.env import LeanEnv
from burnqed.lean.guard import TacticGuard, configuration_problem
from burnqed.lean.inprocess import InProcessReplay
from burnqed.lean.soundness import (
    Verdict,
    assemble_proof,
    check_answer,
    check_compile,
    check_path,
    check_proof_text,
    check_root,
    compile_text,
    parse_axioms,
    recheck_passed,
    verify_proof,
)
from burnqed.lean.tactic_starts import BEFORE_A_TACTIC
from burnqed.records.replies import (
    CompileMessage,
    CompileResult,
    CompileUnit,
    Goal,
    RootInfo,
    SketchResult,
    TacticKind,
    TacticResult,
)
from burnqed.records.theorem import Theorem
from burnqed.text.completion import split_proof
from burnqed.text.sketch import SORRY_OUTSIDE_HOLE, Sketch
from leankit.recheck import recheck_command
from leankit.text import read_as_lean
from tests.doubles.line_servers import DoubleServer

GUARD = TacticGuard.from_config(LeanConfig())


@pytest.mark.parametrize(
    "tactic",
    [
        "sorry", "admit", "exact cheat", "native_decide", "simp; sorry",
        "run_tac do IO.println \"x\"", "run_cmd Lean.logInfo \"x\"", "#eval IO.Process.run {cmd := \"sh\"}",
        "exact (unsafeCast 0 : False)", "unsafe def x := 1", "set_option maxHeartbeats 0 in simp",
        "set_option maxRecDepth 100000 in decide", "import Mathlib", "open System in exact x",
        "exact System.FilePath.mk \"/\"", "@[implemented_by foo] def bar := 1", "axiom cheat' : False",
        "", "   ", "a" * 5000, "simp\x00",
        # Metaprograms that add an axiom, and the compiler-trusting routes (../shared/peers.md).
        "exact (by_elab do Lean.addDecl (.axiomDecl {name := `f, levelParams := [], type := .const `False [], "
        "isUnsafe := false}); return .const `f [])",
        "exact (by_elab return Lean.mkConst ``True.intro)",
        "exact Lean.Elab.Term.elabTerm x none", "exact (Lean.Meta.mkSorry e false)", "apply Meta.mkAppM",
        "exact addDecl d", "exact Lean.Environment.addDecl env d",
        "decide +native", "decide (config := { native := true })", "exact Lean.ofReduceBool a b h",
        "exact ofReduceNat h", "exact Lean.trustCompiler", "bv_decide", "set_option debug.skipKernelTC true in rfl",
        "attribute [simp] Nat.add_comm in simp", "attribute [local instance] foo in exact x",
        "@[csimp] theorem x : f = g := rfl", "attribute [csimp] f_eq_g",
        "macro \"t\" : tactic => `(tactic| trivial)", "syntax \"t\" : tactic", "elab \"t\" : tactic => pure ()",
        "macro_rules | `(tactic| trivial) => `(tactic| sorry)", "local notation \"π\" => 3", "notation \"x\" => 1",
        "local infixl:65 \" + \" => HSub.hSub", "simp; open Lean in exact x", "exact (open Classical in em p)",
        "#print axioms x", "#check x", "simp\n  theorem other : False := by trivial", "simp\nend",
        "set_option allowUnsafeReducibility true in rfl",
        "set_option linter.unusedVariables false in simp",  # no option is set inside a proof
    ],
)
def test_guard_refuses(tactic: str):
    assert GUARD.check(tactic) is not None
    refusal = GUARD.refusal(tactic)
    assert refusal is not None and refusal.kind is TacticKind.REFUSED


@pytest.mark.parametrize(
    "tactic",
    [
        "linarith", "nlinarith [sq_nonneg (a - b), sq_nonneg (a + b)]", "intro x hx", "simp [Finset.sum_range_succ]",
        "norm_num [Nat.Prime] at h₀ ⊢", "rcases h with ⟨x, hx⟩ | h", "constructor\n· linarith\n· positivity",
        "exact fun x => by simpa using x", "omega", "decide!", "decide (config := { kernel := true })",
        "exact «h₀».le", "simp [«Nat».add_comm]",
        "have h : (2 : ℝ) ≤ √5 := by\n  rw [Real.le_sqrt] <;> norm_num", "decide", "unfold sorryAx_like",
        # Honest tactics that sit close to a refused pattern.
        "nlinarith [sq_nonneg (a - b)]", "simp [Nat.add_comm]", "norm_num", "exact fun h => h", "decide +kernel",
        "by_contra h", "by_cases h : x ≤ 0", "exact isOpen_ball", "exact Metric.isOpen_ball", "positivity",
        "interval_cases x <;> simp_all", "induction n with\n| zero => simp\n| succ n ih => omega",
        "field_simp", "ring_nf", "push_cast", "exact_mod_cast h", "obtain ⟨k, hk⟩ := h", "use 2",
        "refine ⟨?_, ?_⟩ <;> linarith", "simp only [List.sum_cons, #[1, 2].size]", "exact h.elim",
        "apply Finset.sum_congr rfl", "rw [show (4 : ℝ) = 2 * 2 by norm_num]", "exact (mul_pos ha hb).le",
    ],
)
def test_guard_allows_ordinary_tactics(tactic: str):
    assert GUARD.check(tactic) is None


# The exploits of issue 24: each proves anything (or overflows a stack a worker shares) and must be refused
# however it spells the option.
KERNEL_OFF = (
    "exfalso; set_option «debug».skipKernelTC true in decide +kernel",
    "set_option «debug».skipKernelTC true in decide +kernel",
    "set_option «debug».«skipKernelTC» true in decide (config := { kernel := true })",
    "set_option debug.skipKernelTC true in decide!",
    "exact (set_option «debug».skipKernelTC true in by decide +kernel)",
    "(exfalso\n  set_option «debug».skipKernelTC true in\n  decide +kernel)",
)
RESOURCE_OPTIONS = (
    "set_option «maxRecDepth» 100000 in simp",
    "set_option maxRecDepth 100000 in decide",
    "set_option «maxHeartbeats» 0 in nlinarith [sq_nonneg x]",
    "set_option synthInstance.maxHeartbeats 0 in infer_instance",
    "set_option «synthInstance».«maxSize» 100000 in infer_instance",
    "set_option exponentiation.threshold 100000 in norm_num",
)


SET_OPTION = "holds the command keyword 'set_option': Lean would run a command of its own there"


@pytest.mark.parametrize("tactic", KERNEL_OFF + RESOURCE_OPTIONS)
def test_guard_refuses_options_set_inside_a_proof_however_escaped(tactic: str):
    assert GUARD.check(tactic) == SET_OPTION
    assert TacticGuard([]).check(tactic) == SET_OPTION  # whatever lean.deny says


def test_read_as_lean_drops_identifier_escapes():
    assert read_as_lean("set_option «debug».«skipKernelTC» true") == "set_option debug.skipKernelTC true"
    assert read_as_lean("exact «h₀ x».le") == "exact h₀ x.le"
    assert read_as_lean("simp [a, b]") == "simp [a, b]"


# For every rule of the default deny list, a tactic that ONLY that rule refuses: deleting any one rule lets its
# case through, so no rule is tested only through another (the built-in rules included).
ONLY_BY: dict[str, str] = {
    r"\bsorry\b": "exact sorry",
    r"\badmit\b": "admit",
    r"\bcheat\b": "exact cheat",
    r"\bnative_decide\b": "native_decide",
    r"\+native\b": "decide +native",
    r"\bnative\s*:=": "decide (config := { native := true })",
    r"\bofReduce(Bool|Nat)\b": "exact ofReduceBool a b h",
    r"\btrustCompiler\b": "exact trustCompiler",
    r"\bbv_decide\b": "bv_decide",
    r"\brun_tac\b": "run_tac pure ()",
    r"\bIO\.": "exact IO.println",
    r"\bSystem\.": "exact System.FilePath.mk x",
    r"\bunsafe": "exact unsafeCast x",
    r"\bimplemented_by\b": "simp [implemented_by]",
    r"\bextern\b": "simp [extern]",
    r"\bcsimp\b": "simp [csimp]",
    r"\bby_elab\b": "exact (by_elab pure x)",
    r"\b(Lean\.)?(Elab|Meta)\.": "apply Meta.mkAppM",
    r"\bLean\.(Environment|Kernel|Compiler|Parser|Syntax|Macro|Declaration|IR|Core)\b": "exact Lean.Kernel.isDefEq",
    r"\b(addDecl|addAndCompile|axiomDecl|modifyEnv|setEnv)\b": "exact addDecl d",
    r"\bdebug\.": "exact (withOptions (·.setBool `«debug».skipKernelTC true) x)",
    r"\ballowUnsafeReducibility\b": "exact (withOptions (·.setBool `allowUnsafeReducibility true) x)",
    r"\binclude_str\b": "exact (include_str ⟨\"x\"⟩ : String)",
    r"\beval%": "exact (eval% 2 ^ 10 : ℕ)",
    r"\b(plausible|slim_check)\b": "plausible",
    r"\bwith_panel_widgets\b": "with_panel_widgets [GoalTypePanel] simp",
    r"\bbv_check\b": "bv_check \"proof.lrat\"",
    r"\bpolyrith\b": "polyrith",
    r"\bsleep\b": "sleep 100",
    r"\bdbg(_trace|Trace\w*|Sleep|StackTrace)\b|\b(println|unreachable|assert)!|\bpanic|\b(timeit|allocprof)\b"
    r"|\bTask\b": "exact dbgSleep 4000000000 fun _ => h",
    r"\bLean\.(Lsp|Server|JsonRpc|Language)\b|\b(save|read)ModuleData\w*|\bwriteModule\b|\bStd\.Internal\b"
    r"|\bLake\.": "exact Lean.Lsp.Ipc.runWith ⟨\"sh\"⟩ #[] (pure ())",
}


def test_every_default_rule_has_a_case_only_it_refuses():
    assert list(ONLY_BY) == list(DEFAULT_DENY)  # a new rule needs its own case here


@pytest.mark.parametrize("rule", list(ONLY_BY))
def test_each_rule_alone_refuses_its_case(rule: str):
    case = ONLY_BY[rule]
    assert GUARD.check(case) == f"matches deny pattern {rule!r}"
    without = TacticGuard([other for other in DEFAULT_DENY if other != rule])
    assert without.check(case) is None, f"{case!r} is also refused by another rule: {without.check(case)}"


# The rules the default deny list held until the command-token rule was built in (issue 67), with the cases each
# refused: every one is refused by that rule alone, with no deny list at all, so the regexes went. The line-anchored
# and blank-wanting ones also missed spellings Lean reads as commands (`2 open Real`, `axiom«x»`, `instance(`).
COVERED_BY_THE_COMMAND_RULE: dict[str, tuple[tuple[str, str], ...]] = {
    r"\brun_cmd\b": (("run_cmd pure ()", "run_cmd"),),
    r"\brun_elab\b": (("run_elab pure ()", "run_elab"),),
    r"\brun_meta\b": (("run_meta pure ()", "run_meta"),),
    r"#[A-Za-z]": (("#check x", "#check"), ("simp; #eval IO.println 1", "#eval"), ("#exit", "#exit")),
    r"@\[": (("exact @[reducible] x", "@["), ("@[implemented_by foo] def bar := 1", "@[")),
    r"\b(macro_rules|elab_rules|declare_syntax_cat|macro|syntax|elab|notation)\b": (
        ('notation "x" => 1', "notation"), ("macro \"t\" : tactic => `(tactic| trivial)", "macro"),
        ("syntax \"t\" : tactic", "syntax"), ("elab \"t\" : tactic => pure ()", "elab"),
        ("macro_rules | `(tactic| trivial) => `(tactic| sorry)", "macro_rules")),
    r"\b(local|scoped)\s+(infix|infixl|infixr|prefix|postfix)\b": (
        ('local infixl:65 " + " => HSub.hSub', "local"), ('scoped prefix:max "√" => Real.sqrt', "scoped")),
    r"\battribute\s*\[": (("simp; attribute [simp] foo in simp", "attribute"),
                            ("attribute [local instance] foo in exact x", "attribute")),
    r"(?<![\w.'])open\b[^\n]*\bin\b": (("simp; open Classical in exact em p", "open"),
                                        ("exact (open Classical in em p)", "open")),
    r"^\s*(import|open|namespace|section|end|variable|universe|initialize|builtin_initialize)\b": (
        ("simp\nend", "end"), ("import Mathlib", "import"), ("simp\n  namespace X", "namespace"),
        ("simp\nsection", "section"), ("simp\nvariable (x : ℕ)", "variable"), ("simp\nuniverse u", "universe"),
        ("simp\ninitialize pure ()", "initialize")),
    r"^\s*(theorem|lemma|example|abbrev|structure|inductive|class|mutual)\b": (
        ("simp\n  theorem other : 1 = 1 := rfl", "theorem"), ("simp\nlemma l : True := trivial", "lemma"),
        ("simp\nabbrev x : ℕ := 1", "abbrev"), ("simp\nclass C", "class"), ("simp\nmutual", "mutual")),
    r"\b(axiom|opaque|instance|def)\s": (("simp; instance foo : Inhabited Nat := ⟨0⟩", "instance"),
                                        ("axiom cheat' : False", "axiom"), ("simp\nopaque o : ℕ", "opaque"),
                                        ("unsafe def x := 1", "unsafe")),
    r"\bset_option\b": (("set_option «maxRecDepth» 100000 in simp", "set_option"),),
}


@pytest.mark.parametrize(("rule", "case", "keyword"), [
    (rule, case, keyword) for rule, cases in COVERED_BY_THE_COMMAND_RULE.items() for case, keyword in cases])
def test_the_command_rule_refuses_every_case_of_the_rules_it_replaced(rule: str, case: str, keyword: str):
    import re

    assert re.search(rule, read_as_lean(case), re.MULTILINE) is not None  # the case is the old rule's
    assert rule not in DEFAULT_DENY
    assert TacticGuard([]).check(case) == (
        f"holds the command keyword {keyword!r}: Lean would run a command of its own there")


# Issue 67: a command smuggled after a term or a tactic, in spellings the line-anchored or blank-wanting patterns
# missed (no blank, `«»`, a priority, after a term on the same line, on the next line indented), and `sorryAx`.
SMUGGLED_COMMANDS: dict[str, str] = {
    "instance(priority:=high)evil:HAdd ℕ ℕ ℕ:=⟨fun a b=>a*b⟩": "instance",
    'infixl:65 (priority := high) " + " => HMul.hMul': "infixl",
    "axiom«x» : False": "axiom",
    "def«x» : ℕ := 1": "def",
    "instance: Add ℕ := ⟨(· * ·)⟩": "instance",
    'notation3 "ONE" => 1': "notation3",
    'binder_predicate x " >>> " y:term => `($x > $y)': "binder_predicate",
    "unif_hint (n : ℕ) where |- n + 0 =?= n": "unif_hint",
    "export Nat (add_comm)": "export",
    "alias two_eq := Nat.add_comm": "alias",
    "irreducible_def two : ℕ := 2": "irreducible_def",
    "open Real": "open",
    "namespace Nat": "namespace",
    "end Nat": "end",
    "variable (x : ℕ)": "variable",
    "deriving instance Repr for Nat": "deriving",
}
PLACES = {
    "same line": "exact 2 {}",
    "next line indented": "exact 2\n  {}",
    "after a tactic": "norm_num; {}",
}


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("command", list(SMUGGLED_COMMANDS))
def test_a_command_in_a_tactic_is_refused_in_every_spelling_whatever_the_deny_list(command: str, place: str):
    tactic = PLACES[place].format(command)
    reason = f"holds the command keyword {SMUGGLED_COMMANDS[command]!r}: Lean would run a command of its own there"
    assert GUARD.check(tactic) == reason
    assert TacticGuard([]).check(tactic) == reason
    # In a whole proof (each top-level tactic checked on the path) and in a sketch's skeleton.
    proof = split_proof(f"norm_num\n{tactic}", split_have=False)
    assert check_path(proof, TacticGuard([])).reason.endswith(f"is denied: {reason}")
    sketch = f"have h : 1 + 1 = 2 := by sorry\n{tactic}"
    assert TacticGuard([]).check_sketch(sketch) == f"the sketch's skeleton {reason}"


SORRY_AX = "names `sorryAx`, what `sorry` elaborates to"


# Each spelling, and how a sketch that holds it is refused: by the sketch's own rule (no `sorry`, `admit` or `sorryAx`
# outside a hole) or, where that misses the spelling, by the guard's.
SORRY_AX_SPELLINGS = {
    "exact sorryAx False": SORRY_OUTSIDE_HOLE,
    "exact @sorryAx _ false": SORRY_OUTSIDE_HOLE,
    "exact «sorryAx» _ _": SORRY_OUTSIDE_HOLE,
    "exact _root_.sorryAx _ true": f"the sketch's skeleton {SORRY_AX}",
    "have h : False := sorryAx False\n  exact h.elim": SORRY_OUTSIDE_HOLE,
}


@pytest.mark.parametrize("tactic", list(SORRY_AX_SPELLINGS))
def test_sorry_ax_is_refused_whatever_the_deny_list(tactic: str):
    assert GUARD.check(tactic) == SORRY_AX
    assert TacticGuard([]).check(tactic) == SORRY_AX
    assert TacticGuard([]).check_sketch(f"have h : 1 = 1 := by sorry\n{tactic}") == SORRY_AX_SPELLINGS[tactic]


def test_an_honest_sketch_comes_back_read():
    sketch = TacticGuard([]).check_sketch("have h : 1 + 1 = 2 := by sorry\nexact h")
    assert isinstance(sketch, Sketch) and sketch.skeleton == "have h : 1 + 1 = 2\nexact h"
    assert GUARD.sketch_refusal("have h : 1 + 1 = 2 := by sorry\nexact h") == sketch
    assert GUARD.sketch_refusal("have h : 1 + 1 = 2 := by sorry\nexact 2 open Real") == SketchResult(
        TacticKind.REFUSED, route="", errors=("refused by the tactic guard: the sketch's skeleton holds the command "
                                              "keyword 'open': Lean would run a command of its own there",))


def test_a_sketch_is_read_as_written_before_its_skeleton_drops_its_comments():
    """`<--run_cmd` is a comment to the skeleton's reader and code to a Lean whose `<-` is a token."""
    refused = GUARD.check_sketch('have h : 1 = 1 := by sorry\nexact x <--run_cmd IO.println "x"')
    assert isinstance(refused, str) and refused.startswith("the sketch has a quote or comment opener glued to a symbol")


def test_a_guard_without_the_built_in_rules_exists_only_to_check_the_nets_under_it():
    assert TacticGuard([], builtin=False).check("simp; instance : Add ℕ := ⟨(· * ·)⟩") is None
    assert TacticGuard([], builtin=False).check("exact sorryAx False") is None
    assert TacticGuard(DEFAULT_DENY, builtin=False).check("exact sorry") == f"matches deny pattern {DEFAULT_DENY[0]!r}"
    assert TacticGuard.from_config(LeanConfig(deny=[])).builtin  # never off from a configuration


@pytest.mark.parametrize("tactic", [
    "exact foo.def", "exact Nat.instance_x h", "exact inferInstance", "infer_instance", "exact show 1 = 1 from rfl",
    "exact fun x => x", "have h : 1 = 1 := rfl", "exact f x where f := id", "exact «def»", "unfold sorryAx_like",
    "exact Foo.sorryAx_of h", "simp [Set.mem_def, Nat.instAdd]", "exact (inferInstance : Add ℕ)",
    "calc 1 = 1 := rfl\n  _ = 1 := rfl", "simp only [List.sum_cons, #[1, 2].size]", "simp -- #check, open, end",
    'exact "open Real"', "refine ⟨fun h => ?_, fun h => ?_⟩", "haveI : Fact (1 < 2) := ⟨by norm_num⟩",
])
def test_honest_tactics_near_a_command_word_pass(tactic: str):
    assert GUARD.check(tactic) is None


THEOREM = Theorem(name="t", statement="p", header="import Mathlib")


def test_assemble_proof_indents_multiline_tactics():
    text = assemble_proof(THEOREM, ["intro x", "constructor\n· simp\n· ring"])
    assert text == "import Mathlib\n\ntheorem t : p := by\n  intro x\n  constructor\n  · simp\n  · ring\n"
    assert assemble_proof(Theorem(name="n"), ["simp"]) is None


def test_compile_text_drops_imports_keeps_open_and_set_option_and_asks_for_axioms_then_rechecks():
    header = "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\nopen BigOperators Real Nat"
    proof = assemble_proof(Theorem(name="t₁", statement="p", header=header), ["simp"])
    assert proof is not None
    compiled = compile_text(proof, "t₁", header)
    assert compiled.text == (
        "set_option maxHeartbeats 400000\n\nopen BigOperators Real Nat\n\ntheorem t₁ : p := by\n  simp\n\n"
        "#print axioms t₁\n\n" + recheck_command("t₁")
    )
    assert compiled.text.encode()[compiled.print_start:].startswith(b"#print axioms t\xe2\x82\x81\n\nrun_cmd ")
    assert compiled.text.encode()[compiled.recheck_start:] == recheck_command("t₁").encode()


def test_the_recheck_re_adds_the_theorems_local_closure_with_the_kernel_on():
    text = recheck_command("t₁")
    # One command (Lean splits units at column-0 commands), naming the theorem by a resolved name literal.
    assert text.startswith("run_cmd Lean.Elab.Command.liftCoreM do\n")
    assert all(line.startswith("  ") for line in text.splitlines()[1:])
    assert "#[``t₁]" in text
    # Only constants this file added are re-added, dependencies first, renamed, with the kernel on.
    assert "(env.getModuleIdxFor? used).isNone" in text
    assert "`_burnqed_recheck ++ name" in text and "Lean.mkConst (freshName name) levels" in text
    assert "opts.setBool `debug.skipKernelTC false" in text and "setBool `Elab.async false" in text
    assert "(Lean.addDecl decl)" in text
    assert 'let report : String := "burnqed kernel recheck: t₁ ok (" ++ Nat.repr infos.size ++ " constants)"' in text
    assert 'recheck: a\\"b ok (' in recheck_command('a"b')  # a Lean string literal, whatever the name


@pytest.mark.parametrize(
    ("info", "ok"),
    [
        (RootInfo(False, False, False, "⋯"), True),
        (RootInfo(True, False, False, "sorry"), False),
        (RootInfo(False, True, False, "⋯"), False),
        (RootInfo(False, False, True, "fun x => ?m.1"), False),
        # Pantograph prints no root while the root is unassigned (and then every flag is false).
        (RootInfo(False, False, False, None), False),
    ],
)
def test_check_root(info: RootInfo, ok: bool):
    assert check_root(info).ok is ok


TEXT = compile_text("open Real\n\ntheorem t : p := by\n  simp\n", "t", "open Real")
OPEN, THM = (0, 11), (11, TEXT.print_start)
PRINT, CHECK = (TEXT.print_start, TEXT.recheck_start), (TEXT.recheck_start, len(TEXT.text.encode()))
REPORT = CompileMessage("information", "'t' depends on axioms: [propext, Classical.choice, Quot.sound]")
CHECKED = CompileMessage("information", "burnqed kernel recheck: t ok (2 constants)")
KERNEL = CompileMessage("error", "(kernel) declaration type mismatch, '_burnqed_recheck.t.proof_1' has type")


def info(text: str) -> CompileMessage:
    return CompileMessage("information", text)


def units(*specs: tuple[tuple[int, int], tuple[CompileMessage, ...], tuple[str, ...] | None]) -> CompileResult:
    return CompileResult(tuple(CompileUnit(b[0], b[1], m, c) for b, m, c in specs))


def good(printed: tuple[CompileMessage, ...] = (REPORT,), checked: tuple[CompileMessage, ...] = (CHECKED,),
         declared: tuple[str, ...] | None = ("t",)) -> CompileResult:
    return units((OPEN, (), ()), (THM, (), declared), (PRINT, printed, ()), (CHECK, checked, ()))


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        (good(), ""),
        (units((OPEN, (), ()), (THM, (), ("t", "t.proof_1")),
               (PRINT, (info("'t' does not depend on any axioms\n"),), ()), (CHECK, (CHECKED,), ())), ""),
        (CompileResult(()), "no compilation units"),
        (good(printed=(CompileMessage("error", "unknown constant 't'"),)), "does not compile"),
        (units((OPEN, (), ()), (THM, (CompileMessage("warning", "x", kind="hasSorry"),), ("t",)),
               (PRINT, (REPORT,), ()), (CHECK, (CHECKED,), ())), "only with sorry"),
        (units((OPEN, (), ()), (THM, (CompileMessage("warning", "declaration uses `sorry`"),), ("t",)),
               (PRINT, (REPORT,), ()), (CHECK, (CHECKED,), ())), "only with sorry"),
        (good(declared=None), "lists no newConstants"),
        (good(declared=("u",)), "does not declare t"),
        # The pinned shape: the header's one command, the theorem, `#print axioms`, the recheck; no unit more or less.
        (units((THM, (), ("t",)), ((PRINT[0] - 5, PRINT[0]), (), ("smuggled",)), (PRINT, (REPORT,), ()),
               (CHECK, (CHECKED,), ())), "Lean's unit 1 starts at byte 11, where the pinned shape starts the header's "
         "command 1 at byte 0: the text was not split as written"),
        (units((OPEN, (), ()), (THM, (), ("t",)), ((PRINT[0] - 5, PRINT[0]), (), ("smuggled",)),
               (PRINT, (REPORT,), ()), (CHECK, (CHECKED,), ())),
         "Lean reports 5 compilation units where the file's pinned shape has 4 (the index header's 1 commands, the "
         "theorem, `#print axioms` and the kernel recheck): a command the header does not have was run"),
        (units((THM, (), ("t",)), (PRINT, (REPORT,), ()), (CHECK, (CHECKED,), ())),
         "Lean reports 3 compilation units where the file's pinned shape has 4"),
        (units((OPEN, (), ()), (THM, (), ("t",)), (PRINT, (REPORT,), ())), "Lean reports 3 compilation units"),
        (units((PRINT, (REPORT,), ()), (CHECK, (CHECKED,), ())), "Lean reports 2 compilation units"),
        (units((OPEN, (), ()), ((12, THM[1]), (), ("t",)), (PRINT, (REPORT,), ()), (CHECK, (CHECKED,), ())),
         "Lean's unit 2 starts at byte 12, where the pinned shape starts the theorem at byte 11"),
        (units((OPEN, (), ()), (THM, (), ("t",)), ((PRINT[0] + 1, PRINT[1]), (REPORT,), ()), (CHECK, (CHECKED,), ())),
         f"Lean's unit 3 starts at byte {PRINT[0] + 1}, where the pinned shape starts `#print axioms` at byte "
         f"{PRINT[0]}"),
        (units((OPEN, (), ()), (THM, (), ("t",)), (PRINT, (REPORT,), ()), ((CHECK[0] - 1, CHECK[1]), (CHECKED,), ())),
         f"Lean's unit 4 starts at byte {CHECK[0] - 1}, where the pinned shape starts the kernel recheck at byte "
         f"{CHECK[0]}"),
        (good(printed=()), "no `#print axioms t` report"),
        (good(printed=(REPORT, REPORT)), "no `#print axioms t` report"),
        (good(printed=(CompileMessage("warning", REPORT.text),)), "no `#print axioms t` report"),
        (good(printed=(info("'u' depends on axioms: [propext]"),)), "no `#print axioms t` report"),
        (good(printed=(info("'t' depends on axioms: [propext, sorryAx]"),)),
         "beyond Classical.choice, Quot.sound, propext: sorryAx"),
        (good(printed=(info("'t' depends on axioms: [propext,\n Lean.ofReduceBool,\n smuggled_false]"),)),
         "Lean.ofReduceBool, smuggled_false"),
        # The kernel recheck: its one positive report, or nothing counts.
        (good(checked=(KERNEL,)), "does not compile: (kernel) declaration type mismatch"),
        (good(checked=()), "no kernel recheck report for t"),
        (good(checked=(CHECKED, info("more"))), "no kernel recheck report for t"),
        (good(checked=(CompileMessage("warning", CHECKED.text),)), "no kernel recheck report for t"),
        (good(checked=(info("burnqed kernel recheck: u ok (2 constants)"),)), "no kernel recheck report for t"),
        (good(checked=(info("burnqed kernel recheck: t ok (0 constants)"),)), "no kernel recheck report for t"),
        (good(checked=(info("burnqed kernel recheck: t failed (2 constants)"),)), "no kernel recheck report for t"),
        (good(checked=(REPORT,)), "no kernel recheck report for t"),
    ],
)
def test_check_compile_needs_positive_evidence(result: CompileResult, reason: str):
    verdict = check_compile(result, TEXT)
    assert verdict.ok is (reason == "")
    assert reason in verdict.reason


@pytest.mark.parametrize(
    ("text", "axioms"),
    [
        ("'t' depends on axioms: [propext, Classical.choice, Quot.sound]",
         ("propext", "Classical.choice", "Quot.sound")),
        ("'t' does not depend on any axioms", ()),
        ("`t` depends on axioms: [propext]", ("propext",)),
        ("'t'' depends on axioms: [propext]", None),
        ("'t' depends on axioms: [propext] and more", None),
        ("trace: 't' does not depend on any axioms", None),
    ],
)
def test_parse_axioms(text: str, axioms: tuple[str, ...] | None):
    assert parse_axioms(text, "t") == axioms
    assert parse_axioms("'t'' does not depend on any axioms", "t'") == ()


async def run_path(lean: LeanEnv, theorem: Theorem, tactics: list[str], compile: bool = True) -> tuple[bool, str]:
    state = await lean.start_goal(expr=theorem.statement)
    result = TacticResult(TacticKind.ERROR)
    for tactic in tactics:
        result = await lean.tactic(state, tactic)
        if result.state_id is not None:
            state = result.state_id
    verdict = await verify_proof(lean, theorem, tactics, result, GUARD, compile=compile, index_header=theorem.header)
    return verdict.ok, verdict.reason


@pytest.mark.parametrize(
    ("tactics", "statement", "ok", "reason"),
    [
        (["intro x", "done"], "p", True, ""),
        (["intro x", "sorry"], "p", False, "sorry"),
        (["intro x", "unsafe"], "p", False, "unsafe"),
        (["intro x", "bullet"], "p", False, "metavariables"),
        (["intro x", "nogoals"], "p", False, "did not close all goals (error)"),
        (["intro x", "nullstate"], "p", False, "did not close all goals (error)"),
        (["intro x", "parse"], "p", False, "did not close all goals (parse_error)"),
        (["intro x", "strmsg"], "p", False, "did not close all goals"),
        (["intro x"], "p", False, "did not close all goals (success)"),
        (["exact cheat", "done"], "p", False, "denied"),
        (["intro x", "done"], "FAILCOMPILE p", False, "does not compile: unsolved goals"),
    ],
)
def test_false_finishes_never_count(tactics: list[str], statement: str, ok: bool, reason: str):
    theorem = Theorem(name="t", statement=statement)

    got_ok, got_reason = asyncio.run(run_path(InProcessReplay(DoubleServer("0.3.4")), theorem, tactics))
    assert got_ok is ok
    assert reason in got_reason


def test_verification_survives_a_crash_during_compile():
    theorem = Theorem(name="t", statement="p")

    class CrashOnCompile(InProcessReplay):
        async def compile(self, text: str, timeout_s: float | None = None) -> CompileResult:
            raise LeanCrashError("Lean worker was killed by signal 9 (exit 137)")

    ok, reason = asyncio.run(run_path(CrashOnCompile(DoubleServer("0.3.4")), theorem, ["done"]))
    assert not ok
    assert reason.startswith("verification failed")


def test_messages_without_text_do_not_break_reasons():
    result = units((OPEN, (CompileMessage(severity="error", text=""),), ()), (THM, (), ("t",)), (PRINT, (REPORT,), ()),
                   (CHECK, (CHECKED,), ()))
    verdict = check_compile(result, TEXT)
    assert (verdict.ok, verdict.reason) == (False, "the proof text does not compile: ")
    assert TacticResult(TacticKind.ERROR, errors=("",)).reason == "error"


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("burnqed kernel recheck: t ok (1 constants)", True),
        ("burnqed kernel recheck: t ok (12 constants)\n", True),
        ("burnqed kernel recheck: t ok (0 constants)", False),
        ("burnqed kernel recheck: t' ok (1 constants)", False),
        ("burnqed kernel recheck: t ok (1 constants) and more", False),
        ("trace: burnqed kernel recheck: t ok (1 constants)", False),
        ("", False),
    ],
)
def test_recheck_passed(text: str, ok: bool):
    assert recheck_passed(text, "t") is ok


def test_the_guard_bounds_length_inclusively_and_lets_allowed_tactics_through_unrefused():
    assert GUARD.check("a" * 4000) is None and GUARD.refusal("a" * 4000) is None
    assert GUARD.check("a" * 4001) == "4001 characters, over the cap of 4000 (lean.max_tactic_chars)"
    assert GUARD.check(" \n\t") == "empty tactic"
    assert GUARD.check("simp\x1b[0m") == "tactic contains control characters"


def test_an_empty_path_is_no_proof():
    assert check_path([], GUARD) == Verdict(False, "empty proof")
    assert check_path(["simp", "exact cheat"], GUARD).reason.startswith("tactic 'exact cheat' on the path is denied")
    assert check_path(["simp"], GUARD).ok


class ScriptedEnv:
    """A `LeanEnv` for the verification rules alone: a fixed root report and compile reply (or failure)."""

    def __init__(self, info: RootInfo | Exception, compiled: CompileResult | Exception) -> None:
        self.info, self.compiled = info, compiled
        self.texts: list[str] = []

    generation = 1

    async def start_goal(self, expr: str | None = None, copy_from: str | None = None) -> int:
        raise AssertionError("not used")

    async def start_theorem(self, header: str | None, declaration: str) -> int:
        raise AssertionError("not used")

    async def tactic(self, state_id: int, tactic: str, goal_id: int | None = None) -> TacticResult:
        raise AssertionError("not used")

    async def goals(self, state_id: int) -> tuple[Goal, ...]:
        raise AssertionError("not used")

    async def delete(self, state_ids: Sequence[int]) -> None:
        raise AssertionError("not used")

    async def root_info(self, state_id: int) -> RootInfo:
        if isinstance(self.info, Exception):
            raise self.info
        return self.info

    async def compile(self, text: str, timeout_s: float | None = None) -> CompileResult:
        self.texts.append(text)
        if isinstance(self.compiled, Exception):
            raise self.compiled
        return self.compiled


DONE = TacticResult(TacticKind.SUCCESS, state_id=3)
ROOT_OK = RootInfo(False, False, False, "⋯")
PROVED = Theorem(name="t", statement="p", header="open Real")


def verdict_of(env: ScriptedEnv, *, final: TacticResult = DONE, compile: bool = True,
               theorem: Theorem = PROVED) -> Verdict:
    return asyncio.run(verify_proof(env, theorem, ["simp"], final, GUARD, compile=compile,
                                    index_header=theorem.header))


def test_verify_proof_counts_only_a_clean_compile_of_the_text_it_assembled():
    env = ScriptedEnv(ROOT_OK, good())
    verdict = verdict_of(env)
    assert (verdict.ok, verdict.verified, verdict.reason) == (True, True, "")
    assert env.texts == [TEXT.text] and verdict.proof == "open Real\n\ntheorem t : p := by\n  simp\n"
    # By default the compile is part of the verification.
    by_default = asyncio.run(verify_proof(ScriptedEnv(ROOT_OK, good()), PROVED, ["simp"], DONE, GUARD,
                                          index_header="open Real"))
    assert by_default.verified


@pytest.mark.parametrize(
    ("env", "final", "compile", "theorem", "ok", "reason"),
    [
        (ScriptedEnv(ROOT_OK, good(checked=(KERNEL,))), DONE, True, PROVED, False, "(kernel) declaration type"),
        (ScriptedEnv(ROOT_OK, LeanCrashError("killed")), DONE, True, PROVED, False, "verification failed: killed"),
        (ScriptedEnv(LeanCrashError("gone"), good()), DONE, True, PROVED, False, "verification failed: gone"),
        (ScriptedEnv(RootInfo(False, False, True, "?m"), good()), DONE, True, PROVED, False, "metavariables"),
        (ScriptedEnv(ROOT_OK, good()), TacticResult(TacticKind.SUCCESS, state_id=3, has_unsafe=True), True, PROVED,
         False, "unsafe code in the closing step"),
        (ScriptedEnv(ROOT_OK, good()), DONE, True, Theorem(name="t"), False, "no statement to restate"),
        # search.verify off: ok but not verified, and only with both sorry reports present.
        (ScriptedEnv(ROOT_OK, good()), DONE, False, PROVED, True, ""),
        (ScriptedEnv(RootInfo(False, False, False, "⋯", flags_reported=False), good()), DONE, False, PROVED, False,
         "reports no sorry flags"),
        (ScriptedEnv(ROOT_OK, good()), TacticResult(TacticKind.SUCCESS, state_id=3, flags_reported=False), False,
         PROVED, False, "reports no sorry flags"),
    ],
)
def test_verify_proof_rules(env: ScriptedEnv, final: TacticResult, compile: bool, theorem: Theorem, ok: bool,
                            reason: str):
    verdict = verdict_of(env, final=final, compile=compile, theorem=theorem)
    assert verdict.ok is ok and reason in verdict.reason
    assert verdict.verified is (ok and compile)
    if not compile:
        assert env.texts == []  # search.verify off: Lean is never asked to compile


@pytest.mark.parametrize("error", [LeanStatesLostError("replaced"), LeanStartError("no repl")])
def test_verify_proof_raises_what_says_nothing_about_the_proof(error: Exception):
    with pytest.raises(type(error)):
        verdict_of(ScriptedEnv(error, good()))


def test_check_proof_text_rechecks_a_stored_proof_and_never_turns_a_failure_into_a_pass():
    proof = "open Real\n\ntheorem t : p := by\n  simp\n"
    passed = asyncio.run(check_proof_text(ScriptedEnv(ROOT_OK, good()), "t", proof,
                                          index_header="open Real"))
    assert (passed.ok, passed.verified, passed.proof) == (True, True, proof)
    failed = asyncio.run(check_proof_text(ScriptedEnv(ROOT_OK, LeanCrashError("killed")), "t", proof,
                                          index_header="open Real"))
    assert (failed.ok, failed.verified, failed.reason) == (False, False, "verification failed: killed")
    kernel = asyncio.run(check_proof_text(ScriptedEnv(ROOT_OK, good(checked=(KERNEL,))), "t", proof,
                                          index_header="open Real"))
    assert not kernel.ok and kernel.compiled and "(kernel)" in kernel.reason
    with pytest.raises(LeanStartError):
        asyncio.run(check_proof_text(ScriptedEnv(ROOT_OK, LeanStartError("no repl")), "t", proof,
                                          index_header="open Real"))


def test_a_guard_without_configuration_bounds_tactics_at_4000_characters():
    assert TacticGuard([]).check("a" * 4000) is None
    assert TacticGuard([]).check("a" * 4001) == "4001 characters, over the cap of 4000 (lean.max_tactic_chars)"


@pytest.mark.parametrize(
    ("final", "reason"),
    [
        # Each closing-step rule alone: the root print (clean here) would not catch these.
        (TacticResult(TacticKind.SUCCESS, state_id=3, has_sorry=True), "Lean reports sorry in the closing step"),
        (TacticResult(TacticKind.SUCCESS, state_id=3, has_unsafe=True), "Lean reports unsafe code in the closing step"),
        (TacticResult(TacticKind.SUCCESS, state_id=None), "the last tactic did not close all goals (success)"),
        (TacticResult(TacticKind.ERROR, state_id=3), "the last tactic did not close all goals (error)"),
    ],
)
def test_each_closing_step_rule_rejects_on_its_own(final: TacticResult, reason: str):
    env = ScriptedEnv(ROOT_OK, good())
    verdict = verdict_of(env, final=final)
    assert (verdict.ok, verdict.reason) == (False, reason)
    assert env.texts == []  # rejected before Lean is asked to compile


def test_rejection_reasons_quote_at_most_three_messages_and_five_constants():
    many = tuple(info(f"m{i}") for i in range(5))
    assert check_compile(good(printed=many), TEXT).reason == (
        "no `#print axioms t` report in the compile reply (messages: ['m0', 'm1', 'm2'])")
    assert check_compile(good(checked=many), TEXT).reason == (
        "no kernel recheck report for t in the compile reply (messages: ['m0', 'm1', 'm2'])")
    declared = tuple(f"c{i}" for i in range(7))
    assert check_compile(good(declared=declared), TEXT).reason == (
        "the unit before `#print axioms` does not declare t (newConstants: ['c0', 'c1', 'c2', 'c3', 'c4'])")


# Issue 67's answers: a value followed by a command is no single term, refused before Lean by the answer rule itself
# whatever the deny list says, beside the honest answer `2`.
NOT_ONE_TERM = {
    "1\n  instance(priority:=high)evil:HAdd ℕ ℕ ℕ:=⟨fun a b=>a*b⟩":
        "it holds the command keyword 'instance' (Lean ends the term there and runs a command)",
    '2\ninfixl:65 (priority := high) " + " => HMul.hMul': "it holds the command keyword 'infixl' (Lean ends the term "
    "there and runs a command)",
    "2 axiom«x» : False": "it holds the command keyword 'axiom' (Lean ends the term there and runs a command)",
    "2 open Real": "it holds the command keyword 'open' (Lean ends the term there and runs a command)",
    "2) + (3": "it closes a bracket ')' it never opened (character 1)",
    "(2": "it leaves '(' open (character 0)",
    "⟨2, 3)": "it closes '⟨' (character 0) with ')' (character 5)",
    "2 /- the rest": "it leaves a block comment open at character 2",
    '"2': "it leaves a string or name literal open at character 0",
    "/-- doc -/ 2": "it holds a doc comment (no part of a term)",
}


@pytest.mark.parametrize("value", list(NOT_ONE_TERM))
@pytest.mark.parametrize("guard", [GUARD, TacticGuard([])], ids=["default deny list", "no deny list"])
def test_an_answer_that_is_no_single_term_is_refused_before_lean(value: str, guard: TacticGuard):
    shown = " ".join(value.split())
    assert check_answer(value, guard) == Verdict(False, f"the answer {shown!r} is not one term: {NOT_ONE_TERM[value]}")
    assert check_answer("2", guard) == Verdict(True)
    assert check_answer("fun n => (n + 1 : ℕ) -- the successor", guard) == Verdict(True)


def test_an_answer_naming_sorry_ax_is_refused_by_the_built_in_rule():
    assert check_answer("sorryAx ℕ false", TacticGuard([])) == Verdict(
        False, "the answer 'sorryAx ℕ false' is denied: names `sorryAx`, what `sorry` elaborates to")
    assert check_answer("sorry", TacticGuard([])) == Verdict(False, "the answer is left `sorry`")


def test_a_long_answer_is_shown_cut_at_120_characters():
    value = "(" + " + ".join(["1"] * 60)  # never closed
    shown = " ".join(value.split())[:120]
    assert check_answer(value, GUARD) == Verdict(False, f"the answer {shown!r} is not one term: it leaves '(' open "
                                                 "(character 0)")


@pytest.mark.parametrize("tactic", [
    "exact 1'\"'\n  open Lean Elab Command IO FS in\n  #eval show CommandElabM Unit from pure ()\n  --\"",
    "first | exact (!'\"') | set_option maxRecDepth 100000 in simp --\"",
    "simp /--/ \" -/\n#eval 1 --\"",
    "first | (rw [<--1]) | set_option maxRecDepth 100000 in simp",
    "exact (⟨0, by simp⟩ : { x : ℕ //-1 < 0 ∨ True }) set_option maxRecDepth 1 in -/",
    "exact 2r\"\\\" open Real --\"",
    "exact h\nvariable? [Foo]",
    "exact s!\"{(1 open Foo in #eval 1)}\"",
    # Where Lean's tokenizer breaks off inside a token its parser reads on from there: the rest of the token is code.
    "exact 'ainstance : HAdd Nat Nat Nat := ⟨Nat.mul⟩'",   # `'a` is no character literal: Lean stops at `i`
    "exact (+'aopen Foo')",
    "exact '\\qopen Foo'",
    "exact \"\\q\n  open Foo in simp\"",                  # an escape Lean does not know
    "exact \"\n  open Foo in simp",                        # a string never closed
    "simp /- \n  open Foo in simp",                       # a comment never closed
    "exact 0xopen Foo in simp",                           # `0x` and no hexadecimal digit: Lean stops after it
    "exact 0bend",
    "exact 1eopen Foo in simp",
    # Lean's `charLitFnAux` reads two characters before it fails, so the command after `'" ` or `'«x` runs.
    "exact '\" #eval IO.println 1 --\"",
    "exact '«x#eval IO.println 1 --»",
    "exact (f x)' xrun_cmd IO.println 1",
    "exact f ''\" #eval IO.println 1 --\"",                # core Lean has no `''`: its second quote starts a literal
    "simp /-/- -/\nopen IO in #eval println 1 -- -/",    # Lean's `/-` skips its third character: `/-/- -/` is one
    "exact h\nset_premise_selector fun _ _ => pure #[]",  # core commands the keyword list lacked
    "exact h\ntest_extern f 1",
    # Mathlib's tokens that run from a symbol into a letter (`→o`, `→r`, `≃o`): the rest of the name is a keyword
    "exact h →oopen Real",
    "exact x ≃oinstance : Add ℕ := ⟨fun _ _ => 0⟩",
    "exact →r'\"' #eval 1 -- \"",
    "exact →o' bopen X",
    "exact xs[i]''\" #eval 1 --\"",                     # after core's `]'` the next quote starts a literal
    "(!'\" #eval 1 --\"",                                 # after core's `!` token too
    "exact →o'\\qopen X",
    "exact 1\nvariables (h : False)",                   # Mathlib's `variables`, `sudo`: commands the list lacked
    "exact h\nsudo set_option maxHeartbeats 0 in simp",
])
def test_a_command_hidden_where_lean_reads_code_is_refused_whatever_the_deny_list(tactic: str) -> None:
    """A quote after a numeral or a symbol, a doc comment's `/--/`, an opener glued to a token, an interpolated
    string's `{…}`: what these rules would read as a literal or comment Lean may read as code."""
    assert TacticGuard(()).check(tactic) is not None
    assert TacticGuard(DEFAULT_DENY).check(tactic) is not None


@pytest.mark.parametrize("tactic", [
    "exact (pre ++ x :: post)[i.val]'i.isLt",   # core's `xs[i]'h`
    "exact Set.preimage_mono (f ⁻¹' s)",         # Mathlib's `⁻¹'`
    "simp only [Set.image] at h'' ⊢",
    "exact ⟨h', h''⟩",
    "norm_num [show (0x1F : ℕ) = 31 by rfl, (1_000 : ℕ), (2.5e3 : ℝ)]",
    "exact 'a'.toNat_lt",
    "exact \"a\\n\\x41\\u0042\".length_pos",
    "rw [show (1 / (p * b).cast : ℚ) = x/p' by unfold x p; ring]",   # names after `/`, `↑`, `-`, `*`: primes
    "have hi' : n + ↑i' = i := by omega",
    "calc c' - (a' + b') = (c' - a') + -b' := by abel",
    "exact tsum_le_tsum (∑' i, f i) (∏' i, g i)",       # Mathlib's `∑'` and `∏'`
    "simp [hs_open.inter ht_open, ¬h', ↑i']",
    "exact (f '' s).Nonempty",                            # Mathlib's image
    "simp -- the set {x | 0 < x}; \\S 2 of the notes",  # a comment is no string: neither rule reads it
])
def test_tokens_lean_reads_whole_pass(tactic: str) -> None:
    """Primes, Lean's and Mathlib's tokens that end in a quote, numerals of every base, closed literals with known
    escapes: none of the lexical rules refuses them (nor does any on compfiles' 3,385 proofs, docs/results.md)."""
    assert TacticGuard(DEFAULT_DENY).check(tactic) is None


# The sixth pass: tactics and terms that compile and run model-written code, or do IO, while they elaborate (core
# Lean's `include_str`, `sleep`, `bv_check` and `declare_config_elab`; Mathlib's `eval%` and `polyrith`; Plausible's
# `plausible`; ProofWidgets' `with_panel_widgets`). Each passed the guard before (the deny list up to
# `allowUnsafeReducibility`); none proves anything.
BEFORE_THE_SIXTH_PASS = DEFAULT_DENY[:DEFAULT_DENY.index(r"\ballowUnsafeReducibility\b") + 1]
RUNS_CODE_WHILE_IT_ELABORATES = (
    "exact (include_str ⟨\"../../../../proc/self/environ\"⟩ : ℕ)",     # a file, read into an error message
    "have : include_str ⟨dbgTrace \"x\" fun _ => \"a\"⟩ = \"\" := rfl",      # `evalTerm` of the path first
    "exact (eval% Nat.repeat (· + 1) (10 ^ 18) 0 : ℕ)",                   # a compiled loop no heartbeat bounds
    "have h : ∀ n : ℕ, (fun k => dbgTrace \"x\" fun _ => k) n = n := by plausible",  # the goal's code, compiled
    "slim_check",
    "with_panel_widgets [GoalTypePanel with (pure (Json.str \"x\"))] simp",  # the props term, compiled
    "bv_check \"../../../../etc/passwd\"",
    "polyrith",                                                              # `curl` to sagecell.sagemath.org
    "sleep 4000000000",                                                      # 46 days, past every timeout
)


@pytest.mark.parametrize("tactic", RUNS_CODE_WHILE_IT_ELABORATES)
def test_code_a_tactic_or_term_would_run_while_it_elaborates_is_refused(tactic: str) -> None:
    assert GUARD.check(tactic) is not None
    assert TacticGuard(BEFORE_THE_SIXTH_PASS).check(tactic) is None  # found: it passed before


# A tactic configuration is compiled and run (core's `declare_config_elab`): each of these ran its code in the worker
# and passed the guard before. The built-in rule alone refuses them (a configuration is a literal); the deny list,
# without the built-in rules, refuses the effects named.
CONFIGURATION_SHELL = "(fun _ => 100) ((Lean.Lsp.Ipc.runWith ⟨\"/bin/sh\"⟩ #[\"-c\", \"id\"] (pure ())) ())"
CONFIGURATIONS_THAT_RUN_CODE = (
    f"simp (maxSteps := {CONFIGURATION_SHELL})",                 # spawns a program: an IO action run on `()`
    f"all_goals simp (maxSteps := {CONFIGURATION_SHELL})",
    f"(simp (maxSteps := {CONFIGURATION_SHELL}))",
    f"skip <;> [simp (maxSteps := {CONFIGURATION_SHELL}); skip]",
    f"exact h\nsimp (maxSteps := {CONFIGURATION_SHELL})",
    f"aesop (add safe foo) (config := {CONFIGURATION_SHELL})",
    f"simp? +arith (maxSteps := {CONFIGURATION_SHELL})",
    f"iterate 2 simp (maxSteps := {CONFIGURATION_SHELL})",
    f"refine ⟨?_, by simp (maxSteps := {CONFIGURATION_SHELL})⟩",
    f"simp (simp.maxSteps := {CONFIGURATION_SHELL})",
    "simp (maxSteps := Nat.repeat id (10 ^ 18) 5)",              # a compiled loop no heartbeat bounds
    "simp (maxSteps := 10 ^ 10 ^ 10)",
    "simp (config := { Simp.neutralConfig with maxSteps := f x })",
    "simp (maxSteps := x |>.f)", "simp (maxSteps := f <| x)", "simp (maxSteps := (x).f)",
    "decide (config := ⟨true⟩)", "simp (config := by exact dbgSleep 1 fun _ => {})",
    "rw (occs := .pos (f 2)) [h]",
)
CONFIGURATIONS_WITH_EFFECTS = (
    "simp (maxSteps := dbgSleep 4000000000 fun _ => 100)",
    "simp (maxSteps := (fun _ => 100) ((println! \"x\") ()))",              # `IO.println`, run on the world `()`
    "norm_num (config := { (dbg_trace \"x\"; {}) with })",
    "simp (maxSteps := panic! \"x\")",
    "simp (config := (Task.spawn fun _ => ({} : Simp.Config)).get)",
    "field_simp (config := (fun _ => {}) (timeit \"x\" (pure ())))",
    f"simp (maxSteps := {CONFIGURATION_SHELL})",
)


@pytest.mark.parametrize("tactic", CONFIGURATIONS_THAT_RUN_CODE + CONFIGURATIONS_WITH_EFFECTS)
def test_a_configuration_that_is_no_literal_is_refused_whatever_the_deny_list(tactic: str) -> None:
    reason = TacticGuard(()).check(tactic)
    assert reason is not None and reason.startswith("configures a tactic with code at ")
    assert GUARD.check(tactic) is not None


@pytest.mark.parametrize("tactic", [
    "simp (config := {}) (maxSteps := f x)", "simp (config := { decide := true }) +arith (maxSteps := f x)",
])
def test_a_configuration_after_other_items_is_read_as_one(tactic: str) -> None:
    assert (TacticGuard(()).check(tactic) or "").startswith("configures a tactic with code at ")


# Where a `(name := f x)` is a configuration (refused: Lean runs it) and where a named argument (passes: elaborated).
@pytest.mark.parametrize(("tactic", "configuration"), [
    ("case h => simp (maxSteps := f x)", True), ("exact lt_of_le (show b > foo (n := f x) from h)", False),
    ("skip <;> simp (maxSteps := f x)", True), ("rw [h]\nsimp (maxSteps := f x)", True),
    ("exact (h) foo (n := f x)", False), ("exact\n  foo (n := f x)", False), ("try simp (maxSteps := f x)", True),
    ("simp! (maxSteps := f x)", True), ("simp?! (maxSteps := f x)", True),
    ("exact Nat.le_trans\n  foo (n := f x)", False),
    ("success_if_fail_with_msg \"m\" simp (maxSteps := f x)", True), ("exact foo (x) (n := f x)", False),
    ("simp -zeta +arith (maxSteps := f x)", True), ("exact foo - bar (n := f x)", False),
    ("exact foo\n  ⟨a, b⟩ (n := f x)", False), ("exact h\n(simp (maxSteps := f x))", True),
    ("exact (foo\n  (bar (n := f x)))", True),   # a bracket at a line's start may open a tactic: refused, ambiguous
    ("skip; simp (maxSteps := f x)", True), ("first | simp (maxSteps := f x) | skip", True),
    ("· simp (maxSteps := f x)", True),
])
def test_where_a_named_value_is_a_configuration(tactic: str, configuration: bool) -> None:
    reason = TacticGuard(()).check(tactic)
    assert (reason is not None and reason.startswith("configures a tactic with code at ")) == configuration, reason


# A tactic after each token Lean's parsers put before one (burnqed.lean.tactic_starts, read by
# scripts/tactic_combinators.py): how each stands in a tactic. Each form with a configuration that is code is refused;
# the same with a literal passes.
IN_A_TACTIC = {
    "=>": "case h => {}", "|": "first | done | {}", "(": "done <|> ({})", "<;>": "skip <;> {}", ";": "skip; {}",
    "{": "exact by {{ {} }}", "·": "· {}", ".": ". {}", "[": "skip <;> [{}; rfl]", "<|>": "done <|> {}",
    "then": "if h : p then {} else skip", "else": "if p then skip else {}", "with": "induction n with {}",
    "by": "exact by {}", "by?": "exact by? {}", "iterate": "iterate 2 {}",
}
CODE, LITERAL = "simp (config := {maxSteps := (List.replicate 1000000000 7).length})", "simp (maxSteps := 100)"


def _in_a_tactic(token: str, tactic: str) -> str:
    return IN_A_TACTIC.get(token, token + " {}").replace("{}", tactic).replace("{{", "{").replace("}}", "}")


@pytest.mark.parametrize("token", sorted(BEFORE_A_TACTIC))
def test_a_configuration_that_is_code_is_refused_after_every_token_before_a_tactic(token: str) -> None:
    tactic = _in_a_tactic(token, CODE)
    assert (TacticGuard(()).check(tactic) or "").startswith("configures a tactic with code at "), tactic
    assert GUARD.check(_in_a_tactic(token, LITERAL)) is None


@pytest.mark.parametrize("tactic", [
    f"simp (disch := {CODE})", f"linear_combination (norm := {CODE}) h",   # a tactic valued option's tactic
    f"success_if_fail_with_msg m {CODE}", f"success_if_fail_with_msg (m) {CODE}",   # after the word's argument
    f"done <|> (done <|> {CODE})", f"done <|>\n  {CODE}", f"skip <;> (done <|> {CODE})",
])
def test_the_found_inputs_of_the_seventh_pass_are_refused(tactic: str) -> None:
    """Each passed the guard of fd2a25d (the commit before), whose list of words was kept by hand."""
    assert (TacticGuard(()).check(tactic) or "").startswith("configures a tactic with code at "), tactic


@pytest.mark.parametrize("text", [
    "simp " + "(a := 1) " * 8000,                                               # a run of items: each walked back over
    "success_if_fail_with_msg m simp " + "(a := " * 8000 + "1" + ")" * 8000,   # nested values, each read as one
    "simp " + "(" * 8000 + "x" + ")" * 8000 + " (a := f x)",                    # brackets paired once
], ids=["items", "nested", "brackets"])
def test_the_configuration_rule_is_linear_in_its_tokens(text: str) -> None:
    """Tens of kilobytes in well under the seconds a reading quadratic in the items took (12 s for 36 KB of items)."""
    started = time.monotonic()
    configuration_problem(text)
    assert time.monotonic() - started < 5.0


@pytest.mark.parametrize("tactic", ["exact h) (maxSteps := f x)", "simp (maxSteps :=", "simp (maxSteps := f x",
                                    "simp (", ") (n := 1)", "simp (maxSteps"])
def test_the_configuration_rule_reads_unpaired_brackets_without_failing(tactic: str) -> None:
    TacticGuard(()).check(tactic)  # a reason or None, never an exception: Lean reports the brackets


@pytest.mark.parametrize("tactic", CONFIGURATIONS_WITH_EFFECTS)
def test_the_deny_list_refuses_the_effects_code_in_a_configuration_would_have(tactic: str) -> None:
    assert TacticGuard(DEFAULT_DENY, builtin=False).check(tactic) is not None


@pytest.mark.parametrize("tactic", [
    "simp (config := {decide := true})", "simp (config := { decide := true })", "decide +kernel", "simp +arith",
    "norm_num (config := { zeta := false })", "simp (maxSteps := 200000) [h]",
    "linarith (config := { splitNe := true })",
    "aesop (config := { maxRuleApplications := 400 })", "omega", "exact Nat.lt_irrefl _ (by simpa using h)",
    "exact fun h => absurd h (by norm_num)", "exact hsleeps.le", "simp [Tasks, evaluation]",
    "simp (config := { Simp.neutralConfig with zeta := true })", "simp (config := .default)",
    "simp (config := {decide := true\n  zeta := false}) at h ⊢", "rw (occs := .pos [2]) [h]",
    "aesop (add safe foo) (rule_sets := [-Bar, Baz]) (config := { maxRuleApplications := 400 })",
    "linear_combination (norm := ring_nf) h", "linear_combination (exp := 2) h1 - h2",
    "simp (disch := exact h x) [foo]", "gcongr (disch := positivity)", "simp (maxSteps := 1000000 * 4)",
    # named arguments are terms, elaborated, never run: any value
    "exact foo (n := f x)", "apply foo (h := by simp)", "rw [foo (n := f x)]", "exact le_trans h (n := f x) hb",
    "nlinarith [foo (n := f x), sq_nonneg (a - b)]", "apply (mem_sort (r := (· ≤ ·))).mp",
    "obtain ⟨k, hk⟩ := exists_rotation (S := Finset.univ.filter fun x => c x = 0)",
    "have h := foo hk\n  (A := fun f ↦ f 0) (C := fun _ ↦ Finset.univ)",
    "exact le_trans h\n  (Finset.sum_le_sum (f := fun i => i) h')",   # a dotted head is a lemma, never a tactic
    "simp (maxSteps := by exact f x)",   # `(opt := by tac)`: Lean quotes the tactic (a syntax value), never runs it
])
def test_configurations_that_compute_a_literal_pass(tactic: str) -> None:
    assert GUARD.check(tactic) is None

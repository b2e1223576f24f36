"""One file, one boundary (docs/lean.md, "One file"): a compiled file may declare lemmas `burnqed_lemma_<k>` between
the header and the theorem. Their names are burnqed's; their statements and proofs are model text, read by
`check_lemmas` before Lean; the pinned shape gives each lemma a unit and a `#print axioms`; a lemma left `sorry`, one
with a custom axiom, one whose name collides, one that restates the theorem and a local notation between lemmas are
each refused with their reason. Made-up problems, checked against minilean."""

from __future__ import annotations

import asyncio

from burnqed.config import LeanConfig
from burnqed.lean.declared_lemmas import FileLemma
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay
from burnqed.lean.soundness import (
    Verdict,
    assemble_proof,
    check_compile,
    check_lemmas,
    check_proof_text,
    compile_text,
)
from burnqed.lean.stored_proof import stored_lemmas
from burnqed.records.replies import CompileMessage, CompileResult, CompileUnit
from burnqed.records.theorem import Theorem
from leankit.version import PantographVersion
from tests.doubles.line_servers import MiniLean

GUARD = TacticGuard.from_config(LeanConfig())
THEOREM = Theorem(name="t", signature="(x : ℕ) (hx : 0 < x) : 0 < x * x", header="open Nat")
LEMMA = FileLemma(1, "(y : ℕ) (h : 0 < y) : 0 < y * y", ("positivity",))
USES = ["exact burnqed_lemma_1 x hx"]
FILE = ("open Nat\n\ntheorem burnqed_lemma_1 (y : ℕ) (h : 0 < y) : 0 < y * y := by\n  positivity\n\n"
        "theorem t (x : ℕ) (hx : 0 < x) : 0 < x * x := by\n  exact burnqed_lemma_1 x hx\n")


def _check(proof: str, lemmas: list[FileLemma], theorem: Theorem = THEOREM) -> Verdict:
    lean = InProcessReplay(MiniLean(version=PantographVersion.parse("0.3.4")))
    return asyncio.run(check_proof_text(lean, theorem.name, proof, index_header=theorem.header, lemmas=lemmas))


def _lemmas_refusal(*lemmas: FileLemma, theorem: Theorem = THEOREM) -> str:
    verdict = check_lemmas(lemmas, theorem, GUARD)
    assert not verdict.ok
    return verdict.reason


def test_the_file_is_the_header_the_lemmas_and_the_theorem_and_each_lemma_has_its_units() -> None:
    proof = assemble_proof(THEOREM, USES, [LEMMA])
    assert proof == FILE
    assert assemble_proof(THEOREM, USES) == FILE.replace(LEMMA.text() + "\n", "")  # no lemma: the file of before
    text = compile_text(FILE, "t", THEOREM.header, lemmas=[LEMMA])
    # `open Nat` (0), the lemma at 10, the theorem at 88, `#print axioms` of the lemma at 169 and of t at 200
    assert text.unit_starts == (0, 10, 88, 169, 200, 217) and text.lemmas == ("burnqed_lemma_1",)
    assert check_lemmas([LEMMA], THEOREM, GUARD).ok
    verdict = _check(FILE, [LEMMA])
    assert verdict.verified and verdict.result is not None
    assert [unit.new_constants for unit in verdict.result.units][:3] == [(), ("burnqed_lemma_1",), ("t",)]


def test_a_lemma_left_sorry_is_refused_by_the_guard_and_by_the_compile() -> None:
    left = FileLemma(1, LEMMA.statement, ("sorry",))
    assert _lemmas_refusal(left) == ("lemma burnqed_lemma_1 is refused: its proof: tactic 'sorry' on the path is "
                                     "denied: matches deny pattern '\\\\bsorry\\\\b'")
    assert _lemmas_refusal(FileLemma(1, "(y : ℕ) (h : sorry) : 0 < y", ("omega",))) == (
        "lemma burnqed_lemma_1 is refused: its statement holds `sorry`")
    proof = assemble_proof(THEOREM, USES, [left])
    assert proof is not None
    assert _check(proof, [left]).reason == "the proof text compiles only with sorry"


def _reply(lemma_axioms: str) -> CompileResult:
    text = compile_text(FILE, "t", THEOREM.header, lemmas=[LEMMA])
    messages = [(), (), (), (CompileMessage("information", f"'burnqed_lemma_1' depends on axioms: [{lemma_axioms}]"),),
                (CompileMessage("information", f"'t' depends on axioms: [{lemma_axioms}]"),),
                (CompileMessage("information", "burnqed kernel recheck: t ok (2 constants)"),)]
    declared = [(), ("burnqed_lemma_1",), ("t",), (), (), ()]
    ends = [*text.unit_starts[1:], text.unit_starts[-1] + 10]
    return CompileResult(tuple(CompileUnit(start, end, said, names) for start, end, said, names in
                               zip(text.unit_starts, ends, messages, declared, strict=True)))


def test_a_lemma_with_a_custom_axiom_is_refused_by_its_print_axioms() -> None:
    text = compile_text(FILE, "t", THEOREM.header, lemmas=[LEMMA])
    assert check_compile(_reply("propext, Quot.sound"), text).ok
    assert check_compile(_reply("propext, burnqed_evil"), text).reason == (
        "lemma burnqed_lemma_1 depends on axioms beyond Classical.choice, Quot.sound, propext: burnqed_evil")
    # The axiom declared by the statement never reaches Lean: a command keyword in model text.
    assert _lemmas_refusal(FileLemma(1, ": True := trivial\naxiom burnqed_evil : False\ntheorem burnqed_x : True",
                                     ("trivial",))) == (
        "lemma burnqed_lemma_1 is refused: its statement is not one binder list and type: it holds the command "
        "keyword 'axiom' (Lean ends the term there and runs a command)")


def test_a_lemma_whose_name_collides_is_refused() -> None:
    named = Theorem(name="burnqed_lemma_1", signature=THEOREM.signature)
    assert _lemmas_refusal(LEMMA, theorem=named) == ("lemma burnqed_lemma_1's name collides with a name the "
                                                     "theorem has")
    declared = Theorem(name="t", signature=THEOREM.signature, header="def burnqed_lemma_1 : ℕ := 1")
    assert _lemmas_refusal(LEMMA, theorem=declared) == ("lemma burnqed_lemma_1's name collides with a name the "
                                                        "header has")
    assert _lemmas_refusal(LEMMA, LEMMA) == ("lemma burnqed_lemma_1 stands where burnqed_lemma_2 must: the lemmas "
                                             "are numbered 1, 2, … in the file's order")


def test_a_lemma_that_restates_the_theorem_is_refused() -> None:
    assert _lemmas_refusal(FileLemma(1, "(x : ℕ)  (hx : 0 < x) :\n 0 < x * x", ("positivity",))) == (
        "lemma burnqed_lemma_1 is refused: its statement restates the theorem")


def test_a_local_notation_between_lemmas_is_refused() -> None:
    notation = 'local notation "burnqed_n" => 1'
    assert _lemmas_refusal(FileLemma(1, f": True := trivial\n{notation}\ntheorem burnqed_x : True", ("trivial",))) \
        == ("lemma burnqed_lemma_1 is refused: its statement is not one binder list and type: it holds the command "
            "keyword 'local' (Lean ends the term there and runs a command)")
    assert _lemmas_refusal(FileLemma(1, LEMMA.statement, (f"positivity\n{notation}",))) == (
        "lemma burnqed_lemma_1 is refused: its proof: tactic 'positivity\\nlocal notation \"burnqed_n\" => 1' on the "
        "path is denied: holds the command keyword 'local': Lean would run a command of its own there")
    second = FileLemma(2, "(z : ℕ) (h : 0 < z) : 0 < z * z", ("positivity",))
    proof = assemble_proof(THEOREM, USES, [LEMMA, second])
    assert proof is not None
    inserted = proof.replace("\n\ntheorem burnqed_lemma_2", f"\n\n{notation}\n\ntheorem burnqed_lemma_2")
    assert compile_text(inserted, "t", THEOREM.header, lemmas=[LEMMA, second]).problem == (
        "the compiled file's lemmas are not the ones it was assembled with, where they were put")
    # A notation inside a lemma's proof the guard let through is a unit the pin does not have.
    smuggled = FileLemma(1, LEMMA.statement, ("positivity",))
    text = compile_text(FILE, "t", THEOREM.header, lemmas=[smuggled])
    reply = _reply("propext")
    extra = CompileResult((*reply.units[:2], CompileUnit(60, 88, (), ()), *reply.units[2:]))
    assert check_compile(extra, text).reason == (
        "Lean reports 7 compilation units where the file's pinned shape has 6 (the index header's 1 commands, 1 "
        "lemmas, the theorem, `#print axioms` of each and the kernel recheck): a command the header does not have "
        "was run")


def test_a_name_no_earlier_declaration_of_the_file_has_is_unknown() -> None:
    proof = assemble_proof(THEOREM, ["exact burnqed_lemma_2 x hx"], [LEMMA])
    assert proof is not None
    assert _check(proof, [LEMMA]).reason == "the proof text does not compile: unknown identifier 'burnqed_lemma_2'"
    assert not _check(FILE, []).ok  # the lemmas the file holds are the ones it was checked with


def test_a_stored_file_gives_back_the_lemmas_it_was_assembled_with_or_none() -> None:
    multi = FileLemma(2, "(z : ℕ) -- a comment\n  (h : 0 < z) : 0 < z * z -- and one",
                      ("have h2 : 0 < z := by\n  exact h", "\npositivity"))
    for lemmas in ([], [LEMMA], [LEMMA, multi]):
        proof = assemble_proof(THEOREM, USES, lemmas)
        assert proof is not None
        read = stored_lemmas(proof, THEOREM, USES)
        assert read is not None and assemble_proof(THEOREM, USES, read) == proof and len(read) == len(lemmas)
    assert stored_lemmas(FILE, THEOREM, USES) == (FileLemma(1, LEMMA.statement, ("positivity",)),)
    # A command between the header and the theorem that is no lemma of the assembly, or lemmas out of order: none.
    assert stored_lemmas(FILE.replace("theorem burnqed_lemma_1", "axiom burnqed_lemma_1"), THEOREM, USES) is None
    assert stored_lemmas(FILE.replace("burnqed_lemma_1 (y", "burnqed_lemma_2 (y"), THEOREM, USES) is None
    assert stored_lemmas(FILE.replace("\n  positivity\n", "\npositivity\n"), THEOREM, USES) is None


def test_a_lemma_statement_over_the_caps_or_denied_by_the_guard_is_refused_with_its_reason() -> None:
    """Two of `_statement_refusal`'s refusals no test read (a mutation run's survivors, 2026-11-29)."""
    long = "(y : ℕ) : " + " + ".join(["y"] * GUARD.max_text_chars) + " = y"
    over = GUARD.over_cap(long)
    assert over is not None
    assert check_lemmas([FileLemma(1, long, ("simp",))], THEOREM, GUARD) == Verdict(
        False, f"lemma burnqed_lemma_1 is refused: its statement has {over}")
    denied = "(y : ℕ) : y = y := by native_decide"
    reason = GUARD.check(denied)
    assert reason is not None
    assert check_lemmas([FileLemma(1, denied, ("rfl",))], THEOREM, GUARD) == Verdict(
        False, f"lemma burnqed_lemma_1 is refused: its statement is denied: {reason}")


def test_each_unit_of_the_pinned_shape_is_named_in_words() -> None:
    """What a unit that starts elsewhere than the pinned shape says it is: the header's commands, each lemma, the
    theorem, each lemma's `#print axioms`, the theorem's, the kernel recheck (a mutation run's survivors)."""
    from burnqed.lean.soundness import CompileText, _unit_name

    shape = CompileText("t", "", 0, 0, (), lemmas=("burnqed_lemma_1", "burnqed_lemma_2"))
    assert [_unit_name(number, 9, shape) for number in range(9)] == [
        "the header's command 1", "the header's command 2", "lemma burnqed_lemma_1", "lemma burnqed_lemma_2",
        "the theorem", "`#print axioms burnqed_lemma_1`", "`#print axioms burnqed_lemma_2`", "`#print axioms`",
        "the kernel recheck"]

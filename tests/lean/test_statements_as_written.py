"""Statements as users write them start and are proved, the compile included: a line comment at the end, a block
comment in the middle, a nested one, a docstring before, comments between binders, `--` inside a string literal,
line breaks anywhere, an attribute and a modifier in a .lean source. Against the strict Pantograph double of 0.3.4
and of the newest version, minilean (the embedded Lean) and the replay server (the recorded corpus), each in this
process (`InProcessReplay`: what the statements become is the subject, not the pipe); each of them refuses, as Lean
does, the file burnqed used to write (`… -- copy 0 := by sorry`, its `:=` swallowed). A 48-theorem index with
comments starts whole through `burnqed lean check` on the embedded defaults."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from burnqed.config import LeanConfig
from burnqed.data.leanfile import lean_file_rows
from burnqed.data.sources import Item, convert_row
from burnqed.lean import payloads
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay, LineServer
from burnqed.lean.soundness import Verdict, assemble_proof, check_proof_text, compile_text
from burnqed.lean.start import start_theorem
from burnqed.policy.base import Sampling
from burnqed.records.enums import SearchMode
from burnqed.records.replies import CompileResult, Goal
from burnqed.records.theorem import Theorem
from burnqed.search.modes import prove_theorem
from burnqed.search.whole import WholeSettings
from burnqed.text.prompt import PromptFormat, format_for
from leankit.corpus import load_corpus
from leankit.version import LATEST, PantographVersion
from minilean.replay.replay_server import ReplayServer
from tests.doubles.line_servers import DoubleServer, MiniLean
from tests.doubles.policy_double import ScriptedPolicy
from tests.processes import cli

GUARD = TacticGuard.from_config(LeanConfig())
CORPUS = load_corpus()
# The peers, as `python -m minilean`, `python -m minilean.replay [--pantograph-version V]` and the double run them.
PEERS: dict[str, Callable[[], LineServer]] = {
    "double-0.3.4": lambda: DoubleServer("0.3.4"),
    "double-newest": lambda: DoubleServer(str(LATEST)),
    "minilean": MiniLean,
    "replay-0.3.4": lambda: ReplayServer(CORPUS),
    "replay-newest": lambda: ReplayServer(CORPUS, version=LATEST),
}

# A .lean source as a benchmark ships it: a docstring above an attribute line, a modifier, a comment in the binders.
SOURCE = """import Mathlib

open Nat

/-- Commutes, as the library states it. -/
@[simp]
private theorem t_attribute (a b : ℕ) -- the summands
    : a + b = b + a := by
  sorry
"""


def _from_source() -> Theorem:
    (row,) = lean_file_rows(SOURCE)
    item = convert_row("benchmark", row)
    assert isinstance(item, Item), item
    return item.theorem


COMMUTES = "theorem {} (a b : ℕ) : a + b = b + a"
# name → (the theorem as read from what the user wrote, its declaration as burnqed restates it for Lean)
FORMS: dict[str, tuple[Theorem, str]] = {
    "line comment at the end": (
        Theorem(name="t_line", statement="∀ (a b : ℕ), a + b = b + a  -- copy 0"), COMMUTES.format("t_line")),
    "block comment in the middle": (
        Theorem(name="t_block", statement="∀ (a b : ℕ), a + /- the middle -/ b = b + a"),
        COMMUTES.format("t_block")),
    "nested block comment": (
        Theorem(name="t_nested", statement="∀ (a b : ℕ), a + b = /- outer /- inner -/ still outer -/ b + a"),
        COMMUTES.format("t_nested")),
    "docstring before": (
        Theorem(name="t_doc", statement="/-- The sum of two naturals commutes. -/\n∀ (a b : ℕ), a + b = b + a -- c"),
        "/-- The sum of two naturals commutes. -/\n" + COMMUTES.format("t_doc")),
    "comments between binders": (
        Theorem(name="t_binders", statement="∀ (a : ℕ) -- the first\n    /- and then -/ (b : ℕ),\n  a + b = b + a"),
        "theorem t_binders (a : ℕ) (b : ℕ) : a + b = b + a"),
    "line breaks anywhere": (
        Theorem(name="t_breaks", statement="∀\n  (a b : ℕ),\n  a +\n    b = b\n  + a"),
        "theorem t_breaks (a b : ℕ) : a +\n    b = b\n  + a"),
    "attribute and modifier in a .lean source": (
        _from_source(), "/-- Commutes, as the library states it. -/\n" + COMMUTES.format("t_attribute")),
}
# Outside minilean's fragment (a String): the Pantograph doubles only.
STRING_FORM = (Theorem(name="t_string", statement='∀ (s : String), s ++ "--" = s ++ "--"  -- the real one'),
               'theorem t_string (s : String) : s ++ "--" = s ++ "--"')


def whole_settings() -> WholeSettings:
    return WholeSettings(fmt=format_for(PromptFormat.DEEPSEEK_TACTIC, SearchMode.WHOLE),
                         sampling=Sampling(n=1, stop=("```",)), max_proofs=1)


async def _prove_each(peer: str, forms: list[tuple[Theorem, str]], proof: str) -> list[tuple[Goal, ...]]:
    """Start each theorem and prove it in whole mode with `proof` (its compile included); their root goals."""
    starts: list[tuple[Goal, ...]] = []
    lean = InProcessReplay(PEERS[peer]())
    for theorem, declaration in forms:
        assert theorem.declaration() == declaration
        _, goals = await start_theorem(lean, theorem)
        starts.append(goals)
        policy = ScriptedPolicy(lambda _: [(proof, -0.1)], key=lambda prompt: prompt)
        result = (await prove_theorem(theorem, lean, policy, whole_settings(), GUARD)).result
        assert result.proved, (theorem.name, result.detail)
        header = f"{theorem.header}\n\n" if theorem.header else ""
        body = "\n".join(f"  {line}" for line in proof.split("\n"))
        assert result.proof == f"{header}{declaration} := by\n{body}\n"
        # The prompt shows the declaration as Lean gets it, the docstring line first.
        assert f"{declaration} := by\n  sorry" in policy.calls[0][0]
    return starts


def _hypotheses(goals: tuple[Goal, ...]) -> list[tuple[list[tuple[str, str]], str]]:
    return [([(v.name, v.type) for v in goal.variables], goal.target) for goal in goals]


@pytest.mark.parametrize("peer", ["double-0.3.4", "double-newest"])
def test_every_form_starts_and_is_proved_against_the_strict_pantograph_double(peer: str) -> None:
    forms = [*FORMS.values(), STRING_FORM]
    starts = asyncio.run(_prove_each(peer, forms, "done"))
    commutes = ([("a", "ℕ"), ("b", "ℕ")], "a + b = b + a")
    assert [_hypotheses(goals) for goals in starts] == [[commutes]] * len(FORMS) + [
        [([("s", "String")], 's ++ "--" = s ++ "--"')]]


@pytest.mark.slow  # minilean elaborates `omega` seven times
def test_every_form_in_its_fragment_starts_and_is_proved_against_minilean() -> None:
    starts = asyncio.run(_prove_each("minilean", list(FORMS.values()), "omega"))
    assert [goal.pretty() for goals in starts for goal in goals] == ["a b : ℕ\n⊢ a + b = b + a"] * len(FORMS)


def test_a_recorded_theorem_written_with_comments_starts_and_is_proved_against_the_replay_server() -> None:
    header = "open BigOperators Real Nat Topology Rat"
    theorem = Theorem(name="algebra_2x_plus_3_eq_11", header=header, statement=(
        "/-- Solve a linear equation. -/\n∀ (x : ℝ), -- the unknown\n  2 * x + 3 = 11 → /- so -/ x = 4  -- copy 1"))
    declaration = "/-- Solve a linear equation. -/\ntheorem algebra_2x_plus_3_eq_11 (x : ℝ) : 2 * x + 3 = 11 → x = 4"
    (goals,) = asyncio.run(_prove_each("replay-0.3.4", [(theorem, declaration)], "intro h₀\nlinarith"))
    assert [goal.pretty() for goal in goals] == ["x : ℝ\n⊢ 2 * x + 3 = 11 → x = 4"]


RECORDED = Theorem(name="algebra_2x_plus_3_eq_11", header="open Real", statement=(
    "/-- Solve a linear equation. -/\n∀ (x : ℝ), 2 * x + 3 = 11 → x = 4"))


@pytest.mark.parametrize(("peer", "theorem", "proof"), [
    ("double-0.3.4", FORMS["attribute and modifier in a .lean source"][0], "done"),
    ("double-newest", FORMS["attribute and modifier in a .lean source"][0], "done"),
    ("minilean", FORMS["attribute and modifier in a .lean source"][0], "omega"),
    ("replay-0.3.4", RECORDED, "intro h₀\nlinarith"),
], ids=["double-0.3.4", "double-newest", "minilean", "replay"])
def test_the_docstring_opens_the_declarations_unit_and_moves_no_offset_the_compile_reads(
        peer: str, theorem: Theorem, proof: str) -> None:
    text = assemble_proof(theorem, proof.split("\n"))
    assert text is not None and theorem.docstring is not None
    expected = compile_text(text, theorem.name, theorem.header)

    async def run() -> tuple[CompileResult, Verdict]:
        lean = InProcessReplay(PEERS[peer]())
        return await lean.compile(expected.text), await check_proof_text(lean, theorem.name, text,
                                                                         index_header=theorem.header)

    result, verdict = asyncio.run(run())
    assert verdict.ok, verdict.reason
    doc = expected.text.index("/--")
    declared = [unit for unit in result.units if unit.new_constants]
    assert [(unit.start, unit.new_constants) for unit in declared] == [
        (len(expected.text[:doc].encode()), (theorem.name,))]  # Lean's boundary: from the doc comment
    assert [unit.start for unit in result.units[-2:]] == [expected.print_start, expected.recheck_start]


SWALLOWED = "theorem t_old (a b : ℕ) : a + b = b + a  -- copy 0 := by sorry\n"  # the file burnqed used to write
# A recorded theorem (the replay server starts no other) with a line comment after its type.
COMMENTED = "theorem algebra_2x_plus_3_eq_11 (x : ℝ) (h₀ : 2 * x + 3 = 11) : x = 4  -- copy 0"
MISSING_ASSIGN = "expected ':=', 'where' or '|'"


@pytest.mark.parametrize("peer", sorted(PEERS))
def test_a_declaration_whose_assign_a_comment_swallowed_is_refused_as_lean_refuses_it(peer: str) -> None:
    async def run() -> tuple[dict[str, object], dict[str, object], int, dict[str, object]]:
        lean = InProcessReplay(PEERS[peer]())
        version = await lean.protocol_version()

        async def start(text: str) -> dict[str, object]:
            if version.distil:
                return await lean.request("frontend.distil", payloads.frontend_distil(text))
            return await lean.request("frontend.process", payloads.frontend_process(
                version, text, sorrys=True, new_constants=False))

        # The start file burnqed used to write: Lean reads `:= by sorry` as part of the comment.
        started = await start(SWALLOWED)
        unclosed = await start("theorem t_open (a : ℕ) : (a = a := by sorry\n")  # `:=` inside a bracket
        # The compile of a proof written that way: its `:= by` is in the comment, nothing is declared.
        text = "theorem t_old (a b : ℕ) : a + b = b + a  -- copy 0 := by\n  omega\n\n#print axioms t_old\n"
        compiled = await lean.request("frontend.process", payloads.frontend_process(version, text))
        # A caller handing such a declaration to `start_theorem` now gets `:=` on the next line: it starts.
        state = await lean.start_theorem(None, COMMENTED)
        return started, compiled, len(await lean.goals(state)), unclosed

    started, compiled, goals, unclosed = asyncio.run(run())
    assert MISSING_ASSIGN not in json.dumps(unclosed) and "goalStateId" not in json.dumps(unclosed)
    shown = json.dumps(started, ensure_ascii=False)
    assert f"unexpected end of input; {MISSING_ASSIGN}" in shown and "goalStateId" not in shown, shown
    units = compiled["units"]
    assert isinstance(units, list) and len(units) == 2
    assert units[0]["newConstants"] == []
    assert f"unexpected token '#print'; {MISSING_ASSIGN}" in json.dumps(units[0]["messages"])
    assert "unknown constant 't_old'" in json.dumps(units[1]["messages"], ensure_ascii=False)
    assert goals == 1


@pytest.mark.slow
def test_a_48_theorem_index_with_comments_starts_whole_on_the_embedded_defaults(tmp_path: Path) -> None:
    from burnqed.data.index import embedded_index

    comments = ["  -- copy {}", " /- copy {} -/", "\n  -- copy {}\n", "/-- Copy {}. -/\n"]
    theorems = []
    for number, theorem in enumerate(embedded_index("test").theorems[:48]):
        comment = comments[number % len(comments)].format(number)
        statement = f"{comment}{theorem.statement}" if comment.startswith("/--") else f"{theorem.statement}{comment}"
        theorems.append({**theorem.model_dump(exclude_none=True), "statement": statement})
    index = tmp_path / "commented.json"
    index.write_text(json.dumps({"name": "commented", "theorems": theorems}, ensure_ascii=False), encoding="utf-8")
    report = tmp_path / "check.json"
    done = cli("lean", "check", "--theorems", str(index), "--output", str(report), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    checked = json.loads(report.read_text(encoding="utf-8"))
    assert (checked["total"], checked["started"], checked["failures"]) == (48, 48, [])
    assert PantographVersion.parse(checked["pantograph_version"]) == PantographVersion(0, 3, 4)


@pytest.mark.slow
@pytest.mark.parametrize(("entry", "line"), [
    ({"name": "t", "statement": "∀ (a : ℕ), a = a /- never closed"},
     "theorems.0: Value error, statement '∀ (a : ℕ), a = a /- never closed' ends inside an unterminated block "
     "comment"),
    ({"name": "t", "statement": "-- a comment and nothing else"},
     "theorems.0: Value error, statement '-- a comment and nothing else' holds only comments"),
    ({"name": "t", "statement": "p", "docstring": "ends -/ early"},
     "theorems.0.docstring: Value error, docstring 'ends -/ early' cannot be written as a `/-- … -/` doc comment: "
     "it holds a `-/` that would end the doc comment early"),
], ids=["unterminated", "only-comments", "bad-docstring"])
def test_a_statement_lean_would_refuse_is_refused_in_one_line_before_work(
        tmp_path: Path, entry: dict[str, str], line: str) -> None:
    index = tmp_path / "index.json"
    index.write_text(json.dumps({"name": "bad", "theorems": [entry]}, ensure_ascii=False), encoding="utf-8")
    out = tmp_path / "out"
    done = cli("eval", "--theorems", str(index), "--output", str(out / "r.json"))
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"error: theorem index {index}: {line}"]
    assert not out.exists()

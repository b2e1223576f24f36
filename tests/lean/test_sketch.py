"""The Lean edge of a sketch (docs/lean.md, "Sketches"): the requests `draft_sketch` and `file_sketch` send, per
version, against REQUESTS.md; the subgoals and their contexts against the strict double at 0.3.4 and the newest
supported version and against minilean, through the same client calls; the guard's refusals; Lean's messages for a
malformed sketch. In-process (`InProcessReplay` over the server objects): no subprocess."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from burnqed.config import DEFAULT_DENY
from burnqed.lean.guard import TacticGuard
from burnqed.lean.inprocess import InProcessReplay
from burnqed.lean.protocol import sketch_subgoals
from burnqed.records.replies import Goal, SketchResult, TacticKind, Variable
from burnqed.text.sketch import SORRY_OUTSIDE_HOLE, Hole, Sketch, read_sketch
from leankit.version import SUPPORTED, PantographVersion
from tests.doubles.line_servers import DoubleServer, MiniLean
from tests.lean.test_requests import Recorder, check_payload

V = PantographVersion.parse
NEWEST = str(SUPPORTED[-1])
HEADER = "open Real"
DECLARATION = "theorem t (x y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) : 0 < x * y + x"
TEXT = "have hxy : 0 < x * y := by sorry\nhave hx : 0 < x := sorry\nnlinarith [hxy, hx]"
BINDERS = [("x", "ℝ", None), ("y", "ℝ", None), ("h₀", "0 < x", None), ("h₁", "0 < y", None)]
GUARD = TacticGuard(DEFAULT_DENY)


def sketch(text: str = TEXT) -> Sketch:
    read = GUARD.check_sketch(text)
    assert isinstance(read, Sketch), read
    return read


def contexts(result: SketchResult) -> list[tuple[str, int, list[tuple[str, str, str | None]], str]]:
    return [(s.name, s.goal_id, [(v.name, v.type, v.value) for v in s.goal.variables], s.goal.target)
            for s in result.subgoals]


def run(lean: InProcessReplay, route: str, text: str = TEXT, header: str = HEADER) -> SketchResult:
    async def go() -> SketchResult:
        if route == "draft":
            state = await lean.start_theorem(header, DECLARATION)
            return await lean.draft_sketch(state, sketch(text))
        return await lean.file_sketch(header, DECLARATION, sketch(text))
    return asyncio.run(go())


def test_a_sketch_is_read_into_holes_and_a_skeleton() -> None:
    read = read_sketch("  -- the plan\n  have «h₁» : 0 <\n      x := by sorry\n  have h₂ : 0 < y := sorry\n  linarith")
    assert isinstance(read, Sketch)
    assert read.holes == (Hole("h₁", "0 < x"), Hole("h₂", "0 < y"))
    assert read.skeleton == "have «h₁» : 0 <\n    x\nhave h₂ : 0 < y\nlinarith"  # the comment is no tactic
    assert read.draft_term() == ("by\n  -- the plan\n  have «h₁» : 0 <\n      x := by sorry\n"
                                 "  have h₂ : 0 < y := sorry\n  linarith")
    assert read_sketch("have h : P := by sorry\nhave h : Q := by sorry\nexact h") == (
        "two holes are named 'h': each hole needs a name of its own")
    assert read_sketch("have : P := by sorry\nexact this") == (
        "the hole `have : P := by sorry` needs a name of its own (not `this` or `_`)")
    assert read_sketch("linarith") == "a sketch without a `have NAME : P := by sorry` hole"


@pytest.mark.parametrize(("text", "reason"), [
    ("have h : P := by sorry\nsorry", SORRY_OUTSIDE_HOLE),
    ("have h : P := by sorry\nhave g : Q := by simp; sorry\nexact g", SORRY_OUTSIDE_HOLE),
    ("have h : P := by sorry\nexact sorryAx _ false", SORRY_OUTSIDE_HOLE),
    ("have h : P := by sorry\nadmit", SORRY_OUTSIDE_HOLE),
    ("have h : P := by sorry\naxiom bad : False\nexact bad.elim",
     "the sketch's skeleton holds the command keyword 'axiom': Lean would run a command of its own there"),
    ("have h : 2 + 2 = 4 := by sorry\nnative_decide",
     r"the sketch's skeleton matches deny pattern '\\bnative_decide\\b'"),
    ("have h : P := by sorry\nset_option «debug».skipKernelTC true in decide +kernel",
     "the sketch's skeleton holds the command keyword 'set_option': Lean would run a command of its own there"),
    ("have h : (by native_decide : 2 = 2) = rfl := by sorry\nexact h",
     r"the sketch's skeleton matches deny pattern '\\bnative_decide\\b'"),
])
def test_a_skeleton_beyond_sorry_holes_is_refused_before_lean(text: str, reason: str) -> None:
    assert GUARD.check_sketch(text) == reason
    lean = Recorder(V("0.3.4"))
    refused = GUARD.sketch_refusal(text)
    assert refused == SketchResult(TacticKind.REFUSED, "", errors=(f"refused by the tactic guard: {reason}",))
    assert lean.sent == []


@pytest.mark.parametrize("version", [str(v) for v in SUPPORTED])
def test_the_sketch_requests_carry_pantograph_s_fields(version: str) -> None:
    lean = Recorder(V(version))
    read = sketch()
    asyncio.run(lean.draft_sketch(5, read))
    asyncio.run(lean.file_sketch("import Mathlib\nopen Real", DECLARATION, read))
    draft, file = lean.sent
    assert draft == ("goal.tactic", {"stateId": 5, "goalId": 0, "draft": (
        "by\n  have hxy : 0 < x * y := by sorry\n  have hx : 0 < x := sorry\n  nlinarith [hxy, hx]")})
    text = ("open Real\n\ntheorem t (x y : ℝ) (h₀ : 0 < x) (h₁ : 0 < y) : 0 < x * y + x := by\n"
            "  have hxy : 0 < x * y := by sorry\n  have hx : 0 < x := sorry\n  nlinarith [hxy, hx]\n")
    if V(version).distil:
        assert file == ("frontend.distil", {"file": text, "ignoreValues": False})
    else:
        assert file[0] == "frontend.process"
        assert (file[1]["file"], file[1]["sorrys"], file[1]["newConstants"]) == (text, True, False)
    for command, payload in lean.sent:
        check_payload(command, payload, V(version))


@pytest.mark.parametrize("version", ["0.3.4", NEWEST])
@pytest.mark.parametrize("route", ["draft", "file"])
def test_each_hole_starts_with_the_binders_and_the_holes_before_it_against_the_strict_double(
        version: str, route: str) -> None:
    result = run(InProcessReplay(DoubleServer(version)), route)
    assert result.kind is TacticKind.SUCCESS, result.errors
    # The file route of the newest is frontend.distil, whose goals come last hole first.
    order = (1, 0) if route == "file" and V(version).distil else (0, 1)
    # A draft's have is a let from 0.3.7 (Lean v4.22): it carries its hole's metavariable as its value.
    value = "?m.7" if route == "draft" and V(version) >= V("0.3.7") else None
    assert result.route == {"draft": "draft", "file": "distil" if V(version).distil else "process"}[route]
    assert contexts(result) == [
        ("hxy", order[0], BINDERS, "0 < x * y"),
        ("hx", order[1], [*BINDERS, ("hxy", "0 < x * y", value)], "0 < x"),
    ]
    assert {s.state_id for s in result.subgoals} == {result.state_id}


@pytest.mark.parametrize("version", ["0.3.4", "0.3.6"])
@pytest.mark.parametrize("route", ["draft", "file"])
def test_minilean_elaborates_a_sketch_with_the_right_contexts(version: str, route: str) -> None:
    result = run(InProcessReplay(MiniLean(version=V(version))), route, header="")
    assert result.kind is TacticKind.SUCCESS, result.errors
    # As the strict double (and Lean): frontend.distil (0.3.6) lists a declaration's holes last first.
    order = (1, 0) if route == "file" and V(version).distil else (0, 1)
    assert result.route == {"draft": "draft", "file": "distil" if V(version).distil else "process"}[route]
    assert contexts(result) == [
        ("hxy", order[0], BINDERS, "0 < x * y"),
        ("hx", order[1], [*BINDERS, ("hxy", "0 < x * y", None)], "0 < x"),
    ]


def test_minilean_s_distil_error_is_lean_s_io_error_with_its_messages() -> None:
    """`distilSearchTargets` throws the failing command's messages (`Message.toString`: position, severity, a final
    newline, joined by newlines) as a user error, which the REPL answers as an `io` error."""
    server = MiniLean(version=V("0.3.6"))
    file = f"{DECLARATION} := by\n  have hxy : 0 < x * y := by sorry\n  exact hzz\n"
    assert json.loads(server.handle(f"frontend.distil {json.dumps({'file': file, 'ignoreValues': False})}")) == {
        "error": "io", "desc": "<anonymous>:3:2: error: unknown identifier 'hzz'\n"}
    result = run(InProcessReplay(MiniLean(version=V("0.3.6"))), "file", "have hxy : 0 < x * y := by sorry\nexact hzz",
                 header="")
    assert (result.kind, result.route, result.errors) == (
        TacticKind.ERROR, "distil", ("<anonymous>:3:2: error: unknown identifier 'hzz'\n",))


def minilean() -> InProcessReplay:
    return InProcessReplay(MiniLean(version=V("0.3.4")))


def double() -> InProcessReplay:
    return InProcessReplay(DoubleServer("0.3.4"))


@pytest.mark.parametrize(("make", "route", "text", "kind", "error"), [
    # The closing tactic is checked on the main goal with the holes in scope: without `hx` it does not follow.
    (minilean, "draft", "have hxy : 0 < x * y := by sorry\nexact hxy", TacticKind.ERROR,
     "type mismatch\n  hxy\nhas type\n  0 < x * y : Prop\nbut is expected to have type\n  0 < x * y + x : Prop"),
    (minilean, "file", "have hxy : 0 < x * y := by sorry\nexact hzz", TacticKind.ERROR, "unknown identifier 'hzz'"),
    (minilean, "draft", "have hxy : 0 < x * y := by sorry\nhave hx : 0 < x := by sorry", TacticKind.ERROR,
     "unsolved goals\nx y : ℝ\nh₀ : 0 < x\nh₁ : 0 < y\nhxy : 0 < x * y\nhx : 0 < x\n⊢ 0 < x * y + x"),
    (minilean, "draft", "have hxy : 0 < x * y := by sorry\nlinarith [(hxy]", TacticKind.PARSE_ERROR,
     "<input>:1:52: unexpected token ']'; expected term"),
    (double, "draft", "have hxy : 0 < x * y := by sorry\nlinarith [(hxy]", TacticKind.PARSE_ERROR,
     "<Pantograph>:1:0: unexpected end of input; expected ')'"),
    (double, "draft", "have hxy : 0 < x * y := by sorry\nerror", TacticKind.ERROR,
     "linarith failed to find a contradiction"),
    (double, "file", "have hxy : 0 < q := by sorry\nuses hxy hq", TacticKind.ERROR, "unknown identifier 'hq'"),
])
def test_a_malformed_sketch_gives_lean_s_message(make: Callable[[], InProcessReplay], route: str, text: str,
                                                kind: TacticKind, error: str) -> None:
    result = run(make(), route, text, header="")
    assert (result.kind, result.errors, result.subgoals) == (kind, (error,), ())


def test_the_newest_distil_s_error_is_lean_s_messages() -> None:
    result = run(InProcessReplay(DoubleServer(NEWEST)), "file", "have hpi : 0 < π := by sorry\nlinarith", header="")
    assert (result.kind, result.route, result.errors) == (
        TacticKind.ERROR, "distil", ("<anonymous>:1:0: error: unknown identifier 'π'",))


def goal(*names: str, target: str = "P") -> Goal:
    return Goal(target, tuple(Variable(name, "T") for name in names))


@pytest.mark.parametrize(("goals", "problem"), [
    ([goal("x")], "Lean made 1 goal(s) of a sketch with 2 hole(s)"),
    ([goal("x"), goal("x")], "the hole 'a' has 2 goal(s) with the holes before it in context (none), not one"),
    ([goal("x", "a", "b"), goal("x")], "the hole 'b' has 0 goal(s) with the holes before it in context (a), not one"),
])
def test_goals_that_do_not_fit_the_holes_are_named_not_taken(goals: list[Goal], problem: str) -> None:
    holes = [Hole("a", "P"), Hole("b", "Q")]
    assert sketch_subgoals(holes, 3, goals) == problem
    fitting: Any = sketch_subgoals(holes, 3, [goal("x", "a"), goal("x")])
    assert [(s.name, s.goal_id) for s in fitting] == [("a", 1), ("b", 0)]

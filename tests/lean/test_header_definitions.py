"""Theorems whose header declares constants (PutnamBench's answer slots and helper definitions) start on one
long-lived worker: the scope load carries the header's scope commands only (`payloads.scope_text`), the start text
restates the whole header, so nothing is ever declared twice in the REPL's environment. Against the strict double
at 0.3.4 (`frontend.process {sorrys}`) and at the newest version it emulates (`frontend.distil`), a process where a
restart is the subject, else in this process; the double itself is as strict as Pantograph here (already declared,
goal states' own environments, sorry slots)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import signal
from typing import Any

import pytest

from burnqed.data.leanfile import lean_file_rows
from burnqed.data.sources import Item, convert_row
from burnqed.errors import LeanProtocolError
from burnqed.lean import payloads
from burnqed.lean.client import LeanWorker
from burnqed.lean.inprocess import InProcessReplay
from burnqed.lean.start import start_theorem
from burnqed.records.replies import TacticKind
from burnqed.records.theorem import Theorem
from leankit.answer import fill_slot, find_slots, reference_answer
from leankit.recheck import recheck_command
from leankit.text import find_depth0
from leankit.version import SUPPORTED, PantographVersion
from tests.conftest import double_argv
from tests.doubles.lean_double import Double
from tests.doubles.line_servers import DoubleServer
from tests.putnambench import putnam_text

V = PantographVersion.parse
NEWEST = str(SUPPORTED[-1])
# The 9 files whose header defines helpers (defs, an inductive), 6 with an answer slot (filled from the comment line
# under it), 5 plain ones; interleaved. None has a `let … :=` in its statement.
WITH_DEFINITIONS = ["putnam_1997_b1", "putnam_1997_b5", "putnam_2008_b1", "putnam_2008_b6", "putnam_2023_a5",
                    "putnam_2025_a3", "putnam_2025_a5", "putnam_2025_a6", "putnam_2025_b5"]
WITH_ANSWERS = ["putnam_2023_b1", "putnam_2022_b2", "putnam_2020_a1", "putnam_1999_a1", "putnam_1975_a1",
                "putnam_2023_b2"]
PLAIN = ["putnam_1962_a1", "putnam_1963_a2", "putnam_1964_a1", "putnam_1966_a1", "putnam_1968_a1"]
TWENTY = [*(name for trio in zip(WITH_DEFINITIONS, WITH_ANSWERS, PLAIN, strict=False) for name in trio),
          *WITH_DEFINITIONS[5:], WITH_ANSWERS[5]]

def answered(name: str) -> str:
    """The file with every answer slot written in from the comment line under it (PutnamBench's answer-given
    task)."""
    text = putnam_text(name)
    for slot in find_slots(text):
        value = reference_answer(text, slot.name)
        assert value is not None, (name, slot.name)
        text = fill_slot(text, slot.name, value)
    return text


def putnam_theorem(name: str) -> Theorem:
    """The theorem as burnqed builds it from the `.lean` file (its last declaration)."""
    converted = convert_row("benchmark", lean_file_rows(answered(name))[-1])
    assert isinstance(converted, Item), converted
    return converted.theorem


def statement_type(theorem: Theorem) -> str:
    """What the goal's target must read: the statement after its colon, whitespace collapsed."""
    assert theorem.signature is not None
    colon = find_depth0(theorem.signature, ":", not_followed_by="=")
    return " ".join(theorem.signature[colon + 1 :].split())


def test_the_scope_load_carries_the_scope_commands_only() -> None:
    header = putnam_theorem("putnam_2025_a3").header
    assert payloads.scope_text(header) == "open Finset Function"
    assert [" ".join(d.split())[:24] for d in payloads.header_declarations(header)] == [
        "abbrev putnam_2025_a3_so", "def GameString (n : ℕ) :", "def initialState (n : ℕ)", "def isValidMove {n : ℕ} ",
        "def IsValidGamePlay {n :", "inductive HasWinningStra", "def AliceHasWinningStrat"]
    written = ("open Real\n/-- doc -/\n@[simp]\ndef Foo.x : ℕ := 1\nopen Foo in\ndef y := x\nset_option maxHeartbeats 0"
               "\nmutual\ninductive A\n| a\nend\nnoncomputable section\nvariable (x : ℝ)\nopen Nat in")
    assert payloads.scope_text(written) == ("open Real\nset_option maxHeartbeats 0\nnoncomputable section\n"
                                            "variable (x : ℝ)\nopen Nat")
    minif2f = "import Mathlib\n\nset_option maxHeartbeats 400000\n\nopen BigOperators Real Nat Topology Rat"
    assert payloads.scope_text(minif2f) == payloads.header_text(minif2f)  # a header of scope commands: whole


@pytest.mark.parametrize(("version", "process"), [pytest.param("0.3.4", True, id="0.3.4", marks=pytest.mark.slow),
                                                   pytest.param(NEWEST, False, id=NEWEST)])
def test_twenty_putnambench_files_start_on_one_worker_and_a_restart_changes_nothing(version: str,
                                                                                   process: bool) -> None:
    """At 0.3.4 on the double's process, killed with SIGKILL midway (the client starts another); at the newest
    version in this process, restarted midway (what the scope reload does per version)."""
    theorems = [putnam_theorem(name) for name in TWENTY]
    assert len(theorems) == 20 and sum(bool(payloads.header_declarations(t.header)) for t in theorems) == 15

    async def run() -> None:
        async with contextlib.AsyncExitStack() as stack:
            lean: LeanWorker | InProcessReplay = (
                await stack.enter_async_context(LeanWorker(double_argv("--pantograph-version", version),
                                                           ready_timeout_s=10))
                if process else InProcessReplay(DoubleServer(version)))
            pids = set()
            for index, theorem in enumerate(theorems):
                if index == 10:  # a restart in the middle: the process dies, the next start gets a new one
                    if isinstance(lean, InProcessReplay):
                        await lean.restart()
                    else:
                        assert lean.pid is not None
                        os.kill(lean.pid, signal.SIGKILL)
                        await asyncio.sleep(0.2)
                state, (goal,) = await start_theorem(lean, theorem)
                pids.add(lean.pid if process else lean.generation)
                assert goal.target == statement_type(theorem), theorem.name
                assert (await lean.tactic(state, "uses " + goal.variables[0].name if goal.variables else "scope")
                        ).kind is TacticKind.SUCCESS
                if theorem.name == "putnam_1997_b1":
                    assert [v.name for v in goal.variables] == ["F", "hF"]
                    # the header's definition lives in the goal state's environment, not the REPL's
                    assert (await lean.tactic(state, "uses dist_to_int")).kind is TacticKind.SUCCESS
                    bare = await lean.start_goal(expr="True")
                    refused = await lean.tactic(bare, "uses dist_to_int")
                    assert refused.errors[0].endswith("unknown identifier 'dist_to_int'" +
                                                      ("\n" if V(version) < V("0.3.4") else ""))
            assert len(pids) == 2

    asyncio.run(run())


def request(double: Double, command: str, payload: dict[str, Any]) -> dict[str, Any]:
    reply: dict[str, Any] = json.loads(double.handle(f"{command} {json.dumps(payload)}"))
    return reply


def process(text: str, *, inherit: bool = False, sorrys: bool = False) -> dict[str, Any]:
    return {"file": text, "readHeader": False, "inheritEnv": inherit, "sorrys": sorrys, "typeErrorsAsGoals": False,
            "newConstants": True}


@pytest.mark.parametrize("version", ["0.3.4", NEWEST])
def test_the_double_keeps_the_repl_environment_as_pantograph_does(version: str) -> None:
    """What loading a declaring header with `inheritEnv: true` does: its constants stay, and restating them fails."""
    double = Double(io.BytesIO(), V(version))
    payload = process("open Nat\ndef f : ℕ := 1", inherit=True)
    if V(version) >= V("0.3.7"):
        payload = {k: v for k, v in payload.items() if k not in ("sorrys", "typeErrorsAsGoals")}
    assert request(double, "frontend.process", payload)["units"][1]["newConstants"] == ["f"]
    again = request(double, "frontend.process", payload)
    message = again["units"][1]["messages"][0]
    assert (message["data"] if isinstance(message, dict) else message).endswith("'f' has already been declared") \
        or "'f' has already been declared" in str(message)
    start = request(double, "goal.start", {"expr": "True"})["stateId"]
    # goal.start's state carries the REPL's environment: `f` resolves there, `g` nowhere
    used = request(double, "goal.tactic", {"stateId": start, "goalId": 0, "tactic": "uses f"})
    assert "nextStateId" in used, used
    unknown = request(double, "goal.tactic", {"stateId": start, "goalId": 0, "tactic": "uses g"})
    assert "unknown identifier 'g'" in json.dumps(unknown, ensure_ascii=False)
    if V(version).distil:
        restated = request(double, "frontend.distil", {"file": "def f : ℕ := 1\n\ntheorem t : f = 1 := by sorry\n",
                                                       "ignoreValues": False})
        assert restated == {"error": "io", "desc": "<anonymous>:1:0: error: 'f' has already been declared"}


@pytest.mark.parametrize("version", ["0.3.6", NEWEST])
def test_a_definition_left_sorry_is_coupled_to_the_theorem_that_uses_it_by_distil(version: str) -> None:
    """PyPantograph's test_distil_coupled: one target, the definition's type (named by it), then `?f n = n`."""
    double = Double(io.BytesIO(), V(version))
    text = "def f : Nat -> Nat := sorry\ntheorem property (n : Nat) : f n = n := sorry\n"
    (target,) = request(double, "frontend.distil", {"file": text, "ignoreValues": False})["targets"]
    assert [goal["target"]["pp"] for goal in target["goals"]] == ["Nat -> Nat", "?f n = n"]
    assert [[v["userName"] for v in goal["vars"]] for goal in target["goals"]] == [[], ["n"]]
    assert target["goals"][0]["userName"] == "f"
    # a definition left sorry that no theorem uses: a target of its own
    alone = request(double, "frontend.distil", {"file": "def g : Nat := sorry\ntheorem q (n : Nat) : n = n := sorry",
                                                "ignoreValues": False})["targets"]
    assert [[goal["target"]["pp"] for goal in t["goals"]] for t in alone] == [["Nat"], ["n = n"]]


def test_a_definition_left_sorry_has_a_unit_goal_of_its_own_from_process_sorrys() -> None:
    """Pantograph 0.3.4's `Frontend.collectSorrys`: the `sorry` term of the definition is a goal of its unit."""
    double = Double(io.BytesIO(), V("0.3.4"))
    text = "abbrev s : ℕ := sorry\ntheorem t (n : ℕ) : n = s := by sorry\n"
    units = request(double, "frontend.process", process(text, sorrys=True))["units"]
    assert [[goal["target"]["pp"] for goal in unit.get("goals", [])] for unit in units] == [["ℕ"], ["n = s"]]


@pytest.mark.parametrize("version", ["0.3.4", NEWEST])
def test_an_answer_slot_left_sorry_and_a_scope_command_that_needs_a_definition_fail_the_start(version: str) -> None:
    slot = putnam_theorem("putnam_2025_a3").model_copy(
        update={"header": "open Finset\nabbrev putnam_2025_a3_solution : ℕ → Prop := sorry\ndef AliceHasWinningStrategy"
                          " (n : ℕ) : Prop := n = n"})
    needs = Theorem(name="t", statement="∀ (n : ℕ), x = n", signature="(n : ℕ) : x = n",
                    header="def Foo.x : ℕ := 1\nopen Foo")

    async def run() -> None:
        lean = InProcessReplay(DoubleServer(version))  # the start's reading of the reply is the subject
        with pytest.raises(LeanProtocolError, match=r"leaves .*putnam_2025_a3_solution.* `sorry`"):
            await start_theorem(lean, slot)
        with pytest.raises(LeanProtocolError, match=r"unknown namespace 'Foo'.*the header declares: def Foo\.x"):
            await start_theorem(lean, needs)

    asyncio.run(run())


def test_the_recheck_refers_to_what_the_kernel_checked_when_it_was_declared() -> None:
    """An inductive type, its constructors and recursor cannot be re-added as a theorem or definition: the recheck
    neither collects nor renames them (putnam_2025_a3's `inductive HasWinningStrategy`)."""
    command = recheck_command("t")
    assert ("    | some (.inductInfo _) | some (.ctorInfo _) | some (.recInfo _) | some (.quotInfo _) => true\n"
            in command)
    assert "&& !names.contains used && !kernelChecked used then\n" in command


def said(units: list[dict[str, Any]]) -> list[list[str]]:
    """Each unit's messages as `severity: text` (0.3.4's message objects)."""
    return [[f"{m['severity']}: {m['data']}" for m in unit["messages"]] for unit in units]


def test_the_double_follows_the_definitions_a_theorem_uses_into_its_axioms_and_recheck() -> None:
    """As Lean's `#print axioms` does, a theorem reports the axioms of every definition it uses, transitively and
    through the names as Lean resolves them (a namespace, an `open`); a definition's markers count as a theorem's
    do. The recheck counts the checked constants reached (the theorem, `g`, `Foo.h`; an inductive is the kernel's)."""
    double = Double(io.BytesIO(), V("0.3.4"))
    text = ("inductive Game\n| start\ndef g (n : ℕ) : ℕ := if (by native_decide : 1 = 1) then n else 0\n"
            "namespace Foo\ndef h : ℕ := g 1\nend Foo\ndef unused : ℕ := by_elab smuggle\n"
            "def part : ℕ := (sorry : ℕ) + 1\nopen Foo\ntheorem t : h = 1 ∧ Game.start = Game.start := by decide\n"
            "theorem u : part = part := rfl\n#print axioms t\n#print axioms u\n#print axioms unused\n"
            f"{recheck_command('t')}\n{recheck_command('u')}")
    units = request(double, "frontend.process", process(text))["units"]
    assert said(units)[:10] == [[], [], [], [], [], [], ["warning: declaration uses 'sorry'"], [], [], []]
    assert said(units)[10:] == [
        ["information: 't' depends on axioms: [propext, Classical.choice, Quot.sound, Lean.ofReduceBool]"],
        ["information: 'u' depends on axioms: [propext, Classical.choice, Quot.sound, sorryAx]"],
        ["information: 'unused' depends on axioms: [propext, Classical.choice, Quot.sound, smuggled_false]"],
        ["information: burnqed kernel recheck: t ok (3 constants)"],
        ["information: burnqed kernel recheck: u ok (2 constants)"]]
    # a definition a header load put in the REPL's environment reaches the theorems of a later file too
    request(double, "frontend.process", process("def e : ℕ := by_elab smuggle", inherit=True))
    later = request(double, "frontend.process", process(f"theorem v : e = e := rfl\n#print axioms v\n"
                                                        f"{recheck_command('v')}"))["units"]
    assert said(later) == [
        [], ["information: 'v' depends on axioms: [propext, Classical.choice, Quot.sound, smuggled_false]"],
        ["information: burnqed kernel recheck: v ok (2 constants)"]]


@pytest.mark.parametrize("version", ["0.3.4", NEWEST])
def test_a_vector_literal_is_no_factorial(version: str) -> None:
    """Mathlib's `![P, Q]` (one token `![`) and `!₂[x, y]` need no `open Nat`, unlike the factorial `n !`: the real
    statements that write them start on the double."""
    theorems = [putnam_theorem(name) for name in ("putnam_1976_a2", "putnam_2018_b5", "putnam_2021_b3")]
    assert all("open Nat" not in (theorem.header or "") and "![" in (theorem.signature or "").replace("!₂[", "![")
               for theorem in theorems)

    async def run() -> None:
        lean = InProcessReplay(DoubleServer(version))
        for theorem in theorems:
            _, (goal,) = await start_theorem(lean, theorem)
            assert goal.target == statement_type(theorem), theorem.name
        factorial = Theorem(name="f", statement="∀ (n : ℕ), 0 < n !", signature="(n : ℕ) : 0 < n !")
        with pytest.raises(LeanProtocolError, match="'!'"):  # `n !` still needs `open Nat`
            await start_theorem(lean, factorial)

    asyncio.run(run())

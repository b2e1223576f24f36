"""The request side: what burnqed sends Pantograph, per command and version, against REQUESTS.md.

Pantograph's derived `FromJson` refuses a payload that lacks any non-Option field (defaults or not), so a
request missing one runs nothing. These tests pin every payload the client sends to the required set of
`tests/fixtures/pantograph/REQUESTS.md` (transcribed below, independently of the client's and the doubles'
code) plus the optional fields used, with the right JSON types; then send them to the strict double and
to the replay server at every supported version.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from burnqed.lean import payloads
from burnqed.lean.client import FENCED, LeanWorker
from burnqed.lean.commands import PantographCommands
from burnqed.lean.inprocess import InProcessReplay
from burnqed.lean.soundness import assemble_proof, check_proof_text
from burnqed.records.replies import TacticKind
from burnqed.records.theorem import Theorem
from leankit.corpus import Corpus, load_corpus
from leankit.version import SUPPORTED, PantographVersion
from minilean.replay.replay_server import ReplayServer, with_conformance
from minilean.schema import request_problem
from tests.conftest import double_argv

V = PantographVersion.parse
VERSIONS = [str(v) for v in SUPPORTED]

# REQUESTS.md, "required fields (must be present)", per command and version.


def required(command: str, version: PantographVersion) -> set[str]:
    if command == "goal.tactic":
        return {"stateId", "goalId"} if version <= V("0.3.2") else {"stateId"}
    if command == "goal.print":
        return {"stateId"}
    if command == "goal.delete":
        return {"stateIds"}
    if command == "frontend.process":
        if version == V("0.2.25"):
            return {"invocations", "sorrys", "typeErrorsAsGoals", "newConstants"}
        if version <= V("0.3.1"):
            return {"readHeader", "inheritEnv", "invocations", "sorrys", "typeErrorsAsGoals", "newConstants"}
        if version <= V("0.3.6"):
            return {"readHeader", "inheritEnv", "sorrys", "typeErrorsAsGoals", "newConstants"}
        # 0.3.7 dropped `sorrys`/`typeErrorsAsGoals` (PyPantograph v0.3.7+ sends neither; Repl.lean reads neither).
        return {"readHeader", "inheritEnv", "newConstants"}
    if command == "frontend.distil":  # from 0.3.6; `ignoreValues : Bool := true` is required all the same
        return {"file", "ignoreValues"}
    return set()  # goal.start, options.set, reset, stat


OPTIONAL = {
    "goal.start": {"expr", "copyFrom", "levels", "name"},
    "goal.tactic": {"goalId", "tactic", "mode", "expr", "have", "let", "draft", "autoResume", "binderName"},
    "goal.print": {"rootExpr", "parentExprs", "parentExpr", "goals", "extraMVars"},
    "goal.delete": set(),
    "frontend.process": {"file", "fileName", "invocations"},
    "frontend.distil": {"binderName"},
    "options.set": {"timeout", "automaticMode", "printJsonPretty", "printExprPretty", "printExprAST",
                    "printDependentMVars", "noRepeat", "printAuxDecls", "printImplementationDetailHyps"},
    "reset": set(),
    "stat": set(),
}


def expected_type(key: str, version: PantographVersion) -> type | tuple[type, ...]:
    if key in ("stateId", "goalId", "timeout"):
        return int
    if key == "stateIds":
        return list
    if key == "invocations":
        return str if version >= V("0.3.2") else bool
    if key in ("tactic", "expr", "draft", "copyFrom", "file"):
        return str
    return bool


def check_payload(command: str, payload: Mapping[str, Any], version: PantographVersion) -> None:
    keys = set(payload)
    missing = required(command, version) - keys
    assert not missing, f"{command} at {version} lacks required {sorted(missing)}: {dict(payload)}"
    unknown = keys - required(command, version) - OPTIONAL[command]
    assert not unknown, f"{command} at {version} sends fields Pantograph does not have: {sorted(unknown)}"
    for key, value in payload.items():
        wanted = expected_type(key, version)
        assert isinstance(value, wanted) and not (wanted is int and isinstance(value, bool)), (command, key, value)
        if isinstance(value, int):
            assert value >= 0
        if isinstance(value, list):
            assert all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value)
    assert request_problem(version, command, payload) is None


REPLIES: dict[str, dict[str, Any]] = {
    "goal.start": {"stateId": 0, "root": "_uniq.1"},
    "goal.tactic": {"nextStateId": 1, "goals": [], "messages": [], "hasSorry": False, "hasUnsafe": False},
    "goal.print": {"root": {"pp": "⋯"}, "goals": [], "extraMVars": [], "rootHasSorry": False,
                   "rootHasUnsafe": False, "rootHasMVar": False},
    "goal.delete": {},
    "frontend.process": {"units": []},
    "frontend.distil": {"targets": [{"stateId": 2, "goals": [{"name": "_uniq.9", "target": {"pp": "0 < π"},
                                                               "vars": [], "fragment": "tactic"}]}]},
    "reset": {"nGoals": 0},
    "stat": {"nGoals": 0},
}


class Recorder(PantographCommands):
    """Every command method, recording the requests instead of sending them."""

    def __init__(self, version: PantographVersion) -> None:
        self.version = version
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def request(
        self, command: str, payload: Mapping[str, Any], timeout_s: float | None = None, *, scope: str | None = None
    ) -> dict[str, Any]:
        self.sent.append((command, dict(payload)))
        if command == "frontend.process" and payload.get("sorrys"):
            return {"units": [{"boundary": [0, 9], "messages": [], "goalStateId": 3,
                               "goals": REPLIES["frontend.distil"]["targets"][0]["goals"]}]}
        return REPLIES[command]


HEADER = "import Mathlib\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology"
DECLARATION = "theorem pi_pos' (n : ℕ) (h₀ : 0 < n) : 0 < π * n !"


async def every_command(lean: PantographCommands, statement: str, proof: str | None, tactic: str,
                        theorem: tuple[str | None, str] | None = None) -> None:
    if theorem is not None:
        await lean.start_theorem(*theorem)
    state = await lean.start_goal(expr=statement)
    await lean.goals(state)
    result = await lean.tactic(state, tactic)
    await lean.tactic(state, tactic, goal_id=0)
    await lean.root_info(result.state_id if result.state_id is not None else state)
    await lean.delete([state])
    if proof is not None:
        await lean.compile(proof)
    await lean.stat()
    await lean.reset()


@pytest.mark.parametrize("version", VERSIONS)
def test_every_request_carries_the_required_fields_with_their_types(version: str) -> None:
    recorder = Recorder(V(version))
    asyncio.run(every_command(recorder, "p", "theorem t : p := by\n  trivial\n", "trivial", (HEADER, DECLARATION)))
    asyncio.run(recorder.start_goal(copy_from="Nat.add_comm"))
    options = payloads.options_set(V(version), timeout_ms=25000, automatic_mode=True)
    sent = [*recorder.sent, ("options.set", options)]
    if V(version).repl_scope:
        sent.append(("frontend.process", dict(payloads.scope_load(V(version), HEADER))))
    expected = set(OPTIONAL) if V(version).distil else set(OPTIONAL) - {"frontend.distil"}
    assert {command for command, _ in sent} == expected
    for command, payload in sent:
        check_payload(command, payload, V(version))
    start = sent[0]
    text = "set_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology\n\n" + DECLARATION + " := by sorry\n"
    if V(version).distil:
        assert start == ("frontend.distil", {"file": text, "ignoreValues": False})
    else:
        assert start[0] == "frontend.process" and start[1]["file"] == text and start[1]["sorrys"] is True


@pytest.mark.parametrize("version", VERSIONS)
def test_leaving_out_any_required_field_is_refused_like_pantograph(version: str) -> None:
    recorder = Recorder(V(version))
    asyncio.run(every_command(recorder, "p", "theorem t : p := by\n  trivial\n", "trivial"))
    checked = 0
    for command, payload in recorder.sent:
        for key in required(command, V(version)):
            problem = request_problem(V(version), command, {k: v for k, v in payload.items() if k != key})
            assert problem is not None and f".{key}:" in problem, (command, key, problem)
            checked += 1
    assert checked >= 3


def test_the_version_specific_fields():
    old, new = V("0.3.1"), V("0.3.2")
    assert payloads.frontend_process(old, "x")["invocations"] is False
    assert "invocations" not in payloads.frontend_process(new, "x")
    assert request_problem(new, "frontend.process", payloads.frontend_process(old, "x")) == (
        "Pantograph.Protocol.FrontendProcess.invocations?: String expected")
    assert request_problem(old, "frontend.process", payloads.frontend_process(new, "x")) == (
        "Pantograph.Protocol.FrontendProcess.invocations: Bool expected")
    assert "readHeader" not in payloads.frontend_process(V("0.2.25"), "x")
    assert payloads.options_set(V("0.2.25"), timeout_ms=5, automatic_mode=True) == {"automaticMode": True}
    assert request_problem(new, "goal.tactic", {"stateId": 0, "tactic": "simp"}) == (
        "Pantograph.Protocol.GoalTactic.goalId: Natural number expected")
    assert request_problem(V("0.3.3"), "goal.tactic", {"stateId": 0, "tactic": "simp"}) is None
    # 0.3.7 dropped `sorrys`: a payload written for 0.3.6 still parses (unknown keys are ignored), the other way
    # round it does not.
    assert "sorrys" not in payloads.frontend_process(V("0.3.7"), "x")
    assert request_problem(V("0.3.6"), "frontend.process", payloads.frontend_process(V("0.3.7"), "x")) == (
        "Pantograph.Protocol.FrontendProcess.sorrys: Bool expected")
    with pytest.raises(ValueError, match=r"use frontend\.distil"):
        payloads.frontend_process(V("0.3.15"), "x", sorrys=True)
    assert request_problem(V("0.3.15"), "frontend.distil", {"file": "x"}) == (
        "Pantograph.Protocol.FrontendDistil.ignoreValues: Bool expected")
    assert request_problem(V("0.3.5"), "frontend.distil", {"file": "x"}) is None  # no such command: not judged
    assert payloads.scope_load(V("0.3.15"), HEADER) == {
        "file": "set_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology", "readHeader": False,
        "inheritEnv": True, "newConstants": False}


def logged(log: Path, *, piped: bool = True) -> list[tuple[str, dict[str, Any]]]:
    """The requests a double logged, the client's fences left out: over a pipe each request that elaborates a file is
    followed at once by its `expr.echo` of a fresh 18-digit numeral (`LeanWorker._fence`), checked here; an
    in-process double (`piped=False`) has no stdout to print on, and no fence."""
    rows = []
    for line in log.read_text(encoding="utf-8").splitlines():
        command, _, body = line.partition(" ")
        rows.append((command, json.loads(body)))
    for index, (command, _) in enumerate(rows):
        if command in FENCED and piped:
            following = rows[index + 1] if index + 1 < len(rows) else ("", {})
            assert following[0] == "expr.echo" and re.fullmatch(r"\(\d{18} : Nat\)", following[1]["expr"]), following
    return [row for row in rows if row[0] != "expr.echo"]


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_the_strict_double_accepts_every_request_at_every_version(version: str, tmp_path: Path) -> None:
    log = tmp_path / "requests.log"

    async def run() -> None:
        async with LeanWorker(double_argv("--pantograph-version", version, "--log", str(log)),
                              ready_timeout_s=10) as lean:
            assert lean.version == V(version)
            theorem = (HEADER if V(version).repl_scope else None, DECLARATION.replace("π * n !", "n"))
            await every_command(lean, "p", "theorem t : p := by\n  done\n\n#print axioms t\n", "done", theorem)

    asyncio.run(run())
    rows = logged(log)
    start = "frontend.distil" if V(version).distil else "frontend.process"
    assert [command for command, _ in rows][:2] == ["options.set", start]
    if V(version).repl_scope:  # the theorem is started, then the header's scope loaded for the scoped requests
        assert rows[2][0] == "frontend.process" and rows[2][1]["inheritEnv"] is True
        assert rows[2][1]["file"].startswith("set_option maxHeartbeats")
    for command, payload in rows:
        check_payload(command, payload, V(version))


@pytest.fixture(scope="module")
def replay_corpus() -> Corpus:
    """The corpus `python -m minilean.replay` answers from (the embedded world and the conformance theorems), built
    once for the module."""
    from leankit.world import embedded_corpus

    return with_conformance(embedded_corpus())


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_the_replay_server_accepts_every_request_and_verifies_a_proof_at_every_version(
        version: str, replay_corpus: Corpus) -> None:
    """The replay server in this process (its requests are judged by its own `handle`, as in its process; the
    client's start and the replay's version greeting over the pipe: the strict double's test above, and
    tests/lean/test_version.py), sent first the `options.set` a `LeanWorker` sends after `ready.`."""
    spec = load_corpus().by_name("algebra_2x_plus_3_eq_11")
    assert spec is not None
    # restated in binder form: `x` in context
    proof = assemble_proof(Theorem.from_recorded(spec), ["intro h₀", "linarith"])
    assert proof is not None

    async def run() -> None:
        lean = InProcessReplay(ReplayServer(replay_corpus, version=V(version)))
        assert await lean.request("options.set", payloads.options_set(V(version), timeout_ms=25000,
                                                                      automatic_mode=True)) == {}
        assert lean.version == V(version)
        binder_form = f"theorem {spec.name} (x : ℝ) (h₀ : 2 * x + 3 = 11) : x = 4"
        header = spec.header if V(version).repl_scope else None
        await every_command(lean, spec.statement, None, "intro x h₀", (header, binder_form))
        verdict = await check_proof_text(lean, spec.name, proof, index_header=Theorem.from_recorded(spec).header)
        assert verdict.ok and verdict.compiled, verdict.reason

    asyncio.run(run())


def test_a_step_with_a_semicolon_is_sent_as_one_tactic():
    """Pantograph parses `goal.tactic`'s text as one tactic: a step `t1; t2` goes as `(t1; t2)`."""
    assert payloads.goal_tactic(3, "intro x; simp")["tactic"] == "(intro x; simp)"
    assert payloads.goal_tactic(3, "constructor <;> simp")["tactic"] == "constructor <;> simp"
    assert payloads.goal_tactic(3, "simp")["tactic"] == "simp"


@pytest.mark.slow
@pytest.mark.parametrize("server", ["double", "replay"])
def test_a_bare_sequence_is_a_parse_error_and_the_sent_step_is_not(server: str) -> None:
    """The strict doubles refuse `t1; t2` as Pantograph's parser does; the client's `(t1; t2)` runs."""
    spec = load_corpus().by_name("algebra_2x_plus_3_eq_11")
    assert spec is not None

    async def run() -> None:
        if server == "double":
            argv, statement, step = double_argv(), "p", "intro x; done"
        else:
            argv = [sys.executable, "-m", "minilean.replay", "Mathlib"]
            statement, step = spec.statement, "intro x h₀; linarith"
        async with LeanWorker(argv, ready_timeout_s=20) as lean:
            state = await lean.start_goal(expr=statement)
            bare = await lean.request("goal.tactic", {"stateId": state, "goalId": 0, "tactic": step})
            assert bare["parseError"].endswith("expected end of input"), bare
            trailing = await lean.request("goal.tactic", {"stateId": state, "goalId": 0, "tactic": "intro x;"})
            assert "parseError" in trailing
            sent = await lean.tactic(state, step)
            assert sent.kind is TacticKind.SUCCESS and sent.closed_all_goals == (server == "replay"), sent

    asyncio.run(run())

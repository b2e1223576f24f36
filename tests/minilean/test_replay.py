"""The replay Lean server over real pipes: wire shapes against the Pantograph v0.3.4 fixtures, the bundled
corpus end to end (every recorded proof via goal.tactic and via frontend.process), errors and bad input.

Every test spawns `python -m minilean.replay` and waits on its replies with a deadline (no sleeps).
"""

from __future__ import annotations

import io
import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from burnqed.lean import payloads
from burnqed.lean.protocol import parse_compile_reply
from burnqed.lean.soundness import check_compile, compile_text
from burnqed.records.theorem import Theorem
from leankit.corpus import bundled_corpus_path, explicit_binders, load_corpus, proof_from_binder_start
from minilean.replay.replay_server import ReplayServer, main, serve
from tests.lean.scripts import assemble_script

FIXTURES = Path(__file__).parents[1] / "fixtures" / "pantograph"
REPLY_TIMEOUT_S = 5.0
START_TIMEOUT_S = 30.0  # a process start on a loaded 2-core machine can take seconds; the check is `ready.` itself


class Replay:
    """A replay server process; `send` writes one request line and returns the parsed reply."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "minilean.replay", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._buffer = b""
        self.raw_lines: list[bytes] = []
        assert self.read_line(START_TIMEOUT_S) == b"ready."

    def read_line(self, timeout: float = REPLY_TIMEOUT_S) -> bytes:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not selector.select(remaining):
                    raise TimeoutError(f"no reply within {timeout}s")
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise EOFError("replay server closed stdout")
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        self.raw_lines.append(line)
        return line

    def send_raw(self, line: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode("utf-8") + b"\n")
        self.proc.stdin.flush()
        return self.read_line().decode("utf-8")

    def send(self, command: str, payload: dict[str, Any]) -> Any:
        return json.loads(self.send_raw(f"{command} {json.dumps(payload, ensure_ascii=False)}"))

    def close(self) -> int:
        """Send the empty line that ends the REPL and return the exit code."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(b"\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        return self.proc.wait(timeout=REPLY_TIMEOUT_S)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def server() -> Iterator[Replay]:
    replay = Replay("repl", "Mathlib")
    try:
        yield replay
    finally:
        replay.kill()


def process(file: str, **flags: Any) -> dict[str, Any]:
    """A `frontend.process` payload with every field Pantograph 0.3.4 requires (flags override)."""
    required = {"readHeader": False, "inheritEnv": False, "sorrys": False, "typeErrorsAsGoals": False,
                "newConstants": False}
    return {"file": file, **required, **flags}


def fixture_lines(name: str) -> list[dict[str, str]]:
    lines = [json.loads(line) for line in (FIXTURES / name).read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if "send" in line]


def fixture_reply(name: str, send_prefix: str) -> Any:
    for line in fixture_lines(name):
        if line["send"].startswith(send_prefix):
            return json.loads(line["recv"])
    raise AssertionError(f"{name} has no line starting {send_prefix!r}")


def shape(value: Any) -> Any:
    """Keys in order, recursively; lists by the shape of their first element; scalars by type."""
    if isinstance(value, dict):
        return [(key, shape(item)) for key, item in value.items()]
    if isinstance(value, list):
        return ["list", shape(value[0])] if value else ["list"]
    return type(value).__name__


def without_names(goals: list[dict[str, Any]]) -> list[Any]:
    """Goals minus their volatile `_uniq.N` names."""
    return [
        ([(v["userName"], v["type"]["pp"], v["isInaccessible"]) for v in g["vars"]], g.get("userName"), g["target"])
        for g in goals
    ]


# -- the bundled corpus end to end ---------------------------------------------------------------------


@pytest.mark.slow
def test_every_recorded_proof_replays_over_the_wire_and_through_frontend_process(server: Replay) -> None:
    corpus = load_corpus()
    checked = 0
    server.send("reset", {})  # whatever earlier tests left
    created = 0  # goal states made since the last reset: `reset` must report and drop exactly these
    for theorem in corpus.theorems:
        assert server.send("reset", {})["nGoals"] == created, theorem.name
        created = 0
        for number, proof in enumerate(theorem.proofs):
            # Alternate the two ways of starting a theorem.
            start = {"copyFrom": theorem.name} if number % 2 else {"expr": theorem.statement}
            state = server.send("goal.start", start)["stateId"]
            created += 1
            reply: dict[str, Any] = {}
            for tactic in proof:
                # As the client sends it: a recorded step `t1; t2` goes as `(t1; t2)`.
                reply = server.send("goal.tactic", payloads.goal_tactic(state, tactic))
                assert "nextStateId" in reply, (theorem.name, proof, tactic, reply)
                state = reply["nextStateId"]
                created += 1
            assert reply["goals"] == [] and reply["hasSorry"] is False, (theorem.name, proof)
            printed = server.send("goal.print", {"stateId": state, "rootExpr": True})
            assert (printed["rootHasSorry"], printed["rootHasMVar"]) == (False, False)
            assert printed["root"] == {"pp": "⋯"}
            # The client's compile text: no imports, the theorem, `#print axioms` (burnqed.lean.soundness).
            # ... which restates the theorem in binder form: the proof as it runs from there (a proof recorded only
            # from the ∀ root, such as a lone `tauto`, has no such form: data preparation leaves it out too).
            binders = explicit_binders(theorem.statement)
            restated = proof_from_binder_start(proof, binders[0] if binders else [])
            if restated is None:
                continue
            expected = compile_text(assemble_script(theorem, restated), theorem.name,
                                    Theorem.from_recorded(theorem).header)
            reply = server.send("frontend.process", process(expected.text, newConstants=True))
            verdict = check_compile(parse_compile_reply(reply), expected)
            assert verdict.ok, (theorem.name, proof, verdict.reason)
            checked += 1
    assert checked == sum(len(theorem.binder_proofs()) for theorem in corpus.theorems)


@pytest.mark.slow
def test_recorded_failures_answer_with_their_recorded_message(server: Replay) -> None:
    theorem = load_corpus().by_name("algebra_linear_function_value")
    assert theorem is not None
    state = server.send("goal.start", {"copyFrom": theorem.name})["stateId"]
    state = server.send("goal.tactic", {"stateId": state, "tactic": "intro f h₀"})["nextStateId"]
    reply = server.send("goal.tactic", {"stateId": state, "tactic": "exact   h₀ 4"})
    assert reply["messages"][0]["data"] == (
        "type mismatch\n  h₀ 4\nhas type\n  f 4 = 3 * 4 + 2 : Prop\nbut is expected to have type\n  f 4 = 14 : Prop"
    )
    assert "nextStateId" not in reply and "goals" not in reply


# -- shapes against the fixtures -----------------------------------------------------------------------


@pytest.mark.slow
def test_goal_start_and_tactic_shapes_match_the_fixture(server: Replay) -> None:
    assert server.send("options.set", {"automaticMode": True}) == {}
    started = server.send("goal.start", {"expr": "∀ (p q: Prop), p ∨ q → q ∨ p"})
    expected = fixture_reply("v0.3.4_automatic_mode_on.jsonl", "goal.start")
    assert shape(started) == shape(expected)
    assert started["stateId"] == 0 and started["root"].startswith("_uniq.")

    intro = server.send("goal.tactic", {"stateId": 0, "tactic": "intro p q h"})
    expected_intro = fixture_reply("v0.3.4_automatic_mode_on.jsonl", 'goal.tactic {"stateId":0')
    assert shape(intro) == shape(expected_intro)
    assert [var["userName"] for var in intro["goals"][0]["vars"]] == ["p", "q", "h"]

    cases = server.send("goal.tactic", {"stateId": 1, "tactic": "cases h"})
    expected_cases = fixture_reply("v0.3.4_automatic_mode_on.jsonl", 'goal.tactic {"stateId":1')
    assert shape(cases) == shape(expected_cases)
    assert without_names(cases["goals"]) == without_names(expected_cases["goals"])
    # The fvars of p and q keep their names across states, as in Lean.
    assert cases["goals"][0]["vars"][0]["name"] == intro["goals"][0]["vars"][0]["name"]

    right = server.send("goal.tactic", {"stateId": 2, "tactic": "right"})
    assert [goal.get("userName") for goal in right["goals"]] == ["inl.h", "inr"]
    assert right["goals"][1]["name"] == cases["goals"][1]["name"]  # the untouched sibling keeps its mvar


@pytest.mark.slow
def test_automatic_mode_off_drops_sibling_goals(server: Replay) -> None:
    server.send("options.set", {"automaticMode": False})
    server.send("goal.start", {"expr": "∀ (p q : Prop), p ∨ q → q ∨ p"})
    server.send("goal.tactic", {"stateId": 0, "tactic": "intro p q h"})
    server.send("goal.tactic", {"stateId": 1, "tactic": "cases h"})
    reply = server.send("goal.tactic", {"stateId": 2, "tactic": "right"})
    assert [goal.get("userName") for goal in reply["goals"]] == ["inl.h"]


@pytest.mark.slow
def test_tactic_failure_has_the_fixture_shape_and_shows_the_goal(server: Replay) -> None:
    server.send("goal.start", {"copyFrom": "algebra_2x_plus_3_eq_11"})
    server.send("goal.tactic", {"stateId": 0, "tactic": "intro x h₀"})
    reply = server.send("goal.tactic", {"stateId": 1, "tactic": "positivity"})
    expected = fixture_reply("v0.3.4_tactic.jsonl", 'goal.tactic {"stateId":1,"tactic":"apply')
    assert shape(reply) == shape(expected)
    assert reply["messages"][0]["severity"] == "error"
    unknown = server.send("goal.tactic", {"stateId": 1, "tactic": "nlinarith [sq_nonneg (x - 4)]"})
    assert unknown["messages"][0]["data"] == (
        "linarith failed to find a contradiction\nx : ℝ\nh₀ : 2 * x + 3 = 11\na✝ : x < 4\n⊢ False"
    )
    missing = server.send("goal.tactic", {"stateId": 1, "tactic": "exact foo h₀"})
    assert missing["messages"][0]["data"] == "unknown identifier 'foo'"
    # A failure leaves state 1 usable.
    assert server.send("goal.tactic", {"stateId": 1, "tactic": "linarith"})["goals"] == []


@pytest.mark.slow
def test_sorry_closes_the_goal_with_has_sorry_and_taints_the_root(server: Replay) -> None:
    server.send("goal.start", {"copyFrom": "logic_or_comm"})
    reply = server.send("goal.tactic", {"stateId": 0, "tactic": "sorry"})
    expected = fixture_reply("v0.3.4_tactic.jsonl", 'goal.tactic {"stateId":0,"tactic":"sorry"}')
    assert reply == {**expected, "nextStateId": reply["nextStateId"]}
    assert reply["hasSorry"] is True and reply["goals"] == []
    printed = server.send("goal.print", {"stateId": reply["nextStateId"], "rootExpr": True})
    assert printed["rootHasSorry"] is True and printed["rootHasMVar"] is False
    admitted = server.send("goal.tactic", {"stateId": 0, "tactic": "(intro p q h; exact (admit))"})
    assert admitted["hasSorry"] is True


@pytest.mark.slow
def test_goal_print_shape_and_open_goals(server: Replay) -> None:
    server.send("goal.start", {"expr": "∀ (p q : Prop), p ∨ q → q ∨ p"})
    server.send("goal.tactic", {"stateId": 0, "tactic": "intro p q h"})
    printed = server.send("goal.print", {"stateId": 1, "parentExprs": True, "rootExpr": True})
    expected = fixture_reply("v0.3.4_tactic.jsonl", "goal.print")
    assert shape(printed) == shape(expected)
    assert printed["rootHasMVar"] is True and printed["root"]["pp"].startswith("?m.")
    with_goals = server.send("goal.print", {"stateId": 1, "goals": True})
    assert list(with_goals) == ["rootHasUnsafe", "rootHasSorry", "rootHasMVar", "goals", "extraMVars"]
    assert with_goals["goals"][0]["target"] == {"pp": "q ∨ p"}


@pytest.mark.slow
def test_combinators_bullets_and_case(server: Replay) -> None:
    server.send("goal.start", {"copyFrom": "algebra_linear_system_sum_diff"})
    server.send("goal.tactic", {"stateId": 0, "tactic": "intro x y h₀ h₁"})
    assert server.send("goal.tactic", {"stateId": 1, "tactic": "constructor\n· linarith\n· linarith"})["goals"] == []
    assert server.send("goal.tactic", {"stateId": 1, "tactic": "refine ⟨?_, ?_⟩ <;> linarith"})["goals"] == []
    assert server.send("goal.tactic", {"stateId": 1, "tactic": "(constructor; all_goals linarith)"})["goals"] == []
    reply = server.send("goal.tactic", {"stateId": 1, "tactic": "constructor\ncase right => linarith"})
    assert [goal["userName"] for goal in reply["goals"]] == ["left"]
    bullet = server.send("goal.tactic", {"stateId": 1, "tactic": "constructor\n· skip"})
    assert bullet["messages"][0]["data"].startswith("unsolved goals\ncase left\n")
    second = server.send("goal.tactic", {"stateId": 1, "tactic": "constructor"})["nextStateId"]
    on_second = server.send("goal.tactic", {"stateId": second, "goalId": 1, "tactic": "linarith"})
    assert [goal["userName"] for goal in on_second["goals"]] == ["left"]


@pytest.mark.slow
def test_parse_errors(server: Replay) -> None:
    server.send("goal.start", {"copyFrom": "logic_or_comm"})
    assert server.send("goal.tactic", {"stateId": 0, "tactic": "exact (foo"}) == {
        "parseError": "<input>:1:10: unexpected end of input; expected ')'", "hasSorry": False, "hasUnsafe": False,
    }
    assert server.send("goal.tactic", {"stateId": 0, "tactic": "exact foo]"})["parseError"].startswith("<input>:1:9:")
    assert server.send("goal.tactic", {"stateId": 0, "tactic": "   "})["parseError"] == (
        "<input>:1:0: unexpected end of input"
    )
    assert server.send("goal.tactic", {"stateId": 0, "tactic": "frobnicate h"})["parseError"] == (
        "<input>:1:0: unknown tactic"
    )
    # goal.tactic parses ONE tactic (`runParserCategory` must reach the end): no bare `;` sequence.
    assert server.send("goal.tactic", {"stateId": 0, "tactic": "intro p q h; exact h"})["parseError"] == (
        "<input>:1:11: expected end of input"
    )
    assert server.send("goal.tactic", {"stateId": 0, "tactic": "intro p q h;"})["parseError"] == (
        "<input>:1:11: expected end of input"
    )
    assert "nextStateId" in server.send("goal.tactic", {"stateId": 0, "tactic": "(intro p q h; skip)"})


@pytest.mark.slow
def test_index_and_argument_errors(server: Replay) -> None:
    expected = fixture_reply("v0.3.4_errors.jsonl", "goal.tactic")
    assert server.send("goal.tactic", {"stateId": 7, "tactic": "simp"}) == expected
    server.send("goal.start", {"copyFrom": "logic_or_comm"})
    assert server.send("goal.tactic", {"stateId": 0, "goalId": 1, "tactic": "simp"}) == {
        "error": "index",
        "desc": "Invalid goal index 1",
    }
    assert server.send("goal.print", {"stateId": 9}) == {"error": "index", "desc": "Invalid state index 9"}
    assert server.send("goal.start", {"copyFrom": "no_such_theorem"}) == {
        "error": "index",
        "desc": "Symbol not found: no_such_theorem",
    }
    unknown = server.send("goal.start", {"expr": "1 + 1 = 3"})
    assert unknown["error"] == "elab" and "replay" in unknown["desc"]
    assert server.send("goal.start", {"expr": "(1 + 1 = 3"})["error"] == "parsing"
    assert server.send("goal.start", {})["error"] == "arguments"
    assert server.send("goal.tactic", {"stateId": 0}) == {
        "error": "operation", "desc": "Exactly one of {tactic, mode, expr, have, let, draft} must be supplied"}
    assert server.send("goal.tactic", {"stateId": "zero", "tactic": "simp"}) == {
        "error": "command",
        "desc": "Unable to parse json: Pantograph.Protocol.GoalTactic.stateId: Natural number expected",
    }


@pytest.mark.slow
def test_command_errors_match_the_fixture_and_garbage_is_answered(server: Replay) -> None:
    assert server.send("invalid", {"name": "Nat.add_one"}) == fixture_reply("v0.3.4_errors.jsonl", "invalid")
    for garbage in ["garbage", 'goal.start {"expr":', "goal.tactic [1,2]", "{not json", "{}", "\x00\x01 {}"]:
        reply = json.loads(server.send_raw(garbage))
        assert reply["error"] == "command", (garbage, reply)
    assert json.loads(server.send_raw('goal.start {"expr":'))["desc"].startswith("Unable to parse json: ")
    deep = json.loads(server.send_raw("stat " + "[" * 100_000 + "]" * 100_000))
    assert deep == {"error": "command", "desc": "Unable to parse json: maximum nesting depth exceeded"}
    server.send("goal.start", {"copyFrom": "logic_or_comm"})
    nested = server.send("goal.tactic", {"stateId": 0, "tactic": "(" * 5000 + "simp" + ")" * 5000})
    assert nested["messages"][0]["data"].startswith("maximum recursion depth has been reached")
    assert server.send("stat", {}) == {"nGoals": 1}
    assert server.close() == 0


@pytest.mark.slow
def test_options_roundtrip_and_reset_stat_counting(server: Replay) -> None:
    assert server.send("options.set", {"printExprAST": True}) == {}
    assert server.send("options.print", {}) == fixture_reply("v0.3.4_errors.jsonl", "options.print")
    assert server.send("stat", {}) == {"nGoals": 0}
    server.send("goal.start", {"copyFrom": "logic_or_comm"})
    server.send("goal.start", {"copyFrom": "logic_and_comm"})
    server.send("goal.tactic", {"stateId": 0, "tactic": "intro p q h"})
    assert server.send("stat", {}) == {"nGoals": 3}
    assert server.send("goal.delete", {"stateIds": [1, 42]}) == {}
    assert server.send("stat", {}) == {"nGoals": 2}
    assert server.send("reset", {}) == {"nGoals": 2}
    assert server.send("stat", {}) == {"nGoals": 0}
    assert server.send("goal.start", {"copyFrom": "logic_or_comm"})["stateId"] == 0


@pytest.mark.slow
def test_output_is_raw_utf8_one_line_per_reply(server: Replay) -> None:
    server.send("goal.start", {"copyFrom": "algebra_2x_plus_3_eq_11"})
    server.send("goal.tactic", {"stateId": 0, "tactic": "intro x h₀"})
    server.send("goal.tactic", {"stateId": 1, "tactic": "simp at h₀"})
    assert all(b"\\u" not in line for line in server.raw_lines)
    assert any("ℝ".encode() in line and "₀".encode() in line for line in server.raw_lines)


@pytest.mark.slow
def test_empty_line_and_eof_exit_zero() -> None:
    replay = Replay()
    try:
        assert replay.close() == 0
    finally:
        replay.kill()
    replay = Replay()
    try:
        assert replay.proc.stdin is not None
        replay.proc.stdin.close()
        assert replay.proc.wait(timeout=REPLY_TIMEOUT_S) == 0
    finally:
        replay.kill()


@pytest.mark.slow
def test_latency_flag_and_lean_side_timeout_interrupt() -> None:
    replay = Replay("--latency-ms", "30")
    try:
        replay.send("goal.start", {"copyFrom": "logic_or_comm"})
        began = time.monotonic()
        assert "nextStateId" in replay.send("goal.tactic", {"stateId": 0, "tactic": "intro p q h"})
        assert time.monotonic() - began >= 0.03
        replay.send("options.set", {"timeout": 10})
        assert replay.send("goal.tactic", {"stateId": 0, "tactic": "intro p q h"}) == {
            "error": "internal",
            "desc": "interrupt",
        }
        replay.send("options.set", {"timeout": 0})
        assert replay.send("goal.tactic", {"stateId": 0, "tactic": "(sleep 20; intro p q h)"})["goals"]
        replay.send("options.set", {"timeout": 100})
        assert replay.send("goal.tactic", {"stateId": 0, "tactic": "sleep 5000"})["desc"] == "interrupt"
    finally:
        replay.kill()


@pytest.mark.slow
def test_the_latency_comes_from_lean_env_and_a_bad_one_is_refused() -> None:
    """A slowed Lean whose command is the default one: the latency travels in `lean.env` (the sealed environment
    drops any other variable), so a run slowed for a signal test and its resume at full speed record one command."""
    import asyncio

    from burnqed.config.lean import LeanConfig
    from burnqed.lean.client import LeanWorker

    async def tactic_seconds(env: dict[str, str]) -> float:
        config = LeanConfig(command=[sys.executable, "-m", "minilean.replay"], env=env)
        async with LeanWorker.from_config(config) as lean:
            state = await lean.start_goal(copy_from="logic_or_comm")
            began = time.monotonic()
            assert (await lean.tactic(state, "intro p q h")).goals
            return time.monotonic() - began

    assert asyncio.run(tactic_seconds({"MINILEAN_REPLAY_LATENCY_MS": "300"})) >= 0.3
    assert asyncio.run(tactic_seconds({})) < 0.3
    bad = subprocess.run([sys.executable, "-m", "minilean.replay"], input="", capture_output=True, text=True,
                         env={**os.environ, "MINILEAN_REPLAY_LATENCY_MS": "fast"}, timeout=60, check=False)
    assert bad.returncode == 2
    assert bad.stderr.strip() == "replay: MINILEAN_REPLAY_LATENCY_MS='fast' is not a number of milliseconds"


def test_custom_corpus_file(tmp_path: Path) -> None:
    bundled = json.loads(bundled_corpus_path().read_text(encoding="utf-8"))
    theorem = next(t for t in bundled["theorems"] if t["name"] == "logic_or_comm")
    custom = tmp_path / "one.json"
    custom.write_text(json.dumps({"name": "one", "theorems": [theorem]}, ensure_ascii=False), encoding="utf-8")
    replay = Replay("--corpus", str(custom))
    try:
        assert replay.send("goal.start", {"copyFrom": "logic_or_comm"})["stateId"] == 0
        assert replay.send("goal.start", {"copyFrom": "logic_and_comm"})["error"] == "index"
    finally:
        replay.kill()


@pytest.mark.slow
def test_bad_corpus_fails_before_ready(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"name": "x", "theorems": [', encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "minilean.replay", "--corpus", str(broken)],
        check=False,
        capture_output=True,
        text=True,
        timeout=10,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2 and "ready." not in proc.stdout
    assert "broken.json" in proc.stderr


def test_a_bad_version_or_corpus_is_one_line_on_stderr_and_exit_2(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The refusals of `leankit.version` and `leankit.corpus`, each one line under the server's name, nothing served."""
    supported = "0.2.25, 0.3.0-0.3.16"
    empty = tmp_path / "empty"
    empty.mkdir()
    refused = {
        ("--pantograph-version", "0.4.0"): f"--pantograph-version: unsupported Pantograph 0.4.0 (supported: "
                                           f"{supported}; each version parses requests differently, see "
                                           "docs/lean.md). Install a supported Pantograph.",
        ("--pantograph-version", "three"): "--pantograph-version: 'three' is not a version (expected e.g. 0.3.4 or "
                                           f"0.3.7/v4.21.0); supported Pantograph versions: {supported}",
        ("--corpus", str(tmp_path / "none.json")): f"corpus {tmp_path / 'none.json'} does not exist; pass a corpus "
                                                   "JSON file or a folder of them",
        ("--corpus", str(empty)): f"corpus folder {empty} has no *.json files; point --corpus at a corpus file",
    }
    for argv, reason in refused.items():
        assert main(list(argv)) == 2, argv
        assert capsys.readouterr() == ("", f"replay: {reason}\n")


# -- frontend.process ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_frontend_sorry_has_the_fixtures_shape_for_a_recorded_theorem_and_starts_no_unknown_one(server: Replay) -> None:
    sent = fixture_lines("v0.3.4_frontend_sorry.jsonl")[1]
    command, _, payload = sent["send"].partition(" ")
    request = json.loads(payload)
    expected = json.loads(sent["recv"])
    # The fixture's `example (p: Prop): p → p := sorry` is no theorem the corpus records: Lean elaborates and starts
    # it; the replay server, which has no elaborator, refuses it and starts no goal (docs/replay-corpus.md).
    refused = server.send(command, request)
    assert [unit["boundary"] for unit in refused["units"]] == [[0, 27], [27, 62]]
    unknown = refused["units"][1]
    assert "goalStateId" not in unknown and [m["severity"] for m in unknown["messages"]] == ["error"]
    assert unknown["messages"][0]["data"] == ("replay: unknown theorem of this example: the replay corpus has no "
                                              "theorem with this name or statement, so the replay server cannot "
                                              "check it")
    # A recorded theorem in the same request: the sorry's goal, in the fixture's reply shape.
    recorded = "theorem algebra_2x_plus_3_eq_11 (x : ℝ) (h₀ : 2 * x + 3 = 11) : x = 4 := sorry"
    started = server.send(command, {**request, "file": recorded})["units"][0]
    assert shape(started) == shape(expected["units"][1])
    assert started["goals"][0]["target"] == {"pp": "x = 4"}
    assert [v["userName"] for v in started["goals"][0]["vars"]] == ["x", "h₀"]


@pytest.mark.slow
def test_frontend_reports_unsolved_goals_failures_and_unknown_theorems(server: Replay) -> None:
    corpus = load_corpus()
    theorem = corpus.by_name("algebra_2x_plus_3_eq_11")
    assert theorem is not None
    # The compile restates the theorem in binder form (`x` in context): its proofs begin with `intro h₀`.
    unsolved = server.send("frontend.process", process(assemble_script(theorem, ["intro h₀"]),
                                                       readHeader=True))["units"][-1]
    assert unsolved["messages"][0]["data"] == "unsolved goals\nx : ℝ\nh₀ : 2 * x + 3 = 11\n⊢ x = 4"
    assert unsolved["messages"][0]["severity"] == "error"
    failing = assemble_script(theorem, ["intro h₀", "simp at h₀", "linarith"])
    message = server.send("frontend.process", process(failing, readHeader=True))["units"][-1]["messages"][0]
    assert (message["data"], message["pos"]) == ("simp made no progress", {"line": 10, "column": 2})
    sorry = server.send("frontend.process", process(assemble_script(theorem, ["intro h₀", "sorry"]), sorrys=True,
                                                    readHeader=True))
    unit = sorry["units"][-1]
    assert unit["messages"][0]["kind"] == "hasSorry" and unit["messages"][0]["severity"] == "warning"
    assert unit["goals"][0]["target"] == {"pp": "x = 4"}
    follow = server.send("goal.tactic", {"stateId": unit["goalStateId"], "tactic": "linarith"})
    assert follow["goals"] == []
    unknown = server.send("frontend.process", process("theorem mystery : 1 = 1 := by\n  rfl\n"))
    assert "unknown theorem 'mystery'" in unknown["units"][0]["messages"][0]["data"]
    wrong = f"theorem {theorem.name} : True := by\n  intro x h₀\n  linarith\n"
    assert "differs" in server.send("frontend.process", process(wrong))["units"][0]["messages"][0]["data"]


@pytest.mark.slow
def test_frontend_accepts_bullets_single_line_and_example_by_statement(server: Replay) -> None:
    file = (
        "import Mathlib\nopen Real\n\n"
        "theorem logic_or_comm : ∀ (p q : Prop), p ∨ q → q ∨ p := by\n"
        "  intro p q h\n  rcases h with hp | hq\n  · right\n    exact hp\n  · exact Or.inl hq\n\n"
        "example : ∀ (x : ℝ), 2 * x + 3 = 11 → x = 4 := by intro x h₀; linarith\n"
    )
    units = server.send("frontend.process", process(file, newConstants=True, readHeader=True))["units"]
    assert [unit["messages"] for unit in units] == [[], [], []]
    assert [unit["newConstants"] for unit in units] == [[], ["logic_or_comm"], []]
    assert units[-1]["boundary"][1] == len(file.encode("utf-8"))


@pytest.mark.slow
def test_frontend_declares_a_theorem_inside_a_namespace_under_it(server: Replay) -> None:
    """As Lean: `theorem n` inside `namespace Ns` declares `Ns.n`, and `#print axioms n` there resolves to it."""
    file = (
        "namespace Contest\n\n"
        "theorem logic_or_comm : ∀ (p q : Prop), p ∨ q → q ∨ p := by\n"
        "  intro p q h\n  rcases h with hp | hq\n  · right\n    exact hp\n  · exact Or.inl hq\n\n"
        "#print axioms logic_or_comm\n\nend Contest\n\n#print axioms logic_or_comm\n"
    )
    units = server.send("frontend.process", process(file, newConstants=True))["units"]
    assert [unit["newConstants"] for unit in units] == [[], ["Contest.logic_or_comm"], [], [], []]
    assert "'Contest.logic_or_comm' depends on axioms" in units[2]["messages"][0]["data"]
    assert "unknown constant 'logic_or_comm'" in units[4]["messages"][0]["data"]


def test_a_request_that_recurses_too_deep_is_an_error_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process loop answers a RecursionError escaping a handler (no request known reaches one: the tactic runner
    answers deep nesting with Lean's recursion message) with an `internal` error, and serves the next request."""
    replay = ReplayServer(load_corpus())
    answer = replay.handle

    def handle(line: str) -> str:
        if line.startswith("stat"):
            raise RecursionError
        return answer(line)

    monkeypatch.setattr(replay, "handle", handle)
    out = io.BytesIO()
    assert serve(replay, io.BytesIO(b"stat {}\nreset {}\n"), out) == 0
    assert out.getvalue().decode().splitlines() == [
        "ready.", '{"error":"internal","desc":"maximum recursion depth has been reached"}', '{"nGoals":0}']

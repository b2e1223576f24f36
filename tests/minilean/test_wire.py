"""minilean's REPL against the exact wire lines of the real Pantograph 0.3.4 (`_uniq.N` numbers aside), its
request parsing per version, `frontend.process` (sorry goals under a header, compiles, `#print axioms`,
`inheritEnv`), `frontend.distil`, and the generated world checked through it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from leankit.corpus import load_corpus
from leankit.version import PantographVersion
from minilean.replay.replay_server import ReplayServer
from minilean.server import SUPPORTED, Server, main

FIXTURES = Path(__file__).parents[1] / "fixtures" / "pantograph"  # vendored, see tests/fixtures/README.md
ROOT = Path(__file__).resolve().parents[2]


def _normalize(line: str) -> str:
    """Volatile metavariable numbers (`_uniq.N`, `?m.N`) replaced by placeholders, in order of appearance."""
    names: dict[str, str] = {}

    def rename(match: re.Match[str]) -> str:
        return names.setdefault(match.group(0), f"<{len(names)}>")

    return re.sub(r"_uniq\.\d+|\?m\.\d+", rename, line)


def _shape(value: object) -> object:
    if isinstance(value, dict):
        return {key: _shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shape(item) for item in value]
    return type(value).__name__


def _exchanges(name: str) -> list[dict[str, str]]:
    path = FIXTURES / name
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [line for line in lines[1:] if not line["send"].startswith("(process")]


@pytest.mark.parametrize("fixture", ["v0.3.4_automatic_mode_on.jsonl", "v0.3.4_automatic_mode_off.jsonl",
                                     "v0.3.4_frontend_sorry.jsonl"])
def test_replies_match_pantograph_byte_for_byte(fixture: str):
    server = Server()
    for exchange in _exchanges(fixture):
        assert _normalize(server.handle(exchange["send"])) == _normalize(exchange["recv"]), exchange["send"]


def test_tactic_fixture_same_replies_where_in_the_fragment_same_shapes_elsewhere():
    server = Server()
    for exchange in _exchanges("v0.3.4_tactic.jsonl"):
        reply = server.handle(exchange["send"])
        if "Nat.le_of_succ_le" in exchange["send"]:
            # minilean's library has no such lemma: a failure of the same shape with Lean's wording for it
            assert _shape(json.loads(reply)) == _shape(json.loads(exchange["recv"]))
            assert json.loads(reply)["messages"][0]["data"] == "unknown identifier 'Nat.le_of_succ_le'"
            continue
        if exchange["send"].startswith("goal.print"):
            # minilean keeps no proof terms: the root prints as its holes (`?m.N`), Lean's as `fun x => ?m.N`
            ours, theirs = json.loads(reply), json.loads(exchange["recv"])
            assert _shape(ours) == _shape(theirs)
            assert {k: v for k, v in ours.items() if k not in ("root", "parentExprs")} == {
                k: v for k, v in theirs.items() if k not in ("root", "parentExprs")}
            continue
        assert _normalize(reply) == _normalize(exchange["recv"]), exchange["send"]


def test_error_replies():
    server = Server()
    assert json.loads(server.handle('invalid {"name":"Nat.add_one"}')) == {
        "error": "command", "desc": "Unknown command invalid"}
    assert json.loads(server.handle('goal.tactic {"stateId":7,"tactic":"simp"}')) == {
        "error": "index", "desc": "Invalid state index 7"}
    assert json.loads(server.handle('goal.delete {"stateIds":[0,1]}')) == {}
    assert json.loads(server.handle('frontend.process {"file":"x"}')) == {
        "error": "command",
        "desc": "Unable to parse json: Pantograph.Protocol.FrontendProcess.readHeader: Bool expected"}
    old = Server(version=PantographVersion(0, 3, 2))
    assert json.loads(old.handle('goal.tactic {"stateId":0,"tactic":"simp"}'))["desc"] == (
        "Unable to parse json: Pantograph.Protocol.GoalTactic.goalId: Natural number expected")
    assert json.loads(server.handle('goal.start {"expr":"∀ (x : ℝ), x = y"}')) == {
        "error": "elab", "desc": "unknown identifier 'y'"}
    start = json.loads(server.handle('goal.start {"expr":"∀ (x : ℝ), x = x"}'))
    assert json.loads(server.handle(f'goal.tactic {{"stateId":{start["stateId"]},"tactic":"intro x; rfl"}}')) == {
        "parseError": "<input>:1:7: unexpected token ';'; expected end of input", "hasUnsafe": False,
        "hasSorry": False}
    assert json.loads(server.handle('reset {}')) == {"nGoals": 1}


def test_names_lean_cannot_read_do_not_parse():
    # What a byte-level model writes for a broken character (U+FFFD) and names `intro` cannot bind are parse
    # errors in Lean; minilean once took `intro h₃�, h₀` as two names `h₃�,` and `h₀`.
    server = Server()
    start = json.loads(server.handle('goal.start {"expr":"∀ (x : ℝ), 0 < x → x ≠ 0 → 0 < x ^ 2"}'))["stateId"]
    for tactic, column, token in [("intro x h\ufffd", 9, "\ufffd"), ("intro x h₃\ufffd, h₀", 10, "\ufffd"),
                                  ("intro x, h", 7, ","), ("intro x h.1", 9, "."), ("exact h\ufffd", 7, "\ufffd")]:
        reply = json.loads(server.handle(json.dumps({"stateId": start, "tactic": tactic}, ensure_ascii=False)
                                         .join(("goal.tactic ", ""))))
        assert reply == {"parseError": f"<input>:1:{column}: unexpected token '{token}'; expected term",
                         "hasUnsafe": False, "hasSorry": False}, tactic
    for tactic in ("intro x h h'", "intro _ h", "intro x ⟨h, k⟩", "intros"):  # still fine
        reply = json.loads(server.handle(f'goal.tactic {{"stateId":{start},"tactic":"{tactic}"}}'))
        assert "parseError" not in reply, tactic


def test_brackets_pair_as_burnqeds_lean_text_pairs_them():
    """A parenthesised tactic is run inside its parentheses only when they pair as `leankit.text.matching_close`
    pairs brackets (`⦃ ⦄` included): `(intro p ⦃)` no longer binds a hypothesis named `⦃`."""
    server = Server()
    server.handle('goal.start {"expr":"∀ (p : Prop), p → p"}')
    stray = json.loads(server.handle('goal.tactic {"stateId":0,"tactic":"(intro p ⦃)"}'))
    assert "nextStateId" not in stray and stray["messages"][0]["severity"] == "error"
    paired = json.loads(server.handle('goal.tactic {"stateId":0,"tactic":"((intro p h))"}'))
    assert [v["userName"] for v in paired["goals"][0]["vars"]] == ["p", "h"]


def test_older_versions_answer_in_their_shapes():
    legacy = Server(version=PantographVersion(0, 2, 25))
    legacy.handle('goal.start {"expr":"∀ (p q: Prop), p ∨ q → q ∨ p"}')
    success = json.loads(legacy.handle('goal.tactic {"stateId":0,"goalId":0,"tactic":"intro x"}'))
    assert set(success) == {"nextStateId", "goals"} and success["goals"][0]["isConversion"] is False
    failure = json.loads(legacy.handle('goal.tactic {"stateId":1,"goalId":0,"tactic":"assumption"}'))
    assert failure == {"tacticErrors": ["tactic 'assumption' failed\nx : Prop\n⊢ ∀ (q : Prop), x ∨ q → q ∨ x"]}
    strings = Server(version=PantographVersion(0, 3, 2))
    strings.handle('goal.start {"expr":"∀ (x : ℝ), 0 < x → 0 < x ^ 2"}')
    strings.handle('goal.tactic {"stateId":0,"goalId":0,"tactic":"intro x h"}')
    reply = json.loads(strings.handle('goal.tactic {"stateId":1,"goalId":0,"tactic":"linarith"}'))
    assert reply["messages"] == [
        "linarith failed to find a contradiction\nx : ℝ\nh : 0 < x\na✝ : x ^ 2 ≤ 0\n⊢ False\nfailed"]


def test_goal_tactic_requests_are_answered_as_the_replay_server_and_pantograph_answer_them():
    legacy = Server(version=PantographVersion(0, 2, 25))
    legacy.handle('goal.start {"expr":"∀ (p : Prop), p → p"}')
    # 0.2.x reads seven tactic fields but names five in its message
    assert json.loads(legacy.handle('goal.tactic {"stateId":0,"goalId":0,"tactic":"intro p","expr":"p"}')) == {
        "error": "arguments", "desc": "Exactly one of {tactic, expr, have, calc, conv} must be supplied"}
    server = Server()
    server.handle('goal.start {"expr":"∀ (p : Prop), p → p"}')
    server.handle('goal.tactic {"stateId":0,"tactic":"intro p h"}')
    assert json.loads(server.handle('goal.tactic {"stateId":1,"tactic":"exact h"}'))["goals"] == []
    assert json.loads(server.handle('goal.tactic {"stateId":2,"tactic":"simp"}'))["messages"][0]["data"] == (
        "no goals to be proved")
    server.handle('options.set {"automaticMode":false}')
    assert json.loads(server.handle('goal.tactic {"stateId":2,"tactic":"simp"}')) == {
        "error": "index", "desc": "No goals to be solved"}
    # the `let` field is a `let`, which minilean's fragment does not have (not a `have`)
    reply = json.loads(server.handle('goal.tactic {"stateId":1,"let":"p","binderName":"q"}'))
    assert reply["messages"][0]["data"] == "minilean: `let` is a Lean tactic outside minilean's fragment " \
                                           "(docs/minilean.md)"
    goals = json.loads(server.handle('goal.tactic {"stateId":1,"have":"p","binderName":"q"}'))["goals"]
    assert [([v["userName"] for v in goal["vars"]], goal["target"]["pp"]) for goal in goals] == [
        (["p", "h"], "p"), (["p", "h", "q"], "p")]


def test_the_timeout_interrupt_is_an_io_error_from_0_3_5():
    for version, kind in (("0.3.4", "internal"), ("0.3.5", "io"), ("0.3.6", "io")):
        server = Server(version=PantographVersion.parse(version))
        server.handle('goal.start {"expr":"(1 : ℕ) + 2 = 3"}')
        server.handle('options.set {"timeout":10}')
        assert json.loads(server.handle('goal.tactic {"stateId":0,"expr":"by\\nsleep 1000; simp"}')) == {
            "error": kind, "desc": "interrupt"}, version


def _send(server: Server, command: str, payload: dict[str, Any]) -> dict[str, Any]:
    reply: dict[str, Any] = json.loads(server.handle(f"{command} {json.dumps(payload, ensure_ascii=False)}"))
    return reply


def _process(server: Server, text: str, *, sorrys: bool = False, inherit: bool = False) -> dict[str, object]:
    payload = {"file": text, "readHeader": False, "inheritEnv": inherit, "sorrys": sorrys,
               "typeErrorsAsGoals": False, "newConstants": True}
    reply: dict[str, object] = json.loads(server.handle(f"frontend.process {json.dumps(payload, ensure_ascii=False)}"))
    return reply


def test_a_sorry_under_a_header_is_a_goal_with_the_binders_as_hypotheses():
    server = Server()
    reply = _process(server, "open Real Nat\n\ntheorem t (x : ℝ) (h₀ : 0 < x) : x ^ 2 > 0 := by sorry", sorrys=True)
    units = reply["units"]
    assert isinstance(units, list) and len(units) == 2
    unit = units[1]
    assert unit["newConstants"] == ["t"]
    assert [m["data"] for m in unit["messages"]] == ["declaration uses 'sorry'"]
    (goal,) = unit["goals"]
    assert [(v["userName"], v["type"]["pp"]) for v in goal["vars"]] == [("x", "ℝ"), ("h₀", "0 < x")]
    assert goal["target"]["pp"] == "x ^ 2 > 0"
    state = unit["goalStateId"]
    closed = json.loads(server.handle(f'goal.tactic {{"stateId":{state},"tactic":"positivity"}}'))
    assert closed["goals"] == [] and closed["hasSorry"] is False
    wrong = json.loads(server.handle(f'goal.tactic {{"stateId":{state},"tactic":"linarith"}}'))
    assert wrong["messages"][0]["data"].startswith("linarith failed to find a contradiction")


def test_compile_reports_constants_axioms_and_lean_errors():
    server = Server()
    good = _process(server, "theorem t (x : ℝ) (h₀ : 2 * x + 3 = 11) : x = 4 := by\n  linarith\n\n#print axioms t\n")
    units = good["units"]
    assert isinstance(units, list)
    assert units[0]["newConstants"] == ["t"] and units[0]["messages"] == []
    assert units[1]["messages"][0]["severity"] == "information"
    assert units[1]["messages"][0]["data"] == "'t' depends on axioms: [propext, Classical.choice, Quot.sound]"
    bad = _process(server, "theorem t : ∀ (x : ℝ), 2 * x + 3 = 11 → x = 5 := by\n  intro x h\n  linarith\n\n"
                           "#print axioms t\n")
    units = bad["units"]
    assert isinstance(units, list)
    error = units[0]["messages"][0]
    assert error["severity"] == "error" and error["pos"] == {"line": 3, "column": 2}
    assert error["data"].startswith("linarith failed to find a contradiction\nx : ℝ\nh : 2 * x + 3 = 11\na✝ : x < 5")
    assert "sorryAx" in units[1]["messages"][0]["data"]
    unsolved = _process(server, "theorem u : ∀ (p q : Prop), p → q → p ∧ q := by\n  intro p q hp hq\n  constructor")
    units = unsolved["units"]
    assert isinstance(units, list)
    assert units[0]["messages"][0]["data"].startswith("unsolved goals\ncase left\np q : Prop")


@pytest.mark.parametrize(("body", "position", "text"), [
    # `intro` binds no name `b)]`: Lean's parser stops at the `)`, as goal.tactic's parseError says.
    ("intro b)]", {"line": 2, "column": 9}, "unexpected token ')'; expected term"),
    # A bracket that closes nothing, on a continuation line (the file's own indentation counts).
    ("intro h\n  nlinarith [h,\n    sq_nonneg a]]", {"line": 4, "column": 16}, "unexpected token ']'; expected term"),
    # One left open: the error is at the end of the block.
    ("intro h\n  nlinarith [h", {"line": 3, "column": 14}, "unexpected end of input; expected ']'"),
])
def test_a_proof_lean_cannot_parse_is_a_parse_error_at_its_place(body: str, position: dict[str, int],
                                                                   text: str) -> None:
    reply = _process(Server(), f"theorem t (a b : ℝ) : a = b → b = a := by\n  {body}\n")
    units = reply["units"]
    assert isinstance(units, list)
    assert units[0]["newConstants"] == ["t"]
    assert [(m["pos"], m["data"]) for m in units[0]["messages"]] == [(position, text)]


def test_inherit_env_keeps_theorems_for_copy_from():
    server = Server()
    _process(server, "theorem kept (x : ℝ) : x ≤ x := by\n  exact le_refl x", inherit=True)
    _process(server, "theorem dropped (x : ℝ) : x ≤ x := by\n  exact le_refl x", inherit=False)
    assert "stateId" in json.loads(server.handle('goal.start {"copyFrom":"kept"}'))
    assert json.loads(server.handle('goal.start {"copyFrom":"dropped"}')) == {
        "error": "index", "desc": "Symbol not found: dropped"}
    # as in Lean, a name the environment has cannot be declared again
    again = _process(server, "theorem kept (x : ℝ) : x ≤ x := by\n  exact le_refl x")["units"]
    assert isinstance(again, list)
    assert again[0]["messages"][0]["data"] == "'kept' has already been declared" and again[0]["newConstants"] == []


def test_distil_from_0_3_6():
    assert "Unknown command" in json.loads(Server().handle('frontend.distil {"file":"x","ignoreValues":false}'))["desc"]
    server = Server(version=PantographVersion(0, 3, 6))
    text = "theorem solved : 1 + 2 = 3 := rfl\ntheorem mystery (p: Prop): p → p := sorry"
    reply = _send(server, "frontend.distil", {"file": text, "ignoreValues": False})
    (target,) = reply["targets"]
    (goal,) = target["goals"]
    assert goal["target"]["pp"] == "p → p" and goal["vars"][0]["userName"] == "p"
    folded = _send(server, "frontend.distil", {"file": text, "binderName": "x", "ignoreValues": True})
    assert folded["targets"][0]["goals"][0]["target"]["pp"] == "∀ (p : Prop), p → p"
    assert json.loads(server.handle('frontend.distil {"file":"x"}'))["desc"] == (
        "Unable to parse json: Pantograph.Protocol.FrontendDistil.ignoreValues: Bool expected")


def test_timeout_interrupts_like_lean():
    server = Server()
    server.handle('goal.start {"expr":"(1 : ℕ) + (2 * 3) = 1 + (4 - 3) + (6 - 4) + 3"}')
    server.handle('options.set {"timeout":10}')
    assert json.loads(server.handle('goal.tactic {"stateId":0,"expr":"by\\nsleep 1000; simp"}')) == {
        "error": "internal", "desc": "interrupt"}
    server.handle('options.set {"timeout":0}')
    assert json.loads(server.handle('goal.tactic {"stateId":0,"tactic":"simp"}'))["goals"] == []


@pytest.mark.slow
def test_the_world_is_checked_not_looked_up():
    """One theorem of every generated family: its recorded proofs close it through the REPL, its recorded
    failures fail (minilean decides them; the recorded texts are only used to choose what to try)."""
    from leankit.world import generate_world

    server = Server()
    seen: set[str] = set()
    for theorem in generate_world().theorems:
        if theorem.family in seen:
            continue
        seen.add(str(theorem.family))
        for proof in theorem.proofs:
            state = _send(server, "goal.start", {"expr": theorem.statement})["stateId"]
            reply: dict[str, Any] = {}
            for tactic in proof:
                reply = _send(server, "goal.tactic", {"stateId": state, "tactic": tactic})
                assert "nextStateId" in reply, (theorem.name, proof, tactic, reply)
                state = reply["nextStateId"]
            assert reply["goals"] == [], (theorem.name, proof)
        root_failures = [t.tactic for t in theorem.transitions if t.goal == theorem.root and t.error is not None]
        root = _send(server, "goal.start", {"expr": theorem.statement})["stateId"]
        for tactic in root_failures:
            assert "nextStateId" not in _send(server, "goal.tactic", {"stateId": root, "tactic": tactic}), (
                theorem.name, tactic)
    assert len(seen) == 15


def test_version_flag_and_refusals():
    run = [sys.executable, "-m", "minilean"]
    assert subprocess.run([*run, "--version"], capture_output=True, text=True, cwd=ROOT, check=False,
                          timeout=60).stdout.strip() == "0.3.4"
    wrong = subprocess.run([*run, "--pantograph-version", "0.4.0"], capture_output=True, text=True, cwd=ROOT,
                           check=False, timeout=60)
    assert wrong.returncode == 2 and "not emulated" in wrong.stderr


def _framing(version: PantographVersion) -> list[str]:
    """Requests both servers answer alike: the framing, the refusals and the commands that hold no goal."""
    process = {"file": "x", "fileName": "y", "readHeader": False, "inheritEnv": False, "sorrys": False,
               "typeErrorsAsGoals": False, "newConstants": False}
    if not version.invocations_is_path:
        process["invocations"] = False  # a required Bool up to 0.3.1, an optional path after
    return ["garbage", "{broken", '{"cmd": 1}', '{"cmd":"stat","payload":{}}', "nope {}", "stat", "options.print",
            'options.set {"automaticMode":false,"timeout":5,"unknown":1}', "options.print",
            'options.set {"noRepeat":1}',
            'goal.tactic {"stateId":"x"}', 'goal.tactic {"stateId":9,"goalId":0,"tactic":"simp"}',
            'goal.print {"stateId":9,"goals":true}', 'goal.start {"expr":"1 = 1","copyFrom":"t"}',
            'goal.start {}', f"frontend.process {json.dumps(process)}", 'frontend.process {"readHeader":false}',
            'goal.delete {"stateIds":[1,2]}', 'goal.delete {"stateIds":[-1]}', "reset", "stat",
            'frontend.distil {"file":"x"}', f"goal.print {json.dumps({version.parent_exprs_key: 1, 'stateId': 0})}"]


@pytest.mark.parametrize("version", [str(version) for version in SUPPORTED])
def test_minilean_and_the_replay_server_frame_and_refuse_requests_alike(version: str):
    """One wire layer: the same request lines get the same reply lines from both servers, at every version."""
    v = PantographVersion.parse(version)
    minilean, replay = Server(version=v), ReplayServer(load_corpus(), version=v)
    pairs = [(line, minilean.handle(line), replay.handle(line)) for line in _framing(v)]
    assert [(line, ours) for line, ours, _ in pairs] == [(line, theirs) for line, _, theirs in pairs]
    replies = {line: json.loads(ours) for line, ours, _ in pairs}  # the second `options.print` is kept
    assert replies["garbage"] == {"error": "command", "desc": "Unknown command garbage"}
    assert replies['goal.tactic {"stateId":9,"goalId":0,"tactic":"simp"}'] == {
        "error": "index", "desc": "Invalid state index 9"}
    (both_files,) = [reply for line, reply in replies.items() if '"fileName"' in line]
    assert both_files == {"error": "arguments", "desc": "Exactly one of {fileName, file} must be supplied"}
    assert replies["options.print"]["automaticMode"] is False
    assert replies["options.print"].get("timeout") == (5 if v.timeout_option else None)
    assert replies['frontend.distil {"file":"x"}'] == (
        {"error": "command", "desc": "Unable to parse json: Pantograph.Protocol.FrontendDistil.ignoreValues: Bool "
                                     "expected"} if v.distil else
        {"error": "command", "desc": "Unknown command frontend.distil"})


def test_the_version_is_read_with_burnqeds_version_table(capsys: pytest.CaptureFixture[str]):
    assert main(["--pantograph-version", "0.3.4/v4.21.0", "--version"]) == 0  # a backport's line names 0.3.4
    assert capsys.readouterr().out == "0.3.4/v4.21.0\n"
    assert main(["--pantograph-version", "0.3.7"]) == 2
    assert capsys.readouterr().err == ("minilean: Pantograph 0.3.7 is not emulated (supported: 0.2.25, 0.3.0, 0.3.1, "
                                       "0.3.2, 0.3.3, 0.3.4, 0.3.5, 0.3.6)\n")
    assert main(["--pantograph-version", "three"]) == 2
    assert capsys.readouterr().err == "minilean: 'three' is not a version (expected e.g. 0.3.4 or 0.3.7/v4.21.0)\n"
    assert main(["Mathlib", "--version"]) == 1
    assert "Options cannot be parsed" in capsys.readouterr().err

"""minilean with a fallback REPL (`--fallback-module`): what lies outside its fragment goes to the fallback, with
state ids mapped both ways; what lies inside stays with minilean. Run as processes, as the pool runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

ARGV = [sys.executable, "-m", "minilean"]
FALLBACK = [*ARGV, "--fallback-module", "minilean.replay"]
SUM = "∑ i ∈ Finset.range 101, i = 5050"  # a bundled theorem outside the fragment (the replay corpus has it)


def _session(argv: list[str], requests: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    lines = [f"{command} {json.dumps(payload, ensure_ascii=False)}" for command, payload in requests]
    done = subprocess.run(argv, input="\n".join([*lines, ""]), capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[0] == "ready."
    return [json.loads(line) for line in out[1:]]


def _compile(name: str, statement: str, body: str) -> dict[str, Any]:
    text = f"theorem {name} : {statement} := by\n  {body}\n\n#print axioms {name}\n"
    return {"file": text, "readHeader": False, "inheritEnv": False, "sorrys": False, "typeErrorsAsGoals": False,
            "newConstants": True}


@pytest.mark.slow
def test_outside_the_fragment_goes_to_the_fallback_and_inside_stays() -> None:
    replies = _session(FALLBACK, [
        ("goal.start", {"expr": "∀ (x : ℝ), 2 * x = 4 → x = 2"}),  # 0: minilean
        ("goal.start", {"expr": SUM}),  # 1: the fallback's state 0
        ("goal.tactic", {"stateId": 1, "goalId": 0, "tactic": "decide"}),  # 2: the fallback's state 1
        ("goal.tactic", {"stateId": 0, "goalId": 0, "tactic": "intro x h"}),  # 3: minilean
        ("goal.tactic", {"stateId": 1, "goalId": 0, "tactic": "omega"}),  # recorded as failing there
        ("stat", {}),
        ("goal.delete", {"stateIds": [1, 2]}),
        ("stat", {}),
        ("frontend.process", _compile("s", SUM, "decide")),
        ("frontend.process", _compile("t", "(2 : ℕ) + 2 = 4", "norm_num")),
    ])
    assert [r.get("stateId") for r in replies[:2]] == [0, 1]
    assert replies[2]["nextStateId"] == 2 and replies[2]["goals"] == []
    assert replies[3]["nextStateId"] == 3 and replies[3]["goals"][0]["target"]["pp"] == "x = 2"
    assert "nextStateId" not in replies[4] and replies[4]["messages"]
    assert replies[5] == {"nGoals": 4} and replies[7] == {"nGoals": 2}
    for compiled, name in ((replies[8], "s"), (replies[9], "t")):
        units = compiled["units"]
        assert units[0]["newConstants"] == [name] and units[0]["messages"] == [], compiled
        assert "depends on axioms: [propext, Classical.choice, Quot.sound]" in units[1]["messages"][0]["data"]


@pytest.mark.slow
def test_without_a_fallback_minilean_answers_alone() -> None:
    replies = _session(ARGV, [("goal.start", {"expr": SUM}), ("frontend.process", _compile("s", SUM, "decide"))])
    assert replies[0]["error"] == "parsing"
    assert replies[1]["units"][0]["messages"][0]["severity"] == "error"


@pytest.mark.slow
def test_a_fallback_that_cannot_start_is_an_internal_error_not_a_crash() -> None:
    replies = _session([*ARGV, "--fallback-module", "no_such_module_here"],
                       [("goal.start", {"expr": SUM}), ("goal.start", {"expr": "(1 : ℕ) = 1"})])
    assert replies[0]["error"] == "internal" and "fallback REPL" in replies[0]["desc"]
    assert replies[1]["stateId"] == 0


# Statements minilean cannot elaborate and the replay corpus does not record: Lean (with Mathlib) starts both.
CAST = "theorem cast_three (n : ℕ) (h : n = 3) : (n : ℝ) = 3 := by sorry"
SQRT = "theorem sqrt_four : Real.sqrt 4 = 2 := by sorry"
CAST_REASON = "minilean: the cast of n from ℕ to ℝ (a coercion, which Lean inserts) is outside minilean's fragment"
SQRT_REASON = "unknown identifier 'Real.sqrt'"


def _sorry_start(text: str) -> dict[str, Any]:
    return {"file": text, "readHeader": False, "inheritEnv": False, "sorrys": True, "typeErrorsAsGoals": False,
            "newConstants": False}


@pytest.mark.slow
def test_a_statement_neither_minilean_nor_its_fallback_can_start_fails_with_minileans_reason() -> None:
    replies = _session(FALLBACK, [
        ("frontend.process", _sorry_start(CAST)), ("frontend.process", _sorry_start(SQRT)),
        ("goal.start", {"expr": "Real.sqrt 4 = 2"}), ("stat", {})])
    for reply, reason, name in ((replies[0], CAST_REASON, "cast_three"), (replies[1], SQRT_REASON, "sqrt_four")):
        (unit,) = reply["units"]
        assert "goalStateId" not in unit and [m["severity"] for m in unit["messages"]] == ["error"]
        assert unit["messages"][0]["data"] == (
            f"{reason}\n(its fallback REPL did not start it either: replay: unknown theorem '{name}': the replay "
            "corpus has no theorem with this name or statement, so the replay server cannot check it)")
    assert replies[2] == {"error": "elab", "desc": f"{SQRT_REASON}\n(its fallback REPL did not start it either: "
                          "replay: no theorem of the replay corpus has this statement (whitespace-insensitive); the "
                          "replay server can only start recorded statements: Real.sqrt 4 = 2)"}
    assert replies[3] == {"nGoals": 0}  # no state was made for either

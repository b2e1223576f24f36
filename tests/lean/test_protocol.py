"""Conformance: every `recv` line of the Pantograph fixtures parses into the right outcome."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from burnqed.errors import LeanProtocolError
from burnqed.lean.protocol import (
    encode_request,
    parse_compile_reply,
    parse_count_reply,
    parse_print_reply,
    parse_start_reply,
    parse_tactic_reply,
    raise_for_error,
)
from burnqed.records.replies import TacticKind
from leankit.version import PantographVersion

FIXTURES = Path(__file__).parents[1] / "fixtures" / "pantograph"

# (file, line number) of every goal.tactic exchange -> (kind, number of goals, hasSorry)
TACTIC_EXPECTED: dict[tuple[str, int], tuple[TacticKind, int, bool]] = {
    ("v0.2.25_legacy_tactic.jsonl", 3): (TacticKind.SUCCESS, 1, False),
    ("v0.2.25_legacy_tactic.jsonl", 4): (TacticKind.SUCCESS, 1, False),
    ("v0.2.25_legacy_tactic.jsonl", 5): (TacticKind.ERROR, 0, False),
    ("v0.3.4_automatic_mode_off.jsonl", 4): (TacticKind.SUCCESS, 1, False),
    ("v0.3.4_automatic_mode_off.jsonl", 5): (TacticKind.SUCCESS, 2, False),
    ("v0.3.4_automatic_mode_off.jsonl", 6): (TacticKind.SUCCESS, 1, False),
    ("v0.3.4_automatic_mode_on.jsonl", 4): (TacticKind.SUCCESS, 1, False),
    ("v0.3.4_automatic_mode_on.jsonl", 5): (TacticKind.SUCCESS, 2, False),
    ("v0.3.4_automatic_mode_on.jsonl", 6): (TacticKind.SUCCESS, 2, False),
    ("v0.3.4_errors.jsonl", 9): (TacticKind.ERROR, 0, False),
    ("v0.3.4_names.jsonl", 3): (TacticKind.SUCCESS, 1, False),
    ("v0.3.4_tactic.jsonl", 3): (TacticKind.SUCCESS, 1, False),
    ("v0.3.4_tactic.jsonl", 5): (TacticKind.SUCCESS, 1, False),
    ("v0.3.4_tactic.jsonl", 6): (TacticKind.ERROR, 0, False),
    ("v0.3.4_tactic.jsonl", 7): (TacticKind.SUCCESS, 0, True),
    ("v0.3.4_timeout.jsonl", 4): (TacticKind.TIMEOUT, 0, False),
    ("v0.3.4_timeout.jsonl", 6): (TacticKind.SUCCESS, 0, False),
    ("v0.3.15_names.jsonl", 3): (TacticKind.SUCCESS, 1, False),
    ("v0.3.15_names.jsonl", 4): (TacticKind.SUCCESS, 2, False),
    ("v0.3.15_names.jsonl", 6): (TacticKind.SUCCESS, 1, False),
}


def exchanges() -> list[tuple[str, int, str, str]]:
    rows = []
    for path in sorted(FIXTURES.glob("*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            record = json.loads(line)
            if "_meta" in record:
                continue
            rows.append((path.name, number, record["send"], record["recv"]))
    return rows


def test_fixtures_are_present():
    assert len(list(FIXTURES.glob("*.jsonl"))) == 9
    assert len(exchanges()) > 40


def version_of(fixture: str) -> PantographVersion:
    return PantographVersion.parse(fixture.split("_", 1)[0])


def command_of(send: str) -> str:
    return send.split(" ", 1)[0]


def reply_of(recv: str) -> dict[str, Any]:
    value = json.loads(recv)
    assert isinstance(value, dict)
    return value


@pytest.mark.parametrize(("name", "number", "send", "recv"), exchanges())
def test_every_reply_parses(name: str, number: int, send: str, recv: str):
    if send.startswith("(process start") or recv.startswith("(process"):
        assert recv in ("ready.", "(process exits)")
        return
    command = command_of(send)
    reply = reply_of(recv)
    if command == "goal.tactic":
        kind, n_goals, sorry = TACTIC_EXPECTED[(name, number)]
        result = parse_tactic_reply(reply, version=version_of(name))
        assert result.kind is kind
        if kind is not TacticKind.TIMEOUT:
            assert result.flags_reported is (version_of(name) >= PantographVersion(0, 3, 1))
        assert len(result.goals) == n_goals
        assert result.has_sorry is sorry
        if kind is TacticKind.SUCCESS:
            assert result.state_id == reply["nextStateId"]
            assert all(goal.target for goal in result.goals)
        else:
            assert result.errors and result.errors[0]
    elif command == "goal.start":
        assert parse_start_reply(reply) == reply["stateId"]
    elif command == "goal.print":
        info, goals = parse_print_reply(reply)
        assert (info.has_sorry, info.has_unsafe, info.has_mvar) == (False, False, True)
        assert info.root == "fun x => ?m.11"
        assert goals == ()
    elif command == "frontend.process":
        compiled = parse_compile_reply(reply)
        assert [(u.start, u.end, u.new_constants) for u in compiled.units] == [(0, 27, None), (27, 62, None)]
        assert compiled.errors == ()
        assert compiled.has_sorry
        assert not compiled.ok
    elif command in ("stat", "reset"):
        assert parse_count_reply(reply, command) == 0
    elif "error" in reply:
        with pytest.raises(LeanProtocolError) as raised:
            raise_for_error(reply, command)
        assert raised.value.kind == "command"
    else:
        raise_for_error(reply, command)  # options.set, goal.delete, env.inspect, expr.echo: plain objects


def test_every_tactic_exchange_is_classified():
    tactic_rows = {(n, i) for n, i, send, _ in exchanges() if command_of(send) == "goal.tactic"}
    assert tactic_rows == set(TACTIC_EXPECTED)


def test_legacy_goal_and_case_names():
    rows = {(n, i): recv for n, i, _, recv in exchanges()}
    legacy = parse_tactic_reply(reply_of(rows[("v0.2.25_legacy_tactic.jsonl", 4)]), version=PantographVersion(0, 2, 25))
    assert legacy.goals[0].pretty() == "x y : Prop\n⊢ x ∨ y → y ∨ x"
    cases = parse_tactic_reply(reply_of(rows[("v0.3.4_automatic_mode_on.jsonl", 5)]))
    assert [g.case for g in cases.goals] == ["inl", "inr"]
    assert cases.goals[0].pretty() == "case inl\np q : Prop\nh✝ : p\n⊢ q ∨ p"
    assert cases.goals[0].variables[2].inaccessible


def test_names_of_0_3_4_and_0_3_15_are_shown_as_lean_displays_them():
    """0.3.4 sends an escaped hypothesis name in `"` quotes, 0.3.15 as a Lean Name (Name.toString); both show
    `«a b»`, and the inaccessible `h✝` reads the same in both (never `«h✝»`)."""
    rows = {(n, i): recv for n, i, _, recv in exchanges()}
    old = parse_tactic_reply(reply_of(rows[("v0.3.4_names.jsonl", 3)]), version=PantographVersion(0, 3, 4))
    new = parse_tactic_reply(reply_of(rows[("v0.3.15_names.jsonl", 6)]), version=PantographVersion(0, 3, 15))
    assert reply_of(rows[("v0.3.4_names.jsonl", 3)])["goals"][0]["vars"][0]["userName"] == '"«a b»"'
    assert reply_of(rows[("v0.3.15_names.jsonl", 6)])["goals"][0]["vars"][0]["userName"] == "«a b»"
    assert old.goals[0].pretty() == new.goals[0].pretty() == "«a b» : Nat\nh₀ : 0 < «a b»\n⊢ «a b» = «a b»"
    cases = parse_tactic_reply(reply_of(rows[("v0.3.15_names.jsonl", 4)]), version=PantographVersion(0, 3, 15))
    legacy = parse_tactic_reply(reply_of(rows[("v0.3.4_automatic_mode_on.jsonl", 5)]))
    assert [g.pretty() for g in cases.goals] == [g.pretty() for g in legacy.goals] == [
        "case inl\np q : Prop\nh✝ : p\n⊢ q ∨ p", "case inr\np q : Prop\nh✝ : q\n⊢ q ∨ p"]


def test_error_message_text_is_kept():
    rows = {(n, i): recv for n, i, _, recv in exchanges()}
    failure = parse_tactic_reply(reply_of(rows[("v0.3.4_tactic.jsonl", 6)]))
    assert failure.errors[0].startswith("tactic 'apply' failed, could not unify")
    assert failure.reason == "error: tactic 'apply' failed, could not unify the conclusion of `@Nat.le_of_succ_le`"


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        ({"nextStateId": 3, "messages": [], "hasSorry": False, "hasUnsafe": False}, TacticKind.ERROR),
        ({"nextStateId": None, "goals": [], "messages": []}, TacticKind.ERROR),
        ({"goals": [], "messages": []}, TacticKind.ERROR),
        ({"parseError": "<input>:1:3: unknown tactic"}, TacticKind.PARSE_ERROR),
        ({"messages": ["unknown identifier 'x'"]}, TacticKind.ERROR),
        ({"error": "io", "desc": "interrupt"}, TacticKind.TIMEOUT),
        ({"nextStateId": 1, "goals": [], "messages": [{"severity": "error", "data": "boom"}]}, TacticKind.ERROR),
        ({"nextStateId": 1, "goals": [], "messages": ["some info"], "hasSorry": False, "hasUnsafe": False},
         TacticKind.SUCCESS),
        ({"nextStateId": True, "goals": []}, TacticKind.ERROR),
        # From 0.3.1 Pantograph always sends both flags: a reply without them is not a success.
        ({"nextStateId": 1, "goals": [], "messages": []}, TacticKind.ERROR),
        ({"nextStateId": 1, "goals": [], "messages": [], "hasSorry": False}, TacticKind.ERROR),
        ({"nextStateId": 1, "goals": [], "messages": [], "hasSorry": None, "hasUnsafe": False}, TacticKind.ERROR),
    ],
)
def test_false_finishes_are_never_success(reply: dict[str, Any], kind: TacticKind):
    result = parse_tactic_reply(reply, version=PantographVersion(0, 3, 2))
    assert result.kind is kind
    assert result.closed_all_goals is (kind is TacticKind.SUCCESS)


def test_flags_are_unknown_before_0_3_1():
    old = parse_tactic_reply({"nextStateId": 1, "goals": []}, version=PantographVersion(0, 3, 0))
    assert old.closed_all_goals and not old.flags_reported
    info, _ = parse_print_reply({"root": {"pp": "⋯"}, "goals": [], "extraMVars": []}, PantographVersion(0, 3, 0))
    assert not info.flags_reported and info.has_mvar and info.root == "⋯"


@pytest.mark.parametrize(
    "reply",
    [
        {"root": {"pp": "⋯"}, "goals": [], "rootHasUnsafe": False, "rootHasSorry": False},
        {"root": {"pp": "⋯"}, "goals": [], "rootHasUnsafe": False, "rootHasSorry": "no", "rootHasMVar": False},
    ],
)
def test_goal_print_without_its_flags_is_refused(reply: dict[str, Any]):
    with pytest.raises(LeanProtocolError, match="lacks Bool"):
        parse_print_reply(reply, PantographVersion(0, 3, 4))


def test_goal_print_without_root_is_not_complete():
    # v0.3.4 Library.lean: an unassigned root prints no `root` and every flag false.
    info, _ = parse_print_reply({"goals": [], "extraMVars": [], "rootHasUnsafe": False, "rootHasSorry": False,
                                 "rootHasMVar": False})
    assert info.root is None


@pytest.mark.parametrize(
    ("message", "severity", "text", "position"),
    [
        ("<anonymous>:3:2: error: unsolved goals\n⊢ p\n", "error", "unsolved goals\n⊢ p", (3, 2)),
        ("<anonymous>:2:8: warning: declaration uses 'sorry'\n", "warning", "declaration uses 'sorry'", (2, 8)),
        ("'t' depends on axioms: [propext]\n", "information", "'t' depends on axioms: [propext]", (None, None)),
        ("a.lean:1:0: error(lean.unknownIdentifier): unknown identifier 'x'\n", "error", "unknown identifier 'x'",
         (1, 0)),
        ({"severity": "information", "data": "'t' does not depend on any axioms"}, "information",
         "'t' does not depend on any axioms", (None, None)),
        ({"data": "no severity"}, "error", "no severity", (None, None)),
        ({"severity": "error", "pos": {"line": 4, "column": 7}, "endPos": None, "data": "linarith failed"}, "error",
         "linarith failed", (4, 7)),
        ({"severity": "error", "pos": {"line": True, "column": -1}, "data": "odd position"}, "error", "odd position",
         (None, None)),
    ],
)
def test_compile_messages_of_every_version(message: Any, severity: str, text: str,
                                           position: tuple[int | None, int | None]):
    compiled = parse_compile_reply({"units": [{"boundary": [0, 5], "messages": [message], "newConstants": ["t"]}]})
    assert (compiled.messages[0].severity, compiled.messages[0].text) == (severity, text)
    assert (compiled.messages[0].line, compiled.messages[0].column) == position
    assert compiled.units[0].new_constants == ("t",)


@pytest.mark.parametrize(
    "reply",
    [{}, {"units": None}, {"units": [{"messages": []}]}, {"units": [{"boundary": [0, 1]}]},
     {"units": [{"boundary": [0], "messages": []}]}, {"units": [{"boundary": [0, True], "messages": []}]}],
)
def test_compile_reply_missing_fields_is_an_error(reply: dict[str, Any]):
    with pytest.raises(LeanProtocolError, match="shape"):
        parse_compile_reply(reply)


def test_requests_are_raw_utf8_on_one_line():
    line = encode_request("goal.tactic", {"stateId": 0, "tactic": "simp [𝔽, ∀]\n  ring"})
    assert line == 'goal.tactic {"stateId":0,"tactic":"simp [𝔽, ∀]\\n  ring"}\n'.encode()
    assert b"\\u" not in line
    assert line.count(b"\n") == 1

"""Pantograph REPL wire format: request lines out, reply objects in, records back.

Framing is one request line `command {json}` answered by one compact JSON line. Requests are sent as
raw UTF-8 (`ensure_ascii=False`): Lean mis-decodes `\\uXXXX` escapes of characters outside the basic
plane. Replies are parsed tolerantly across versions:

- v0.3.x `goal.tactic` success: `{nextStateId, goals, messages, hasSorry, hasUnsafe}`; failure: no `goals`,
  the reason in error-severity `messages` (objects, or plain strings in some builds); `parseError`;
- v0.2.x: success `{nextStateId, goals}`, failure `{tacticErrors: [str]}`;
- any command: `{"error": kind, "desc": ...}`; `desc == "interrupt"` is the Lean-side timeout.

Everything here is pure; `burnqed.lean.client` does the I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from burnqed.errors import LeanProtocolError
from burnqed.records import (
    CompileMessage,
    CompileResult,
    Goal,
    RootInfo,
    TacticKind,
    TacticResult,
    Variable,
)

INTERRUPT_DESC = "interrupt"
ERROR_SEVERITY = "error"


def encode_request(command: str, payload: Mapping[str, Any]) -> bytes:
    """One request line: `command {compact json}\\n`, raw UTF-8 (no `\\u` escapes for non-ASCII)."""
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    # A lone surrogate cannot be sent as UTF-8; replace it so Lean answers with an error, not us crashing.
    return f"{command} {body}\n".encode("utf-8", errors="replace")


def _pp(expr: Any) -> str:
    """The pretty-printed text of an expression field (`{"pp": ...}` normally; tolerate a bare string)."""
    if isinstance(expr, str):
        return expr
    if isinstance(expr, Mapping):
        pp = expr.get("pp")
        if isinstance(pp, str):
            return pp
        sexp = expr.get("sexp")
        if isinstance(sexp, str):
            return sexp
    return "" if expr is None else str(expr)


def parse_goal(obj: Mapping[str, Any]) -> Goal:
    """One goal object of any version (v0.2 `isConversion`, v0.3 `fragment`)."""
    variables = []
    for var in obj.get("vars") or ():
        value = var.get("value")
        variables.append(
            Variable(
                name=str(var.get("userName") or var.get("name") or "_"),
                type=_pp(var.get("type")),
                value=_pp(value) if value is not None else None,
                inaccessible=bool(var.get("isInaccessible", False)),
            )
        )
    case = obj.get("userName")
    return Goal(
        target=_pp(obj.get("target")),
        variables=tuple(variables),
        case=str(case) if case else None,
        mvar=str(obj["name"]) if obj.get("name") is not None else None,
    )


def _message_text(message: Any) -> str:
    if isinstance(message, str):
        return message
    if isinstance(message, Mapping):
        data = message.get("data")
        return data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return str(message)


def _split_messages(messages: Any, *, untyped_are_errors: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(errors, others). Plain-string messages carry no severity: `untyped_are_errors` decides."""
    errors: list[str] = []
    others: list[str] = []
    if isinstance(messages, str):
        messages = [messages]
    for message in messages or ():
        if isinstance(message, Mapping):
            target = errors if message.get("severity") == ERROR_SEVERITY else others
        else:
            target = errors if untyped_are_errors else others
        target.append(_message_text(message))
    return tuple(errors), tuple(others)


def parse_tactic_reply(reply: Mapping[str, Any], elapsed_ms: float = 0.0) -> TacticResult:
    """Classify a `goal.tactic` reply. Anything that is not an unambiguous success is not a success."""
    if "error" in reply:
        desc = str(reply.get("desc", ""))
        if desc == INTERRUPT_DESC:
            return TacticResult(TacticKind.TIMEOUT, errors=("Lean interrupted the tactic (timeout)",),
                                elapsed_ms=elapsed_ms)
        return TacticResult(TacticKind.ERROR, errors=(f"{reply['error']}: {desc}",), elapsed_ms=elapsed_ms)
    if "parseError" in reply:
        return TacticResult(TacticKind.PARSE_ERROR, errors=(str(reply["parseError"]),), elapsed_ms=elapsed_ms)
    if "tacticErrors" in reply:  # v0.2.x failure
        errors = tuple(_message_text(e) for e in reply.get("tacticErrors") or ()) or ("tactic failed",)
        return TacticResult(TacticKind.ERROR, errors=errors, elapsed_ms=elapsed_ms)
    has_sorry = bool(reply.get("hasSorry", False))
    has_unsafe = bool(reply.get("hasUnsafe", False))
    goals_raw = reply.get("goals")
    state_id = reply.get("nextStateId")
    if goals_raw is None or not isinstance(goals_raw, list):
        errors, others = _split_messages(reply.get("messages"), untyped_are_errors=True)
        if not errors:
            errors = others or ("Lean returned no goals and no error message",)
        return TacticResult(TacticKind.ERROR, errors=errors, has_sorry=has_sorry, has_unsafe=has_unsafe,
                            elapsed_ms=elapsed_ms)
    errors, others = _split_messages(reply.get("messages"), untyped_are_errors=False)
    if errors:
        # Error messages next to goals: Lean recovered from an error. Never a usable state.
        return TacticResult(TacticKind.ERROR, errors=errors, warnings=others, has_sorry=has_sorry,
                            has_unsafe=has_unsafe, elapsed_ms=elapsed_ms)
    if not isinstance(state_id, int) or isinstance(state_id, bool):
        return TacticResult(TacticKind.ERROR, errors=("Lean returned goals without a state id",),
                            has_sorry=has_sorry, has_unsafe=has_unsafe, elapsed_ms=elapsed_ms)
    return TacticResult(
        TacticKind.SUCCESS,
        state_id=state_id,
        goals=tuple(parse_goal(g) for g in goals_raw),
        warnings=others,
        has_sorry=has_sorry,
        has_unsafe=has_unsafe,
        elapsed_ms=elapsed_ms,
    )


def raise_for_error(reply: Mapping[str, Any], command: str) -> None:
    """Commands that must succeed (goal.start, goal.print, ...) raise on `{"error": ...}`."""
    if "error" in reply:
        raise LeanProtocolError(str(reply["error"]), str(reply.get("desc", "")), command)


def parse_start_reply(reply: Mapping[str, Any]) -> int:
    """`goal.start` → the new state id."""
    raise_for_error(reply, "goal.start")
    state_id = reply.get("stateId")
    if not isinstance(state_id, int) or isinstance(state_id, bool):
        raise LeanProtocolError("shape", f"goal.start reply has no integer stateId: {dict(reply)}", "goal.start")
    return state_id


def parse_print_reply(reply: Mapping[str, Any]) -> tuple[RootInfo, tuple[Goal, ...]]:
    """`goal.print` → what it says about the root proof term, and the state's goals (if requested)."""
    raise_for_error(reply, "goal.print")
    root = reply.get("root")
    info = RootInfo(
        has_sorry=bool(reply.get("rootHasSorry", False)),
        has_unsafe=bool(reply.get("rootHasUnsafe", False)),
        # Unknown means "not shown to be complete": absent flags count against soundness.
        has_mvar=bool(reply.get("rootHasMVar", True)),
        root=_pp(root) if root is not None else None,
    )
    goals = tuple(parse_goal(g) for g in reply.get("goals") or ())
    return info, goals


def parse_compile_reply(reply: Mapping[str, Any]) -> CompileResult:
    """`frontend.process` → every message of every compilation unit."""
    raise_for_error(reply, "frontend.process")
    messages: list[CompileMessage] = []
    for unit in reply.get("units") or ():
        for message in unit.get("messages") or ():
            if isinstance(message, Mapping):
                pos = message.get("pos")
                line = pos.get("line") if isinstance(pos, Mapping) else None
                messages.append(
                    CompileMessage(
                        severity=str(message.get("severity", ERROR_SEVERITY)),
                        text=_message_text(message),
                        kind=str(message.get("kind", "")),
                        line=line if isinstance(line, int) else None,
                    )
                )
            else:
                messages.append(CompileMessage(severity=ERROR_SEVERITY, text=_message_text(message)))
    return CompileResult(messages=tuple(messages))


def parse_count_reply(reply: Mapping[str, Any], command: str) -> int:
    """`stat` / `reset` → the number of goal states (for reset: before clearing)."""
    raise_for_error(reply, command)
    count = reply.get("nGoals", 0)
    return count if isinstance(count, int) else 0

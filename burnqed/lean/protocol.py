"""Pantograph REPL wire format: request lines out, reply objects in, records back (docs/lean.md, "One worker").

    line = encode_request("goal.tactic", payload)                   # b'goal.tactic {json}\\n', raw UTF-8
    result = parse_tactic_reply(reply, elapsed_ms, version=version)  # a TacticResult, whatever the reply's shape

Replies are parsed tolerantly across versions (the shapes per version: docs/lean.md, "Versions") and strictly in
evidence: a field the running version always sends (`hasSorry`, the root flags, a unit's `boundary`) that is
missing makes the reply a failure, never a success. Pure; `burnqed.lean.client` does the I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from burnqed.errors import LeanProtocolError
from burnqed.records.replies import (
    CompileMessage,
    CompileResult,
    CompileUnit,
    Goal,
    RootInfo,
    SketchResult,
    Subgoal,
    TacticKind,
    TacticResult,
    Variable,
)
from burnqed.text.sketch import Hole
from leankit.names import shown_name
from leankit.text import read_as_lean
from leankit.version import LATEST, PantographVersion

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
    """One goal object of any version (v0.2 `isConversion`, v0.3 `fragment`). Hypothesis and case names are kept
    as Lean's goal display writes them (`leankit.names.shown_name`: before 0.3.15 Pantograph quoted an
    escaped name, `"«a b»"`, and sent a case with its macro scopes; from 0.3.15 it sends `Name.toString`)."""
    variables = []
    for var in obj.get("vars") or ():
        value = var.get("value")
        variables.append(
            Variable(
                name=shown_name(str(var.get("userName") or var.get("name") or "_")),
                type=_pp(var.get("type")),
                value=_pp(value) if value is not None else None,
                inaccessible=bool(var.get("isInaccessible", False)),
            )
        )
    case = obj.get("userName")
    return Goal(
        target=_pp(obj.get("target")),
        variables=tuple(variables),
        case=shown_name(str(case), case=True) if case else None,
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


def _flag(reply: Mapping[str, Any], key: str) -> bool | None:
    """A Bool field of a reply; None when it is missing or not a Bool (never read as false)."""
    value = reply.get(key)
    return value if isinstance(value, bool) else None


def parse_tactic_reply(
    reply: Mapping[str, Any], elapsed_ms: float = 0.0, version: PantographVersion = LATEST
) -> TacticResult:
    """Classify a `goal.tactic` reply. Anything that is not an unambiguous success is not a success: from
    Pantograph 0.3.1 on, a success must carry Bool `hasSorry` and `hasUnsafe` (a reply without them is an
    error); before 0.3.1 Lean reports neither, and the result says so (`flags_reported=False`)."""
    if "error" in reply:
        desc = str(reply.get("desc", ""))
        if desc == INTERRUPT_DESC:
            return TacticResult(TacticKind.TIMEOUT, errors=("Lean interrupted the tactic (timeout)",),
                                elapsed_ms=elapsed_ms)
        return TacticResult(TacticKind.ERROR, errors=(f"{reply['error']}: {desc}",), elapsed_ms=elapsed_ms)
    if "parseError" in reply:
        return TacticResult(TacticKind.PARSE_ERROR, errors=(str(reply["parseError"]),), elapsed_ms=elapsed_ms)
    reported = version.sorry_flags
    if "tacticErrors" in reply:  # v0.2.x / v0.3.0 failure
        errors = tuple(_message_text(e) for e in reply.get("tacticErrors") or ()) or ("tactic failed",)
        return TacticResult(TacticKind.ERROR, errors=errors, flags_reported=reported, elapsed_ms=elapsed_ms)
    sorry_flag, unsafe_flag = _flag(reply, "hasSorry"), _flag(reply, "hasUnsafe")
    has_sorry, has_unsafe = bool(sorry_flag), bool(unsafe_flag)
    goals_raw = reply.get("goals")
    state_id = reply.get("nextStateId")
    if goals_raw is None or not isinstance(goals_raw, list):
        errors, others = _split_messages(reply.get("messages"), untyped_are_errors=True)
        if not errors:
            errors = others or ("Lean returned no goals and no error message",)
        return TacticResult(TacticKind.ERROR, errors=errors, has_sorry=has_sorry, has_unsafe=has_unsafe,
                            flags_reported=reported, elapsed_ms=elapsed_ms)
    errors, others = _split_messages(reply.get("messages"), untyped_are_errors=False)
    if errors:
        # Error messages next to goals: Lean recovered from an error. Never a usable state.
        return TacticResult(TacticKind.ERROR, errors=errors, warnings=others, has_sorry=has_sorry,
                            has_unsafe=has_unsafe, flags_reported=reported, elapsed_ms=elapsed_ms)
    if not isinstance(state_id, int) or isinstance(state_id, bool):
        return TacticResult(TacticKind.ERROR, errors=("Lean returned goals without a state id",),
                            has_sorry=has_sorry, has_unsafe=has_unsafe, flags_reported=reported,
                            elapsed_ms=elapsed_ms)
    if reported and (sorry_flag is None or unsafe_flag is None):
        return TacticResult(TacticKind.ERROR, errors=(
            f"Lean's reply lacks Bool hasSorry/hasUnsafe, which Pantograph {version} always sends",),
            elapsed_ms=elapsed_ms)
    return TacticResult(
        TacticKind.SUCCESS,
        state_id=state_id,
        goals=tuple(parse_goal(g) for g in goals_raw),
        warnings=others,
        has_sorry=has_sorry,
        has_unsafe=has_unsafe,
        flags_reported=reported,
        elapsed_ms=elapsed_ms,
    )


def raise_for_error(reply: Mapping[str, Any], command: str) -> None:
    """Commands that must succeed (goal.start, goal.print, ...) raise on `{"error": ...}`."""
    if "error" in reply:
        raise LeanProtocolError(str(reply["error"]), str(reply.get("desc", "")), command)


def _shape_error(command: str, problem: str, reply: Mapping[str, Any]) -> LeanProtocolError:
    return LeanProtocolError("shape", f"{command} reply {problem}: {json.dumps(reply, ensure_ascii=False)[:300]}",
                             command)


def parse_start_reply(reply: Mapping[str, Any]) -> int:
    """`goal.start` → the new state id."""
    raise_for_error(reply, "goal.start")
    state_id = reply.get("stateId")
    if not isinstance(state_id, int) or isinstance(state_id, bool):
        raise _shape_error("goal.start", "has no integer stateId", reply)
    return state_id


def parse_print_reply(
    reply: Mapping[str, Any], version: PantographVersion = LATEST
) -> tuple[RootInfo, tuple[Goal, ...]]:
    """`goal.print` → what it says about the root proof term, and the state's goals (if requested).

    From 0.3.1 the three root flags must be present Bools (LeanProtocolError otherwise: a missing flag is never
    read as false). A missing `root` stays None: Lean prints none while the root is unassigned.
    """
    raise_for_error(reply, "goal.print")
    root = reply.get("root")
    flags = {key: _flag(reply, key) for key in ("rootHasSorry", "rootHasUnsafe", "rootHasMVar")}
    if version.sorry_flags:
        missing = [key for key, value in flags.items() if value is None]
        if missing:
            raise _shape_error("goal.print", f"lacks Bool {', '.join(missing)} (Pantograph {version} sends them)",
                               reply)
    info = RootInfo(
        has_sorry=bool(flags["rootHasSorry"]),
        has_unsafe=bool(flags["rootHasUnsafe"]),
        has_mvar=flags["rootHasMVar"] is not False,
        root=_pp(root) if root is not None else None,
        flags_reported=version.sorry_flags,
    )
    goals = tuple(parse_goal(g) for g in reply.get("goals") or ())
    return info, goals


# `file:line:col: error: ` (Lean's mkErrorStringWithPos); newer Lean writes `error(name): `.
_STRING_SEVERITY = re.compile(r"^[^\n]*?:(\d+):(\d+): (error|warning)(?:\([^)\n]*\))?: ")


def parse_compile_message(message: Any) -> CompileMessage:
    """One `frontend.process` message: a SerialMessage object (0.3.4) or a string (before), whose severity
    Lean wrote as a `file:line:col: error: ` prefix (information messages have none)."""
    if isinstance(message, Mapping):
        pos = message.get("pos")
        line = pos.get("line") if isinstance(pos, Mapping) else None
        column = pos.get("column") if isinstance(pos, Mapping) else None
        severity = message.get("severity")
        return CompileMessage(
            # A message whose severity is missing or unknown counts as an error: never as harmless.
            severity=severity if severity in ("error", "warning", "information") else ERROR_SEVERITY,
            text=_message_text(message),
            kind=str(message.get("kind", "")),
            line=line if _whole_number(line) else None,
            column=column if _whole_number(column) else None,
        )
    if isinstance(message, str):
        text = message[:-1] if message.endswith("\n") else message
        match = _STRING_SEVERITY.match(text)
        if match is None:
            return CompileMessage(severity="information", text=text)
        return CompileMessage(severity=match.group(3), text=text[match.end():], line=int(match.group(1)),
                              column=int(match.group(2)))
    return CompileMessage(severity=ERROR_SEVERITY, text=_message_text(message))


def _whole_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def parse_compile_reply(reply: Mapping[str, Any]) -> CompileResult:
    """`frontend.process` → its compilation units. A reply without `units`, or a unit without `boundary` or
    `messages` (Pantograph always writes both), raises LeanProtocolError."""
    raise_for_error(reply, "frontend.process")
    units_raw = reply.get("units")
    if not isinstance(units_raw, list):
        raise _shape_error("frontend.process", "has no units list", reply)
    units: list[CompileUnit] = []
    for unit in units_raw:
        boundary = unit.get("boundary") if isinstance(unit, Mapping) else None
        messages = unit.get("messages") if isinstance(unit, Mapping) else None
        if (
            not isinstance(boundary, list)
            or len(boundary) != 2
            or not all(isinstance(b, int) and not isinstance(b, bool) for b in boundary)
            or not isinstance(messages, list)
        ):
            raise _shape_error("frontend.process", "has a unit without an integer boundary pair and messages", reply)
        assert isinstance(unit, Mapping)
        constants = unit.get("newConstants")
        new_constants = (
            tuple(str(c) for c in constants) if isinstance(constants, list) else None
        )
        units.append(CompileUnit(start=boundary[0], end=boundary[1],
                                 messages=tuple(parse_compile_message(m) for m in messages),
                                 new_constants=new_constants))
    return CompileResult(units=tuple(units))


def parse_count_reply(reply: Mapping[str, Any], command: str) -> int:
    """`stat` / `reset` → the number of goal states (for reset: before clearing)."""
    raise_for_error(reply, command)
    count = reply.get("nGoals")
    if not isinstance(count, int) or isinstance(count, bool):
        raise _shape_error(command, "has no integer nGoals", reply)
    return count


def _one_goal_state(state_id: Any, goals: Any, command: str, reply: Mapping[str, Any]) -> int:
    if not isinstance(state_id, int) or isinstance(state_id, bool):
        raise _shape_error(command, "has no integer state id for the sorry", reply)
    if not isinstance(goals, list) or len(goals) != 1:
        raise _shape_error(command, f"has {len(goals) if isinstance(goals, list) else 'no'} goals for the "
                           "theorem's one sorry", reply)
    return state_id


SORRY_SLOT = ("the theorem's header leaves {slot} `sorry`, and Lean makes it a goal of its own beside the theorem's "
              "(an answer slot: write the answer in before starting)")


def parse_distil_reply(reply: Mapping[str, Any]) -> int:
    """`frontend.distil` of one `theorem … := by sorry` → the state of its one goal. Lean reports a file that does
    not elaborate as an `io` error carrying the messages (`distilSearchTargets` throws them as a user error). A
    header definition left `sorry` is a search target of its own, or, when the theorem uses it, the first goal of
    the theorem's target (named by it; the theorem's goal then holds `?NAME`): LeanProtocolError naming it."""
    raise_for_error(reply, "frontend.distil")
    targets = reply.get("targets")
    if not isinstance(targets, list) or not targets or not all(isinstance(t, Mapping) for t in targets):
        raise _shape_error("frontend.distil", "does not have exactly one search target", reply)
    goals = [goal for target in targets for goal in (target.get("goals") or ()) if isinstance(goal, Mapping)]
    if len(targets) > 1 or len(goals) > 1:
        names = [str(goal.get("userName")) for goal in goals[:-1] if goal.get("userName")]
        slot = f"'{names[0]}'" if names else "a definition"
        raise LeanProtocolError("header", SORRY_SLOT.format(slot=slot), "frontend.distil")
    return _one_goal_state(targets[0].get("stateId"), targets[0].get("goals"), "frontend.distil", reply)


def parse_sorry_start_reply(reply: Mapping[str, Any], text: str = "") -> int:
    """`frontend.process {sorrys: true}` of a header and one `theorem … := by sorry` (`text`) → the sorry's state.
    An error message in any unit (the statement or the header does not elaborate) raises LeanProtocolError, and
    so does a header definition left `sorry` (Lean gives its unit a goal of its own: `Frontend.collectSorrys`)."""
    result = parse_compile_reply(reply)
    errors = [m.text for unit in result.units for m in unit.messages if m.severity == ERROR_SEVERITY]
    if errors:
        raise LeanProtocolError("elab", f"the theorem does not elaborate: {errors[0][:300]}", "frontend.process")
    units = [unit for unit in reply.get("units") or () if isinstance(unit, Mapping) and "goalStateId" in unit]
    if len(units) > 1:
        boundary = units[0].get("boundary")
        source = ""
        if isinstance(boundary, list) and len(boundary) == 2 and all(isinstance(b, int) for b in boundary):
            source = " ".join(text.encode()[boundary[0] : boundary[1]].decode(errors="replace").split())
        slot = f"`{source[:80]}`" if source else "a definition"
        raise LeanProtocolError("header", SORRY_SLOT.format(slot=slot), "frontend.process")
    if len(units) != 1:
        raise _shape_error("frontend.process", f"has {len(units)} units with sorry goals (expected one)", reply)
    return _one_goal_state(units[0].get("goalStateId"), units[0].get("goals"), "frontend.process", reply)


def _hole_names_in(goal: Goal, names: frozenset[str]) -> frozenset[str]:
    return frozenset(read_as_lean(variable.name) for variable in goal.variables) & names


def sketch_subgoals(holes: Sequence[Hole], state_id: int, goals: Sequence[Goal]) -> tuple[Subgoal, ...] | str:
    """Which of Lean's goals is which hole, read from their contexts, not their order (`goal.tactic {draft}` and
    `frontend.process {sorrys}` list the holes in source order, `frontend.distil` in reverse: docs/lean.md,
    "Sketches"): hole k's goal has exactly the holes before it in context, as hypotheses named as the sketch names
    them. The reason when the goals are not one per hole so (more or fewer goals, a context that fits no hole)."""
    names = frozenset(hole.name for hole in holes)
    if len(goals) != len(holes):
        return f"Lean made {len(goals)} goal(s) of a sketch with {len(holes)} hole(s)"
    found: list[Subgoal] = []
    for index, hole in enumerate(holes):
        before = frozenset(h.name for h in holes[:index])
        fitting = [goal_id for goal_id, goal in enumerate(goals) if _hole_names_in(goal, names) == before]
        if len(fitting) != 1:
            return (f"the hole '{hole.name}' has {len(fitting)} goal(s) with the holes before it in context "
                    f"({', '.join(sorted(before)) or 'none'}), not one")
        found.append(Subgoal(hole.name, hole.statement, state_id, fitting[0], goals[fitting[0]]))
    return tuple(found)


def _sketch_outcome(holes: Sequence[Hole], route: str, state_id: Any, goals: Sequence[Goal] | None,
                    elapsed_ms: float) -> SketchResult:
    if not isinstance(state_id, int) or isinstance(state_id, bool) or goals is None:
        return SketchResult(TacticKind.ERROR, route, errors=("Lean's reply has no state id and goals for the holes",),
                            elapsed_ms=elapsed_ms)
    subgoals = sketch_subgoals(holes, state_id, goals)
    if isinstance(subgoals, str):
        return SketchResult(TacticKind.ERROR, route, errors=(subgoals,), elapsed_ms=elapsed_ms)
    return SketchResult(TacticKind.SUCCESS, route, state_id=state_id, subgoals=subgoals, elapsed_ms=elapsed_ms)


def _goal_list(goals: Any) -> list[Goal] | None:
    return [parse_goal(goal) for goal in goals if isinstance(goal, Mapping)] if isinstance(goals, list) else None


def parse_draft_reply(result: TacticResult, holes: Sequence[Hole]) -> SketchResult:
    """A `goal.tactic {draft}` reply, read as a tactic (`parse_tactic_reply`): Lean's failure as it is, or the
    holes' subgoals. A success that reports `hasSorry` is no sketch (Pantograph turns every `sorry` into a goal)."""
    if result.kind is not TacticKind.SUCCESS:
        return SketchResult(result.kind, "draft", errors=result.errors, states_lost=result.states_lost,
                            elapsed_ms=result.elapsed_ms)
    if result.has_sorry or result.has_unsafe:
        return SketchResult(TacticKind.ERROR, "draft", errors=("Lean's draft reports sorry or unsafe code left",),
                            elapsed_ms=result.elapsed_ms)
    return _sketch_outcome(holes, "draft", result.state_id, result.goals, result.elapsed_ms)


def parse_distil_sketch(reply: Mapping[str, Any], holes: Sequence[Hole], elapsed_ms: float = 0.0) -> SketchResult:
    """`frontend.distil` of a theorem proved by a sketch: one target whose goals are the holes. A file Lean does not
    elaborate is its `io` error with Lean's messages (a domain failure: ERROR); the timeout's `interrupt` a TIMEOUT;
    any other error raises."""
    if reply.get("error") == "io" or reply.get("desc") == INTERRUPT_DESC:
        desc = str(reply.get("desc", ""))
        kind = TacticKind.TIMEOUT if desc == INTERRUPT_DESC else TacticKind.ERROR
        return SketchResult(kind, "distil", errors=(desc,), elapsed_ms=elapsed_ms)
    raise_for_error(reply, "frontend.distil")
    targets = reply.get("targets")
    if not isinstance(targets, list) or len(targets) != 1 or not isinstance(targets[0], Mapping):
        count = len(targets) if isinstance(targets, list) else 0
        return SketchResult(TacticKind.ERROR, "distil", elapsed_ms=elapsed_ms, errors=(
            f"Lean distilled {count} search target(s), not the theorem's one (a header definition left sorry?)",))
    return _sketch_outcome(holes, "distil", targets[0].get("stateId"), _goal_list(targets[0].get("goals")),
                           elapsed_ms)


def parse_process_sketch(reply: Mapping[str, Any], holes: Sequence[Hole], elapsed_ms: float = 0.0) -> SketchResult:
    """`frontend.process {sorrys: true}` of a theorem proved by a sketch: Lean's errors (ERROR, their texts), or the
    one unit with a goal state, whose goals are the holes."""
    result = parse_compile_reply(reply)
    errors = tuple(m.text for unit in result.units for m in unit.messages if m.severity == ERROR_SEVERITY)
    if errors:
        return SketchResult(TacticKind.ERROR, "process", errors=errors, elapsed_ms=elapsed_ms)
    units = [unit for unit in reply.get("units") or () if isinstance(unit, Mapping) and "goalStateId" in unit]
    if len(units) != 1:
        return SketchResult(TacticKind.ERROR, "process", elapsed_ms=elapsed_ms, errors=(
            f"Lean made {len(units)} unit(s) with goals, not the theorem's one (a header definition left sorry?)",))
    return _sketch_outcome(holes, "process", units[0].get("goalStateId"), _goal_list(units[0].get("goals")),
                           elapsed_ms)

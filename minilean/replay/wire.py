"""Pantograph wire shapes for the replay server: messages, errors, key order, request arguments."""

from __future__ import annotations

import json
import re
from typing import Any

from minilean.replay.tactics import JsonObj

DEFAULT_OPTIONS: JsonObj = {
    "timeout": 0,
    "printJsonPretty": False,
    "printImplementationDetailHyps": False,
    "printExprPretty": True,
    "printExprAST": False,
    "printDependentMVars": False,
    "printAuxDecls": False,
    "noRepeat": False,
    "automaticMode": True,
}


def lean_message(text: str, severity: str = "error", file_name: str = "<Pantograph>", **extra: Any) -> JsonObj:
    message: JsonObj = {
        "severity": severity,
        "pos": {"line": 0, "column": 0},
        "kind": "[anonymous]",
        "keepFullRange": False,
        "isSilent": False,
        "fileName": file_name,
        "endPos": None,
        "data": text,
        "caption": "",
    }
    message.update(extra)
    return message


def error_reply(kind: str, desc: str) -> JsonObj:
    return {"error": kind, "desc": desc}


def ordered(value: Any) -> Any:
    """Lean's `Json.compress` writes object keys in reverse code-point order; mirror it recursively."""
    if isinstance(value, dict):
        return {key: ordered(value[key]) for key in sorted(value, reverse=True)}
    if isinstance(value, list):
        return [ordered(item) for item in value]
    return value


def dumps(value: Any) -> str:
    """One reply line: compact, raw UTF-8, keys ordered like Pantograph's."""
    return json.dumps(ordered(value), ensure_ascii=False, separators=(",", ":"))


def parse_json(text: str) -> tuple[Any, str | None]:
    """The JSON value of `text`, or None and the reason it does not parse (deep nesting included)."""
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"{exc.msg} (offset {exc.pos})"
    except RecursionError:
        return None, "maximum nesting depth exceeded"


class ArgumentError(Exception):
    def __init__(self, field_name: str, expected: str) -> None:
        super().__init__(f"{field_name}: {expected}")
        self.field = field_name
        self.expected = expected


def struct_name(command: str) -> str:
    names = {
        "goal.start": "GoalStart",
        "goal.tactic": "GoalTactic",
        "goal.delete": "GoalDelete",
        "goal.print": "GoalPrint",
        "options.set": "OptionsSet",
        "options.print": "OptionsPrint",
        "frontend.process": "FrontendProcess",
        "reset": "Reset",
        "stat": "Stat",
    }
    return f"Pantograph.Protocol.{names.get(command, command)}"


def nat_arg(args: JsonObj, key: str, default: int = 0, optional: bool = False) -> int:
    if key not in args or args[key] is None:
        if optional:
            return default
        raise ArgumentError(key, "Nat expected")
    value = args[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ArgumentError(f"{key}{'?' if optional else ''}", "Nat expected")
    return value


def as_tactic(kind: str, value: str, binder: Any) -> str:
    """The tactic text equivalent to a `goal.tactic` request field."""
    if kind == "tactic":
        return value
    if kind == "expr":
        stripped = value.strip()
        if re.match(r"by\b", stripped):
            return stripped[2:]
        return f"exact {stripped}"
    if kind in ("have", "let"):
        name = binder if isinstance(binder, str) and binder else "this"
        return f"{kind} {name} : {value}"
    return f"calc {value}"

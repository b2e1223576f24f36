"""The Pantograph wire protocol as minilean speaks it: versions, request parsing, reply shapes.

    version = Version.parse("0.3.4")
    problem = request_problem(version, "goal.tactic", {"tactic": "simp"})
    # -> "Pantograph.Protocol.GoalTactic.stateId: Natural number expected"

Pantograph parses every payload with Lean's *derived* `FromJson`: fields are read in declaration order with
`getObjValAs?`, a missing key reads as `null`, an `Option` field takes `null` as none and every other field
fails on it whatever default the Lean source declares, so `readHeader : Bool := false` is required. The first
failing field is reported as `<Structure>.<field>: <reason>` and answered
`{"error":"command","desc":"Unable to parse json: …"}`. The structures per version are those of
`Pantograph/Protocol.lean` (tables in the shared REQUESTS.md); `frontend.distil` (from 0.3.6) takes
`file`, `binderName?` and `ignoreValues` (PyPantograph always sends the latter, the sign of a required field).

Replies: compact JSON, raw UTF-8, object keys in reverse code-point order (Lean's `Json.compress`). How the
versions differ: messages are `SerialMessage` objects from 0.3.4 (strings `file:L:C: error: text` before),
`hasSorry`/`hasUnsafe` and the root flags exist from 0.3.1 (a failed tactic is `{tacticErrors}` before),
goals carry `fragment` from 0.3.3 (`isConversion` before), `goalId` is optional from 0.3.3.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

JsonObj = dict[str, Any]


@dataclass(frozen=True, order=True)
class Version:
    major: int
    minor: int
    patch: int

    @classmethod
    def parse(cls, text: str) -> Version:
        match = re.fullmatch(r"v?(\d+)\.(\d+)\.(\d+)", text.strip())
        if match is None:
            raise ValueError(f"{text!r} is not a version (expected e.g. 0.3.4)")
        return cls(int(match.group(1)), int(match.group(2)), int(match.group(3)))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @property
    def goal_id_required(self) -> bool:
        return self < Version(0, 3, 3)

    @property
    def header_flags(self) -> bool:
        return self >= Version(0, 3, 0)

    @property
    def invocations_is_path(self) -> bool:
        return self >= Version(0, 3, 2)

    @property
    def tactic_errors(self) -> bool:
        return self < Version(0, 3, 1)

    @property
    def sorry_flags(self) -> bool:
        return self >= Version(0, 3, 1)

    @property
    def message_objects(self) -> bool:
        return self >= Version(0, 3, 4)

    @property
    def goal_fragment(self) -> bool:
        return self >= Version(0, 3, 3)

    @property
    def parent_exprs_key(self) -> str:
        return "parentExprs" if self >= Version(0, 3, 3) else "parentExpr"

    @property
    def timeout_option(self) -> bool:
        return self >= Version(0, 3, 0)

    @property
    def mode_field(self) -> bool:
        return self >= Version(0, 3, 3)

    @property
    def interrupt_kind(self) -> str:
        """The `error` kind of the in-REPL timeout reply: `internal` up to 0.3.4, `io` later."""
        return "internal" if self <= Version(0, 3, 4) else "io"

    @property
    def distil(self) -> bool:
        """`frontend.distil` exists (from 0.3.6)."""
        return self >= Version(0, 3, 6)


SUPPORTED = tuple(Version.parse(v) for v in ("0.2.25", "0.3.0", "0.3.1", "0.3.2", "0.3.3", "0.3.4", "0.3.5",
                                              "0.3.6"))
DEFAULT_VERSION = Version(0, 3, 4)

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

FieldSpec = tuple[str, str, str, bool]  # (Lean field name, JSON key, type, optional)

_REASONS = {"String": "String expected", "Bool": "Bool expected", "Nat": "Natural number expected"}

STRUCT_NAMES = {
    "goal.start": "GoalStart", "goal.tactic": "GoalTactic", "goal.delete": "GoalDelete", "goal.print": "GoalPrint",
    "options.set": "OptionsSet", "options.print": "OptionsPrint", "frontend.process": "FrontendProcess",
    "frontend.distil": "FrontendDistil", "reset": "Reset", "stat": "Stat",
}


def _field(name: str, type_: str, optional: bool = False) -> FieldSpec:
    return name, name.rstrip("?"), type_, optional


def structure(version: Version, command: str) -> list[FieldSpec] | None:
    """The payload structure's fields in declaration order; None for a command without one here."""
    v0_2 = not version.header_flags
    if command == "goal.start":
        levels = _field("levels" if v0_2 else "levels?", "Array String", True)
        return [_field("expr", "String", True), levels, _field("copyFrom", "String", True)]
    if command == "goal.tactic":
        fields = [_field("stateId", "Nat")]
        if version.goal_id_required:
            fields.append(_field("goalId", "Nat"))
        else:
            fields += [_field("goalId?", "Nat", True), _field("autoResume?", "Bool", True)]
        fields.append(_field("tactic?", "String", True))
        if version.mode_field:
            fields.append(_field("mode?", "String", True))
        fields += [_field(name, "String", True) for name in ("expr?", "have?", "let?")]
        if not version.mode_field:
            fields += [_field("calc?", "String", True), _field("conv?", "Bool", True)]
        fields += [_field("draft?", "String", True), _field("binderName?", "String", True)]
        return fields
    if command == "goal.print":
        return [_field("stateId", "Nat"), _field("rootExpr?", "Bool", True),
                _field(f"{version.parent_exprs_key}?", "Bool", True), _field("goals?", "Bool", True),
                _field("extraMVars?", "Array String", True)]
    if command == "goal.delete":
        return [_field("stateIds", "List Nat")]
    if command == "options.set":
        names = ["printJsonPretty?", "printExprPretty?", "printExprAST?", "printDependentMVars?", "noRepeat?",
                 "printAuxDecls?", "printImplementationDetailHyps?", "automaticMode?"]
        fields = [_field(name, "Bool", True) for name in names]
        if version.timeout_option:
            fields.append(_field("timeout?", "Nat", True))
        return fields
    if command == "frontend.process":
        fields = [_field("fileName?", "String", True), _field("file?", "String", True)]
        if version.header_flags:
            fields += [_field("readHeader", "Bool"), _field("inheritEnv", "Bool")]
        fields.append(_field("invocations?", "String", True) if version.invocations_is_path
                      else _field("invocations", "Bool"))
        fields += [_field("sorrys", "Bool"), _field("typeErrorsAsGoals", "Bool"), _field("newConstants", "Bool")]
        return fields
    if command == "frontend.distil":
        return [_field("file", "String"), _field("binderName?", "String", True), _field("ignoreValues", "Bool")]
    if command in ("reset", "stat", "options.print"):
        return []
    return None


def _type_problem(type_: str, value: Any) -> str | None:
    if type_ == "String":
        return None if isinstance(value, str) else _REASONS[type_]
    if type_ == "Bool":
        return None if isinstance(value, bool) else _REASONS[type_]
    if type_ == "Nat":
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        return None if ok else _REASONS[type_]
    element = type_.split(" ", 1)[1]
    if not isinstance(value, list):
        return f"expected JSON array, got '{json.dumps(value, ensure_ascii=False, separators=(',', ':'))}'"
    return next((problem for item in value if (problem := _type_problem(element, item)) is not None), None)


def request_problem(version: Version, command: str, payload: Any) -> str | None:
    """The `Unable to parse json: …` reason Pantograph `version` gives `payload`, or None when it parses."""
    fields = structure(version, command)
    if fields is None:
        return None
    obj = payload if isinstance(payload, dict) else {}
    for lean_name, key, type_, optional in fields:
        value = obj.get(key)
        if value is None and optional:
            continue
        problem = _type_problem(type_, value)
        if problem is not None:
            return f"Pantograph.Protocol.{STRUCT_NAMES[command]}.{lean_name}: {problem}"
    return None


def ordered(value: Any) -> Any:
    """Lean's `Json.compress` writes object keys in reverse code-point order; mirror it recursively."""
    if isinstance(value, dict):
        return {key: ordered(value[key]) for key in sorted(value, reverse=True)}
    if isinstance(value, list):
        return [ordered(item) for item in value]
    return value


def dumps(value: Any) -> str:
    return json.dumps(ordered(value), ensure_ascii=False, separators=(",", ":"))


def error_reply(kind: str, desc: str) -> JsonObj:
    return {"error": kind, "desc": desc}


def message(version: Version, text: str, *, severity: str = "error", file_name: str = "<Pantograph>",
            pos: tuple[int, int] = (0, 0), end: tuple[int, int] | None = None, kind: str | None = None,
            prefixed: bool = True) -> JsonObj | str:
    """One Lean message: a SerialMessage object (0.3.4+), else Lean's `Message.toString`
    (`file:line:col: severity: text\\n`; information messages carry no prefix). `prefixed=False` is a tactic
    failure caught as an exception, which Pantograph before 0.3.4 sends as the bare text."""
    if version.message_objects:
        return {
            "severity": severity,
            "pos": {"line": pos[0], "column": pos[1]},
            "kind": kind or ("hasSorry" if severity == "warning" else "[anonymous]"),
            "keepFullRange": False,
            "isSilent": False,
            "fileName": file_name,
            "endPos": None if end is None else {"line": end[0], "column": end[1]},
            "data": text,
            "caption": "",
        }
    if not prefixed:
        return text
    head = "" if severity == "information" else f"{file_name}:{pos[0]}:{pos[1]}: {severity}: "
    return f"{head}{text}\n"

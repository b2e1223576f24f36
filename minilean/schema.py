"""Pantograph's request parsing, per version: the structures of `Pantograph/Protocol.lean` as Lean's derived
`FromJson` reads them, so both servers of the embedded Lean and the test doubles refuse exactly what a real
Pantograph refuses (standard library only, so a double that imports it starts fast).

    problem = request_problem(PantographVersion(0, 3, 2), "goal.tactic", {"stateId": 0, "tactic": "simp"})
    # -> "Pantograph.Protocol.GoalTactic.goalId: Natural number expected"

A missing key reads as `null`, which only an `Option` field accepts, whatever default the Lean source gives; the
first field that fails is reported as `<Structure>.<field>: <reason>`. docs/lean.md, "Requests", has the rules.
"""

from __future__ import annotations

import json
from typing import Any

from leankit.names import name_problem
from leankit.version import PantographVersion

# A field: (Lean field name, JSON key, type, optional). Types: String, Bool, Nat, Name, "List Nat", "Array String",
# "Array Name".
FieldSpec = tuple[str, str, str, bool]

_REASONS = {"String": "String expected", "Bool": "Bool expected", "Nat": "Natural number expected"}


def _field(name: str, type_: str, optional: bool = False) -> FieldSpec:
    return name, name.rstrip("?"), type_, optional


def structure(version: PantographVersion, command: str) -> tuple[str, list[FieldSpec]] | None:
    """(structure name, fields in declaration order) of `command`'s payload at `version`; None if unknown."""
    v0_2 = not version.header_flags
    name = "Name" if version.lean_names else "String"
    if command == "goal.start":
        levels = _field("levels" if v0_2 else "levels?", f"Array {name}", True)
        return "GoalStart", [_field("expr", "String", True), levels, _field("copyFrom", name, True)]
    if command == "goal.tactic":
        return "GoalTactic", _goal_tactic_fields(version)
    if command == "goal.print":
        return "GoalPrint", [
            _field("stateId", "Nat"),
            _field("rootExpr?", "Bool", True),
            _field(f"{version.parent_exprs_key}?", "Bool", True),
            _field("goals?", "Bool", True),
            _field("extraMVars?", f"Array {name}", True),
        ]
    if command == "goal.delete":
        return "GoalDelete", [_field("stateIds", "List Nat")]
    if command == "options.set":
        names = ["printJsonPretty?", "printExprPretty?", "printExprAST?", "printDependentMVars?", "noRepeat?",
                 "printAuxDecls?", "printImplementationDetailHyps?", "automaticMode?"]
        fields = [_field(name, "Bool", True) for name in names]
        if version.timeout_option:
            fields.append(_field("timeout?", "Nat", True))
        return "OptionsSet", fields
    if command == "frontend.process":
        return "FrontendProcess", _frontend_process_fields(version)
    if command == "frontend.distil" and version.distil:
        # `ignoreValues : Bool := true` is required all the same (derived FromJson applies no default).
        return "FrontendDistil", [_field("file", "String"), _field("binderName?", name, True),
                                  _field("ignoreValues", "Bool")]
    if command == "expr.echo":
        return "ExprEcho", [_field("expr", "String"), _field("type?", "String", True),
                            _field("levels" if v0_2 else "levels?", "Array String", True)]
    empty = {"reset": "Reset", "stat": "Stat", "options.print": "OptionsPrint"}
    return (empty[command], []) if command in empty else None


def _goal_tactic_fields(version: PantographVersion) -> list[FieldSpec]:
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
    fields += [_field("draft?", "String", True),
               _field("binderName?", "Name" if version.lean_names else "String", True)]
    return fields


def _frontend_process_fields(version: PantographVersion) -> list[FieldSpec]:
    fields = [_field("fileName?", "String", True), _field("file?", "String", True)]
    if version.header_flags:
        fields += [_field("readHeader", "Bool"), _field("inheritEnv", "Bool")]
    fields.append(_field("invocations?", "String", True) if version.invocations_is_path
                  else _field("invocations", "Bool"))
    if version.process_sorrys:  # gone from 0.3.7
        fields += [_field("sorrys", "Bool"), _field("typeErrorsAsGoals", "Bool")]
    fields.append(_field("newConstants", "Bool"))
    return fields


def _is_nat(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _compress(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _type_problem(type_: str, value: Any) -> str | None:
    """Why `value` is no `type_` (Lean's message), or None."""
    if type_ == "String":
        return None if isinstance(value, str) else _REASONS[type_]
    if type_ == "Bool":
        return None if isinstance(value, bool) else _REASONS[type_]
    if type_ == "Nat":
        return None if _is_nat(value) else _REASONS[type_]
    if type_ == "Name":
        return name_problem(value)
    element = type_.split(" ", 1)[1]
    if not isinstance(value, list):
        return f"expected JSON array, got '{_compress(value)}'"
    return next((problem for item in value if (problem := _type_problem(element, item)) is not None), None)


def request_problem(version: PantographVersion, command: str, payload: Any) -> str | None:
    """The `Unable to parse json: …` reason Pantograph `version` gives `payload`, or None when it parses.
    A command without a known structure is not judged here (None)."""
    spec = structure(version, command)
    if spec is None:
        return None
    name, fields = spec
    obj = payload if isinstance(payload, dict) else {}
    for lean_name, key, type_, optional in fields:
        value = obj.get(key)
        if value is None and optional:
            continue
        problem = _type_problem(type_, value)
        if problem is not None:
            return f"Pantograph.Protocol.{name}.{lean_name}: {problem}"
    return None

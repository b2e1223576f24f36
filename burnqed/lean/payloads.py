"""The request payloads burnqed sends to Pantograph: one function per command, right for the given version.

    payload = goal_tactic(state_id, "simp", goal_id=0)           # {"stateId", "goalId", "tactic"}
    payload = frontend_process(version, text)                   # the compile: each unit's new constants
    payload = scope_load(version, theorem.header)                # the header's opens and options, for later tactics

Pantograph parses every payload with Lean's derived `FromJson`, which does not apply a structure field's default:
every field that is not an `Option` must be present, or the whole request is refused and nothing runs. The fields
per command and version (read from `Pantograph/Protocol.lean` at each tag) are docs/lean.md's "Requests" table;
`burnqed.lean.commands` sends these, and the tests pin them per version against it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from burnqed.text.completion import as_single_tactic
from leankit.text import append_code
from leankit.version import PantographVersion

Payload = dict[str, Any]


def options_set(version: PantographVersion, *, timeout_ms: int, automatic_mode: bool) -> Payload:
    """Lean-side timeout and automatic mode. 0.2.x has no `timeout` option (its parser would silently drop
    it), so it is not sent there: only the client watchdog bounds a command then."""
    payload: Payload = {"automaticMode": automatic_mode}
    if version.timeout_option:
        payload = {"timeout": timeout_ms, **payload}
    return payload


def goal_start(*, expr: str | None = None, copy_from: str | None = None) -> Payload:
    """Exactly one of a statement or the name of a theorem to copy the type from."""
    if (expr is None) == (copy_from is None):
        raise ValueError("give exactly one of expr and copy_from")
    return {"expr": expr} if expr is not None else {"copyFrom": copy_from}


def goal_tactic(state_id: int, tactic: str, goal_id: int = 0) -> Payload:
    """One tactic on one goal; `goalId` always present (docs/lean.md, "Requests"). A step `t1; t2` goes as
    `(t1; t2)`: Pantograph parses exactly one tactic (`text.completion.as_single_tactic`)."""
    return {"stateId": state_id, "goalId": goal_id, "tactic": as_single_tactic(tactic)}


def goal_print(state_id: int, *, root_expr: bool = False, goals: bool = False) -> Payload:
    """What to print of a state: the root proof term (and its flags) and/or the goals."""
    payload: Payload = {"stateId": state_id}
    if root_expr:
        payload["rootExpr"] = True
    if goals:
        payload["goals"] = True
    return payload


def goal_delete(state_ids: Sequence[int]) -> Payload:
    return {"stateIds": list(state_ids)}


def frontend_process(
    version: PantographVersion, text: str, *, inherit_env: bool = False, sorrys: bool = False,
    new_constants: bool = True,
) -> Payload:
    """Compile `text` in the REPL's environment (no header read), listing each unit's new constants (the
    compile). `inherit_env` keeps the environment and the scope the text leaves (`scope_load`); `sorrys`
    (up to 0.3.6 only) turns each sorry into a goal of a new state."""
    if sorrys and not version.process_sorrys:
        raise ValueError(f"frontend.process has no `sorrys` in Pantograph {version}: use frontend.distil")
    if inherit_env and not version.header_flags:
        raise ValueError(f"frontend.process has no `inheritEnv` in Pantograph {version}")
    payload: Payload = {"file": text}
    if version.header_flags:
        payload["readHeader"] = False
        payload["inheritEnv"] = inherit_env
    if not version.invocations_is_path:
        payload["invocations"] = False
    if version.process_sorrys:
        payload["sorrys"] = sorrys
        payload["typeErrorsAsGoals"] = False
    payload["newConstants"] = new_constants
    return payload


# A header line that adds a constant: loaded with `inheritEnv: true` it stays in the REPL's environment, so a
# second load (another theorem's start after a switch) would fail with "already declared".
_DECLARING = re.compile(
    r"^(?:@\[[^\]]*\]\s*)?(?:(?:private|protected|noncomputable|partial|unsafe)\s+)*"
    r"(?:def|theorem|lemma|abbrev|instance|structure|inductive|class|axiom|opaque)\b", re.MULTILINE)


def header_declares(header: str | None) -> bool:
    """The header declares constants (not only opens, options, namespaces, variables)."""
    return _DECLARING.search(header_text(header)) is not None


def header_text(header: str | None) -> str:
    """A theorem's header as the REPL takes it: without `import` lines (the REPL imported its modules at start,
    and with `readHeader: false` an `import` is an error), trailing blanks removed; "" for none."""
    if not header:
        return ""
    kept = [line for line in header.splitlines() if not line.lstrip().startswith("import ")]
    return "\n".join(kept).strip("\n").rstrip()


def theorem_file(header: str | None, declaration: str) -> str:
    """The file a Lean user writes for a theorem to prove: the header, then `DECLARATION := by sorry` (on the
    declaration's last line unless a line comment ends it: `leankit.text.append_code`; a theorem's docstring line
    comes with its declaration, `records.Theorem.declaration`)."""
    head = header_text(header)
    body = f"{append_code(declaration, ':= by sorry')}\n"
    return f"{head}\n\n{body}" if head else body


def scope_load(version: PantographVersion, header: str | None) -> Payload:
    """Make the REPL's scope the header's: `frontend.process {inheritEnv: true}` of the header alone. Pantograph
    takes the scope the text leaves (`Repl.lean`: `if args.inheritEnv … set { … with scope }`), starting from
    an empty one, so an empty header clears the scope another theorem left. The compile and distil never read
    this scope (each starts its text from `Command.mkState`): it is what `goal.tactic` runs in."""
    return frontend_process(version, header_text(header), inherit_env=True, new_constants=False)


def frontend_distil(text: str) -> Payload:
    """Turn the sorry of `text` into a goal state, keeping the value so binders are hypotheses
    (docs/lean.md, "Theorems as written")."""
    return {"file": text, "ignoreValues": False}


def empty() -> Payload:
    """`reset` and `stat` take no fields."""
    return {}

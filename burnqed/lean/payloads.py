"""The request payloads burnqed sends to Pantograph: one function per command, right for the given version.

    payload = goal_tactic(state_id, "simp", goal_id=0)           # {"stateId", "goalId", "tactic"}
    payload = frontend_process(version, text)                   # the compile: each unit's new constants
    payload = scope_load(version, theorem.header)                # the header's scope commands, for later tactics
    payload = goal_draft(state_id, sketch.draft_term(), goal_id=0)   # {"stateId", "goalId", "draft"}: a sketch

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
from leankit.declaration import command_starts
from leankit.statements import append_code, doc_comment_before, doc_comments
from leankit.text import mask_comments
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


def goal_draft(state_id: int, term: str, goal_id: int = 0) -> Payload:
    """A sketch's term (`by` and its tactics) elaborated against one goal, each `sorry` in it a new goal
    (`goal.tactic`'s optional `draft`, in every supported version; `goalId` always, as for a tactic)."""
    return {"stateId": state_id, "goalId": goal_id, "draft": term}


def goal_print(state_id: int, *, root_expr: bool = False, goals: bool = False) -> Payload:
    """What to print of a state: the root proof term (and its flags) and/or the goals."""
    payload: Payload = {"stateId": state_id}
    if root_expr:
        payload["rootExpr"] = True
    if goals:
        payload["goals"] = True
    return payload


def expr_echo(expr: str) -> Payload:
    """`expr.echo`: `expr` elaborated in the process's environment and printed back (`ExprEcho`: `expr` required,
    `type?` and the levels optional, in every supported version)."""
    return {"expr": expr}


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


# The commands that only shape the REPL's scope (`Command.Scope`: namespace, opens, options, variables, universes,
# `noncomputable section`); every other command of a header (a definition, an instance, a notation, an attribute,
# `#eval`, …) is left out of the scope load (`scope_text`).
_SCOPE_COMMAND = re.compile(
    r"(?:open|set_option|section|end|namespace|variable|universe|include|omit|noncomputable\s+section)(?![\w'.])")
_ENDS_WITH_IN = re.compile(r"(?<![\w'])in\s*$")  # `open Foo in` / `set_option … in`: part of the next command
_MUTUAL_END = re.compile(r"^end(?![\w'])", re.MULTILINE)


def _header_commands(head: str) -> list[tuple[int, int, bool]]:
    """The commands of a header (import lines removed) as (start, end, is scope), split at column-0 commands of
    the comment-masked text (`leankit.declaration.command_starts`). A declaration's doc comment goes with it, a
    command ending with `in` with the command it prefixes, and `mutual … end` is one declaration."""
    masked = mask_comments(head)
    starts = command_starts(masked)
    docs = doc_comments(head)
    commands: list[tuple[int, int, bool]] = []
    index = 0
    while index < len(starts):
        start = starts[index]
        words = masked[start:].split(maxsplit=1)
        joined = False  # `… in` prefixes the next command: the two are one
        if words and words[0] == "mutual":
            closing = _MUTUAL_END.search(masked, start)
            stop = len(masked) if closing is None else closing.end()
            while index < len(starts) and starts[index] < stop:
                index += 1
        else:
            index += 1
            while index < len(starts) and _ENDS_WITH_IN.search(masked[start:starts[index]]):
                index, joined = index + 1, True
        end = starts[index] if index < len(starts) else len(head)
        scope = _SCOPE_COMMAND.match(masked, start) is not None and not joined and words[0] != "mutual"
        commands.append((start, end, scope))
    # A doc comment right before a declaration is part of it (Lean attaches it), not of the command before.
    for at in range(1, len(commands)):
        start, end, scope = commands[at]
        doc = doc_comment_before(head, start, docs)
        if not scope and doc is not None and doc.start >= commands[at - 1][0]:
            before = commands[at - 1]
            commands[at - 1] = (before[0], doc.start, before[2])
            commands[at] = (doc.start, end, scope)
    return commands


def header_declarations(header: str | None) -> list[str]:
    """The header's commands that are not scope commands (definitions, instances, notations, …), as written."""
    head = header_text(header)
    return [head[start:end].strip() for start, end, scope in _header_commands(head) if not scope]


def scope_text(header: str | None) -> str:
    """The part of a header that the scope load sends (`scope_load`): its scope commands, as written, without the
    commands that declare or change the environment. Those would stay in the REPL's environment (`inheritEnv:
    true` keeps it), and the start text, which restates the header, would declare them again ("already
    declared"); the start and the compile elaborate them instead, each in its own file (docs/lean.md, "Theorems
    as written"). A header of scope commands only is returned whole."""
    head = header_text(header)
    commands = _header_commands(head)
    masked = mask_comments(head)
    if commands and commands[-1][2] and _ENDS_WITH_IN.search(masked[commands[-1][0]:]):
        # `open Real in` right before the theorem opens it for the theorem, so for its tactics: `open Real`.
        start, _, _ = commands[-1]
        head = head[:start] + _ENDS_WITH_IN.sub("", head[start:])
    if all(scope for _, _, scope in commands):
        return head.rstrip()
    first = commands[0][0] if commands else len(head)
    kept = [head[:first], *(head[start:end] for start, end, scope in commands if scope)]
    return "\n".join(line.rstrip() for line in "".join(kept).strip("\n").splitlines()).rstrip()


def header_text(header: str | None) -> str:
    """A theorem's header as the REPL takes it: without `import` lines (the REPL imported its modules at start,
    and with `readHeader: false` an `import` is an error), trailing blanks removed; "" for none."""
    if not header:
        return ""
    kept = [line for line in header.splitlines() if not line.lstrip().startswith("import ")]
    return "\n".join(kept).strip("\n").rstrip()


def theorem_file(header: str | None, declaration: str) -> str:
    """The file a Lean user writes for a theorem to prove: the header, then `DECLARATION := by sorry` (on the
    declaration's last line unless a line comment ends it: `leankit.statements.append_code`; a theorem's docstring line
    comes with its declaration, `records.theorem.Theorem.declaration`)."""
    head = header_text(header)
    body = f"{append_code(declaration, ':= by sorry')}\n"
    return f"{head}\n\n{body}" if head else body


def sketch_file(header: str | None, declaration: str, body: str) -> str:
    """The file of a theorem proved by a sketch: the header, then `DECLARATION := by` and `body` (the sketch's
    tactic block, indented), for `frontend.distil`/`frontend.process {sorrys}` to make its holes goals."""
    head = header_text(header)
    text = f"{append_code(declaration, ':= by')}\n{body.rstrip()}\n"
    return f"{head}\n\n{text}" if head else text


def scope_load(version: PantographVersion, header: str | None) -> Payload:
    """Make the REPL's scope the header's: `frontend.process {inheritEnv: true}` of the header's scope commands
    (`scope_text`). Pantograph takes the scope the text leaves (`Repl.lean`: `if args.inheritEnv … set { … with
    scope }`), starting from an empty one, so an empty header clears the scope another theorem left. The compile
    and distil never read this scope (each starts its text from `Command.mkState`): it is what `goal.tactic` runs
    in, on the environment its goal state carries."""
    return frontend_process(version, scope_text(header), inherit_env=True, new_constants=False)


def frontend_distil(text: str) -> Payload:
    """Turn the sorry of `text` into a goal state, keeping the value so binders are hypotheses
    (docs/lean.md, "Theorems as written")."""
    return {"file": text, "ignoreValues": False}


def empty() -> Payload:
    """`reset` and `stat` take no fields."""
    return {}

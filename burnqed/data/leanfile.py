"""Lean source files as rows: every `theorem`/`lemma` of a `.lean` file becomes one row in the miniF2F layout
(`name`, `formal_statement`, `header`), so a benchmark as miniF2F-lean4 ships it (one file per theorem, or all
theorems in one file) enters through the same converter as a JSONL benchmark.

    rows = lean_file_rows(Path("MiniF2F/Test/aime_1983_p1.lean").read_text())
    rows[0]["name"]              # "aime_1983_p1"  (qualified by the open namespaces: `Foo.bar`)
    rows[0]["formal_statement"]  # "theorem aime_1983_p1 (x y z w : ℕ) … := by sorry"
    rows[0]["header"]            # the commands in force before it: "set_option maxHeartbeats 0\\nopen … Rat"

A file is cut into column-0 commands (comments ignored). The header of a theorem is every command before it
that is not a theorem, an `import` (the index keeps no imports) or a `#` command (`#eval`, `#check`): `open`,
`set_option`, `namespace`/`section`/`end`, `variable`, definitions such as PutnamBench's `abbrev …_solution`.
A command ending in `in` (`open Real in`) belongs to the next command only. `@[attr]` on its own line stays
with its declaration. A theorem inside `namespace Ns` is named `Ns.name` (the constant Lean declares), and the
header writes the namespace as `section` + `open Ns` (its `end Ns` as `end`), so that the declaration
`theorem Ns.name …` after the header declares that same constant and the namespace's names still resolve.
"""

from __future__ import annotations

import re

from burnqed.data.declaration import command_starts, declaration_at, parse_declaration
from burnqed.lean.text import mask_comments, normalize_newlines

_ENDS_WITH_IN = re.compile(r"(?<![\w'])in\s*$")
_SCOPE = re.compile(r"^(namespace|section|end)(?![\w'])\s*([^\s]*)")


def lean_file_rows(text: str) -> list[dict[str, str]]:
    """One row per theorem/lemma/example of a Lean file, in file order (see the module docstring)."""
    normalized = normalize_newlines(text).expandtabs(2)
    masked = mask_comments(normalized)
    starts = command_starts(masked)
    bounds = list(zip(starts, [*starts[1:], len(masked)], strict=True))
    header: list[str] = []
    scopes: list[list[str]] = []  # open namespaces (their name parts) and sections (no parts)
    attached: list[str] = []  # `… in` commands: in force for the next command only
    rows: list[dict[str, str]] = []
    for start, end in bounds:
        command = masked[start:end].strip()
        if command.startswith("@[") and "\n" not in command:
            continue  # an attribute line of the declaration that follows: no part of any header
        if declaration_at(masked, start):
            decl = parse_declaration(normalized[start:end])
            row = {"formal_statement": normalized[start:end].strip(), "header": "\n".join(header + attached)}
            if decl is not None and decl.name is not None:
                row["name"] = _qualified(decl.name, scopes)
            rows.append(row)
            attached = []
            continue
        if command.startswith(("import", "#")):
            attached = []
            continue
        if _ENDS_WITH_IN.search(command):
            attached.append(command)
            continue
        scope = _SCOPE.match(command)
        if scope is not None:
            command = _track_scope(scopes, scope.group(1), scope.group(2), command)
        header.extend([*attached, command])
        attached = []
    return rows


def _track_scope(scopes: list[list[str]], keyword: str, name: str, command: str) -> str:
    """Follow `namespace`/`section`/`end`; the header's text for the command. A namespace becomes a section that
    opens it: the index names the theorem `Ns.name`, and `theorem Ns.name` inside `namespace Ns` would declare
    `Ns.Ns.name`, while in a section opening `Ns` it declares `Ns.name` and resolves the namespace's names."""
    if keyword == "namespace":
        scopes.append(name.split("."))
        return f"section\nopen {'.'.join(part for scope in scopes for part in scope)}"
    if keyword == "section":
        scopes.append([])
        return command
    closed = scopes.pop() if scopes else []
    return "end" if closed else command


def _qualified(name: str, scopes: list[list[str]]) -> str:
    """The declared name with the open namespaces in front (`_root_.x` is `x`)."""
    if name.startswith("_root_."):
        return name.removeprefix("_root_.")
    parts = [part for scope in scopes for part in scope]
    return ".".join([*parts, name])

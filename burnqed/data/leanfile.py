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
with its declaration. A theorem's docstring (the `/-- … -/` right before it or its attribute) opens its
`formal_statement`, where the converter finds it (`records.Theorem.docstring`). A theorem inside `namespace Ns`
is named `Ns.name` (the constant Lean declares), and the header writes the namespace as `section` + `open Ns`
(its `end Ns` as `end`), so that the declaration `theorem Ns.name …` after the header declares that same
constant and the namespace's names still resolve.
"""

from __future__ import annotations

import re

from burnqed.lean_declaration import (
    command_starts,
    declaration_at,
    parse_declaration,
    qualified_name,
    track_scope,
)
from burnqed.lean_text import doc_comment_before, doc_comments, mask_comments, normalize_newlines

_ENDS_WITH_IN = re.compile(r"(?<![\w'])in\s*$")
_ATTRIBUTE_LINE = re.compile(r"@\[[^\]\n]*\]")  # an attribute alone on its line (`@[simp] theorem …` is a declaration)


def lean_file_rows(text: str) -> list[dict[str, str]]:
    """One row per theorem/lemma/example of a Lean file, in file order (see the module docstring); none for a file
    without a declaration (empty, blank, comments or imports only)."""
    normalized = normalize_newlines(text).expandtabs(2)
    masked = mask_comments(normalized)
    starts = command_starts(masked)
    if not starts:  # empty, blank or comments only: no command, no row (the data source reports a source of none)
        return []
    bounds = list(zip(starts, [*starts[1:], len(masked)], strict=True))
    header: list[str] = []
    scopes: list[list[str]] = []  # open namespaces (their name parts) and sections (no parts)
    attached: list[str] = []  # `… in` commands: in force for the next command only
    rows: list[dict[str, str]] = []
    docs = doc_comments(normalized)
    attribute: int | None = None  # where the attribute line of the next declaration starts
    for start, end in bounds:
        command = masked[start:end].strip()
        pending, attribute = attribute, None
        if _ATTRIBUTE_LINE.fullmatch(command):
            attribute = start
            continue  # an attribute line of the declaration that follows: no part of any header
        if declaration_at(masked, start):
            # Its docstring (before its attribute, as Lean attaches it) is stated with it.
            doc = doc_comment_before(normalized, start if pending is None else pending, docs)
            opening = start if doc is None else doc.start
            decl = parse_declaration(normalized[opening:end])
            row = {"formal_statement": normalized[opening:end].strip(), "header": "\n".join(header + attached)}
            if decl is not None and decl.name is not None:
                row["name"] = qualified_name(decl.name, scopes)
            rows.append(row)
            attached = []
            continue
        if command.startswith(("import", "#")):
            attached = []
            continue
        if _ENDS_WITH_IN.search(command):
            attached.append(command)
            continue
        command = track_scope(scopes, command)
        header.extend([*attached, command])
        attached = []
    return rows

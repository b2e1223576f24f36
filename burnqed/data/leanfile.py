"""Lean source files as rows: every `theorem`/`lemma`/`example` of a `.lean` file becomes one row in the miniF2F layout
(`name`, `formal_statement`, `header`), so a benchmark as miniF2F-lean4 ships it enters through the same converter
as a JSONL benchmark.

    rows = lean_file_rows(Path("MiniF2F/Test/aime_1983_p1.lean").read_text())
    rows[0]["name"]              # "aime_1983_p1"  (qualified by the open namespaces: `Foo.bar`)
    rows[0]["formal_statement"]  # "theorem aime_1983_p1 (x y z w : ℕ) … := by sorry"
    rows[0]["header"]            # the commands in force before it: "set_option maxHeartbeats 0\\nopen … Rat"
    rows[0]["answer"]            # only for a theorem with an answer slot: the `-- 2` line's answer under it
    lean_file_imports(text)      # ("Mathlib",): what its `import` lines name

Every declaration is a row, also one that will not convert (`lean_file_declarations` gives each row's line). What a
header holds, how namespaces and `example`s are named, and where a docstring goes: docs/data.md, "Benchmarks".
"""

from __future__ import annotations

import re

from leankit.answer import answer_slot, reference_answer
from leankit.declaration import (
    DECLARATION_HEAD,
    command_starts,
    declaration_at,
    parse_declaration,
    qualified_name,
    track_scope,
)
from leankit.statements import doc_comment_before, doc_comments
from leankit.text import mask_comments, normalize_newlines

_ENDS_WITH_IN = re.compile(r"(?<![\w'])in\s*$")
_ATTRIBUTE_LINE = re.compile(r"@\[[^\]\n]*\]")  # an attribute alone on its line (`@[simp] theorem …` is a declaration)
_KEYWORD = re.compile(r"(?<![\w'])(theorem|lemma|example)(?![\w'])")
_DECLARED_NAME = re.compile(r"(?<![\w'])(?:theorem|lemma)\s+([^\s(\[{⟨⦃:]+)")  # a name, where the rest may not parse
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_]")
# A declaration Lean reads as a command that is not at column 0: indented (inside a namespace, as some files write
# it), or after `… in` on the same line (`open Real in theorem …`); where it starts.
_INNER_DECLARATION = re.compile(r"(?:^[ \t]+|(?<![\w'])in[ \t]+)(?=" + DECLARATION_HEAD + ")", re.MULTILINE)


def _declaration_starts(masked: str) -> list[int]:
    """Every command start of a comment-masked file: the column-0 commands and the declarations elsewhere."""
    inner = [found.end() for found in _INNER_DECLARATION.finditer(masked)]
    return sorted({*command_starts(masked), *inner})


def example_name(file: str, line: int) -> str:
    """The name an `example` at `line` of `file` is evaluated under: `FILE:LINE` as one Lean identifier, every
    character but an ASCII letter, digit or `_` written `_`, and `_` before a leading digit (`x.lean:12` →
    `x_lean_12`, `Test/1-a.lean:3` → `Test_1_a_lean_3`). `file` is the file as its benchmark holds it: its own
    name, or its path under the folder given."""
    name = _NOT_IN_NAME.sub("_", f"{file}:{line}")
    return f"_{name}" if name[0].isdigit() else name


_IMPORT = re.compile(r"^import[ \t]+([^\n]+)", re.MULTILINE)


def lean_file_imports(text: str) -> tuple[str, ...]:
    """The modules a Lean file's `import` lines name, in order (comments ignored): `("Mathlib",)`."""
    masked = mask_comments(normalize_newlines(text))
    return tuple(module for found in _IMPORT.finditer(masked) for module in found.group(1).split())


def lean_file_rows(text: str) -> list[dict[str, str]]:
    """One row per theorem/lemma/example of a Lean file, in file order (see the module docstring); none for a file
    without a declaration (empty, blank, comments or imports only)."""
    return [row for _, row in lean_file_declarations(text)]


def lean_file_declarations(text: str, file: str | None = None) -> list[tuple[int, dict[str, str]]]:
    """`lean_file_rows` with each row's line (1-based, of its keyword or attribute); with `file` (the file's name
    in its benchmark) an `example` is named `example_name(file, line)`."""
    normalized = normalize_newlines(text).expandtabs(2)
    masked = mask_comments(normalized)
    starts = _declaration_starts(masked)
    if not starts:  # empty, blank or comments only: no command, no row (the data source reports a source of none)
        return []
    bounds = list(zip(starts, [*starts[1:], len(masked)], strict=True))
    header: list[str] = []
    scopes: list[list[str]] = []  # open namespaces (their name parts) and sections (no parts)
    attached: list[str] = []  # `… in` commands: in force for the next command only
    rows: list[tuple[int, dict[str, str]]] = []
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
            slot = answer_slot(row["header"], decl.statement) if decl is not None else None
            if slot is not None and (reference := reference_answer(normalized, slot.name)) is not None:
                row["answer"] = reference  # the header keeps no comment: the file's comment line under the slot
            line = normalized.count("\n", 0, start) + 1
            keyword = _KEYWORD.search(command)
            declared = _DECLARED_NAME.search(command) if decl is None else None
            if decl is not None and decl.name is not None:
                row["name"] = qualified_name(decl.name, scopes)
            elif keyword is not None and keyword.group(1) == "example":
                if file is not None:
                    row["name"] = qualified_name(example_name(file, line), scopes)
            elif declared is not None:
                row["name"] = qualified_name(declared.group(1), scopes)
            rows.append((line, row))
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

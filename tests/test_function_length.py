"""No function of burnqed/, leankit/ or minilean/ is over 80 lines (its `def` line to its last, decorators and
docstring included) unless its docstring says why in a sentence starting "Long because" (CONTRIBUTING.md, "House
rules, in short"): a reader meets one screen of code a function, or the reason it is more.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("burnqed", "leankit", "minilean")
LIMIT = 80
REASON = "Long because"


def long_functions(sources: dict[str, str]) -> list[str]:
    """`path:line name (N lines)` for every function of `sources` (path -> text) over `LIMIT` lines without a
    `REASON` sentence in its docstring; methods and nested functions included."""
    found: list[str] = []
    for path, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.end_lineno is None:
                continue
            size = node.end_lineno - node.lineno + 1
            if size > LIMIT and REASON not in (ast.get_docstring(node) or ""):
                found.append(f"{path}:{node.lineno} {node.name} ({size} lines)")
    return found


def test_no_function_of_the_packages_is_over_80_lines_without_a_reason() -> None:
    sources = {path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
               for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}
    assert {"burnqed/runner/plan.py", "leankit/text.py", "minilean/simp.py"} <= set(sources)
    found = long_functions(sources)
    assert not found, (f"functions over {LIMIT} lines: split them, or say in the docstring why not "
                       f"(a sentence starting {REASON!r}):\n" + "\n".join(found))


def _function(lines: int, docstring: str, *, is_async: bool = False, indent: str = "") -> str:
    """A function of exactly `lines` lines (def, docstring, body) at `indent`."""
    head = f"{indent}{'async ' if is_async else ''}def f() -> None:\n{indent}    \"\"\"{docstring}\"\"\"\n"
    return head + f"{indent}    x = 1\n" * (lines - 2)


@pytest.mark.parametrize(("source", "expected"), [
    (_function(80, "Short enough."), []),
    (_function(81, "One line too many."), ["m.py:1 f (81 lines)"]),
    (_function(81, "Long because it is one table."), []),
    (_function(81, "", is_async=True), ["m.py:1 f (81 lines)"]),
    ("class C:\n" + _function(90, "A method.", indent="    "), ["m.py:2 f (90 lines)"]),
    ("def outer() -> None:\n" + _function(85, "Nested.", indent="    "),
     ["m.py:1 outer (86 lines)", "m.py:2 f (85 lines)"]),
])
def test_a_long_function_is_found_unless_its_docstring_says_why(source: str, expected: list[str]) -> None:
    assert long_functions({"m.py": source}) == expected

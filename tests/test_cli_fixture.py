"""Tests run `burnqed ARGS` one way: tests/processes.py's `cli(...)` (in the test's process on the app's cached click
command, or `process=True`), with the exit code, stdout and stderr a process gives. No test module imports a runner
of its own (`typer.testing`, `click.testing`) but those in `ALLOWED`, each for the reason it gives: a runner of its
own would mix stderr into its output, catch a bug's exception as an exit code 1, and hand the command's logging to
pytest, which hides the lines a user sees."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNNERS = ("typer.testing", "click.testing")
ALLOWED = {
    "tests/processes.py": "`cli` itself: the runner's isolation (stdin, stdout, stderr, environment) around the app's "
                          "cached click command",
    "tests/commands/test_typerapi.py": "contract tests of typer's own behaviour under its runner, on small apps of "
                                       "typer's classes, not burnqed's app (burnqed/commands/typerapi.py)",
}


def runner_imports(source: str) -> list[str]:
    """The runner modules (`RUNNERS`) an import anywhere in `source` names (a function's local imports too), in
    the order written: `import typer.testing`, `from typer.testing import CliRunner`, `from typer import testing`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.startswith(RUNNERS)]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            found += [name for name in names if name in RUNNERS]
    return found


def test_an_import_of_a_runner_is_found_in_each_of_its_forms() -> None:
    source = ("import typer\nfrom typer import Typer\nimport typer.testing\nfrom click.testing import CliRunner\n"
              "def f():\n    from typer import testing, main\n    from typer.testing import CliRunner as R\n"
              "from .testing import x\nimport clicktesting\n")
    assert runner_imports(source) == ["typer.testing", "click.testing", "typer.testing", "typer.testing"]


def test_no_test_module_but_the_allowed_ones_imports_a_runner_of_its_own() -> None:
    importing = sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "tests").rglob("*.py")
                       if runner_imports(path.read_text(encoding="utf-8")))
    assert importing == sorted(ALLOWED), "run `burnqed ARGS` with tests/processes.py's cli(...)"

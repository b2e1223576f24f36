"""LeanDojo tracing of a Lean repository into tactic rows (the optional extra `trace`; docs/data.md, "Tracing").

    burnqed data trace --repo https://github.com/yangky11/lean4-example --commit SHA --output runs/traced/example

The traced steps are written as rows in internlm/Lean-Github's schema, which the `lean-github` converter turns into
tactic pairs; the command writes a prepared-data folder (the rows beside it as `traced.jsonl`). lean-dojo is
imported only inside `require_tracing`, so burnqed works, and its tests run, without it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from burnqed.errors import BurnqedError, InputError
from leankit.declaration import parse_declaration

TRACED_ROWS_FILE = "traced.jsonl"


def require_tracing() -> ModuleType:
    """The `lean_dojo` module, after checking that it and a Lean toolchain are installed."""
    try:
        import lean_dojo
    except ImportError:
        raise InputError(
            "`burnqed data trace` needs LeanDojo, which is not installed: pip install 'burnqed[trace]' "
            "(or use already-traced data: a `lean-github` or `pairs` source in data.sources)"
        ) from None
    if shutil.which("lake") is None and shutil.which("elan") is None:
        raise InputError(
            "`burnqed data trace` needs a Lean toolchain: neither `lake` nor `elan` is on PATH; install elan "
            "(https://github.com/leanprover/elan) so LeanDojo can build the repository"
        )
    module: ModuleType = lean_dojo
    return module


def traced_rows(url: str, commit: str, *, build_deps: bool = False) -> Iterator[dict[str, Any]]:
    """Rows (Lean-Github schema) of every traced tactic of the repository at `url`@`commit`."""
    lean_dojo = require_tracing()
    try:
        repo = lean_dojo.LeanGitRepo(url, commit)
        traced = lean_dojo.trace(repo, build_deps=build_deps)
    except Exception as exc:  # LeanDojo raises plain exceptions for clone, build and trace failures
        raise BurnqedError(f"LeanDojo could not trace {url}@{commit}: {type(exc).__name__}: {exc}") from exc
    for theorem in traced.get_traced_theorems():
        name = str(theorem.theorem.full_name)
        statement = _statement_of(theorem)
        for tactic in theorem.get_traced_tactics():
            if tactic.state_before == "no goals":
                continue
            yield {
                "full_name": name,
                "file_path": str(theorem.theorem.file_path),
                "url": url,
                "commit": commit,
                "tactic": str(tactic.tactic),
                "state_before": str(tactic.state_before),
                "state_after": str(tactic.state_after),
                "statement": statement,
            }


def write_traced_rows(url: str, commit: str, path: Path, *, build_deps: bool = False) -> int:
    """Trace the repository and write its rows as JSONL at `path`; returns the number of rows."""
    require_tracing()
    count = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in traced_rows(url, commit, build_deps=build_deps):
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return count


def _statement_of(theorem: Any) -> str | None:
    """The theorem's ∀-form statement from LeanDojo's `get_theorem_statement()` text, when it parses."""
    try:
        text = theorem.get_theorem_statement()
    except Exception:  # statement extraction is best effort: the theorem still starts by name (copyFrom)
        return None
    decl = parse_declaration(str(text))
    return decl.statement if decl is not None else None

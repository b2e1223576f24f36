"""Reading and writing theorem index files (design §4).

    index = load_theorem_index(Path("minif2f-test.json"))

A malformed file raises `InputError` with one line naming the file and the first problem.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from burnqed.errors import InputError
from burnqed.records import TheoremIndex

BUNDLED_DIR = Path(__file__).parent / "bundled"


def bundled_index_path(split: str | None = None) -> Path:
    """The bundled corpus' theorem index: all theorems, or one split (train | test)."""
    return BUNDLED_DIR / (f"theorems-{split}.json" if split else "theorems.json")


def load_theorem_index(path: Path) -> TheoremIndex:
    """Parse and validate a theorem index file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"theorem index {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"theorem index {path} cannot be read: {exc}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"theorem index {path} is not valid JSON: {exc}") from None
    try:
        index = TheoremIndex.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "top level"
        more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
        raise InputError(f"theorem index {path}: {where}: {first['msg']}{more}") from None
    if not index.theorems:
        raise InputError(f"theorem index {path} lists no theorems")
    return index

"""Reading and writing theorem index files (design §4).

    index = load_theorem_index(Path("minif2f-test.json"))

A malformed file raises `InputError` with one line naming the file and the first problem.
"""

from __future__ import annotations

from pathlib import Path

from burnqed.errors import InputError
from burnqed.records import TheoremIndex
from burnqed.storage import read_json_model

BUNDLED_DIR = Path(__file__).parent / "bundled"


def bundled_index_path(split: str | None = None) -> Path:
    """The bundled corpus' theorem index: all theorems, or one split (train | test)."""
    return BUNDLED_DIR / (f"theorems-{split}.json" if split else "theorems.json")


def load_theorem_index(path: Path) -> TheoremIndex:
    """Parse and validate a theorem index file."""
    index = read_json_model(path, TheoremIndex, "theorem index")
    if not index.theorems:
        raise InputError(f"theorem index {path} lists no theorems")
    return index

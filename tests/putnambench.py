"""PutnamBench's Lean 4 statements as published (tests/fixtures/putnambench, README there), for tests that read,
index or start real benchmark files. Statements only: no test may hold a proof of a PutnamBench problem.

    folder = putnam_files(tmp_path)              # tmp_path/src with the 672 `.lean` files, unpacked once per call
    text = putnam_text("putnam_1965_b4")         # one file's text, read straight from the archive
    names = putnam_names()                       # the 672 problem names, sorted
"""

from __future__ import annotations

import functools
import tarfile
from pathlib import Path

ARCHIVE = Path(__file__).parent / "fixtures" / "putnambench" / "lean4-src.tar.xz"
COUNT = 672  # lean4/src at the vendored commit


@functools.cache
def _members() -> dict[str, str]:
    texts: dict[str, str] = {}
    with tarfile.open(ARCHIVE, "r:xz") as archive:
        for member in archive.getmembers():
            if member.isfile() and member.name.startswith("src/") and member.name.endswith(".lean"):
                handle = archive.extractfile(member)
                assert handle is not None
                texts[Path(member.name).stem] = handle.read().decode("utf-8")
    return texts


def putnam_names() -> list[str]:
    """The problem names (file stems), sorted."""
    return sorted(_members())


def putnam_text(name: str) -> str:
    """The text of `src/NAME.lean`, byte for byte."""
    return _members()[name]


def putnam_files(target: Path, names: list[str] | None = None) -> Path:
    """Write `src/NAME.lean` for `names` (default: all 672) under `target`; returns the `src` folder."""
    folder = target / "src"
    folder.mkdir(parents=True, exist_ok=True)
    for name in names if names is not None else putnam_names():
        (folder / f"{name}.lean").write_text(putnam_text(name), encoding="utf-8")
    return folder

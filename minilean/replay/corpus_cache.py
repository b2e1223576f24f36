"""The replay server's built corpus, kept on disk between starts: a start reads it instead of generating the world.

    served = load_served(build, corpus=None, folder=cache_folder(os.environ))   # (corpus, vocabulary)

A start of `python -m minilean.replay` builds its corpus (the bundled theorems, the generated world and the
conformance theorems, or a `--corpus` file's theorems, all validated) and the corpus vocabulary: most of its
start-up CPU besides the imports. The result is pickled into `<folder>/<key>.pickle`, where the key is the sha256
of everything the build reads: every file of the `leankit` and `minilean.replay` packages (the code that builds,
validates and defines the corpus, the bundled and conformance corpora), the `--corpus` files' names and bytes, the
Python and pydantic versions. A change to any of them is a new key, never a stale entry.

An entry is trusted only when it is this user's and writable by no one else, in a folder of the same kind, and its
payload's sha256 (written before it) matches; anything else (missing, foreign, truncated, corrupt, a pickle that
does not load as a corpus) is rebuilt and written again. Writes go to a temporary file renamed into place, so
concurrent starts never read half an entry; a folder that cannot be written only costs the write. The folder
keeps the `MAX_ENTRIES` most recently used entries (a read touches its entry).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import stat
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

import pydantic
import pydantic_core

import leankit
from leankit.corpus import Corpus

MAX_ENTRIES = 16  # entries kept per folder: the embedded corpus and a few `--corpus` files
SUFFIX = ".pickle"
MAGIC = b"minilean-replay-corpus\n"  # an entry: MAGIC, the sha256 of the payload, the payload (a pickle)
DIGEST_BYTES = 32
# The packages whose files build the corpus: leankit (the corpus model and checks, the world, the bundled corpus)
# and this one (the conformance theorems, how they are added, this file's format).
PACKAGES = (Path(leankit.__file__).resolve().parent, Path(__file__).resolve().parent)


class Served(NamedTuple):
    """What a replay start serves: the corpus and its vocabulary (`leankit.world.messages.corpus_vocabulary`)."""

    corpus: Corpus
    vocabulary: frozenset[str]


def cache_folder(environ: Mapping[str, str]) -> Path | None:
    """`$XDG_CACHE_HOME/burnqed/minilean`, else `~/.cache/burnqed/minilean` ($HOME: the one variable besides
    PYTHONPATH that a sealed Lean worker inherits); None when neither is set (no cache)."""
    if environ.get("XDG_CACHE_HOME"):
        return Path(environ["XDG_CACHE_HOME"]) / "burnqed" / "minilean"
    if environ.get("HOME"):
        return Path(environ["HOME"]) / ".cache" / "burnqed" / "minilean"
    return None


def _package_files(root: Path) -> list[Path]:
    """Every file under `root` but compiled bytecode, in a fixed order."""
    found: list[Path] = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(name for name in subfolders if name != "__pycache__")
        found.extend(Path(folder) / name for name in sorted(files) if not name.endswith((".pyc", ".pyo")))
    return found


def _corpus_files(corpus: Path) -> list[Path]:
    """The files `leankit.corpus.load_corpus(corpus)` reads (a missing path: none, the build says what is wrong)."""
    if corpus.is_dir():
        return sorted(corpus.glob("*.json"))
    return [corpus] if corpus.is_file() else []


def entry_key(corpus: Path | None, packages: tuple[Path, ...] = PACKAGES) -> str:
    """The sha256 of everything the build of `corpus` (None: the embedded corpus) reads."""
    digest = hashlib.sha256()

    def add(part: bytes) -> None:
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)

    for text in (sys.version, pydantic.VERSION, pydantic_core.__version__, str(pickle.HIGHEST_PROTOCOL)):
        add(text.encode())
    for root in packages:
        for file in _package_files(root):
            add(file.relative_to(root).as_posix().encode())
            add(file.read_bytes())
    if corpus is None:
        add(b"embedded")
    else:
        add(b"dir" if corpus.is_dir() else b"file")
        for file in _corpus_files(corpus):
            add(file.name.encode())
            add(file.read_bytes())
    return digest.hexdigest()


def _owned(status: os.stat_result) -> bool:
    """This user's, and writable by no one else (a pickle from anyone else could run code when loaded)."""
    return status.st_uid == os.getuid() and not status.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def read_entry(path: Path) -> Served | None:
    """The entry at `path`, or None when it is missing, not this user's, or does not check (digest, type)."""
    try:
        if not _owned(path.parent.stat()):
            return None
        with path.open("rb") as handle:
            if not _owned(os.fstat(handle.fileno())):
                return None
            data = handle.read()
    except OSError:
        return None
    head, payload = data[:len(MAGIC) + DIGEST_BYTES], data[len(MAGIC) + DIGEST_BYTES:]
    if head != MAGIC + hashlib.sha256(payload).digest():
        return None
    try:
        loaded = pickle.loads(payload)
    except Exception:  # a payload that checks but does not load (a class it names has changed)
        return None
    if not (isinstance(loaded, tuple) and len(loaded) == 2 and isinstance(loaded[0], Corpus)
            and isinstance(loaded[1], frozenset)):
        return None
    return Served(loaded[0], loaded[1])


def write_entry(path: Path, served: Served) -> None:
    """Write `served` to `path` through a temporary file renamed into place; an OSError is the caller's."""
    payload = pickle.dumps((served.corpus, served.vocabulary), protocol=pickle.HIGHEST_PROTOCOL)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")  # mode 0600
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(MAGIC + hashlib.sha256(payload).digest() + payload)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    _prune(path.parent)


def _prune(folder: Path) -> None:
    """Delete all but the `MAX_ENTRIES` most recently used entries (one a concurrent start still reads stays
    readable through its open handle; one deleted before it is opened is rebuilt)."""
    entries = []
    for entry in folder.glob(f"*{SUFFIX}"):
        try:
            entries.append((entry.stat().st_mtime_ns, entry))
        except OSError:
            continue
    for _, entry in sorted(entries, reverse=True)[MAX_ENTRIES:]:
        entry.unlink(missing_ok=True)


def load_served(build: Callable[[], Served], corpus: Path | None, folder: Path | None) -> Served:
    """The cached `build()` of `corpus` (None: the embedded corpus) in `folder`, else `build()` written there
    (None: no cache). What `build` raises (a corpus that fails validation) propagates, and nothing is written."""
    if folder is None:
        return build()
    try:
        path = folder / f"{entry_key(corpus)}{SUFFIX}"
    except OSError:  # a --corpus file that cannot be read: the build names the problem
        return build()
    served = read_entry(path)
    if served is not None:
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: the last entry `_prune` deletes
        return served
    served = build()
    with contextlib.suppress(OSError):  # a read-only or full folder: the next start builds again
        write_entry(path, served)
    return served


__all__ = ["DIGEST_BYTES", "MAGIC", "MAX_ENTRIES", "PACKAGES", "Served", "cache_folder", "entry_key", "load_served",
           "read_entry", "write_entry"]

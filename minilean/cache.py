"""The embedded Lean's cache on disk: what a start built once (the replay server's corpus, minilean's parser tables),
read back by the next start instead of built again.

    folder = cache_folder(os.environ)                  # ~/.cache/burnqed/minilean, None without a home
    key = input_key([grammar.encode()], [lark_dir])    # the sha256 of the inputs: bytes and every file under roots
    value = cached(folder, lambda: key, build, dump, load)   # the entry's value, else build() written as one

An entry is `<folder>/<key>.pickle`: `MAGIC`, the sha256 of the payload, the payload. The key is the sha256 of
everything the build reads (the caller names it: its inputs' bytes and the folders of the code that builds), so a
change to any of them is a new key and never a stale entry. An entry is read only when it and its folder are this
user's and writable by no one else (a payload is a pickle, which could run code when loaded), and its digest matches;
anything else (missing, foreign, truncated, corrupt, a payload `load` refuses) is built again and written again.
Writes go to a temporary file renamed into place, so concurrent starts never read half an entry; a folder that
cannot be written only costs the write. The folder keeps the `MAX_ENTRIES` most recently used entries (a read
touches its entry); deleting it is always safe.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar

MAX_ENTRIES = 16  # entries kept per folder: the embedded corpus, the parser and a few `--corpus` files
SUFFIX = ".pickle"
MAGIC = b"minilean-cache\n"
DIGEST_BYTES = 32

T = TypeVar("T")


def cache_folder(environ: Mapping[str, str]) -> Path | None:
    """`$XDG_CACHE_HOME/burnqed/minilean`, else `~/.cache/burnqed/minilean` ($HOME: the one of the two a sealed
    Lean worker inherits); None when neither is set (no cache)."""
    if environ.get("XDG_CACHE_HOME"):
        return Path(environ["XDG_CACHE_HOME"]) / "burnqed" / "minilean"
    if environ.get("HOME"):
        return Path(environ["HOME"]) / ".cache" / "burnqed" / "minilean"
    return None


def _files(root: Path) -> list[Path]:
    """Every file under `root` but compiled bytecode (and importlib's temporary files beside it), in a fixed order."""
    found: list[Path] = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(name for name in subfolders if name != "__pycache__")
        found.extend(Path(folder) / name for name in sorted(files) if not name.endswith((".pyc", ".pyo")))
    return found


def input_key(parts: Iterable[bytes], roots: Iterable[Path]) -> str:
    """The sha256 of the Python version, `parts` and every file under `roots` (names relative to the root and
    bytes), each length-prefixed so no two different inputs run together into the same text; OSError when a file
    or root cannot be read."""
    digest = hashlib.sha256()

    def add(part: bytes) -> None:
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)

    add(sys.version.encode())
    for part in parts:
        add(part)
    for root in roots:
        if not root.is_dir():  # a package inside a zip: its files cannot be read here
            raise NotADirectoryError(f"{root} is not a folder")
        for file in _files(root):
            add(file.relative_to(root).as_posix().encode())
            add(file.read_bytes())
    return digest.hexdigest()


def _owned(status: os.stat_result) -> bool:
    """This user's, and writable by no one else."""
    return status.st_uid == os.getuid() and not status.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def read_entry(path: Path) -> bytes | None:
    """The payload of the entry at `path`, or None when it is missing, not this user's or its digest does not match."""
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
    return payload if head == MAGIC + hashlib.sha256(payload).digest() else None


def write_entry(path: Path, payload: bytes) -> None:
    """Write `payload` as the entry at `path` through a temporary file renamed into place, then prune the folder;
    an OSError is the caller's."""
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
    """Delete all but the `MAX_ENTRIES` most recently used entries (one a concurrent start reads stays readable
    through its open handle; one deleted before it is opened is built again)."""
    entries = []
    for entry in folder.glob(f"*{SUFFIX}"):
        try:
            entries.append((entry.stat().st_mtime_ns, entry))
        except OSError:
            continue
    for _, entry in sorted(entries, reverse=True)[MAX_ENTRIES:]:
        entry.unlink(missing_ok=True)


def cached(folder: Path | None, key: Callable[[], str], build: Callable[[], T], dump: Callable[[T], bytes],
           load: Callable[[bytes], T | None]) -> T:
    """The value of the entry `key()` in `folder` (`load` of its payload), else `build()`, written there as `dump`
    of it (`folder` None, or a key that raises OSError: no cache). `load` returns None (or raises) for a payload it
    does not accept. What `build` raises propagates, and nothing is written."""
    if folder is None:
        return build()
    try:
        path = folder / f"{key()}{SUFFIX}"
    except OSError:  # an input that cannot be read (a package inside a zip, a --corpus file gone): the build's to say
        return build()
    payload = read_entry(path)
    if payload is not None:
        try:
            value = load(payload)
        except Exception:  # a payload that checks but does not load: built again below
            value = None
        if value is not None:
            with contextlib.suppress(OSError):
                os.utime(path)  # recently used: the last entry `_prune` deletes
            return value
    value = build()
    with contextlib.suppress(OSError):  # a read-only or full folder: the next start builds again
        write_entry(path, dump(value))
    return value


__all__ = ["DIGEST_BYTES", "MAGIC", "MAX_ENTRIES", "SUFFIX", "cache_folder", "cached", "input_key", "read_entry",
           "write_entry"]

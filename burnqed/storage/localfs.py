"""Local files: atomic writes with the umask's modes, JSON documents read into models with one-line errors, the
writability probe, and the rename that publishes a staged folder over nothing or its stage's own output.

    result = read_json_model(path, EvalResult, "eval result")   # InputError naming the file and the field
    write_text_atomic(path, text)                               # readers see the old file or the whole new one
    publishable(tmp)                                            # mkstemp's 0600 → the umask's mode
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from burnqed.errors import InputError, StorageError, from_leankit
from burnqed.storage.faults import _FULL
from burnqed.storage.markers import _NOT_A_FOLDER, StageMarker, _foreign
from burnqed.storage.paths import local_path
from leankit import jsonfile
from leankit.failures import BadInput

M = TypeVar("M", bound=BaseModel)


def read_json_model(
    path: Path, model: type[M], what: str, hint: str = "", defaults: Mapping[str, object] | None = None
) -> M:
    """Read `path` as JSON into `model` (`leankit.jsonfile.read_json_model`); any problem is an `InputError` naming
    `what`, the file and the first offending field."""
    try:
        return jsonfile.read_json_model(path, model, what, hint, defaults)
    except BadInput as exc:
        raise from_leankit(exc) from None


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so that readers see either the old file or the whole new one."""
    _write_local(path.resolve(), text.encode("utf-8"))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def publishable(path: Path, directory: bool = False) -> None:
    """mkstemp/mkdtemp create private (0600/0700) entries; published artifacts get the usual umask modes."""
    os.chmod(path, (0o777 if directory else 0o666) & ~_umask())


def _write_local(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        publishable(Path(tmp))
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(target)  # a write refused (a full disk) names the file it was for
        raise


PROBE_BYTES = 1 << 16  # written (and removed) by the local writability probe


def _probe_write(fd: int, data: bytes) -> int:
    """`os.write` of the writability probe (a seam: tests fill the disk here)."""
    return os.write(fd, data)


def _check_local(uri: str, what: str, folder: bool) -> None:
    try:
        path = local_path(uri)
    except InputError as exc:  # a symlink loop, or a link to nothing on the way
        raise InputError(f"{what} {exc}") from None
    if path.exists():
        if folder and not path.is_dir():
            raise InputError(f"{what} {uri} is a file; give a folder")
        if not folder and path.is_dir():
            raise InputError(f"{what} {uri} is a directory; give a file name")
    ancestor = path if folder and path.is_dir() else path.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise InputError(f"{what} {uri}: {ancestor} is a file, not a folder; choose another path")
    try:
        fd, probe = tempfile.mkstemp(prefix=".burnqed-probe-", dir=ancestor)
    except OSError as exc:
        if exc.errno in _FULL:
            raise StorageError(f"{what} {uri}: no space left in {ancestor} ({exc.strerror}): free space or "
                               "choose another path") from None
        raise InputError(f"{what} {uri}: cannot create files in {ancestor} ({exc.strerror or exc}); "
                         "choose a writable path") from None
    try:  # an empty file needs no free block: write some, so a full disk is refused now, not after the work
        _probe_write(fd, b"\0" * PROBE_BYTES)
    except OSError as exc:
        if exc.errno not in _FULL:
            raise
        raise StorageError(f"{what} {uri}: no space left in {ancestor} ({exc.strerror}): free space or choose "
                           "another path") from None
    finally:
        os.close(fd)
        os.unlink(probe)


def _not_a_folder(path: Path) -> bool:
    """Something stands at `path` and is not a folder: a file, or a link to one or to nothing."""
    return os.path.lexists(path) and not path.is_dir()


def _local_files(folder: Path) -> dict[str, int]:
    """`Store.output_files` of a local folder."""
    found: dict[str, int] = {}
    for base, dirs, files in os.walk(folder):  # links to folders come in `dirs` and are not entered
        here = Path(base)
        for name in [*files, *(d for d in dirs if (here / d).is_symlink())]:
            entry = here / name
            found[entry.relative_to(folder).as_posix()] = entry.lstat().st_size
    return dict(sorted(found.items()))


def _replace_local(folder: Path, final: Path, stage: str) -> str | None:
    """Rename the staged `folder` to `final`. Something at `final` is first renamed aside and looked at there,
    where nobody writes any more: when it is not `stage`'s own output after all (written to meanwhile), it is
    renamed back and the reason returned, nothing replaced. A file (or link) at `final` is nobody's output."""
    if not os.path.lexists(final):
        try:
            os.replace(folder, final)
            return None
        except OSError as exc:  # something landed at `final` since: looked at below like anything found there
            if exc.errno not in (errno.ENOTDIR, errno.ENOTEMPTY, errno.EEXIST):
                raise
    aside = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".old", dir=final.parent))
    old = aside / final.name
    os.replace(final, old)
    if _not_a_folder(old):
        os.replace(old, final)
        aside.rmdir()
        return _NOT_A_FOLDER

    def marker_at(name: str) -> StageMarker | None:
        try:
            return StageMarker.model_validate_json((old / name).read_bytes())
        except (OSError, ValidationError):
            return None

    problem = _foreign(_local_files(old), marker_at, stage)
    if problem is not None:
        os.replace(old, final)
        aside.rmdir()
        return problem
    os.replace(folder, final)
    shutil.rmtree(aside, ignore_errors=True)
    return None


def _publish_download(staging: Path, target: Path) -> None:
    """Move a finished download to its cache place. Another process may have published the same download first
    (same URI, same marker: the same bytes): then its copy stands and ours is dropped by the caller."""
    try:
        os.replace(staging, target)
    except OSError as exc:
        # a folder cannot replace a non-empty folder (ENOTEMPTY/EEXIST); a file replaces a file silently
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not target.exists():
            raise

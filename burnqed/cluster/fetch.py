"""`burnqed fetch URI DIR`: put the file or folder at URI into DIR, for a pod that needs it on local disk - the
policy model the SGLang sidecar serves (SGLang loads local folders only).

    report = fetch("s3://bucket/run/iter_2/export", Path("/models/policy"), require_done=True, store=store)

The download goes to a sibling staging folder renamed into place, the ready file DIR/.burnqed-ready written last
(the sidecar's entrypoint waits for it) with the URI and the source's completion marker, so a second fetch of the
same output is a no-op. DIR is replaced only when it is empty or a fetch filled it (`InputError` otherwise). With
`require_done` the URI must be a finished stage output; with `model_folder` the folder's tokenizer and config.json
are written by `burnqed.policy.modelfolder.rewrite_folder` first (docs/training.md, "One model folder").
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import shutil
from dataclasses import dataclass
from pathlib import Path

from burnqed import storage
from burnqed.errors import InputError, ModelError, StorageError

READY_NAME = ".burnqed-ready"  # also in burnqed/workflows/_sidecars.py and images/sglang/entrypoint.sh
MODEL_FOLDER_LINE = "model folder written by burnqed.policy.modelfolder"  # the stamp's third line with `model_folder`


@dataclass(frozen=True, slots=True)
class FetchReport:
    uri: str
    dest: Path
    files: int
    bytes: int
    skipped: bool  # DIR already held this exact output


def _stamp(uri: str, store: storage.Store, model_folder: bool) -> str:
    marker = storage.join(uri, storage.MARKER_NAME)
    digest = hashlib.sha256(store.read_bytes(marker)).hexdigest() if store.exists(marker) else "-"
    return f"{storage.normalize(uri)}\n{digest}\n" + (f"{MODEL_FOLDER_LINE}\n" if model_folder else "")


def _tally(folder: Path) -> tuple[int, int]:
    sizes = [path.stat().st_size for path in folder.rglob("*") if path.is_file()]
    return len(sizes), sum(sizes)


def _download(uri: str, staging: Path, store: storage.Store) -> None:
    if not storage.is_remote(uri):
        source = storage.local_path(uri)
        if source.is_dir():
            shutil.copytree(source, staging)
        else:
            staging.mkdir(parents=True)
            shutil.copy2(source, staging / source.name)
        return
    fs, path = store.resolve(uri)
    try:
        if fs.isdir(path):
            fs.get(path + "/", str(staging) + "/", recursive=True)
        else:
            staging.mkdir(parents=True)
            fs.get(path, str(staging / posixpath.basename(path)))
    except OSError as exc:
        raise StorageError(f"cannot download {uri}: {exc}") from None


def _rewrite(uri: str, folder: Path) -> None:
    from burnqed.policy.modelfolder import rewrite_folder

    try:
        rewrite_folder(folder)
    except ModelError as exc:
        raise InputError(f"cannot serve {uri}: {exc}") from None


def _check_replaceable(dest: Path) -> None:
    """`InputError` when the folder `dest` holds files but no ready file: not a folder a fetch filled, but somebody's
    files, which a fetch never deletes."""
    if not dest.is_dir() or (dest / READY_NAME).is_file():
        return
    files = sorted(str(path.relative_to(dest)) for path in dest.rglob("*") if not path.is_dir())
    if files:
        shown = ", ".join(files[:3]) + (f", … and {len(files) - 3} more" if len(files) > 3 else "")
        raise InputError(f"{dest} holds files and no {READY_NAME} ({shown}): fetch replaces only an empty folder or "
                         "one it filled; choose another folder")


def fetch(uri: str, dest: Path, *, require_done: bool = False, model_folder: bool = False,
          store: storage.Store) -> FetchReport:
    """Download `uri` into `dest` (see the module docstring); `InputError` when it does not exist (or is not
    finished, with `require_done`), or, with `model_folder`, when it is not a model folder both transformers majors
    can be made to read alike (no config.json or tokenizer.json, special tokens its vocabulary lacks)."""
    if not store.exists(uri):
        raise InputError(f"{uri} does not exist")
    if require_done and not store.is_done(uri):
        raise InputError(f"{uri} is not a finished output (no {storage.MARKER_NAME}); did its stage complete?")
    if dest.exists() and not dest.is_dir():
        raise InputError(f"{dest} exists and is not a folder")
    _check_replaceable(dest)
    if model_folder and not store.exists(storage.join(uri, "config.json")):
        raise InputError(f"{uri} is not a model folder (no config.json)")
    stamp = _stamp(uri, store, model_folder)
    ready = dest / READY_NAME
    if ready.is_file() and ready.read_text(encoding="utf-8") == stamp:
        files, size = _tally(dest)
        return FetchReport(uri=uri, dest=dest, files=files - 1, bytes=size - len(stamp.encode()), skipped=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = dest.parent / f".{dest.name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        _download(uri, staging, store)
        if model_folder:
            _rewrite(uri, staging)
        files, size = _tally(staging)
        if dest.exists():
            _check_replaceable(dest)  # again: it may have been written to while the download ran
            shutil.rmtree(dest)
        os.replace(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    storage.write_text_atomic(ready, stamp)
    return FetchReport(uri=uri, dest=dest, files=files, bytes=size, skipped=False)

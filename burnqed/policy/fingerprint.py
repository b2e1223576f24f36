"""The content fingerprint of a model folder: which model, by content, wherever the folder lies.

    model_fingerprint("s3://bucket/run/iter_1/export", store=store)   # e.g. '3f2a9c0e5b1d7a44'
    folder_fingerprint("/models/tiny")                                # a local folder, no store needed

The value model's encoder identity records it (`burnqed.ebm.encoder_identity`), and `burnqed serve` reports the one
of the folder it serves, so both sides compare the same digest. It hashes every file's name and size, the whole of
small files and `SAMPLES` evenly spaced blocks of large ones (docs/ebm.md, "Embeddings and their cache"); a copy
fingerprints like its original, locally or on S3.
"""

from __future__ import annotations

import hashlib
import posixpath

from burnqed import storage
from burnqed.errors import InputError, StorageError

FULL_HASH_LIMIT = 64 * 1024 * 1024
SAMPLES = 64
BLOCK = 64 * 1024
DIGEST_CHARS = 16


def model_fingerprint(uri: str, *, store: storage.Store) -> str:
    """The fingerprint of the folder at `uri` (path or URI); `InputError` when it holds no file."""
    fs, root = store.resolve(uri)
    return _fingerprint(fs, root, uri)


def folder_fingerprint(folder: str) -> str:
    """`model_fingerprint` of a local folder (path or file:// URI), which needs no store."""
    from fsspec.core import url_to_fs

    fs, root = url_to_fs(str(storage.local_path(folder)))
    return _fingerprint(fs, str(root).rstrip("/") or "/", folder)


def _fingerprint(fs: storage.Filesystem, root: str, uri: str) -> str:
    try:
        found = sorted(str(path) for path in fs.find(root))
    except OSError as exc:
        raise StorageError(f"cannot list {uri}: {exc}") from None
    files = [
        path for path in found
        if not any(part.startswith(".") for part in posixpath.relpath(path, root).split("/"))
        and posixpath.basename(path) != storage.MARKER_NAME
    ]
    if not files:
        raise InputError(f"{uri} holds no files: not a model folder")
    digest = hashlib.sha256()
    try:
        for path in files:
            size = int(fs.size(path))
            digest.update(f"{posixpath.relpath(path, root)}\0{size}\0".encode())
            if size <= FULL_HASH_LIMIT:
                digest.update(bytes(fs.cat_file(path)))
                continue
            for k in range(SAMPLES):
                start = (size - BLOCK) * k // (SAMPLES - 1)
                digest.update(bytes(fs.cat_file(path, start=start, end=start + BLOCK)))
    except OSError as exc:
        raise StorageError(f"cannot read {uri} to fingerprint it: {exc}") from None
    return digest.hexdigest()[:DIGEST_CHARS]

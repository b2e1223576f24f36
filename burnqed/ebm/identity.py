"""Encoder identity: a fingerprint of the policy model folder whose hidden states are the embeddings.

    identity = encoder_identity("local", "s3://bucket/run/iter_1/export")   # reads only sampled byte ranges
    identity.digest                                                         # e.g. '3f2a9c0e5b1d7a44'

The embedding cache keys its chunks by `digest`, and a trained head records it, so a new policy model never
reuses old embeddings and search warns when it scores with another model than the head was trained on.

The fingerprint hashes every file's relative name and size, the whole content of files up to
`FULL_HASH_LIMIT` bytes (configs, tokenizers, the tiny model), and `SAMPLES` evenly spaced blocks of larger
files (weight shards). Fine-tuning changes nearly every block of a weight file, so the sample catches it while
reading 4 MiB per shard instead of 15 GB; the same folder gives the same digest locally and on S3 (byte
ranges through fsspec). Hidden files and the completion marker are left out: a copy fingerprints like its
original.
"""

from __future__ import annotations

import hashlib
import logging
import posixpath
from typing import Literal

from burnqed import storage
from burnqed.ebm.records import EncoderIdentity
from burnqed.errors import BurnqedError, InputError, StorageError

FULL_HASH_LIMIT = 64 * 1024 * 1024
SAMPLES = 64
BLOCK = 64 * 1024
DIGEST_CHARS = 16

log = logging.getLogger(__name__)


def model_fingerprint(uri: str) -> str:
    """The fingerprint of the folder at `uri` (path or URI); `InputError` when it holds no file."""
    fs, root = storage.resolve(uri)
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


def name_digest(name: str) -> str:
    """The stand-in digest of a model known only by name (or URL)."""
    return "name-" + hashlib.sha256(name.encode()).hexdigest()[:DIGEST_CHARS]


def encoder_identity(backend: Literal["local", "sglang"], model: str | None, url: str | None = None) -> EncoderIdentity:
    """The identity of the encoder that embeds with `model` (a folder path or URI; None = the default tiny
    model, built on first use). For 'sglang', `model` names the folder the server serves; when it cannot
    be read, the identity is only its name (or the server URL) and a model change cannot be detected."""
    if model is None:
        from burnqed.policy.tiny import ensure_model

        folder = str(ensure_model(None))
        return EncoderIdentity(backend=backend, model=folder, digest=model_fingerprint(folder), verified=True)
    try:
        return EncoderIdentity(backend=backend, model=model, digest=model_fingerprint(model), verified=True)
    except BurnqedError as exc:
        if backend == "local":
            raise
        log.warning("cannot fingerprint the embedding model %s (%s): identifying it by name only", model, exc)
        return EncoderIdentity(backend=backend, model=model, digest=name_digest(model), verified=False)


def sglang_identity(model: str | None, url: str) -> EncoderIdentity:
    """The identity of an SGLang `/encode` server at `url` serving `model` (folder, URI or None)."""
    if model is None:
        log.warning(
            "the embedding server %s serves an unnamed model: identifying it by its URL only, so a model change "
            "cannot be detected; pass --model (or set policy.model) to the folder it serves", url,
        )
        return EncoderIdentity(backend="sglang", model=url, digest=name_digest(url), verified=False)
    return encoder_identity("sglang", model, url)

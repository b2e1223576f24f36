"""Encoder identity: which model (by content) and which encoder settings produced the embeddings.

    identity = local_identity("s3://bucket/run/iter_1/export", folder, encoder.spec)   # in-process encoder
    identity = served_identity(info, url)       # `burnqed serve`'s GET /encoder_info, fingerprinted by the server
    identity.digest                             # e.g. '3f2a9c0e5b1d7a44': the model folder's fingerprint
    identity.key()                              # the embedding space: digest + backend, layer, pooling, ...

The embedding cache keeps its chunks under `key()`, and a trained head records the identity, so a new policy
model or another pooling never reuses old embeddings, and search refuses a head trained on other embeddings.

The fingerprint hashes every file's relative name and size, the whole content of files up to
`FULL_HASH_LIMIT` bytes (configs, tokenizers, the tiny model), and `SAMPLES` evenly spaced blocks of larger
files (weight shards). Fine-tuning changes nearly every block of a weight file, so the sample catches it while
reading 4 MiB per shard instead of 15 GB; the same folder gives the same digest locally and on S3 (byte
ranges through fsspec). Hidden files and the completion marker are left out: a copy fingerprints like its
original.
"""

from __future__ import annotations

import hashlib
import posixpath
from dataclasses import asdict
from typing import Any

from burnqed import storage
from burnqed.ebm.records import EncoderIdentity
from burnqed.errors import ConfigError, InputError, StorageError
from burnqed.policy.base import POOLINGS, EncoderSpec
from burnqed.prompt import EMBEDDING_TEXT_VERSION

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


def _identity(model: str, digest: str, spec: EncoderSpec, via: str) -> EncoderIdentity:
    return EncoderIdentity(backend="burnqed", model=model, digest=digest, verified=True, layer=spec.layer,
                           pooling=spec.pooling, normalize=spec.normalize, max_tokens=spec.max_tokens,
                           text=EMBEDDING_TEXT_VERSION, dtype=spec.dtype, probe=list(spec.probe) or None,
                           via=via)


def local_identity(model: str, folder: str, spec: EncoderSpec) -> EncoderIdentity:
    """The identity of burnqed's encoder running in this process on `folder` (named `model` in messages)."""
    return _identity(model, folder_fingerprint(folder), spec, "in-process")


def encoder_info(model: str, digest: str, spec: EncoderSpec) -> dict[str, Any]:
    """What `burnqed serve` answers on `GET /encoder_info`: its model, the folder's fingerprint, its spec."""
    return {"backend": "burnqed", "model": model, "digest": digest, "spec": asdict(spec)}


def served_identity(info: Any, url: str) -> EncoderIdentity:
    """The identity of the encoder behind `url`, from its `GET /encoder_info` reply; `ConfigError` when the reply
    is not burnqed's (the fingerprint is the server's own: it read the folder it loaded)."""
    try:
        if not isinstance(info, dict) or info.get("backend") != "burnqed":
            raise ValueError("not a burnqed encoder")
        raw = info["spec"]
        if raw.get("pooling") not in POOLINGS:
            raise ValueError(f"unknown pooling {raw.get('pooling')!r}")
        spec = EncoderSpec(pooling=raw["pooling"], normalize=bool(raw["normalize"]), layer=int(raw["layer"]),
                           max_tokens=int(raw["max_tokens"]), dtype=str(raw["dtype"]),
                           probe=tuple(int(token) for token in raw.get("probe") or ()))
        return _identity(str(info["model"]), str(info["digest"]), spec, url)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(
            f"the encoder at {url} does not describe itself as burnqed's encoder ({exc}); serve the policy model "
            "there with `burnqed serve --encode-only`"
        ) from None

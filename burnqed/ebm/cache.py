"""The embedding cache: Parquet chunks of (sha256 of the text, embedding), one folder per encoder identity.

    cache = EmbeddingCache("s3://bucket/run/iter_1/ebm-cache", identity, store=store)
    matrix, report = await embed_texts(texts, encoder, cache, batch=32, chunk=512)   # matrix[i] embeds texts[i]

Layout: `{uri}/{EncoderIdentity.key()}/encoder.json` and `chunk-NNNNNN-SUFFIX.parquet` files. Texts already in a
chunk are not encoded again; each new chunk is published atomically, so a killed run resumes after its last
written chunk; a folder of another encoder, or a damaged chunk, is refused (`InputError`). docs/ebm.md, "Embeddings
and their cache". numpy and pyarrow are imported here; import this module inside the functions that need it.
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from burnqed import storage
from burnqed.base.progress import progress_bar
from burnqed.ebm.formats import EmbedReport, EncoderIdentity
from burnqed.errors import InputError, PolicyError, StorageError
from burnqed.policy.base import Encoder
from burnqed.text.prompt import PromptFormat, build_embedding_text

if TYPE_CHECKING:
    import torch

    from burnqed.ebm.sampling import EbmDataset

CHUNK_RE = re.compile(r"^chunk-(\d{6,})-[0-9a-f]{8}\.parquet$")
KEY_RE = re.compile(r"^[0-9a-f]{64}$")
IDENTITY_FILE = "encoder.json"

log = logging.getLogger(__name__)

Matrix = np.ndarray[Any, np.dtype[np.float32]]


def _seq(name: str) -> int:
    match = CHUNK_RE.match(name)
    assert match is not None  # only called on names that matched
    return int(match[1])


def text_key(text: str) -> str:
    """The cache key of a text: sha256 of its UTF-8 bytes, hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chunk_table(keys: Sequence[str], vectors: Matrix) -> pa.Table:
    """One chunk's table."""
    dim = int(vectors.shape[1])
    flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1), type=pa.float32())
    return pa.table({"key": pa.array(list(keys), type=pa.string()),
                     "vector": pa.FixedSizeListArray.from_arrays(flat, dim)})


def _damaged(uri: str, problem: str) -> InputError:
    return InputError(f"embedding cache chunk {uri} is damaged ({problem}): delete it and re-run (only its embeddings "
                      "are computed again)")


def _read_chunk(uri: str, data: bytes) -> tuple[list[str], Matrix]:
    """The keys and vectors of one chunk file; InputError naming it when it is not one whole chunk (a truncated
    copy, a data page whose checksum fails, a column of another type, a key that is not a text's hash)."""
    try:
        table = pq.read_table(io.BytesIO(data), page_checksum_verification=True)
        types = {field.name: field.type for field in table.schema}
        vector = types.get("vector")
        if types.get("key") != pa.string() or not isinstance(vector, pa.FixedSizeListType) \
                or vector.value_type != pa.float32():
            found = ", ".join(f"{name}: {kind}" for name, kind in types.items())
            raise _damaged(uri, f"columns {found}, not key: string, vector: fixed_size_list<float>")
        table.validate(full=True)
        keys = table.column("key").to_pylist()
        flat = table.column("vector").combine_chunks().flatten()
        vectors = flat.to_numpy(zero_copy_only=False).astype(np.float32).reshape(-1, vector.list_size)
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
        raise _damaged(uri, " ".join(str(exc).split())) from None
    if not all(KEY_RE.match(key) for key in keys):
        raise _damaged(uri, "a key that is not a SHA-256 in hex")
    return keys, vectors


class EmbeddingCache:
    """The chunks of one encoder under one cache URI (see the module docstring)."""

    def __init__(self, uri: str, identity: EncoderIdentity, *, store: storage.Store) -> None:
        self.uri = uri
        self.store = store
        self.identity = identity
        self.root = storage.join(uri, identity.key())

    def check(self) -> None:
        """Refuse a folder written by another encoder (`InputError`, one line naming both)."""
        uri = storage.join(self.root, IDENTITY_FILE)
        if not self.store.exists(uri):
            return
        try:
            stored = EncoderIdentity.model_validate_json(self.store.read_bytes(uri))
        except ValueError as exc:
            raise InputError(f"embedding cache {self.root} has an unreadable {IDENTITY_FILE} ({exc}); delete the "
                             "folder and re-run") from None
        difference = stored.mismatch(self.identity)
        if difference is not None:
            raise InputError(
                f"embedding cache {self.root} holds embeddings of {stored.describe()}, not of "
                f"{self.identity.describe()} ({difference}); delete that folder or use another --cache"
            )

    def chunk_names(self) -> list[str]:
        """Names of the published chunks, in sequence order."""
        fs, path = self.store.resolve(self.root)
        try:
            entries = fs.ls(path, detail=False, refresh=True) if fs.isdir(path) else []
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StorageError(f"cannot list the embedding cache {self.root}: {exc}") from None
        names = [str(entry).rstrip("/").rsplit("/", 1)[-1] for entry in entries]
        return sorted((n for n in names if CHUNK_RE.match(n)), key=lambda n: (_seq(n), n))

    def lookup(self, wanted: set[str]) -> dict[str, Matrix]:
        """The cached vectors of the keys in `wanted` (every chunk is read; unwanted rows are dropped)."""
        found: dict[str, Matrix] = {}
        for name in self.chunk_names():
            if len(found) == len(wanted):
                break
            uri = storage.join(self.root, name)
            keys, vectors = _read_chunk(uri, self.store.read_bytes(uri))
            for row, key in enumerate(keys):
                if key in wanted and key not in found:
                    found[key] = vectors[row]
        return found

    def next_seq(self) -> int:
        names = self.chunk_names()
        return _seq(names[-1]) + 1 if names else 0

    def write_chunk(self, seq: int, keys: Sequence[str], vectors: Matrix) -> str:
        """Publish one chunk atomically; returns its name."""
        name = f"chunk-{seq:06d}-{uuid.uuid4().hex[:8]}.parquet"
        buffer = io.BytesIO()
        # Page checksums: `lookup` verifies them, so a damaged chunk is refused instead of read as other vectors.
        pq.write_table(chunk_table(keys, vectors), buffer, compression="zstd", write_page_checksum=True)
        self.store.write_bytes(storage.join(self.root, name), buffer.getvalue())
        return name

    def write_identity(self) -> None:
        uri = storage.join(self.root, IDENTITY_FILE)
        if not self.store.exists(uri):
            self.store.write_bytes(uri, self.identity.model_dump_json(indent=2).encode())


async def embed_texts(
    texts: Sequence[str],
    encoder: Encoder,
    cache: EmbeddingCache,
    *,
    batch: int,
    chunk: int,
) -> tuple[Matrix, EmbedReport]:
    """Embeddings of `texts` (row i embeds texts[i]; duplicates embedded once), from the cache where present,
    else from `encoder` (`batch` texts per call), new ones published every `chunk` (module docstring)."""
    if batch < 1 or chunk < 1:
        raise ValueError("batch and chunk must be at least 1")
    started = time.perf_counter()
    cache.check()
    keys = [text_key(text) for text in texts]
    first: dict[str, str] = {}
    for key, text in zip(keys, texts, strict=True):
        first.setdefault(key, text)
    found = cache.lookup(set(first))
    missing = [key for key in first if key not in found]
    cached = len(found)
    log.info("embedding cache %s: %d of %d distinct texts cached, %d to encode",
             cache.root, len(found), len(first), len(missing))
    written = 0
    computed_s = 0.0
    if missing:
        cache.write_identity()
        seq = cache.next_seq()
        pending_keys: list[str] = []
        pending: Matrix | None = None
        with progress_bar("embedding states", total=len(missing)) as advance:
            for start in range(0, len(missing), batch):
                part = missing[start : start + batch]
                began = time.perf_counter()
                vectors = _as_matrix(await encoder.encode([first[key] for key in part]), len(part))
                computed_s += time.perf_counter() - began
                advance(len(part))
                pending_keys += part
                pending = vectors if pending is None else np.concatenate([pending, vectors])
                last = start + batch >= len(missing)
                while pending is not None and (len(pending_keys) >= chunk or (last and pending_keys)):
                    ids, cut = pending_keys[:chunk], pending[:chunk]
                    cache.write_chunk(seq, ids, cut)
                    found.update(zip(ids, cut, strict=True))
                    seq += 1
                    written += 1
                    pending_keys, pending = pending_keys[chunk:], pending[chunk:]
                    log.info("embedded %d/%d states (%.1f states/s); cache chunk %d written",
                             len(found) - cached, len(missing), (len(found) - cached) / max(computed_s, 1e-9), seq - 1)
    dims = {int(vector.shape[0]) for vector in found.values()}
    if len(dims) > 1:
        raise InputError(f"embedding cache {cache.root} mixes widths {sorted(dims)}; delete it and re-run")
    dim = dims.pop() if dims else 0
    matrix: Matrix = np.zeros((len(texts), dim), dtype=np.float32)
    for row, key in enumerate(keys):
        matrix[row] = found[key]
    report = EmbedReport(
        texts=len(first), cached=len(first) - len(missing), computed=len(missing), chunks_written=written,
        seconds=round(time.perf_counter() - started, 3),
        states_per_s=round(len(missing) / computed_s, 2) if computed_s > 0 else 0.0, cache=cache.root,
    )
    return matrix, report


def _as_matrix(vectors: list[list[float]], expected: int) -> Matrix:
    if len(vectors) != expected:
        raise PolicyError(f"the encoder returned {len(vectors)} embeddings for {expected} texts")
    widths = {len(v) for v in vectors}
    if len(widths) != 1 or 0 in widths:
        raise PolicyError(f"the encoder returned embeddings of widths {sorted(widths)}; expected one non-zero width")
    return np.asarray(vectors, dtype=np.float32)


async def embed_dataset(
    data: EbmDataset, fmt: PromptFormat, encoder: Encoder, cache: EmbeddingCache, *, batch: int, chunk: int
) -> tuple[torch.Tensor, dict[str, int], EmbedReport]:
    """Embeddings of every state and goal (row per distinct raw text), the raw text → row map, the report."""
    import torch

    texts = data.texts()
    matrix, report = await embed_texts([build_embedding_text(fmt, t) for t in texts], encoder, cache,
                                       batch=batch, chunk=chunk)
    return torch.from_numpy(matrix), {text: row for row, text in enumerate(texts)}, report

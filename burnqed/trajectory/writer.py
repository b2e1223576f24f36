"""Chunked, append-only trajectory writer: finished theorems are buffered and every `checkpoint_every` theorems
written as a NEW Parquet part plus its commit manifest; earlier files are never rewritten, so checkpointing costs
O(new rows), not O(all rows).

    with TrajectoryWriter(uri, run_id="r1", iteration=0, checkpoint_every=50, store=store) as writer:
        for result, edges in finished:             # edges already labelled (burnqed.trajectory.labels)
            writer.add(result, edges)              # flushes by itself every `checkpoint_every` theorems
        writer.finish({"config_digest": ...})      # last part + _SUCCESS.json

Data file first, then the manifest, each published atomically (docs/trajectories.md, "Layout"); a manifest that
cannot be written (a full disk) takes its data file back, so a stopped run leaves committed parts only. The writer is
synchronous and thread-safe; from async code call it through `asyncio.to_thread(writer.add, result, edges)`.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import posixpath
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO

import pyarrow as pa
import pyarrow.parquet as pq

from burnqed.errors import InputError
from burnqed.records.results import Edge, TheoremResult
from burnqed.storage import Filesystem, Store, publishable, put_bytes
from burnqed.trajectory.reader import is_local, scan_prefix
from burnqed.trajectory.schema import (
    PART_RE,
    SCHEMA_VERSION,
    SUCCESS_NAME,
    CompletionMarker,
    PartManifest,
    data_name,
    manifest_name,
    theorems_to_table,
)

log = logging.getLogger(__name__)

COMPRESSION = "zstd"


def _publish_local(path: str, write: Callable[[IO[bytes]], None]) -> None:
    """Write through `write` to a temp name next to `path`, fsync, then rename over `path`."""
    directory = Path(path).parent
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{Path(path).name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())  # the data must be durable before a manifest can point at it
        publishable(Path(tmp))
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = path  # a write refused (a full disk) names the part it was for
        raise


def publish_bytes(fs: Filesystem, path: str, data: bytes) -> None:
    """Create `path` atomically with `data`: readers see no file or the whole file."""
    if is_local(fs):
        _publish_local(path, lambda handle: _write_all(handle, data))
    else:
        put_bytes(fs, path, data)  # one put: an object appears whole or not at all, and never a multipart upload


def publish_table(fs: Filesystem, path: str, table: pa.Table) -> str:
    """Publish `table` atomically as a zstd Parquet file with page checksums; returns the file's SHA-256 (hex),
    which the part's manifest records so that every reader verifies every byte (`reader.read_part`)."""
    # Serialise first: a streamed upload that fails half-way could still be committed by the file's close.
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression=COMPRESSION, write_page_checksum=True)
    data = sink.getvalue().to_pybytes()
    publish_bytes(fs, path, data)
    return hashlib.sha256(data).hexdigest()


def copy_file(src_fs: Filesystem, src: str, dst_fs: Filesystem, dst: str) -> None:
    """Copy `src` to a new `dst`, published atomically (the filesystems may differ)."""
    if is_local(dst_fs):
        with src_fs.open(src, "rb") as source:
            _publish_local(dst, lambda handle: shutil.copyfileobj(source, handle, 1 << 22))
    else:
        put_bytes(dst_fs, dst, src_fs.cat_file(src))


def _write_all(handle: IO[bytes], data: bytes) -> None:
    handle.write(data)


def remove_orphans(fs: Filesystem, root: str, names: set[str], committed: set[int]) -> list[str]:
    """Delete data files without a manifest and leftover temp files under `root`; returns their names."""
    removed = []
    for name in sorted(names):
        match = PART_RE.match(name)
        orphan = match is not None and match.group(2) == "parquet" and int(match.group(1)) not in committed
        if orphan or (name.startswith(".part-") and name.endswith(".tmp")):
            fs.rm_file(posixpath.join(root, name))
            removed.append(name)
    return removed


class TrajectoryWriter:
    """Appends finished theorems to the trajectory prefix `uri` as numbered, committed parts."""

    def __init__(
        self, uri: str, *, run_id: str, iteration: int, checkpoint_every: int = 50, store: Store
    ) -> None:
        if checkpoint_every < 1:
            raise ValueError(f"checkpoint_every must be at least 1, got {checkpoint_every}")
        self.uri = uri
        self.run_id = run_id
        self.iteration = iteration
        self.checkpoint_every = checkpoint_every
        self._fs, self._root = store.resolve(uri)
        manifests, names = scan_prefix(self._fs, self._root)
        if SUCCESS_NAME in names:
            raise InputError(f"trajectory {uri} is already complete ({SUCCESS_NAME} exists): skip it, "
                             "or delete the prefix to write it again")
        for manifest in manifests:
            if (manifest.run_id, manifest.iteration) != (run_id, iteration):
                raise InputError(
                    f"trajectory {uri} holds part {manifest.part} of run {manifest.run_id!r} iteration "
                    f"{manifest.iteration}, not run {run_id!r} iteration {iteration}: use another prefix"
                )
        self.removed_orphans = remove_orphans(self._fs, self._root, names, {m.part for m in manifests})
        self._parts = [manifest_name(m.part) for m in manifests]
        self._next = manifests[-1].part + 1 if manifests else 0
        self._names = {result.name for m in manifests for result in m.theorems}
        self._theorems = len(self._names)
        self._proved = sum(result.proved for m in manifests for result in m.theorems)
        self._rows = sum(m.rows for m in manifests)
        self._buffer: list[tuple[TheoremResult, Sequence[Edge]]] = []
        self._lock = threading.Lock()
        self._closed = False

    # ------------------------------------------------------------------------------------------ state

    @property
    def parts(self) -> list[str]:
        """Manifest names of the committed parts, including those of earlier writers on this prefix."""
        return list(self._parts)

    @property
    def buffered(self) -> int:
        """Theorems added but not yet committed."""
        return len(self._buffer)

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"trajectory writer for {self.uri} is closed")

    # ------------------------------------------------------------------------------------------ writes

    def add(self, result: TheoremResult, edges: Sequence[Edge]) -> None:
        """Buffer one finished theorem (possibly with no edges); commit a part every `checkpoint_every`."""
        with self._lock:
            self._check_open()
            if result.name in self._names:
                raise ValueError(f"theorem {result.name!r} is already recorded in trajectory {self.uri}")
            self._names.add(result.name)
            self._buffer.append((result, edges))
            if len(self._buffer) >= self.checkpoint_every:
                self._flush_locked()

    def flush(self) -> PartManifest | None:
        """Commit the buffered theorems as one new part; None when nothing is buffered."""
        with self._lock:
            self._check_open()
            return self._flush_locked()

    def _flush_locked(self) -> PartManifest | None:
        if not self._buffer:
            return None
        seq = self._next
        table = theorems_to_table(self.run_id, self.iteration, ((r.name, edges) for r, edges in self._buffer))
        data_path = posixpath.join(self._root, data_name(seq))
        digest = publish_table(self._fs, data_path, table)
        manifest = PartManifest(
            part=seq,
            data=data_name(seq),
            rows=table.num_rows,
            sha256=digest,
            theorems=[result for result, _ in self._buffer],
            run_id=self.run_id,
            iteration=self.iteration,
            written_at=datetime.now(UTC),
            schema_version=SCHEMA_VERSION,
        )
        try:
            publish_bytes(self._fs, posixpath.join(self._root, manifest_name(seq)),
                          manifest.model_dump_json(indent=1).encode())
        except BaseException:
            # A data file without its manifest is no part: take it back rather than leave it for a later writer's
            # orphan sweep (a full disk stops the run here, and the folder then holds committed parts only).
            with contextlib.suppress(OSError):
                self._fs.rm_file(data_path)
            raise
        # Only now, with the manifest published, is the part committed.
        self._next = seq + 1
        self._parts.append(manifest_name(seq))
        self._theorems += len(self._buffer)
        self._proved += sum(result.proved for result, _ in self._buffer)
        self._rows += manifest.rows
        self._buffer = []
        return manifest

    def finish(self, extra: dict[str, object] | None = None) -> CompletionMarker:
        """Commit what is buffered, write `_SUCCESS.json` and close the writer."""
        with self._lock:
            self._check_open()
            self._flush_locked()
            marker = CompletionMarker(
                run_id=self.run_id,
                iteration=self.iteration,
                parts=list(self._parts),
                theorems=self._theorems,
                proved=self._proved,
                rows=self._rows,
                written_at=datetime.now(UTC),
                extra=dict(extra or {}),
            )
            publish_bytes(self._fs, posixpath.join(self._root, SUCCESS_NAME), marker.model_dump_json(indent=1).encode())
            self._closed = True
            return marker

    def close(self) -> None:
        """Commit what is buffered (without marking the prefix complete) and close; idempotent."""
        with self._lock:
            if not self._closed:
                self._flush_locked()
                self._closed = True

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """`close()` whatever happened: the buffered theorems finished their searches, so they are committed
        (without the completion marker) and a resumed run skips them. The one exception: when committing fails
        while another error is already on its way out, that first error is the one raised."""
        if exc_type is None:
            self.close()
            return
        try:
            self.close()
        except Exception:
            log.warning("trajectory %s: the buffered theorems could not be committed while stopping on %s",
                        self.uri, exc_type.__name__, exc_info=True)
            self._closed = True

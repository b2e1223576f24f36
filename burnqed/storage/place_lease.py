"""One writer per place: a run root, a search output, an eval's trajectory prefix (docs/pipeline.md, "Leases").

    with hold_lease(store, "runs", what="run root", command="burnqed iterate --iter 0"):
        ...   # nobody else writes under runs/ meanwhile

A lease is the file `{place}/_LEASE.json` naming its owner, renewed by a heartbeat thread. A second writer refuses
(`LeaseHeldError`, exit 2) naming the owner; a stale lease (its owner dead, or not renewed for `expiry_s` by the
storage's own clock) is taken over with a warning. Locally under an exclusive `flock` of the folder, on S3 through
conditional PUTs (`If-None-Match`, `If-Match`); the owner releases it when its block ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from burnqed import storage
from burnqed.errors import InputError, StorageError

log = logging.getLogger(__name__)

LEASE_NAME = "_LEASE.json"
HEARTBEAT_S = 15.0
EXPIRY_S = 120.0


class LeaseHeldError(InputError):
    """Another live writer holds the place's lease (exit 2: wait for it, stop it, or write elsewhere)."""


class LeaseOwner(BaseModel):
    """The content of `_LEASE.json`."""

    pid: int
    host: str
    command: str
    token: str  # this holder's identity (a pid can be reused, a host renamed)
    started_at: float  # epoch seconds
    heartbeat: float  # epoch seconds of the last renewal
    pid_started: float | None = None  # the owner process's start time (psutil), to tell a reused pid

    def describe(self) -> str:
        since = datetime.fromtimestamp(self.started_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"pid {self.pid} on {self.host} (`{self.command}`, since {since})"


def _process_start(pid: int) -> float | None:
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def stale_reason(owner: LeaseOwner, *, age: float, expiry_s: float, host: str | None = None) -> str | None:
    """Why `owner`'s lease may be taken over, or None while it holds: its process is gone (same host) or the lease
    was last written `age` seconds ago, more than `expiry_s` (an age on the storage's clock: module docstring)."""
    here = host if host is not None else socket.gethostname()
    if owner.host == here:
        started = _process_start(owner.pid)
        if started is None:
            return f"its owner, pid {owner.pid}, is no longer running"
        if owner.pid_started is not None and abs(started - owner.pid_started) > 1.0:
            return f"its owner's pid {owner.pid} now belongs to another process"
    if age > expiry_s:
        return f"it was last renewed {age:.0f}s ago by the storage's clock (expiry {expiry_s:g}s)"
    return None


def _parse(raw: bytes, where: str) -> LeaseOwner | None:
    """The owner in a lease file; None for an unreadable one (a lease nobody can be named in holds nothing)."""
    try:
        return LeaseOwner.model_validate(json.loads(raw))
    except (ValueError, ValidationError):
        log.warning("lease file %s is not a lease (%d bytes): it is replaced", where, len(raw))
        return None


class Lease:
    """A held lease; `release()` (or the end of `hold_lease`'s block) gives it back. See the module docstring."""

    def __init__(self, store: storage.Store, place: str, *, what: str, command: str,
                 heartbeat_s: float = HEARTBEAT_S, expiry_s: float = EXPIRY_S,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.place = storage.normalize(place)
        self.uri = storage.join(self.place, LEASE_NAME)
        self.what = what
        self.heartbeat_s = heartbeat_s
        self.expiry_s = expiry_s
        self.clock = clock  # this host's wall clock: only what the lease file shows people (started_at, heartbeat)
        now = clock()
        self.owner = LeaseOwner(pid=os.getpid(), host=socket.gethostname(), command=command,
                                token=uuid.uuid4().hex, started_at=now, heartbeat=now,
                                pid_started=_process_start(os.getpid()))
        self.lost = False
        self._etag: str | None = None  # S3: the ETag of our last write
        self._created: list[Path] = []  # local: the folders taking the lease created, deepest first
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------------------------------ public

    def acquire(self) -> None:
        """Take the lease, taking a stale one over with a warning; `LeaseHeldError` naming the live owner."""
        if storage.is_remote(self.uri):
            self._acquire_s3()
        else:
            self._acquire_local()
        self._thread = threading.Thread(target=self._beat, name=f"lease {self.place}", daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Stop the heartbeat and delete the lease file if it is still ours. Idempotent; never raises for storage
        trouble (the lease then expires by itself)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        try:
            if storage.is_remote(self.uri):
                self._release_s3()
            else:
                self._release_local()
        except (OSError, StorageError) as exc:
            log.warning("could not release the lease %s (%s): it expires after %gs", self.uri, exc, self.expiry_s)

    # ------------------------------------------------------------------------------------------ shared

    def _refuse_or_warn(self, holder: LeaseOwner | None, age: float) -> None:
        """Refuse when `holder` holds the lease, last written `age` seconds ago by the storage's clock; warn that a
        stale one is taken over."""
        if holder is None:
            return
        reason = stale_reason(holder, age=age, expiry_s=self.expiry_s)
        if reason is None:
            raise LeaseHeldError(
                f"{self.what} {self.place} is in use by {holder.describe()}: wait for it to finish or stop it "
                f"(its lease {self.uri} is taken over once its owner is dead or silent for {self.expiry_s:g}s)"
            )
        log.warning("taking over the lease of %s %s from %s: %s", self.what, self.place, holder.describe(), reason)

    def _payload(self) -> bytes:
        return (self.owner.model_dump_json(indent=2) + "\n").encode()

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            self.owner = self.owner.model_copy(update={"heartbeat": self.clock()})
            try:
                still_ours = self._renew_s3() if storage.is_remote(self.uri) else self._renew_local()
            except (OSError, StorageError) as exc:
                log.warning("lease %s: heartbeat failed (%s); retrying in %gs", self.uri, exc, self.heartbeat_s)
                continue
            if not still_ours:
                self.lost = True
                log.error("lease %s was taken over by another writer (this process was silent longer than %gs): "
                          "two writers may now write %s", self.uri, self.expiry_s, self.place)
                return

    # ------------------------------------------------------------------------------------------ local

    @contextlib.contextmanager
    def _locked(self) -> Iterator[Path]:
        path = storage.local_path(self.uri)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path.parent, os.O_RDONLY)
        except OSError as exc:
            raise storage.storage_error(f"cannot take the lease {self.uri}", exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield path
        finally:
            os.close(fd)  # closing releases the flock

    def _read_local(self, path: Path) -> LeaseOwner | None:
        try:
            return _parse(path.read_bytes(), str(path))
        except FileNotFoundError:
            return None

    @staticmethod
    def _age_local(path: Path) -> float:
        """Seconds since the lease file was last written, on the file system's clock: its mtime against that of a
        file created beside it now (called under the folder's lock)."""
        try:
            written = path.stat().st_mtime
            fd, probe = tempfile.mkstemp(prefix="._lease-clock-", dir=path.parent)
        except OSError as exc:
            raise storage.storage_error(f"cannot read the lease {path}", exc) from None
        try:
            now = os.fstat(fd).st_mtime
        finally:
            os.close(fd)
            os.unlink(probe)
        return max(0.0, now - written)

    def _acquire_local(self) -> None:
        folder = storage.local_path(self.uri).parent
        while not folder.exists() and folder != folder.parent:  # removed again on release when still empty, so
            self._created.append(folder)                         # a command refused after it leaves nothing
            folder = folder.parent
        with self._locked() as path:
            holder = self._read_local(path)
            self._refuse_or_warn(holder, self._age_local(path) if holder is not None else 0.0)
            storage.write_text_atomic(path, self._payload().decode())

    def _renew_local(self) -> bool:
        with self._locked() as path:
            holder = self._read_local(path)
            if holder is None or holder.token != self.owner.token:
                return False
            storage.write_text_atomic(path, self._payload().decode())
            return True

    def _release_local(self) -> None:
        with self._locked() as path:
            holder = self._read_local(path)
            if holder is not None and holder.token == self.owner.token:
                path.unlink()
        for folder in self._created:
            try:
                folder.rmdir()
            except OSError:  # the command wrote something there (or another writer did): it stays
                break

    # ------------------------------------------------------------------------------------------ S3

    def _read_s3(self) -> tuple[LeaseOwner | None, str | None]:
        """The owner and the ETag of the lease object; (None, None) when there is none."""
        holder, etag, _ = self._read_s3_aged()
        return holder, etag

    def _read_s3_aged(self) -> tuple[LeaseOwner | None, str | None, float]:
        """The owner, the ETag and the age of the lease object on S3's clock (module docstring): its HEAD's Date
        minus its LastModified; (None, None, 0) when there is none."""
        fs, path = self.store.resolve(self.uri)
        bucket, key, _ = fs.split_path(path)
        try:
            head = fs.call_s3("head_object", Bucket=bucket, Key=key)
            raw = bytes(fs.cat_file(path))
        except FileNotFoundError:
            return None, None, 0.0
        except OSError as exc:
            raise storage.storage_error(f"cannot read the lease {self.uri}", exc) from None
        return _parse(raw, self.uri) or _unreadable(), str(head["ETag"]), _s3_age(head)

    def _put_s3(self, **condition: str) -> bool:
        """One conditional PUT of our payload; False when its condition did not hold."""
        fs, path = self.store.resolve(self.uri)
        try:
            answer = fs.pipe_file(path, self._payload(), **condition)
        except OSError as exc:
            if _precondition_failed(exc):
                return False
            raise storage.storage_error(f"cannot write the lease {self.uri}", exc) from None
        self._etag = str(answer["ETag"]) if isinstance(answer, dict) and "ETag" in answer else None
        return True

    def _acquire_s3(self) -> None:
        for _ in range(3):  # a race lost to another writer: look again (it now holds the lease, or it let go)
            if self._put_s3(mode="create"):  # If-None-Match: *
                return
            holder, etag, age = self._read_s3_aged()
            if etag is None:
                continue  # released meanwhile
            self._refuse_or_warn(holder if holder is not None and holder.token else None, age)
            if self._put_s3(IfMatch=etag):
                return
        holder, _ = self._read_s3()
        raise LeaseHeldError(f"{self.what} {self.place} is being taken by another writer"
                             + (f" ({holder.describe()})" if holder is not None and holder.token else "")
                             + ": try again when it has finished")

    def _renew_s3(self) -> bool:
        if self._etag is not None:
            return self._put_s3(IfMatch=self._etag)
        holder, etag = self._read_s3()  # no ETag came back with our last PUT: compare tokens instead
        return holder is not None and holder.token == self.owner.token and etag is not None \
            and self._put_s3(IfMatch=etag)

    def _release_s3(self) -> None:
        holder, _ = self._read_s3()
        if holder is not None and holder.token == self.owner.token:
            fs, path = self.store.resolve(self.uri)
            fs.rm_file(path)


def _s3_age(head: Mapping[str, Any]) -> float:
    """Seconds since S3 stored an object, from its HEAD response: the `Date` header (S3's now) minus
    `LastModified`, both S3's clock at one-second resolution; the local clock stands in for a response without a
    Date header (not S3's behaviour)."""
    written: datetime = head["LastModified"]
    date = head.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    now = parsedate_to_datetime(date).timestamp() if date else time.time()
    return max(0.0, now - written.timestamp())


def _unreadable() -> LeaseOwner:
    """A placeholder owner for an unreadable lease object (empty token: treated as no owner)."""
    return LeaseOwner(pid=0, host="", command="", token="", started_at=0.0, heartbeat=0.0)


def _precondition_failed(exc: OSError) -> bool:
    """s3fs's translation of S3's 412 Precondition Failed (FileExistsError for If-None-Match, a plain OSError for
    If-Match); the original botocore error is kept as the cause when there is one."""
    if isinstance(exc, FileExistsError):
        return True
    cause = exc.__cause__ or exc.__context__
    code = getattr(cause, "response", {}).get("Error", {}).get("Code") if cause is not None else None
    return code in ("PreconditionFailed", "412") or "pre-condition" in str(exc)


@contextlib.contextmanager
def hold_lease(store: storage.Store, place: str, *, what: str, command: str,
               heartbeat_s: float = HEARTBEAT_S, expiry_s: float = EXPIRY_S,
               clock: Callable[[], float] = time.time) -> Iterator[Lease]:
    """Hold the lease of `place` for the block (see the module docstring)."""
    lease = Lease(store, place, what=what, command=command, heartbeat_s=heartbeat_s, expiry_s=expiry_s, clock=clock)
    lease.acquire()
    try:
        yield lease
    finally:
        lease.release()

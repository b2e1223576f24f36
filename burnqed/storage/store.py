"""The artifact store: every read and write of a URI, local or S3 (docs/architecture.md, "Artifacts and storage").

    store = Store.from_config(cfg.storage)       # once, at the command layer: S3 endpoint, region, cache
    with store.staged_output("s3://b/run/iter_0/sft", "sft") as folder:
        train(into=folder)                       # local work; uploaded, then `_SUCCESS.json` written
    store.is_done("s3://b/run/iter_0/sft")       # True: re-runs skip the stage
    model_dir = store.local_input("s3://b/run/iter_0/export")   # downloaded once into the cache

A `Store` is a frozen value passed to whatever touches a URI; the S3 endpoint and region reach s3fs as options of
each filesystem it resolves, never through process-global state, so two stores can live in one process.
Credentials come from the environment only.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from burnqed.base.uris import REMOTE_SCHEMES, check_uri
from burnqed.errors import InputError, StorageError
from burnqed.provenance import StageInputs
from burnqed.storage.faults import _last_uri, storage_error
from burnqed.storage.home import default_cache_dir, expand_home, no_home_message
from burnqed.storage.localfs import (
    M,
    _check_local,
    _local_files,
    _not_a_folder,
    _publish_download,
    _replace_local,
    _write_local,
    publishable,
    read_json_model,
)
from burnqed.storage.markers import (
    _NOT_A_FOLDER,
    MARKER_NAME,
    StageMarker,
    _count,
    _files_of,
    _foreign,
    _sample,
)
from burnqed.storage.paths import Filesystem, is_remote, join, local_path
from burnqed.storage.s3 import check_bucket, probe_bucket, publish_prefix, put_bytes
from leankit.jsonfile import with_defaults

if TYPE_CHECKING:
    from burnqed.config import StorageConfig


@dataclass(frozen=True, slots=True)
class Store:
    """Where artifacts are read and written: the storage section, resolved once at the command layer and passed
    to everything that touches a URI. Credentials are not here: they come from the environment only."""

    cache_dir: Path | None  # remote inputs are downloaded here (`cache`); None: no home to put it under
    endpoint_url: str | None = None  # S3 endpoint; None = botocore's own choice (AWS_ENDPOINT_URL*, else AWS)
    region: str | None = None  # S3 region; None = from the environment

    @classmethod
    def from_config(cls, cfg: StorageConfig, environ: Mapping[str, str] | None = None) -> Store:
        """The store of a storage section; `environ` (default: this process') picks the default cache folder."""
        env = environ if environ is not None else os.environ
        return cls(default_cache_dir(cfg.cache_dir, env), cfg.endpoint_url, cfg.region)

    def cache(self) -> Path:
        """The download cache folder; InputError (one line) when there is none: no HOME and no home directory, and
        neither storage.cache_dir, BURNQED_HOME nor XDG_CACHE_HOME set. Only commands that download need it."""
        if self.cache_dir is None:
            raise InputError(no_home_message("downloaded inputs (storage.cache_dir)"))
        return self.cache_dir

    # ------------------------------------------------------------------------------------ URIs

    def resolve(self, uri: str, *, probe: bool = True) -> tuple[Filesystem, str]:
        """The fsspec filesystem of `uri` and the path on it (no trailing slash). An s3:// filesystem gets this
        store's endpoint and region as its own client options (fsspec caches one instance per option set).

        Every storage access goes through here, so this is where faults are caught before work: a malformed URI
        is an `InputError`; the first time a process touches an S3 bucket (per endpoint and region) its
        credentials and the bucket are checked with one HEAD request within `PREFLIGHT_TIMEOUT_S` (`probe=False`
        skips it), so missing credentials, an unreachable endpoint, refused credentials or a missing bucket are
        one line naming the URI at the first access instead of botocore's retries and traceback. The URI is
        remembered for `storage_fault`."""
        import fsspec.config
        from fsspec.core import url_to_fs

        check_uri(uri, "storage URI")
        _last_uri[0] = uri
        options: dict[str, Any] = {}
        if is_remote(uri) and uri.partition("://")[0] in REMOTE_SCHEMES:  # a local folder may be named `s3`
            if probe:
                probe_bucket(uri, endpoint_url=self.endpoint_url, region=self.region)
            client: dict[str, Any] = {}
            if self.endpoint_url:
                client["endpoint_url"] = self.endpoint_url
            if self.region:
                client["region_name"] = self.region
            if client:
                # Explicit options replace fsspec's configured `client_kwargs` as a whole: keep the user's others.
                configured = fsspec.config.conf.get("s3", {}).get("client_kwargs", {})
                options["client_kwargs"] = {**configured, **client}
        elif not is_remote(uri):
            # A local path, absolute and without `..` before fsspec sees it: fsspec prefixes a relative path with
            # the working directory as it is, and `start/../out` stops resolving once `start` is deleted
            # (commands.kit's keep_working_directory), and becomes a recreated `start` when fsspec makes parents.
            local = expand_home(uri.removeprefix("file://"), os.environ)
            if local is None:
                raise InputError(no_home_message(uri))
            uri = "file://" + os.path.abspath(local)
        try:
            fs, path = url_to_fs(uri, **options)
        except ImportError as exc:
            raise StorageError(f"{uri}: no filesystem for this scheme ({exc}); install burnqed[k8s] for s3://"
                               ) from None
        except ValueError as exc:  # fsspec: "Protocol not known"
            raise InputError(f"{uri}: not a storage URI ({exc}); give a path, file://PATH or s3://bucket/prefix"
                             ) from None
        return fs, str(path).rstrip("/") or "/"

    def exists(self, uri: str) -> bool:
        """True when a file or folder exists at `uri`."""
        fs, path = self.resolve(uri)
        try:
            return bool(fs.exists(path))
        except OSError as exc:
            raise storage_error(f"cannot reach {uri}", exc) from None

    def read_bytes(self, uri: str) -> bytes:
        """The whole file at `uri`; `InputError` when it does not exist."""
        fs, path = self.resolve(uri)
        try:
            return bytes(fs.cat_file(path))
        except FileNotFoundError:
            raise InputError(f"{uri} does not exist") from None
        except OSError as exc:
            raise storage_error(f"cannot read {uri}", exc) from None

    def write_bytes(self, uri: str, data: bytes) -> None:
        """Create or replace the file at `uri` atomically (local: temp + rename; S3: one PUT)."""
        if not is_remote(uri):
            _write_local(local_path(uri), data)
            return
        fs, path = self.resolve(uri)
        try:
            put_bytes(fs, path, data)
        except OSError as exc:
            raise storage_error(f"cannot write {uri}", exc) from None

    def remove(self, uri: str) -> None:
        """Delete the file at `uri` (nothing when it is not there)."""
        fs, path = self.resolve(uri)
        try:
            fs.rm_file(path)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise storage_error(f"cannot delete {uri}", exc) from None

    def read_model(
        self, uri: str, model: type[M], what: str, hint: str = "", defaults: Mapping[str, object] | None = None
    ) -> M:
        """`read_json_model` for any URI."""
        if not is_remote(uri):
            return read_json_model(local_path(uri), model, what, hint, defaults)
        try:
            raw = json.loads(self.read_bytes(uri))
            return model.model_validate(with_defaults(raw, defaults))
        except json.JSONDecodeError as exc:
            raise InputError(f"{what} {uri} is not valid JSON: {exc}") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "top level"
            raise InputError(f"{what} {uri}: {where}: {first['msg']}") from None

    # ------------------------------------------------------------------------------ preflight

    def check_writable(self, uri: str, *, what: str = "--output", folder: bool = False, key: bool = True) -> None:
        """Fail fast, before any long work, when `uri` cannot be written: one-line errors naming what to change.

        Local: the target must not be a folder where a file is expected (or a file where a folder is), and its
        nearest existing ancestor must be a folder where this process can create a file (probed with a temporary
        file, removed at once: `os.access` says yes to root on a read-only mount). `InputError` (exit 2).
        S3: credentials must resolve (`ConfigError`, exit 2, naming the variables to set), and the bucket must
        answer a HEAD request within `PREFLIGHT_TIMEOUT_S`: no such bucket is an `InputError` (exit 2), an
        unreachable endpoint or refused credentials a `StorageError` (exit 1). Nothing is written to S3. With
        `key` (the default: an output) the URI must name a key under the bucket, not the bucket itself (a run root,
        `key=False`, may be a whole bucket).
        """
        if is_remote(uri):
            check_uri(uri, what, key=key)
            check_bucket(uri, what, endpoint_url=self.endpoint_url, region=self.region)
        else:
            _check_local(uri, what, folder)

    # ------------------------------------------------------------------------- stage outputs

    def is_done(self, uri: str) -> bool:
        """True when the output at `uri` is finished: a folder with its marker, or a published file."""
        if uri.endswith(".json") or uri.endswith(".md"):
            return self.exists(uri)
        return self.exists(join(uri, MARKER_NAME))

    def read_marker(self, uri: str) -> StageMarker | None:
        """The completion marker of a finished folder output, or None when it has none (`InputError` when it is
        not a stage marker)."""
        marker = join(uri, MARKER_NAME)
        if not self.exists(marker):
            return None
        return self.read_model(marker, StageMarker, "completion marker")

    @contextmanager
    def staged_output(self, uri: str, stage: str, extra: dict[str, object] | None = None, *,
                      made_from: StageInputs | None = None) -> Iterator[Path]:
        """A local folder to build the output of `stage` in; on success it is published at `uri` (renamed into
        place locally, uploaded to S3) with its completion marker, which records `made_from` (what the output is
        made from: `burnqed.runner.reuse` compares it before reusing the output). On error nothing is published.

        What is at `uri` is replaced only when `foreign_output` allows it (nothing there, or this stage's own
        output), checked again at publish time: the folder may have changed while the stage ran, or a file may
        stand at its path. Then nothing is deleted, the result stays in its local staging folder and the
        `InputError` names it. The publish deletes only files that check saw as the stage's own.

        `extra` may be filled in by the caller inside the block (metrics known only at the end).
        """
        details: dict[str, object] = extra if extra is not None else {}
        remote = is_remote(uri)
        if remote:
            staging_root = Path(tempfile.mkdtemp(prefix="burnqed-stage-"))
            folder = staging_root / "out"
            folder.mkdir()
        else:
            final = local_path(uri)
            final.parent.mkdir(parents=True, exist_ok=True)
            staging_root = folder = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
            publishable(folder, directory=True)
        kept = False
        try:
            yield folder
            marker = StageMarker(stage=stage, written_at=datetime.now(UTC), files=_files_of(folder), extra=details,
                                 made_from=made_from)
            if remote:
                problem = self._upload(folder, uri, marker)
            else:  # `final`, resolved when the stage started: a link to nothing there since is a file too
                problem = _NOT_A_FOLDER if _not_a_folder(final) else self.foreign_output(uri, stage)
                if problem is None:
                    # The marker goes in with the files: one rename publishes both, so no crash leaves the files
                    # without it (a folder of files without a marker is nobody's output, and is never replaced).
                    _write_marker(folder, marker)
                    problem = _replace_local(folder, final, stage)
            if problem is not None:
                kept = True
                _write_marker(folder, marker)  # the kept folder is a finished output: moved into place, it counts
                raise InputError(f"output {uri} {problem} (it changed while {stage} ran): nothing there was deleted "
                                 f"or replaced; the finished {stage} output is kept in {folder}: move it into place "
                                 "yourself, or run again with another --output")
        finally:
            if not kept:
                shutil.rmtree(staging_root, ignore_errors=True)

    # ---------------------------------------------------------------------- whose output is it

    def output_files(self, uri: str) -> dict[str, int]:
        """Every file under the folder `uri` (relative POSIX path → size in bytes); empty when there is nothing.
        Symbolic links are listed as files, never followed."""
        if not is_remote(uri):
            folder = local_path(uri)
            return _local_files(folder) if folder.is_dir() else {}
        fs, path = self.resolve(uri)
        try:
            fs.invalidate_cache(path)
            found = fs.find(path, withdirs=False, detail=True)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise storage_error(f"cannot list {uri}", exc) from None
        prefix = path.rstrip("/") + "/"
        return {key[len(prefix):]: int(info.get("size") or 0) for key, info in sorted(found.items())
                if key.startswith(prefix) and not key.endswith("/")}

    def foreign_output(self, uri: str, stage: str) -> str | None:
        """Why the folder `uri` must not be replaced by an output of `stage` (a phrase such as "holds 3 files and
        no _SUCCESS.json (notes.txt, …)"), or None when it may: nothing is there (no file, at any depth), or it is
        `stage`'s own output: its completion marker (or the publishing record an interrupted upload left, see
        `publish_prefix`) names `stage`, and it holds no file the marker does not list. Anything else is somebody's
        files, which no stage deletes: a file at the path itself too (`is_file`)."""
        return self._foreign_listing(uri, stage, self.output_files(uri))

    def _foreign_listing(self, uri: str, stage: str, files: Mapping[str, int]) -> str | None:
        """`foreign_output` of the folder `uri` listed as `files`."""
        if self.is_file(uri):
            return _NOT_A_FOLDER
        return _foreign(files, lambda name: self._marker_at(join(uri, name)), stage)

    def is_file(self, uri: str) -> bool:
        """True when a file, not a folder, stands at `uri` itself: locally anything there that is not a folder (a
        file, a link to one or to nothing); on S3 an object whose key is the path (beside which a prefix of the
        same name may hold objects: S3 has no folders to stop it)."""
        if not is_remote(uri):
            return _not_a_folder(local_path(uri))
        fs, path = self.resolve(uri)
        try:
            fs.invalidate_cache(path)
            return bool(fs.isfile(path))
        except OSError as exc:
            raise storage_error(f"cannot look at {uri}", exc) from None

    def _marker_at(self, uri: str) -> StageMarker | None:
        try:
            return self.read_model(uri, StageMarker, "completion marker")
        except InputError:
            return None

    def check_replaceable(self, uri: str, stage: str, *, what: str = "--output") -> None:
        """`InputError` (exit 2), before any work, when the folder `uri` holds something an output of `stage` must
        not replace (`foreign_output`): files of the user's, or another stage's output."""
        problem = self.foreign_output(uri, stage)
        if problem is not None:
            raise not_replaceable(uri, problem, stage, what=what)

    def check_replaceable_file(self, uri: str, model: type[BaseModel], owner: str, *, what: str = "--output") -> None:
        """`InputError` (exit 2) when a file exists at `uri` and is not a `model` document: `owner` (e.g. "an eval
        result") replaces only a file of its own kind, never another file that happens to have the name."""
        if not self.exists(uri):
            return
        try:
            model.model_validate_json(self.read_bytes(uri))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "top level"
            raise InputError(f"{what} {uri} exists and is not {owner} ({where}: {first['msg']}): it is never "
                             "replaced; choose another file name, or move that file away") from None

    def check_holds_only(self, uri: str, allowed: Callable[[str], bool], owner: str, *, what: str = "--output"
                         ) -> None:
        """`InputError` (exit 2) when the folder `uri` holds a file `allowed` (given its relative POSIX path) says
        no to: `owner` (e.g. "a trajectory prefix") adds to a folder of its own kind only, never to the user's."""
        stray = [name for name in self.output_files(uri) if not allowed(name)]
        if stray:
            raise InputError(f"{what} {uri} holds {_count(stray)} {owner} does not hold ({_sample(stray)}): choose "
                             "a new or empty folder, or move them away")

    def _upload(self, folder: Path, uri: str, marker: StageMarker) -> str | None:
        """Publish the staged `folder` at the S3 prefix `uri` (`publish_prefix`), replacing what is there when
        `foreign_output` allows it; else nothing is written or deleted and its reason is returned. What is deleted
        is the one listing the check read: a file written there after it is kept (and named by the next check)."""
        fs, path = self.resolve(uri)
        old = self.output_files(uri)
        problem = self._foreign_listing(uri, marker.stage, old)
        if problem is not None:
            return problem
        try:
            publish_prefix(fs, path, folder, marker, old)
        except OSError as exc:
            raise storage_error(f"cannot upload {marker.stage} output to {uri}", exc) from None
        return None

    def local_input(self, uri: str) -> Path:
        """A local path holding the file or folder at `uri`: itself when local, else a download cached under
        `cache_dir`, keyed by the URI and its marker (a re-published output is downloaded again). `InputError`
        when it does not exist."""
        if not is_remote(uri):
            local = local_path(uri)
            if not local.exists():
                raise InputError(f"{uri} does not exist")
            return local
        fs, path = self.resolve(uri)
        try:
            if not fs.exists(path):
                raise InputError(f"{uri} does not exist")
            is_dir = fs.isdir(path)
            marker = path + "/" + MARKER_NAME
            stamp = self.read_bytes(join(uri, MARKER_NAME)) if is_dir and fs.exists(marker) else b""
            key = hashlib.sha256(uri.encode() + b"\0" + stamp).hexdigest()[:16]
            target = self.cache() / key / posixpath.basename(path)
            if target.exists():
                return target
            target.parent.mkdir(parents=True, exist_ok=True)
            # Each downloader stages in a folder of its own: stages running side by side (`iterate --jobs`) may
            # fetch the same input at once, and one must never delete or publish another's half-written copy.
            staging_root = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
            try:
                staging = staging_root / target.name
                if is_dir:
                    fs.get(path + "/", str(staging) + "/", recursive=True)
                else:
                    fs.get(path, str(staging))
                _publish_download(staging, target)
            finally:
                shutil.rmtree(staging_root, ignore_errors=True)
            return target
        except OSError as exc:
            raise storage_error(f"cannot download {uri}", exc) from None


def _write_marker(folder: Path, marker: StageMarker) -> None:
    (folder / MARKER_NAME).write_text(marker.model_dump_json(indent=2), encoding="utf-8")
    publishable(folder / MARKER_NAME)


def not_replaceable(uri: str, problem: str, stage: str, *, what: str = "--output") -> InputError:
    """The one-line refusal of an output `stage` must not write over (`problem`: why, as `Store.foreign_output`
    says it): `Store.check_replaceable`'s, and the trajectory prefixes' (`commands.outputs`)."""
    return InputError(f"{what} {uri} {problem}: {stage} writes only to a new or empty folder or over its own output, "
                      "and deletes nothing else (--force neither); choose another path")

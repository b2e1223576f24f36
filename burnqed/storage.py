"""Artifact storage (docs/architecture.md): every artifact has a URI under one run root, `file://` (the default,
relative paths allowed) or `s3://bucket/prefix` through s3fs.

    configure(cfg.storage)                       # once, at the CLI edge: S3 endpoint and region
    with staged_output("s3://b/run/iter_0/sft") as folder:
        train(into=folder)                       # local work; uploaded, then `_SUCCESS.json` written
    is_done("s3://b/run/iter_0/sft")             # True: re-runs skip the stage
    model_dir = local_input("s3://b/run/iter_0/export")   # downloaded once into the cache

Stages write to a temporary name and publish atomically; a finished output carries a completion marker
(`_SUCCESS.json`), written last, so a crash never leaves something that looks finished. JSON inputs read
into pydantic models with one-line errors. Credentials come from the environment only.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, Field, ValidationError

from burnqed.errors import ConfigError, InputError, StorageError

if TYPE_CHECKING:
    from burnqed.config import StorageConfig

Filesystem = Any  # fsspec.AbstractFileSystem (fsspec ships no type information)
MARKER_NAME = "_SUCCESS.json"

M = TypeVar("M", bound=BaseModel)


def read_json_model(
    path: Path, model: type[M], what: str, hint: str = "", defaults: Mapping[str, object] | None = None
) -> M:
    """Read `path` as JSON into `model`; any problem is an `InputError` naming `what`, the file and the
    first offending field (`hint`, e.g. where the format is documented, is appended). `defaults` are
    top-level keys added to a JSON object that lacks them."""
    suffix = f" ({hint})" if hint else ""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{what} {path} cannot be read: {exc}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} {path} is not valid JSON: {exc}{suffix}") from None
    try:
        return model.model_validate(_with_defaults(raw, defaults))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "top level"
        more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
        raise InputError(f"{what} {path}: {where}: {first['msg']}{more}{suffix}") from None


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so that readers see either the old file or the whole new one."""
    write_bytes("file://" + str(path.resolve()), text.encode("utf-8"))


# ------------------------------------------------------------------------------------------- URIs


class _Settings:
    """This process' storage settings, set once by `configure` (the CLI edge)."""

    cache_dir: Path | None = None
    endpoint_url: str | None = None
    region: str | None = None


_settings = _Settings()


def configure(cfg: StorageConfig) -> None:
    """Apply the storage section to this process: fsspec's S3 defaults (endpoint, region) and the download
    cache folder. Called once by the CLI, before any stage code runs."""
    import fsspec.config

    _settings.cache_dir = Path(cfg.cache_dir).expanduser() if cfg.cache_dir else None
    _settings.endpoint_url, _settings.region = cfg.endpoint_url, cfg.region

    client: dict[str, str] = {}
    if cfg.endpoint_url:
        client["endpoint_url"] = cfg.endpoint_url
    if cfg.region:
        client["region_name"] = cfg.region
    if client:
        fsspec.config.conf.setdefault("s3", {}).setdefault("client_kwargs", {}).update(client)


def is_remote(uri: str) -> bool:
    """True for a URI with a scheme other than file://."""
    scheme, sep, _ = uri.partition("://")
    return bool(sep) and scheme != "file"


def normalize(uri: str) -> str:
    """A canonical URI: local paths (with or without file://, relative or not) become absolute file:// URIs;
    remote URIs lose trailing slashes."""
    if is_remote(uri):
        return uri.rstrip("/")
    path = uri.removeprefix("file://")
    return "file://" + str(Path(path).expanduser().resolve())


def local_path(uri: str) -> Path:
    """The path of a file:// URI (or plain path); `InputError` for a remote one."""
    if is_remote(uri):
        raise InputError(f"{uri} is not a local path")
    return Path(normalize(uri).removeprefix("file://"))


def join(uri: str, *parts: str) -> str:
    """`uri`/`parts`, with exactly one slash between them."""
    return "/".join([uri.rstrip("/"), *(part.strip("/") for part in parts)])


def resolve(uri: str) -> tuple[Filesystem, str]:
    """The fsspec filesystem of `uri` and the path on it (no trailing slash)."""
    from fsspec.core import url_to_fs

    try:
        fs, path = url_to_fs(uri)
    except ImportError as exc:
        raise StorageError(f"{uri}: no filesystem for this scheme ({exc}); install burnqed[k8s] for s3://") from None
    return fs, str(path).rstrip("/") or "/"


# ------------------------------------------------------------------------------------------ preflight

PREFLIGHT_TIMEOUT_S = 5.0  # one cheap S3 call; a dead endpoint must not hold a command for botocore's 60 s


def check_writable(uri: str, *, what: str = "--output", folder: bool = False) -> None:
    """Fail fast, before any long work, when `uri` cannot be written: one-line errors naming what to change.

    Local: the target must not be a folder where a file is expected (or a file where a folder is), and its
    nearest existing ancestor must be a folder where this process can create a file (probed with a temporary
    file, removed at once: `os.access` says yes to root on a read-only mount). `InputError` (exit 2).
    S3: credentials must resolve (`ConfigError`, exit 2, naming the variables to set), and the bucket must answer a
    HEAD request within `PREFLIGHT_TIMEOUT_S`: no such bucket is an `InputError` (exit 2), an unreachable endpoint
    or refused credentials a `StorageError` (exit 1). Nothing is written to S3.
    """
    if is_remote(uri):
        _check_remote(uri, what)
        return
    path = local_path(uri)
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
        raise InputError(f"{what} {uri}: cannot create files in {ancestor} ({exc.strerror or exc}); "
                         "choose a writable path") from None
    os.close(fd)
    os.unlink(probe)


def _check_remote(uri: str, what: str) -> None:
    scheme, _, rest = uri.partition("://")
    if scheme not in ("s3", "s3a"):
        resolve(uri)  # an unknown scheme fails here; other filesystems are checked when written
        return
    bucket = rest.split("/", 1)[0]
    if not bucket:
        raise InputError(f"{what} {uri}: no bucket name; expected s3://bucket/prefix")
    try:
        import botocore.session
        from botocore.config import Config as BotoConfig
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            NoCredentialsError,
        )
    except ImportError:
        raise StorageError(f"{what} {uri}: S3 needs s3fs and botocore: install burnqed[k8s]") from None
    session = botocore.session.get_session()
    try:
        credentials = session.get_credentials()
    except BotoCoreError as exc:
        raise ConfigError(f"{what} {uri}: S3 credentials cannot be read: {exc}") from None
    if credentials is None:
        raise ConfigError(
            f"{what} {uri}: no S3 credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
            "(or AWS_PROFILE, or a web identity / IRSA role)"
        )
    endpoint = _settings.endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    where = endpoint or "AWS S3"
    client = session.create_client(
        "s3", endpoint_url=endpoint, region_name=_settings.region or os.environ.get("AWS_DEFAULT_REGION"),
        config=BotoConfig(connect_timeout=PREFLIGHT_TIMEOUT_S, read_timeout=PREFLIGHT_TIMEOUT_S,
                          retries={"max_attempts": 1}),
    )
    try:
        client.head_bucket(Bucket=bucket)
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("404", "NoSuchBucket"):
            raise InputError(f"{what} {uri}: bucket {bucket!r} does not exist at {where}; create it or fix the "
                             "URI") from None
        if code in ("403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
            raise StorageError(f"{what} {uri}: {where} refused the credentials for bucket {bucket!r} (HTTP {code}); "
                               "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_PROFILE") from None
        raise StorageError(f"{what} {uri}: {where} answered {code or exc} for bucket {bucket!r}") from None
    except NoCredentialsError:
        raise ConfigError(f"{what} {uri}: no S3 credentials found: set AWS_ACCESS_KEY_ID and "
                          "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)") from None
    except BotoCoreError as exc:
        raise StorageError(f"{what} {uri}: cannot reach {where} ({exc}); check storage.endpoint_url / "
                           "AWS_ENDPOINT_URL and the network") from None
    finally:
        client.close()


def exists(uri: str) -> bool:
    """True when a file or folder exists at `uri`."""
    fs, path = resolve(uri)
    try:
        return bool(fs.exists(path))
    except OSError as exc:
        raise StorageError(f"cannot reach {uri}: {exc}") from None


def read_bytes(uri: str) -> bytes:
    """The whole file at `uri`; `InputError` when it does not exist."""
    fs, path = resolve(uri)
    try:
        return bytes(fs.cat_file(path))
    except FileNotFoundError:
        raise InputError(f"{uri} does not exist") from None
    except OSError as exc:
        raise StorageError(f"cannot read {uri}: {exc}") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def publishable(path: Path, directory: bool = False) -> None:
    """mkstemp/mkdtemp create private (0600/0700) entries; published artifacts get the usual umask modes."""
    os.chmod(path, (0o777 if directory else 0o666) & ~_umask())


def write_bytes(uri: str, data: bytes) -> None:
    """Create or replace the file at `uri` atomically (local: temp + rename; S3: one PUT)."""
    if not is_remote(uri):
        target = local_path(uri)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            publishable(Path(tmp))
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return
    fs, path = resolve(uri)
    try:
        fs.pipe_file(path, data)
    except OSError as exc:
        raise StorageError(f"cannot write {uri}: {exc}") from None


def _with_defaults(raw: object, defaults: Mapping[str, object] | None) -> object:
    if defaults and isinstance(raw, dict):
        return {**defaults, **raw}
    return raw


def read_model(
    uri: str, model: type[M], what: str, hint: str = "", defaults: Mapping[str, object] | None = None
) -> M:
    """`read_json_model` for any URI."""
    if not is_remote(uri):
        return read_json_model(local_path(uri), model, what, hint, defaults)
    try:
        raw = json.loads(read_bytes(uri))
        return model.model_validate(_with_defaults(raw, defaults))
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} {uri} is not valid JSON: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "top level"
        raise InputError(f"{what} {uri}: {where}: {first['msg']}") from None


# ------------------------------------------------------------------------------- completion markers


class StageMarker(BaseModel):
    """`_SUCCESS.json` of a finished stage output (trajectory prefixes carry their own richer marker)."""

    stage: str = Field(description="The stage that wrote the output.")
    written_at: datetime = Field(description="When the output was published (UTC).")
    files: dict[str, int] = Field(default_factory=dict, description="Relative path → size in bytes.")
    extra: dict[str, object] = Field(default_factory=dict, description="Stage-specific facts (metrics, digests).")


def is_done(uri: str) -> bool:
    """True when the output at `uri` is finished: a folder with its marker, or a published file."""
    if uri.endswith(".json") or uri.endswith(".md"):
        return exists(uri)
    return exists(join(uri, MARKER_NAME))


def read_marker(uri: str) -> StageMarker | None:
    """The completion marker of a finished folder output, or None when it has none (`InputError` when it is not
    a stage marker)."""
    marker = join(uri, MARKER_NAME)
    if not exists(marker):
        return None
    return read_model(marker, StageMarker, "completion marker")


def _files_of(folder: Path) -> dict[str, int]:
    return {
        str(path.relative_to(folder)): path.stat().st_size
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != MARKER_NAME
    }


@contextmanager
def staged_output(uri: str, stage: str, extra: dict[str, object] | None = None) -> Iterator[Path]:
    """A local folder to build the output of `stage` in; on success it is published at `uri` (renamed into
    place locally, uploaded to S3) and the completion marker is written last. On error nothing is published.

    `extra` may be filled in by the caller inside the block (metrics known only at the end).
    """
    details: dict[str, object] = extra if extra is not None else {}
    if is_remote(uri):
        with tempfile.TemporaryDirectory(prefix="burnqed-stage-") as tmp:
            folder = Path(tmp) / "out"
            folder.mkdir()
            yield folder
            marker = StageMarker(stage=stage, written_at=datetime.now(UTC), files=_files_of(folder), extra=details)
            fs, path = resolve(uri)
            try:
                if fs.exists(path):
                    fs.rm(path, recursive=True)
                fs.put(str(folder) + "/", path + "/", recursive=True)
            except OSError as exc:
                raise StorageError(f"cannot upload {stage} output to {uri}: {exc}") from None
            write_bytes(join(uri, MARKER_NAME), marker.model_dump_json(indent=2).encode())
        return
    final = local_path(uri)
    final.parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    publishable(folder, directory=True)
    try:
        yield folder
        marker = StageMarker(stage=stage, written_at=datetime.now(UTC), files=_files_of(folder), extra=details)
        if final.exists():
            shutil.rmtree(final)
        os.replace(folder, final)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    write_bytes(join(uri, MARKER_NAME), marker.model_dump_json(indent=2).encode())


def default_cache_dir(environ: dict[str, str] | None = None) -> Path:
    """Where remote inputs are downloaded: storage.cache_dir, else $BURNQED_HOME/cache, else the XDG cache."""
    if _settings.cache_dir is not None:
        return _settings.cache_dir
    env = environ if environ is not None else dict(os.environ)
    if env.get("BURNQED_HOME"):
        return Path(env["BURNQED_HOME"]) / "cache"
    base = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "burnqed" / "artifacts"


def local_input(uri: str, cache_dir: Path | None = None) -> Path:
    """A local path holding the file or folder at `uri`: itself when local, else a cached download keyed by
    the URI and its marker (a re-published output is downloaded again). `InputError` when it does not exist."""
    if not is_remote(uri):
        local = local_path(uri)
        if not local.exists():
            raise InputError(f"{uri} does not exist")
        return local
    fs, path = resolve(uri)
    try:
        if not fs.exists(path):
            raise InputError(f"{uri} does not exist")
        is_dir = fs.isdir(path)
        stamp = read_bytes(join(uri, MARKER_NAME)) if is_dir and fs.exists(path + "/" + MARKER_NAME) else b""
        key = hashlib.sha256(uri.encode() + b"\0" + stamp).hexdigest()[:16]
        target = (cache_dir or default_cache_dir()) / key / posixpath.basename(path)
        if target.exists():
            return target
        staging = target.with_name(target.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.parent.mkdir(parents=True, exist_ok=True)
        if is_dir:
            fs.get(path + "/", str(staging) + "/", recursive=True)
        else:
            fs.get(path, str(staging))
        os.replace(staging, target)
        return target
    except OSError as exc:
        raise StorageError(f"cannot download {uri}: {exc}") from None

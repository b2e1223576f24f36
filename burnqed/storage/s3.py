"""The S3 backend: the bucket check before the first access, one PUT for a whole object, the aborting of
multipart uploads a killed process left open, and the publish of a staged folder at a prefix.

    probe_bucket(uri, endpoint_url=None, region=None)   # once per process and bucket: credentials, one HEAD
    fs, path = store.resolve("s3://b/run/iter_0/sft")    # (resolve probes itself)
    put_bytes(fs, f"{path}/run.json", data)              # appears whole or not at all
    abort_uploads(fs, path)                              # before a stage uploads there again
    publish_prefix(fs, path, folder, marker, old)        # `Store.staged_output`'s upload, `_PUBLISHING.json` first

`put_bytes` and `abort_uploads` take any fsspec filesystem: off S3 a plain write, and nothing to abort.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from burnqed.base.uris import check_uri
from burnqed.errors import ConfigError, InputError, StorageError, TransientStorageError
from burnqed.storage.markers import _MARKERS, MARKER_NAME, PUBLISHING_NAME, StageMarker
from burnqed.storage.paths import Filesystem

SINGLE_PUT_MAX = 5 * 2**30  # S3 takes at most 5 GiB in one PUT; above that only a multipart upload can write


def _is_s3(fs: Filesystem) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, tuple | list) else (fs.protocol,)
    return "s3" in protocol


def put_bytes(fs: Filesystem, path: str, data: bytes) -> None:
    """Create or replace the object at `path` with `data` in one request. On S3 that is one PUT up to 5 GiB: s3fs
    would switch to a multipart upload from 100 MiB, and one a killed process leaves half-way stays in the bucket,
    invisible to listings and billed, until someone aborts it; one PUT appears whole or not at all."""
    if _is_s3(fs):
        fs.pipe_file(path, data, chunksize=SINGLE_PUT_MAX)  # s3fs puts in one request below min(5 GiB, 2 chunks)
    else:
        fs.pipe_file(path, data)


def abort_uploads(fs: Filesystem, path: str) -> list[str]:
    """Abort every multipart upload still open under the key prefix `path` (`bucket/prefix`) and return their
    keys; nothing off S3. Files uploaded from disk (model weights, checkpoints) go multipart above 100 MiB, and an
    upload whose process was killed is never completed nor aborted by it: the next run of the stage that owns the
    prefix calls this before it uploads there."""
    if not _is_s3(fs):
        return []
    bucket, _, key = path.partition("/")
    prefix = key.rstrip("/") + "/" if key else ""
    aborted: list[str] = []
    markers: dict[str, str] = {}
    while True:
        page = fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=prefix, **markers)
        for upload in page.get("Uploads", []):
            fs.call_s3("abort_multipart_upload", Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
            aborted.append(str(upload["Key"]))
        if not page.get("IsTruncated"):
            return aborted
        markers = {"KeyMarker": page["NextKeyMarker"], "UploadIdMarker": page["NextUploadIdMarker"]}


def publish_prefix(fs: Filesystem, path: str, folder: Path, marker: StageMarker, old: Mapping[str, int]) -> None:
    """Publish the staged `folder` at the key prefix `path`, over the files `old` listed there (relative path →
    size). S3 has no rename, so the prefix is rewritten in place, and what an interruption may leave is recorded
    first: `_PUBLISHING.json` (a stage marker naming the stage and every file old or new), then the old marker and
    files are deleted, the new files uploaded, the marker written and the record deleted. A prefix left
    half-written is thus still this stage's (`Store.foreign_output`), never taken for finished, and a re-run
    replaces it. Faults are s3fs' OSErrors."""
    pending = marker.model_copy(update={"files": {**{k: v for k, v in old.items() if k not in _MARKERS},
                                                  **marker.files}})
    abort_uploads(fs, path)  # what an upload of this output killed half-way left open
    fs.pipe_file(f"{path}/{PUBLISHING_NAME}", pending.model_dump_json(indent=2).encode())
    if MARKER_NAME in old:
        fs.rm_file(f"{path}/{MARKER_NAME}")
    stale = [f"{path}/{name}" for name in old if name not in _MARKERS]
    if stale:
        fs.rm(stale)
    fs.put(str(folder) + "/", path + "/", recursive=True)
    fs.pipe_file(f"{path}/{MARKER_NAME}", marker.model_dump_json(indent=2).encode())
    fs.rm_file(f"{path}/{PUBLISHING_NAME}")


PREFLIGHT_TIMEOUT_S = 5.0  # one cheap S3 call; a dead endpoint must not hold a command for botocore's 60 s

_probed: set[tuple[str | None, str | None, str]] = set()  # (endpoint, region, bucket) answered this process
_probed_lock = threading.Lock()


def probe_bucket(uri: str, *, endpoint_url: str | None, region: str | None) -> None:
    """`check_bucket` of `uri`'s bucket, once per process for each endpoint, region and bucket."""
    key = (endpoint_url, region, uri.partition("://")[2].split("/", 1)[0])
    with _probed_lock:
        if key in _probed:
            return
    check_bucket(uri, "", endpoint_url=endpoint_url, region=region)
    with _probed_lock:
        _probed.add(key)


@functools.cache
def _data_loader(data_path: str | None) -> Any:
    """botocore's reader of its data files (`botocore.loaders.create_loader`, as a session makes its own from its
    data path), one per process and data path for the checks' sessions: it keeps what it read, where each session's
    own loader parsed the S3 model and the endpoint rules again (~0.08 CPU-s a check; a command on S3 checks its
    bucket up to three times: its inputs, its output, its run root)."""
    from botocore.loaders import create_loader

    return create_loader(data_path)


def check_bucket(uri: str, what: str, *, endpoint_url: str | None, region: str | None) -> None:
    """The credentials and the bucket of `uri`, checked with one HEAD request within `PREFLIGHT_TIMEOUT_S` and no
    retries; the errors (`Store.check_writable` lists them) start with `what` and the URI. `endpoint_url` and
    `region`: the store's, None for botocore's own choice."""
    check_uri(uri, what or "storage URI")
    bucket = uri.partition("://")[2].split("/", 1)[0]
    what = f"{what} {uri}" if what else uri
    try:
        import botocore.session
        from botocore.config import Config as BotoConfig
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            NoCredentialsError,
        )
    except ImportError:
        raise StorageError(f"{what}: S3 needs s3fs and botocore: install burnqed[k8s]") from None
    session = botocore.session.get_session()  # a session of its own: the credentials the environment holds now
    session.register_component("data_loader", _data_loader(session.get_config_variable("data_path")))
    try:
        credentials = session.get_credentials()
    except BotoCoreError as exc:
        raise ConfigError(f"{what}: S3 credentials cannot be read: {exc}") from None
    if credentials is None:
        raise ConfigError(
            f"{what}: no S3 credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
            "(or AWS_PROFILE, or a web identity / IRSA role)"
        )
    endpoint = (endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3")
                or os.environ.get("AWS_ENDPOINT_URL"))
    where = endpoint or "AWS S3"
    client = session.create_client(
        "s3", endpoint_url=endpoint, region_name=region or os.environ.get("AWS_DEFAULT_REGION"),
        config=BotoConfig(connect_timeout=PREFLIGHT_TIMEOUT_S, read_timeout=PREFLIGHT_TIMEOUT_S,
                          retries={"max_attempts": 1}),
    )
    try:
        client.head_bucket(Bucket=bucket)
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("404", "NoSuchBucket"):
            raise InputError(f"{what}: bucket {bucket!r} does not exist at {where}; create it or fix "
                             "the URI") from None
        if code in ("403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
            raise StorageError(f"{what}: {where} refused the credentials for bucket {bucket!r} "
                               f"(HTTP {code}); check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_PROFILE"
                               ) from None
        # throttling and server errors pass; anything else answered the same way next time
        transient = code.startswith("5") or code in ("SlowDown", "Throttling", "RequestTimeout", "InternalError")
        raise (TransientStorageError if transient else StorageError)(
            f"{what}: {where} answered {code or exc} for bucket {bucket!r}") from None
    except NoCredentialsError:
        raise ConfigError(f"{what}: no S3 credentials found: set AWS_ACCESS_KEY_ID and "
                          "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)") from None
    except BotoCoreError as exc:
        raise TransientStorageError(f"{what}: cannot reach {where} ({exc}); check storage.endpoint_url / "
                                    "AWS_ENDPOINT_URL and the network") from None
    finally:
        client.close()

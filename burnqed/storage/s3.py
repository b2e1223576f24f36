"""S3 writes that leave nothing behind: one PUT for a whole object, and the aborting of multipart uploads a killed
process left open.

    fs, path = store.resolve("s3://b/run/iter_0/sft")
    put_bytes(fs, f"{path}/run.json", data)   # appears whole or not at all
    abort_uploads(fs, path)                   # before a stage uploads there again

Both take any fsspec filesystem; off S3, `put_bytes` is a plain write and `abort_uploads` does nothing.
"""

from __future__ import annotations

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

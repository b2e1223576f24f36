"""Storage faults as one-line typed errors: what the store raises when an access fails (`storage_error`), and
what the command boundary asks of an exception nobody translated (`storage_fault`).

    try:
        fs.cat_file(path)
    except OSError as exc:
        raise storage_error(f"cannot read {uri}", exc) from None    # 75 when a retry can cure it, else 1
    fault = storage_fault(exc)    # at the boundary: a full disk, a refused write, S3 credentials; None: a bug

The table of exit codes is docs/errors.md.
"""

from __future__ import annotations

import errno
import os

from burnqed.errors import BurnqedError, ConfigError, InputError, StorageError, TransientStorageError
from burnqed.storage.paths import is_remote


def storage_error(message: str, exc: OSError) -> StorageError:
    """`message: exc` as a `TransientStorageError` when a retry can cure it (a timeout, a dropped connection, a 5xx
    or throttling answer: s3fs raises these as plain OSError after its own retries), else a `StorageError`: a refused
    credential (PermissionError) or a missing object (FileNotFoundError) fails the same way again."""
    text = f"{message}: {exc}"
    if isinstance(exc, PermissionError | FileNotFoundError | IsADirectoryError | NotADirectoryError):
        return StorageError(text)
    return TransientStorageError(text)


# The URI the store resolved last in this process (`Store.resolve`, which every access goes through, from any
# thread or task): a fault that reaches the command boundary untranslated and names no file (`storage_fault`) is
# reported with it. A process-wide value, not a context variable: the boundary runs outside the tasks that resolve.
_last_uri: list[str | None] = [None]

_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_DENIED = (errno.EACCES, errno.EPERM, errno.EROFS)
_STORAGE_MODULES = ("s3fs.", "fsspec.", "botocore.", "aiobotocore.", "pyarrow.", "burnqed.storage",
                    "burnqed.trajectory.")


def _raised_in_storage(exc: BaseException) -> bool:
    """True when a frame of `exc`'s traceback is in a storage library (or in burnqed's storage code)."""
    tb = exc.__traceback__
    while tb is not None:
        module = str(tb.tb_frame.f_globals.get("__name__", ""))
        if module.startswith(_STORAGE_MODULES):
            return True
        tb = tb.tb_next
    return False


def _oserror_errno(exc: OSError) -> int | None:
    if exc.errno is not None:
        return exc.errno
    text = str(exc)  # pyarrow's IO errors carry the errno in their text only
    for code in (*_FULL, *_DENIED):
        if os.strerror(code) in text:
            return code
    return None


def storage_fault(exc: BaseException) -> BurnqedError | None:
    """The one-line typed error of a storage fault that reached the command boundary untranslated, or None when
    `exc` is not one: a full disk or quota (ENOSPC, EDQUOT, EFBIG) and a refused write (EACCES, EPERM, EROFS) of any
    file; an S3 credential, endpoint, permission or missing-bucket error from botocore or s3fs. The message names
    the path or URI (the operation's own, else the last one the store resolved in this context) and the fix.
    Credentials missing are a `ConfigError` (exit 2), an unreachable endpoint a `TransientStorageError` (75),
    the rest `StorageError` (1)."""
    if isinstance(exc, BaseExceptionGroup):  # raised out of a task group: the first leaf that is a fault
        return next((f for leaf in exc.exceptions if (f := storage_fault(leaf)) is not None), None)
    uri = _last_uri[0]
    if isinstance(exc, OSError):
        return _os_fault(exc, uri)
    return _boto_fault(exc, uri)


def _os_fault(exc: OSError, uri: str | None) -> BurnqedError | None:
    """`storage_fault` of an `OSError` (`uri`: the last one the store resolved)."""
    code = _oserror_errno(exc)
    where = exc.filename if exc.filename else uri
    at = f" {where}" if where else ""
    if code in _FULL:
        return StorageError(f"no space left writing{at} ({os.strerror(code or errno.ENOSPC)}): free space "
                            "or point the output elsewhere; committed parts are kept, nothing partial was "
                            "published")
    if code in _DENIED:
        return StorageError(f"permission denied at{at} ({os.strerror(code or errno.EACCES)}): check its "
                            "permissions (and that the file system is not read-only), or choose another path")
    if uri is not None and is_remote(uri) and _raised_in_storage(exc):
        # s3fs turns S3 error answers into OSError subclasses (translate_boto_error)
        if isinstance(exc, PermissionError):
            return StorageError(f"S3 refused access to {uri} ({exc}): check the credentials "
                                "(AWS_ACCESS_KEY_ID / AWS_PROFILE) and the bucket policy")
        if isinstance(exc, FileNotFoundError):
            return InputError(f"{uri}: not found on S3 ({exc}): check the bucket and prefix")
        return storage_error(f"S3 access to {uri} failed", exc)
    return None


def _boto_fault(exc: BaseException, uri: str | None) -> BurnqedError | None:
    """`storage_fault` of a botocore error (None without botocore, or for any other exception)."""
    try:
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            EndpointConnectionError,
            NoCredentialsError,
            PartialCredentialsError,
        )
    except ImportError:
        return None
    at = f" for {uri}" if uri else ""
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return ConfigError(f"no S3 credentials{at}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or "
                           "AWS_PROFILE, or a web identity / IRSA role)")
    if isinstance(exc, EndpointConnectionError):
        return TransientStorageError(f"cannot reach the S3 endpoint {exc.kwargs.get('endpoint_url', '')}{at}: "
                                     "check storage.endpoint_url / AWS_ENDPOINT_URL and the network")
    if isinstance(exc, ClientError):
        answer = str(exc.response.get("Error", {}).get("Code", "")) or str(exc)
        if answer in ("NoSuchBucket", "404"):
            return InputError(f"S3 bucket missing{at} ({answer}): create it or fix the URI")
        if answer in ("403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
            return StorageError(f"S3 refused the credentials{at} ({answer}): check AWS_ACCESS_KEY_ID / "
                                "AWS_SECRET_ACCESS_KEY / AWS_PROFILE")
        return StorageError(f"S3 answered {answer}{at}")
    if isinstance(exc, BotoCoreError):
        return TransientStorageError(f"S3 access{at} failed: {exc}; check storage.endpoint_url and the network")
    return None

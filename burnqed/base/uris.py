"""What a URI or URL must look like before anything is contacted: the syntax checks the configuration's
validators and the store share (the store itself, `burnqed.storage`, resolves and reaches them).

    check_uri("s3://bucket/run", "--root")            # the URI itself; `s3://` alone is an InputError
    check_http_url("http://127.0.0.1:30000", "url")   # the URL itself; `127.0.0.1:30000` is a ValueError

Pure: standard library only, no I/O.
"""

from __future__ import annotations

from burnqed.errors import InputError

REMOTE_SCHEMES = ("s3", "s3a")  # the schemes the store reaches through s3fs
MALFORMED_REMOTE = tuple(f"{scheme}:" for scheme in REMOTE_SCHEMES)  # `s3:bucket/x`: a remote URI missing its //


def names_a_uri(text: str) -> bool:
    """Whether `text` is written as a URI (a scheme and `://`) or as a remote one missing its `//`, not as a local
    path: where only a local folder may go, such a text would otherwise become a folder named `s3:`."""
    return "://" in text or text.startswith(MALFORMED_REMOTE)


def check_uri(uri: str, what: str, *, key: bool = False) -> str:
    """`uri` itself when it is a URI the store can use, else an `InputError` naming `what`: an `s3://` URI needs a
    bucket (`s3://` alone, or `s3:///x`, would otherwise become a local folder named `s3:`), and with `key` an object
    key under it too (an output cannot be a whole bucket: publishing replaces what is at the URI). Nothing is
    contacted; other schemes pass (an unknown one is refused by `Store.resolve`)."""
    scheme, sep, rest = uri.partition("://")
    if not uri.strip():
        raise InputError(f"{what}: empty URI; give a path or s3://bucket/prefix")
    if not sep:
        if uri.startswith(MALFORMED_REMOTE):
            raise InputError(f"{what} {uri!r}: malformed S3 URI; expected s3://bucket/prefix")
        return uri
    if scheme not in REMOTE_SCHEMES:
        return uri  # file:// and the other fsspec schemes (memory:// in tests); an unknown one fails in resolve
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise InputError(f"{what} {uri!r}: no bucket name; expected s3://bucket/prefix")
    if key and not prefix.strip("/"):
        raise InputError(f"{what} {uri!r}: a whole bucket; give a key under it, e.g. s3://{bucket}/run")
    return uri


def check_http_url(url: str, what: str) -> str:
    """`url` itself when it is an absolute http(s) URL with a host (`http://host:port[/path]`), else a `ValueError`
    naming `what` and the fix (for pydantic validators: `htp://…` or `127.0.0.1:30000` would otherwise be retried
    until a timeout)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{what} {url!r} is not a URL ({exc}); expected http://host:port") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{what} {url!r} is not an http(s) URL; expected http://host:port or https://host")
    del port
    return url

"""URIs of artifacts: a local path (`file://` or none, relative allowed) or a remote `s3://bucket/prefix`.

    normalize("runs/a")               # "file:///abs/runs/a"
    join("s3://b/run", "iter_0/sft")  # "s3://b/run/iter_0/sft"
    is_remote("s3://b/run")           # True
    hub_shaped("org/name")            # True: read as a Hugging Face hub name unless a local one exists
    local_path("file:///abs/runs/a")  # Path("/abs/runs/a"); InputError for a remote URI
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from burnqed.errors import InputError

Filesystem = Any  # fsspec.AbstractFileSystem (fsspec ships no type information)
HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # org/name: not /…, ./…, ~/…, file:…


def is_remote(uri: str) -> bool:
    """True for a URI with a scheme other than file://."""
    scheme, sep, _ = uri.partition("://")
    return bool(sep) and scheme != "file"


def hub_shaped(path: str) -> bool:
    """True for a string with the shape of a Hugging Face hub name, `org/name`, and no URI scheme: where the local
    files are not known (a pod's, at render), a data source read from the hub; where they are, one unless a local
    file or folder has that name (burnqed.data.rows.is_hub_name)."""
    return not is_remote(path) and bool(HUB_NAME.match(path))


def _dangling_link(path: str) -> Path | None:
    """The first component of the local `path`, as written, that is a symbolic link to nothing: resolving follows
    it, so writing there would create the link's missing target somewhere else (`mkdir -p` refuses)."""
    written = Path(path).expanduser().absolute()
    for part in [*reversed(written.parents), written]:
        if part.is_symlink() and not part.exists():
            return part
    return None


def normalize(uri: str) -> str:
    """A canonical URI: local paths (with or without file://, relative or not) become absolute file:// URIs;
    remote URIs lose trailing slashes. `InputError` for a local path through a symbolic link loop, or through a
    link to nothing (nothing can be read there, and writing would create the link's target elsewhere)."""
    if is_remote(uri):
        return uri.rstrip("/")
    path = uri.removeprefix("file://")
    try:
        resolved = Path(path).expanduser().resolve()
    except RuntimeError:  # pathlib's "Symlink loop from …" (ELOOP): no such path can ever be reached
        raise InputError(f"{uri}: a symbolic link in this path points back into it (a loop): fix or remove the "
                         "link, or choose another path") from None
    dangling = _dangling_link(path)
    if dangling is not None:
        raise InputError(f"{uri}: {dangling} is a symbolic link to {os.readlink(dangling)}, which does not exist; "
                         "fix the link or choose another path")
    return "file://" + str(resolved)


def local_path(uri: str) -> Path:
    """The path of a file:// URI (or plain path); `InputError` for a remote one."""
    if is_remote(uri):
        raise InputError(f"{uri} is not a local path")
    return Path(normalize(uri).removeprefix("file://"))


def join(uri: str, *parts: str) -> str:
    """`uri`/`parts`, with exactly one slash between them."""
    return "/".join([uri.rstrip("/"), *(part.strip("/") for part in parts)])

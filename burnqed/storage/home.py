"""The user's home and the download cache folder, for containers that run with no HOME and no password entry.

    default_cache_dir(cfg.storage.cache_dir, os.environ)   # storage.cache_dir, $BURNQED_HOME/cache, XDG, ~/.cache
    expand_home("~/models", os.environ)                     # None when there is no home: never a folder named `~`
    no_home_message("downloaded inputs")                    # the one line to raise when either is None
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from pathlib import Path


def user_home(environ: Mapping[str, str]) -> Path | None:
    """`$HOME`, else the home directory of this user id in the password database (as `~` does); None when there is
    neither: a container run as an arbitrary user id with no HOME (OpenShift does that)."""
    if environ.get("HOME"):
        return Path(environ["HOME"])
    try:
        return Path(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        return None


def expand_home(path: str, environ: Mapping[str, str]) -> Path | None:
    """`path` with a leading `~` replaced by `user_home`; None when it has one and there is no home (never a folder
    named `~` under the working directory, which is what `Path.expanduser` leaves then)."""
    if path != "~" and not path.startswith("~/"):
        return Path(path).expanduser()
    home = user_home(environ)
    return None if home is None else home / path[2:]


def no_home_message(what: str) -> str:
    """The one line for a folder that defaults to the user's home when there is none."""
    return (f"no folder for {what}: HOME is not set and user id {os.getuid()} has no home directory; set BURNQED_HOME "
            "(or XDG_CACHE_HOME) to a writable folder")


def default_cache_dir(configured: str | None, environ: Mapping[str, str]) -> Path | None:
    """Where remote inputs are downloaded: storage.cache_dir (`configured`), else $BURNQED_HOME/cache, else the
    XDG cache ($XDG_CACHE_HOME, else ~/.cache); None when it lies under a home directory there is none of."""
    if configured:
        return expand_home(configured, environ)
    if environ.get("BURNQED_HOME"):
        home = expand_home(environ["BURNQED_HOME"], environ)
        return None if home is None else home / "cache"
    if environ.get("XDG_CACHE_HOME"):
        return Path(environ["XDG_CACHE_HOME"]) / "burnqed" / "artifacts"
    home = user_home(environ)
    return None if home is None else home / ".cache" / "burnqed" / "artifacts"

"""Model folders as users give them: the folder to load (`ensure_model`: a path a user gave, checked with a "did you
mean" when it names no model folder, or the default tiny model, built on first use under one file lock), and where
the default one lives (`default_model_dir`).

    folder = ensure_model(None, store=store)  # the default one, built on first use (BURNQED_HOME)
    folder = ensure_model("runs/iter_0/export", store=store)  # ModelInputError (exit 2) when it holds no model
"""

from __future__ import annotations

import difflib
import itertools
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from burnqed.errors import InputError, ModelError, ModelInputError
from burnqed.policy.tiny import TINY_NAME, build_tiny_model
from burnqed.storage import Store, expand_home, no_home_message, user_home

# Any of these (besides a tokenizer) makes a folder loadable as a model.
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model")
MAX_SIBLINGS = 10_000  # folders looked at for a "did you mean": a typo beside a huge folder still fails at once


def default_model_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the default tiny model lives: `$BURNQED_HOME/models/tiny-v3`, else the user cache ($XDG_CACHE_HOME, else
    ~/.cache); InputError (one line) when that is under a home directory there is none of."""
    env = os.environ if environ is None else environ
    if env.get("BURNQED_HOME"):
        base = expand_home(env["BURNQED_HOME"], env)
        folder = None if base is None else base / "models" / TINY_NAME
    elif env.get("XDG_CACHE_HOME"):
        folder = Path(env["XDG_CACHE_HOME"]) / "burnqed" / "models" / TINY_NAME
    else:
        home = user_home(env)
        folder = None if home is None else home / ".cache" / "burnqed" / "models" / TINY_NAME
    if folder is None:
        raise InputError(no_home_message("the default tiny model") + ", or give policy.model")
    return folder


def missing_model_files(path: Path) -> list[str]:
    """What a folder lacks to be loadable as a model: [] when it has a config, weights and a tokenizer."""
    missing = []
    if not (path / "config.json").is_file():
        missing.append("config.json")
    if not any((path / name).is_file() for name in WEIGHT_FILES):
        missing.append("weights (" + " or ".join(WEIGHT_FILES) + ")")
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        missing.append("a tokenizer (" + " or ".join(TOKENIZER_FILES) + ")")
    return missing


def no_model_folder(folder: Path, given: str | None = None) -> str:
    """Why `folder` (a model path a user gave) names no folder: a file, a parent missing too, or a typo; a folder
    beside it with a close name is suggested (`did you mean …?`). Never a suggestion to build a model there: a
    mistyped path is not where anybody wants one. `given` is the path as the user wrote it when `folder` is its
    absolute form: the paths in the message are then written as the user would (relative to the same place)."""
    def shown(path: Path) -> str:
        return _as_given(path, folder, given)

    if folder.exists():
        return f"model folder {shown(folder)} is a file, not a folder"
    missing = folder
    while not missing.parent.exists() and missing.parent != missing:
        missing = missing.parent
    if missing != folder:
        return f"model folder {shown(folder)}: no such folder ({shown(missing)} does not exist)"
    close = _close_name(folder.name, _subfolders(folder.parent))
    if close is None:
        return f"model folder {shown(folder)}: no such folder"
    return f"model folder {shown(folder)} does not exist; did you mean {shown(folder.parent / close)}?"


def _as_given(path: Path, folder: Path, given: str | None) -> str:
    """`path` (at or above `folder`, or beside it) written relative to where the relative path `given` (of which
    `folder` is the absolute form) starts; absolute when `given` is absolute, climbs out with `..` or is not known."""
    written = Path(os.path.normpath(given)) if given else None
    if written is None or written.is_absolute() or written.parts[:1] == ("..",) or written == Path("."):
        return str(path)
    base = folder.parents[len(written.parts) - 1]
    return os.path.relpath(path, base)


def not_a_model_folder(folder: Path, missing: list[str]) -> str:
    """Why `folder` (an existing folder a user gave as a model) is not one, and the model folder inside it if there
    is one (a parent folder given for its model: `runs/iter_0` for `runs/iter_0/export`)."""
    inside = next((name for name in sorted(_subfolders(folder)) if not missing_model_files(folder / name)), None)
    hint = f"; did you mean {folder / inside}?" if inside is not None else "; it is not a model folder"
    return f"model folder {folder} is missing {', '.join(missing)}{hint}"


def _subfolders(parent: Path) -> list[str]:
    try:
        return [entry.name for entry in itertools.islice(parent.iterdir(), MAX_SIBLINGS) if entry.is_dir()]
    except OSError:
        return []


def _close_name(name: str, candidates: list[str]) -> str | None:
    """The candidate a typo of `name` most likely meant (case ignored; a swap of two letters is close), or None."""
    lowered = {candidate.lower(): candidate for candidate in candidates}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.5)
    return lowered[close[0]] if close else None


def ensure_model(path: str | None, environ: Mapping[str, str] | None = None, *, store: Store) -> Path:
    """The model folder to load: `path` if it holds a model (else `ModelInputError`: exit 2), or with `path=None`
    the default tiny model, built on first use (one line on stderr, then training progress). A URI `path` is
    read through `store` (downloaded once into its cache)."""
    if path is not None:
        if not path.strip():  # `--set policy.model=$MODEL` with MODEL unset: not the current folder
            raise ModelInputError("the model path is empty (policy.model, sft.base_model or --model): give a model "
                                  "folder, or leave it unset for the tiny embedded model")
        if "://" in path:  # a URI (file://, s3://): a local folder or a cached download
            path = str(store.local_input(path))
        folder = Path(os.path.abspath(os.path.expanduser(path)))  # relative to where the command started
        if not folder.is_dir():
            raise ModelInputError(no_model_folder(folder, os.path.expanduser(path)))
        missing = missing_model_files(folder)
        if missing:
            raise ModelInputError(not_a_model_folder(folder, missing))
        return folder
    folder = default_model_dir(environ)
    if _built(folder):
        return folder
    env = os.environ if environ is None else environ
    if int(env.get("WORLD_SIZE", "1")) > 1:  # transformers' save_pretrained writes on process 0 only
        raise ModelError(f"the default tiny model is not built in {folder}, and a process under torchrun cannot "
                         "build it: run `burnqed model init-tiny` first (the command that launches torchrun builds "
                         "it before it launches)")
    where = "BURNQED_HOME" if env.get("BURNQED_HOME") else "the user cache (XDG_CACHE_HOME or ~/.cache)"
    try:  # before the 20 s of training: a read-only or file BURNQED_HOME is one line up front, not a traceback after
        store.check_writable(str(folder), what=f"the default model folder (under {where})", folder=True)
    except InputError as exc:
        raise InputError(f"{exc}; or set BURNQED_HOME to a writable folder, or give policy.model") from None
    # Several stages may need it at once (iterate runs eval-base and sft side by side): one builds, the others wait
    # for it and read its model, instead of each spending the build's CPU on the same folder.
    with build_lock(folder):
        if _built(folder):  # built by the process we waited for
            return folder
        print(f"building the tiny embedded model in {folder} (first use, about 20 s)", file=sys.stderr, flush=True)
        try:
            build = build_tiny_model(folder)
        except InputError:
            if not _built(folder):
                raise
            return folder  # published meanwhile by a build that takes no lock (`model init-tiny --output` there)
    print(build.summary, file=sys.stderr, flush=True)
    return folder


def _built(folder: Path) -> bool:
    """True when the default model folder holds a model; False when there is none yet; `ModelError` for a folder
    with some of a model's files but not all (damaged: it is never built over)."""
    if not (folder.is_dir() and any(folder.iterdir())):
        return False
    missing = missing_model_files(folder)
    if missing:
        raise ModelError(
            f"the default model folder {folder} is missing {', '.join(missing)}; rebuild it with "
            f"`burnqed model init-tiny --output {folder} --force`"
        )
    return True


@contextmanager
def build_lock(folder: Path) -> Iterator[None]:
    """Hold the lock of building `folder`: an exclusive `flock` on `.NAME.lock` beside it, waited for (with one line
    on stderr) while another process holds it. The kernel releases it when its holder exits however it exits, so a
    builder killed mid-build never blocks the next one, and since a build publishes by rename, it leaves no half-built
    folder either. The lock file stays: removing it could let two processes lock two different files."""
    import fcntl

    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another process building the tiny embedded model in {folder}", file=sys.stderr,
                  flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)

"""The provenance an eval result records of the run that made it: the configuration's digest (`config_digest`) and
the commit of the checkout it ran from (`git_commit`, read from the repository's own files, git asked only where
they are not enough).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from pydantic import BaseModel

from burnqed.config import digest as digests


def config_digest(config: BaseModel) -> str:
    """The configuration's digest as results record it: `burnqed.config.digest.config_digest` (one definition for
    eval results and the cluster's workflows)."""
    return digests.config_digest(config)


def git_commit(path: Path | None = None) -> str | None:
    """The commit HEAD names in the git checkout holding `path` (default: the current directory), as `git rev-parse
    HEAD` there says it; None when it is not a git checkout, git is missing or does not answer within 10 s. Never
    raises.

        git_commit()                 # 'a3f1…' (40 hex digits) in a checkout, None elsewhere

    Read from the repository's own files (`.git` or a worktree's `.git` file, HEAD, the loose ref, packed-refs), which
    are read afresh on every call, so a commit or checkout made since is seen; no `.git` up to the root or the file
    system's edge is None, as git says. The `git` process answers only where that reading is not sure to say what
    git would (GIT_DIR and friends set, a folder that looks like a bare repository, another owner's repository, an
    unborn branch, a reftable or SHA-256 repository)."""
    found = _commit_from_files(path)
    if found == NO_REPOSITORY:
        return None
    return found if found is not None else _commit_from_git(path)


NO_REPOSITORY = ""  # `_commit_from_files`: no repository holds the folder (git would say "not a git repository")


_GIT_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES",
            "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_CONFIG_PARAMETERS", "GIT_NAMESPACE")
_PER_WORKTREE_REFS = ("refs/bisect/", "refs/worktree/", "refs/rewritten/")  # git's worktree-local refs


def _is_sha1(text: str) -> bool:
    return len(text) == 40 and all(c in "0123456789abcdef" for c in text)


def _commit_from_files(start: Path | None) -> str | None:
    """HEAD's commit from the files of the repository above `start` (default: the current directory); NO_REPOSITORY
    where there is none; None where git itself must be asked."""
    if any(name in os.environ for name in _GIT_ENV):
        return None
    try:
        here = (Path.cwd() if start is None else start).resolve(strict=True)
        device = here.stat().st_dev
        for folder in (here, *here.parents):
            if folder.stat().st_dev != device:
                return NO_REPOSITORY  # git stops at a file system's edge (GIT_DISCOVERY_ACROSS_FILESYSTEM unset)
            if (folder / "HEAD").is_file() and (folder / "objects").is_dir() and (folder / "refs").is_dir():
                return None  # a git directory itself (bare, or inside .git): git's own reading
            dot_git = folder / ".git"
            if dot_git.is_dir():
                git_dir = dot_git
            elif dot_git.is_file():
                line = dot_git.read_text(encoding="utf-8").strip()
                if not line.startswith("gitdir: "):
                    return None
                git_dir = (folder / line.removeprefix("gitdir: ")).resolve()
            else:
                continue
            if git_dir.stat().st_uid != os.getuid():
                return None  # git's safe.directory check decides about another owner's repository
            common = git_dir
            if (git_dir / "commondir").is_file():
                common = (git_dir / (git_dir / "commondir").read_text(encoding="utf-8").strip()).resolve()
            return _resolve_ref(git_dir, common, "HEAD")
        return NO_REPOSITORY
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _resolve_ref(git_dir: Path, common: Path, ref: str) -> str | None:
    """The commit `ref` names, following symbolic refs (HEAD → refs/heads/main) through loose files, then
    packed-refs."""
    for _ in range(5):
        local = ref == "HEAD" or ref.startswith(_PER_WORKTREE_REFS)
        loose = (git_dir if local else common) / ref
        if loose.is_file():
            text = loose.read_text(encoding="utf-8").strip()
        else:
            packed = common / "packed-refs"
            if local or not packed.is_file():
                return None
            text = ""
            for line in packed.read_text(encoding="utf-8").splitlines():
                sha, _, name = line.partition(" ")
                if name == ref and not line.startswith(("#", "^")):
                    text = sha
                    break
        if text.startswith("ref: "):
            ref = text.removeprefix("ref: ").strip()
            continue
        return text if _is_sha1(text) else None
    return None


def _commit_from_git(path: Path | None) -> str | None:
    """`git rev-parse HEAD` in `path`: the answer where the files alone are not enough."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=path,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and _is_sha1(commit) else None

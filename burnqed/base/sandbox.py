"""The sealed environment of a Lean process: generated tactics run inside it, so it gets only what Lean,
elan and Lake read, plus `lean.env`; never the search process's cloud credentials or tokens.

    env = sealed_environment(os.environ, config.env)    # what every worker and the version probe get
    options = spawn_options(lean_identity(config.run_as_uid), os.environ)   # user=, group=, extra_groups=[]
    await asyncio.create_subprocess_exec(*argv, env=env, **options)

A name that looks like a credential (`CREDENTIAL_NAME`) is dropped whatever its origin. With `lean.run_as_uid`,
Lean runs under a uid of its own; `spawn_options` refuses (ConfigError) when that separation would not hold. The
variables kept and the rules: docs/lean.md, "A sealed Lean process".
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from burnqed.errors import ConfigError

ALLOWED: frozenset[str] = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TMP", "TEMP", "LD_LIBRARY_PATH",
        "LEAN_PATH", "LEAN_SRC_PATH", "LEAN_SYSROOT", "LEAN_CC", "LEAN_NUM_THREADS", "LEAN_GITHASH", "LEAN",
        "ELAN_HOME", "ELAN_TOOLCHAIN",
        "LAKE", "LAKE_HOME", "LAKE_NO_CACHE", "LAKE_CACHE_DIR", "LAKE_OVERRIDE_LEAN",
        "PYTHONPATH", "PYTHONHOME",
    }
)
ALLOWED_PREFIXES: tuple[str, ...] = ("LC_",)
# Cloud keys, tokens, secrets, passwords: AWS_*, *TOKEN*, *SECRET*, *KEY*, *PASSWORD*, *CREDENTIAL*, ...
CREDENTIAL_NAME = re.compile(r"^(?:AWS|AZURE|GOOGLE|GCP)_|TOKEN|SECRET|KEY|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)


def looks_like_credential(name: str) -> bool:
    return CREDENTIAL_NAME.search(name) is not None


def credential_names(names: Iterable[str]) -> list[str]:
    """The names among `names` that look like credentials, sorted."""
    return sorted(name for name in names if looks_like_credential(name))


def sealed_environment(parent: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of a Lean process (see the module docstring). ConfigError if `extra` names a credential."""
    refused = credential_names(extra)
    if refused:
        raise ConfigError(
            f"lean.env names {', '.join(refused)}, which looks like a credential: Lean runs generated code and "
            "must never see credentials. Remove it from lean.env."
        )
    env = {
        name: value
        for name, value in parent.items()
        if (name in ALLOWED or name.startswith(ALLOWED_PREFIXES)) and not looks_like_credential(name)
    }
    env.update(extra)
    return env


# Variables naming files that hold credentials (AWS IRSA and shared files, GCP, Azure workload identity, EKS Pod
# Identity); the Kubernetes service-account token is checked too when it is mounted.
CREDENTIAL_FILE_VARIABLES: tuple[str, ...] = (
    "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_FEDERATED_TOKEN_FILE",
)
SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
# capability numbers (linux/capability.h)
CAP_KILL, CAP_SETGID, CAP_SETUID = 5, 6, 7


@dataclass(frozen=True, slots=True)
class LeanIdentity:
    """The user Lean processes run as: `uid`, group `gid`, no supplementary groups."""

    uid: int
    gid: int


def lean_identity(run_as_uid: int | None) -> LeanIdentity | None:
    """`lean.run_as_uid` as an identity (its group has the same number); None = run as this process."""
    return None if run_as_uid is None else LeanIdentity(run_as_uid, run_as_uid)


def effective_capabilities(status: str | None = None) -> int:
    """This process's effective capability set (CapEff of /proc/self/status); 0 where it cannot be read."""
    try:
        text = status if status is not None else Path("/proc/self/status").read_text(encoding="ascii")
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


def readable_by(path: str | Path, identity: LeanIdentity) -> bool:
    """Whether a process of `identity` (no supplementary groups, no capabilities) could read `path`: every folder
    on the way searchable by it and the file readable, by the owner, group or other bits that apply to it."""
    target = Path(path)
    try:
        resolved = target.resolve(strict=True)
    except OSError:
        return False
    parts = [*reversed(resolved.parents), resolved]
    for index, part in enumerate(parts):
        try:
            info = part.stat()
        except OSError:
            return False
        want = (stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH) if index < len(parts) - 1 else (
            stat.S_IRUSR, stat.S_IRGRP, stat.S_IROTH)
        if info.st_uid == identity.uid:
            allowed = bool(info.st_mode & want[0])
        elif info.st_gid == identity.gid:
            allowed = bool(info.st_mode & want[1])
        else:
            allowed = bool(info.st_mode & want[2])
        if not allowed:
            return False
    return True


def spawn_options(identity: LeanIdentity | None, environ: Mapping[str, str]) -> dict[str, Any]:
    """Keyword arguments of `asyncio.create_subprocess_exec` / `subprocess.Popen` that start a Lean process under
    `identity` (nothing when None); ConfigError when the separation cannot hold (see the module docstring)."""
    if identity is None:
        return {}
    if identity.uid in (0, os.geteuid()) or identity.gid == 0:
        raise ConfigError(f"lean.run_as_uid = {identity.uid} is root or this process's own uid {os.geteuid()}: Lean "
                          "must run as a user of its own, or it could read burnqed's credentials")
    needed = {CAP_SETUID: "CAP_SETUID", CAP_SETGID: "CAP_SETGID", CAP_KILL: "CAP_KILL"}
    have = effective_capabilities()
    lacking = [name for bit, name in needed.items() if not have >> bit & 1]
    if lacking:
        raise ConfigError(f"lean.run_as_uid = {identity.uid} needs {', '.join(lacking)} to start and stop Lean under "
                          "another user (the cluster's Lean containers run as root with CAP_SETUID, CAP_SETGID and "
                          "CAP_KILL only); unset it to run Lean as this user")
    files = [environ[name] for name in CREDENTIAL_FILE_VARIABLES if environ.get(name)] + [SERVICE_ACCOUNT_TOKEN]
    exposed = [path for path in files if readable_by(path, identity)]
    if exposed:
        raise ConfigError(f"credential file(s) {', '.join(exposed)} would be readable by Lean's uid {identity.uid} "
                          "(their mode lets 'other' read them): Lean runs generated code. Mount them with a mode "
                          "that excludes others (0600/0640) or do not mount them into this container")
    return {"user": identity.uid, "group": identity.gid, "extra_groups": []}

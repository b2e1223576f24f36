"""The sealed environment of a Lean process: generated tactics run inside it, so it gets only what Lean,
elan and Lake read, plus `lean.env`; never the search process's cloud credentials or tokens.

    env = sealed_environment(os.environ, config.env)    # what every worker and the version probe get

Allowed from the parent: PATH, HOME, USER, LOGNAME, the locale (LANG, LANGUAGE, LC_*), TZ, the temporary
directory (TMPDIR, TMP, TEMP), LD_LIBRARY_PATH, Lean's own variables (LEAN_PATH, LEAN_SRC_PATH, LEAN_SYSROOT,
LEAN_CC, LEAN_NUM_THREADS, LEAN_GITHASH, LEAN), elan's (ELAN_HOME, ELAN_TOOLCHAIN), Lake's (LAKE, LAKE_HOME,
LAKE_NO_CACHE, LAKE_CACHE_DIR, LAKE_OVERRIDE_LEAN) and, for the Python replay server and test doubles,
PYTHONPATH/PYTHONHOME. Everything else is dropped. `lean.env` is added on top; a name there that looks like a
credential is refused when the configuration is loaded (`CREDENTIAL_NAME`), and anything matching it is
dropped here whatever its origin.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

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

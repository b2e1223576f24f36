"""Which configuration `submit` and `cluster check` use: the one the pods will read, the namespace's config
ConfigMap (docs/cluster.md, "One configuration").

    text = read_config_map(reader, namespace, cluster)          # the ConfigMap's burnqed.toml
    cfg = one_configuration(local, explicit, text, where)       # the ConfigMap's, or a refusal with both digests

Without a local configuration (no --config, no --set, no BURNQED_SECTION__KEY variables) the ConfigMap's is used
as is, so `burnqed submit iteration --namespace NS` renders what the pods run. With one, its digest
(`burnqed.config.digest.pod_config_digest`) must equal the ConfigMap's, else `ConfigError` naming both digests and
how to make them agree.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from burnqed.config import ENV_PREFIX, ClusterConfig, Config, load_config
from burnqed.config.digest import pod_config_digest
from burnqed.errors import BurnqedError, ClusterError, ConfigError

if TYPE_CHECKING:
    from burnqed.cluster.kubereader import ClusterReader

CONFIG_KEY = "burnqed.toml"


def explicit_configuration(config: Path | None, sets: Sequence[str] | None, environ: Mapping[str, str]) -> bool:
    """Whether the user gave a configuration of their own: a file, a --set or a BURNQED_SECTION__KEY variable."""
    return (config is not None or bool(sets)
            or any(name.startswith(ENV_PREFIX) and "__" in name for name in environ))


def load_text(text: str, where: str) -> Config:
    """The configuration a pod loads from this TOML alone (no variables, no --set); `ConfigError` naming `where`."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / CONFIG_KEY
        path.write_text(text, encoding="utf-8")
        try:
            return load_config(path, (), {})
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}".replace(str(path), where)) from None


def read_config_map(reader: ClusterReader, namespace: str, cluster: ClusterConfig) -> str:
    """The `burnqed.toml` of the ConfigMap `cluster.config_map` in `namespace`; `ClusterError` when it cannot be
    read or does not exist."""
    name = cluster.config_map
    found = reader.get("ConfigMap", name, namespace)
    if found.forbidden:
        raise ClusterError(f"cannot read ConfigMap {namespace}/{name} (HTTP 403: {found.message}), the configuration "
                           "the pods read: grant get on configmaps (Role burnqed-submitter in manifests/20-rbac.yaml)")
    if found.found is None:
        raise ClusterError(f"no ConfigMap {namespace}/{name}, the configuration the pods read (HTTP {found.status}): "
                           "install the chart (--set-file config.toml=FILE) or create it from your file "
                           "(docs/cluster.md, static manifests)")
    text = (found.found.get("data") or {}).get(CONFIG_KEY)
    if text is None:
        raise ClusterError(f"ConfigMap {namespace}/{name} has no key {CONFIG_KEY}")
    return str(text)


def one_configuration(local: Config, explicit: bool, text: str, where: str) -> Config:
    """The ConfigMap's configuration when there is no local one, else the local one if it is the same (digest),
    else `ConfigError` with both digests."""
    try:
        remote = load_text(text, where)
    except BurnqedError as exc:
        raise ConfigError(f"the pods' configuration does not load: {exc}") from None
    if not explicit:
        return remote
    mine, theirs = pod_config_digest(local), pod_config_digest(remote)
    if mine != theirs:
        raise ConfigError(
            f"the local configuration (digest {mine}) differs from {where} (digest {theirs}), which the pods read: "
            "submit without --config/--set to run the ConfigMap's, or install yours first (helm upgrade … "
            "--set-file config.toml=FILE, or kubectl create configmap … --from-file=burnqed.toml=FILE "
            "--dry-run=client -o yaml | kubectl apply -f -) and render from the same file"
        )
    return local

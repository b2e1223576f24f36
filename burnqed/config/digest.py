"""Digests of a configuration, and the pods' check that they run the configuration their workflow was rendered
from (docs/cluster.md, "One configuration").

    config_digest(cfg)                 # sha256 of the canonical JSON, 16 hex characters (eval results record it)
    pod_config_digest(cfg)             # of the keys it sets (defaults and CLIENT_ONLY keys left out): what a
                                       # workflow carries (BURNQED_CONFIG_DIGEST, burnqed.io/config-digest)
    verify_mounted_config(os.environ)  # in a pod: BURNQED_CONFIG's file must have BURNQED_CONFIG_DIGEST

A pod's command loads the mounted file alone and refuses to start when its digest differs: the ConfigMap was
changed after the templates were rendered. The namespace and the Argo Server's address (`CLIENT_ONLY`) are only
the submitting side's, so they do not count.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel

from burnqed.config.cluster import ClusterConfig
from burnqed.config.identity import fields_with_role
from burnqed.errors import ConfigError

DIGEST_ENV = "BURNQED_CONFIG_DIGEST"
DIGEST_ANNOTATION = "burnqed.io/config-digest"
CONFIG_ENV = "BURNQED_CONFIG"


# How a configuration of one's own reaches the installed WorkflowTemplates (README, docs/cluster.md): its renders go
# into a copy of the chart, never over the checkout's golden files, and that copy is installed.
CHART_ROUTE = ("render into a copy of the chart (mkdir -p build && cp -r helm/burnqed build/ && burnqed render --helm "
               "--config FILE --output build/burnqed/files/workflowtemplates), then helm upgrade burnqed build/burnqed "
               "… --set-file config.toml=FILE")

def config_digest(config: BaseModel) -> str:
    """First 16 hex characters of the sha256 of the config's canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(config.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


# where `submit` and `cluster check` reach the cluster from: nothing a pod runs reads these (the `cluster` fields
# whose mark gives them the role "client")
CLIENT_ONLY = fields_with_role(ClusterConfig, "client")


def pod_config_digest(config: BaseModel) -> str:
    """The digest of what the configuration sets: the canonical JSON of every key whose value is not its default
    (a key set to its default counts as unset), without the `cluster` keys only the submitting side reads
    (`CLIENT_ONLY`: the namespace submitted to, where the Argo Server is).

    Defaults are left out so that a key added to burnqed, or a default left as it was, moves no workflow: the
    rendered templates (and the golden files, `manifests/rendered/`, the chart's copy) change only when a value the
    configuration sets changes. What the pods' check guards is unchanged: the ConfigMap a pod mounts sets the same
    values as the configuration its workflow was rendered from, under the burnqed of the images (one version: the
    images install the release that rendered them)."""
    data = config.model_dump(mode="json", exclude_defaults=True)
    if isinstance(data.get("cluster"), dict):
        for key in CLIENT_ONLY:
            data["cluster"].pop(key, None)
        if not data["cluster"]:
            del data["cluster"]
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def verify_mounted_config(environ: Mapping[str, str]) -> None:
    """When `BURNQED_CONFIG_DIGEST` is set (a workflow pod), the file `BURNQED_CONFIG` names must load, by itself,
    to a configuration with that digest; `ConfigError` (exit 2, not retried) otherwise."""
    expected = environ.get(DIGEST_ENV)
    if not expected:
        return
    from burnqed.config.loader import load_config

    path = environ.get(CONFIG_ENV)
    if not path:
        raise ConfigError(f"{DIGEST_ENV} is set but {CONFIG_ENV} is not: this pod cannot check the configuration it "
                          "was rendered for")
    found = pod_config_digest(load_config(Path(path), (), {}))
    if found != expected:
        raise ConfigError(
            f"the configuration mounted at {path} (digest {found}) is not the one this workflow was rendered from "
            f"(digest {expected}): the config ConfigMap changed after the templates were rendered, or they were "
            f"rendered from another file. Render and install from the same file: {CHART_ROUTE}; or submit again "
            "with `burnqed submit`, which renders from the ConfigMap"
        )

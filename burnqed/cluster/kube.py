"""Where the Kubernetes API is and who we are there, for `submit`'s kubeconfig fallback and `burnqed cluster check`:
the kubeconfig's current context ($KUBECONFIG, else ~/.kube/config) or, inside a pod without one, the pod's
service account (in-cluster). The `kubernetes` package loads either.

    connection = connect(os.environ)
    connection.host, connection.source                  # "https://10.0.0.1:443", "kubeconfig (https://10.0.0.1:443)"
    api = connection.api_client()                        # a kubernetes.client.ApiClient

Failures are one `ClusterError` line; the token is never in a repr or a message.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from burnqed.errors import ClusterError

IN_CLUSTER_HOST = "KUBERNETES_SERVICE_HOST"  # set in every pod; the kubernetes package reads it in-cluster


@dataclass(frozen=True, slots=True)
class KubeConnection:
    """A loaded client configuration and what an httpx client needs to talk to the same API server."""

    configuration: Any = field(repr=False)  # kubernetes.client.Configuration
    host: str  # API server base URL, no trailing slash
    source: str  # where it came from, for messages
    token: str | None = field(default=None, repr=False)
    verify: bool | str = True  # False, True or a CA bundle path
    cert: tuple[str, str] | None = field(default=None, repr=False)

    def api_client(self) -> Any:
        """A `kubernetes.client.ApiClient` on this configuration."""
        return _module("kubernetes.client").ApiClient(self.configuration)


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ClusterError(
            "the kubernetes package is missing to read a kubeconfig (pip install 'burnqed[k8s]')"
        ) from None


def bearer(token: str | None) -> str | None:
    """A token without its "Bearer " prefix; None when empty."""
    token = (token or "").strip()
    token = token.removeprefix("Bearer ").removeprefix("bearer ").strip()
    return token or None


def _is_malformed_kubeconfig(exc: Exception) -> bool:
    """True for what the kubernetes package raises on a kubeconfig that is not YAML (PyYAML's errors) or not a
    mapping of the kubeconfig's shape (it indexes the parsed value without checking its type)."""
    return type(exc).__module__.split(".", 1)[0] == "yaml" or isinstance(exc, TypeError | AttributeError | KeyError)


def connect(environ: Mapping[str, str], *, prefix: str = "") -> KubeConnection:
    """The kubeconfig's current context, else the in-cluster service account; a `ClusterError` ("{prefix}no usable
    kubeconfig: why") when neither is usable."""
    kube_config = _module("kubernetes.config")
    configuration = _module("kubernetes.client").Configuration()
    path = environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    try:
        if environ.get(IN_CLUSTER_HOST) and not any(Path(p).is_file() for p in path.split(":") if p):
            kube_config.load_incluster_config(client_configuration=configuration)
            source = "in-cluster service account"
        else:
            # the file is named here: the kubernetes package reads $KUBECONFIG once, at import
            kube_config.load_kube_config(config_file=environ.get("KUBECONFIG"), client_configuration=configuration)
            source = "kubeconfig"
    except (kube_config.ConfigException, OSError, ValueError) as exc:
        raise ClusterError(f"{prefix}no usable kubeconfig: " + " ".join(str(exc).split())) from None
    except Exception as exc:  # a file that is not YAML, or YAML that is not a kubeconfig (yaml.YAMLError, ...)
        if not _is_malformed_kubeconfig(exc):
            raise
        first = " ".join(str(exc).split())[:200]
        raise ClusterError(f"{prefix}no usable kubeconfig: {path} is not a kubeconfig ({type(exc).__name__}: "
                           f"{first}); fix it or point KUBECONFIG at a valid one") from None
    keys = configuration.api_key or {}
    token = bearer(keys.get("BearerToken") or keys.get("authorization"))  # the key's name differs by version
    verify: bool | str = (configuration.ssl_ca_cert or True) if configuration.verify_ssl else False
    cert = (configuration.cert_file, configuration.key_file) if configuration.cert_file else None
    host = str(configuration.host).rstrip("/")
    return KubeConnection(configuration, host, f"{source} ({host})", token=token, verify=verify, cert=cert)

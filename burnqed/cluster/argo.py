"""A small Argo Server API client (httpx): create a Workflow, submit a WorkflowTemplate.

    target = resolve_target(cfg.cluster, server=None, namespace=None, token_env=None, insecure=False,
                            environ=os.environ)
    with ArgoClient(target) as argo:
        created = argo.create(workflow_dict)                         # POST /api/v1/workflows/{ns}
        created = argo.submit_template("burnqed-iteration-2", ["root=s3://b/run"])   # POST .../{ns}/submit
    print(target.ui_link(created["metadata"]["name"]))

Where the server, namespace and token come from (first found wins):
- server: --server, cluster.argo_server, $ARGO_SERVER (host:port as the argo CLI takes it: https unless
  ARGO_SECURE=false; $ARGO_BASE_HREF is appended), else the kubeconfig's current context: its Kubernetes API
  server, proxied to the Argo Server's Service (cluster.argo_service) - the `kubernetes` package loads it.
- namespace: --namespace, $ARGO_NAMESPACE, cluster.namespace.
- token: the variable named by --token-env (default cluster.argo_token_env = ARGO_TOKEN; a "Bearer " prefix is
  accepted), else the kubeconfig's token when the server came from there.
The token is sent as `Authorization: Bearer …` and never printed, logged or put in an error message. A refused
token (401/403), an unreachable server and any other refusal are one `ClusterError` line.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import httpx

from burnqed.config import ClusterConfig
from burnqed.errors import ClusterError

API = "/api/v1/workflows"
TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class ArgoTarget:
    """Where and as whom to talk to the Argo Server."""

    server: str  # base URL without a trailing slash
    namespace: str
    source: str  # where the server came from, for error messages
    token: str | None = field(default=None, repr=False)
    token_env: str = "ARGO_TOKEN"
    verify: bool | str = True  # False, True or a CA bundle path
    cert: tuple[str, str] | None = field(default=None, repr=False)  # client certificate from a kubeconfig

    def ui_link(self, name: str) -> str:
        return f"{self.server}/workflows/{self.namespace}/{name}"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def _bearer(token: str | None) -> str | None:
    token = (token or "").strip()
    token = token.removeprefix("Bearer ").removeprefix("bearer ").strip()
    return token or None


def _server_from_env(raw: str, environ: Mapping[str, str]) -> str:
    if "://" not in raw:  # the argo CLI's ARGO_SERVER is host:port
        scheme = "http" if environ.get("ARGO_SECURE", "").strip().lower() == "false" else "https"
        raw = f"{scheme}://{raw}"
    return raw.rstrip("/") + environ.get("ARGO_BASE_HREF", "").rstrip("/")


def _from_kubeconfig(
    cluster: ClusterConfig, environ: Mapping[str, str]
) -> tuple[str, str | None, bool | str, tuple[str, str] | None, str]:
    """(proxied server URL, token, verify, client cert, description) from the kubeconfig's current context
    ($KUBECONFIG, else ~/.kube/config)."""
    try:
        kube_config = importlib.import_module("kubernetes.config")
        kube_client = importlib.import_module("kubernetes.client")
    except ImportError:
        raise ClusterError(
            "no Argo Server given (--server, cluster.argo_server or ARGO_SERVER) and the kubernetes package is "
            "missing to read a kubeconfig (pip install 'burnqed[k8s]')"
        ) from None
    configuration = kube_client.Configuration()
    try:
        # the file is named here: the kubernetes package reads $KUBECONFIG once, at import
        kube_config.load_kube_config(config_file=environ.get("KUBECONFIG"), client_configuration=configuration)
    except (kube_config.ConfigException, OSError, ValueError) as exc:
        raise ClusterError(
            "no Argo Server given (--server, cluster.argo_server or ARGO_SERVER) and no usable kubeconfig: "
            + " ".join(str(exc).split())
        ) from None
    service_namespace, sep, service = cluster.argo_service.partition("/")
    if not sep or not service:
        raise ClusterError(f"cluster.argo_service {cluster.argo_service!r}: expected NAMESPACE/[SCHEME:]SERVICE:PORT")
    host = str(configuration.host).rstrip("/")
    server = f"{host}/api/v1/namespaces/{service_namespace}/services/{service}/proxy"
    keys = configuration.api_key or {}
    token = _bearer(keys.get("BearerToken") or keys.get("authorization"))  # the key's name differs by version
    verify: bool | str = (configuration.ssl_ca_cert or True) if configuration.verify_ssl else False
    cert = (configuration.cert_file, configuration.key_file) if configuration.cert_file else None
    return server, token, verify, cert, f"kubeconfig ({host}, Service {cluster.argo_service})"


def resolve_namespace(cluster: ClusterConfig, namespace: str | None, environ: Mapping[str, str]) -> str:
    """--namespace, else $ARGO_NAMESPACE, else cluster.namespace."""
    return namespace or environ.get("ARGO_NAMESPACE") or cluster.namespace


def resolve_target(
    cluster: ClusterConfig,
    *,
    server: str | None,
    namespace: str | None,
    token_env: str | None,
    insecure: bool,
    environ: Mapping[str, str],
) -> ArgoTarget:
    """The Argo Server to talk to (see the module docstring for the order)."""
    variable = token_env or cluster.argo_token_env
    token = _bearer(environ.get(variable))
    insecure = insecure or cluster.insecure_skip_verify or _truthy(environ.get("ARGO_INSECURE_SKIP_VERIFY"))
    verify: bool | str = not insecure
    cert = None
    if server:
        url, source = server.rstrip("/"), "--server"
    elif cluster.argo_server:
        url, source = cluster.argo_server.rstrip("/"), "cluster.argo_server"
    elif environ.get("ARGO_SERVER"):
        url, source = _server_from_env(environ["ARGO_SERVER"], environ), "ARGO_SERVER"
    else:
        url, kube_token, kube_verify, cert, source = _from_kubeconfig(cluster, environ)
        token = token or kube_token
        verify = False if insecure else kube_verify
    if "://" not in url:
        raise ClusterError(f"Argo Server {url!r} (from {source}) is not a URL; expected https://host:port")
    return ArgoTarget(
        server=url, namespace=resolve_namespace(cluster, namespace, environ), source=source, token=token,
        token_env=variable, verify=verify, cert=cert,
    )


class ArgoClient:
    """POSTs to the Argo Server's workflow API; every failure is one `ClusterError` line."""

    def __init__(self, target: ArgoTarget, *, timeout_s: float = TIMEOUT_S) -> None:
        self.target = target
        self.timeout_s = timeout_s
        headers = {"Authorization": f"Bearer {target.token}"} if target.token else {}
        self._client = httpx.Client(
            base_url=target.server, headers=headers, verify=target.verify, cert=target.cert, timeout=timeout_s
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    def create(self, workflow: Mapping[str, Any]) -> dict[str, Any]:
        """Create a Workflow (POST /api/v1/workflows/{ns}); returns the created object (with its name)."""
        ns = self.target.namespace
        return self._post(f"{API}/{ns}", {"namespace": ns, "workflow": dict(workflow)})

    def submit_template(
        self, name: str, parameters: Sequence[str], *, kind: str = "WorkflowTemplate", labels: str | None = None
    ) -> dict[str, Any]:
        """Submit a Workflow from an installed template (POST /api/v1/workflows/{ns}/submit); `parameters` are
        NAME=VALUE strings."""
        ns = self.target.namespace
        options: dict[str, Any] = {"parameters": list(parameters)}
        if labels:
            options["labels"] = labels
        body = {"namespace": ns, "resourceKind": kind, "resourceName": name, "submitOptions": options}
        return self._post(f"{API}/{ns}/submit", body)

    def _scrub(self, text: str) -> str:
        text = " ".join(text.split())
        return text.replace(self.target.token, "***") if self.target.token else text

    def _post(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        where = f"the Argo Server at {self.target.server} (from {self.target.source})"
        try:
            response = self._client.post(path, json=dict(body))
        except httpx.TimeoutException:
            raise ClusterError(f"{where} did not answer within {self.timeout_s:.0f}s") from None
        except httpx.HTTPError as exc:
            raise ClusterError(
                f"cannot reach {where}: {self._scrub(str(exc)) or type(exc).__name__}; check --server / ARGO_SERVER "
                "(or kubectl -n argo port-forward svc/argo-server 2746)"
            ) from None
        message = self._message(response)
        if response.status_code in (401, 403):
            raise ClusterError(
                f"{where} refused the credentials (HTTP {response.status_code}{': ' + message if message else ''}); "
                f"put a valid token in ${self.target.token_env} (e.g. from `argo auth token`) or --token-env VAR"
            )
        if response.status_code >= 400:
            raise ClusterError(f"{where} rejected the request (HTTP {response.status_code}): {message or 'no message'}")
        try:
            data = response.json()
        except ValueError:
            raise ClusterError(f"{where} answered HTTP {response.status_code} with a body that is not JSON") from None
        if not isinstance(data, dict):
            raise ClusterError(f"{where} answered a JSON {type(data).__name__}, expected an object")
        return data

    def _message(self, response: httpx.Response) -> str:
        try:
            data = response.json()
        except ValueError:
            return self._scrub(response.text)[:300]
        if isinstance(data, dict) and data.get("message"):
            return self._scrub(str(data["message"]))[:300]
        return ""


def created_name(created: Mapping[str, Any]) -> str:
    """The name the Argo Server gave the created Workflow."""
    name = (created.get("metadata") or {}).get("name")
    if not name:
        raise ClusterError("the Argo Server answered without the created workflow's metadata.name")
    return str(name)

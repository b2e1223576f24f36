"""A small Argo Server API client (httpx): create a Workflow, submit a WorkflowTemplate (docs/cluster.md,
"Where submit talks to": the server, namespace and token, and the kubeconfig route's auth mode).

    target = resolve_target(cfg.cluster, server=None, namespace=None, token_env=None, insecure=False,
                            environ=os.environ)
    with ArgoClient(target) as argo:
        created = argo.create(workflow_dict)                         # POST /api/v1/workflows/{ns}
        created = argo.submit_template("burnqed-iteration-2", ["root=s3://b/run"])   # POST .../{ns}/submit
    print(target.ui_link(created["metadata"]["name"]))

The token is never printed, logged or put in an error message; a refusal is one `ClusterError` line saying what to set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import httpx

from burnqed.cluster.kube import bearer, connect
from burnqed.config import ClusterConfig
from burnqed.config.digest import CHART_ROUTE
from burnqed.errors import ClusterError, ConfigError

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
    proxy: ServiceProxy | None = None  # set when reached through the Kubernetes API server's service proxy

    def ui_link(self, name: str) -> str:
        return f"{self.server}/workflows/{self.namespace}/{name}"


@dataclass(frozen=True, slots=True)
class ServiceProxy:
    """The Argo Server's Service as the API server's proxy path names it: NAMESPACE/[SCHEME:]NAME:PORT."""

    namespace: str
    scheme: str  # "http" or "https" ("" = http)
    name: str
    port: str

    @classmethod
    def parse(cls, text: str) -> ServiceProxy:
        namespace, sep, service = text.partition("/")
        parts = service.split(":")
        if not sep or not namespace or len(parts) not in (2, 3) or not all(parts):
            raise ConfigError(f"cluster.argo_service {text!r}: expected NAMESPACE/[SCHEME:]SERVICE:PORT, e.g. "
                              "argo/http:argo-workflows-server:2746")
        scheme = parts[0] if len(parts) == 3 else ""
        if scheme not in ("", "http", "https"):
            raise ConfigError(f"cluster.argo_service {text!r}: the scheme must be http or https")
        return cls(namespace, scheme, parts[-2], parts[-1])

    @property
    def path(self) -> str:
        service = f"{self.scheme}:{self.name}:{self.port}" if self.scheme else f"{self.name}:{self.port}"
        return f"/api/v1/namespaces/{self.namespace}/services/{service}/proxy"

    def __str__(self) -> str:
        return f"{self.namespace}/{self.scheme + ':' if self.scheme else ''}{self.name}:{self.port}"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def _server_from_env(raw: str, environ: Mapping[str, str]) -> str:
    if "://" not in raw:  # the argo CLI's ARGO_SERVER is host:port
        scheme = "http" if environ.get("ARGO_SECURE", "").strip().lower() == "false" else "https"
        raw = f"{scheme}://{raw}"
    return raw.rstrip("/") + environ.get("ARGO_BASE_HREF", "").rstrip("/")


def _from_kubeconfig(
    cluster: ClusterConfig, environ: Mapping[str, str]
) -> tuple[str, str | None, bool | str, tuple[str, str] | None, str, ServiceProxy]:
    """(proxied server URL, token, verify, client cert, description, service) from the kubeconfig's current
    context ($KUBECONFIG, else ~/.kube/config) or the in-cluster service account."""
    proxy = ServiceProxy.parse(cluster.argo_service)
    kube = connect(environ, prefix="no Argo Server given (--server, cluster.argo_server or ARGO_SERVER) and ")
    source = f"{kube.source.split(' (')[0]} ({kube.host}, Service {proxy})"
    return kube.host + proxy.path, kube.token, kube.verify, kube.cert, source, proxy


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
    """The Argo Server to talk to (the order: docs/cluster.md, "Where submit talks to")."""
    variable = token_env or cluster.argo_token_env
    token = bearer(environ.get(variable))
    insecure = insecure or cluster.insecure_skip_verify or _truthy(environ.get("ARGO_INSECURE_SKIP_VERIFY"))
    verify: bool | str = not insecure
    cert = None
    proxy = None
    if server:
        url, source = server.rstrip("/"), "--server"
    elif cluster.argo_server:
        url, source = cluster.argo_server.rstrip("/"), "cluster.argo_server"
    elif environ.get("ARGO_SERVER"):
        url, source = _server_from_env(environ["ARGO_SERVER"], environ), "ARGO_SERVER"
    else:
        url, kube_token, kube_verify, cert, source, proxy = _from_kubeconfig(cluster, environ)
        # the API server authenticates the proxied request and drops the header: an Argo token could never reach
        # the Argo Server this way, and the API server would refuse it
        token = kube_token
        verify = False if insecure else kube_verify
    if "://" not in url:
        raise ClusterError(f"Argo Server {url!r} (from {source}) is not a URL; expected https://host:port")
    return ArgoTarget(
        server=url, namespace=resolve_namespace(cluster, namespace, environ), source=source, token=token,
        token_env=variable, verify=verify, cert=cert, proxy=proxy,
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

    def template(self, name: str) -> dict[str, Any]:
        """The installed WorkflowTemplate `name` (GET /api/v1/workflow-templates/{ns}/{name}); a `ClusterError`
        naming the refusal when it cannot be read (404: not installed)."""
        path = f"/api/v1/workflow-templates/{self.target.namespace}/{name}"
        response = self._send("GET", path)
        if response.status_code == 404 and not _is_kube_status(_json(response)):
            raise ClusterError(f"{self.where} has no WorkflowTemplate {name} in namespace {self.target.namespace}: "
                               f"install the chart ({CHART_ROUTE}) or submit without --from-template")
        if response.status_code >= 400:
            raise ClusterError(self.refusal(response.status_code, self._message(response),
                                            _is_kube_status(_json(response))))
        data = _json(response)
        if not isinstance(data, dict):
            raise ClusterError(f"{self.where} answered the WorkflowTemplate {name} with something that is not a JSON "
                               "object")
        return data

    def _scrub(self, text: str) -> str:
        text = " ".join(text.split())
        return text.replace(self.target.token, "***") if self.target.token else text

    @property
    def where(self) -> str:
        return f"the Argo Server at {self.target.server} (from {self.target.source})"

    def _send(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> httpx.Response:
        try:
            return self._client.request(method, path, json=None if body is None else dict(body))
        except httpx.TimeoutException:
            raise ClusterError(f"{self.where} did not answer within {self.timeout_s:.0f}s") from None
        except httpx.HTTPError as exc:
            hint = ("check the kubeconfig's API server" if self.target.proxy else
                    "check --server / ARGO_SERVER (or kubectl -n argo port-forward svc/argo-workflows-server 2746 and "
                    "ARGO_SERVER=localhost:2746 ARGO_SECURE=false)")
            raise ClusterError(
                f"cannot reach {self.where}: {self._scrub(str(exc)) or type(exc).__name__}; {hint}"
            ) from None

    def probe(self, path: str, *, authorized: bool = True) -> Probe:
        """GET `path` and report the answer without judging it (`burnqed cluster check`); `authorized=False` sends
        no token. Only an unreachable server raises."""
        request = self._client.build_request("GET", path)
        if not authorized:  # the client sends its default header otherwise
            request.headers.pop("Authorization", None)
        try:
            response = self._client.send(request)
        except httpx.TimeoutException:
            raise ClusterError(f"{self.where} did not answer within {self.timeout_s:.0f}s") from None
        except httpx.HTTPError as exc:
            raise ClusterError(f"cannot reach {self.where}: {self._scrub(str(exc)) or type(exc).__name__}") from None
        data = _json(response)
        return Probe(response.status_code, self._message(response), _is_kube_status(data),
                     data if isinstance(data, dict) else {})

    def _post(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        response = self._send("POST", path, body)
        if response.status_code >= 400:
            raise ClusterError(self.refusal(response.status_code, self._message(response),
                                            _is_kube_status(_json(response))))
        data = _json(response)
        if data is None:
            raise ClusterError(f"{self.where} answered HTTP {response.status_code} with a body that is not JSON")
        if not isinstance(data, dict):
            raise ClusterError(f"{self.where} answered a JSON {type(data).__name__}, expected an object")
        return data

    def refusal(self, status: int, message: str, from_kubernetes: bool) -> str:
        """One line saying who refused a request and what to set (docs/cluster.md, "Where submit talks to")."""
        said = f"HTTP {status}{': ' + message if message else ''}"
        target, proxy = self.target, self.target.proxy
        if proxy is not None and from_kubernetes:
            return _proxy_refusal(proxy, status, message, said, target.token_env)
        if proxy is not None and status == 401:
            secure = "true" if proxy.scheme == "https" else "false"
            return (f"{self.where} refused the request ({said}): through the Kubernetes API proxy the Argo Server "
                    "gets no token (the API server drops the Authorization header), so this route works only when "
                    "it runs in server auth mode (argo-helm: server.authModes: [server]); otherwise reach it "
                    f"directly with a token in ${target.token_env}: kubectl -n {proxy.namespace} port-forward "
                    f"svc/{proxy.name} {proxy.port}, then ARGO_SERVER=localhost:{proxy.port} ARGO_SECURE={secure}")
        if proxy is not None and status == 403:
            return (f"{self.where} refused the request ({said}): in server auth mode it acts as its own "
                    f"ServiceAccount, which needs RBAC on workflows in namespace {target.namespace} (argo-helm: "
                    "controller.workflowNamespaces)")
        if status == 401 and target.token is None:
            return (f"{self.where} refused the credentials ({said}): no token was sent; put one in "
                    f"${target.token_env} (e.g. from `argo auth token`) or --token-env VAR (Argo's default client "
                    "auth mode needs one)")
        if status == 401:
            return (f"{self.where} refused the credentials ({said}); put a valid token in ${target.token_env} "
                    "(e.g. from `argo auth token`) or --token-env VAR")
        if status == 403:
            return (f"{self.where} refused the credentials ({said}): the account of the token in "
                    f"${target.token_env} may not do this in namespace {target.namespace}; bind it to a Role like "
                    "burnqed-submitter (manifests/20-rbac.yaml)")
        return f"{self.where} rejected the request (HTTP {status}): {message or 'no message'}"

    def _message(self, response: httpx.Response) -> str:
        data = _json(response)
        if data is None:
            return self._scrub(response.text)[:300]
        if isinstance(data, dict) and data.get("message"):
            return self._scrub(str(data["message"]))[:300]
        return ""


@dataclass(frozen=True, slots=True)
class Probe:
    """What a GET answered: status, its message, whether the API server (not the Argo Server) answered, the body."""

    status: int
    message: str
    from_kubernetes: bool
    body: dict[str, Any]


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _is_kube_status(data: Any) -> bool:
    """A Kubernetes `Status` object: the API server's own answer, not one it proxied."""
    return isinstance(data, dict) and data.get("kind") == "Status" and data.get("apiVersion") == "v1"


def created_name(created: Mapping[str, Any]) -> str:
    """The name the Argo Server gave the created Workflow."""
    name = (created.get("metadata") or {}).get("name")
    if not name:
        raise ClusterError("the Argo Server answered without the created workflow's metadata.name")
    return str(name)


def _proxy_refusal(proxy: ServiceProxy, status: int, message: str, said: str, token_env: str) -> str:
    """`ArgoClient.refusal` when the Kubernetes API server itself answered on the way through its service proxy."""
    if status == 404:
        return (f"the Kubernetes API server has no Service {proxy.name} in namespace {proxy.namespace} "
                f"(cluster.argo_service = {proxy}; {said}): argo-helm names it "
                "<release>-argo-workflows-server (`kubectl get svc -A -l app.kubernetes.io/component=server` "
                "lists it): set cluster.argo_service to NAMESPACE/http:NAME:2746, or ARGO_SERVER")
    if status == 403:
        return (f"the Kubernetes API server refused to proxy to Service {proxy} ({said}): the kubeconfig's "
                f"user needs get and create on services/proxy in namespace {proxy.namespace}; or reach the "
                f"Argo Server directly with ARGO_SERVER and ${token_env}")
    if status == 401:
        return (f"the Kubernetes API server refused the kubeconfig's credentials ({said}): renew them "
                "(e.g. your cloud's get-credentials command)")
    if "no endpoints available" in message:
        return (f"the Kubernetes API server cannot reach Service {proxy} ({said}): is the Argo Server "
                f"running? (kubectl -n {proxy.namespace} get pods -l app.kubernetes.io/component=server)")
    return (f"the Kubernetes API server could not reach the Argo Server through Service {proxy} ({said}): "
            "check the scheme and port in cluster.argo_service: argo-helm serves plain HTTP (http:) on 2746 "
            "unless server.secure is true (https:)")

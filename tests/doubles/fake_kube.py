"""A fake Kubernetes API server (a real threaded HTTP server on 127.0.0.1) for `submit`'s kubeconfig route and
`burnqed cluster check`, with a fake Argo Server behind its service proxy. As strict as the real peers where we
rely on them:

- every request needs `Authorization: Bearer <token>` (else 401), GETs only for objects; a missing object or
  resource is a 404 `Status` like the API server's (`secrets "x" not found`); paths in `forbidden` are a 403
  `Status`; lists honour `labelSelector` (k=v,…) and list every namespace at /api/v1/PLURAL; nothing else is
  answered;
- `/api/v1/namespaces/NS/services/[SCHEME:]NAME:PORT/proxy/REST` forwards to the Argo Server registered for that
  Service **without the Authorization header** (the API server drops it after authenticating); an unknown Service
  is a 404 `Status`, one with no server (no endpoints) or asked on another port or scheme than it serves a 503
  ("error trying to reach service: …");
- the Argo Server follows its gatekeeper (server/auth/gatekeeper.go, mode.go): a request with a bearer token uses
  client mode when enabled, one without uses server mode when enabled, otherwise 401 `{"code": 16, "message":
  "token not valid. see …"}`. In client mode /api/v1/userinfo answers 200 for any token (Argo does not validate it
  there); listing templates or creating a workflow goes to Kubernetes with the token, so only `valid_tokens` pass;
  paths and bodies the real server refuses are refused by `tests/doubles/fake_argo.argo_refusal` (which says where it
  is more lenient).

More lenient than the real API server, and why: only GET on objects and the service proxy are served (burnqed
reads, it never writes through the API server); no RBAC beyond the `forbidden` paths (tests list what a missing
permission would refuse); field selectors, watches, resourceVersion and pagination are not modelled (burnqed does
not use them); a Service's endpoints are `services[...]` being set or None, not real Endpoints objects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.doubles.fake_argo import argo_refusal
from tests.doubles.json_http import serve_json

PROXY = re.compile(r"^/api/v1/namespaces/([^/]+)/services/([^/]+)/proxy(/.*)?$")
KINDS = {"serviceaccounts": "ServiceAccount", "secrets": "Secret", "configmaps": "ConfigMap",
         "priorityclasses": "PriorityClass", "nodes": "Node", "workflowtemplates": "WorkflowTemplate",
         "namespaces": "Namespace", "services": "Service"}
NO_TOKEN = "token not valid. see https://argo-workflows.readthedocs.io/en/latest/faq/"


def split_service(text: str) -> tuple[str, str, str]:
    """[SCHEME:]NAME[:PORT] -> (scheme, name, port); http and 80 when left out, as the API server reads it."""
    parts = text.split(":")
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    if len(parts) == 2 and parts[0] in ("http", "https"):
        return parts[0], parts[1], "80"
    return "http", parts[0], parts[1] if len(parts) == 2 else "80"


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


@dataclass
class FakeArgoServer:
    """The Argo Server behind the proxy (or reached directly)."""

    auth_modes: set[str] = field(default_factory=lambda: {"client"})
    valid_tokens: set[str] = field(default_factory=set)
    templates: list[str] = field(default_factory=list)  # WorkflowTemplate names in the namespace
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    created: list[dict[str, Any]] = field(default_factory=list)  # bodies of accepted POSTs

    def handle(self, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> tuple[int, dict[str, Any]]:
        self.requests.append((method, path, headers))
        auth = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
        if auth.startswith("Bearer ") and "client" in self.auth_modes:
            mode, token = "client", auth.removeprefix("Bearer ")
        elif "server" in self.auth_modes:
            mode, token = "server", ""
        else:
            return 401, {"code": 16, "message": NO_TOKEN}
        if (refused := argo_refusal(method, path, body, self.templates)) is not None:
            return refused  # the gateway decodes, the handler validates (tests/doubles/fake_argo.py)
        route = urlsplit(path).path
        if method == "GET" and route == "/api/v1/userinfo":
            return 200, ({"serviceAccountName": "argo-workflows-server", "serviceAccountNamespace": "argo"}
                         if mode == "server" else {})
        if mode == "client" and token not in self.valid_tokens:  # the Kubernetes call with the user's token fails
            return 401, {"code": 16, "message": "Unauthorized"}
        if method == "GET" and (found := re.match(r"^/api/v1/workflow-templates/([^/]+)$", route)):
            return 200, {"metadata": {}, "items": [{"metadata": {"name": n, "namespace": found.group(1)}}
                                                   for n in self.templates] or None}
        if method == "POST" and re.match(r"^/api/v1/workflows/[^/]+(/submit)?$", route):
            self.created.append(json.loads(body or b"null"))
            return 200, {"metadata": {"name": "burnqed-iteration-2-x7k2p", "namespace": "burnqed"}}
        if method == "GET" and (found := re.match(r"^/api/v1/workflow-templates/([^/]+)/([^/]+)$", route)):
            if found.group(2) in self.templates:
                return 200, {"metadata": {"name": found.group(2), "namespace": found.group(1)}, "spec": {}}
            return 404, {"code": 5, "message": f'workflowtemplates.argoproj.io "{found.group(2)}" not found'}
        return 404, {"code": 5, "message": "Not Found"}


@dataclass
class FakeKube:
    """The API server's state; tests edit `objects` (path -> object) and `services` between requests."""

    url: str
    token: str
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    forbidden: set[str] = field(default_factory=set)
    services: dict[str, FakeArgoServer | None] = field(default_factory=dict)  # "NS/[SCHEME:]NAME:PORT" -> server
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    kubeconfig: Path = Path()

    def add(self, obj: dict[str, Any]) -> None:
        """Store an object at its API path (namespaced or cluster-scoped by kind)."""
        kind, meta = obj["kind"], obj["metadata"]
        plural = next(p for p, k in KINDS.items() if k == kind)
        group = {"PriorityClass": "/apis/scheduling.k8s.io/v1", "WorkflowTemplate": "/apis/argoproj.io/v1alpha1"}
        prefix = group.get(kind, "/api/v1")
        scope = f"/namespaces/{meta['namespace']}" if "namespace" in meta and kind != "Namespace" else ""
        self.objects[f"{prefix}{scope}/{plural}/{meta['name']}"] = obj

    def remove(self, kind: str, name: str) -> None:
        plural = next(p for p, k in KINDS.items() if k == kind)
        (path,) = [p for p in self.objects if p.endswith(f"/{plural}/{name}")]
        del self.objects[path]

    def answer(self, method: str, raw_path: str, headers: dict[str, str],
               body: bytes = b"") -> tuple[int, dict[str, Any]]:
        headers = {key.title(): value for key, value in headers.items()}  # header names are case-insensitive
        self.requests.append((method, raw_path, headers))
        if headers.get("Authorization") != f"Bearer {self.token}":
            return 401, status(401, "Unauthorized", "Unauthorized")
        path = urlsplit(raw_path).path
        if found := PROXY.match(path):
            return self._proxy(method, raw_path, found, headers, body)
        if method != "GET":
            return 405, status(405, "MethodNotAllowed", "the server does not allow this method on the requested "
                                                        "resource")
        return self._get(path, raw_path)

    def _proxy(self, method: str, raw_path: str, found: re.Match[str], headers: dict[str, str],
               body: bytes) -> tuple[int, dict[str, Any]]:
        """A request through the API server's service proxy: forwarded to the registered service, if it answers."""
        path = urlsplit(raw_path).path
        namespace, service, rest = found.groups()
        if path in self.forbidden or f"{namespace}/{service}" in self.forbidden:
            return 403, status(403, "Forbidden", f'services "{service}" is forbidden: User "me" cannot get '
                               f'resource "services/proxy" in API group "" in the namespace "{namespace}"')
        scheme, name, port = split_service(service)
        registered = {split_service(key.split("/", 1)[1])[1]: key for key in self.services
                      if key.split("/", 1)[0] == namespace}
        if name not in registered:
            return 404, status(404, "NotFound", f'services "{name}" not found')
        server = self.services[registered[name]]
        if server is None:
            return 503, status(503, "ServiceUnavailable", f'no endpoints available for service "{service}"')
        served_scheme, _, served_port = split_service(registered[name].split("/", 1)[1])
        if port != served_port:
            return 503, status(503, "ServiceUnavailable", f"error trying to reach service: dial tcp "
                               f"10.0.0.5:{port}: connect: connection refused")
        if scheme != served_scheme:
            return 503, status(503, "ServiceUnavailable", "error trying to reach service: " + (
                "tls: first record does not look like a TLS handshake" if scheme == "https" else "EOF"))
        query = urlsplit(raw_path).query
        forwarded = {k: v for k, v in headers.items() if k.lower() != "authorization"}
        return server.handle(method, (rest or "/") + (f"?{query}" if query else ""), forwarded, body)

    def _get(self, path: str, raw_path: str) -> tuple[int, dict[str, Any]]:
        """A GET of one object or a list of a kind (one namespace or all, optionally by label selector)."""
        if path in self.forbidden:
            return 403, status(403, "Forbidden", f"{path} is forbidden: User \"me\" cannot get it")
        if path in self.objects:
            return 200, self.objects[path]
        plural = path.rsplit("/", 1)[-1]
        prefix = path.rsplit("/", 1)[0]
        listed = [obj for key, obj in sorted(self.objects.items())
                  if key.rsplit("/", 1)[0] == path  # one namespace, or a cluster-scoped kind
                  or (re.fullmatch(rf"{re.escape(prefix)}/namespaces/[^/]+/{plural}", key.rsplit("/", 1)[0])
                      is not None)]  # every namespace (GET /api/v1/services)
        selector = dict(pair.split("=", 1) for pair in
                        (parse_qs(urlsplit(raw_path).query).get("labelSelector") or [""])[0].split(",") if pair)
        listed = [obj for obj in listed if selector.items() <= (obj["metadata"].get("labels") or {}).items()]
        if plural in KINDS:
            return 200, {"kind": f"{KINDS[plural]}List", "apiVersion": "v1", "metadata": {}, "items": listed}
        parent = path.rsplit("/", 2)
        if len(parent) == 3 and parent[1] in KINDS:
            return 404, status(404, "NotFound", f'{parent[1]} "{parent[2]}" not found')
        return 404, status(404, "NotFound", "the server could not find the requested resource")


@contextmanager
def serve_kube(tmp: Path, token: str = "kube-token-5e6f7a8b") -> Iterator[FakeKube]:
    """A running fake API server and a kubeconfig (tmp/kubeconfig) pointing at it with `token`."""
    state: FakeKube

    def answer(method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        return state.answer(method, path, headers, body)

    with serve_json(answer) as url:
        state = FakeKube(url=url, token=token, kubeconfig=tmp / "kubeconfig")
        state.kubeconfig.write_text(f"""
apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster: {{server: "{url}"}}
users:
- name: me
  user: {{token: {token}}}
contexts:
- name: lab
  context: {{cluster: lab, user: me, namespace: ignored}}
current-context: lab
""")
        yield state


@contextmanager
def serve_argo(argo: FakeArgoServer) -> Iterator[str]:
    """`argo` on its own address (the direct route: ARGO_SERVER); yields its base URL."""
    with serve_json(argo.handle) as url:
        yield url

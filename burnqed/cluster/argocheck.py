"""The Argo Server's rows of `burnqed cluster check` (`burnqed.cluster.preflight`): whether it answers where submit
looks for it, and whether its auth mode lets submit's request through."""

from __future__ import annotations

from dataclasses import dataclass, replace

from burnqed.cluster.argo import ArgoClient, ArgoTarget
from burnqed.cluster.checkreport import Rows, Verdict
from burnqed.cluster.kubereader import ClusterReader
from burnqed.errors import ClusterError

ARGO_SERVER_LABEL = "app.kubernetes.io/name=argo-workflows-server"  # argo-helm's Service label


@dataclass(frozen=True, slots=True)
class ArgoAnswer:
    """The Argo Server's answers to the preflight's probes (`probe_argo`)."""

    where: str  # "the Argo Server at URL (from SOURCE)"
    via_proxy: bool
    token_env: str
    has_token: bool
    unreachable: str = ""  # the transport error, when it could not be reached
    anonymous: tuple[int, str, bool] | None = None  # GET /api/v1/userinfo without a token: status, message, kube?
    authorized: tuple[int, str] | None = None  # GET /api/v1/workflow-templates/{ns} with the token (direct route)
    refusal: str = ""  # the fix `submit` would print for the anonymous answer


def probe_argo(target: ArgoTarget, *, timeout_s: float = 15.0) -> ArgoAnswer:
    """Ask the Argo Server what its gatekeeper (server/auth/gatekeeper.go) lets through: GET /api/v1/userinfo with no
    token answers 200 only in server auth mode and 401 in client mode (Argo validates no token there); with a token
    on the direct route, listing the namespace's WorkflowTemplates shows whether Kubernetes accepts it. Through the
    API server's proxy the kubeconfig's credentials are sent and dropped by the API server, as for `submit`."""
    via_proxy = target.proxy is not None
    with ArgoClient(target, timeout_s=timeout_s) as argo:
        base = ArgoAnswer(where=argo.where, via_proxy=via_proxy, token_env=target.token_env,
                          has_token=target.token is not None and not via_proxy)
        try:
            anonymous = argo.probe("/api/v1/userinfo", authorized=via_proxy)
            authorized = None
            if base.has_token and not anonymous.from_kubernetes and anonymous.status in (200, 401):
                answer = argo.probe(f"/api/v1/workflow-templates/{target.namespace}")
                authorized = (answer.status, answer.message)
        except ClusterError as exc:
            return replace(base, unreachable=str(exc))
        refusal = (argo.refusal(anonymous.status, anonymous.message, anonymous.from_kubernetes)
                   if anonymous.status >= 400 else "")
    return replace(base, anonymous=(anonymous.status, anonymous.message, anonymous.from_kubernetes),
                   authorized=authorized, refusal=refusal)


def _argo_services(reader: ClusterReader) -> list[str]:
    """argo-helm's Argo Server Services anywhere in the cluster, as NAMESPACE/http:NAME:PORT (best effort)."""
    try:
        listed = reader.items("Service", None, ARGO_SERVER_LABEL)
    except ClusterError:
        return []
    found = []
    for item in (listed.found or {}).get("items") or []:
        meta, ports = item.get("metadata") or {}, (item.get("spec") or {}).get("ports") or [{}]
        found.append(f"{meta.get('namespace')}/http:{meta.get('name')}:{ports[0].get('port', 2746)}")
    return found


def check_argo(rows: Rows, reader: ClusterReader, answer: ArgoAnswer | None) -> None:
    if answer is None:
        return
    what = "Argo Server"
    if answer.unreachable:
        rows.add(what, Verdict.MISSING, answer.unreachable, "set --server / ARGO_SERVER, or cluster.argo_service")
        return
    status, message, from_kubernetes = answer.anonymous or (0, "no answer", False)
    said = f"HTTP {status}{': ' + message if message else ''}"
    if from_kubernetes:
        fix = answer.refusal
        if status == 404:
            services = _argo_services(reader)
            if services:
                fix += f" - found: {', '.join(services)}"
        rows.add(what, Verdict.MISSING, f"{answer.where}: the Kubernetes API server answered {said}", fix)
        return
    if status == 200:
        rows.add(what, Verdict.OK, f"{answer.where} answers")
        _check_server_mode(rows, answer)
        return
    if status != 401:
        rows.add(what, Verdict.MISSING, f"{answer.where} answered {said} to GET /api/v1/userinfo",
                 "is this the Argo Server? check --server / ARGO_SERVER / cluster.argo_service")
        return
    rows.add(what, Verdict.OK, f"{answer.where} answers")
    _check_client_mode(rows, answer, said)


def _check_server_mode(rows: Rows, answer: ArgoAnswer) -> None:
    """The auth-mode row of an Argo Server that answered an anonymous request (server mode on)."""
    code, text = answer.authorized or (200, "")
    if answer.has_token and code != 200:  # submit sends the token: with client mode on, Kubernetes judges it
        rows.add("Argo auth mode", Verdict.MISSING, f"server mode is on, but the token in ${answer.token_env} "
                 f"(which submit sends) was refused listing WorkflowTemplates (HTTP {code}"
                 f"{': ' + text if text else ''})",
                 f"fix the token in ${answer.token_env}, or unset it to use server mode")
    else:
        rows.add("Argo auth mode", Verdict.OK, "server mode is on: a request without a token acts as the Argo "
                 "Server's own ServiceAccount" + (" (the kubeconfig route works)" if answer.via_proxy else ""))


def _check_client_mode(rows: Rows, answer: ArgoAnswer, said: str) -> None:
    """The auth-mode row of an Argo Server that refused an anonymous request with 401 (client mode only)."""
    if answer.via_proxy:
        rows.add("Argo auth mode", Verdict.MISSING, f"client mode only ({said}): through the Kubernetes API proxy "
                 "no token reaches it", answer.refusal)
    elif not answer.has_token:
        rows.add("Argo auth mode", Verdict.MISSING, f"client mode ({said}) and no token in ${answer.token_env}",
                 f"put a token in ${answer.token_env} (e.g. from `argo auth token`) or --token-env VAR")
    elif answer.authorized is None or answer.authorized[0] != 200:
        code, text = answer.authorized or (0, "")
        rows.add("Argo auth mode", Verdict.MISSING, f"client mode; the token in ${answer.token_env} was refused "
                 f"listing WorkflowTemplates (HTTP {code}{': ' + text if text else ''})",
                 f"put a valid token in ${answer.token_env} whose account may create workflows here "
                 "(Role burnqed-submitter in manifests/20-rbac.yaml)")
    else:
        rows.add("Argo auth mode", Verdict.OK, f"client mode; the token in ${answer.token_env} is accepted")

"""`burnqed submit` against a local HTTP server standing in for the Argo Server and a fake Kubernetes API holding the
namespace's config ConfigMap: the request's path, bearer token and body; the workflow is rendered from the
ConfigMap's configuration (a differing local one is refused with both digests); --dry-run sends nothing; a refused
token or an unreachable server is one error line and exit code 1."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from burnqed.cluster.argo import ArgoTarget, resolve_target
from burnqed.cluster.render import render_templates, render_workflow
from burnqed.cluster.yamlio import load_documents
from burnqed.config import ClusterConfig, Config
from burnqed.config.digest import DIGEST_ANNOTATION, pod_config_digest
from tests.cluster.conftest import WORKFLOWS
from tests.doubles.fake_kube import FakeArgoServer, FakeKube
from tests.processes import cli

TOKEN = "tok-3f9a1c0d7e"  # a fake token; the tests check that it never shows up


def config_map(namespace: str, toml: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "burnqed-config", "namespace": namespace},
            "data": {"burnqed.toml": toml}}


@pytest.fixture(autouse=True)
def pods_config(fake_kube: FakeKube) -> FakeKube:
    """The namespaces' config ConfigMaps (the embedded defaults: an empty file), read through the kubeconfig."""
    fake_kube.add(config_map("burnqed", ""))
    fake_kube.add(config_map("research", '[storage]\nroot = "s3://bucket/exp"\n'))
    return fake_kube


def test_submit_iteration_posts_the_workflow_with_the_token(fake_argo) -> None:
    result = cli("submit", "iteration", "--iter", "2", "--root", "s3://bucket/run", "--server", fake_argo.url,
                 env={"ARGO_TOKEN": TOKEN})
    assert result.returncode == 0, result.stderr
    (request,) = fake_argo.requests
    assert request.path == "/api/v1/workflows/burnqed"
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    expected = render_workflow(Config(), "iteration", WORKFLOWS, iteration=2, parameters={"root": "s3://bucket/run"})
    assert request.body == {"namespace": "burnqed", "workflow": expected}
    assert request.body["workflow"]["metadata"]["generateName"] == "burnqed-iteration-2-"
    assert result.stdout.splitlines() == [
        "submitted burnqed-iteration-2-x7k2p (namespace burnqed)",
        f"{fake_argo.url}/workflows/burnqed/burnqed-iteration-2-x7k2p",
    ]
    assert TOKEN not in result.stdout + result.stderr


def test_server_namespace_and_token_from_the_argo_environment(fake_argo) -> None:
    host = fake_argo.url.removeprefix("http://")
    env = {"ARGO_SERVER": host, "ARGO_SECURE": "false", "ARGO_NAMESPACE": "research",
           "ARGO_TOKEN": f"Bearer {TOKEN}"}  # the root comes from research's ConfigMap
    result = cli("submit", "iteration", env=env)
    assert result.returncode == 0, result.stderr
    (request,) = fake_argo.requests
    assert request.path == "/api/v1/workflows/research"
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"  # the argo CLI's "Bearer ..." form is accepted
    workflow = request.body["workflow"]
    assert workflow["metadata"]["namespace"] == "research"
    values = {p["name"]: p["value"] for p in workflow["spec"]["arguments"]["parameters"]}
    assert values == {"root": "s3://bucket/exp", "run": "bucket-exp", "iteration": "0"}
    assert result.stdout.splitlines()[-1] == f"{fake_argo.url}/workflows/research/burnqed-iteration-2-x7k2p"


def test_token_from_another_variable(fake_argo) -> None:
    result = cli("submit", "eval", "--model", "s3://m/prover", "--root", "s3://b/r", "--server", fake_argo.url,
                 "--token-env", "CI_ARGO_TOKEN", env={"CI_ARGO_TOKEN": TOKEN, "ARGO_TOKEN": "other"})
    assert result.returncode == 0, result.stderr
    (request,) = fake_argo.requests
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    values = {p["name"]: p["value"] for p in request.body["workflow"]["spec"]["arguments"]["parameters"]}
    assert values == {"root": "s3://b/r", "model": "s3://m/prover"}


def test_no_token_no_header(fake_argo) -> None:
    result = cli("submit", "smoke", "--root", "s3://b/smoke", "--server", fake_argo.url)
    assert result.returncode == 0, result.stderr
    assert "Authorization" not in fake_argo.requests[0].headers


def test_dry_run_prints_the_workflow_and_sends_nothing(fake_argo) -> None:
    result = cli("submit", "iteration", "--iter", "2", "--root", "s3://bucket/run", "--server", fake_argo.url,
                 "--dry-run", env={"ARGO_TOKEN": TOKEN})
    assert result.returncode == 0, result.stderr
    assert fake_argo.requests == []
    (doc,) = load_documents(result.stdout)
    assert doc == render_workflow(Config(), "iteration", WORKFLOWS, iteration=2, parameters={"root": "s3://bucket/run"})
    assert result.stdout.startswith("# POST /api/v1/workflows/burnqed (dry run: rendered from the local configuration, "
                                    "not compared with the namespace's ConfigMap)\n")
    assert TOKEN not in result.stdout + result.stderr


def test_from_template_submits_the_installed_template(fake_argo) -> None:
    (installed,) = [d.doc for d in render_templates(Config(), ["iteration"], WORKFLOWS) if d.name.endswith("-1")]
    fake_argo.templates["burnqed-iteration-1"] = installed
    result = cli("submit", "iteration", "--iter", "1", "--root", "s3://bucket/run", "--server", fake_argo.url,
                 "--from-template", env={"ARGO_TOKEN": TOKEN})
    assert result.returncode == 0, result.stderr
    get, request = fake_argo.requests
    assert (get.method, get.path) == ("GET", "/api/v1/workflow-templates/burnqed/burnqed-iteration-1")
    assert request.path == "/api/v1/workflows/burnqed/submit"
    assert request.body == {
        "namespace": "burnqed", "resourceKind": "WorkflowTemplate", "resourceName": "burnqed-iteration-1",
        "submitOptions": {"parameters": ["root=s3://bucket/run", "run=bucket-run", "iteration=1"]},
    }


@pytest.mark.slow
@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_token_is_one_clear_error(fake_argo, status: int) -> None:
    fake_argo.status = status
    fake_argo.reply = {"code": 16, "message": f"token not valid: {TOKEN[:6]}... rejected"}
    result = cli("submit", "iteration", "--root", "s3://b/r", "--server", fake_argo.url,
                 env={"ARGO_TOKEN": TOKEN})
    assert result.returncode == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: the Argo Server at {fake_argo.url} (from --server) refused the credentials "
                           f"(HTTP {status}: token not valid")
    assert "$ARGO_TOKEN" in line
    assert TOKEN not in result.stdout + result.stderr


def test_an_unreachable_server_is_one_clear_error() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = cli("submit", "iteration", "--root", "s3://b/r", "--server", f"http://127.0.0.1:{port}",
                 env={"ARGO_TOKEN": TOKEN})
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: cannot reach the Argo Server at http://127.0.0.1:{port} (from --server):")
    assert TOKEN not in result.stdout + result.stderr


def test_other_refusals_carry_the_servers_message(fake_argo) -> None:
    fake_argo.status = 409
    fake_argo.reply = {"code": 6, "message": "workflows.argoproj.io \"x\" already exists"}
    result = cli("submit", "smoke", "--root", "s3://b/r", "--server", fake_argo.url)
    assert result.returncode == 1
    assert result.stderr.strip() == (f"error: the Argo Server at {fake_argo.url} (from --server) rejected the request "
                                     "(HTTP 409): workflows.argoproj.io \"x\" already exists")


def test_no_server_and_no_kubeconfig(tmp_path) -> None:
    result = cli("submit", "iteration", "--root", "s3://b/r", env={"KUBECONFIG": str(tmp_path / "none")})
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()  # submit reads the ConfigMap first, through the kubeconfig
    assert line.startswith("error: cannot read the namespace's ConfigMap, the configuration the pods read (submit "
                           "renders from it; --dry-run does not): no usable kubeconfig")


def test_the_kubeconfig_route_reaches_argo_helms_server_in_server_auth_mode(fake_kube) -> None:
    argo = FakeArgoServer(auth_modes={"server"})
    fake_kube.services["argo/http:argo-workflows-server:2746"] = argo  # argo-helm's default Service
    result = cli("submit", "smoke", "--root", "s3://b/r")
    assert result.returncode == 0, result.stderr
    (request,) = [r for r in fake_kube.requests if r[0] == "POST"]
    assert request[1] == ("/api/v1/namespaces/argo/services/http:argo-workflows-server:2746/proxy"
                          "/api/v1/workflows/burnqed")
    assert request[2]["Authorization"] == f"Bearer {fake_kube.token}"  # the API server authenticates us ...
    ((method, path, headers),) = argo.requests
    assert (method, path) == ("POST", "/api/v1/workflows/burnqed")
    assert "authorization" not in {k.lower() for k in headers}  # ... and the Argo Server never sees a token
    proxy = f"{fake_kube.url}/api/v1/namespaces/argo/services/http:argo-workflows-server:2746/proxy"
    assert result.stdout.splitlines()[-1] == f"{proxy}/workflows/burnqed/burnqed-iteration-2-x7k2p"
    assert fake_kube.token not in result.stdout + result.stderr


def test_the_kubeconfig_route_in_client_auth_mode_says_what_to_set(fake_kube) -> None:
    fake_kube.services["argo/http:argo-workflows-server:2746"] = FakeArgoServer(auth_modes={"client"},
                                                                              valid_tokens={fake_kube.token})
    result = cli("submit", "smoke", "--root", "s3://b/r", env={"ARGO_TOKEN": TOKEN})
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line == (
        f"error: the Argo Server at {fake_kube.url}/api/v1/namespaces/argo/services/http:argo-workflows-server:2746/"
        f"proxy (from kubeconfig ({fake_kube.url}, Service argo/http:argo-workflows-server:2746)) refused the request "
        "(HTTP 401: token not valid. see https://argo-workflows.readthedocs.io/en/latest/faq/): through the "
        "Kubernetes API proxy the Argo Server gets no token (the API server drops the Authorization header), so "
        "this route works only when it runs in server auth mode (argo-helm: server.authModes: [server]); otherwise "
        "reach it directly with a token in $ARGO_TOKEN: kubectl -n argo port-forward svc/argo-workflows-server "
        "2746, then ARGO_SERVER=localhost:2746 ARGO_SECURE=false"
    )
    assert TOKEN not in result.stdout + result.stderr and fake_kube.token not in result.stdout + result.stderr


@pytest.mark.slow
def test_a_missing_service_or_a_forbidden_proxy_is_the_api_servers_answer(fake_kube) -> None:
    result = cli("submit", "smoke", "--root", "s3://b/r",
                 "--set", "cluster.argo_service=argo/https:argo-server:2746")
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: the Kubernetes API server has no Service argo-server in namespace argo "
                           "(cluster.argo_service = argo/https:argo-server:2746; HTTP 404: services \"argo-server\" "
                           "not found): argo-helm names it <release>-argo-workflows-server")
    assert "set cluster.argo_service to NAMESPACE/http:NAME:2746" in line
    fake_kube.services["argo/http:argo-workflows-server:2746"] = FakeArgoServer(auth_modes={"server"})
    fake_kube.forbidden.add("argo/http:argo-workflows-server:2746")
    result = cli("submit", "smoke", "--root", "s3://b/r")
    assert result.returncode == 1
    assert "refused to proxy to Service argo/http:argo-workflows-server:2746 (HTTP 403: services" in result.stderr
    assert "needs get and create on services/proxy in namespace argo" in result.stderr
    fake_kube.forbidden.clear()
    result = cli("submit", "smoke", "--root", "s3://b/r",
                 "--set", "cluster.argo_service=argo/https:argo-workflows-server:2746")
    assert result.returncode == 1
    assert ("could not reach the Argo Server through Service argo/https:argo-workflows-server:2746 (HTTP 503: error "
            "trying to reach service: tls: first record does not look like a TLS handshake): check the scheme and "
            "port in cluster.argo_service") in result.stderr
    fake_kube.services["argo/http:argo-workflows-server:2746"] = None
    result = cli("submit", "smoke", "--root", "s3://b/r")
    assert result.returncode == 1
    assert "cannot reach Service argo/http:argo-workflows-server:2746 (HTTP 503: no endpoints" in result.stderr
    assert "is the Argo Server running?" in result.stderr


def test_no_token_sent_is_said_so(fake_argo) -> None:
    fake_argo.status = 401
    fake_argo.reply = {"code": 16, "message": "token not valid. see https://argo-workflows.readthedocs.io/en/latest/faq/"}
    result = cli("submit", "smoke", "--root", "s3://b/r", "--server", fake_argo.url)
    assert result.returncode == 1
    assert result.stderr.strip().endswith("no token was sent; put one in $ARGO_TOKEN (e.g. from `argo auth token`) "
                                          "or --token-env VAR (Argo's default client auth mode needs one)")


def test_a_bad_argo_service_is_one_line(fake_kube) -> None:
    result = cli("submit", "smoke", "--root", "s3://b/r", "--set", "cluster.argo_service=argo-server:2746")
    assert result.returncode == 2  # a configuration error
    assert result.stderr.strip() == ("error: cluster.argo_service 'argo-server:2746': expected "
                                     "NAMESPACE/[SCHEME:]SERVICE:PORT, e.g. argo/http:argo-workflows-server:2746")


def test_missing_or_local_root_is_an_input_error_and_nothing_is_sent(fake_argo) -> None:
    result = cli("submit", "iteration", "--server", fake_argo.url)
    assert result.returncode == 2
    assert result.stderr.strip() == ("error: workflow iteration needs a value for root: pass --param NAME=VALUE "
                                     "(or --root; storage.root is a local path)")
    result = cli("submit", "iteration", "--root", "file:///data/runs", "--server", fake_argo.url)
    assert result.returncode == 2
    assert "is a local path the pods cannot share" in result.stderr
    result = cli("submit", "eval", "--root", "s3://b/r", "-p", "modle=s3://m", "--server", fake_argo.url)
    assert result.returncode == 2
    assert "unknown parameter(s) modle" in result.stderr
    assert fake_argo.requests == []


def test_the_token_is_never_in_a_repr() -> None:
    target = resolve_target(ClusterConfig(), server="https://argo.example", namespace=None, token_env=None,
                            insecure=False, environ={"ARGO_TOKEN": TOKEN})
    assert target.token == TOKEN
    assert TOKEN not in repr(target) and TOKEN not in str(target)
    assert isinstance(target, ArgoTarget) and target.verify is True
    insecure = resolve_target(ClusterConfig(), server=None, namespace="ns", token_env=None, insecure=False,
                              environ={"ARGO_SERVER": "argo.example:2746", "ARGO_INSECURE_SKIP_VERIFY": "true"})
    assert (insecure.server, insecure.namespace, insecure.verify) == ("https://argo.example:2746", "ns", False)


def test_without_a_local_configuration_the_configmaps_is_rendered(fake_argo, pods_config) -> None:
    toml = '[pipeline]\nsearch_shards = 5\n[storage]\nroot = "s3://team/runs/a"\n'
    pods_config.add(config_map("burnqed", toml))
    result = cli("submit", "iteration", "--iter", "1", "--server", fake_argo.url)
    assert result.returncode == 0, result.stderr
    workflow = fake_argo.requests[0].body["workflow"]
    cfg = Config.model_validate({"pipeline": {"search_shards": 5}, "storage": {"root": "s3://team/runs/a"}})
    assert workflow == render_workflow(cfg, "iteration", WORKFLOWS, iteration=1, parameters={})
    digest = pod_config_digest(cfg)
    assert workflow["metadata"]["annotations"][DIGEST_ANNOTATION] == digest
    search = next(t for t in workflow["spec"]["templates"] if t["name"] == "search")
    assert {"name": "BURNQED_CONFIG_DIGEST", "value": digest} in search["container"]["env"]
    assert {"name": "BURNQED_CONFIG_DIGEST", "value": digest} in search["initContainers"][0]["env"]


def test_a_local_configuration_that_differs_is_refused_with_both_digests(fake_argo, pods_config,
                                                                         tmp_path) -> None:
    local = tmp_path / "mine.toml"
    local.write_text('[pipeline]\nsearch_shards = 3\n')
    result = cli("submit", "iteration", "--root", "s3://b/r", "--server", fake_argo.url, "--config", str(local))
    assert result.returncode == 2
    mine = pod_config_digest(Config.model_validate({"pipeline": {"search_shards": 3}}))
    theirs = pod_config_digest(Config())
    assert mine != theirs
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: the local configuration (digest {mine}) differs from ConfigMap "
                           f"burnqed/burnqed-config (digest {theirs}), which the pods read")
    for how in (["--set", "pipeline.search_shards=3"], []):
        env = {"BURNQED_PIPELINE__SEARCH_SHARDS": "3"} if not how else None
        again = cli("submit", "iteration", "--root", "s3://b/r", "--server", fake_argo.url, *how, env=env)
        assert again.returncode == 2 and f"(digest {mine}) differs from ConfigMap" in again.stderr
    assert fake_argo.requests == []  # nothing was sent
    pods_config.add(config_map("burnqed", local.read_text()))  # once the cluster holds it, it runs
    result = cli("submit", "iteration", "--root", "s3://b/r", "--server", fake_argo.url, "--config", str(local))
    assert result.returncode == 0, result.stderr
    assert fake_argo.requests[0].body["workflow"]["metadata"]["annotations"][DIGEST_ANNOTATION] == mine


def test_where_argo_is_does_not_count_as_a_different_configuration(fake_argo) -> None:
    result = cli("submit", "smoke", "--root", "s3://b/r", "--server", fake_argo.url,
                 "--set", "cluster.argo_token_env=CI_TOKEN", "--namespace", "burnqed")
    assert result.returncode == 0, result.stderr
    assert [(r.method, r.path) for r in fake_argo.requests] == [("POST", "/api/v1/workflows/burnqed")]  # it was sent
    assert fake_argo.requests[0].body["workflow"]["metadata"]["generateName"] == "burnqed-smoke-"


def test_an_unreadable_configmap_is_one_line_and_nothing_is_sent(fake_argo, pods_config) -> None:
    del pods_config.objects["/api/v1/namespaces/burnqed/configmaps/burnqed-config"]
    result = cli("submit", "iteration", "--root", "s3://b/r", "--server", fake_argo.url)
    assert result.returncode == 1
    assert result.stderr.startswith("error: no ConfigMap burnqed/burnqed-config, the configuration the pods read")
    pods_config.forbidden.add("/api/v1/namespaces/burnqed/configmaps/burnqed-config")
    pods_config.add(config_map("burnqed", ""))
    result = cli("submit", "iteration", "--root", "s3://b/r", "--server", fake_argo.url)
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot read ConfigMap burnqed/burnqed-config (HTTP 403")
    assert fake_argo.requests == []


def test_from_template_refuses_a_template_rendered_from_another_configuration(fake_argo) -> None:
    other = Config.model_validate({"pipeline": {"search_shards": 7}})
    (installed,) = [d.doc for d in render_templates(other, ["iteration"], WORKFLOWS) if d.name.endswith("-1")]
    fake_argo.templates["burnqed-iteration-1"] = installed
    result = cli("submit", "iteration", "--iter", "1", "--root", "s3://b/r", "--server", fake_argo.url,
                 "--from-template")
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"error: the installed WorkflowTemplate burnqed-iteration-1 was rendered from a configuration with digest "
        f"{pod_config_digest(other)}, the ConfigMap the pods read holds digest {pod_config_digest(Config())}")
    assert [r.method for r in fake_argo.requests] == ["GET"]  # nothing submitted
    del fake_argo.templates["burnqed-iteration-1"]
    result = cli("submit", "iteration", "--iter", "1", "--root", "s3://b/r", "--server", fake_argo.url,
                 "--from-template")
    assert result.returncode == 1
    assert "has no WorkflowTemplate burnqed-iteration-1 in namespace burnqed" in result.stderr


def test_where_argo_is_comes_from_the_configmap_too(pods_config) -> None:
    argo = FakeArgoServer(auth_modes={"server"})
    pods_config.services["workflows/http:wf-argo-workflows-server:2746"] = argo
    pods_config.add(config_map("burnqed", '[cluster]\nargo_service = "workflows/http:wf-argo-workflows-server:2746"\n'))
    result = cli("submit", "smoke", "--root", "s3://b/r")
    assert result.returncode == 0, result.stderr
    assert len(argo.created) == 1

"""`burnqed submit` against a local HTTP server standing in for the Argo Server: the request's path, bearer token
and body; --dry-run sends nothing; a refused token or an unreachable server is one error line and exit code 1."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from burnqed.cluster.argo import ArgoTarget, resolve_target
from burnqed.cluster.render import render_workflow
from burnqed.cluster.yamlio import load_documents
from burnqed.config import ClusterConfig, Config
from tests.cluster.conftest import WORKFLOWS

TOKEN = "tok-3f9a1c0d7e"  # a fake token; the tests check that it never shows up


def run(cli, *args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def test_submit_iteration_posts_the_workflow_with_the_token(cli, fake_argo) -> None:
    result = run(cli, "submit", "iteration", "--iter", "2", "--root", "s3://bucket/run", "--server", fake_argo.url,
                 env={"ARGO_TOKEN": TOKEN})
    assert result.exit_code == 0, result.output
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
    assert TOKEN not in result.output


def test_server_namespace_and_token_from_the_argo_environment(cli, fake_argo) -> None:
    host = fake_argo.url.removeprefix("http://")
    env = {"ARGO_SERVER": host, "ARGO_SECURE": "false", "ARGO_NAMESPACE": "research",
           "ARGO_TOKEN": f"Bearer {TOKEN}", "BURNQED_STORAGE__ROOT": "s3://bucket/exp"}
    result = run(cli, "submit", "iteration", env=env)
    assert result.exit_code == 0, result.output
    (request,) = fake_argo.requests
    assert request.path == "/api/v1/workflows/research"
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"  # the argo CLI's "Bearer ..." form is accepted
    workflow = request.body["workflow"]
    assert workflow["metadata"]["namespace"] == "research"
    values = {p["name"]: p["value"] for p in workflow["spec"]["arguments"]["parameters"]}
    assert values == {"root": "s3://bucket/exp", "run": "bucket-exp", "iteration": "0"}
    assert result.stdout.splitlines()[-1] == f"{fake_argo.url}/workflows/research/burnqed-iteration-2-x7k2p"


def test_token_from_another_variable(cli, fake_argo) -> None:
    result = run(cli, "submit", "eval", "--model", "s3://m/prover", "--root", "s3://b/r", "--server", fake_argo.url,
                 "--token-env", "CI_ARGO_TOKEN", env={"CI_ARGO_TOKEN": TOKEN, "ARGO_TOKEN": "other"})
    assert result.exit_code == 0, result.output
    (request,) = fake_argo.requests
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    values = {p["name"]: p["value"] for p in request.body["workflow"]["spec"]["arguments"]["parameters"]}
    assert values == {"root": "s3://b/r", "model": "s3://m/prover"}


def test_no_token_no_header(cli, fake_argo) -> None:
    result = run(cli, "submit", "smoke", "--root", "s3://b/smoke", "--server", fake_argo.url)
    assert result.exit_code == 0, result.output
    assert "Authorization" not in fake_argo.requests[0].headers


def test_dry_run_prints_the_workflow_and_sends_nothing(cli, fake_argo) -> None:
    result = run(cli, "submit", "iteration", "--iter", "2", "--root", "s3://bucket/run", "--server", fake_argo.url,
                 "--dry-run", env={"ARGO_TOKEN": TOKEN})
    assert result.exit_code == 0, result.output
    assert fake_argo.requests == []
    (doc,) = load_documents(result.stdout)
    assert doc == render_workflow(Config(), "iteration", WORKFLOWS, iteration=2, parameters={"root": "s3://bucket/run"})
    assert result.stdout.startswith("# POST /api/v1/workflows/burnqed (dry run)\n")
    assert TOKEN not in result.output


def test_from_template_submits_the_installed_template(cli, fake_argo) -> None:
    result = run(cli, "submit", "iteration", "--iter", "1", "--root", "s3://bucket/run", "--server", fake_argo.url,
                 "--from-template", env={"ARGO_TOKEN": TOKEN})
    assert result.exit_code == 0, result.output
    (request,) = fake_argo.requests
    assert request.path == "/api/v1/workflows/burnqed/submit"
    assert request.body == {
        "namespace": "burnqed", "resourceKind": "WorkflowTemplate", "resourceName": "burnqed-iteration-1",
        "submitOptions": {"parameters": ["root=s3://bucket/run", "run=bucket-run", "iteration=1"]},
    }


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_token_is_one_clear_error(cli, fake_argo, status: int) -> None:
    fake_argo.status = status
    fake_argo.reply = {"code": 16, "message": f"token not valid: {TOKEN[:6]}... rejected"}
    result = run(cli, "submit", "iteration", "--root", "s3://b/r", "--server", fake_argo.url,
                 env={"ARGO_TOKEN": TOKEN})
    assert result.exit_code == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: the Argo Server at {fake_argo.url} (from --server) refused the credentials "
                           f"(HTTP {status}: token not valid")
    assert "$ARGO_TOKEN" in line
    assert TOKEN not in result.output


def test_an_unreachable_server_is_one_clear_error(cli) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = run(cli, "submit", "iteration", "--root", "s3://b/r", "--server", f"http://127.0.0.1:{port}",
                 env={"ARGO_TOKEN": TOKEN})
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: cannot reach the Argo Server at http://127.0.0.1:{port} (from --server):")
    assert TOKEN not in result.output


def test_other_refusals_carry_the_servers_message(cli, fake_argo) -> None:
    fake_argo.status = 409
    fake_argo.reply = {"code": 6, "message": "workflows.argoproj.io \"x\" already exists"}
    result = run(cli, "submit", "smoke", "--root", "s3://b/r", "--server", fake_argo.url)
    assert result.exit_code == 1
    assert result.stderr.strip() == (f"error: the Argo Server at {fake_argo.url} (from --server) rejected the request "
                                     "(HTTP 409): workflows.argoproj.io \"x\" already exists")


def test_no_server_and_no_kubeconfig(cli) -> None:
    result = run(cli, "submit", "iteration", "--root", "s3://b/r")
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: no Argo Server given (--server, cluster.argo_server or ARGO_SERVER) and no "
                           "usable kubeconfig")


def test_server_and_token_from_the_kubeconfig(cli, fake_argo, tmp_path: Path, monkeypatch) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(f"""
apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster: {{server: "{fake_argo.url}"}}
users:
- name: me
  user: {{token: kube-{TOKEN}}}
contexts:
- name: lab
  context: {{cluster: lab, user: me, namespace: ignored}}
current-context: lab
""")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    result = run(cli, "submit", "smoke", "--root", "s3://b/r")
    assert result.exit_code == 0, result.output
    (request,) = fake_argo.requests
    assert request.path == "/api/v1/namespaces/argo/services/https:argo-server:2746/proxy/api/v1/workflows/burnqed"
    assert request.headers["Authorization"] == f"Bearer kube-{TOKEN}"
    proxy = f"{fake_argo.url}/api/v1/namespaces/argo/services/https:argo-server:2746/proxy"
    assert result.stdout.splitlines()[-1] == f"{proxy}/workflows/burnqed/burnqed-iteration-2-x7k2p"
    assert TOKEN not in result.output


def test_missing_or_local_root_is_an_input_error_and_nothing_is_sent(cli, fake_argo) -> None:
    result = run(cli, "submit", "iteration", "--server", fake_argo.url)
    assert result.exit_code == 2
    assert result.stderr.strip() == ("error: workflow iteration needs a value for root: pass --param NAME=VALUE "
                                     "(or --root; storage.root is a local path)")
    result = run(cli, "submit", "iteration", "--root", "file:///data/runs", "--server", fake_argo.url)
    assert result.exit_code == 2
    assert "is a local path the pods cannot share" in result.stderr
    result = run(cli, "submit", "eval", "--root", "s3://b/r", "-p", "modle=s3://m", "--server", fake_argo.url)
    assert result.exit_code == 2
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

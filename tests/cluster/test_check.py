"""`burnqed cluster check` against a fake Kubernetes API server over HTTP (tests/doubles/fake_kube.py) with a
kubeconfig pointing at it: the namespace as the chart installs it, plus the S3 Secret, GPU and CPU nodes and
argo-helm's Argo Server behind the API server's proxy. Exit 0 only when a submit would run; each miss is named
with its fix."""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

import helm_python as helm
import pytest

from burnqed.cluster.nodefit import largest_pods, tolerated
from burnqed.cluster.preflight import token_secret_name
from burnqed.cluster.render import render_templates
from burnqed.cluster.source import load_text
from burnqed.cluster.yamlio import load_documents
from burnqed.config import ClusterConfig
from tests.cluster.conftest import CHART, MANIFESTS, WORKFLOWS
from tests.doubles.fake_kube import FakeArgoServer, FakeKube, serve_argo
from tests.processes import cli

ARGO = "argo/http:argo-workflows-server:2746"
ARGO_TOKEN = "argo-token-0c1d2e3f"


def node(name: str, labels: dict[str, str], taints: list[dict[str, str]], cpu: str, memory: str,
         gpus: str | None = None) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, **({"nvidia.com/gpu": gpus} if gpus else {})}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints}, "status": {"allocatable": allocatable}}


GPU_NODE = node("gpu-1", {"burnqed.io/pool": "gpu", "kubernetes.io/os": "linux", "nvidia.com/gpu.memory": "81559"},
                [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}], "26", "234Gi", "1")
CPU_NODE = node("cpu-1", {"kubernetes.io/os": "linux"}, [], "32", "125Gi")


def install(kube: FakeKube) -> None:
    """What the documented install leaves in the cluster: the chart with its WorkflowTemplates rendered from the
    chart's own configuration (`burnqed render --helm --config FILE` with the file the ConfigMap holds), plus an S3
    Secret and nodes."""
    for doc in copy.deepcopy(installed()):  # tests edit what they find in the fake
        kube.add(doc)
    kube.add({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"name": "burnqed-s3", "namespace": "burnqed"},
              "data": {"AWS_ACCESS_KEY_ID": "QUtJQQ==", "AWS_SECRET_ACCESS_KEY": "c2VjcmV0"}})
    kube.add(copy.deepcopy(GPU_NODE))
    kube.add(copy.deepcopy(CPU_NODE))
    kube.services[ARGO] = FakeArgoServer(auth_modes={"server"})


@functools.cache
def installed() -> list[dict[str, Any]]:
    """The chart's documents as `install` adds them (rendered once for the module: ~0.25 CPU-s a render), and the
    namespace."""
    with helm.Chart.load(CHART) as chart:
        out = chart.render({}, name="burnqed", namespace="burnqed", is_install=True)
    (config_map,) = [doc for path, text in out.items() if path.endswith("config.yaml")
                     for doc in load_documents(text, path)]
    pods = load_text(config_map["data"]["burnqed.toml"], "the chart's ConfigMap")
    templates = {r.name: r.doc for r in render_templates(pods, [], WORKFLOWS, helm=True)}
    docs = []
    for path, text in out.items():
        for chart_doc in load_documents(text, path) if path.endswith(".yaml") else []:
            doc = templates[chart_doc["metadata"]["name"]] if chart_doc["kind"] == "WorkflowTemplate" else chart_doc
            doc["metadata"].setdefault("namespace", "burnqed")
            if doc["kind"] in ("Role", "RoleBinding", "NetworkPolicy"):
                continue
            if doc["kind"] == "Secret":  # what the token controller fills in
                doc["data"] = {"token": "ZmFrZS10b2tlbg==", "ca.crt": "Y2E=", "namespace": "YnVybnFlZA=="}
            if doc["kind"] == "PriorityClass":
                doc["metadata"].pop("namespace")
            docs.append(doc)
    (namespace,) = load_documents((MANIFESTS / "00-namespace.yaml").read_text())
    return [*docs, namespace]


def add_config(kube: FakeKube, toml: str, *, rerender: bool = True) -> None:
    """Append TOML to the namespace's config ConfigMap (the configuration `cluster check` reads without --config)
    and, as the documented upgrade does (`burnqed render --helm --config FILE; helm upgrade`), re-render the
    installed WorkflowTemplates from it; `rerender=False` leaves them as they were (a ConfigMap edited by hand)."""
    config_map = kube.objects["/api/v1/namespaces/burnqed/configmaps/burnqed-config"]
    config_map["data"]["burnqed.toml"] += "\n" + toml + "\n"
    if rerender:
        pods = load_text(config_map["data"]["burnqed.toml"], "the ConfigMap")
        for rendered in render_templates(pods, [], WORKFLOWS, helm=True):
            kube.add({**rendered.doc, "metadata": {**rendered.doc["metadata"], "namespace": "burnqed"}})


def check(*args: str, env: dict[str, str] | None = None):
    return cli("cluster", "check", *args, env={"COLUMNS": "200", **(env or {})})


def problems(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith(("MISSING ", "UNKNOWN ", "WARN "))]


@pytest.mark.slow
def test_everything_present_is_ready(fake_kube) -> None:
    install(fake_kube)
    result = check()
    assert result.returncode == 0, result.stderr
    assert problems(result.stdout) == []
    assert result.stdout.rstrip().endswith("ready: a submit would run")
    for what in ("Kubernetes API", "Namespace burnqed", "ServiceAccount burnqed-workflow",
                 "Secret burnqed-workflow.service-account-token", "ConfigMap burnqed-config",
                 "ConfigMap burnqed-artifact-repository", "Secret burnqed-s3", "PriorityClass burnqed-gpu",
                 "PriorityClass burnqed-cpu", "WorkflowTemplates", "GPU nodes", "CPU nodes", "Argo Server",
                 "Argo auth mode"):
        assert what in result.stdout, what


@pytest.mark.slow
def test_a_missing_secret_and_priority_class_are_named_with_their_fix(fake_kube) -> None:
    install(fake_kube)
    fake_kube.remove("Secret", "burnqed-s3")
    fake_kube.remove("PriorityClass", "burnqed-gpu")
    result = check()
    assert result.returncode == 1
    assert problems(result.stdout) == [
        "MISSING Secret burnqed-s3: not found: pods that refer to it never start. Fix: kubectl -n burnqed create "
        "secret generic burnqed-s3 --from-literal=AWS_ACCESS_KEY_ID=… --from-literal=AWS_SECRET_ACCESS_KEY=… (or "
        "workload identity: render with cluster.s3_secret unset and install the chart with s3.existingSecret: \"\")",
        "MISSING PriorityClass burnqed-gpu: not found: the API server refuses pods that name it. Fix: kubectl apply "
        "-f manifests/10-priorityclasses.yaml, or install the chart with priorityClasses.create",
    ]
    assert result.stdout.rstrip().endswith("not ready: 2 problem(s); a submit would not run")


@pytest.mark.slow
def test_the_requests_are_authenticated_reads(fake_kube) -> None:
    install(fake_kube)
    assert check().returncode == 0
    reads = [(method, path.split("?")[0]) for method, path, _ in fake_kube.requests]
    assert all(headers["Authorization"] == f"Bearer {fake_kube.token}" for _, _, headers in fake_kube.requests)
    assert ("GET", "/api/v1/namespaces/burnqed/secrets/burnqed-workflow.service-account-token") in reads
    assert ("GET", "/apis/scheduling.k8s.io/v1/priorityclasses/burnqed-gpu") in reads
    assert ("GET", "/apis/argoproj.io/v1alpha1/namespaces/burnqed/workflowtemplates") in reads
    assert ("GET", "/api/v1/nodes") in reads
    assert ("GET", f"/api/v1/namespaces/argo/services/{ARGO.split('/')[1]}/proxy/api/v1/userinfo") in reads
    assert {method for method, _ in reads} == {"GET"}  # a preflight changes nothing


@pytest.mark.slow
def test_the_executor_token_secret(fake_kube) -> None:
    install(fake_kube)
    token_path = "/api/v1/namespaces/burnqed/secrets/burnqed-workflow.service-account-token"
    fake_kube.objects[token_path]["data"] = {}
    result = check()
    assert result.returncode == 1
    assert problems(result.stdout) == [
        "MISSING Secret burnqed-workflow.service-account-token: has no token yet: the token controller fills it in "
        "when the ServiceAccount exists. Fix: create the ServiceAccount burnqed-workflow first, then recreate the "
        "Secret"]
    del fake_kube.objects[token_path]
    (line,) = problems(check().stdout)
    assert line.startswith("MISSING Secret burnqed-workflow.service-account-token: not found: Argo mounts it for the "
                           "executor of every pod, which stays in ContainerCreating without it")
    account = fake_kube.objects["/api/v1/namespaces/burnqed/serviceaccounts/burnqed-workflow"]
    account["metadata"]["annotations"] = {"workflows.argoproj.io/service-account-token.name": "wf-token"}
    (line,) = problems(check().stdout)
    assert line.startswith("MISSING Secret wf-token: not found")  # the Secret Argo would mount


@pytest.mark.slow
def test_argo_in_client_auth_mode_behind_the_proxy(fake_kube) -> None:
    install(fake_kube)
    fake_kube.services[ARGO] = FakeArgoServer(auth_modes={"client"})
    result = check()
    assert result.returncode == 1
    (line,) = problems(result.stdout)
    assert line.startswith("MISSING Argo auth mode: client mode only (HTTP 401: token not valid. see https://argo-"
                           "workflows.readthedocs.io/en/latest/faq/): through the Kubernetes API proxy no token "
                           "reaches it. Fix: the Argo Server at ")
    assert "server auth mode (argo-helm: server.authModes: [server])" in line
    assert "kubectl -n argo port-forward svc/argo-workflows-server 2746, then ARGO_SERVER=localhost:2746" in line


@pytest.mark.slow
def test_argo_reached_directly_with_a_token(fake_kube) -> None:
    install(fake_kube)
    argo = FakeArgoServer(auth_modes={"client"}, valid_tokens={ARGO_TOKEN})
    with serve_argo(argo) as url:
        env = {"ARGO_SERVER": url.removeprefix("http://"), "ARGO_SECURE": "false"}
        result = check(env={**env, "ARGO_TOKEN": ARGO_TOKEN})
        assert result.returncode == 0, result.stderr
        assert "client mode; the token in $ARGO_TOKEN is accepted" in result.stdout
        assert argo.requests[0][2].get("Authorization") is None  # the anonymous probe carries no token
        assert argo.requests[1][2]["Authorization"] == f"Bearer {ARGO_TOKEN}"
        result = check(env={**env, "ARGO_TOKEN": "wrong-token"})
        assert result.returncode == 1
        (line,) = problems(result.stdout)
        assert line.startswith("MISSING Argo auth mode: client mode; the token in $ARGO_TOKEN was refused listing "
                               "WorkflowTemplates (HTTP 401: Unauthorized)")
        (line,) = problems(check(env=env).stdout)
        assert line.startswith("MISSING Argo auth mode: client mode (HTTP 401: token not valid. see https://argo-"
                               "workflows.readthedocs.io/en/latest/faq/) and no token in $ARGO_TOKEN. Fix: put a token")
        assert ARGO_TOKEN not in result.stdout + result.stderr and "wrong-token" not in result.stdout + result.stderr


@pytest.mark.slow
def test_a_missing_argo_service_lists_the_ones_found(fake_kube) -> None:
    install(fake_kube)
    fake_kube.services = {"workflows/http:wf-argo-workflows-server:2746": FakeArgoServer(auth_modes={"server"})}
    fake_kube.add({"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": "wf-argo-workflows-server", "namespace": "workflows",
                                "labels": {"app.kubernetes.io/name": "argo-workflows-server"}},
                   "spec": {"ports": [{"port": 2746}]}})
    result = check()
    assert result.returncode == 1
    (line,) = problems(result.stdout)
    assert line.startswith("MISSING Argo Server: the Argo Server at ")
    assert ": the Kubernetes API server answered HTTP 404: services \"argo-workflows-server\" not found." in line
    assert line.endswith("- found: workflows/http:wf-argo-workflows-server:2746")
    add_config(fake_kube, '[cluster]\nargo_service = "workflows/http:wf-argo-workflows-server:2746"')
    fixed = check()
    assert fixed.returncode == 0, fixed.stderr


@pytest.mark.slow
def test_nodes_must_match_selectors_tolerations_and_sizes(fake_kube) -> None:
    install(fake_kube)
    gpu_path = "/api/v1/nodes/gpu-1"
    fake_kube.objects[gpu_path]["spec"]["taints"].append({"key": "spot", "value": "true", "effect": "NoSchedule"})
    (line,) = problems(check().stdout)
    assert line.startswith("MISSING GPU nodes: 1 node(s) have burnqed.io/pool=gpu but taints the tolerations "
                           "(cluster.gpu_node_selector / gpu_tolerations) do not cover.")
    add_config(fake_kube, '[cluster]\ngpu_tolerations = [{operator = "Exists"}]\nsglang_memory = "250Gi"')
    result = check()
    (line,) = problems(result.stdout)
    assert line.startswith("MISSING GPU nodes: 1 node(s) match but none has 20 CPUs, 346Gi, 1 GPU allocatable for "
                           "the largest gpu pod.")
    del fake_kube.objects[gpu_path]
    result = check()
    assert result.returncode == 1
    (line,) = problems(result.stdout)
    assert line.startswith("MISSING GPU nodes: no schedulable node has burnqed.io/pool=gpu.")
    assert line.endswith("if an autoscaler scales the pool from zero, pass --scale-from-zero")
    result = check("--scale-from-zero")
    assert result.returncode == 0  # a warning only
    (line,) = problems(result.stdout)
    assert line.startswith("WARN GPU nodes: no schedulable node has burnqed.io/pool=gpu (--scale-from-zero")


@pytest.mark.slow
def test_what_cannot_be_read_is_unknown_not_a_pass(fake_kube) -> None:
    install(fake_kube)
    fake_kube.forbidden |= {"/api/v1/namespaces/burnqed/secrets/burnqed-s3", "/api/v1/nodes"}
    result = check()
    assert result.returncode == 1
    lines = problems(result.stdout)
    assert [line.split(":")[0] for line in lines] == ["UNKNOWN Secret burnqed-s3", "UNKNOWN Nodes"]
    assert "grant get on secrets/burnqed-s3 in burnqed (manifests/20-rbac.yaml" in lines[0]


@pytest.mark.slow
def test_templates_are_required_only_for_submit_from_template(fake_kube) -> None:
    install(fake_kube)
    fake_kube.remove("WorkflowTemplate", "burnqed-eval")
    result = check()
    assert result.returncode == 0
    (line,) = problems(result.stdout)
    assert line.startswith("WARN WorkflowTemplates: not installed: burnqed-eval (needed by submit --from-template")
    assert check("--from-template").returncode == 1


@pytest.mark.slow
def test_a_broken_config_map_is_named(fake_kube) -> None:
    install(fake_kube)
    config_map = fake_kube.objects["/api/v1/namespaces/burnqed/configmaps/burnqed-config"]
    config_map["data"]["burnqed.toml"] = "[lean]\nworkerz = 3\n"
    (line,) = problems(check().stdout)
    assert line.startswith("MISSING ConfigMap burnqed-config: burnqed.toml does not load: invalid configuration: "
                           "unknown key lean.workerz")


@pytest.mark.slow
def test_json_output(fake_kube) -> None:
    install(fake_kube)
    fake_kube.remove("Secret", "burnqed-s3")
    result = check("--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["namespace"] == "burnqed" and report["ready"] is False
    (miss,) = [c for c in report["checks"] if c["verdict"] != "ok"]
    assert miss["what"] == "Secret burnqed-s3" and miss["fix"].startswith("kubectl -n burnqed create secret generic")


@pytest.mark.slow
def test_no_cluster_is_one_line() -> None:
    result = check()
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: cannot read the cluster: no usable kubeconfig:")


def test_an_unreachable_api_server_is_one_line(fake_kube, tmp_path, monkeypatch) -> None:
    config = fake_kube.kubeconfig.read_text().replace(fake_kube.url, "http://127.0.0.1:9")
    (tmp_path / "dead").write_text(config)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "dead"))
    result = check()
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: cannot reach the Kubernetes API at http://127.0.0.1:9:")


def test_a_reads_retry_warnings_are_dropped_in_its_thread_alone(caplog: pytest.LogCaptureFixture) -> None:
    import logging
    import threading

    from burnqed.cluster.kubereader import _retries_unlogged

    pool = logging.getLogger("urllib3.connectionpool")
    level = pool.level
    caplog.set_level(logging.WARNING)
    with _retries_unlogged():
        pool.warning("Retrying in the reading thread")
        other = threading.Thread(target=pool.warning, args=("Retrying in another thread",))
        other.start()
        other.join()
        pool.error("an error in the reading thread")
        assert pool.level == level  # the logger's level is not touched
    pool.warning("Retrying after the read")
    assert [r.getMessage() for r in caplog.records if r.name == pool.name] == [
        "Retrying in another thread", "an error in the reading thread", "Retrying after the read"]


def test_token_secret_name_follows_argo() -> None:
    account: dict[str, Any] = {"metadata": {"name": "wf"}}
    assert token_secret_name(account) == "wf.service-account-token"
    account["metadata"]["annotations"] = {"workflows.argoproj.io/service-account-token.name": "named"}
    assert token_secret_name(account) == "named"
    assert token_secret_name({**account, "secrets": [{"name": "listed"}]}) == "listed"


@pytest.mark.parametrize(("taint", "tolerations", "expected"), [
    ({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
     [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}], True),
    ({"key": "spot", "value": "true", "effect": "NoSchedule"}, [{"key": "spot", "operator": "Equal", "value": "no"}],
     False),
    ({"key": "spot", "value": "true", "effect": "NoExecute"}, [{"operator": "Exists"}], True),
    ({"key": "spot", "value": "true", "effect": "NoExecute"},
     [{"key": "spot", "value": "true", "effect": "NoSchedule"}], False),
])
def test_tolerations_match_like_kubernetes(taint, tolerations, expected: bool) -> None:
    assert tolerated(taint, tolerations) is expected


def test_the_largest_pods() -> None:
    sizes = largest_pods(ClusterConfig())
    assert sizes["gpu"].describe() == "20 CPUs, 128Gi, 1 GPU"  # search 16 + sidecar 4; 96Gi + 32Gi
    assert sizes["cpu"].describe() == "16 CPUs, 96Gi"  # data preparation's Lean workers
    with_rl = largest_pods(ClusterConfig(), rl=True)  # the rl step: training's 8 + 64Gi and search's 16 + 96Gi
    assert with_rl["gpu"].describe() == "24 CPUs, 160Gi, 1 GPU" and with_rl["cpu"] == sizes["cpu"]
    # rl.rollout_engine = 'served': the rl pod also holds its SGLang sidecar (4 CPUs, 32Gi) on a GPU of its own
    served = largest_pods(ClusterConfig(), rl=True, rl_sidecar=True)
    assert served["gpu"].describe() == "28 CPUs, 192Gi, 2 GPU"
    assert largest_pods(ClusterConfig(gpus_per_step=2), rl=True, rl_sidecar=True)["gpu"].gpus == 3


@pytest.mark.slow
def test_without_config_the_configmaps_is_checked_and_a_differing_local_one_is_a_problem(fake_kube,
                                                                                           tmp_path) -> None:
    install(fake_kube)
    add_config(fake_kube, '[cluster]\ngpu_node_selector = { "pool" = "l40s" }')
    (line,) = problems(check().stdout)  # the ConfigMap's selector, not the embedded default
    assert line.startswith("MISSING GPU nodes: no schedulable node has pool=l40s.")
    local = tmp_path / "mine.toml"
    local.write_text('[cluster]\ngpu_node_selector = { "burnqed.io/pool" = "gpu" }\n')
    result = check("--config", str(local))
    (line,) = problems(result.stdout)
    assert line.startswith("MISSING ConfigMap burnqed-config: holds another configuration (digest ")
    assert "than the local one (digest " in line


@pytest.mark.slow
def test_the_submitter_may_not_read_the_executors_token_and_is_told_so(fake_kube) -> None:
    install(fake_kube)
    secret = "/api/v1/namespaces/burnqed/secrets/burnqed-workflow.service-account-token"
    fake_kube.forbidden.add(secret)
    result = check()
    assert result.returncode == 0, result.stderr  # a warning: nothing else proves it, nothing proves it missing
    (line,) = problems(result.stdout)
    assert line.startswith("WARN Secret burnqed-workflow.service-account-token: not read (HTTP 403): reading it "
                           "would let this user act as Argo's executor")
    assert line.endswith("kubectl -n burnqed get secret burnqed-workflow.service-account-token -o "
                         "jsonpath='{.type}' (expect kubernetes.io/service-account-token)")


def test_the_submitter_role_reads_no_token_secret() -> None:
    docs = load_documents((MANIFESTS / "20-rbac.yaml").read_text())
    (role,) = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "burnqed-submitter"]
    secret_rules = [r for r in role["rules"] if "secrets" in r["resources"]]
    assert secret_rules == [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["burnqed-s3"],
                             "verbs": ["get"]}]  # never list/watch: those return every Secret's data
    token = next(d for d in docs if d["kind"] == "Secret")
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["name"] not in secret_rules[0]["resourceNames"]


@pytest.mark.slow
def test_gpu_nodes_must_have_the_memory_the_plan_was_made_for(fake_kube) -> None:
    install(fake_kube)
    fake_kube.objects["/api/v1/nodes/gpu-1"]["metadata"]["labels"]["nvidia.com/gpu.memory"] = "46068"  # an L40S
    result = check()
    assert result.returncode == 1
    (line,) = problems(result.stdout)
    assert line.startswith("MISSING GPU nodes: 1 node(s) match, but none has the label nvidia.com/gpu.memory >= 81510 "
                           "MiB (found: 46068), the GPU serving.gpu_memory_gib = 79.6 GiB the memory plan was made for")
    del fake_kube.objects["/api/v1/nodes/gpu-1"]["metadata"]["labels"]["nvidia.com/gpu.memory"]
    (line,) = problems(check().stdout)
    assert "(found: none)" in line


@pytest.mark.slow
def test_templates_rendered_from_another_configuration_are_named(fake_kube) -> None:
    install(fake_kube)
    add_config(fake_kube, "[pipeline]\nsearch_shards = 6", rerender=False)  # edited after the templates were rendered
    result = check()
    assert result.returncode == 0, result.stderr  # a warning: submit renders from the ConfigMap itself
    (line,) = problems(result.stdout)
    assert line.startswith("WARN WorkflowTemplates: rendered from another configuration than the pods read (digest ")
    assert "burnqed-iteration-0 (" in line and "their pods refuse to start" in line
    result = check("--from-template")
    assert result.returncode == 1
    assert problems(result.stdout)[0].startswith("MISSING WorkflowTemplates: rendered from another configuration")


@pytest.mark.slow
def test_without_a_kubeconfig_the_argo_checks_run_and_the_kubernetes_ones_are_not_checked() -> None:
    argo = FakeArgoServer(auth_modes={"client"}, valid_tokens={ARGO_TOKEN})
    with serve_argo(argo) as url:  # ARGO_SERVER and ARGO_TOKEN as the README exports them; no kubeconfig at all
        env = {"ARGO_SERVER": url.removeprefix("http://"), "ARGO_SECURE": "false", "ARGO_TOKEN": ARGO_TOKEN}
        result = check("--json", env=env)
        shown = check(env=env)
    assert (result.returncode, result.stderr) == (1, ""), result.stdout
    report = json.loads(result.stdout)
    why = "no usable kubeconfig: Invalid kube-config file. No configuration found."
    assert [(c["what"], c["verdict"]) for c in report["checks"]] == [
        ("Kubernetes API", "missing"), ("Namespace burnqed", "not checked"),
        ("ServiceAccount burnqed-workflow", "not checked"),
        ("Secret burnqed-workflow.service-account-token", "not checked"), ("ConfigMap burnqed-config", "not checked"),
        ("ConfigMap burnqed-artifact-repository", "not checked"), ("Secret burnqed-s3", "not checked"),
        ("PriorityClass burnqed-gpu", "not checked"), ("PriorityClass burnqed-cpu", "not checked"),
        ("WorkflowTemplates", "not checked"), ("GPU nodes", "not checked"), ("CPU nodes", "not checked"),
        ("Argo Server", "ok"), ("Argo auth mode", "ok")]
    assert {c["detail"] for c in report["checks"] if c["verdict"] == "not checked"} == {f"not read: {why}"}
    assert report["checks"][-1]["detail"] == "client mode; the token in $ARGO_TOKEN is accepted"
    assert report["ready"] is False  # a check that did not look proves nothing
    assert (shown.returncode, shown.stderr) == (1, "")
    assert problems(shown.stdout) == [
        f"MISSING Kubernetes API: not read ({why}): the checks of the namespace, its objects and the nodes did not "
        "run, and submit reads the namespace's ConfigMap through it (only submit --dry-run does without). Fix: point "
        "KUBECONFIG at a kubeconfig for the cluster (or run inside a pod of it)"]
    assert shown.stdout.rstrip().endswith("not ready: 1 problem(s), 11 not checked; a submit would not run")
    assert ARGO_TOKEN not in result.stdout + result.stderr + shown.stdout + shown.stderr


def set_lean(kube: FakeKube, line: str) -> None:
    """A key of the ConfigMap's `[lean]` table (it has one: TOML declares a table once), the templates re-rendered."""
    config_map = kube.objects["/api/v1/namespaces/burnqed/configmaps/burnqed-config"]
    text = config_map["data"]["burnqed.toml"]
    assert text.count("\n[lean]\n") == 1
    config_map["data"]["burnqed.toml"] = text.replace("\n[lean]\n", f"\n[lean]\n{line}\n")
    add_config(kube, "")  # the templates rendered again from it, as the documented upgrade does


@pytest.mark.slow
def test_the_judges_sandbox_needs_its_pod_and_landlock_on_the_nodes(fake_kube) -> None:
    """With lean.judge = comparator: the installed judge steps give comparator's sandbox what it needs (one line
    naming what one lacks), lake comparator's bubblewrap is said to need user namespaces, the standalone comparator's
    landrun needs Landlock on every schedulable node (Linux >= 5.13), one line each way; the sandbox switched off is a
    warning; with burnqed as the judge there is no row."""
    install(fake_kube)
    assert "Judge sandbox" not in check().stdout
    set_lean(fake_kube, 'judge = "comparator"')
    result = check()
    assert (result.returncode, problems(result.stdout)) == (0, []), result.stderr
    assert ("lake comparator runs as uid 1000, unprivileged, in bubblewrap: the nodes must allow unprivileged user "
            "namespaces") in " ".join(result.stdout.split())
    path = "/apis/argoproj.io/v1alpha1/namespaces/burnqed/workflowtemplates/burnqed-eval"
    judge = next(t for t in fake_kube.objects[path]["spec"]["templates"] if t["name"] == "judge-eval")
    judge["container"]["securityContext"]["privileged"] = True
    result = check()
    assert result.returncode == 1
    (line,) = problems(result.stdout)
    assert " ".join(line.split()).startswith(
        "MISSING Judge sandbox: WorkflowTemplate burnqed-eval: step judge-eval: comparator's sandbox (bubblewrap) "
        "needs not privileged (privileged: true): render the judge step from burnqed's workflows")
    set_lean(fake_kube, 'comparator_command = ["lake", "env", "/opt/comparator/bin/comparator", "{config}"]')
    for name, kernel in (("gpu-1", "6.1.0-18-cloud-amd64"), ("cpu-1", "5.15.0-1057-aws")):
        fake_kube.objects[f"/api/v1/nodes/{name}"]["status"]["nodeInfo"] = {"kernelVersion": kernel}
    result = check()
    assert result.returncode == 0, result.stderr
    assert problems(result.stdout) == [] and "Judge sandbox" in result.stdout
    assert "comparator runs as uid 1000, unprivileged, in landrun" in " ".join(result.stdout.split())
    for name in ("gpu-1", "cpu-1"):
        fake_kube.objects[f"/api/v1/nodes/{name}"]["status"]["nodeInfo"] = {"kernelVersion": "5.4.0-1103-aws"}
    result = check()
    assert result.returncode == 1
    (line,) = problems(result.stdout)
    assert line.startswith("MISSING Judge sandbox: no schedulable node has Linux >= 5.13 for Landlock (older: cpu-1, "
                           "gpu-1): comparator cannot sandbox the solutions.")
    set_lean(fake_kube, "comparator_no_sandbox = true")
    (line,) = problems(check().stdout)
    assert line.startswith("WARN Judge sandbox: lean.comparator_no_sandbox: comparator builds the solutions outside")

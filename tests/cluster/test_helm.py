"""The Helm chart, rendered and linted with the Helm v4 library (helm-python-sdk) for the default values and every
ci/*-values.yaml scenario: every object valid (Argo schema / kubernetes-validate --strict), the WorkflowTemplates
identical to the rendered files, the config a loadable burnqed.toml, names in step with ClusterConfig."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest

from burnqed.cluster.render import HELM_FILES
from burnqed.cluster.validate import argo_problems, validate_documents
from burnqed.cluster.yamlio import load_documents
from burnqed.config import ClusterConfig, load_config
from tests.cluster.conftest import CHART, ROOT

SCENARIOS = sorted(path.name for path in (CHART / "ci").glob("*-values.yaml"))


def values_of(scenario: str) -> dict[str, Any]:
    docs = load_documents((CHART / "ci" / scenario).read_text())
    return docs[0] if docs else {}


def render(values: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Template path -> its objects."""
    with helm.Chart.load(CHART) as chart:
        out = chart.render(values, name="burnqed", namespace="research", is_install=True)
    return {path: load_documents(text, path) for path, text in out.items() if path.endswith(".yaml")}


def objects(rendered: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [doc for docs in rendered.values() for doc in docs]


def test_scenarios_exist() -> None:
    assert SCENARIOS == ["default-values.yaml", "gpu-pools-values.yaml", "minimal-values.yaml"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_chart_lints_clean(scenario: str) -> None:
    report = helm.lint(CHART, values_of(scenario), strict=True, namespace="research")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_object_the_chart_renders_is_valid(scenario: str) -> None:
    docs = objects(render(values_of(scenario)))
    assert docs, "the chart rendered nothing"
    assert validate_documents(docs) == []
    for secret in (doc for doc in docs if doc["kind"] == "Secret"):  # no secret value: only the empty token Secret
        assert secret["type"] == "kubernetes.io/service-account-token"
        assert "data" not in secret and "stringData" not in secret


def test_default_install() -> None:
    docs = objects(render({}))
    kinds = sorted({doc["kind"] for doc in docs})
    assert kinds == ["ConfigMap", "NetworkPolicy", "PriorityClass", "Role", "RoleBinding", "Secret", "ServiceAccount",
                     "WorkflowTemplate"]
    role = next(doc for doc in docs if doc["kind"] == "Role")
    assert role["rules"] == [{"apiGroups": ["argoproj.io"], "resources": ["workflowtaskresults"],
                              "verbs": ["create", "patch"]}]
    binding = next(doc for doc in docs if doc["kind"] == "RoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "burnqed-workflow", "namespace": "research"}]
    policy = next(doc for doc in docs if doc["kind"] == "NetworkPolicy")
    assert policy["spec"]["podSelector"] == {"matchLabels": {"burnqed.io/lean": "true"}}
    assert policy["spec"]["policyTypes"] == ["Egress"]
    dns, https = policy["spec"]["egress"]
    assert dns["ports"] == [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    assert https == {"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["169.254.0.0/16"]}}],
                     "ports": [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 6443}]}
    token = next(doc for doc in docs if doc["kind"] == "Secret")
    assert token["metadata"]["name"] == "burnqed-workflow.service-account-token"
    assert token["metadata"]["annotations"] == {"kubernetes.io/service-account.name": "burnqed-workflow"}


@pytest.mark.slow
def test_egress_for_workload_identity_and_narrowed_destinations() -> None:
    values = {"networkPolicy": {"metadataServer": {"enabled": True},
                                "https": {"cidrs": ["10.0.0.0/8", "52.216.0.0/15"]}}}
    (policy,) = render(values)["burnqed/templates/networkpolicy.yaml"]
    assert validate_documents([policy]) == []
    _, https, metadata = policy["spec"]["egress"]
    assert https["to"] == [{"ipBlock": {"cidr": "10.0.0.0/8"}}, {"ipBlock": {"cidr": "52.216.0.0/15"}}]
    assert metadata["to"][0] == {"ipBlock": {"cidr": "169.254.169.254/32"}}
    assert {p["port"] for p in metadata["ports"]} == {80, 988}
    (closed,) = render({"networkPolicy": {"https": {"enabled": False}}})["burnqed/templates/networkpolicy.yaml"]
    assert len(closed["spec"]["egress"]) == 1  # DNS only: NOTES.txt warns
    notes = helm_notes({"networkPolicy": {"https": {"enabled": False}}})
    assert "cannot download the model, upload to S3 or report results to Argo" in notes


def helm_notes(values: dict[str, Any]) -> str:
    with helm.Chart.load(CHART) as chart:
        out = chart.render(values, name="burnqed", namespace="research", is_install=True)
    return str(out["burnqed/templates/NOTES.txt"])


def test_s3_secret_references_follow_the_values() -> None:
    def refs(values: dict[str, Any]) -> set[str]:
        found = set()
        for doc in render(values)["burnqed/templates/workflowtemplates.yaml"]:
            for t in doc["spec"]["templates"]:
                for container in [t.get("container") or {}, *(t.get("initContainers") or [])]:
                    found |= {str(source) for source in container.get("envFrom") or []}
        return found

    assert refs({}) == {"{'secretRef': {'name': 'burnqed-s3'}}"}
    assert refs({"s3": {"existingSecret": "team-s3-keys"}}) == {"{'secretRef': {'name': 'team-s3-keys'}}"}
    assert refs({"s3": {"existingSecret": ""}}) == set()  # workload identity: no reference to a missing Secret
    assert "workload identity" in helm_notes({"s3": {"existingSecret": ""}})


def test_the_charts_workflow_templates_are_the_rendered_files() -> None:
    files = {doc["metadata"]["name"]: doc for path in sorted((ROOT / HELM_FILES).glob("*.yaml"))
             for doc in load_documents(path.read_text())}
    charted = {doc["metadata"]["name"]: doc for doc in render({})["burnqed/templates/workflowtemplates.yaml"]}
    assert sorted(charted) == sorted(files) and len(files) == 6
    for name, doc in charted.items():
        labels = doc["metadata"].pop("labels")
        expected_labels = files[name]["metadata"].pop("labels")
        assert expected_labels.items() <= labels.items()
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert doc == files[name]
        assert "namespace" not in doc["metadata"]


@pytest.mark.slow
def test_gpu_pools_replace_node_selectors_and_tolerations_per_pool() -> None:
    scenario = values_of("gpu-pools-values.yaml")["workflowTemplates"]
    templates = render(values_of("gpu-pools-values.yaml"))["burnqed/templates/workflowtemplates.yaml"]
    iteration = next(doc for doc in templates if doc["metadata"]["name"] == "burnqed-iteration-1")
    by_pool: dict[str, list[dict[str, Any]]] = {"gpu": [], "cpu": []}
    for t in iteration["spec"]["templates"]:
        if "container" in t:
            by_pool[t["metadata"]["labels"]["burnqed.io/node-pool"]].append(t)
        else:
            assert "tolerations" not in t and "nodeSelector" not in t  # the DAG template is left alone
    assert {t["name"] for t in by_pool["gpu"]} == {"sft", "export", "train-ebm", "search", "eval", "eval-noebm"}
    assert {t["name"] for t in by_pool["cpu"]} == {"merge-trajectories", "report"}  # the default's start: from 2
    for t in by_pool["gpu"]:
        assert t["tolerations"] == scenario["gpuTolerations"]
        assert t["nodeSelector"] == scenario["gpuNodeSelector"]
    for t in by_pool["cpu"]:
        assert t["tolerations"] == scenario["cpuTolerations"]
        assert t["nodeSelector"] == scenario["cpuNodeSelector"]


def test_minimal_installs_templates_and_config_only() -> None:
    rendered = render(values_of("minimal-values.yaml"))
    kinds = sorted(doc["kind"] for doc in objects(rendered))
    assert kinds == ["ConfigMap"] + ["WorkflowTemplate"] * 6


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_config_map_holds_a_loadable_burnqed_toml(scenario: str, tmp_path: Path) -> None:
    (config_map,) = render(values_of(scenario))["burnqed/templates/config.yaml"]
    assert config_map["metadata"]["name"] == "burnqed-config"
    text = config_map["data"]["burnqed.toml"]
    path = tmp_path / "burnqed.toml"
    path.write_text(text)
    cfg = load_config(path, (), {})
    assert cfg.lean.command == ["pantograph-repl", "--maxHeartbeats=400000", "Mathlib"]
    assert cfg.storage.root.startswith("s3://")
    if scenario == "gpu-pools-values.yaml":
        assert cfg.lean.recycle_rss_mb == 7500 and tomllib.loads(text)["lean"]["recycle_rss_mb"] == 7500  # not 7500.0


def test_a_toml_file_replaces_config_values(tmp_path: Path) -> None:
    text = '[lean]\nworkers = 3  # a comment survives\n\n[storage]\nroot = "s3://b/r"\n'
    (config_map,) = render({"config": {"toml": text}})["burnqed/templates/config.yaml"]
    assert config_map["data"]["burnqed.toml"] == text
    path = tmp_path / "burnqed.toml"
    path.write_text(config_map["data"]["burnqed.toml"])
    assert load_config(path, (), {}).lean.workers == 3


def test_config_values_become_toml_of_any_shape(tmp_path: Path) -> None:
    values = {"config": {"values": {
        "lean": {"env": {"LEAN_PATH": "/a:/b"}, "tactic_timeout_s": 12.5, "deny": ['\\bsorry\\b', 'say "hi"']},
        "data": {"sources": [{"kind": "bundled", "limit": 3}, {"kind": "benchmark", "path": "s3://d/m.jsonl"}]},
        "search": {"verify": False},
    }}}
    (config_map,) = render(values)["burnqed/templates/config.yaml"]
    path = tmp_path / "burnqed.toml"
    path.write_text(config_map["data"]["burnqed.toml"])
    cfg = load_config(path, (), {})
    assert cfg.lean.env == {"LEAN_PATH": "/a:/b"}
    assert cfg.lean.tactic_timeout_s == 12.5
    assert cfg.lean.deny == ['\\bsorry\\b', 'say "hi"']
    assert [(s.kind, s.limit, s.path) for s in cfg.data.sources] == [("bundled", 3, None),
                                                                     ("benchmark", None, "s3://d/m.jsonl")]
    assert cfg.search.verify is False
    assert cfg.storage.root == "s3://burnqed/runs"  # the chart's default stays


@pytest.mark.slow
def test_artifact_repository_config(tmp_path: Path) -> None:
    for values, creds in (({}, "keys"), ({"artifactRepository": {"s3": {"useSDKCreds": True}}}, "sdk")):
        (config_map,) = render(values)["burnqed/templates/artifact-repository.yaml"]
        assert config_map["metadata"]["annotations"] == {"workflows.argoproj.io/default-artifact-repository": "default"}
        (repository,) = load_documents(config_map["data"]["default"])
        assert argo_problems(repository, kind="ArtifactRepository") == []
        if creds == "keys":
            assert repository["s3"]["accessKeySecret"] == {"name": "burnqed-s3", "key": "AWS_ACCESS_KEY_ID"}
        else:
            assert repository["s3"]["useSDKCreds"] is True and "accessKeySecret" not in repository["s3"]


def test_chart_defaults_match_cluster_config_defaults() -> None:
    values = load_documents((CHART / "values.yaml").read_text())[0]
    cluster = ClusterConfig()
    assert values["serviceAccount"]["name"] == cluster.service_account
    assert values["config"]["name"] == cluster.config_map
    assert values["s3"]["existingSecret"] == cluster.s3_secret
    assert values["artifactRepository"]["name"] == cluster.artifact_repository
    assert values["priorityClasses"]["gpu"]["name"] == cluster.priority_class_gpu
    assert values["priorityClasses"]["cpu"]["name"] == cluster.priority_class_cpu


def test_chart_version_follows_the_package() -> None:
    chart = load_documents((CHART / "Chart.yaml").read_text())[0]
    assert chart["version"] == version("burnqed") and chart["appVersion"] == version("burnqed")


# headings: the keys under them carry the comments
SECTIONS = {"workflowTemplates:", "serviceAccount:", "rbac:", "networkPolicy:", "https:", "metadataServer:",
            "priorityClasses:", "gpu:", "cpu:", "artifactRepository:", "s3:", "config:"}


def test_every_value_has_a_doc_comment() -> None:
    lines = (CHART / "values.yaml").read_text().splitlines()
    undocumented = []
    for number, line in enumerate(lines):
        if not re.match(r"^\s*[A-Za-z_][\w.-]*:", line) or line.strip() in SECTIONS:
            continue
        above, comment = number - 1, []
        while above >= 0 and lines[above].strip().startswith("#"):
            comment.append(lines[above].strip())
            above -= 1
        if not any(c.startswith("# --") for c in comment):
            undocumented.append(line.strip())
    assert undocumented == []

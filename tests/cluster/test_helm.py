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


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_object_the_chart_renders_is_valid(scenario: str) -> None:
    docs = objects(render(values_of(scenario)))
    assert docs, "the chart rendered nothing"
    assert validate_documents(docs) == []
    assert "Secret" not in {doc["kind"] for doc in docs}  # secrets are referenced by name only


def test_default_install() -> None:
    docs = objects(render({}))
    kinds = sorted({doc["kind"] for doc in docs})
    assert kinds == ["ConfigMap", "NetworkPolicy", "PriorityClass", "Role", "RoleBinding", "ServiceAccount",
                     "WorkflowTemplate"]
    role = next(doc for doc in docs if doc["kind"] == "Role")
    assert role["rules"] == [{"apiGroups": ["argoproj.io"], "resources": ["workflowtaskresults"],
                              "verbs": ["create", "patch"]}]
    binding = next(doc for doc in docs if doc["kind"] == "RoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "burnqed-workflow", "namespace": "research"}]
    policy = next(doc for doc in docs if doc["kind"] == "NetworkPolicy")
    assert policy["spec"]["podSelector"] == {"matchLabels": {"burnqed.io/lean": "true"}}
    assert policy["spec"]["policyTypes"] == ["Egress"]
    assert [rule["ports"] for rule in policy["spec"]["egress"]] == [
        [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    ]


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
    assert {t["name"] for t in by_pool["cpu"]} == {"merge-trajectories", "report"}
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
    assert cfg.lean.command == ["pantograph-repl", "Mathlib"]
    assert cfg.lean.workers == 12 and tomllib.loads(text)["lean"]["workers"] == 12  # an int, not 12.0
    assert cfg.storage.root.startswith("s3://")


def test_config_values_become_toml_of_any_shape(tmp_path: Path) -> None:
    values = {"config": {"values": {
        "lean": {"env": {"LEAN_PATH": "/a:/b"}, "tactic_timeout_s": 12.5, "deny": ['\\bsorry\\b', 'say "hi"']},
        "data": {"sources": [{"kind": "bundled", "limit": 3}, {"kind": "minif2f", "path": "s3://d/m.jsonl"}]},
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
                                                                     ("minif2f", None, "s3://d/m.jsonl")]
    assert cfg.search.verify is False
    assert cfg.storage.root == "s3://burnqed/runs"  # the chart's default stays


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


SECTIONS = {"workflowTemplates:", "serviceAccount:", "rbac:", "networkPolicy:", "priorityClasses:", "gpu:", "cpu:",
            "artifactRepository:", "s3:", "config:"}  # headings: the keys under them carry the comments


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

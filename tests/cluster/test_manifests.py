"""The static manifests agree with the rest: the example GPU node pools carry the label and taint the workflows'
default node selector and tolerations expect; the plain manifests are the chart's default objects, complete for a
plain `kubectl apply -f manifests/`."""

from __future__ import annotations

import tomllib
from typing import Any

import helm_python as helm

from burnqed.cluster.yamlio import load_documents
from burnqed.config import ClusterConfig
from tests.cluster.conftest import CHART, MANIFESTS


def tolerated(taint: dict[str, str], tolerations: list[dict[str, str]]) -> bool:
    effect = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}.get(
        taint["effect"], taint["effect"])
    for toleration in tolerations:
        if toleration.get("effect") not in (None, effect) or toleration.get("key") != taint["key"]:
            continue
        if toleration.get("operator") == "Exists" or toleration.get("value") == taint.get("value"):
            return True
    return False


def test_gke_pool_matches_the_gpu_defaults() -> None:
    (pool,) = load_documents((MANIFESTS / "node-pools" / "gke-gpu-pool.yaml").read_text())
    cluster = ClusterConfig()
    node = pool["spec"]["nodeConfig"]
    assert cluster.gpu_node_selector.items() <= node["labels"].items()
    assert node["taint"] and all(tolerated(t, cluster.gpu_tolerations) for t in node["taint"])
    assert node["guestAccelerator"][0]["count"] == cluster.gpus_per_step


def test_eks_node_group_matches_the_gpu_defaults() -> None:
    (config,) = load_documents((MANIFESTS / "node-pools" / "eks-gpu-nodegroup.yaml").read_text())
    cluster = ClusterConfig()
    (group,) = config["managedNodeGroups"]
    assert cluster.gpu_node_selector.items() <= group["labels"].items()
    assert group["taints"] and all(tolerated(t, cluster.gpu_tolerations) for t in group["taints"])
    assert tolerated({"key": "other", "value": "x", "effect": "NoSchedule"}, cluster.gpu_tolerations) is False


def strip(doc: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in doc["metadata"].items() if k not in ("labels", "namespace")}
    stripped = {**doc, "metadata": meta}
    if doc["kind"] == "ConfigMap":  # compare what the data means, not its layout
        data = doc["data"]
        stripped["data"] = {key: tomllib.loads(value) if key.endswith(".toml") else load_documents(value)
                            for key, value in data.items()}
    return stripped


def plain_manifests() -> dict[tuple[str, str], dict[str, Any]]:
    """The top-level manifests (what `kubectl apply -f manifests/` applies), by (kind, name)."""
    return {(d["kind"], d["metadata"]["name"]): d for path in sorted(MANIFESTS.glob("*.yaml"))
            for d in load_documents(path.read_text(), str(path))}


def test_plain_manifests_are_the_charts_defaults() -> None:
    plain = plain_manifests()
    with helm.Chart.load(CHART) as chart:
        out = chart.render({}, name="burnqed", namespace="burnqed", is_install=True)
    charted = [d for path, text in out.items() if path.endswith(".yaml") and "workflowtemplates" not in path
               for d in load_documents(text)]
    assert sorted((d["kind"], d["metadata"]["name"]) for d in charted) == [
        ("ConfigMap", "burnqed-artifact-repository"), ("ConfigMap", "burnqed-config"),
        ("NetworkPolicy", "burnqed-lean-egress"), ("PriorityClass", "burnqed-cpu"), ("PriorityClass", "burnqed-gpu"),
        ("Role", "burnqed-workflow-executor"), ("RoleBinding", "burnqed-workflow-executor"),
        ("Secret", "burnqed-workflow.service-account-token"), ("ServiceAccount", "burnqed-workflow"),
    ]
    for doc in charted:
        assert strip(plain[(doc["kind"], doc["metadata"]["name"])]) == strip(doc), doc["metadata"]["name"]
    only_plain = sorted(set(plain) - {(d["kind"], d["metadata"]["name"]) for d in charted})
    assert only_plain == [("ClusterRole", "burnqed-preflight"), ("Namespace", "burnqed"), ("Role", "burnqed-submitter")]


def test_plain_manifests_apply_in_order_to_the_configured_names() -> None:
    files = sorted(path.name for path in MANIFESTS.glob("*.yaml"))
    assert files[0] == "00-namespace.yaml"  # kubectl apply -f DIR applies files in name order
    plain = plain_manifests()
    cluster = ClusterConfig()
    namespaced = [d for d in plain.values() if d["kind"] not in ("Namespace", "PriorityClass", "ClusterRole")]
    assert {d["metadata"]["namespace"] for d in namespaced} == {cluster.namespace}
    for kind, name in (("ServiceAccount", cluster.service_account), ("ConfigMap", cluster.config_map),
                       ("ConfigMap", cluster.artifact_repository), ("PriorityClass", cluster.priority_class_gpu),
                       ("PriorityClass", cluster.priority_class_cpu),
                       ("Secret", f"{cluster.service_account}.service-account-token")):
        assert (kind, name) in plain

"""The static manifests agree with the rest: the example GPU node pools carry the label and taint the workflows'
default node selector and tolerations expect; the plain manifests are the chart's default objects, complete for a
plain `kubectl apply -f manifests/`."""

from __future__ import annotations

import tomllib
from typing import Any

import helm_python as helm
import pytest

from burnqed.cluster.render import render_templates
from burnqed.cluster.yamlio import load_documents
from burnqed.config import ClusterConfig, load_config
from burnqed.errors import ConfigError
from tests.cluster.conftest import CHART, MANIFESTS, ROOT, WORKFLOWS, by_name, template


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


@pytest.mark.parametrize("pool", ["gke-gpu-pool.yaml", "eks-gpu-nodegroup.yaml"])
def test_the_example_gpu_pools_hold_the_real_configurations_memory_plan(pool: str) -> None:
    """Each example pool says its GPU's memory (the label the sidecar pods' node affinity requires); the real
    configuration renders for that much memory (the plan holds serving.min_kv_tokens) and its pods' affinity admits
    the pool's nodes."""
    (doc,) = load_documents((MANIFESTS / "node-pools" / pool).read_text())
    labels = doc["spec"]["nodeConfig"]["labels"] if "spec" in doc else doc["managedNodeGroups"][0]["labels"]
    if "managedNodeGroups" in doc:  # scale from zero: the autoscaler learns the label from the tag
        tags = doc["managedNodeGroups"][0]["tags"]
        assert tags["k8s.io/cluster-autoscaler/node-template/label/nvidia.com/gpu.memory"] == labels[
            "nvidia.com/gpu.memory"]
    mib = int(labels["nvidia.com/gpu.memory"])
    real = load_config(ROOT / "configs" / "deepseek-prover-v2-7b.toml", (), {})
    sized = real.model_copy(update={"serving": real.serving.model_copy(update={"gpu_memory_gib": mib / 1024})})
    render_templates(sized, ["iteration"], WORKFLOWS)  # raises when the plan cannot hold min_kv_tokens
    search = template(by_name(render_templates(real, ["iteration"], WORKFLOWS), "burnqed-iteration-1"), "search")
    (term,) = search["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    (requirement,) = term["matchExpressions"]
    assert requirement["key"] == "nvidia.com/gpu.memory" and requirement["operator"] == "Gt"
    assert mib > int(requirement["values"][0])


def test_a_48_gb_gpu_does_not_hold_the_plan() -> None:
    real = load_config(ROOT / "configs" / "deepseek-prover-v2-7b.toml", ["serving.gpu_memory_gib=44.99"], {})
    with pytest.raises(ConfigError, match=r"fewer than serving.min_kv_tokens 32768"):
        render_templates(real, ["iteration"], WORKFLOWS)

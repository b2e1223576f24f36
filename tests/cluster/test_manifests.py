"""The static manifests agree with the rest: the example GPU node pools carry the label and taint the workflows'
default node selector and tolerations expect; the plain RBAC is the chart's RBAC."""

from __future__ import annotations

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
    return {**doc, "metadata": meta}


def test_plain_rbac_is_the_charts() -> None:
    plain = {(d["kind"], d["metadata"]["name"]): d for d in load_documents((MANIFESTS / "rbac.yaml").read_text())}
    with helm.Chart.load(CHART) as chart:
        out = chart.render({}, name="burnqed", namespace="burnqed", is_install=True)
    charted = [d for path in ("serviceaccount.yaml", "rbac.yaml")
               for d in load_documents(out[f"burnqed/templates/{path}"])]
    assert len(charted) == 3
    for doc in charted:
        assert strip(plain[(doc["kind"], doc["metadata"]["name"])]) == strip(doc)
    cluster = ClusterConfig()
    assert plain[("ServiceAccount", cluster.service_account)]["metadata"]["namespace"] == cluster.namespace

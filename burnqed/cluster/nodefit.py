"""Whether a pod fits a node, as the Kubernetes scheduler decides it for `burnqed cluster check`: the largest pod
of each pool (`largest_pods`, from the cluster section's requests), a node's allocatable resources (`fits`) and its
taints (`tolerated`), and one GPU's memory from the node's label (`gpu_mib`).

    sizes = largest_pods(cfg.cluster, rl=cfg.rl.enabled)
    fits(node, sizes["gpu"]) and all(tolerated(t, tolerations) for t in taints)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from burnqed.cluster.memory import parse_quantity
from burnqed.config import ClusterConfig
from burnqed.errors import BurnqedError

GPU = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class PodSize:
    """What one pod requests: CPUs, memory and GPUs."""

    cpu: Decimal
    memory: Decimal  # bytes
    gpus: int

    def describe(self) -> str:
        gib = self.memory / Decimal(2**30)
        return f"{self.cpu.normalize():f} CPUs, {gib:.0f}Gi" + (f", {self.gpus} GPU" if self.gpus else "")


def largest_pods(cluster: ClusterConfig, *, rl: bool = False, planner_gpus: int = 0,
                 rl_sidecar: bool = False) -> dict[str, PodSize]:
    """The largest pod each pool must hold (requests summed over the pod's running containers); with `rl`
    (rl.enabled) the GPU pool also the rl step's: a training pod's and a search pod's requests in one container, and
    with `rl_sidecar` (`gpu_plan.rl_sidecar`) its SGLang sidecar beside it (cluster.sglang_*, gpus_per_step GPUs of
    its own); with `planner_gpus` (`gpu_plan.planner_pod_gpus`) a search pod also holds the planner's sidecar on that
    many GPUs."""
    def q(text: str, key: str) -> Decimal:
        return parse_quantity(text, f"cluster.{key}")

    sidecars = 2 if planner_gpus else 1  # the planner's sidecar asks what the policy's does (cluster.sglang_*)
    search = PodSize(q(cluster.search_cpu, "search_cpu") + sidecars * q(cluster.sglang_cpu, "sglang_cpu"),
                     q(cluster.search_memory, "search_memory") + sidecars * q(cluster.sglang_memory, "sglang_memory"),
                     cluster.gpus_per_step + planner_gpus)
    train = PodSize(q(cluster.train_cpu, "train_cpu"), q(cluster.train_memory, "train_memory"), cluster.gpus_per_step)
    gpu_pods = [search, train]
    if rl:  # one GPU (burnqed rl is one process), and the served engine's sidecar on GPUs of its own
        served = 1 if rl_sidecar else 0
        gpu_pods.append(PodSize(
            train.cpu + q(cluster.search_cpu, "search_cpu") + served * q(cluster.sglang_cpu, "sglang_cpu"),
            train.memory + q(cluster.search_memory, "search_memory")
            + served * q(cluster.sglang_memory, "sglang_memory"),
            1 + served * cluster.gpus_per_step))
    lean = PodSize(q(cluster.search_cpu, "search_cpu"), q(cluster.search_memory, "search_memory"), 0)
    step = PodSize(q(cluster.step_cpu, "step_cpu"), q(cluster.step_memory, "step_memory"), 0)
    return {"gpu": PodSize(max(p.cpu for p in gpu_pods), max(p.memory for p in gpu_pods),
                           max(p.gpus for p in gpu_pods)),
            "cpu": PodSize(max(lean.cpu, step.cpu), max(lean.memory, step.memory), 0)}


def tolerated(taint: Mapping[str, Any], tolerations: Iterable[Mapping[str, Any]]) -> bool:
    """Kubernetes' toleration matching (an empty key with Exists tolerates everything)."""
    for toleration in tolerations:
        if toleration.get("effect") not in (None, "", taint.get("effect")):
            continue
        operator = toleration.get("operator") or "Equal"
        if operator == "Exists" and toleration.get("key") in (None, "", taint.get("key")):
            return True
        if (operator == "Equal" and toleration.get("key") == taint.get("key")
                and (toleration.get("value") or "") == (taint.get("value") or "")):
            return True
    return False


def fits(node: Mapping[str, Any], size: PodSize) -> bool:
    """The node's allocatable CPU, memory and GPUs hold `size` (False when they cannot be read)."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    try:
        cpu = parse_quantity(str(allocatable.get("cpu", "0")), "allocatable cpu")
        memory = parse_quantity(str(allocatable.get("memory", "0")), "allocatable memory")
        gpus = int(parse_quantity(str(allocatable.get(GPU, "0")), "allocatable gpu"))
    except BurnqedError:
        return False
    return cpu >= size.cpu and memory >= size.memory and gpus >= size.gpus


def gpu_mib(node: Mapping[str, Any], label: str) -> int:
    """One GPU's memory in MiB from the node's label; 0 when it is missing or not a number."""
    value = str(((node.get("metadata") or {}).get("labels") or {}).get(label, ""))
    return int(value) if value.isdigit() else 0

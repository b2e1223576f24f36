"""Memory plans of pods, checked when the workflows are rendered (docs/cluster.md, "Memory"): a Lean container's
memory limit must hold every Lean worker at its recycling limit plus burnqed's own process, because an OOM kill
is a failure the workflows do not retry.

    plan = lean_memory_plan(cfg.lean, cpu_request="16", memory_limit="96Gi", main_memory="4Gi",
                            keys=PlanKeys(cpu="cluster.search_cpu", memory="cluster.search_memory",
                                          main="cluster.lean_main_memory"), where="step search")
    plan.workers, plan.recycle_rss_mb      # what the pod runs: the workflows pin these in its environment
    plan.worker_limit_mb                   # each worker's hard limit there: its share, or lean.worker_memory_limit_mb

    add_quantities(("8", "cluster.train_cpu"), ("16", "cluster.search_cpu"))   # "24": the rl container's request

An unset `lean.workers` is resolved here from the pod's request and limit (inside a container the core count and
free memory describe the node). A plan that does not fit is a `ConfigError` (exit 2) with the numbers and the keys.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from burnqed.base import resources
from burnqed.config import LeanConfig
from burnqed.errors import ConfigError

MIB = Decimal(2**20)
MAX_AUTO_WORKERS = resources.MAX_AUTO_WORKERS  # the machine's rule (burnqed.base.resources), on the pod's numbers
CPU_SHARE = Decimal(str(resources.CPU_SHARE))

_SUFFIXES = {
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40), "Pi": Decimal(2**50),
    "Ei": Decimal(2**60), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"), "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")


def parse_quantity(text: str, key: str) -> Decimal:
    """A Kubernetes resource quantity ("96Gi", "16", "500m", "1.5e3") as a number (bytes, cores);
    `ConfigError` naming `key` when it is not one."""
    found = _QUANTITY.match(text.strip())
    if found is None:
        raise ConfigError(f"{key} = {text!r} is not a Kubernetes quantity (e.g. 96Gi, 64000Mi, 16, 500m)")
    number, suffix = Decimal(found.group(1)), found.group(2) or ""
    try:
        scale = _SUFFIXES[suffix] if suffix in _SUFFIXES else Decimal(10) ** int(suffix[1:])
    except (InvalidOperation, ValueError):
        raise ConfigError(f"{key} = {text!r} is not a Kubernetes quantity") from None
    return number * scale


def add_quantities(*parts: tuple[str, str]) -> str:
    """The sum of Kubernetes quantities given as (text, key) pairs, as a quantity: whole Gi or Mi when it is one,
    else millicores or bytes (`ConfigError` naming the key of a part that is no quantity)."""
    total = sum((parse_quantity(text, key) for text, key in parts), Decimal(0))
    if all(text.strip().endswith(("Ki", "Mi", "Gi", "Ti")) for text, _ in parts):
        for suffix in ("Gi", "Mi"):
            scaled = total / _SUFFIXES[suffix]
            if scaled == scaled.to_integral_value():
                return f"{int(scaled)}{suffix}"
        return str(int(total))
    if total == total.to_integral_value():
        return str(int(total))
    return f"{int(total * 1000)}m"


@dataclass(frozen=True, slots=True)
class PlanKeys:
    """The configuration keys a refusal tells the user to change."""

    cpu: str
    memory: str
    main: str


@dataclass(frozen=True, slots=True)
class LeanMemoryPlan:
    """How a Lean container's memory limit is spent (MiB)."""

    workers: int
    recycle_rss_mb: int
    main_mib: int
    limit_mib: int
    resolved: bool  # workers was unset and resolved from the container's CPU request and memory limit
    verifiers: int = 0  # lean.verifier_workers: Lean processes beside the search workers
    configured_limit_mb: int = 0  # lean.worker_memory_limit_mb (0 = none)

    @property
    def needed_mib(self) -> int:
        return (self.workers + self.verifiers) * self.recycle_rss_mb + self.main_mib

    @property
    def worker_limit_mb(self) -> int:
        """Each Lean process's hard memory limit in the pod (lean.worker_memory_limit_mb, pinned): its share of the
        container's limit beside burnqed's own process, lower than the configured limit when that does not fit,
        so that the workers at their limits never reach the container's (whose OOM kill takes every theorem and
        is not retried); a worker past its share fails its request alone and is replaced."""
        share = (self.limit_mib - self.main_mib) // (self.workers + self.verifiers)
        return min(share, self.configured_limit_mb) if self.configured_limit_mb else share


def lean_memory_plan(
    lean: LeanConfig, *, cpu_request: str, memory_limit: str, main_memory: str, keys: PlanKeys, where: str
) -> LeanMemoryPlan:
    """The plan of a container running `lean`'s workers under `memory_limit` (the rule: docs/cluster.md, "Memory")."""
    limit_mib = int(parse_quantity(memory_limit, keys.memory) / MIB)
    main_mib = int(-(-parse_quantity(main_memory, keys.main) // MIB))  # rounded up: an allowance
    per_worker = lean.recycle_rss_mb
    if per_worker == 0:
        raise ConfigError(
            f"{where}: lean.recycle_rss_mb = 0 never recycles a Lean worker, so no memory limit can be checked to "
            f"hold it (an OOM kill is not retried): set lean.recycle_rss_mb (MiB, e.g. 7000) for cluster pods"
        )
    if lean.workers is None:
        by_cpu = int(parse_quantity(cpu_request, keys.cpu) * CPU_SHARE)
        by_memory = (limit_mib - main_mib) // per_worker - lean.verifier_workers
        workers = min(MAX_AUTO_WORKERS, by_cpu, by_memory)
        if workers < 1:
            raise ConfigError(
                f"{where}: the Lean container ({keys.cpu}={cpu_request}, {keys.memory}={memory_limit} = {limit_mib} "
                f"MiB) has room for no Lean worker: one needs lean.recycle_rss_mb={per_worker} MiB beside the "
                f"lean.verifier_workers={lean.verifier_workers} verifiers and "
                f"{keys.main}={main_memory} ({main_mib} MiB) for burnqed itself and ¾ of a CPU; raise {keys.memory} "
                f"/ {keys.cpu} or lower lean.recycle_rss_mb"
            )
        return LeanMemoryPlan(workers, per_worker, main_mib, limit_mib, resolved=True,
                              verifiers=lean.verifier_workers, configured_limit_mb=lean.worker_memory_limit_mb)
    plan = LeanMemoryPlan(lean.workers, per_worker, main_mib, limit_mib, resolved=False,
                          verifiers=lean.verifier_workers, configured_limit_mb=lean.worker_memory_limit_mb)
    if plan.needed_mib > limit_mib:
        raise ConfigError(
            f"{where}: the Lean container's memory limit {keys.memory}={memory_limit} ({limit_mib} MiB) is below "
            f"(lean.workers={lean.workers} + lean.verifier_workers={lean.verifier_workers}) × "
            f"lean.recycle_rss_mb={per_worker} MiB + {keys.main}={main_memory} "
            f"({main_mib} MiB) for burnqed itself = {plan.needed_mib} MiB: raise {keys.memory}, or lower "
            f"lean.workers or lean.recycle_rss_mb (an OOM kill is not retried)"
        )
    return plan

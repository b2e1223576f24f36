"""How many Lean workers this machine holds when `lean.workers` is unset.

    auto_workers(cores=16, memory=64 * 2**30, per_worker=6000 * 2**20)   # -> 10: memory is the limit
    machine_workers(per_worker_mb=6000)                                  # the same, probing this machine

A Mathlib REPL takes several GB, and 30 of them once ran a 200 GB machine out of memory: the count is capped by
cores (a quarter is left to burnqed itself), by available memory and by a fixed ceiling. The cluster's memory
plans (`burnqed.cluster.memory`) apply the same rule to a pod's request and limit instead of the node.
"""

from __future__ import annotations

import os

MAX_AUTO_WORKERS = 16
CPU_SHARE = 0.75


def auto_workers(cores: int, memory: float, per_worker: float) -> int:
    """min(16, ¾ × `cores`, `memory` / `per_worker`), rounded down, at least 1 (`memory` and `per_worker` in one
    unit)."""
    by_cores = int(cores * CPU_SHARE)
    by_memory = int(memory / per_worker)
    return max(1, min(MAX_AUTO_WORKERS, by_cores, by_memory))


def machine_workers(per_worker_mb: int) -> int:
    """`auto_workers` for this machine: its core count and the memory available now."""
    import psutil

    return auto_workers(os.cpu_count() or 1, psutil.virtual_memory().available, per_worker_mb * 1024 * 1024)

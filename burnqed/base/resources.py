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


# An explicit `lean.workers` may oversubscribe the cores (a worker waits on the policy much of the time), up to
# this many Lean processes per core; beyond it the machine thrashes (1000 workers on 2 cores: load 278, no
# progress for minutes).
WORKERS_PER_CORE = 4


def workers_that_fit(cores: int, memory: float, per_worker: float) -> int:
    """The most Lean processes this machine can run at once: WORKERS_PER_CORE per core, and `memory` /
    `per_worker` (both in one unit) — a process beyond either limit makes everything slower, not faster."""
    return max(0, min(WORKERS_PER_CORE * cores, int(memory / per_worker)))


def check_workers_fit(workers: int, verifiers: int, per_worker_mb: int) -> None:
    """Refuse (ConfigError, exit 2) an explicit worker count this machine cannot hold, naming the largest that fits
    and the limit that binds; called before the first worker starts. Memory is the machine's total (what is free
    changes by the minute; the automatic count uses the free memory)."""
    import psutil

    from burnqed.errors import ConfigError

    cores = os.cpu_count() or 1
    total = psutil.virtual_memory().total
    fit = workers_that_fit(cores, total, per_worker_mb * 1024 * 1024)
    if workers + verifiers <= fit:
        return
    largest = fit - verifiers
    by_cores = WORKERS_PER_CORE * cores <= total / (per_worker_mb * 1024 * 1024)
    limit = (f"{cores} cores × {WORKERS_PER_CORE}" if by_cores else
             f"{total / 2**30:.1f} GiB of memory / lean.worker_memory_mb={per_worker_mb}")
    plus = f" + {verifiers} verifier worker{'s' if verifiers != 1 else ''} (lean.verifier_workers)" if verifiers else ""
    fix = (f"set lean.workers={largest} or fewer" if largest >= 1 else
           "set lean.verifier_workers=0 and lean.workers=1" if fit >= 1 else
           "lower lean.worker_memory_mb if the workers are smaller")
    raise ConfigError(f"lean.workers={workers}{plus} does not fit this machine ({limit} = {fit} Lean processes): "
                      f"{fix} (unset, it picks what fits)")

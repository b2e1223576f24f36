"""The automatic Lean worker count: exact values at each of its limits."""

from __future__ import annotations

import pytest

from burnqed.base.resources import auto_workers, machine_workers

GIB = 2**30
MIB = 2**20


@pytest.mark.parametrize(
    ("cores", "memory", "per_worker", "expected"),
    [
        (16, 64 * GIB, 6000 * MIB, 10),  # memory: 65536 / 6000 = 10.9
        (8, 512 * GIB, 6000 * MIB, 6),  # cores: 0.75 × 8
        (7, 512 * GIB, 6000 * MIB, 5),  # 0.75 × 7 = 5.25, rounded down
        (128, 2048 * GIB, 6000 * MIB, 16),  # the ceiling
        (1, 64 * GIB, 6000 * MIB, 1),  # 0.75 × 1 rounds to 0: at least one
        (16, 1 * GIB, 6000 * MIB, 1),  # not even one fits: still one
        (4, 12000.0, 6000.0, 2),  # any unit, as long as both are in it
    ],
)
def test_auto_workers_exact(cores: int, memory: float, per_worker: float, expected: int) -> None:
    assert auto_workers(cores, memory, per_worker) == expected


def test_machine_workers_is_auto_workers_on_this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    import psutil

    class Memory:
        available = 20 * GIB

    monkeypatch.setattr("os.cpu_count", lambda: 12)
    monkeypatch.setattr(psutil, "virtual_memory", Memory)
    assert machine_workers(per_worker_mb=6000) == auto_workers(12, 20 * GIB, 6000 * MIB) == 3

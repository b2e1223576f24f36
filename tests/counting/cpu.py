"""An opt-in account of the CPU seconds each test costs, its waited-for children's included:

    BURNQED_CPU_ACCOUNT=/tmp/cpu.tsv .venv/bin/python -m pytest tests/     # any -n
    .venv/bin/python -m tests.counting.cpu /tmp/cpu.tsv 30                  # per test file, most CPU first

Each test appends one line `NODEID<TAB>WALL<TAB>SELF<TAB>CHILDREN` (seconds; SELF the test process's user+sys,
CHILDREN that of the processes it reaped, `resource.RUSAGE_CHILDREN`) when its protocol (setup, call, teardown)
ends; session fixtures count to the test that built them. A process nobody waits for (a double-forked daemon) is
not counted, nor is one a child left unreaped. On a machine whose cores are all busy the suite's wall time is its
CPU seconds over its cores, so this is the figure a cut must move; wall seconds (--durations, JUnit) also count
waits that cost nothing while another worker computes."""

from __future__ import annotations

import resource
import sys
from pathlib import Path


def used() -> tuple[float, float]:
    """User+sys seconds of this process, and of its reaped children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def record(path: Path, nodeid: str, wall: float, before: tuple[float, float]) -> None:
    """Append the line of test `nodeid` whose protocol began at `before` (`used()`) and took `wall` seconds."""
    own, children = used()
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(f"{nodeid}\t{wall:.2f}\t{own - before[0]:.2f}\t{children - before[1]:.2f}\n")


def summary(path: Path, top: int) -> list[str]:
    """Per test file: CPU seconds (self + children), wall seconds, tests; the `top` files with most CPU, then all."""
    per_file: dict[str, list[float]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        nodeid, wall, own, children = line.split("\t")
        row = per_file.setdefault(nodeid.split("::", 1)[0], [0.0, 0.0, 0.0, 0.0])
        row[0] += float(own) + float(children)
        row[1] += float(wall)
        row[2] += 1
        row[3] += float(children)
    ordered = sorted(per_file.items(), key=lambda item: -item[1][0])
    total = sum(row[0] for row in per_file.values())
    lines = [f"{cpu:8.1f} CPU-s {cpu / total:6.1%} {wall:8.1f} wall-s {int(n):4d} tests "
             f"({children:.0f} in children)  {name}" for name, (cpu, wall, n, children) in ordered[:top]]
    return [*lines, f"{total:8.1f} CPU-s in all, {sum(r[1] for r in per_file.values()):.0f} wall-s, "
                    f"{sum(int(r[2]) for r in per_file.values())} tests, {len(per_file)} files"]


if __name__ == "__main__":
    print("\n".join(summary(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 30)))

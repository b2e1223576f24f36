"""Tactic round trips per second through `LeanPool` vs a raw pipe loop, against a zero-latency double.

    .venv/bin/python benchmarks/lean_pool.py [--requests 4000] [--workers 1,2,4]

For each worker count: a raw thread loop over the pipes, the asyncio floor, and the full pool client. Prints the
rates, the client overhead (target under 10 %) and the pool's scaling (near-linear up to the core count)
(docs/benchmarks.md, "lean_pool.py").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from burnqed.lean.client import LeanWorker  # noqa: E402
from burnqed.lean.pool import LeanPool  # noqa: E402
from burnqed.records.replies import TacticKind  # noqa: E402

DOUBLE = [sys.executable, str(ROOT / "tests" / "doubles" / "lean_double.py")]
START = b'goal.start {"expr":"p"}\n'
TACTIC = b'goal.tactic {"stateId":0,"goalId":0,"tactic":"intro x"}\n'  # what the client sends


def raw_rate(workers: int, requests: int) -> float:
    """Round trips/s of k synchronous pipe loops (one thread each), total over all workers."""
    procs = [subprocess.Popen(DOUBLE, stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in range(workers)]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdin is not None
            assert proc.stdout.readline() == b"ready.\n"
            proc.stdin.write(START)
            proc.stdin.flush()
            proc.stdout.readline()
        per_worker = requests // workers
        barrier = threading.Barrier(workers + 1)

        def loop(proc: subprocess.Popen[bytes]) -> None:
            assert proc.stdout is not None and proc.stdin is not None
            stdin, stdout = proc.stdin, proc.stdout
            barrier.wait()
            for _ in range(per_worker):
                stdin.write(TACTIC)
                stdin.flush()
                if not stdout.readline().startswith(b'{"nextStateId"'):
                    raise RuntimeError("the double did not answer")

        threads = [threading.Thread(target=loop, args=(p,)) for p in procs]
        for thread in threads:
            thread.start()
        barrier.wait()
        began = time.perf_counter()
        for thread in threads:
            thread.join()
        return per_worker * workers / (time.perf_counter() - began)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


async def floor_rate_async(workers: int, requests: int) -> float:
    """The asyncio floor: k minimal asyncio loops (write, readline; no parsing, no watchdog, no pool)."""
    procs = [
        await asyncio.create_subprocess_exec(*DOUBLE, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        for _ in range(workers)
    ]
    per_worker = requests // workers
    try:
        for proc in procs:
            assert proc.stdin is not None and proc.stdout is not None
            await proc.stdout.readline()
            proc.stdin.write(START)
            await proc.stdout.readline()

        async def loop(proc: asyncio.subprocess.Process) -> None:
            assert proc.stdin is not None and proc.stdout is not None
            for _ in range(per_worker):
                proc.stdin.write(TACTIC)
                await proc.stdin.drain()
                await proc.stdout.readline()

        began = time.perf_counter()
        await asyncio.gather(*(loop(p) for p in procs))
        return per_worker * workers / (time.perf_counter() - began)
    finally:
        for proc in procs:
            proc.kill()
            await proc.wait()


def floor_rate(workers: int, requests: int) -> float:
    return asyncio.run(floor_rate_async(workers, requests))


async def pool_rate_async(workers: int, requests: int) -> float:
    pool = LeanPool(lambda: LeanWorker(DOUBLE, ready_timeout_s=30), workers, recycle_requests=10**9)
    per_worker = requests // workers
    async with pool:
        ready = asyncio.Event()

        async def theorem() -> None:
            async with pool.lease() as lean:
                state = await lean.start_goal(expr="p")
                await ready.wait()
                for _ in range(per_worker):
                    result = await lean.tactic(state, "intro x")
                    assert result.kind is TacticKind.SUCCESS

        tasks = [asyncio.create_task(theorem()) for _ in range(workers)]
        await asyncio.sleep(0.2)  # every theorem holds its worker and has started its goal
        began = time.perf_counter()
        ready.set()
        await asyncio.gather(*tasks)
        return per_worker * workers / (time.perf_counter() - began)


def pool_rate(workers: int, requests: int) -> float:
    return asyncio.run(pool_rate_async(workers, requests))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=4000, help="round trips per measurement")
    parser.add_argument("--workers", default="1,2,4", help="comma-separated worker counts")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs per measurement")
    args = parser.parse_args()
    counts = [int(k) for k in args.workers.split(",")]
    print(f"cores: {os.cpu_count()}, requests per measurement: {args.requests}, best of {args.repeat}")
    print(f"{'workers':>7} {'raw rt/s':>9} {'floor rt/s':>10} {'pool rt/s':>9} {'overhead':>8} "
          f"{'own':>6} {'pool scaling':>12}")
    base = 0.0
    for k in counts:
        raw = max(raw_rate(k, args.requests) for _ in range(args.repeat))
        floor = max(floor_rate(k, args.requests) for _ in range(args.repeat))
        pooled = max(pool_rate(k, args.requests) for _ in range(args.repeat))
        base = base or pooled / k
        print(f"{k:>7} {raw:>9.0f} {floor:>10.0f} {pooled:>9.0f} {1 - pooled / raw:>8.1%} "
              f"{1 - pooled / floor:>6.1%} {pooled / base:>11.2f}x")

if __name__ == "__main__":
    main()

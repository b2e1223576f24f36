"""Latency of minilean's `goal.tactic`, per tactic head, on the generated world.

    .venv/bin/python benchmarks/minilean_latency.py [--seed 0] [--limit 0]

Every recorded transition of the world is sent to an in-process minilean `Server` as the client's `goal.tactic`
line and `Server.handle` is timed. Prints p50/p90/p99/max per tactic head and overall, the number of z3 calls, and
the first z3 call's start-up apart as `first` (docs/benchmarks.md, "minilean_latency.py").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from leankit.world import generate_world  # noqa: E402
from minilean.server import Server  # noqa: E402


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, default=0, help="theorems to use (0: all)")
    args = parser.parse_args()
    theorems = generate_world(args.seed).theorems
    if args.limit:
        theorems = theorems[: args.limit]
    server = Server()
    times: dict[str, list[float]] = defaultdict(list)
    first: float | None = None
    for theorem in theorems:
        start = json.loads(server.handle(f"goal.start {json.dumps({'expr': theorem.statement}, ensure_ascii=False)}"))
        states = {theorem.root: start["stateId"]}
        for proof in theorem.proofs:
            state = start["stateId"]
            for tactic in proof:
                payload = {"stateId": state, "goalId": 0, "tactic": tactic}
                line = f"goal.tactic {json.dumps(payload, ensure_ascii=False)}"
                began = time.perf_counter()
                reply = json.loads(server.handle(line))
                elapsed = (time.perf_counter() - began) * 1000
                head = tactic.split()[0]
                if first is None and head in ("linarith", "nlinarith", "omega", "tauto"):
                    first = elapsed
                else:
                    times[head].append(elapsed)
                if "nextStateId" not in reply:
                    break
                state = reply["nextStateId"]
        for transition in theorem.transitions:
            if transition.error is None or transition.goal not in states:
                continue
            payload = {"stateId": states[transition.goal], "goalId": 0, "tactic": transition.tactic}
            began = time.perf_counter()
            server.handle(f"goal.tactic {json.dumps(payload, ensure_ascii=False)}")
            times[transition.tactic.split()[0]].append((time.perf_counter() - began) * 1000)
    every = [t for values in times.values() for t in values]
    print(f"{'tactic':<14}{'n':>6}{'p50 ms':>10}{'p90 ms':>10}{'p99 ms':>10}{'max ms':>10}")
    for head, values in sorted(times.items(), key=lambda item: -len(item[1])):
        print(f"{head:<14}{len(values):>6}{statistics.median(values):>10.2f}{_quantile(values, 0.9):>10.2f}"
              f"{_quantile(values, 0.99):>10.2f}{max(values):>10.2f}")
    print(f"{'all':<14}{len(every):>6}{statistics.median(every):>10.2f}{_quantile(every, 0.9):>10.2f}"
          f"{_quantile(every, 0.99):>10.2f}{max(every):>10.2f}")
    if first is not None:
        print(f"first z3-backed tactic of the process: {first:.1f} ms (z3 start-up included)")


if __name__ == "__main__":
    main()

"""The judge's cost: N counted proofs judged by a comparator batched per header (one Lake project, one run) against
one project per theorem, and against the compile burnqed already ran on each proof (docs/benchmarks.md,
"judge_cost.py"; docs/results.md).

    PYTHONPATH=. .venv/bin/python benchmarks/judge_cost.py [--theorems 40] [--comparator ARGV_JSON]

The proofs: `theorem judge_cost_K (n : Nat) : n + K = K + n := by omega`, one header (none). The comparator is
tests/doubles/comparator_double.py by default (minilean in its process: its cost is a Python process start and
minilean's compile of both modules, not a real Lean's `lake build`, export and kernel replay); `--comparator` names
another argv (`["lake", "comparator", "--config", "{config}"]` in a Lake project's Lean). The search's own compile
of each proof is timed on minilean in this process (`frontend.process` of the proof with `#print axioms`), the part
of the search the judge repeats. Prints the wall time of each arm and the ratios measured in this run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from burnqed.lean.comparator import ComparatorSettings, JudgeCase, judge
from minilean.server import Server

DOUBLE = Path(__file__).parents[1] / "tests" / "doubles" / "comparator_double.py"


def cases(n: int) -> list[JudgeCase]:
    made = []
    for k in range(n):
        statement = f"(n : Nat) : n + {k} = {k} + n"
        made.append(JudgeCase(f"judge_cost_{k}", "", f"theorem judge_cost_{k} {statement}", "",
                              f"theorem judge_cost_{k} {statement} := by\n  omega\n"))
    return made


def timed_judge(batch: list[JudgeCase], settings: ComparatorSettings, one_each: bool) -> tuple[float, int]:
    """Wall seconds to judge `batch` (one call, or one call a theorem), and how many it accepted."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        groups = [[c] for c in batch] if one_each else [batch]
        verdicts = [v for i, group in enumerate(groups)
                    for v in asyncio.run(judge(group, settings, Path(work) / str(i)))]
    return time.perf_counter() - start, sum(v.accepted for v in verdicts)


def compile_time(batch: list[JudgeCase]) -> float:
    start = time.perf_counter()
    for case in batch:
        text = f"{case.solution_body}\n#print axioms {case.name}\n"
        Server().frontend_process({"file": text, "readHeader": False, "inheritEnv": False})
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--theorems", type=int, default=40)
    parser.add_argument("--comparator", default=json.dumps([sys.executable, str(DOUBLE), "--config", "{config}"]))
    args = parser.parse_args()
    settings = ComparatorSettings(tuple(json.loads(args.comparator)), timeout_s=600.0)
    batch = cases(args.theorems)
    print(f"load average {os.getloadavg()[0]:.2f}; {len(batch)} proofs, comparator {' '.join(settings.command)}")
    compiled = compile_time(batch)
    batched, ok_batched = timed_judge(batch, settings, one_each=False)
    single, ok_single = timed_judge(batch, settings, one_each=True)
    print(f"{'the search compiles (minilean, in process)':<44} {compiled:7.2f} s")
    print(f"{'judge batched (1 project)':<44} {batched:7.2f} s, {ok_batched} accepted")
    print(f"{f'judge one project per theorem ({len(batch)})':<44} {single:7.2f} s, {ok_single} accepted")
    print(f"one project per theorem / batched: {single / batched:.1f}×; batched judge / the compiles: "
          f"{batched / compiled:.1f}×")


if __name__ == "__main__":
    main()

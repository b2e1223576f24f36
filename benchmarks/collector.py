"""What Python's cyclic collector costs a burnqed process while it imports its training stack (torch, transformers'
model classes and Trainer, TRL, peft), with CPython's thresholds and with `burnqed.base.collector.tune_collector`.

    .venv/bin/python benchmarks/collector.py [--runs 3]

Each run is a fresh interpreter (the imports are what is measured; byte-compiled files already on disk), the two
settings alternated. Prints, per setting, the median CPU seconds of the process, the collections of each generation
and the CPU seconds spent in them, then the ratio tuned / default of the process's CPU (docs/benchmarks.md,
"collector.py").
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[1]

PROBE = """
import gc, json, os, sys, time
if sys.argv[1] == "tuned":
    from burnqed.base.collector import tune_collector
    tune_collector()
runs, spent, began = [0, 0, 0], [0.0, 0.0, 0.0], {}
def watch(phase, info):
    if phase == "start":
        began[info["generation"]] = time.process_time()
    else:
        runs[info["generation"]] += 1
        spent[info["generation"]] += time.process_time() - began[info["generation"]]
gc.callbacks.append(watch)
import torch
from transformers import AutoModelForCausalLM, Trainer
import peft, trl
from trl import SFTTrainer, GRPOTrainer
gc.callbacks.remove(watch)
times = os.times()
print(json.dumps({"cpu": times.user + times.system, "runs": runs, "spent": spent}))
"""


@dataclass(frozen=True)
class Probe:
    cpu: float          # the process's user + system seconds
    runs: list[int]     # collections of generations 0, 1, 2
    spent: list[float]  # CPU seconds in them


def measure(setting: str) -> Probe:
    """One fresh interpreter importing the stack under `setting` ("default" or "tuned")."""
    done = subprocess.run([sys.executable, "-c", PROBE, setting], capture_output=True, text=True, check=True,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    return Probe(**json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh interpreters per setting (median reported)")
    args = parser.parse_args()
    found: dict[str, list[Probe]] = {"default": [], "tuned": []}
    for _ in range(args.runs):
        for setting, results in found.items():
            results.append(measure(setting))
    medians = {}
    for setting, results in found.items():
        cpu = statistics.median(r.cpu for r in results)
        runs = [statistics.median(r.runs[g] for r in results) for g in range(3)]
        spent = [statistics.median(r.spent[g] for r in results) for g in range(3)]
        medians[setting] = cpu
        print(f"{setting:8s} {cpu:5.2f} CPU-s; collections per generation {runs}, "
              f"CPU-s in them {[round(s, 2) for s in spent]}")
    print(f"tuned / default: {medians['tuned'] / medians['default']:.2f} of the process's CPU seconds")


if __name__ == "__main__":
    main()

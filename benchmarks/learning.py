"""Does expert iteration learn on the embedded world? Two iterations from an empty folder, for several seeds.

    .venv/bin/python benchmarks/learning.py [--seeds 0,1,2] [--workdir DIR] [--jobs 1]

For each seed S it runs, under `nice -n 10`, `burnqed iterate --iter 0` then `--iter 1` on the embedded defaults
in a fresh run root, with `policy.seed`, `sft.seed` and `ebm.seed` set to S (the world itself and the base model
are the same for every seed, like a fixed benchmark and a fixed pretrained model). The tiny base model is built
once first, into the shared `$BURNQED_HOME` of the work folder, so every seed's timing excludes it.

Prints, per seed and as mean ± sd over the seeds, the solve rate at the largest eval budget of the untrained
base policy (iteration 0's eval-base), iteration 0 and iteration 1 (its main eval, with the value model, and
its LLM-only ablation), on the generated world's test theorems, on the bundled hand-written test theorems and on
both; the gains base → 0 → 1 in points; the report's go/no-go gates; wall and CPU seconds per iteration;
and the test theorems solved per world template (taught, held out, trap). Exit code 1 when a run fails.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from burnqed.world.checked import embedded_world  # noqa: E402

WORLD = "burnqed-world"
BUNDLED = "burnqed-bundled"
EVAL_BUDGETS = (10, 50, 100)
GROUPS = (("world", WORLD), ("bundled", BUNDLED), ("all", None))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(argv: list[str], env: dict[str, str], log: Path) -> tuple[float, float]:
    """Run a burnqed command under nice; (wall s, CPU s of it and its children). Exit on failure."""
    started, cpu = time.monotonic(), _children_cpu()
    with log.open("a", encoding="utf-8") as out:
        done = subprocess.run(["nice", "-n", "10", sys.executable, "-m", "burnqed.cli", *argv], env=env,
                              stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        print(f"`burnqed {' '.join(argv)}` failed (exit {done.returncode}); see {log}", file=sys.stderr)
        raise SystemExit(1)
    return time.monotonic() - started, _children_cpu() - cpu


def _rate(result: dict[str, Any], group: str | None) -> float:
    largest = result["budgets"][-1]
    if group is None:
        return float(largest["rate"])
    rows = [g for g in result["groups"] if g["budget"] == largest["budget"] and g["group"] == group]
    return float(rows[0]["rate"]) if rows else float("nan")


def _families(result: dict[str, Any]) -> Counter[str]:
    solved: Counter[str] = Counter()
    for theorem in result["per_theorem"]:
        if theorem["name"].startswith("world_") and theorem["proved"]:
            solved[theorem["name"].removeprefix("world_").rsplit("_", 1)[0]] += 1
    return solved


def _mean_sd(values: list[float]) -> str:
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{100 * mean:5.1f} ± {100 * sd:4.1f}"


def run_seed(seed: int, workdir: Path, env: dict[str, str], jobs: int) -> dict[str, Any]:
    root = workdir / f"seed-{seed}" / "runs"
    log = workdir / f"seed-{seed}" / "log.txt"
    root.parent.mkdir(parents=True, exist_ok=True)
    sets = [arg for key in ("policy.seed", "sft.seed", "ebm.seed", "data.world_seed")
            for arg in ("--set", f"{key}={seed}")]
    sets += ["--set", f"pipeline.eval_budgets={json.dumps(list(EVAL_BUDGETS))}"]
    times_path = root.parent / "times.json"
    times: dict[str, Any] = json.loads(times_path.read_text(encoding="utf-8")) if times_path.is_file() else {}
    for iteration in (0, 1):
        if (root / f"iter_{iteration}" / "report" / "report.json").is_file() and str(iteration) in times:
            continue
        load = os.getloadavg()[0]
        wall, cpu = _run(["iterate", "--iter", str(iteration), "--root", str(root), "--jobs", str(jobs),
                          *sets], env, log)
        times[str(iteration)] = {"wall_s": wall, "cpu_s": cpu, "load_before": load, "load_after": os.getloadavg()[0]}
        times_path.write_text(json.dumps(times, indent=1), encoding="utf-8")
        print(f"  seed {seed}: iteration {iteration} in {wall:.0f} s wall, {cpu:.0f} s CPU", flush=True)
    evals = {
        "base": root / "iter_0" / "eval-base" / "eval.json",
        "iter 0": root / "iter_0" / "eval" / "eval.json",
        "iter 1": root / "iter_1" / "eval" / "eval.json",
        "iter 1 LLM only": root / "iter_1" / "eval" / "eval-noebm.json",
    }
    results = {label: json.loads(path.read_text(encoding="utf-8")) for label, path in evals.items()}
    report = json.loads((root / "iter_1" / "report" / "report.json").read_text(encoding="utf-8"))
    return {"seed": seed, "results": results, "times": times,
            "gates": {gate["name"]: gate["passed"] for gate in report["gates"]}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    parser.add_argument("--workdir", type=Path, default=None, help="work folder (default: a new temporary one)")
    parser.add_argument("--jobs", type=int, default=1, help="search shards run at once (burnqed iterate --jobs)")
    args = parser.parse_args(argv)
    seeds = [int(part) for part in args.seeds.split(",") if part.strip()]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="burnqed-learning-"))
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "BURNQED_HOME": str(workdir / "home")}
    env.pop("BURNQED_CONFIG", None)
    env = {key: value for key, value in env.items() if not key.startswith("BURNQED_") or key == "BURNQED_HOME"}
    print(f"work folder {workdir}; seeds {seeds}", flush=True)
    model = workdir / "home" / "models" / "tiny-v3"
    if not model.is_dir():
        build_s, _ = _run(["model", "init-tiny", "--output", str(model)], env, workdir / "init-tiny.log")
        print(f"tiny base model built in {build_s:.0f} s", flush=True)
    runs = [run_seed(seed, workdir, env, args.jobs) for seed in seeds]

    labels = ["base", "iter 0", "iter 1", "iter 1 LLM only"]
    print("\nsolve rate (%) at the largest eval budget")
    print(f"{'seed':>6} {'group':<8} " + " ".join(f"{label:>16}" for label in labels))
    for run in runs:
        for name, group in GROUPS:
            print(f"{run['seed']:>6} {name:<8} "
                  + " ".join(f"{100 * _rate(run['results'][label], group):16.1f}" for label in labels))
    print(f"\nmean ± sd over {len(runs)} seeds (points)")
    for name, group in GROUPS:
        cells = [_mean_sd([_rate(run["results"][label], group) for run in runs]) for label in labels]
        gain0 = [_rate(r["results"]["iter 0"], group) - _rate(r["results"]["base"], group) for r in runs]
        gain1 = [_rate(r["results"]["iter 1"], group) - _rate(r["results"]["iter 0"], group) for r in runs]
        print(f"{name:<8} base {cells[0]} → iter 0 {cells[1]} → iter 1 {cells[2]} (LLM only {cells[3]}); "
              f"gains {_mean_sd(gain0)} and {_mean_sd(gain1)}; "
              f"smallest gains {100 * min(gain0):.1f} and {100 * min(gain1):.1f}")
    gates = Counter(name for run in runs for name, passed in run["gates"].items() if passed)
    print("\ngates passed: " + ", ".join(f"{name} {gates[name]}/{len(runs)}" for name in runs[0]["gates"]))
    for iteration in (0, 1):
        walls = [run["times"][iteration][0] for run in runs]
        cpus = [run["times"][iteration][1] for run in runs]
        print(f"iteration {iteration}: {statistics.fmean(walls):.0f} s wall (max {max(walls):.0f}), "
              f"{statistics.fmean(cpus):.0f} s CPU per seed")
    both = [run["times"][0][0] + run["times"][1][0] for run in runs]
    print(f"both iterations: {statistics.fmean(both) / 60:.1f} min wall on average (max {max(both) / 60:.1f}); "
          f"load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("\nworld test theorems solved per template (sum over seeds): base / iter 0 / iter 1")
    totals = {label: sum((_families(run["results"][label]) for run in runs), Counter()) for label in labels[:3]}
    test = [t for t in embedded_world(0).theorems if t.split == "test"]  # the layout is the same for every seed
    for template in dict.fromkeys(t.template for t in test):
        role = next(t.role for t in test if t.template == template)
        count = sum(t.template == template for t in test)
        print(f"  {template:<15} " + " / ".join(f"{totals[label][template]:>2}" for label in labels[:3])
              + f"   of {count * len(runs)} ({role})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

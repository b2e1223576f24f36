"""How long does `burnqed iterate --iter 0` take on the embedded defaults, and where does the time go?

    .venv/bin/python benchmarks/iterate_time.py [--workdir DIR] [--jobs N] [--seed 0] [--stages] [--startup]

Prints the iteration's wall and CPU seconds (itself and its children) against the 300 s target and the per-stage
lines; `--stages` times the runner's stage commands one by one itself, `--startup` a stage process's start-up
(docs/benchmarks.md, "iterate_time.py"). The tiny base model is built first, outside the timing. Exit code 1 when a
stage fails.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 300.0


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _seed_sets(seed: int) -> list[str]:
    return [arg for key in ("policy.seed", "sft.seed", "ebm.seed") for arg in ("--set", f"{key}={seed}")]


def _env() -> dict[str, str]:
    """The caller's environment without BURNQED_* settings other than BURNQED_HOME: the embedded defaults."""
    return {key: value for key, value in os.environ.items()
            if not key.startswith("BURNQED_") or key == "BURNQED_HOME"}


def _ensure_model(env: dict[str, str], log: Path) -> None:
    from burnqed.policy.modelpath import default_model_dir

    model = default_model_dir(env)
    if model.is_dir():
        return
    with log.open("a", encoding="utf-8") as out:
        done = subprocess.run([sys.executable, "-m", "burnqed.cli", "model", "init-tiny", "--output", str(model)],
                              env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise SystemExit(f"building the tiny model failed (exit {done.returncode}); see {log}")


def run_iterate(root: Path, seed: int, jobs: int | None, log: Path, env: dict[str, str]) -> tuple[float, float]:
    """`burnqed iterate --iter 0` in `root`: (wall s, CPU s of it and its children)."""
    argv = [sys.executable, "-m", "burnqed.cli", "iterate", "--iter", "0", "--root", str(root),
            *(("--jobs", str(jobs)) if jobs else ()), *_seed_sets(seed)]
    started, cpu = time.monotonic(), _children_cpu()
    with log.open("a", encoding="utf-8") as out:
        done = subprocess.run(argv, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    wall, used = time.monotonic() - started, _children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"`burnqed iterate` failed (exit {done.returncode}); see {log}")
    return wall, used


def run_stages(root: Path, seed: int, log: Path, env: dict[str, str]) -> list[tuple[str, float, float]]:
    """Every stage of iteration 0, one after another, as the runner would start it: (label, wall s, CPU s)."""
    from burnqed.config import load_config
    from burnqed.runner.local import env_for
    from burnqed.runner.plan import build_iteration

    cfg = load_config(None, [], environ=env)
    iteration = build_iteration(cfg.pipeline, str(root), 0, base_model=cfg.sft.base_model, joint=cfg.sft.joint,
                                max_proofs=cfg.search.max_proofs)
    child_env = env_for([item for item in _seed_sets(seed) if item != "--set"], None, env)
    rows: list[tuple[str, float, float]] = []
    for stage in iteration.stages:
        for shard in range(stage.shards):
            label = stage.name if stage.shards == 1 else f"{stage.name}[{shard}]"
            with log.open("a", encoding="utf-8") as out:
                started = time.monotonic()
                proc = subprocess.Popen([sys.executable, "-m", "burnqed.cli", *stage.argv_for(shard)], env=child_env,
                                        stdout=out, stderr=subprocess.STDOUT)
                _, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = os.waitstatus_to_exitcode(status)
            rows.append((label, time.monotonic() - started, usage.ru_utime + usage.ru_stime))
            print(f"  {label:<20} wall {rows[-1][1]:6.1f} s  cpu {rows[-1][2]:6.1f} s", flush=True)
            if proc.returncode != 0:
                raise SystemExit(f"stage {label} failed (exit {proc.returncode}); see {log}")
    return rows


def startup_cpu(env: dict[str, str]) -> tuple[float, float]:
    """CPU seconds of `burnqed --help` (the CLI's own imports) and of importing torch and transformers."""
    costs = []
    for argv in (["-m", "burnqed.cli", "--help"], ["-c", "import torch, transformers"]):
        proc = subprocess.Popen([sys.executable, *argv], env=env, stdout=subprocess.DEVNULL)
        _, _, usage = os.wait4(proc.pid, 0)
        costs.append(usage.ru_utime + usage.ru_stime)
    return costs[0], costs[1]


def critical_path(root: Path, cpu: dict[str, float], env: dict[str, str]) -> float:
    """The longest chain of CPU seconds through the iteration's stages (`Stage.after`), a fanned-out stage's shards
    side by side: what the wall time would be on idle cores with every ready stage running at once."""
    from burnqed.config import load_config
    from burnqed.runner.plan import build_iteration

    cfg = load_config(None, [], environ=env)
    iteration = build_iteration(cfg.pipeline, str(root), 0, base_model=cfg.sft.base_model, joint=cfg.sft.joint,
                                max_proofs=cfg.search.max_proofs)
    end: dict[str, float] = {}
    for stage in iteration.stages:
        start = max((end[name] for name in stage.after if name in end), default=0.0)
        end[stage.name] = start + cpu.get(stage.name, 0.0) / stage.shards
    return max(end.values(), default=0.0)


STAGE_LINE = re.compile(r"\] (?P<stage>\S+): finished in (?P<wall>[\d.]+)s(?: \(cpu (?P<cpu>[\d.]+)s\))?")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None, help="Work folder (default: a new temporary one).")
    parser.add_argument("--jobs", type=int, default=None, help="`burnqed iterate --jobs` (default: its own).")
    parser.add_argument("--seed", type=int, default=0, help="policy/sft/ebm seed.")
    parser.add_argument("--stages", action="store_true", help="Run the stage commands one by one, timing each.")
    parser.add_argument("--startup", action="store_true", help="Also measure one stage process's start-up.")
    args = parser.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        print(f"--jobs must be ≥ 1, got {args.jobs}", file=sys.stderr)
        return 2
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="burnqed-iterate-time-"))
    root = workdir / "runs"
    if root.exists():
        print(f"{root} exists: the benchmark needs a fresh run root (another --workdir)", file=sys.stderr)
        return 2
    workdir.mkdir(parents=True, exist_ok=True)
    env, log = _env(), workdir / "iterate.log"
    _ensure_model(env, log)
    print(f"work folder {workdir}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    processes = 0
    stage_cpu: dict[str, float] = {}
    if args.stages:
        rows = run_stages(root, args.seed, log, env)
        wall, cpu, processes = sum(r[1] for r in rows), sum(r[2] for r in rows), len(rows)
        for label, _, used in rows:
            stage_cpu[label.split("[")[0]] = stage_cpu.get(label.split("[")[0], 0.0) + used
    else:
        wall, cpu = run_iterate(root, args.seed, args.jobs, log, env)
        for match in STAGE_LINE.finditer(log.read_text(encoding="utf-8")):
            processes += 1
            cpu_text = f"  cpu {float(match['cpu']):6.1f} s" if match["cpu"] else ""
            print(f"  {match['stage']:<20} wall {float(match['wall']):6.1f} s{cpu_text}")
            if match["cpu"]:
                stage_cpu[match["stage"]] = float(match["cpu"])
    print(f"total: wall {wall:.1f} s ({wall / TARGET_S:.2f}× the {TARGET_S:.0f} s target), cpu {cpu:.1f} s; "
          f"load average now {os.getloadavg()[0]:.1f}")
    if stage_cpu:
        path = critical_path(root, stage_cpu, env)
        cores = os.cpu_count() or 1
        print(f"critical path {path:.0f} CPU-s (every ready stage at once, a core each); on {cores} idle cores at "
              f"least {max(path, cpu / cores):.0f} s wall")
    if args.startup:
        cli, heavy = startup_cpu(env)
        print(f"start-up: `burnqed --help` {cli:.1f} s cpu, torch+transformers import {heavy:.1f} s cpu; "
              f"× {processes} stage processes ≈ {processes * (cli + heavy):.0f} s cpu "
              f"({processes * (cli + heavy) / cpu:.0%} of the total)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Does compiler-feedback repair pay at equal generated tokens? Whole pass@N against whole + repair with iteration 1's
policy on the embedded world's test split, for three world seeds (docs/results.md, "Repair").

    .venv/bin/python benchmarks/repair.py [--seeds 0,1,2] [--workdir DIR] [--rounds 1] [--budgets 8,16,32,64]
                                          [--tag NAME --repair-set KEY=VALUE ...]
    .venv/bin/python benchmarks/repair.py --analyse-only --workdir DIR [--seeds 0,1,2] [--tag NAME]

For each seed: iterations 0 and 1 with repair feedback recorded and trained, then two whole-mode evals of iteration
1's policy (pass@N, and with `--rounds` of repair). Finished steps are not redone. The analysis prints each arm's
solve rate at equal proofs, equal generated tokens and equal Lean calls, and the mean gain against +3 points
(docs/benchmarks.md, "repair.py"). Exit code 1 when a run fails.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from burnqed.eval.compare import compare_results, cost_text, delta_text, entry_text  # noqa: E402
from burnqed.eval.result import EvalResult  # noqa: E402

TARGET_POINTS = 3.0
WARM_STEPS = 300
# The loop this benchmark's figures (and rl_figure.py's, sketch_figure.py's, collapse.py's) were measured with, before
# issue 69 made a base start the default: iteration 1 warm-starts from iteration 0 for sft.warm_steps on every
# verified proof. WARM_LOOP: the same as --set arguments.
WARM_SETTINGS = ("pipeline.start=previous", "sft.later_epochs=0", "sft.proofs_per_theorem=all")
WARM_LOOP = [arg for setting in WARM_SETTINGS for arg in ("--set", setting)]
DEFAULT_BUDGETS = (8, 16, 32, 64)


def _run(argv: list[str], log: Path) -> float:
    """Run `python -m burnqed.cli ARGV` under nice, output to `log`; its wall seconds. Exit 1 on failure."""
    started = time.monotonic()
    env = {key: value for key, value in os.environ.items() if not key.startswith("BURNQED_") or key == "BURNQED_HOME"}
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ burnqed {' '.join(argv)}\n")
        out.flush()
        done = subprocess.run(["nice", "-n", "10", sys.executable, "-m", "burnqed.cli", *argv], env=env, stdout=out,
                              stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        print(f"`burnqed {' '.join(argv)}` failed (exit {done.returncode}); see {log}", file=sys.stderr)
        raise SystemExit(1)
    return time.monotonic() - started


def seed_sets(seed: int) -> list[str]:
    keys = ("policy.seed", "sft.seed", "ebm.seed", "data.world_seed")
    return [arg for key in keys for arg in ("--set", f"{key}={seed}")]


def arm_file(workdir: Path, seed: int, repair: bool, tag: str) -> Path:
    name = ("whole-repair" + (f"-{tag}" if tag else "")) if repair else "whole"
    return workdir / f"seed-{seed}" / f"{name}.json"


def run_seed(seed: int, workdir: Path, rounds: int, budgets: tuple[int, ...], tag: str,
             repair_sets: list[str]) -> None:
    """Run (or resume) seed `seed`: its two iterations, then the two whole-mode evals."""
    folder = workdir / f"seed-{seed}"
    root, log = folder / "runs", folder / "log.txt"
    folder.mkdir(parents=True, exist_ok=True)
    pipeline = [*seed_sets(seed), "--set", "search.repair_rounds=1", "--set", "pipeline.eval_base=false",
                "--set", f"sft.warm_steps={WARM_STEPS}", *WARM_LOOP]
    for iteration in (0, 1):
        if (root / f"iter_{iteration}" / "eval" / "eval.json").is_file():
            continue
        wall = _run(["iterate", "--iter", str(iteration), "--root", str(root), *pipeline], log)
        print(f"  seed {seed}: iteration {iteration} in {wall:.0f} s (load {os.getloadavg()[0]:.1f})", flush=True)
    for repair in (False, True):
        output = arm_file(workdir, seed, repair, tag)
        if output.is_file():
            continue
        wall = _run(["eval", "--iter", "1", "--split", "test", "--budgets", ",".join(map(str, budgets)),
                     "--output", str(output), *seed_sets(seed), "--set", "search.mode=whole",
                     "--set", f"policy.model={root / 'iter_1' / 'export'}",
                     "--set", f"search.repair_rounds={rounds if repair else 0}",
                     *(arg for item in (repair_sets if repair else []) for arg in ("--set", item))], log)
        print(f"  seed {seed}: {output.name} in {wall:.0f} s", flush=True)


# ------------------------------------------------------------------------------------------------ analysis


def load(path: Path) -> EvalResult | None:
    return EvalResult.model_validate_json(path.read_text(encoding="utf-8")) if path.is_file() else None


def analyse(workdir: Path, seeds: list[int], tag: str) -> int:
    """Print the figures (module docstring); 1 when an arm is missing for some seed."""
    gains: list[float] = []
    ratios: list[float] = []
    missing = False
    for seed in seeds:
        plain, repaired = (load(arm_file(workdir, seed, repair, tag)) for repair in (False, True))
        if plain is None or repaired is None:
            print(f"seed {seed}: an eval is missing under {workdir / f'seed-{seed}'}")
            missing = True
            continue
        print(f"seed {seed} ({plain.total} test theorems, {plain.lean_backend}, repair_rounds "
              f"{repaired.settings.repair_rounds if repaired.settings else '?'}):")
        for label, result in (("whole pass@N", plain), ("whole + repair", repaired)):
            cells = ", ".join(f"{row.budget}: {row.solved} ({row.avg_tokens or 0:.0f} tok)" for row in result.budgets)
            print(f"  {label:15} {cells}")
        proved = [t for t in repaired.per_theorem if t.proved]
        by_revision: dict[int, int] = {}
        for theorem in proved:
            key = theorem.revision_at_proof or 0
            by_revision[key] = by_revision.get(key, 0) + 1
        print(f"  repair arm: {sum(t.repaired or 0 for t in repaired.per_theorem)} proofs revised, "
              f"{sum(t.revisions or 0 for t in repaired.per_theorem)} revisions; proved by a fresh attempt "
              f"{by_revision.get(0, 0)}, " + ", ".join(f"by revision {k} {n}" for k, n in sorted(by_revision.items())
                                                        if k))
        comparison = compare_results([("pass@N", plain), ("repair", repaired)])
        if comparison.budgets:
            common = comparison.budgets[-1]
            print(f"  at {common.budget} proofs sampled: {common.entries[0].solved} → {common.entries[1].solved} "
                  f"solved, {common.delta_rate_points or 0.0:+.1f} points")
        for title, levels in (("tokens", comparison.token_levels), ("Lean calls", comparison.call_levels)):
            print(f"  at equal {title} per theorem (pass@N, repair, Δ):")
            for level in levels:
                cells = "  ".join(f"{entry_text(e):>30}" for e in level.entries)
                print(f"    ≤ {cost_text(level.level):>7}: {cells}  {delta_text(level)}")
        reached = [level for level in comparison.token_levels if level.delta_rate_points is not None]
        if not reached:
            print("  no token level both arms are measured at")
            continue
        top = reached[-1]
        first, second = top.entries
        assert top.delta_rate_points is not None and first.rate is not None and second.rate is not None
        gains.append(top.delta_rate_points)
        ratios.append(second.rate / first.rate if first.rate else float("inf"))
        print(f"  at {cost_text(top.level)} tokens/theorem: {entry_text(first)} → {entry_text(second)}, "
              f"{delta_text(top)}, ratio {ratios[-1]:.2f}")
    if gains:
        spread = statistics.stdev(gains) if len(gains) > 1 else 0.0
        verdict = "met" if statistics.fmean(gains) >= TARGET_POINTS else "not met"
        print(f"mean gain at equal tokens over {len(gains)} seeds: {statistics.fmean(gains):+.1f} ± {spread:.1f} "
              f"points (target +{TARGET_POINTS:.0f}: {verdict}); ratios {', '.join(f'{r:.2f}' for r in ratios)}")
    return 1 if missing else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/burnqed-repair-bench"))
    parser.add_argument("--rounds", type=int, default=1, help="search.repair_rounds of the repair arm")
    parser.add_argument("--budgets", default=",".join(map(str, DEFAULT_BUDGETS)), help="whole-mode eval budgets")
    parser.add_argument("--tag", default="", help="names the repair arm's file (another variant, same iterations)")
    parser.add_argument("--repair-set", action="append", default=[], metavar="KEY=VALUE",
                        help="a --set of the repair arm only (with --tag)")
    parser.add_argument("--analyse-only", action="store_true")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    budgets = tuple(int(b) for b in args.budgets.split(","))
    if not args.analyse_only:
        for seed in seeds:
            run_seed(seed, args.workdir, args.rounds, budgets, args.tag, args.repair_set)
    return analyse(args.workdir, seeds, args.tag)


if __name__ == "__main__":
    raise SystemExit(main())

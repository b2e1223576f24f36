"""Does sketch search pay at equal generated tokens? Iteration 1's policy searching in sketch mode against step mode on
the embedded world's test split, for three world seeds (docs/benchmarks.md, "sketch_figure.py").

    python benchmarks/sketch_figure.py [--seeds 0,1,2] [--jobs 3] [--workdir DIR] [--variant A|B] [--budgets B,…]
    python benchmarks/sketch_figure.py --analyse-only --workdir DIR [--seeds 0,1,2] [--variant A|B]

Per seed, in DIR/seed-S: `burnqed iterate --iter 0` in `runs/` (every seed setting S, the world with its sketch family,
step search, `sft.sketch_examples=true` so that SFT trains the planner's format on the proofs' have structure, no base
eval and no noise search), then iteration 1's `sft`, `export` and `train-ebm` (`iterate --iter 1 --only …`: its own
search and evals are not needed); then two evals of iteration 1's export with its value model on the test split, over
the same ladder of budgets (node expansions, the unit both modes count): **step** (`step.json`) and **sketch**
(`sketch-V.json`, with variant V's settings). Equal generated tokens is read, not forced: each arm's per-theorem cost
curves (tokens after every expansion) are read at the same token levels as `burnqed compare` reads them
(`eval.compare`), so a sketch's planner request, which writes several sketches for one expansion, is paid for in tokens.
The variants:

    A  the sketch settings' defaults (search.sketch_rounds 2, sketch_subgoal_share 0.25, sketch_plans 4)
    B  a planner sampling near greedy, re-planning more (planner.temperature 0.2, search.sketch_rounds 4): the tiny
       planner's sketches at 0.8 are mostly malformed

Finished steps are not redone (each iteration stage's completion marker, each eval's JSON); `--jobs N` runs N seeds at
once. The analysis writes DIR/sketch-figure-V.json and prints a markdown table: per seed both arms' solved at the
largest budget and tokens per theorem there, both read at the largest token level both are measured at and the gain
of sketch over step there (and at the largest level of Lean calls), the sketch arm's sketches, subgoals proved,
re-plans and cache hit rate; then the mean ± sd of the gain at equal tokens against the +3-point target. Exit code 1
when a run fails or an arm is missing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.learning import _mean_sd, _run, work_env  # noqa: E402
from benchmarks.repair import WARM_LOOP  # noqa: E402
from burnqed.eval.compare import CostLevel, compare_results, cost_text, entry_text  # noqa: E402
from burnqed.eval.result import EvalResult  # noqa: E402
from burnqed.records.enums import SearchMode  # noqa: E402
from burnqed.report.sketches import SketchRow, eval_prefixes, hit_rate_text, source_row  # noqa: E402
from burnqed.storage import Store  # noqa: E402

TARGET_POINTS = 3.0
DEFAULT_BUDGETS = (10, 25, 50, 100)  # node expansions, both arms
VARIANTS: dict[str, list[str]] = {
    "A": [],
    "B": ["search.sketch_rounds=4", "planner.temperature=0.2"],
}
ITER1_STAGES = ("sft", "export", "train-ebm")
MARKER = "_SUCCESS.json"


def seed_sets(seed: int) -> list[str]:
    """The `--set` arguments every run of seed `seed` shares (the world, its seeds)."""
    keys = ("policy.seed", "sft.seed", "ebm.seed", "data.world_seed")
    return [*(arg for key in keys for arg in ("--set", f"{key}={seed}")), "--set", "data.world_sketches=true"]


def pipeline_sets(seed: int) -> list[str]:
    """The `--set` arguments of seed `seed`'s iterations (both `iterate` calls: the same, or iteration 1 is refused)."""
    return [*seed_sets(seed), "--set", "sft.sketch_examples=true", "--set", "pipeline.eval_base=false",
            "--set", "pipeline.noise_temperature=null", *WARM_LOOP]


@dataclass(frozen=True)
class SeedPaths:
    folder: Path

    @property
    def root(self) -> Path:
        return self.folder / "runs"

    def iteration(self, i: int, name: str) -> Path:
        return self.root / f"iter_{i}" / name

    @property
    def step(self) -> Path:
        return self.folder / "step.json"

    def sketch(self, variant: str) -> Path:
        return self.folder / f"sketch-{variant}.json"

    @property
    def log(self) -> Path:
        return self.folder / "log.txt"

    @property
    def times(self) -> Path:
        return self.folder / "times.json"


def eval_argv(paths: SeedPaths, seed: int, mode: SearchMode, budgets: tuple[int, ...], output: Path,
              extra: list[str]) -> list[str]:
    """`burnqed eval` of iteration 1's export with its value model on the test split in `mode` (argv after `-m
    burnqed.cli`)."""
    return ["eval", "--iter", "1", "--split", "test", "--budgets", ",".join(map(str, budgets)), "--pass-n", "1",
            "--model", str(paths.iteration(1, "export")), "--ebm", str(paths.iteration(1, "ebm")),
            "--output", str(output), *seed_sets(seed), "--set", f"search.mode={mode.value}",
            *(arg for item in extra for arg in ("--set", item))]


def run_seed(seed: int, workdir: Path, variant: str, budgets: tuple[int, ...]) -> None:
    """Run (or resume) seed `seed`: iteration 0, iteration 1's models, the step eval and variant `variant`'s sketch
    eval."""
    paths = SeedPaths(workdir / f"seed-{seed}")
    paths.folder.mkdir(parents=True, exist_ok=True)
    env = work_env(paths.folder)
    times: dict[str, float] = json.loads(paths.times.read_text(encoding="utf-8")) if paths.times.is_file() else {}

    def step(name: str, argv: list[str], done: bool) -> None:
        if done:
            return
        wall, _ = _run(["-m", "burnqed.cli", *argv], env, paths.log)
        times[name] = round(wall, 1)
        paths.times.write_text(json.dumps(times, indent=1) + "\n", encoding="utf-8")
        print(f"  seed {seed}: {name} in {wall:.0f} s", flush=True)

    root = str(paths.root)
    step("iteration 0", ["iterate", "--iter", "0", "--root", root, *pipeline_sets(seed)],
         done=(paths.iteration(0, "report") / MARKER).is_file())
    only = [arg for stage in ITER1_STAGES for arg in ("--only", stage)]
    step("iteration 1 models", ["iterate", "--iter", "1", "--root", root, *only, *pipeline_sets(seed)],
         done=all((paths.iteration(1, name) / MARKER).is_file() for name in ("sft", "export", "ebm")))
    step("eval step", eval_argv(paths, seed, SearchMode.STEP, budgets, paths.step, []), done=paths.step.is_file())
    output = paths.sketch(variant)
    step(f"eval sketch {variant}", eval_argv(paths, seed, SearchMode.SKETCH, budgets, output, VARIANTS[variant]),
         done=output.is_file())


# ------------------------------------------------------------------------------------------------ analysis


def load(path: Path) -> EvalResult | None:
    return EvalResult.model_validate_json(path.read_text(encoding="utf-8")) if path.is_file() else None


def _top(levels: list[CostLevel]) -> CostLevel | None:
    """The largest level at which both arms are read (a Δ), None when there is none."""
    reached = [level for level in levels if level.delta_rate_points is not None]
    return reached[-1] if reached else None


def _level(level: CostLevel | None) -> dict[str, Any] | None:
    if level is None:
        return None
    step, sketch = level.entries
    return {"level": level.level, "step": entry_text(step), "sketch": entry_text(sketch),
            "step_rate": step.rate, "sketch_rate": sketch.rate, "gain_points": level.delta_rate_points,
            "interpolated": level.interpolated}


def seed_figures(step: EvalResult, sketch: EvalResult, row: SketchRow) -> dict[str, Any]:
    """One seed's figures: both arms at the largest budget, the comparison at the largest token and Lean-call levels
    both are read at, and the sketch arm's sketch counts (`row.problem` when they cannot be counted)."""
    comparison = compare_results([("step", step), ("sketch", sketch)])
    arms = {}
    for label, result in (("step", step), ("sketch", sketch)):
        largest = result.budgets[-1]
        arms[label] = {"budget": largest.budget, "solved": largest.solved, "total": largest.total,
                       "rate": largest.rate, "avg_tokens": largest.avg_tokens,
                       "lean_calls_per_theorem": None if largest.lean_calls is None or not largest.total
                       else largest.lean_calls / largest.total}
    counts = row.counts
    return {"arms": arms, "warnings": comparison.warnings, "comparable": comparison.comparable,
            "tokens": _level(_top(comparison.token_levels)), "lean_calls": _level(_top(comparison.call_levels)),
            "sketches": None if counts is None else {**counts.model_dump(), "hit_rate": counts.hit_rate},
            "sketch_problem": row.problem}


def _arm_cell(arm: dict[str, Any]) -> str:
    tokens = "–" if arm["avg_tokens"] is None else cost_text(arm["avg_tokens"])
    return f"{arm['solved']}/{arm['total']} · {tokens}"


def _level_cells(level: dict[str, Any] | None) -> str:
    if level is None:
        return "not measured | – | – | –"
    gain = level["gain_points"]
    return (f"{cost_text(level['level'])} | {level['step']} | {level['sketch']} | "
            f"{'≈' if level['interpolated'] else ''}{gain:+.1f}")


def _sketch_cell(figures: dict[str, Any]) -> str:
    counts = figures["sketches"]
    if counts is None:
        return f"not counted: {figures['sketch_problem']}"
    return (f"{counts['sketches']} sketches, {counts['elaborated']} elaborated, {counts['replans']} re-plans; "
            f"{counts['by_search'] + counts['from_cache'] + counts['kept']}/{counts['subgoals']} subgoals proved; "
            f"cache {counts['from_cache']}/{counts['lookups']} ({hit_rate_text(counts['hit_rate'])})")


def analyse(workdir: Path, seeds: list[int], variant: str, *, store: Store) -> int:
    """Write the JSON summary and print the table (module docstring); 1 when an arm is missing for some seed."""
    rows: dict[str, Any] = {}
    missing = False
    for seed in seeds:
        paths = SeedPaths(workdir / f"seed-{seed}")
        step, sketch = load(paths.step), load(paths.sketch(variant))
        if step is None or sketch is None:
            print(f"seed {seed}: an arm is missing under {paths.folder} (step.json, sketch-{variant}.json)")
            missing = True
            continue
        uri = str(paths.sketch(variant))
        row = source_row(1, f"sketch-{variant}", None, eval_prefixes(uri, sketch), store=store)
        rows[str(seed)] = seed_figures(step, sketch, row)
    gains = [row["tokens"]["gain_points"] for row in rows.values() if row["tokens"] is not None and row["comparable"]]
    call_gains = [row["lean_calls"]["gain_points"] for row in rows.values()
                  if row["lean_calls"] is not None and row["comparable"]]
    summary = {"variant": variant, "settings": VARIANTS[variant], "target_points": TARGET_POINTS,
               "comparison": "equal generated tokens per theorem (eval.compare's levels)", "seeds": rows,
               "gain_mean": statistics.fmean(gains) if gains else None,
               "gain_sd": statistics.stdev(gains) if len(gains) > 1 else None,
               "call_gain_mean": statistics.fmean(call_gains) if call_gains else None}
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / f"sketch-figure-{variant}.json"
    out.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(f"variant {variant} ({', '.join(VARIANTS[variant]) or 'the defaults'}):")
    print("| seed | step: solved · tokens/thm | sketch: solved · tokens/thm | tokens/thm level | step there | sketch "
          "there | gain (points) | Lean calls/thm level | step there | sketch there | gain (points) | sketch arm |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, row in rows.items():
        print(f"| {name} | {_arm_cell(row['arms']['step'])} | {_arm_cell(row['arms']['sketch'])} | "
              f"{_level_cells(row['tokens'])} | {_level_cells(row['lean_calls'])} | {_sketch_cell(row)} |")
    for name, row in rows.items():
        for warning in row["warnings"]:
            print(f"seed {name}: warning: {warning}")
    if gains:
        verdict = "met" if statistics.fmean(gains) >= TARGET_POINTS else "not met"
        print(f"\nsketch over step at equal generated tokens, over {len(gains)} seed(s): "
              f"{_mean_sd(gains, ' points', signed=True)} (target +{TARGET_POINTS:.0f}: {verdict}); at equal Lean "
              f"calls: {_mean_sd(call_gains, ' points', signed=True)}")
    else:
        print("\nno seed has a token level both arms are read at")
    print(f"summary: {out}")
    return 1 if missing else 0


def parse_budgets(text: str) -> tuple[int, ...]:
    """`--budgets`: comma-separated whole numbers ≥ 1, sorted, repeats dropped; ValueError otherwise."""
    budgets = sorted({int(item) for item in text.split(",")})
    if not budgets or budgets[0] < 1:
        raise ValueError(text)
    return tuple(budgets)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated world seeds (default 0,1,2)")
    parser.add_argument("--jobs", type=int, default=1, help="seeds run at once (default 1)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/burnqed-sketch-figure"))
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="A",
                        help="the sketch arm's settings: A the defaults, B a near-greedy planner re-planning more")
    parser.add_argument("--budgets", default=",".join(map(str, DEFAULT_BUDGETS)),
                        help="both arms' eval budgets, node expansions (default 10,25,50,100)")
    parser.add_argument("--analyse-only", action="store_true", help="run nothing; analyse the work folder")
    args = parser.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--seeds: expected comma-separated integers, got {args.seeds!r}")
    try:
        budgets = parse_budgets(args.budgets)
    except ValueError:
        parser.error(f"--budgets: expected comma-separated whole numbers from 1, got {args.budgets!r}")
    if args.jobs < 1:
        parser.error(f"--jobs: expected at least 1, got {args.jobs}")
    if not args.analyse_only:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(run_seed, seed, args.workdir, args.variant, budgets) for seed in seeds]
            for future in futures:
                future.result()
    return analyse(args.workdir, seeds, args.variant, store=Store(cache_dir=None))


if __name__ == "__main__":
    raise SystemExit(main())

"""What does sketch search cost against step search? Lean calls, wall time and tokens per theorem of two evals of the
same theorems, and the subgoal cache's hit rate in the sketch one (docs/benchmarks.md, "sketch_cost.py").

    .venv/bin/python benchmarks/sketch_cost.py STEP.json SKETCH.json [--output cost.json]

Each argument is an eval's output (`burnqed eval --output R.json`), read with its trajectories beside it
(`R.trajectories`, every pass of a pass@N eval): the step eval first, the sketch eval second. From each eval's
per-theorem records (at its largest budget): theorems, solved, Lean calls per theorem, search wall seconds per theorem
(mean and median; with pass@N the attempts' time as eval counts it), Lean seconds per theorem, generated tokens per
theorem and the eval's own wall time; then sketch ÷ step for each, and from the sketch eval's TheoremResults the
subgoal cache's hits of its lookups and hit rate ("not measured" without a lookup, never 0 %; the sketch table's
definitions, `burnqed.report.sketches`). A figure an eval did not record is "–". Evals of different theorem sets,
pass_n or Lean backends are refused (exit 2): they do not measure the same thing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from burnqed.errors import InputError  # noqa: E402
from burnqed.eval.compare import unlike  # noqa: E402
from burnqed.eval.result import EvalResult, load_eval_result  # noqa: E402
from burnqed.records.enums import SearchMode  # noqa: E402
from burnqed.report.sketches import (  # noqa: E402
    eval_prefixes,
    hit_rate_text,
    inconsistencies,
    read_sketch_results,
    sketch_counts,
)
from burnqed.storage import Store  # noqa: E402


@dataclass(frozen=True)
class ArmCost:
    """One eval's cost per theorem (None: not recorded by every theorem)."""

    label: str
    mode: str
    theorems: int
    solved: int
    lean_calls: float | None
    wall_s: float
    median_wall_s: float
    lean_s: float | None
    tokens: float | None
    eval_wall_s: float | None


@dataclass(frozen=True)
class CacheUse:
    """The sketch eval's subgoal cache: hits of lookups, or why it was not read."""

    hits: int | None = None
    lookups: int | None = None
    rate: float | None = None
    problem: str | None = None

    def shown(self) -> str:
        if self.problem is not None:
            return f"not read: {self.problem}"
        return f"{self.hits} hits of {self.lookups} lookups, hit rate {hit_rate_text(self.rate)}"


def _mean(values: Sequence[float | int | None]) -> float | None:
    return None if any(v is None for v in values) or not values else statistics.fmean(float(v or 0) for v in values)


def arm_cost(label: str, result: EvalResult) -> ArmCost:
    """`result`'s cost per theorem from its per-theorem records."""
    theorems = result.per_theorem
    times = [t.time_s for t in theorems]
    return ArmCost(label=label, mode=result.search_label, theorems=result.total, solved=result.cumulative_solved,
                   lean_calls=_mean([t.lean_calls for t in theorems]),
                   wall_s=statistics.fmean(times) if times else 0.0,
                   median_wall_s=statistics.median(times) if times else 0.0,
                   lean_s=_mean([t.lean_s for t in theorems]), tokens=_mean([t.tokens for t in theorems]),
                   eval_wall_s=result.wall_s)


def cache_use(uri: str, result: EvalResult, *, store: Store) -> CacheUse:
    """The cache's hits and lookups over the sketch eval's TheoremResults (read beside `uri`)."""
    results, problem = read_sketch_results(eval_prefixes(uri, result), store=store)
    if problem is None and not any(r.mode is SearchMode.SKETCH for r in results):
        problem = "its trajectories hold no sketch-mode search"
    if problem is None:
        problem = "; ".join(inconsistencies(results)) or None
    if problem is not None:
        return CacheUse(problem=problem)
    counts = sketch_counts(results)
    return CacheUse(hits=counts.from_cache, lookups=counts.lookups, rate=counts.hit_rate)


def _figure(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _ratio(top: float | None, bottom: float | None) -> str:
    if top is None or bottom is None or bottom == 0:
        return "–"
    return f"{top / bottom:.2f}×"


def cost_table(step: ArmCost, sketch: ArmCost, cache: CacheUse) -> list[str]:
    """The markdown table: a row per arm, the ratio sketch ÷ step, then the cache's line."""
    lines = ["| arm | mode | solved | Lean calls/thm | wall s/thm (mean, median) | Lean s/thm | tokens/thm | eval wall "
             "s |", "|---|---|---|---|---|---|---|---|"]
    for arm in (step, sketch):
        lines.append(f"| {arm.label} | {arm.mode} | {arm.solved}/{arm.theorems} | {_figure(arm.lean_calls)} | "
                     f"{arm.wall_s:.2f}, {arm.median_wall_s:.2f} | {_figure(arm.lean_s, 2)} | {_figure(arm.tokens, 0)} "
                     f"| {_figure(arm.eval_wall_s)} |")
    lines.append(f"| sketch ÷ step | | {sketch.solved - step.solved:+d} solved | "
                 f"{_ratio(sketch.lean_calls, step.lean_calls)} | {_ratio(sketch.wall_s, step.wall_s)}, "
                 f"{_ratio(sketch.median_wall_s, step.median_wall_s)} | {_ratio(sketch.lean_s, step.lean_s)} | "
                 f"{_ratio(sketch.tokens, step.tokens)} | {_ratio(sketch.eval_wall_s, step.eval_wall_s)} |")
    return [*lines, "", f"subgoal cache ({sketch.label}): {cache.shown()}"]


def measure(step_path: str, sketch_path: str, *, store: Store) -> tuple[ArmCost, ArmCost, CacheUse]:
    """Both arms' costs and the sketch arm's cache use; InputError when the two evals are not alike."""
    step, sketch = (load_eval_result(path, store=store) for path in (step_path, sketch_path))
    if step.mode is not SearchMode.STEP:
        raise InputError(f"{step_path} is a {step.mode} eval: the first eval must be a step eval")
    if sketch.mode is not SearchMode.SKETCH:
        raise InputError(f"{sketch_path} is a {sketch.mode} eval: the second eval must be a sketch eval")
    differences = unlike([("step", step), ("sketch", sketch)])
    if differences:
        raise InputError(f"the two evals do not measure the same thing: {'; '.join(differences)}")
    return arm_cost("step", step), arm_cost("sketch", sketch), cache_use(sketch_path, sketch, store=store)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", help="the step eval's result (its trajectories beside it)")
    parser.add_argument("sketch", help="the sketch eval's result (its trajectories beside it: the cache's hit rate)")
    parser.add_argument("--output", type=Path, default=None, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    try:
        step, sketch, cache = measure(args.step, args.sketch, store=Store(cache_dir=None))
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(cost_table(step, sketch, cache)))
    if args.output is not None:
        args.output.write_text(json.dumps({"step": asdict(step), "sketch": asdict(sketch), "cache": asdict(cache)},
                                          indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

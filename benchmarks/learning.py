"""Does expert iteration learn on the embedded world? Iterations 0..N-1 from an empty folder, for three world seeds.

    .venv/bin/python benchmarks/learning.py [--seeds 0,1,2] [--iterations 2] [--set KEY=VALUE ...] [--workdir DIR]
                                            [--jobs N] [--concurrency-check 0] [--resample 2]
    .venv/bin/python benchmarks/learning.py --analyse-only --workdir DIR [--seeds 0,1,2] [--iterations 5]

For each seed S: `burnqed iterate --iter 0`, `--iter 1`, … (--iterations, default 2) on the embedded defaults (plus
each --set: a variant, e.g. pipeline.start=base) in `DIR/seed-S/runs`, every seed setting S, then the retrieval
baseline and a concurrency-1 eval. Finished steps are not redone. The analysis prints, per seed and as mean ± sd, six
checks against their targets (iteration 0's budget ratio, the gains over the base policy, retrieval, the value
model's gap, concurrency, wall time): docs/benchmarks.md, "learning.py"; then the curve across the iterations (both
arms at budgets 50 and 100, the positives SFT trained on, its held-out loss, what each iteration started from), also
written to DIR/curve.json with the targets of issue 69. --resample N evaluates each iteration's policy (LLM only)
again at N more sampling seeds (`policy.seed` 101, 102, …), and the curve gains the mean over the samplings: one
eval's sampling spread is a few theorems, as large as an iteration's gain. Exit code 1 when a run fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from leankit.world.checked import embedded_world  # noqa: E402

WORLD = "burnqed-world"
BUNDLED = "burnqed-bundled"
EVAL_BUDGETS = (10, 50, 100)
SMALL, LARGE = EVAL_BUDGETS[0], EVAL_BUDGETS[-1]
LABELS = ("base", "iter 0", "iter 1", "iter 1 LLM only")
EVALS = {
    "base": Path("iter_0/eval-base/eval.json"),
    "iter 0": Path("iter_0/eval/eval.json"),
    "iter 1": Path("iter_1/eval/eval.json"),
    "iter 1 LLM only": Path("iter_1/eval/eval-noebm.json"),
    "iter 0 concurrency 1": Path("iter_0/eval-c1/eval.json"),
}
RETRIEVAL = Path("retrieval/retrieval.json")
RESAMPLE_SEEDS = (101, 102, 103, 104)  # the sampling seeds (policy.seed) of --resample's evals, in order
_STAGE_DONE = re.compile(r"^\[(\d+)/(\d+)\] (\S+): finished in ([0-9.]+)s")


def resampled_eval(iteration: int, sampling_seed: int) -> Path:
    """Where --resample writes the LLM-only eval of iteration `iteration`'s policy at `policy.seed = sampling_seed`."""
    return Path(f"iter_{iteration}/eval-resampled/policy-seed-{sampling_seed}.json")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(argv: list[str], env: dict[str, str], log: Path) -> tuple[float, float]:
    """Run a command (argv after the Python executable) under nice; (wall s, CPU s of it and its children)."""
    started, cpu = time.monotonic(), _children_cpu()
    with log.open("a", encoding="utf-8") as out:
        done = subprocess.run(["nice", "-n", "10", sys.executable, *argv], env=env,
                              stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        print(f"`{' '.join(argv)}` failed (exit {done.returncode}); see {log}", file=sys.stderr)
        raise SystemExit(1)
    return time.monotonic() - started, _children_cpu() - cpu


def work_env(workdir: Path) -> dict[str, str]:
    """The runs' environment: the caller's without BURNQED_* settings (the embedded defaults), with the work folder's
    own `$BURNQED_HOME`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("BURNQED_")}
    return {**env, "BURNQED_HOME": str(workdir / "home")}


def seed_sets(seed: int, extra: tuple[str, ...] = ()) -> list[str]:
    """The `--set` arguments of seed `seed`'s runs, then each of `extra` (KEY=VALUE: a variant's settings)."""
    sets = [arg for key in ("policy.seed", "sft.seed", "ebm.seed", "data.world_seed")
            for arg in ("--set", f"{key}={seed}")]
    return [*sets, "--set", f"pipeline.eval_budgets={json.dumps(list(EVAL_BUDGETS))}",
            *(arg for item in extra for arg in ("--set", item))]


def run_seed(seed: int, workdir: Path, env: dict[str, str], jobs: int | None, concurrency_check: bool,
             iterations: int = 2, extra: tuple[str, ...] = (), resample: int = 0) -> None:
    """Run (or resume) seed `seed`'s iterations 0..`iterations`-1 (with the settings `extra`), its retrieval baseline,
    if asked the concurrency-1 eval, and `resample` more LLM-only evals of each iteration's policy."""
    root = workdir / f"seed-{seed}" / "runs"
    log = workdir / f"seed-{seed}" / "log.txt"
    root.parent.mkdir(parents=True, exist_ok=True)
    times_path = root.parent / "times.json"
    times: dict[str, Any] = json.loads(times_path.read_text(encoding="utf-8")) if times_path.is_file() else {}
    for iteration in range(iterations):
        if str(iteration) in times:
            continue
        load = os.getloadavg()[0]
        wall, cpu = _run(["-m", "burnqed.cli", "iterate", "--iter", str(iteration), "--root", str(root),
                          *(("--jobs", str(jobs)) if jobs else ()), *seed_sets(seed, extra)], env, log)
        times[str(iteration)] = {"wall_s": wall, "cpu_s": cpu, "load_before": load, "load_after": os.getloadavg()[0]}
        times_path.write_text(json.dumps(times, indent=1), encoding="utf-8")
        print(f"  seed {seed}: iteration {iteration} in {wall:.0f} s wall, {cpu:.0f} s CPU", flush=True)
    if not (root / RETRIEVAL).is_file():
        wall, _ = _run([str(ROOT / "benchmarks" / "retrieval.py"), "--root", str(root), "--world-seed", str(seed)],
                       env, log)
        print(f"  seed {seed}: retrieval baseline in {wall:.0f} s", flush=True)
    if concurrency_check and not (root / EVALS["iter 0 concurrency 1"]).is_file():
        budgets = ",".join(str(b) for b in EVAL_BUDGETS)
        wall, _ = _run(["-m", "burnqed.cli", "eval", "--iter", "0", "--budgets", budgets, "--pass-n", "1",
                        "--set", f"policy.model={root / 'iter_0' / 'export'}", *seed_sets(seed, extra),
                        "--set", "search.concurrency=1", "--output", str(root / EVALS["iter 0 concurrency 1"])],
                       env, log)
        print(f"  seed {seed}: iteration 0's eval at concurrency 1 in {wall:.0f} s", flush=True)
    budgets = ",".join(str(b) for b in EVAL_BUDGETS)
    for iteration in range(iterations):
        for sampling in RESAMPLE_SEEDS[:resample]:
            output = root / resampled_eval(iteration, sampling)
            if output.is_file():
                continue
            # the pipeline's LLM-only eval of this iteration (`burnqed plan` prints it), at another sampling seed
            wall, _ = _run(["-m", "burnqed.cli", "eval", "--iter", str(iteration), "--budgets", budgets, "--pass-n",
                            "1", "--model", str(root / f"iter_{iteration}" / "export"), *seed_sets(seed, extra),
                            "--set", f"policy.seed={sampling}", "--output", str(output)], env, log)
            print(f"  seed {seed}: iteration {iteration}'s LLM-only eval at policy.seed {sampling} in {wall:.0f} s",
                  flush=True)


# ------------------------------------------------------------------------------------------------ analysis


@dataclass
class SeedRun:
    """What one seed's folder holds (None: not there yet)."""

    seed: int
    evals: dict[str, dict[str, Any]] = field(default_factory=dict)
    retrieval: dict[str, Any] | None = None
    times: dict[str, Any] = field(default_factory=dict)
    stage_times: list[dict[str, float]] = field(default_factory=list)  # per iterate call in the log, in order
    gates: dict[str, bool] = field(default_factory=dict)


def stage_times(log_text: str) -> list[dict[str, float]]:
    """Stage seconds per `burnqed iterate` call of a log (`[k/n] stage: finished in Xs` lines; k = 1 starts a call).
    A stage that was already done prints no such line."""
    calls: list[dict[str, float]] = []
    for line in log_text.splitlines():
        found = _STAGE_DONE.match(line.strip())
        if found is None:
            continue
        if not calls or found.group(1) == "1" or found.group(3) in calls[-1]:
            calls.append({})
        calls[-1][found.group(3)] = float(found.group(4))
    return calls


def load_seed(workdir: Path, seed: int) -> SeedRun:
    root = workdir / f"seed-{seed}" / "runs"
    run = SeedRun(seed)
    for label, rel in EVALS.items():
        if (root / rel).is_file():
            run.evals[label] = json.loads((root / rel).read_text(encoding="utf-8"))
    if (root / RETRIEVAL).is_file():
        run.retrieval = json.loads((root / RETRIEVAL).read_text(encoding="utf-8"))
    times = root.parent / "times.json"
    if times.is_file():
        run.times = json.loads(times.read_text(encoding="utf-8"))
    log = root.parent / "log.txt"
    if log.is_file():
        run.stage_times = stage_times(log.read_text(encoding="utf-8", errors="replace"))
    report = root / "iter_1" / "report" / "report.json"
    if report.is_file():
        run.gates = {g["name"]: g["passed"] for g in json.loads(report.read_text(encoding="utf-8"))["gates"]}
    return run


def solved_at(result: dict[str, Any], budget: int) -> int:
    rows = [row for row in result["budgets"] if row["budget"] == budget]
    if not rows:
        raise ValueError(f"the eval has no budget {budget} (budgets: {[r['budget'] for r in result['budgets']]})")
    return int(rows[0]["solved"])


def proved_names(result: dict[str, Any]) -> set[str]:
    """Theorems proved at the result's largest budget."""
    return {t["name"] for t in result["per_theorem"] if t["proved"]}


def arm_overlap(ebm: dict[str, Any], llm: dict[str, Any]) -> dict[str, Any]:
    """Which theorems each arm proves at the largest budget: by both, by one only, by neither, and why LLM only
    failed on those neither proves ('exhausted': its tree ran out of nodes to ask; 'max_nodes': the budget ran
    out). Theorems one arm alone proves are where the two searches parted (the order, and the samples each order
    drew); on those neither proves, no order of these two decided it."""
    with_value, without = proved_names(ebm), proved_names(llm)
    neither = [t for t in llm["per_theorem"] if not t["proved"] and t["name"] not in with_value]
    return {"both": len(with_value & without), "only_ebm": len(with_value - without),
            "only_llm": len(without - with_value), "neither": len(neither),
            "neither_reasons": dict(sorted(Counter(t["failure_reason"] for t in neither).items()))}


def subset_rate(result: dict[str, Any], names: set[str] | None) -> tuple[int, int]:
    """(proved, total) at the largest budget over the theorems in `names` (None: all)."""
    rows = [t for t in result["per_theorem"] if names is None or t["name"] in names]
    return sum(t["proved"] for t in rows), len(rows)


def test_groups(world_seed: int, result: dict[str, Any]) -> dict[str, set[str] | None]:
    """The theorem subsets the figures are given on: all, world, bundled, the world's held-out templates."""
    roles = {t.name: t.role for t in embedded_world(world_seed).theorems}
    names = [t["name"] for t in result["per_theorem"]]
    return {"all": None, "world": {n for n in names if n in roles}, "bundled": {n for n in names if n not in roles},
            "held out": {n for n in names if roles.get(n) == "held_out"}}


def seed_figures(run: SeedRun) -> dict[str, Any]:
    """The checks of one seed, from what its folder holds (missing inputs leave their figures out)."""
    out: dict[str, Any] = {"seed": run.seed}
    it0 = run.evals.get("iter 0")
    if it0 is not None:
        small, large = solved_at(it0, SMALL), solved_at(it0, LARGE)
        failures = [t for t in it0["per_theorem"] if not t["proved"]]
        exhausted = sum(t["failure_reason"] == "exhausted" for t in failures)
        spent = [t["nodes_used"] for t in failures if t["failure_reason"] == "exhausted"]
        out["budget"] = {"small": small, "large": large, "ratio": large / small if small else float("inf"),
                         "failures": len(failures), "exhausted": exhausted,
                         "exhausted_share": exhausted / len(failures) if failures else 0.0,
                         "reasons": dict(Counter(t["failure_reason"] for t in failures)),
                         "exhausted_nodes": statistics.fmean(spent) if spent else 0.0,
                         "proof_budgets": sorted(t["budget_at_proof"] for t in it0["per_theorem"] if t["proved"])}
    if all(label in run.evals for label in LABELS):
        groups = test_groups(run.seed, run.evals["iter 1"])
        out["rates"] = {name: {label: subset_rate(run.evals[label], names) for label in LABELS}
                        for name, names in groups.items()}
        total = run.evals["iter 1"]["total"]
        out["ebm_by_budget"] = {budget: ((solved_at(run.evals["iter 1"], budget), total),
                                         (solved_at(run.evals["iter 1 LLM only"], budget), total))
                                for budget in EVAL_BUDGETS}
        out["ebm_overlap"] = arm_overlap(run.evals["iter 1"], run.evals["iter 1 LLM only"])
    if run.retrieval is not None and "iter 1" in run.evals:
        held = test_groups(run.seed, run.evals["iter 1"])["held out"] or set()
        out["retrieval"] = {"solved": run.retrieval["solved"], "total": run.retrieval["total"],
                            "iter1": len(proved_names(run.evals["iter 1"])), "sources": run.retrieval["sources"],
                            "held_out": (len(held & set(run.retrieval["proofs"])), len(held)),
                            "iter1_held_out": len(held & proved_names(run.evals["iter 1"]))}
    c1 = run.evals.get("iter 0 concurrency 1")
    if c1 is not None and it0 is not None:
        default, single = proved_names(it0), proved_names(c1)
        out["concurrency"] = {"same": default == single, "default": len(default), "one": len(single),
                              "only_default": sorted(default - single), "only_one": sorted(single - default),
                              "per_budget_same": all(solved_at(it0, b) == solved_at(c1, b) for b in EVAL_BUDGETS),
                              "total": c1["total"]}
    if "0" in run.times:
        out["iter0_wall_s"] = run.times["0"]["wall_s"]
        out["iter0_load"] = (run.times["0"]["load_before"], run.times["0"]["load_after"])
    if "1" in run.times:
        out["iter1_wall_s"] = run.times["1"]["wall_s"]
    if run.stage_times:
        out["iter0_stages"] = run.stage_times[0]
    out["gates"] = run.gates
    return out


def _pct(pair: tuple[int, int]) -> float:
    return 100.0 * pair[0] / pair[1] if pair[1] else float("nan")


def _mean_sd(values: list[float], unit: str = "", digits: int = 1, *, signed: bool = False) -> str:
    if not values:
        return "n/a"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    sign = "+" if signed else ""
    return f"{statistics.fmean(values):{sign}.{digits}f} ± {sd:.{digits}f}{unit}"


def _mark(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def analyse(runs: list[SeedRun]) -> list[str]:
    """The report lines: per seed and mean ± sd over the seeds that have each figure."""
    figs = [seed_figures(run) for run in runs]
    lines = [*_budget_lines(figs), *_rate_lines(figs), *_retrieval_lines(figs), *_ebm_lines(figs),
             *_concurrency_lines(figs), *_wall_lines(figs)]
    gated = [f for f in figs if f["gates"]]
    if gated:
        passed = Counter(name for f in gated for name, ok in f["gates"].items() if ok)
        lines.append("gates passed: " + ", ".join(f"{n} {passed[n]}/{len(gated)}" for n in gated[0]["gates"]))
    lines.extend(_templates(runs))
    return lines


def _budget_lines(figs: list[dict[str, Any]]) -> list[str]:
    """Check 1: budget 10 vs 100 and exhausted frontiers."""
    lines: list[str] = []
    have = [f for f in figs if "budget" in f]
    lines.append(f"1. iteration 0's eval: solved at budget {SMALL} → {LARGE}, and failures ending exhausted")
    for f in have:
        b = f["budget"]
        lines.append(f"   seed {f['seed']}: {b['small']} → {b['large']} (×{b['ratio']:.2f}, target ≥ 1.3: "
                     f"{_mark(b['ratio'] >= 1.3)}); exhausted {b['exhausted']}/{b['failures']} failures "
                     f"({100 * b['exhausted_share']:.0f} %, target ≤ 50 %: {_mark(b['exhausted_share'] <= 0.5)}) after "
                     f"{b['exhausted_nodes']:.1f} expansions on average; reasons {b['reasons']}; proofs found at "
                     f"budgets {b['proof_budgets']}")
    if have:
        lines.append(f"   mean: ×{_mean_sd([f['budget']['ratio'] for f in have], digits=2)}, exhausted share "
                     f"{_mean_sd([100 * f['budget']['exhausted_share'] for f in have], ' %')}")
    return lines


# Check 2's gains in points, (later eval, earlier eval): iteration 0's, iteration 1's, iteration 1's LLM-only one.
GAINS = (("iter 0", "base"), ("iter 1", "iter 0"), ("iter 1 LLM only", "iter 0"))


def _gains(rates: dict[str, tuple[int, int]]) -> tuple[float, ...]:
    return tuple(_pct(rates[later]) - _pct(rates[earlier]) for later, earlier in GAINS)


def _rate_lines(figs: list[dict[str, Any]]) -> list[str]:
    """Check 2: base → iteration 0 → iteration 1, overall, per group and on held-out templates."""
    lines: list[str] = []
    have = [f for f in figs if "rates" in f]
    lines.append(f"2. solve rate (%) at budget {LARGE}: base → iteration 0 → iteration 1 with its value model "
                 "(iteration 1 LLM only); gains in points, iteration 1's LLM-only gain in brackets")
    for name in ("all", "world", "bundled", "held out"):
        per_seed = []
        for f in have:
            r = f["rates"][name]
            g0, g1, g1_llm = gains = _gains(r)
            per_seed.append(gains)
            target = f" (targets ≥ 10, ≥ 5: {_mark(g0 >= 10 and g1 >= 5)})" if name in ("all", "held out") else ""
            lines.append(f"   seed {f['seed']} {name:<8} of {r['base'][1]:>2}: {_pct(r['base']):5.1f} → "
                         f"{_pct(r['iter 0']):5.1f} → {_pct(r['iter 1']):5.1f} ({_pct(r['iter 1 LLM only']):5.1f}); "
                         f"gains {g0:+.1f}, {g1:+.1f} ({g1_llm:+.1f}){target}")
        if have:
            cells = {label: _mean_sd([_pct(f["rates"][name][label]) for f in have]) for label in LABELS}
            gains0, gains1, gains1_llm = (_mean_sd(list(column)) for column in zip(*per_seed, strict=True))
            lines.append(f"   mean {name:<8}: {cells['base']} → {cells['iter 0']} → {cells['iter 1']} "
                         f"({cells['iter 1 LLM only']}); gains {gains0}, {gains1} ({gains1_llm})")
    return lines


def _retrieval_lines(figs: list[dict[str, Any]]) -> list[str]:
    """Check 3: the rename-and-replay baseline vs iteration 1."""
    lines: list[str] = []
    have = [f for f in figs if "retrieval" in f]
    lines.append("3. rename-and-replay retrieval baseline vs iteration 1 (solved, target ≤ half)")
    for f in have:
        r = f["retrieval"]
        lines.append(f"   seed {f['seed']}: {r['solved']}/{r['total']} vs {r['iter1']} "
                     f"({_mark(2 * r['solved'] <= r['iter1'])}); held-out templates {r['held_out'][0]}/"
                     f"{r['held_out'][1]} vs {r['iter1_held_out']}; proofs tried {r['sources']}")
    return lines


def _ebm_lines(figs: list[dict[str, Any]]) -> list[str]:
    """Check 4: LLM+EBM vs LLM only (the target at the largest budget; the smaller budgets beside it)."""
    lines: list[str] = []
    have = [f for f in figs if "rates" in f]
    lines.append(f"4. LLM+EBM vs LLM only at budget {LARGE}, all test theorems (target ≥ +3 points)")
    for f in have:
        r = f["rates"]["all"]
        gap = _pct(r["iter 1"]) - _pct(r["iter 1 LLM only"])
        lines.append(f"   seed {f['seed']}: {_pct(r['iter 1']):.1f} vs {_pct(r['iter 1 LLM only']):.1f} "
                     f"({gap:+.1f}, {_mark(gap >= 3)})")
        o = f["ebm_overlap"]
        reasons = ", ".join(f"{reason} {n}" for reason, n in o["neither_reasons"].items())
        lines.append(f"     proved by both {o['both']}, only with the value model {o['only_ebm']}, only by LLM only "
                     f"{o['only_llm']}, by neither {o['neither']} (LLM only's ending there: {reasons or '-'})")
    if have:
        gaps = [_pct(f["rates"]["all"]["iter 1"]) - _pct(f["rates"]["all"]["iter 1 LLM only"]) for f in have]
        lines.append("   mean: " + _mean_sd(gaps, " points"))
        by_budget = {budget: [_pct(f["ebm_by_budget"][budget][0]) - _pct(f["ebm_by_budget"][budget][1])
                              for f in have] for budget in EVAL_BUDGETS}
        lines.append("   the same gap at every budget (points, mean over seeds): "
                     + ", ".join(f"{budget}: {_mean_sd(values, signed=True)}" for budget, values in by_budget.items()))
    return lines


def _concurrency_lines(figs: list[dict[str, Any]]) -> list[str]:
    """Check 5: the solved set at concurrency 1 vs the default."""
    lines: list[str] = []
    lines.append("5. iteration 0's solved set at concurrency 1 vs the default")
    for f in figs:
        if "concurrency" in f:
            c = f["concurrency"]
            lines.append(f"   seed {f['seed']}: {c['one']} vs {c['default']} of {c['total']}; same set: {c['same']}, "
                         f"same count per budget: {c['per_budget_same']} ({_mark(c['same'])}); only default "
                         f"{c['only_default']}, only concurrency 1 {c['only_one']}")
    return lines


def _wall_lines(figs: list[dict[str, Any]]) -> list[str]:
    """Check 6: iteration 0's wall time and its stages."""
    lines: list[str] = []
    lines.append("6. `burnqed iterate --iter 0` wall time (target < 300 s)")
    for f in figs:
        if "iter0_wall_s" in f:
            stages = ", ".join(f"{k} {v:.0f}" for k, v in f.get("iter0_stages", {}).items())
            lines.append(f"   seed {f['seed']}: {f['iter0_wall_s']:.0f} s ({_mark(f['iter0_wall_s'] < 300)}), load "
                         f"{f['iter0_load'][0]:.1f} before / {f['iter0_load'][1]:.1f} after; stages (s): {stages}"
                         + (f"; iteration 1 {f['iter1_wall_s']:.0f} s" if "iter1_wall_s" in f else ""))
    return lines


def _templates(runs: list[SeedRun]) -> list[str]:
    """World test theorems solved per template (sum over seeds), by role."""
    done = [run for run in runs if all(label in run.evals for label in LABELS[:3])]
    if not done:
        return []
    lines = ["world test theorems solved per template (sum over seeds): base / iter 0 / iter 1 of n (role)"]
    solved: dict[str, Counter[str]] = {label: Counter() for label in LABELS[:3]}
    count: Counter[str] = Counter()
    roles: dict[str, str] = {}
    for run in done:
        world = {t.name: t for t in embedded_world(run.seed).theorems}
        for theorem in run.evals["iter 1"]["per_theorem"]:
            if theorem["name"] in world:
                count[world[theorem["name"]].template] += 1
                roles[world[theorem["name"]].template] = world[theorem["name"]].role
        for label in LABELS[:3]:
            for name in proved_names(run.evals[label]):
                if name in world:
                    solved[label][world[name].template] += 1
    for template in sorted(count, key=lambda t: (roles[t], t)):
        lines.append(f"   {template:<18} " + " / ".join(f"{solved[label][template]:>2}" for label in LABELS[:3])
                     + f" of {count[template]} ({roles[template]})")
    return lines


# ------------------------------------------------------------------------------------------ the curve (issue 69)

CURVE_BUDGETS = (50, 100)


def _solved_or_none(path: Path, budget: int) -> int | None:
    if not path.is_file():
        return None
    result = json.loads(path.read_text(encoding="utf-8"))
    rows = [row for row in result["budgets"] if row["budget"] == budget]
    return int(rows[0]["solved"]) if rows else None


def _mean_solved(paths: list[Path], budget: int) -> float | None:
    counts = [_solved_or_none(path, budget) for path in paths]
    known = [c for c in counts if c is not None]
    return statistics.fmean(known) if len(known) == len(counts) else None


def iteration_point(root: Path, j: int) -> dict[str, Any]:
    """Iteration `j` of a run root: both arms' solved counts at CURVE_BUDGETS (None: not measured; iteration 0 has
    no value model), the LLM-only count's mean over the pipeline's sampling and --resample's (None without those), the
    benchmark's size, the positives its SFT trained on (× upsample), its last train and held-out
    losses, and what it started from (its start.json, when there is one)."""
    it = root / f"iter_{j}"
    llm = it / "eval" / ("eval.json" if j == 0 else "eval-noebm.json")
    point: dict[str, Any] = {"iteration": j,
                             "llm": {b: _solved_or_none(llm, b) for b in CURVE_BUDGETS},
                             "llm_ebm": {b: None if j == 0 else _solved_or_none(it / "eval" / "eval.json", b)
                                         for b in CURVE_BUDGETS},
                             "total": json.loads(llm.read_text(encoding="utf-8"))["total"] if llm.is_file() else None}
    resampled = [root / resampled_eval(j, s) for s in RESAMPLE_SEEDS if (root / resampled_eval(j, s)).is_file()]
    point["resamples"] = len(resampled)
    point["llm_resampled"] = {b: _mean_solved([llm, *resampled], b) if resampled else None for b in CURVE_BUDGETS}
    record = it / "sft" / "sft.json"
    if record.is_file():
        sft = json.loads(record.read_text(encoding="utf-8"))
        counts, history = sft.get("data_counts", {}), sft.get("history", [])
        losses = [h["loss"] for h in history if h.get("loss") is not None]
        held = [h["eval_loss"] for h in history if h.get("eval_loss") is not None]
        point.update(positives=counts.get("positives"), upsample=counts.get("positive_upsample"),
                     train_loss=losses[-1] if losses else None, held_out_loss=held[-1] if held else None,
                     sft_init=sft.get("init"))
    start = it / "start.json"
    if start.is_file():
        began = json.loads(start.read_text(encoding="utf-8"))
        point["start"] = {"policy_from": began["policy_from"], "value_model_from": began["value_model_from"],
                          "search_value_model": began["search_value_model"]}
    return point


def _named(iteration: int | None) -> str:
    """An iteration a start record names, or what None means there (the base model; a value model trained afresh)."""
    return "none (base / afresh)" if iteration is None else str(iteration)


def seed_curve(workdir: Path, seed: int, iterations: int) -> list[dict[str, Any]]:
    root = workdir / f"seed-{seed}" / "runs"
    return [iteration_point(root, j) for j in range(iterations) if (root / f"iter_{j}").is_dir()]


def curve_summary(curves: dict[int, list[dict[str, Any]]], budget: int = 50) -> dict[str, Any]:
    """Mean over the seeds that measured it, per iteration and arm, at `budget` (percent of the benchmark), and the
    targets of issue 69 on the policy alone (also as the mean over --resample's samplings) and with the value model:
    iterations 2, 3 and 4 each at least the best earlier one, iteration 4 at least 5 points above iteration 1 (None:
    not measured)."""
    per: dict[str, dict[int, float]] = {"llm": {}, "llm_ebm": {}, "llm_resampled": {}}
    for arm, found in per.items():
        for j in sorted({p["iteration"] for points in curves.values() for p in points}):
            rates = [100 * p[arm][budget] / p["total"] for points in curves.values() for p in points
                     if p["iteration"] == j and p.get(arm, {}).get(budget) is not None and p["total"]]
            if rates:
                found[j] = statistics.fmean(rates)
    targets: dict[str, Any] = {}
    for arm, means in per.items():
        # iteration 0 has no value model: with it, iteration 0's policy is the arm's start
        line = {**({0: per["llm"][0]} if arm == "llm_ebm" and 0 in per["llm"] else {}), **means}
        never_below = {j: (line[j] >= max(line[k] for k in line if k < j))
                       if j in line and any(k < j for k in line) else None for j in (2, 3, 4)}
        gain = line[4] - line[1] if 4 in line and 1 in line else None
        targets[arm] = {"never_below_best_earlier": never_below, "iter4_minus_iter1_pts": gain,
                        "iter4_at_least_5_above_iter1": None if gain is None else gain >= 5}
    return {"budget": budget, "seeds": sorted(curves), "mean_pct": per, "targets": targets}


def curve_lines(curves: dict[int, list[dict[str, Any]]], summary: dict[str, Any]) -> list[str]:
    """The curve per seed and its mean, as the analysis prints it."""
    if not any(curves.values()):
        return []
    lines = ["curve across iterations (solved at budget 50 / 100; positives ×upsample; SFT held-out loss; start)"]
    for seed, points in curves.items():
        for p in points:
            def pair(arm: str, p: dict[str, Any] = p) -> str:
                return " / ".join("–" if p[arm][b] is None else str(p[arm][b]) for b in CURVE_BUDGETS)
            start = p.get("start")
            began = "" if start is None else (f"; started from policy {_named(start['policy_from'])}, value model "
                                              f"{_named(start['value_model_from'])}, search "
                                              f"{'with' if start['search_value_model'] else 'without'} it")
            held = p.get("held_out_loss")
            samples = p.get("resamples", 0)
            mean = p.get("llm_resampled", {})
            resampled = "" if not samples else (
                f", LLM only over {samples + 1} samplings "
                + " / ".join("–" if mean.get(b) is None else f"{mean[b]:.1f}" for b in CURVE_BUDGETS))
            lines.append(f"   seed {seed} iter {p['iteration']}: LLM only {pair('llm')}, LLM+EBM {pair('llm_ebm')}"
                         f"{resampled} of {p['total']}; positives {p.get('positives')} ×{p.get('upsample')}; "
                         f"held-out {'–' if held is None else f'{held:.4f}'}{began}")
    for arm, means in summary["mean_pct"].items():
        if not means:
            continue
        lines.append(f"   mean {arm} at {summary['budget']}: "
                     + ", ".join(f"iter {j} {v:.1f} %" for j, v in means.items()))
    for arm, target in summary["targets"].items():
        if not summary["mean_pct"][arm]:
            continue
        lines.append(f"   target ({arm}): never below the best earlier {target['never_below_best_earlier']}; "
                     f"iter 4 − iter 1 = {target['iter4_minus_iter1_pts']} pts (≥ 5: "
                     f"{target['iter4_at_least_5_above_iter1']})")
    return lines


def write_curve(workdir: Path, seeds: list[int], iterations: int) -> list[str]:
    """DIR/curve.json (every seed's points, their mean at budget 50 and the targets) and its lines."""
    curves = {seed: seed_curve(workdir, seed, iterations) for seed in seeds}
    summary = curve_summary(curves)
    (workdir / "curve.json").write_text(json.dumps({"seeds": {str(k): v for k, v in curves.items()},
                                                     "summary": summary}, indent=1) + "\n", encoding="utf-8")
    return curve_lines(curves, summary)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    parser.add_argument("--workdir", type=Path, default=None, help="work folder (default: a new temporary one)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="stage processes run at once (burnqed iterate --jobs; default: iterate's own)")
    parser.add_argument("--concurrency-check", default="0",
                        help="seeds whose iteration 0 eval is re-run at search.concurrency=1 (default 0; '' = none)")
    parser.add_argument("--iterations", type=int, default=2, help="iterations 0..N-1 per seed (default 2)")
    parser.add_argument("--resample", type=int, default=0, metavar="N",
                        help=f"evaluate each iteration's policy (LLM only) again at N more sampling seeds, policy.seed "
                        f"{', '.join(map(str, RESAMPLE_SEEDS))} in order (0..{len(RESAMPLE_SEEDS)}; default 0)")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of every iterate (a variant, e.g. pipeline.start=base); repeatable")
    parser.add_argument("--analyse-only", action="store_true", help="run nothing; analyse the work folder")
    args = parser.parse_args(argv)
    try:
        seeds = [int(part) for part in args.seeds.split(",") if part.strip()]
        check = {int(part) for part in args.concurrency_check.split(",") if part.strip()}
    except ValueError:
        print(f"--seeds/--concurrency-check: expected comma-separated integers, got {args.seeds!r}, "
              f"{args.concurrency_check!r}", file=sys.stderr)
        return 2
    if args.iterations < 1 or any("=" not in item for item in args.sets):
        print(f"--iterations must be ≥ 1 and each --set KEY=VALUE (got {args.iterations}, {args.sets})",
              file=sys.stderr)
        return 2
    if not 0 <= args.resample <= len(RESAMPLE_SEEDS):
        print(f"--resample must be 0..{len(RESAMPLE_SEEDS)} (got {args.resample})", file=sys.stderr)
        return 2
    if args.analyse_only and (args.workdir is None or not args.workdir.is_dir()):
        print(f"--analyse-only needs --workdir of an existing work folder (got {args.workdir})", file=sys.stderr)
        return 2
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="burnqed-learning-"))
    if not args.analyse_only:
        workdir.mkdir(parents=True, exist_ok=True)
        env = work_env(workdir)
        print(f"work folder {workdir}; seeds {seeds}", flush=True)
        model = workdir / "home" / "models" / "tiny-v3"
        if not model.is_dir():
            build_s, _ = _run(["-m", "burnqed.cli", "model", "init-tiny", "--output", str(model)], env,
                              workdir / "init-tiny.log")
            print(f"tiny base model built in {build_s:.0f} s", flush=True)
        for seed in seeds:
            run_seed(seed, workdir, env, args.jobs, seed in check, args.iterations, tuple(args.sets),
                     args.resample)
    runs = [load_seed(workdir, seed) for seed in seeds]
    print(f"\nwork folder {workdir}; seeds {seeds}; load average now {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")
    print("\n".join(analyse(runs)))
    print("\n".join(write_curve(workdir, seeds, args.iterations)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

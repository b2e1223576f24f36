"""Does GRPO on Lean's verdict pay at equal training wall time? Iteration 1 with RL after SFT against iteration 1
without, on the embedded world, for three world seeds (docs/benchmarks.md, "rl_figure.py").

    python benchmarks/rl_figure.py [--seeds 0,1,2] [--jobs 3] [--workdir DIR] [--sft-warm N]
                                   [--tag NAME --rl-set KEY=VALUE ...]
    python benchmarks/rl_figure.py --analyse-only --workdir DIR [--seeds 0,1,2] [--tag NAME]

Per seed, in DIR/seed-S: iteration 0 of the embedded pipeline (`burnqed iterate --iter 0`, its own eval left out),
shared by both arms; then iteration 1's SFT from it, which both arms read, and two arms: **rl** trains that SFT
output further with the rl stage (`burnqed rl`, `--rl-set` applied) and exports it; **sft** trains iteration 1's SFT
for more steps instead, as many as fill the rl arm's training seconds (SFT's and RL's training loops, as their
records measure them; `matched_sft`), and exports it. Proof examples
are on throughout (`sft.proof_examples=true`: iteration 0 also trains the whole format on the data's replayed proofs,
iteration 1 on the trajectories' verified proofs), so the SFT data is the same in both arms and RL is the only
difference. Each arm's export is evaluated on the test split, LLM only (no value model: RL trains the policy, and an
iteration's value model would be another variable): whole-proof pass@8 (`search.mode=whole`, budget 8 proofs) and
step search at budget 50 expansions (the iteration's step eval's largest default budget).

Equal training wall time, not equal generated tokens: SFT generates no tokens, so at equal tokens the arm without RL
would get no training at all; wall time is what a researcher spends either way. Both arms' measured training seconds
are recorded. Finished steps are not redone (each
output's completion marker, each eval's JSON); `--jobs N` runs N seeds at once. The analysis writes
DIR/rl-figure[-TAG].json and prints a markdown table: per seed both arms' whole pass@8 and step@50, training seconds
and generated tokens, then the mean ± sd of the whole pass@8 gain against the +5-point target. Exit code 1 when a run
fails or an arm is missing.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.learning import _mean_sd, _run, work_env  # noqa: E402
from benchmarks.repair import WARM_LOOP, load, seed_sets  # noqa: E402

TARGET_POINTS = 5.0
WHOLE_BUDGET = 8  # proofs sampled: whole pass@8
STEP_BUDGET = 50  # node expansions
ITER0_STAGES = ("prepare-data", "sft", "export", "search", "search-noise", "merge-trajectories")
MARKER = "_SUCCESS.json"
MATCH_TOLERANCE = 0.1  # the sft arm's training seconds within 10 % of the rl arm's
MATCH_TRIES = 3


def common_sets(seed: int) -> list[str]:
    """The `--set` arguments of every run of seed `seed`."""
    return [*seed_sets(seed), "--set", "pipeline.eval_base=false", "--set", "sft.proof_examples=true", *WARM_LOOP]


def arm_name(arm: str, tag: str) -> str:
    return f"{arm}-{tag}" if tag else arm


@dataclass(frozen=True)
class SeedPaths:
    folder: Path

    @property
    def root(self) -> Path:
        return self.folder / "runs"

    def iter0(self, name: str) -> Path:
        return self.root / "iter_0" / name

    @property
    def sft(self) -> Path:  # iteration 1's SFT, which both arms read
        return self.folder / "iter1-sft"

    def arm(self, arm: str, tag: str) -> Path:
        return self.folder / arm_name(arm, tag)

    @property
    def times(self) -> Path:
        return self.folder / "times.json"


def _record(folder: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / name).read_text(encoding="utf-8"))
    return data


def _done(folder: Path) -> bool:
    return (folder / MARKER).is_file()


class Steps:
    """Runs the steps of one seed, each once: its wall seconds kept in times.json (what resumed runs skip)."""

    def __init__(self, paths: SeedPaths, seed: int, workdir: Path) -> None:
        self.paths, self.seed = paths, seed
        self.env = work_env(workdir / f"seed-{seed}")
        self.log = paths.folder / "log.txt"
        self.times: dict[str, float] = (json.loads(paths.times.read_text(encoding="utf-8"))
                                        if paths.times.is_file() else {})

    def run(self, name: str, argv: list[str], done: bool) -> None:
        if done:
            return
        wall, _ = _run(["-m", "burnqed.cli", *argv, *common_sets(self.seed)], self.env, self.log)
        self.times[name] = round(wall, 1)
        self.paths.times.write_text(json.dumps(self.times, indent=1) + "\n", encoding="utf-8")
        print(f"  seed {self.seed}: {name} in {wall:.0f} s", flush=True)


def training_seconds(paths: SeedPaths, rl_arm: Path) -> float:
    """The rl arm's training seconds: the shared SFT's training loop and RL's, as their records measure them."""
    return float(_record(paths.sft, "sft.json")["train_seconds"]) + float(_record(rl_arm / "rl", "rl.json")
                                                                         ["train_seconds"])


def matched_sft(steps: Steps, sft_arm: Path, target: float, argv: list[str]) -> Path:
    """The sft arm's SFT: warm steps first guessed from the shared SFT's seconds per step, then, while its measured
    training seconds miss `target` by more than MATCH_TOLERANCE, trained again at the steps its own seconds per step
    give (at most MATCH_TRIES runs: another process on the machine moves seconds per step), never fewer than the
    shared SFT's steps (the arm is that SFT trained further). Each try is its own output, `sft-STEPS`; the one
    nearest the target is chosen, written to `matched.json`."""
    shared = _record(steps.paths.sft, "sft.json")
    per_step = float(shared["train_seconds"]) / max(int(shared["steps"]), 1)
    warm, tried = max(int(shared["steps"]), math.ceil(target / max(per_step, 1e-9))), []
    for _ in range(MATCH_TRIES):
        output = sft_arm / f"sft-{warm}"
        steps.run(f"{sft_arm.name} sft {warm} steps", [*argv, "--output", str(output), "--set",
                                                        f"sft.warm_steps={warm}"], done=_done(output))
        seconds = float(_record(output, "sft.json")["train_seconds"])
        tried.append({"steps": warm, "train_seconds": seconds})
        if abs(seconds - target) <= MATCH_TOLERANCE * target:
            break
        # never below the shared SFT's steps: the arm is that SFT trained further, whatever the load did to a try
        following = max(int(shared["steps"]), math.ceil(warm * target / max(seconds, 1e-9)))
        if following == warm:
            break
        warm = following
    # the try nearest the target (the last one may have run under another load than the one before it)
    best = min(tried, key=lambda t: abs(float(t["train_seconds"]) - target))
    output = sft_arm / f"sft-{best['steps']}"
    (sft_arm / "matched.json").write_text(json.dumps({"target_seconds": target, "tried": tried,
                                                      "sft": str(output)}, indent=1) + "\n", encoding="utf-8")
    return output


def run_seed(seed: int, workdir: Path, tag: str, rl_sets: list[str], sft_warm: int | None = None) -> None:
    """Run (or resume) seed `seed`: iteration 0, iteration 1's SFT (`sft_warm` steps, else the configuration's
    sft.warm_steps), the rl arm, the sft arm, the four evals."""
    paths = SeedPaths(workdir / f"seed-{seed}")
    paths.folder.mkdir(parents=True, exist_ok=True)
    steps = Steps(paths, seed, workdir)
    root = str(paths.root)
    only = [arg for stage in ITER0_STAGES for arg in ("--only", stage)]
    steps.run("iteration 0", ["iterate", "--iter", "0", "--root", root, *only],
              done=_done(paths.iter0("trajectories")) and _done(paths.iter0("sft")))
    data, trajectories = str(paths.iter0("data")), str(paths.iter0("trajectories"))
    warm = ["--set", f"sft.warm_steps={sft_warm}"] if sft_warm is not None else []
    steps.run("iteration 1 sft", ["sft", "--iter", "1", "--data", data, "--trajectories", trajectories,
                                  "--init", str(paths.iter0("sft")), "--output", str(paths.sft), *warm],
              done=_done(paths.sft))
    trained = int(_record(paths.sft, "sft.json")["steps"])
    if sft_warm is not None and trained != sft_warm:
        raise SystemExit(f"{paths.sft}: the shared SFT of this workdir trained {trained} steps, not --sft-warm "
                         f"{sft_warm}: give another --workdir (iteration 0 can be copied into it)")
    rl_arm, sft_arm = paths.arm("rl", tag), paths.arm("sft", tag)
    rl_flags = [a for item in rl_sets for a in ("--set", item)]
    steps.run(f"{rl_arm.name} rl", ["rl", "--iter", "1", "--sft", str(paths.sft), "--theorems",
                                    f"{data}/theorems.json", "--split", "train,pool", "--trajectories",
                                    trajectories, "--output", str(rl_arm / "rl"), *rl_flags],
              done=_done(rl_arm / "rl"))
    steps.run(f"{rl_arm.name} export", ["export", "--sft", str(rl_arm / "rl"), "--output", str(rl_arm / "export")],
              done=_done(rl_arm / "export"))
    sft_arm.mkdir(parents=True, exist_ok=True)
    chosen = matched_sft(steps, sft_arm, training_seconds(paths, rl_arm),
                         ["sft", "--iter", "1", "--data", data, "--trajectories", trajectories,
                          "--init", str(paths.iter0("sft"))])
    steps.run(f"{sft_arm.name} export", ["export", "--sft", str(chosen), "--output", str(sft_arm / "export")],
              done=_done(sft_arm / "export"))
    for arm in (rl_arm, sft_arm):
        for mode, budget in (("whole", WHOLE_BUDGET), ("step", STEP_BUDGET)):
            output = arm / f"{mode}.json"
            steps.run(f"{arm.name} eval {mode}@{budget}",
                      ["eval", "--iter", "1", "--split", "test", "--budgets", str(budget), "--pass-n", "1",
                       "--set", f"search.mode={mode}", "--model", str(arm / "export"), "--output", str(output)],
                      done=output.is_file())


# ------------------------------------------------------------------------------------------------ analysis


def _rate(path: Path, budget: int) -> dict[str, Any] | None:
    result = load(path)
    if result is None:
        return None
    row = next((row for row in result.budgets if row.budget == budget), None)
    if row is None:
        return None
    return {"solved": row.solved, "total": row.total, "rate": row.rate, "avg_tokens": row.avg_tokens}


def arm_figures(paths: SeedPaths, arm: Path) -> dict[str, Any] | None:
    """One arm's figures, or None when some output is missing."""
    whole, step = _rate(arm / "whole.json", WHOLE_BUDGET), _rate(arm / "step.json", STEP_BUDGET)
    if whole is None or step is None:
        return None
    if (arm / "rl" / "rl.json").is_file():
        sft, rl = _record(paths.sft, "sft.json"), _record(arm / "rl", "rl.json")
        rollouts = [json.loads(line) for line in (arm / "rl" / "rl-log.jsonl").read_text(encoding="utf-8").split("\n")
                    if line]
        training = {"sft_steps": sft["steps"], "sft_seconds": sft["train_seconds"], "rl_steps": rl["steps"],
                    "rl_seconds": rl["train_seconds"], "mean_reward": rl["mean_reward"],
                    "generated_tokens": sum(step["tokens_generated"] for step in rollouts),
                    "verified_rollouts": sum(step["verified"] for step in rollouts)}
        seconds = sft["train_seconds"] + rl["train_seconds"]
    else:
        matched = json.loads((arm / "matched.json").read_text(encoding="utf-8"))
        sft = _record(Path(matched["sft"]), "sft.json")
        training = {"sft_steps": sft["steps"], "sft_seconds": sft["train_seconds"], "generated_tokens": 0,
                    "target_seconds": round(matched["target_seconds"], 1), "tries": matched["tried"]}
        seconds = sft["train_seconds"]
    return {"whole_pass8": whole, "step50": step, "train_seconds": round(seconds, 1), **training}


def analyse(workdir: Path, seeds: list[int], tag: str) -> int:
    """Write the JSON summary and print the table (module docstring); 1 when an arm is missing for some seed."""
    rows: dict[str, Any] = {}
    missing = False
    for seed in seeds:
        paths = SeedPaths(workdir / f"seed-{seed}")
        arms = {arm: arm_figures(paths, paths.arm(arm, tag)) for arm in ("rl", "sft")}
        if any(figures is None for figures in arms.values()):
            print(f"seed {seed}: an arm is missing under {paths.folder}")
            missing = True
            continue
        rl, sft = arms["rl"], arms["sft"]
        assert rl is not None and sft is not None
        times = json.loads(paths.times.read_text(encoding="utf-8")) if paths.times.is_file() else {}
        rows[str(seed)] = {
            "rl": rl, "sft": sft, "step_seconds": times,
            "whole_gain_points": round(100 * (rl["whole_pass8"]["rate"] - sft["whole_pass8"]["rate"]), 2),
            "step_gain_points": round(100 * (rl["step50"]["rate"] - sft["step50"]["rate"]), 2),
        }
    gains = [row["whole_gain_points"] for row in rows.values()]
    step_gains = [row["step_gain_points"] for row in rows.values()]
    summary = {"tag": tag, "target_points": TARGET_POINTS, "whole_budget": WHOLE_BUDGET, "step_budget": STEP_BUDGET,
               "comparison": "equal training wall time", "seeds": rows,
               "whole_gain_mean": statistics.fmean(gains) if gains else None,
               "whole_gain_sd": statistics.stdev(gains) if len(gains) > 1 else None,
               "step_gain_mean": statistics.fmean(step_gains) if step_gains else None}
    out = workdir / f"rl-figure{'-' + tag if tag else ''}.json"
    workdir.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print("| seed | arm | whole pass@8 | step@50 | training s | SFT steps | RL steps | generated tokens |")
    print("|---|---|---|---|---|---|---|---|")
    for name, row in rows.items():
        for arm in ("sft", "rl"):
            fig = row[arm]
            whole, step = fig["whole_pass8"], fig["step50"]
            print(f"| {name} | {arm_name(arm, tag)} | {whole['solved']}/{whole['total']} ({100 * whole['rate']:.1f} %) "
                  f"| {step['solved']}/{step['total']} ({100 * step['rate']:.1f} %) | {fig['train_seconds']:.1f} "
                  f"| {fig['sft_steps']} | {fig.get('rl_steps', 0)} | {fig['generated_tokens']} |")
    if gains:
        verdict = "met" if statistics.fmean(gains) >= TARGET_POINTS else "not met"
        print(f"\nwhole pass@8 gain of rl over sft at equal training time, over {len(gains)} seed(s): "
              f"{_mean_sd(gains, ' points', signed=True)} (target +{TARGET_POINTS:.0f}: {verdict}); step@50: "
              f"{_mean_sd(step_gains, ' points', signed=True)} (no loss allowed)")
    print(f"summary: {out}")
    return 1 if missing else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated world seeds (default 0,1,2)")
    parser.add_argument("--jobs", type=int, default=1, help="seeds run at once (default 1)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/burnqed-rl-figure"))
    parser.add_argument("--sft-warm", type=int, default=None, metavar="N",
                        help="iteration 1's shared SFT trains N steps (sft.warm_steps; default the configuration's)")
    parser.add_argument("--tag", default="", help="names a variant's arms (rl-TAG, sft-TAG); same iteration 0 and SFT")
    parser.add_argument("--rl-set", action="append", default=[], metavar="KEY=VALUE",
                        help="a --set of the rl stage only (with --tag), e.g. rl.max_steps=40 or rl.theorems=all")
    parser.add_argument("--analyse-only", action="store_true", help="run nothing; analyse the work folder")
    args = parser.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--seeds: expected comma-separated integers, got {args.seeds!r}")
    if args.rl_set and not args.tag:
        parser.error("--rl-set makes a variant: name it with --tag (its arms are kept apart from the default's)")
    if not args.analyse_only:
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [pool.submit(run_seed, seed, args.workdir, args.tag, args.rl_set, args.sft_warm)
                       for seed in seeds]
            for future in futures:
                future.result()
    return analyse(args.workdir, seeds, args.tag)


if __name__ == "__main__":
    raise SystemExit(main())

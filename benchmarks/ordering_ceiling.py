"""How much could any ordering of the frontier add at the benchmark's budgets? A hindsight oracle on learning.py's runs.

    .venv/bin/python benchmarks/ordering_ceiling.py --workdir DIR [--seeds 0,1,2] [--long 1000] [--off 1]
                                                    [--sampling-seeds 101,102]

On a `benchmarks/learning.py` work folder whose iteration 1 is finished: iteration 1's eval again with and without
its value model, then with a value model that knows every proof either found (`HindsightValue`), and with
`--sampling-seeds` both arms at other sampling seeds. Prints the oracle's and the value model's gain over LLM only
against check 4's target (+3 points at budget 100). Finished evals are not redone. docs/benchmarks.md,
"ordering_ceiling.py".
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.learning import EVAL_BUDGETS, LARGE, _mean_sd, _pct, _run, seed_sets, work_env  # noqa: E402
from burnqed.config import load_config  # noqa: E402
from burnqed.policy.base import AsyncClosing  # noqa: E402
from burnqed.storage import Store  # noqa: E402
from burnqed.trajectory.reader import read_edges  # noqa: E402
from leankit.normal_form import state_up_to_names  # noqa: E402

TABLE = "hindsight.json"
ARMS = ("llm", "ebm")


# ------------------------------------------------------------------------------------------- the oracle


def hindsight_from_rows(rows: Sequence[dict[str, Any]], table: dict[str, dict[str, int]] | None = None
                        ) -> dict[str, dict[str, int]]:
    """Add to `table` (per root state up to names: state up to names → fewest tactics from it to the end of a proof)
    the states on the verified proof paths of trajectory `rows` (theorem, node_id, parent_id, depth, state_before,
    proof_complete). A proved theorem's root is in its own table; an unproved theorem adds nothing."""
    table = {} if table is None else table
    by_theorem: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_theorem[row["theorem"]].append(row)
    for edges in by_theorem.values():
        closings = [row for row in edges if row["proof_complete"]]
        roots = {row["state_before"] for row in edges if row["depth"] == 1}
        if not closings or len(roots) != 1:
            continue
        known = table.setdefault(state_up_to_names(roots.pop()), {})
        by_id = {row["node_id"]: row for row in edges}
        for closing in closings:
            edge: dict[str, Any] | None = closing
            while edge is not None:  # the closing edge up to the root: each edge's state is one step further
                remaining = closing["depth"] - edge["depth"] + 1
                key = state_up_to_names(edge["state_before"])
                known[key] = min(known.get(key, remaining), remaining)
                edge = by_id.get(edge["parent_id"])
    return table


def hindsight_table(prefixes: Sequence[str], *, store: Store) -> dict[str, dict[str, int]]:
    """`hindsight_from_rows` over the committed trajectories under each of `prefixes`."""
    table: dict[str, dict[str, int]] = {}
    for prefix in prefixes:
        rows = read_edges(prefix, ["theorem", "node_id", "parent_id", "depth", "state_before", "proof_complete"],
                          store=store).to_pylist()
        hindsight_from_rows(rows, table)
    return table


class HindsightValue(AsyncClosing):
    """A `ValueFn` from a hindsight table (module docstring): energy = tactics remaining on a known proof path;
    the theorem's longest known remaining + `off` off them; 0 for every state of a theorem with no known proof."""

    def __init__(self, table: dict[str, dict[str, int]], off: float) -> None:
        self.table = table
        self.off = off
        self.calls = 0

    async def energies(self, goal: str, states: Sequence[str]) -> list[float]:
        self.calls += 1
        known = self.table.get(state_up_to_names(goal))
        if not known:
            return [0.0] * len(states)
        elsewhere = max(known.values()) + self.off
        return [float(known.get(state_up_to_names(state), elsewhere)) for state in states]

    async def close(self) -> None:
        return None


def oracle_eval(table_path: Path, off: float, eval_argv: list[str]) -> None:
    """`burnqed eval EVAL_ARGV` with the table at `table_path` in place of the value model its `--ebm` names (the
    eval records that path as its value model). In-process: `commands.edges.open_value_fn` is the seam the eval
    command opens its value model through, `check_value_fn` the one it checks `--ebm` through first."""
    import contextlib
    from collections.abc import AsyncIterator

    from burnqed.cli import main as cli_main
    from burnqed.commands import edges
    from burnqed.config import Config
    from burnqed.errors import InputError

    table = json.loads(table_path.read_text(encoding="utf-8"))

    @contextlib.asynccontextmanager
    async def hindsight(ebm: str | None, cfg: Config, *, store: Store) -> AsyncIterator[HindsightValue | None]:
        yield None if ebm is None else HindsightValue(table, off)

    def a_table(ebm: str, *, store: Store) -> None:
        if not store.is_file(ebm):
            raise InputError(f"--ebm {ebm} is not a file: the oracle eval takes its table (a JSON file) there")

    edges.open_value_fn = hindsight
    edges.check_value_fn = a_table  # the table stands where a value model would: it is checked as what it is
    sys.argv = ["burnqed", "eval", *eval_argv]
    cli_main()


# ---------------------------------------------------------------------------------------------- running


def _eval_argv(root: Path, seed: int, budgets: Sequence[int], output: Path, *, ebm: str | None,
               trajectories: Path | None = None, sampling_seed: int | None = None) -> list[str]:
    """The pipeline's iteration-1 eval (benchmarks/learning.py's settings) with these budgets and outputs."""
    sets = seed_sets(seed)
    if sampling_seed is not None:
        sets = [*sets, "--set", f"policy.seed={sampling_seed}"]
    return ["--iter", "1", "--budgets", ",".join(str(b) for b in budgets), "--pass-n", "1",
            "--set", f"policy.model={root / 'iter_1' / 'export'}", *sets,
            *(("--ebm", ebm) if ebm is not None else ()),
            *(("--trajectories-out", str(trajectories)) if trajectories is not None else ()),
            "--output", str(output)]


def run_seed(workdir: Path, seed: int, long: int, off: float, sampling_seeds: Sequence[int],
             env: dict[str, str]) -> None:
    """Steps 1-4 of the module docstring for one seed (each skipped when its output exists)."""
    root = workdir / f"seed-{seed}" / "runs"
    value_model = root / "iter_1" / "ebm"
    if not (value_model / "_SUCCESS.json").is_file():
        raise SystemExit(f"{root / 'iter_1'} has no finished value model: run benchmarks/learning.py first")
    out = workdir / f"seed-{seed}" / "ceiling"
    out.mkdir(parents=True, exist_ok=True)
    log = out / "log.txt"
    budgets = [*EVAL_BUDGETS, long]
    for arm in ARMS:
        if not (out / f"{arm}.json").is_file():
            ebm = str(value_model) if arm == "ebm" else None
            wall, _ = _run(["-m", "burnqed.cli", "eval",
                            *_eval_argv(root, seed, budgets, out / f"{arm}.json", ebm=ebm, trajectories=out / arm)],
                           env, log)
            print(f"  seed {seed}: {arm} to budget {long} in {wall:.0f} s", flush=True)
    table_path = out / TABLE
    if not table_path.is_file():
        store = Store.from_config(load_config().storage)
        table = hindsight_table([str(out / arm) for arm in ARMS], store=store)
        table_path.write_text(json.dumps(table, ensure_ascii=False, sort_keys=True), encoding="utf-8")
    if not (out / "oracle.json").is_file():
        wall, _ = _run([str(Path(__file__)), "--oracle-eval", str(table_path), "--off", str(off), "--",
                        *_eval_argv(root, seed, EVAL_BUDGETS, out / "oracle.json", ebm=str(table_path))], env, log)
        print(f"  seed {seed}: the hindsight oracle in {wall:.0f} s", flush=True)
    for sampling in sampling_seeds:
        for arm in ARMS:
            path = out / f"{arm}-sampling-{sampling}.json"
            if not path.is_file():
                ebm = str(value_model) if arm == "ebm" else None
                _run(["-m", "burnqed.cli", "eval",
                      *_eval_argv(root, seed, EVAL_BUDGETS, path, ebm=ebm, sampling_seed=sampling)], env, log)
        print(f"  seed {seed}: both arms at sampling seed {sampling}", flush=True)


# --------------------------------------------------------------------------------------------- analysis


def seed_figures(workdir: Path, seed: int, sampling_seeds: Sequence[int]) -> dict[str, Any] | None:
    """What one seed's ceiling folder holds: solved per budget of each eval, and the pipeline's for comparison."""
    out = workdir / f"seed-{seed}" / "ceiling"
    paths = {"llm": out / "llm.json", "ebm": out / "ebm.json", "oracle": out / "oracle.json",
             "pipeline llm": workdir / f"seed-{seed}" / "runs" / "iter_1" / "eval" / "eval-noebm.json",
             "pipeline ebm": workdir / f"seed-{seed}" / "runs" / "iter_1" / "eval" / "eval.json"}
    for sampling in sampling_seeds:
        for arm in ARMS:
            paths[f"{arm} sampling {sampling}"] = out / f"{arm}-sampling-{sampling}.json"
    results = {name: json.loads(path.read_text(encoding="utf-8")) for name, path in paths.items() if path.is_file()}
    if not {"llm", "ebm", "oracle"} <= results.keys():
        return None
    return {"seed": seed, "total": results["llm"]["total"],
            "solved": {name: {row["budget"]: row["solved"] for row in result["budgets"]}
                       for name, result in results.items()}}


def analyse(figs: list[dict[str, Any]], sampling_seeds: Sequence[int]) -> list[str]:
    """The report (module docstring)."""
    lines = [f"solved per budget (iteration 1; {', '.join(str(b) for b in EVAL_BUDGETS)} and the long search)"]
    gains: dict[str, list[float]] = defaultdict(list)
    for f in figs:
        solved, total = f["solved"], f["total"]
        lines.append(f" seed {f['seed']} ({total} test theorems)")
        for name, by_budget in solved.items():
            lines.append(f"   {name:>22}: " + " / ".join(f"{n}" for _, n in sorted(by_budget.items())))
        for arm in ARMS:  # the long searches must be the pipeline's evals up to its largest budget
            pipeline = solved.get(f"pipeline {arm}")
            if pipeline is not None and any(solved[arm].get(b) != pipeline.get(b) for b in EVAL_BUDGETS):
                lines.append(f"   WARNING: {arm} differs from the pipeline's eval at {EVAL_BUDGETS}: this machine "
                             "does not reproduce the work folder's searches")
        for name in ("oracle", "ebm", *(f"ebm sampling {s}" for s in sampling_seeds)):
            llm = "llm" if not name.startswith("ebm sampling") else name.replace("ebm", "llm", 1)
            if name in solved and llm in solved:
                gains[name].append(_pct((solved[name][LARGE] - solved[llm][LARGE], total)))
        for s in sampling_seeds:
            if f"llm sampling {s}" in solved:
                gains[f"llm sampling {s} − llm"].append(
                    _pct((solved[f"llm sampling {s}"][LARGE] - solved["llm"][LARGE], total)))
    lines.append(f"gain over LLM only at budget {LARGE}, points (check 4's target for the value model: ≥ +3)")
    for name, values in gains.items():
        per_seed = " / ".join(f"{v:+.1f}" for v in values)
        lines.append(f"   {name:>28}: {per_seed}   mean {_mean_sd(values, signed=True)}")
    pooled = [v for name, values in gains.items() if name == "ebm" or name.startswith("ebm sampling") for v in values]
    if len(pooled) > len(figs):  # more than one sampling seed: the value model's gap over every run
        error = statistics.stdev(pooled) / len(pooled) ** 0.5
        lines.append(f"   the value model over all {len(pooled)} runs (world seed × sampling seed): mean "
                     f"{_mean_sd(pooled, signed=True)} (standard error {error:.1f})")
    return lines


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--oracle-eval":  # the child process of step 3: [--oracle-eval TABLE --off X -- ARGS]
        split = argv.index("--")
        oracle_eval(Path(argv[1]), float(argv[3]), argv[split + 1:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, required=True, help="a benchmarks/learning.py work folder")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    parser.add_argument("--long", type=int, default=1000, help="the long searches' budget (default 1000)")
    parser.add_argument("--off", type=float, default=1.0,
                        help="energy of a state off every known proof path above the longest on it (default 1)")
    parser.add_argument("--sampling-seeds", default="", help="comma-separated sampling seeds of step 4 (default none)")
    parser.add_argument("--analyse-only", action="store_true", help="run nothing; analyse the work folder")
    args = parser.parse_args(argv)
    try:
        seeds = [int(part) for part in args.seeds.split(",") if part.strip()]
        sampling = [int(part) for part in args.sampling_seeds.split(",") if part.strip()]
    except ValueError:
        print(f"--seeds/--sampling-seeds: expected comma-separated integers, got {args.seeds!r}, "
              f"{args.sampling_seeds!r}", file=sys.stderr)
        return 2
    if not args.workdir.is_dir():
        print(f"--workdir {args.workdir} is not a folder: run benchmarks/learning.py --workdir DIR first",
              file=sys.stderr)
        return 2
    if args.long <= LARGE:
        print(f"--long {args.long} must exceed the benchmark's largest budget {LARGE}", file=sys.stderr)
        return 2
    if not args.analyse_only:
        env = work_env(args.workdir)
        for seed in seeds:
            run_seed(args.workdir, seed, args.long, args.off, sampling, env)
    figs = [f for seed in seeds if (f := seed_figures(args.workdir, seed, sampling)) is not None]
    if not figs:
        print(f"no seed of {args.workdir} has its ceiling evals yet", file=sys.stderr)
        return 1
    print("\n".join(analyse(figs, sampling)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

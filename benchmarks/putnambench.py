"""PutnamBench's 672 files as published, end to end on the strict Pantograph double: what `burnqed data prepare`
indexes and what `burnqed eval` starts, refuses and leaves out, per search mode and Pantograph version.

    .venv/bin/python benchmarks/putnambench.py [--work DIR] [--versions 0.3.4,0.3.16] [--modes step,whole]

Unpacks tests/fixtures/putnambench, runs `burnqed data prepare --source benchmark=SRC` once, then for each version and
mode `burnqed eval --theorems SRC --budgets 1` with `lean.command` the double at that version (tiny policy: no proof
is expected; the double elaborates no mathematics, so what this measures is the route every theorem takes: read,
started or refused with its reason). Prints a markdown table (docs/data.md, "PutnamBench as published").
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from tests.putnambench import putnam_files  # noqa: E402

BURNQED = [sys.executable, "-m", "burnqed.cli"]
DOUBLE = ROOT / "tests" / "doubles" / "lean_double.py"


def run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")


def config(folder: Path, version: str, mode: str) -> Path:
    path = folder / f"double-{version}-{mode}.toml"
    path.write_text(f'[lean]\ncommand = ["{{python}}", "{DOUBLE}", "--pantograph-version", "{version}"]\n'
                    f'pantograph_version = "{version}"\nworkers = 2\n\n[search]\nmode = "{mode}"\n')
    return path


def reasons(result: dict[str, object]) -> collections.Counter[str]:
    """The eval's start refusals and leave-outs, by their first words."""
    counted: collections.Counter[str] = collections.Counter()
    for row in result["per_theorem"]:  # type: ignore[attr-defined]
        if row.get("failure_reason") == "start_error":
            detail = str(row.get("detail") or "").removeprefix("Lean could not start the goal: ")
            counted[f"start refused: {detail[:60]}"] += 1
    for row in result.get("not_evaluated") or []:  # type: ignore[attr-defined]
        counted[f"not evaluated: {row.get('reason')}"] += 1
    return counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--versions", default="0.3.4,0.3.16")
    parser.add_argument("--modes", default="step,whole,hybrid")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="putnambench-"))
    source = putnam_files(work)
    started = time.perf_counter()
    run([*BURNQED, "data", "prepare", "--source", f"benchmark={source}", "--output", str(work / "prepared")])
    report = json.loads((work / "prepared" / "report.json").read_text())
    index = json.loads((work / "prepared" / "theorems.json").read_text())["theorems"]
    rejected = sum(len(source.get("rejected_rows") or {}) + len(source.get("rejected_theorems") or {})
                   for source in report["sources"])
    tasks = collections.Counter((entry.get("answer") or {}).get("task", "none") for entry in index)
    print(f"prepare: {len(index)} entries ({tasks['none']} without an answer, {tasks['produced']} answer produced, "
          f"{tasks['given']} answer given), rejected {rejected}, "
          f"{time.perf_counter() - started:.1f} s")
    print("\n| Pantograph | mode | entries | evaluated | searched | refused at start | left out before work | "
          "wall s |\n|---|---|---|---|---|---|---|---|")
    details: list[str] = []
    for version in args.versions.split(","):
        for mode in args.modes.split(","):
            output = work / f"eval-{version}-{mode}" / "eval.json"
            started = time.perf_counter()
            run([*BURNQED, "eval", "--config", str(config(work, version, mode)), "--theorems", str(source),
                 "--budgets", "1", "--output", str(output)])
            result = json.loads(output.read_text())
            counted = reasons(result)
            refused = sum(n for key, n in counted.items() if key.startswith("start refused"))
            left = sum(n for key, n in counted.items() if key.startswith("not evaluated"))
            evaluated = int(result["total"])
            print(f"| {version} | {mode} | {len(index)} | {evaluated} | {evaluated - refused} | {refused} | {left} | "
                  f"{time.perf_counter() - started:.0f} |")
            details += [f"{version} {mode}: {n} {key}" for key, n in counted.most_common()]
    print("\n" + "\n".join(details) if details else "\nnothing refused, nothing left out")
    print(f"\nwork folder: {work}")


if __name__ == "__main__":
    main()

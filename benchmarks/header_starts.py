"""Theorem starts per second on one Lean worker: 20 PutnamBench theorems whose header declares constants against 20
whose header does not, against the strict double.

    .venv/bin/python benchmarks/header_starts.py [--rounds 5] [--pantograph-version 0.3.4]

Each start is `burnqed.lean.start.start_theorem` (the start text with the whole header, the scope load of the header's
scope commands when the REPL holds another, the goals), one theorem after the other on one worker, for `--rounds`
passes over each set, the two sets alternating. Prints both rates and their ratio (docs/benchmarks.md,
"header_starts.py").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from burnqed.data.leanfile import lean_file_rows  # noqa: E402
from burnqed.data.sources import Item, convert_row  # noqa: E402
from burnqed.lean import payloads  # noqa: E402
from burnqed.lean.client import LeanWorker  # noqa: E402
from burnqed.lean.start import start_theorem  # noqa: E402
from burnqed.records.theorem import Theorem  # noqa: E402
from leankit.answer import fill_slot, find_slots, reference_answer  # noqa: E402
from tests.putnambench import putnam_names, putnam_text  # noqa: E402

DOUBLE = [sys.executable, str(ROOT / "tests" / "doubles" / "lean_double.py")]
COUNT = 20


def answered(text: str) -> str:
    """The file with its answer slots written in from the comment line under each (the answer-given task)."""
    for slot in find_slots(text):
        value = reference_answer(text, slot.name)
        if value is not None:
            text = fill_slot(text, slot.name, value)
    return text


def theorem_sets() -> tuple[list[Theorem], list[Theorem]]:
    """The first COUNT files (by name) whose header declares constants, and the first COUNT whose header does not;
    files whose statement holds a `:=` (a `let`, `have`) are left out."""
    declaring: list[Theorem] = []
    plain: list[Theorem] = []
    for name in putnam_names():
        text = answered(putnam_text(name))
        rows = lean_file_rows(text)
        if not rows or ":=" in rows[-1]["formal_statement"].rsplit(":=", 1)[0]:
            continue
        item = convert_row("benchmark", rows[-1])
        if not isinstance(item, Item):
            continue
        chosen = declaring if payloads.header_declarations(item.theorem.header) else plain
        if len(chosen) < COUNT:
            chosen.append(item.theorem)
        if len(declaring) == len(plain) == COUNT:
            break
    return declaring, plain


async def rates(version: str, rounds: int, declaring: list[Theorem], plain: list[Theorem]) -> tuple[float, float]:
    """Starts per second of each set on one worker (the sets alternate, `rounds` passes each)."""
    elapsed = {"declaring": 0.0, "plain": 0.0}
    async with LeanWorker([*DOUBLE, "--pantograph-version", version], ready_timeout_s=10) as lean:
        for _ in range(rounds):
            for label, theorems in (("declaring", declaring), ("plain", plain)):
                began = time.perf_counter()
                for theorem in theorems:
                    await start_theorem(lean, theorem)
                elapsed[label] += time.perf_counter() - began
            await lean.reset()
    return rounds * len(declaring) / elapsed["declaring"], rounds * len(plain) / elapsed["plain"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pantograph-version", default="0.3.4")
    args = parser.parse_args()
    declaring, plain = theorem_sets()
    declaring_rate, plain_rate = asyncio.run(rates(args.pantograph_version, args.rounds, declaring, plain))
    print(f"Pantograph double {args.pantograph_version}, one worker, {args.rounds} rounds, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"  {len(declaring)} theorems whose header declares constants: {declaring_rate:7.1f} starts/s")
    print(f"  {len(plain)} theorems whose header does not:           {plain_rate:7.1f} starts/s")
    print(f"  ratio (declaring / plain): {declaring_rate / plain_rate:.2f}")


if __name__ == "__main__":
    main()

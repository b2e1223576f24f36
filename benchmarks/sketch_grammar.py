"""Does the sketch grammar make the tiny planner's sketches elaborate? Sketch search on the embedded world's sketch
family with the embedded tiny model planning, unconstrained and under the sketch format's grammar (planner.constrained),
and step search with the same model at equal generated tokens (docs/benchmarks.md, "sketch_grammar.py").

    .venv/bin/python benchmarks/sketch_grammar.py [--seed 0] [--split test] [--budget 32] [--plans 4] [--limit N]

The theorems are the sketch family (`leankit.world.sketches`) of world seed `--seed` and one split (default test: 18
theorems), each searched in minilean, in-process (`InProcessReplay`, as `sketch_mechanics.py`), once per arm: step
search; sketch search unconstrained (today's default); sketch search under the grammar (`text.sketch_grammar`, its
defaults: free text flat); the same grammar with balanced brackets (the second variant, planner.balanced: Lean's parser
rejects an unclosed bracket before anything elaborates). One model plays policy and planner, as with planner.backend
unset: the embedded tiny model (`burnqed.policy.tiny`, the local decoder with xgrammar's token mask), reseeded with
`--seed` before each arm. Each sketch arm reports the sketches written, well-formed (read by
`text.sketch.read_sketch`), refused by the tactic guard, rejected by Lean (and of those, how many did not parse) and
elaborated (Lean made its subgoals), and theorems solved; tokens and Lean calls per theorem. Equal tokens is read per
theorem: step search's solved count at equal tokens is the theorems step search proved within the tokens the sketch
arm spent on that theorem (step search stops at its proof, so its tokens then are what the proof cost).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.sketch_mechanics import GUARD, VERSION, MiniLean, sketch_family  # noqa: E402
from burnqed.lean.inprocess import InProcessReplay  # noqa: E402
from burnqed.policy.base import Sampling  # noqa: E402
from burnqed.policy.localmodel import LocalModel  # noqa: E402
from burnqed.policy.localpolicy import LocalPolicy  # noqa: E402
from burnqed.policy.modelpath import default_model_dir  # noqa: E402
from burnqed.records.results import SketchOutcome, TheoremResult  # noqa: E402
from burnqed.records.theorem import Theorem  # noqa: E402
from burnqed.search.modes import SearchSettings, prove_theorem  # noqa: E402
from burnqed.search.sketch_settings import SketchSettings  # noqa: E402
from burnqed.search.step import StepSettings  # noqa: E402
from burnqed.text.sketch_grammar import sketch_grammar  # noqa: E402

# (label, the grammar's options: None unconstrained); the first arm is step search
# Lean's parser's words (minilean's and Lean's): the sketch did not parse, so nothing in it elaborated
PARSE_ERROR = re.compile(r"unexpected token|unexpected syntax|expected term")
ARMS: tuple[tuple[str, dict[str, bool] | None], ...] = (
    ("step", None), ("sketch, unconstrained", None), ("sketch, grammar", {"balanced": False}),
    ("sketch, grammar, balanced brackets", {"balanced": True}))


@dataclass
class Arm:
    label: str
    results: list[TheoremResult] = field(default_factory=list)
    wall_s: float = 0.0

    def mean(self, values: Sequence[float]) -> float:
        return statistics.fmean(values) if values else 0.0

    def outcomes(self) -> dict[str, int]:
        sketches = [s for r in self.results for s in r.sketches]
        counts = {outcome.value: sum(1 for s in sketches if s.outcome is outcome) for outcome in SketchOutcome}
        parse = sum(1 for s in sketches if s.outcome is SketchOutcome.ERROR and PARSE_ERROR.search(s.detail or ""))
        return {"written": len(sketches), "well-formed": len(sketches) - counts["unreadable"], "parse": parse, **counts}


def arm_settings(budget: int, plans: int, grammar: dict[str, bool] | None, step: StepSettings) -> SketchSettings:
    """Sketch settings at `budget` units, `plans` sketches a request of at most 256 tokens, under the sketch grammar
    with these options (None: unconstrained)."""
    ebnf = None if grammar is None else sketch_grammar(**grammar).ebnf
    sampling = Sampling(n=plans, max_new_tokens=256, stop=("```",), ebnf=ebnf)
    return SketchSettings(sampling=sampling, subgoal=step, max_nodes=budget)


async def run_arms(theorems: Sequence[Theorem], model: LocalModel, seed: int, budget: int, plans: int) -> list[Arm]:
    step = StepSettings(sampling=Sampling(n=8), max_nodes=budget)
    arms = []
    for label, grammar in ARMS:
        arm = Arm(label)
        settings: SearchSettings = step if label == "step" else arm_settings(budget, plans, grammar, step)
        model.reseed(seed)
        policy = LocalPolicy(model)
        started = time.perf_counter()
        for theorem in theorems:
            lean = InProcessReplay(MiniLean(version=VERSION))
            outcome = await prove_theorem(theorem, lean, policy, settings, GUARD)
            arm.results.append(outcome.result)
        arm.wall_s = time.perf_counter() - started
        arms.append(arm)
    return arms


def report(arms: Sequence[Arm]) -> str:
    step = arms[0]
    lines = [f"{'arm':<30} {'solved':>6} {'tokens/thm':>10} {'Lean/thm':>8} {'wall s':>7}  "
             "sketches: written, well-formed, refused, Lean rejected (of which unparsed), elaborated  |  "
             "step solved at equal tokens"]
    for arm in arms:
        solved = sum(r.proved for r in arm.results)
        tokens = arm.mean([r.tokens for r in arm.results])
        calls = arm.mean([r.lean_calls for r in arm.results])
        row = f"{arm.label:<30} {solved:>6} {tokens:>10.1f} {calls:>8.1f} {arm.wall_s:>7.1f}"
        if arm is not step:
            o = arm.outcomes()
            equal = sum(1 for mine, theirs in zip(arm.results, step.results, strict=True)
                        if theirs.proved and theirs.tokens <= mine.tokens)
            share = o["elaborated"] / o["written"] if o["written"] else 0.0
            row += (f"  {o['written']}, {o['well-formed']}, {o['refused']}, {o['error']} ({o['parse']}), "
                    f"{o['elaborated']} ({share:.0%} elaborated)  |  {equal}")
        lines.append(row)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seed", type=int, default=0, help="world seed and sampling seed")
    parser.add_argument("--split", default="test", help="train | pool | test | all (default test)")
    parser.add_argument("--budget", type=int, default=32, help="units per theorem (node expansions and requests)")
    parser.add_argument("--plans", type=int, default=4, help="sketches per planner request (search.sketch_plans)")
    parser.add_argument("--limit", type=int, default=None, help="the first N theorems only")
    args = parser.parse_args(argv)
    family = sketch_family(args.seed, None if args.split == "all" else args.split)[: args.limit]
    theorems = [theorem for theorem, _ in family]
    model = LocalModel.load(default_model_dir(), device="cpu", seed=args.seed)
    arms = asyncio.run(run_arms(theorems, model, args.seed, args.budget, args.plans))
    print(f"{len(theorems)} theorems (sketch family, world seed {args.seed}, {args.split}), budget {args.budget}, "
          f"{args.plans} sketches a request, planner and policy: {model.name}")
    print(report(arms))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

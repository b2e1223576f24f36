"""What recursion and sharing are worth in sketch search, with a scripted planner, at equal budget on the embedded
world's deep sketch family (docs/benchmarks.md, "sketch_depth.py"): solved, Lean calls, tokens and planner requests per
theorem, and theorems solved against the budget, for four arms.

    .venv/bin/python benchmarks/sketch_depth.py [--seed 0] [--split test] [--budget 60] [--limit N]

The theorems are the deep sketch family (`leankit.world.deep_sketches`: per situation one statement of depth 1, two
of depth 2, one of depth 3) of world seed `--seed`, one split (default test: 8 theorems). Each is searched in a fresh
minilean, in-process (`InProcessReplay`, the version the sketch tests use), under `--budget` units, four ways:

- no decomposition: step search from the theorem's start with the tactic source alone;
- one level: sketch search, `search.sketch_depth = 1` (today's sketch mode);
- tree: `sketch_depth = 3`, nothing shared (`share_goals` off: no kept proof, no subgoal cache, no closed-key reuse;
  every place of a goal is proved on its own);
- graph: `sketch_depth = 3`, the lemma graph with sharing inside the theorem (a subgoal cache of its own).

Nothing learns. The planner answers a prompt by the declaration it shows (the theorem's, or a lemma's: a `have` of the
recorded nested proof) with two sketches in one request: first a flawed one (the right holes, then a false hole
`(0 : ℝ) = 1`, as a planner that writes a wrong fact does), then the right one (`sketch_of_proof` of the recorded
proof or of the `have`'s own proof); a goal it has no sketch for gets none. The tactic source proposes at every state
the same few tactics (`norm_num`, `nlinarith`, `positivity`, then `linarith`), which close a leaf fact (`x = 2`) and
nothing else: every structure comes from the planner. Tokens are the scripts': one a character. A script is for the
mechanics only; it never stands in for a model in a stage's results. Solved within b: the theorems whose
`budget_at_proof` is at most b in the one run at `--budget` (eval's rungs count the same way). Every figure is a
`TheoremResult`'s (lean_calls, tokens, nodes_expanded, budget_at_proof, lemma_graph).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from burnqed.config import LeanConfig  # noqa: E402
from burnqed.data.index import theorem_index  # noqa: E402
from burnqed.lean.guard import TacticGuard  # noqa: E402
from burnqed.lean.inprocess import InProcessReplay  # noqa: E402
from burnqed.policy.base import Sampling  # noqa: E402
from burnqed.policy.oracle import Answer  # noqa: E402
from burnqed.records.results import TheoremResult  # noqa: E402
from burnqed.records.theorem import Theorem  # noqa: E402
from burnqed.search.modes import SearchSettings, prove_theorem  # noqa: E402
from burnqed.search.sketching import SketchSettings  # noqa: E402
from burnqed.search.step import StepSettings  # noqa: E402
from burnqed.search.subgoal_cache import SubgoalCache  # noqa: E402
from burnqed.text.prompt import STATE_COMMENT_OPEN  # noqa: E402
from burnqed.text.sketch import sketch_of_proof  # noqa: E402
from leankit.version import PantographVersion  # noqa: E402
from leankit.world.checked import WorldTheorem, build_world  # noqa: E402
from minilean.server import Server  # noqa: E402
from tests.doubles.policy_double import ScriptedPolicy  # noqa: E402

VERSION = PantographVersion.parse("0.3.4")  # minilean drafts sketches at it (tests/search/test_sketch_search.py)
GUARD = TacticGuard.from_config(LeanConfig())
DEPTH = 3
HAVE = re.compile(r"have (\S+) : (.+?) := by\n(.*)", re.DOTALL)
TACTICS = ("norm_num", "nlinarith", "positivity", "linarith")  # the tactic source's, the right one for a leaf last
FALSE_HOLE = "have hw : (0 : ℝ) = 1 := by sorry"
ARMS = ("no decomposition", "one level", "tree", "graph")
RUNGS = (10, 20, 30, 40, 60, 80, 100, 120)


class MiniLean(Server):
    """minilean as a `LineServer`: a restart is a new process (no states)."""

    def restart(self) -> None:
        self.states.clear()


def deep_family(seed: int, split: str | None) -> list[tuple[Theorem, WorldTheorem]]:
    """The world's deep sketch family of `split` (None: all), as an index lists it, with its recorded theorem."""
    world = build_world(seed, deep_sketches=True)
    deep = [t for t in world.theorems if t.template.startswith("sketch_deep")]
    recorded = {t.name: t for t in deep}
    index = theorem_index(world, split)
    return [(theorem, recorded[theorem.name]) for theorem in index.theorems if theorem.name in recorded]


def _dedent(text: str) -> str:
    return "\n".join(line[2:] if line.startswith("  ") else line for line in text.split("\n"))


def sketches_of(proof: Sequence[str]) -> dict[str | None, str]:
    """The sketch of each goal of a nested proof: None → the theorem's, a `have`'s statement → its own proof's
    (a `have` proved in one step has none: the tactic source proves it)."""
    found: dict[str | None, str] = {}
    stack: list[tuple[str | None, str]] = [(None, "\n".join(proof))]
    while stack:
        statement, body = stack.pop()
        sketch = sketch_of_proof(body)
        if sketch is None:
            continue
        found[statement] = sketch.body
        stack += [(have.group(2), _dedent(have.group(3))) for step in sketch_steps(body)
                  if (have := HAVE.fullmatch(step)) is not None]
    return found


def sketch_steps(body: str) -> list[str]:
    """The top-level tactics of a proof body (a line at column 0 and its deeper lines)."""
    steps: list[str] = []
    for line in body.split("\n"):
        if steps and line.startswith(" "):
            steps[-1] += "\n" + line
        else:
            steps.append(line)
    return steps


def flawed(sketch: str) -> str:
    """The sketch with a false hole after its last hole: its right holes are proved before the false one fails."""
    lines = sketch.split("\n")
    last = max(k for k, line in enumerate(lines) if line.endswith(":= by sorry"))
    return "\n".join([*lines[: last + 1], FALSE_HOLE, *lines[last + 1 :]])


@dataclass(frozen=True)
class Script:
    """A theorem's planner (its goals' sketches, by statement) and tactic source."""

    sketches: dict[str | None, str]

    def answer(self, prompt: str) -> Answer:
        if STATE_COMMENT_OPEN in prompt:  # a tactic prompt: the same few tactics everywhere
            return [(tactic, -0.1 if tactic != TACTICS[-1] else -0.5) for tactic in TACTICS]
        declaration = [line for line in prompt.split("\n") if line.startswith("theorem ")][-1]
        lemma = next((statement for statement in self.sketches if statement is not None
                      and declaration.endswith(f" : {statement} := by")), None)
        is_lemma = "." in declaration.split()[1]
        sketch = self.sketches.get(lemma) if is_lemma else self.sketches.get(None)
        if sketch is None:
            return []
        return [(flawed(sketch), -0.5), (sketch, -0.6)]

    def policy(self) -> ScriptedPolicy:
        return ScriptedPolicy(self.answer, key=lambda prompt: prompt, tokens=len)


@dataclass
class Arm:
    """One arm's results, in theorem order."""

    label: str
    results: list[TheoremResult] = field(default_factory=list)

    def mean(self, value: Callable[[TheoremResult], float]) -> float:
        return statistics.fmean(value(r) for r in self.results)

    def solved_within(self, budget: int) -> int:
        return sum(1 for r in self.results if r.proved and r.budget_at_proof is not None
                   and r.budget_at_proof <= budget)


def planner_requests(result: TheoremResult) -> int:
    """Planner requests: the theorem's (a sketch's round numbers) and its lemmas' (one each, the lemma graph's)."""
    theorem = len({sketch.round for sketch in result.sketches})
    graph = result.lemma_graph
    lemmas = len({sketch.goal for sketch in graph.sketches if sketch.goal != 0}) if graph is not None else 0
    return theorem + lemmas if result.sketches else 0


def settings_of(budget: int) -> tuple[SearchSettings, ...]:
    step = StepSettings(sampling=Sampling(n=len(TACTICS)), max_nodes=budget, revisits=0)
    sketch = SketchSettings(sampling=Sampling(n=2, stop=("```",)), subgoal=step, max_nodes=budget)
    return (step, sketch, dataclasses.replace(sketch, sketch_depth=DEPTH, share_goals=False),
            dataclasses.replace(sketch, sketch_depth=DEPTH))


async def run_arms(theorems: Sequence[tuple[Theorem, WorldTheorem]], budget: int) -> list[Arm]:
    """Every arm on every theorem, each search in a fresh minilean with a subgoal cache of its own."""
    arms = [Arm(label) for label in ARMS]
    for theorem, recorded in theorems:
        script = Script(sketches_of(recorded.proofs[0]))
        for arm, settings in zip(arms, settings_of(budget), strict=True):
            chosen = dataclasses.replace(settings, cache=SubgoalCache()) if isinstance(settings, SketchSettings) \
                else settings
            lean = InProcessReplay(MiniLean(version=VERSION))
            outcome = await prove_theorem(theorem, lean, script.policy(), chosen, GUARD)
            arm.results.append(outcome.result)
    return arms


def report(arms: Sequence[Arm], budget: int) -> str:
    lines = [f"{'arm':<17} {'solved':>6} {'Lean/thm':>9} {'tokens':>8} {'planner':>8} {'units':>6} {'shared':>6} "
             f"{'refused':>7}"]
    for arm in arms:
        graphs = [r.lemma_graph for r in arm.results if r.lemma_graph is not None]
        lines.append(f"{arm.label:<17} {sum(r.proved for r in arm.results):>6} "
                     f"{arm.mean(lambda r: r.lean_calls):>9.1f} {arm.mean(lambda r: r.tokens):>8.1f} "
                     f"{arm.mean(planner_requests):>8.2f} {arm.mean(lambda r: r.nodes_expanded):>6.1f} "
                     f"{sum(g.shared for g in graphs):>6} {sum(len(g.refused) for g in graphs):>7}")
    rungs = [b for b in RUNGS if b <= budget] or [budget]
    lines += ["", "solved within b units (budget_at_proof ≤ b):",
              f"{'arm':<17} " + " ".join(f"{b:>5}" for b in rungs)]
    lines += [f"{arm.label:<17} " + " ".join(f"{arm.solved_within(b):>5}" for b in rungs) for arm in arms]
    tree, graph = arms[2], arms[3]
    both = [k for k, (t, g) in enumerate(zip(tree.results, graph.results, strict=True)) if t.proved and g.proved]
    if both:
        ratio = (sum(graph.results[k].lean_calls for k in both) / sum(tree.results[k].lean_calls for k in both))
        lines += ["", f"graph ÷ tree on the {len(both)} theorems both solved: Lean calls {ratio:.2f}"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seed", type=int, default=0, help="world seed (data.world_seed)")
    parser.add_argument("--split", default="test", help="train | pool | test | all (default test)")
    parser.add_argument("--budget", type=int, default=60, help="search.max_nodes of every search (default 60)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N theorems")
    args = parser.parse_args(argv)
    theorems = deep_family(args.seed, None if args.split == "all" else args.split)[: args.limit]
    if not theorems:
        print(f"no deep-family theorems in split {args.split!r}", file=sys.stderr)
        return 2
    started = time.monotonic()
    arms = asyncio.run(run_arms(theorems, args.budget))
    print(f"deep sketch family, world seed {args.seed}, split {args.split}: {len(theorems)} theorems; budget "
          f"{args.budget} units; sketch_depth {DEPTH} in the tree and graph arms; minilean {VERSION} in-process; "
          f"load {os.getloadavg()[0]:.1f}; {time.monotonic() - started:.1f} s")
    print(report(arms, args.budget))
    return 0


if __name__ == "__main__":
    sys.exit(main())

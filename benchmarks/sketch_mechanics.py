"""What sketch search's mechanics cost against step search, with a scripted planner: Lean calls, wall time and tokens
per theorem on the embedded world's sketch family, and the subgoal cache's hit rate on a run whose theorems share
their facts (docs/benchmarks.md, "sketch_mechanics.py").

    .venv/bin/python benchmarks/sketch_mechanics.py [--seed 0] [--split test] [--budget 32] [--limit N]

The theorems are the sketch family (`leankit.world.sketches`, `data.world_sketches`) of world seed `--seed`, of one
split (default test: 18 theorems, three per situation, so each fact is a subgoal of three theorems) or all. Each is
searched three times in minilean, in-process (`InProcessReplay`, the version the sketch tests use): step search;
sketch search with one `SubgoalCache` shared by every theorem of the run; sketch search with a fresh cache per theorem
(what the sharing saves). Nothing learns: the policy is a script built from the theorem's recorded proof (`Script`),
as `burnqed.policy.oracle` proposes recorded tactics. The planner answers with `sketch_of_proof` of the recorded proof;
at a state of the recorded proof (step search) or a fact's subgoal (sketch search) the script proposes every tactic of
the theorem's recorded proofs, the one the proof takes there last and less likely, so a search pays a Lean call for
each wrong one first; elsewhere it proposes nothing. Tokens are the script's: one a character of each completion. A
script is for the mechanics only; it never stands in for a model in a stage's results. Every figure is a
`TheoremResult`'s (lean_calls, time_s, tokens, sketches[*].subgoals[*].source) or the cache's `CacheStats`.
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
from burnqed.data.index import embedded_index  # noqa: E402
from burnqed.errors import InputError  # noqa: E402
from burnqed.lean.guard import TacticGuard  # noqa: E402
from burnqed.lean.inprocess import InProcessReplay  # noqa: E402
from burnqed.lean.start import start_theorem  # noqa: E402
from burnqed.policy.base import Sampling  # noqa: E402
from burnqed.policy.oracle import Answer, first_goal, state_of  # noqa: E402
from burnqed.records.replies import TacticKind, pretty_state  # noqa: E402
from burnqed.records.results import TheoremResult  # noqa: E402
from burnqed.records.theorem import Theorem  # noqa: E402
from burnqed.search.modes import SearchSettings, prove_theorem  # noqa: E402
from burnqed.search.sketch_settings import SketchSettings  # noqa: E402
from burnqed.search.step import StepSettings  # noqa: E402
from burnqed.search.subgoal_cache import CacheStats, SubgoalCache  # noqa: E402
from burnqed.text.prompt import STATE_COMMENT_OPEN  # noqa: E402
from burnqed.text.sketch import sketch_of_proof  # noqa: E402
from leankit.version import PantographVersion  # noqa: E402
from leankit.world.checked import WorldTheorem, embedded_world  # noqa: E402
from minilean.server import Server  # noqa: E402
from tests.doubles.policy_double import ScriptedPolicy  # noqa: E402

VERSION = PantographVersion.parse("0.3.4")  # minilean drafts sketches at it (tests/search/test_sketch_search.py)
GUARD = TacticGuard.from_config(LeanConfig())
HAVE = re.compile(r"have (\S+) : (.+) := by (.+)")
WRONG_LOGPROB, RIGHT_LOGPROB, SKETCH_LOGPROB = -0.1, -0.5, -0.5
ARMS = ("step", "sketch (shared cache)", "sketch (no sharing)")


class MiniLean(Server):
    """minilean as a `LineServer`: a restart is a new process (no states)."""

    def restart(self) -> None:
        self.states.clear()


def sketch_family(seed: int, split: str | None) -> list[tuple[Theorem, WorldTheorem]]:
    """The world's sketch family (role "sketch", appended after the templates) of `split` (None: all), each as the
    embedded index lists it, with its recorded world theorem."""
    recorded = {t.name: t for t in embedded_world(seed, sketches=True).theorems if t.role == "sketch"}
    index = embedded_index(split, seed, world_sketches=True)
    return [(theorem, recorded[theorem.name]) for theorem in index.theorems if theorem.name in recorded]


@dataclass(frozen=True)
class Script:
    """A theorem's recorded proof as a planner and a tactic source: the sketch of its first proof, the tactic it takes
    at each state (first goal, whitespace-normalised), each fact's tactic (by statement), and every tactic of its
    proofs and facts (proposed at each known state, the right one last)."""

    sketch: str
    steps: dict[str, str]
    facts: dict[str, str]
    tactics: tuple[str, ...]

    def answer(self, prompt: str) -> Answer:
        if STATE_COMMENT_OPEN not in prompt:  # the planner's prompt (or a re-plan's)
            return [(self.sketch, SKETCH_LOGPROB)]
        goal = first_goal(state_of(prompt))
        right = self.steps.get(goal) or self.facts.get(goal.rsplit("⊢", 1)[-1].strip())
        if right is None:
            return []
        return [*((tactic, WRONG_LOGPROB) for tactic in self.tactics if tactic != right), (right, RIGHT_LOGPROB)]

    def policy(self) -> ScriptedPolicy:
        return ScriptedPolicy(self.answer, key=lambda prompt: prompt, tokens=len)


async def script_of(theorem: Theorem, recorded: WorldTheorem) -> Script:
    """The script of `theorem`: its first recorded proof replayed in a minilean of its own (not counted) for the
    states it passes through."""
    proof = recorded.proofs[0]
    sketch = sketch_of_proof("\n".join(proof))
    if sketch is None:
        raise ValueError(f"{theorem.name}: its recorded proof has no `have` to sketch")
    lean = InProcessReplay(MiniLean(version=VERSION))
    state, goals = await start_theorem(lean, theorem)
    steps: dict[str, str] = {}
    for tactic in proof:
        steps[first_goal(pretty_state(goals))] = tactic
        result = await lean.tactic(state, tactic)
        if result.kind is not TacticKind.SUCCESS or result.state_id is None:
            raise ValueError(f"{theorem.name}: its recorded step {tactic!r} fails in minilean: {result}")
        state, goals = result.state_id, result.goals
    facts = {found.group(2): found.group(3) for step in proof if (found := HAVE.fullmatch(step))}
    tactics = dict.fromkeys([*(step for p in recorded.proofs for step in p), *facts.values()])
    return Script(sketch.body, steps, facts, tuple(tactics))


@dataclass
class Arm:
    """One arm's results, in theorem order, and its caches' counters (sketch arms)."""

    label: str
    results: list[TheoremResult] = field(default_factory=list)
    cache: CacheStats | None = None

    def mean(self, value: Callable[[TheoremResult], float]) -> float:
        return statistics.fmean(value(r) for r in self.results)

    def row(self) -> str:
        proved = sum(r.proved for r in self.results)
        return (f"{self.label:<22} {len(self.results):>8} {proved:>6} {self.mean(lambda r: r.lean_calls):>10.1f} "
                f"{self.mean(lambda r: r.time_s):>8.3f} {self.mean(lambda r: r.tokens):>8.1f} "
                f"{self.mean(lambda r: r.nodes_expanded):>6.1f}")


def subgoal_sources(results: Sequence[TheoremResult]) -> dict[str, int]:
    """How the subgoals of every sketch were closed (or not): source → count, `unproved` for none."""
    counts: dict[str, int] = {}
    for result in results:
        for sketch in result.sketches:
            for subgoal in sketch.subgoals:
                name = subgoal.source.value if subgoal.source is not None else "unproved"
                counts[name] = counts.get(name, 0) + 1
    return counts


async def run_arms(theorems: Sequence[tuple[Theorem, WorldTheorem]], budget: int, candidates: int) -> list[Arm]:
    """Step, sketch with one shared cache, sketch with a cache per theorem, each theorem in a fresh minilean."""
    scripts = [await script_of(theorem, recorded) for theorem, recorded in theorems]
    step = StepSettings(sampling=Sampling(n=candidates), max_nodes=budget)  # a subgoal's budget is set per subgoal
    sketch = SketchSettings(sampling=Sampling(n=1, stop=("```",)), subgoal=step, max_nodes=budget)
    shared = SubgoalCache()
    arms = [Arm(label) for label in ARMS]
    for (theorem, _), script in zip(theorems, scripts, strict=True):
        own = SubgoalCache()
        settings: tuple[SearchSettings, ...] = (step, dataclasses.replace(sketch, cache=shared),
                                                dataclasses.replace(sketch, cache=own))
        for arm, chosen in zip(arms, settings, strict=True):
            lean = InProcessReplay(MiniLean(version=VERSION))
            outcome = await prove_theorem(theorem, lean, script.policy(), chosen, GUARD)
            arm.results.append(outcome.result)
        arms[2].cache = own.stats if arms[2].cache is None else arms[2].cache + own.stats
    arms[1].cache = shared.stats
    return arms


def cache_line(label: str, stats: CacheStats) -> str:
    rate = "not measured" if stats.hit_rate is None else f"{stats.hit_rate:.0%}"
    return (f"{label:<22} lookups {stats.lookups}, hits {stats.hits}, hit rate {rate}, rejected {stats.rejected}, "
            f"stored {stats.stored}")


def report(arms: Sequence[Arm]) -> str:
    lines = [f"{'arm':<22} {'theorems':>8} {'proved':>6} {'Lean/thm':>10} {'wall s':>8} {'tokens':>8} {'units':>6}",
             *(arm.row() for arm in arms), ""]
    for arm in arms[1:]:
        assert arm.cache is not None
        lines.append(cache_line(arm.label, arm.cache))
        lines.append(f"{'':<22} subgoals by source: {subgoal_sources(arm.results)}")
    step, shared, alone = arms
    lines.append("")
    for arm in (shared, alone):
        calls = arm.mean(lambda r: r.lean_calls) / step.mean(lambda r: r.lean_calls)
        wall = arm.mean(lambda r: r.time_s) / step.mean(lambda r: r.time_s)
        lines.append(f"{arm.label} ÷ step: Lean calls {calls:.2f}, wall {wall:.2f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seed", type=int, default=0, help="world seed (data.world_seed)")
    parser.add_argument("--split", default="test", help="train | pool | test | all (default test)")
    parser.add_argument("--budget", type=int, default=32, help="search.max_nodes of every search (default 32)")
    parser.add_argument("--candidates", type=int, default=16, help="tactics asked per expansion (default 16)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N theorems")
    args = parser.parse_args(argv)
    try:
        theorems = sketch_family(args.seed, None if args.split == "all" else args.split)[: args.limit]
    except InputError as error:
        print(error, file=sys.stderr)
        return 2
    if not theorems:
        print(f"no sketch-family theorems in split {args.split!r}", file=sys.stderr)
        return 2
    started = time.monotonic()
    arms = asyncio.run(run_arms(theorems, args.budget, args.candidates))
    print(f"sketch family, world seed {args.seed}, split {args.split}: {len(theorems)} theorems; budget {args.budget}, "
          f"{args.candidates} candidates; minilean {VERSION} in-process; load {os.getloadavg()[0]:.1f}; "
          f"{time.monotonic() - started:.1f} s")
    print(report(arms))
    return 0


if __name__ == "__main__":
    sys.exit(main())

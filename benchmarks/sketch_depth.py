"""What recursion and sharing are worth in sketch search, with a scripted planner, at equal budget on the embedded
world's deep sketch family (docs/benchmarks.md, "sketch_depth.py"): solved, Lean calls, tokens and planner requests per
theorem, and theorems solved against the budget, for five arms.

    .venv/bin/python benchmarks/sketch_depth.py [--seed 0] [--split test] [--budget 60] [--limit N] [--shared]

The theorems are the deep sketch family (`leankit.world.deep_sketches`: per situation one statement of depth 1, two
of depth 2, one of depth 3) of world seed `--seed`, one split (default test: 8 theorems). Each is searched in a fresh
minilean, in-process (`InProcessReplay`, the version the sketch tests use), under `--budget` units, four ways:

- no decomposition: step search from the theorem's start with the tactic source alone;
- one level: sketch search, `search.sketch_depth = 1` (today's sketch mode);
- tree: `sketch_depth = 3`, nothing shared (`share_goals` off: no kept proof, no subgoal cache, no closed-key reuse;
  every place of a goal is proved on its own);
- graph: `sketch_depth = 3`, the lemma graph with sharing inside the theorem (a subgoal cache of its own);
- graph + library: the graph reading a lemma library (`search.lemmas`) made by the graph's pass over the family's
  train split: the lemmas of its counted proofs written as the search stage writes them (`write_lemmas`), the folder
  then frozen (`LemmaLibrary.open`), the entries the eval's decontamination holds out named (`held_lemmas`), one
  source for the pass as an eval's; its hits by the hole's exact key and by its closed key only are counted.

`--shared` takes the family's shared situations instead (`build_world(..., deep_shared=True)`: each situation's
depth-1 and first depth-2 statements train, its second depth-2 and depth-3 statements test), the only place its
training and test theorems share goals.

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
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from burnqed.config import LeanConfig  # noqa: E402
from burnqed.data.decontaminate import ROUTE_EVAL, Benchmark  # noqa: E402
from burnqed.data.index import theorem_index  # noqa: E402
from burnqed.eval.lemma_library import held_lemmas  # noqa: E402
from burnqed.lean.guard import TacticGuard  # noqa: E402
from burnqed.lean.inprocess import InProcessReplay  # noqa: E402
from burnqed.policy.base import Sampling  # noqa: E402
from burnqed.policy.oracle import Answer  # noqa: E402
from burnqed.records.replies import Goal  # noqa: E402
from burnqed.records.results import TheoremResult  # noqa: E402
from burnqed.records.theorem import Theorem  # noqa: E402
from burnqed.search.goal_keys import LemmaCandidate  # noqa: E402
from burnqed.search.lemmas import LemmaLibrary, LemmaWriter, LibrarySource, write_lemmas  # noqa: E402
from burnqed.search.modes import SearchSettings, prove_theorem  # noqa: E402
from burnqed.search.sketch_settings import SketchSettings  # noqa: E402
from burnqed.search.step import StepSettings  # noqa: E402
from burnqed.search.subgoal_cache import SubgoalCache, SubgoalKey, cache_environment  # noqa: E402
from burnqed.storage import Store  # noqa: E402
from burnqed.text.prompt import STATE_COMMENT_OPEN  # noqa: E402
from burnqed.text.sketch import sketch_of_proof  # noqa: E402
from leankit.version import PantographVersion  # noqa: E402
from leankit.world.checked import WorldTheorem, build_world  # noqa: E402
from leankit.world.deep_sketches import DEEP_TEMPLATES, SHARED_TEMPLATES  # noqa: E402
from minilean.server import Server  # noqa: E402
from tests.doubles.policy_double import ScriptedPolicy  # noqa: E402

VERSION = PantographVersion.parse("0.3.4")  # minilean drafts sketches at it (tests/search/test_sketch_search.py)
GUARD = TacticGuard.from_config(LeanConfig())
DEPTH = 3
HAVE = re.compile(r"have (\S+) : (.+?) := by\n(.*)", re.DOTALL)
TACTICS = ("norm_num", "nlinarith", "positivity", "linarith")  # the tactic source's, the right one for a leaf last
FALSE_HOLE = "have hw : (0 : ℝ) = 1 := by sorry"
ARMS = ("no decomposition", "one level", "tree", "graph")
LIBRARY_ARM = "graph + library"
RUNGS = (10, 20, 30, 40, 60, 80, 100, 120)


class MiniLean(Server):
    """minilean as a `LineServer`: a restart is a new process (no states)."""

    def restart(self) -> None:
        self.states.clear()


def deep_family(seed: int, split: str | None, shared: bool = False) -> list[tuple[Theorem, WorldTheorem]]:
    """The world's deep sketch family of `split` (None: all), as an index lists it, with its recorded theorem
    (`shared`: the family's situations shared across the train and test splits instead)."""
    world = build_world(seed, deep_sketches=True, deep_shared=shared)
    template = SHARED_TEMPLATES[0].name if shared else DEEP_TEMPLATES[0].name
    deep = [t for t in world.theorems if t.template == template]
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


async def search(theorem: Theorem, recorded: WorldTheorem, settings: SearchSettings) -> TheoremResult:
    """One search of `theorem` with its script, in a fresh minilean (sketch mode: a subgoal cache of its own)."""
    chosen = dataclasses.replace(settings, cache=SubgoalCache()) if isinstance(settings, SketchSettings) \
        else settings
    lean = InProcessReplay(MiniLean(version=VERSION))
    outcome = await prove_theorem(theorem, lean, Script(sketches_of(recorded.proofs[0])).policy(), chosen, GUARD)
    return outcome.result


async def run_arms(theorems: Sequence[tuple[Theorem, WorldTheorem]], budget: int) -> list[Arm]:
    """The four arms without a library on every theorem, each search in a fresh minilean."""
    arms = [Arm(label) for label in ARMS]
    for theorem, recorded in theorems:
        for arm, settings in zip(arms, settings_of(budget), strict=True):
            arm.results.append(await search(theorem, recorded, settings))
    return arms


@dataclass
class Counted:
    """One theorem's view of the pass's library source (a `goal_keys.LemmaSource`): the hits by the hole's exact
    key and those by its closed key only."""

    source: LibrarySource
    exact: int = 0
    closed: int = 0
    by_exact: set[tuple[str, LemmaCandidate]] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def lemma_candidates(self, exact: SubgoalKey, closed: SubgoalKey, goal: Goal,
                         limit: int) -> Sequence[LemmaCandidate]:
        found = self.source.lemma_candidates(exact, closed, goal, limit)
        origins = {entry.origin for entry in self.source.by_exact.get(exact.text, [])}
        with self.lock:
            self.by_exact |= {(exact.text, candidate) for candidate in found if candidate.origin in origins}
        return found

    def lemma_outcome(self, candidate: LemmaCandidate, exact: SubgoalKey, accepted: bool) -> None:
        self.source.lemma_outcome(candidate, exact, accepted)
        with self.lock:
            if accepted and (exact.text, candidate) in self.by_exact:
                self.exact += 1
            elif accepted:
                self.closed += 1


@dataclass
class LibraryArm:
    """The fifth arm: the library the graph arm's pass over the training split wrote, frozen, then read by the graph
    on the evaluated theorems through one source for the pass (as an eval pass asks it)."""

    trained: list[TheoremResult]
    written: int
    library: LemmaLibrary
    held: dict[str, str]
    source: LibrarySource
    arm: Arm = field(default_factory=lambda: Arm(LIBRARY_ARM))
    counted: list[Counted] = field(default_factory=list)


async def run_library_arm(train: Sequence[tuple[Theorem, WorldTheorem]],
                          theorems: Sequence[tuple[Theorem, WorldTheorem]], budget: int, store: Store,
                          uri: str) -> LibraryArm:
    """The graph on `train`, the lemmas of its counted proofs on training theorems written into `uri` as the search
    stage writes them (`write_lemmas`), the folder frozen (`LemmaLibrary.open`) with the entries the stage's
    decontamination holds out of an eval of `theorems` (`held_lemmas`), then the graph reading it on `theorems`."""
    graph = settings_of(budget)[3]
    assert isinstance(graph, SketchSettings)
    environment = cache_environment(LeanConfig(), str(VERSION))
    trained = [await search(theorem, recorded, graph) for theorem, recorded in train]
    written = write_lemmas(LemmaWriter(store, uri), trained, {theorem.name: theorem for theorem, _ in train},
                           environment, iteration=None)
    library = LemmaLibrary.open(store, uri)
    held = held_lemmas(library, Benchmark(ROUTE_EVAL, "the deep sketch family", tuple(t for t, _ in theorems)))
    found = LibraryArm(trained, written, library, held, library.source(environment, GUARD, held))
    for theorem, recorded in theorems:
        counted = Counted(found.source)
        found.counted.append(counted)
        found.arm.results.append(await search(theorem, recorded, dataclasses.replace(graph, lemmas=counted)))
    return found


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
    if len(arms) > len(ARMS):  # the library arm against the graph alone, theorem by theorem
        alone, library = arms[3].results, arms[len(ARMS)].results
        both = [k for k, (g, b) in enumerate(zip(alone, library, strict=True)) if g.proved and b.proved]
        if both:
            calls = sum(library[k].lean_calls for k in both) / sum(alone[k].lean_calls for k in both)
            units = sum(library[k].nodes_expanded for k in both) / sum(alone[k].nodes_expanded for k in both)
            lines.append(f"graph + library ÷ graph on the {len(both)} theorems both solved: Lean calls {calls:.2f}, "
                         f"units {units:.2f}")
    return "\n".join(lines)


def library_report(found: LibraryArm, split: str) -> str:
    """What the fifth arm's library held and served: entries written, held out (by reason), hits by key, refusals."""
    stats, trained = found.source.stats, found.trained
    reasons = sorted({why.split(": ", 1)[0].split(" (", 1)[-1] for why in found.held.values()})
    hits = [(c.exact, c.closed) for c in found.counted]
    lines = [f"library: the graph on the train split ({sum(r.proved for r in trained)}/{len(trained)} proved), "
             f"{found.written} lemmas written, {len(found.library.entries)} entries frozen; held out of the {split} "
             f"eval: {len(found.held)}" + (f" ({'; '.join(reasons)})" if reasons else ""),
             f"read on the {split} split: {stats.lookups} lookups, {stats.offered} offered, hits {stats.hits} "
             f"(exact key {sum(e for e, _ in hits)}, closed key {sum(c for _, c in hits)}), rejected by Lean "
             f"{stats.rejected}, refused before Lean {stats.refused}",
             "hits per theorem (exact/closed): " + " ".join(f"{e}/{c}" for e, c in hits)]
    graph_calls = [r.lean_calls for r in found.arm.results]
    lines.append(f"theorems that used a lemma: {sum(bool(r.lemmas_used()) for r in found.arm.results)}; Lean calls "
                 f"per theorem: {' '.join(str(n) for n in graph_calls)}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seed", type=int, default=0, help="world seed (data.world_seed)")
    parser.add_argument("--split", default="test", help="train | pool | test | all (default test)")
    parser.add_argument("--budget", type=int, default=60, help="search.max_nodes of every search (default 60)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N theorems (and of the training split)")
    parser.add_argument("--shared", action="store_true",
                        help="the family's situations shared across the train and test splits")
    args = parser.parse_args(argv)
    theorems = deep_family(args.seed, None if args.split == "all" else args.split, args.shared)[: args.limit]
    if not theorems:
        print(f"no deep-family theorems in split {args.split!r}", file=sys.stderr)
        return 2
    started = time.monotonic()
    arms = asyncio.run(run_arms(theorems, args.budget))
    train = deep_family(args.seed, "train", args.shared)[: args.limit]
    with tempfile.TemporaryDirectory() as folder:
        found = asyncio.run(run_library_arm(train, theorems, args.budget, Store(cache_dir=None),
                                            str(Path(folder) / "library")))
    family = "deep sketch family's shared situations" if args.shared else "deep sketch family"
    print(f"{family}, world seed {args.seed}, split {args.split}: {len(theorems)} theorems; budget "
          f"{args.budget} units; sketch_depth {DEPTH} in the tree and graph arms; minilean {VERSION} in-process; "
          f"load {os.getloadavg()[0]:.1f}; {time.monotonic() - started:.1f} s")
    print(report([*arms, found.arm], args.budget))
    print()
    print(library_report(found, args.split))
    return 0


if __name__ == "__main__":
    sys.exit(main())

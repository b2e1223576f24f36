"""Every search mode (`burnqed.search.modes.MODES`) at equal generated tokens, on the replay server with a simulated
prover.

    nice -n 10 .venv/bin/python benchmarks/search_modes.py [--error-rate 0.5] [--step-error-rate E] [--seeds 3]
                                                         [--lean-ms 0]

The prover knows the bundled corpus' proofs and writes each tactic wrong with probability `--error-rate`; every mode
runs on the same theorems with its own settings, built as `burnqed eval` builds them (`Mode.settings`), is scored by
burnqed's eval code and read as `burnqed compare` reads it. Prints each mode's solved counts and how its searches
ended, then its solved count at each token level and the ratio of every mode to every mode before it in the registry
(docs/benchmarks.md, "search_modes.py").
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from burnqed.config import LeanConfig, PlannerConfig, PolicyConfig, SearchConfig  # noqa: E402
from burnqed.eval.compare import CostEntry, cost_ladder, read_at_level  # noqa: E402
from burnqed.eval.pass_at import build_eval_result  # noqa: E402
from burnqed.eval.result import EvalResult  # noqa: E402
from burnqed.eval.run import eval_settings  # noqa: E402
from burnqed.lean.guard import TacticGuard  # noqa: E402
from burnqed.lean.inprocess import InProcessReplayPool  # noqa: E402
from burnqed.policy.base import AsyncClosing, Completion, Sampling, Seeds  # noqa: E402
from burnqed.records.results import TheoremResult  # noqa: E402
from burnqed.records.theorem import Theorem  # noqa: E402
from burnqed.search.mode import BudgetUnit, Mode, Sections  # noqa: E402
from burnqed.search.modes import MODES, SearchSettings  # noqa: E402
from burnqed.search.runner import run_theorems  # noqa: E402
from burnqed.text.completion import split_proof  # noqa: E402
from burnqed.text.prompt import (  # noqa: E402
    SKETCH_INSTRUCTION,
    STATE_COMMENT_CLOSE,
    STATE_COMMENT_OPEN,
    TACTIC_INSTRUCTION,
    PromptFormat,
)
from burnqed.text.sketch import sketch_of_proof  # noqa: E402
from leankit.corpus import Corpus, TheoremSpec, goal_pp, load_corpus  # noqa: E402
from minilean.replay.replay_server import ReplayServer  # noqa: E402

FINISHERS = ("linarith", "nlinarith", "simp", "norm_num", "omega", "positivity", "ring", "tauto")
LADDER = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)  # fine rungs: the token levels read between them
# Each mode's budget ladder, by its unit (`Mode.unit`): an expansion asks for policy.num_candidates (8) completions, a
# proof is one, so expansions stop two rungs lower.
BUDGETS: dict[BudgetUnit, tuple[int, ...]] = {"expansions": LADDER[:-2], "proofs": LADDER}
SHOWN = (1, 4, 16, 64, 128)  # the budgets a mode's line shows
CONCURRENCY = 4  # theorems searched at once, on a pool of as many replay servers
# The sections every mode's settings are built from (`mode_settings`): the defaults but for these. A simulated search
# never times out (search.timeout_s only stops a stuck run); the policy writes the plain family (`Mode.fmt`: each mode
# sends its own variant of it, sketch's planner the plain sketch format).
TIMEOUT_S = 600.0
POLICY = PolicyConfig(prompt_format=PromptFormat.PLAIN_TACTIC)
_WIDTH = max(len(mode.label) for mode in MODES.values())
_DECLARATION = re.compile(r"theorem ([^\s(){}\[\]:]+)")  # its name, before its binders (policy.declaration_form)
SORRY_HOLE = ":= by sorry"  # how `sketch_of_proof` writes a hole's proof


def tokens_of(tactic: str) -> int:
    return max(1, len(tactic) // 3)


def goal_key(text: str) -> str:
    return " ".join(text.split())


@dataclass
class Proof:
    """A recorded proof: its tactics and the goal each one was applied to (the first open goal)."""

    tactics: list[str]
    goals: list[str]


@dataclass
class Knowledge:
    """What the simulated prover knows about one theorem."""

    spec: TheoremSpec
    proofs: list[Proof]
    ok: dict[str, list[str]] = field(default_factory=dict)  # goal id -> tactics that succeed on it
    bad: dict[str, list[str]] = field(default_factory=dict)  # goal id -> tactics recorded as failing on it
    sketches: list[str] = field(default_factory=list)  # the sketch of each recorded proof with a `have` (its body)


def learn(spec: TheoremSpec) -> Knowledge | None:
    """The theorem's replayable proofs from where burnqed starts it (`lean.start.START_FORM`, binder form: the
    recorded proofs as they run from there, `TheoremSpec.binder_proofs`) and its per-goal tactics; None when every
    proof needs a bare `have`. Its sketches are those of every recorded proof (`sketch_of_proof`)."""
    proofs, started = [], spec.binder_proofs()
    for tactics in started:
        if split_proof("\n".join(tactics)) != split_proof("\n".join(tactics), split_have=False):
            continue  # the replay server cannot replay Mathlib's bare `have h : T`
        goals, open_goals = [], [spec.start_goal()]
        for tactic in tactics:
            goals.append(open_goals[0])
            step = spec.lookup(open_goals[0], tactic)
            assert step is not None and step.result is not None  # load_corpus validated every proof
            open_goals = [*step.result, *open_goals[1:]]
        proofs.append(Proof(list(tactics), goals))
    if not proofs:
        return None
    sketches = [sketch_of_proof("\n".join(tactics)) for tactics in started]
    known = Knowledge(spec, proofs, sketches=[sketch.body for sketch in sketches if sketch is not None])
    for transition in spec.transitions:
        table = known.ok if transition.result is not None else known.bad
        table.setdefault(transition.goal, []).append(transition.tactic)
    return known


class SimulatedProver(AsyncClosing):
    """A `Policy` that writes proofs from the corpus with a per-tactic error rate (see the module docstring)."""

    name = "simulated-prover"

    def __init__(self, theorems: Sequence[Knowledge], error_rate: float, seed: int,
                 step_error_rate: float | None = None) -> None:
        self.rng = random.Random(seed)
        self.error_rate = error_rate
        self.step_error_rate = error_rate if step_error_rate is None else step_error_rate
        self.by_name = {known.spec.name: known for known in theorems}
        self.by_goal: dict[str, list[tuple[Knowledge, str]]] = {}
        for known in theorems:
            for goal_id, spec in known.spec.goals.items():
                self.by_goal.setdefault(goal_key(goal_pp(spec)), []).append((known, goal_id))

    async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
        return [[self._one(prompt) for _ in range(sampling.n)] for prompt in prompts]

    async def close(self) -> None:
        return None

    def _one(self, prompt: str) -> Completion:
        if SKETCH_INSTRUCTION in prompt:  # a planner's prompt, or a re-plan's
            known = self._named(prompt)
            tactics = self._sketch(known.sketches) if known and known.sketches else [self._junk()]
        elif STATE_COMMENT_OPEN not in prompt:
            known = self._named(prompt)
            tactics = self._rest(known, self.rng.choice(known.proofs), 0) if known else [self._junk()]
        else:
            state = prompt.split(STATE_COMMENT_OPEN, 1)[1].rsplit(STATE_COMMENT_CLOSE, 1)[0]
            lines = [line.strip() for line in state.strip("\n").split("\n")]
            first = goal_key("\n".join(lines).split("\n\n", 1)[0])
            places = self.by_goal.get(first, [])
            tactics = [self._tactic(places)] if TACTIC_INSTRUCTION in prompt else self._continue(places)
        text = "\n".join(tactics)
        count = sum(tokens_of(t) for t in tactics) + len(tactics) + 1
        logprob = -0.3 * count * self.rng.uniform(0.8, 1.2)
        return Completion(text + "\n```", logprob, count)

    def _named(self, prompt: str) -> Knowledge | None:
        match = _DECLARATION.search(prompt)
        return self.by_name.get(match.group(1)) if match else None

    def _sketch(self, sketches: list[str]) -> list[str]:
        """A recorded proof's sketch, each line but a hole wrong with the error rate (a finisher other than it)."""
        return [line if self.rng.random() >= self.error_rate or line.endswith(SORRY_HOLE)
                else self.rng.choice([t for t in FINISHERS if t != line.strip()])
                for line in self.rng.choice(sketches).split("\n")]

    def _right(self, known: Knowledge, goal: str, recorded: str, rate: float | None = None) -> str:
        if self.rng.random() >= (self.error_rate if rate is None else rate):
            return recorded
        wrong = [t for t in known.bad.get(goal, []) if t != recorded]
        wrong += [t for t in FINISHERS if t not in known.ok.get(goal, [])]
        return self.rng.choice(wrong)

    def _rest(self, known: Knowledge, proof: Proof, start: int) -> list[str]:
        return [self._right(known, goal, tactic) for tactic, goal in
                zip(proof.tactics[start:], proof.goals[start:], strict=True)]

    def _tactic(self, places: list[tuple[Knowledge, str]]) -> str:
        if not places:
            return self._junk()
        known, goal = self.rng.choice(places)
        ok = known.ok.get(goal)
        return self._right(known, goal, self.rng.choice(ok), self.step_error_rate) if ok else self._junk()

    def _continue(self, places: list[tuple[Knowledge, str]]) -> list[str]:
        through = [(known, proof, k) for known, goal in places for proof in known.proofs
                   for k, at in enumerate(proof.goals) if at == goal]
        if not through:
            return [self._tactic(places)]
        known, proof, k = self.rng.choice(through)
        return self._rest(known, proof, k)

    def _junk(self) -> str:
        return self.rng.choice(FINISHERS)


@dataclass
class ModeRun:
    """One mode's run: its settings (at its largest budget), each seed's results (one pass each) and their score."""

    mode: Mode[Any]
    settings: SearchSettings
    attempts: list[list[TheoremResult]]
    result: EvalResult
    wall_s: float


def mode_settings(mode: Mode[Any]) -> SearchSettings:
    """`mode`'s engine settings as `burnqed eval` builds them (`Mode.settings`, as
    `stages.search.settings_from_config` calls it): the `[search]`, `[policy]` and `[planner]` sections at their
    defaults but the benchmark's (`TIMEOUT_S`, `POLICY`), at the largest budget of the ladder of its unit, usage
    recorded at every budget of it, compiled."""
    budgets = BUDGETS[mode.unit]
    search = SearchConfig(mode=mode.name, timeout_s=TIMEOUT_S)
    settings: SearchSettings = mode.settings(Sections(search, POLICY, PlannerConfig(), budgets[-1], budgets,
                                                      verify=True))
    return settings


def run_mode(mode: Mode[Any], theorems: Sequence[Knowledge], error_rate: float, seeds: int,
             lean_ms: float, step_error_rate: float | None = None) -> ModeRun:
    """`mode` on every theorem it searches (`Mode.refusal`), once per seed, each seed a pass of its own as eval runs
    pass k (`Mode.for_pass`), scored at the budgets of its unit."""
    corpus = Corpus(name="benchmark", theorems=[known.spec for known in theorems])
    guard = TacticGuard.from_config(LeanConfig())
    settings, budgets = mode_settings(mode), BUDGETS[mode.unit]
    latency = (lambda: lean_ms / 1000) if lean_ms else None
    specs = [theorem for theorem in (Theorem.from_recorded(known.spec) for known in theorems)
             if mode.refusal(theorem) is None]
    attempts: list[list[TheoremResult]] = []
    started = time.perf_counter()
    for seed in range(seeds):
        policy = SimulatedProver(theorems, error_rate, seed, step_error_rate)

        async def go(policy: SimulatedProver = policy, seed: int = seed) -> list[TheoremResult]:
            pool = InProcessReplayPool(lambda: ReplayServer(corpus), size=CONCURRENCY, latency=latency)
            return await run_theorems(specs, pool, policy, mode.for_pass(settings, seed), guard,
                                      concurrency=CONCURRENCY)

        attempts.append(asyncio.run(go()))
    wall = time.perf_counter() - started
    recorded = eval_settings("replay", settings, CONCURRENCY)
    # Each seed is one attempt of every theorem: scored as pass@1 per seed, summed below through the levels.
    results = [build_eval_result([attempt], budgets, benchmark="bundled", model="simulated", ebm=None,
                                 lean_backend="replay", iteration=0, config_digest="benchmark", git_commit=None,
                                 theorem_names=[t.name for t in specs], settings=recorded, mode=mode.name)
               for attempt in attempts]
    return ModeRun(mode, settings, attempts, _merge(results), wall)


def _merge(results: list[EvalResult]) -> EvalResult:
    """Seeds as more theorems: solved, totals, tokens and Lean calls added up, rates recomputed, every seed's
    per-theorem entries (their curves: what the table at equal tokens reads, `eval.compare.cost_ladder`) kept."""
    first = results[0]
    rows = []
    for k, row in enumerate(first.budgets):
        same = [r.budgets[k] for r in results]
        total = sum(r.total for r in same)
        tokens = sum(r.tokens or 0 for r in same)
        rows.append(row.model_copy(update={
            "solved": sum(r.solved for r in same), "total": total,
            "rate": sum(r.solved for r in same) / total if total else 0.0,
            "tokens": tokens, "lean_calls": sum(r.lean_calls or 0 for r in same),
            "avg_tokens": tokens / total if total else 0.0,
        }))
    return first.model_copy(update={"budgets": rows, "total": sum(r.total for r in results),
                                     "per_theorem": [t for r in results for t in r.per_theorem]})


def known_theorems() -> list[Knowledge]:
    """The bundled corpus' theorems the replay server can replay a proof of (`learn`)."""
    return [k for k in (learn(spec) for spec in load_corpus().theorems) if k is not None]


def mode_rows(run: ModeRun) -> list[str]:
    """A mode's line: its unit, wall time, solved at a few budgets with tokens and Lean calls per theorem, and how its
    searches that proved nothing ended (each failure reason's count over every seed); when its searches wrote
    sketches, a line under it with what became of them (each outcome's count, and what one of each said)."""
    unit = run.result.budget_unit
    cells = ", ".join(f"{row.budget}: {row.solved} @ {row.avg_tokens:.0f} tok/{row.lean_calls / row.total:.0f} Lean"
                      for row in run.result.budgets if row.avg_tokens is not None and row.lean_calls is not None
                      and row.total and row.budget in SHOWN)
    ended = _counts(str(r.failure_reason) for attempt in run.attempts for r in attempt if not r.proved)
    line = (f"{run.mode.label:<{_WIDTH}} ({unit}, {run.wall_s:.1f}s) budget: solved @ tokens/theorem / "
            f"Lean calls/theorem -> {cells}; not proved: {ended or 'none'}")
    sketches = [sketch for attempt in run.attempts for r in attempt for sketch in r.sketches]
    if not sketches:
        return [line]
    why = {str(sketch.outcome): (sketch.detail or "").split("\n", 1)[0][:120] for sketch in reversed(sketches)}
    outcomes = _counts(str(sketch.outcome) for sketch in sketches)
    said = "; ".join(f"{outcome}: {detail}" for outcome, detail in sorted(why.items()) if detail)
    return [line, f"{'':<{_WIDTH}} {len(sketches)} sketches: {outcomes}" + (f" ({said})" if said else "")]


def _counts(names: Iterable[str]) -> str:
    """`name count, …`, the most frequent first."""
    counted = sorted(Counter(names).items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{name} {count}" for name, count in counted)


def report(runs: Sequence[ModeRun]) -> list[str]:
    """Each mode's line, then the table at equal generated tokens: each mode's solved count, and the ratio of every
    later mode of the registry to every earlier one (later/earlier), all measured in this run."""
    lines = [line for run in runs for line in mode_rows(run)]
    tops = [max(row.avg_tokens or 0.0 for row in run.result.budgets) for run in runs]
    levels = [2 ** k for k in range(4, 16) if 2 ** k < max(tops)] + [math.ceil(max(tops))]
    pairs = list(itertools.combinations(range(len(runs)), 2))
    names = [f"{runs[b].mode.label}/{runs[a].mode.label}" for a, b in pairs]
    widths = [max(7, len(run.mode.label)) for run in runs] + [max(9, len(name)) for name in names]
    totals = ", ".join(f"{run.mode.label} {run.result.total}" for run in runs)
    lines += ["", f"at equal generated tokens per theorem (solved of {totals}, rate × theorems; each mode at its "
              "largest budget within the level, ≈ interpolated towards the next budget, – not measured)",
              " ".join(f"{name:>{width}}" for name, width in
                       zip(["tokens", *(run.mode.label for run in runs), *names], [8, *widths], strict=True))]
    for level in levels:
        read = [_read(run.result, level) for run in runs]
        cells = [_solved(entry) for entry in read] + [_ratio(read[b], read[a]) for a, b in pairs]
        lines.append(" ".join([f"{level:8d}", *(f"{cell:>{width}}" for cell, width in zip(cells, widths,
                                                                                           strict=True))]))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--error-rate", type=float, default=0.5, help="chance that each tactic written is wrong")
    parser.add_argument("--step-error-rate", type=float, default=None,
                        help="chance that a tactic asked for alone is wrong (default: --error-rate)")
    parser.add_argument("--seeds", type=int, default=3, help="independent runs per mode (more = less noise)")
    parser.add_argument("--lean-ms", type=float, default=0.0, help="simulated Lean latency per tactic")
    args = parser.parse_args()

    known = known_theorems()
    lengths = [len(p.tactics) for k in known for p in k.proofs]
    step_rate = args.error_rate if args.step_error_rate is None else args.step_error_rate
    print(f"{len(known)} theorems × {args.seeds} seeds, recorded proofs of {min(lengths)}-{max(lengths)} tactics "
          f"(mean {sum(lengths) / len(lengths):.1f}); each tactic wrong with probability {args.error_rate} "
          f"({step_rate} one tactic at a time); modes: {', '.join(mode.label for mode in MODES.values())}")
    runs = [run_mode(mode, known, args.error_rate, args.seeds, args.lean_ms, args.step_error_rate)
            for mode in MODES.values()]
    print("\n".join(report(runs)))


def _read(result: EvalResult, level: float) -> CostEntry:
    ladder = cost_ladder(result, "tokens")
    assert ladder is not None, "every search records its tokens"
    return read_at_level("", ladder, level)


def _solved(entry: CostEntry) -> str:
    if entry.rate is None:
        return "–"
    return f"{'≈' if entry.interpolated else ''}{entry.rate * entry.total:.1f}"


def _ratio(a: CostEntry, b: CostEntry) -> str:
    if a.rate is None or b.rate is None:
        return "–"
    return f"{a.rate / b.rate:.2f}" if b.rate else ("inf" if a.rate else "–")


if __name__ == "__main__":
    main()

"""Step, whole and hybrid search at equal generated tokens, on the replay server with a simulated prover.

    nice -n 10 .venv/bin/python benchmarks/search_modes.py [--error-rate 0.5] [--step-error-rate E] [--seeds 3]
                                                         [--lean-ms 0]

The prover knows the bundled corpus' proofs and writes each tactic wrong with probability `--error-rate`; the three
modes run on the same theorems, are scored by burnqed's eval code and read as `burnqed compare` reads them. Prints
the solved counts and the ratios hybrid/whole, hybrid/step and whole/step at each token level (docs/benchmarks.md,
"search_modes.py").
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from burnqed.config import LeanConfig  # noqa: E402
from burnqed.eval.compare import CostEntry, cost_ladder, read_at_level  # noqa: E402
from burnqed.eval.pass_at import build_eval_result  # noqa: E402
from burnqed.eval.result import EvalResult  # noqa: E402
from burnqed.lean.guard import TacticGuard  # noqa: E402
from burnqed.lean.inprocess import InProcessReplayPool  # noqa: E402
from burnqed.policy.base import AsyncClosing, Completion, Sampling, Seeds  # noqa: E402
from burnqed.records.enums import SearchMode  # noqa: E402
from burnqed.records.results import TheoremResult  # noqa: E402
from burnqed.records.theorem import Theorem  # noqa: E402
from burnqed.search.hybrid import HybridSettings  # noqa: E402
from burnqed.search.modes import SearchSettings  # noqa: E402
from burnqed.search.runner import run_theorems  # noqa: E402
from burnqed.search.step import StepSettings  # noqa: E402
from burnqed.search.whole import WholeSettings  # noqa: E402
from burnqed.text.completion import split_proof  # noqa: E402
from burnqed.text.prompt import STATE_COMMENT_CLOSE, STATE_COMMENT_OPEN, TACTIC_INSTRUCTION, PromptFormat  # noqa: E402
from leankit.corpus import Corpus, TheoremSpec, goal_pp, load_corpus  # noqa: E402
from minilean.replay.replay_server import ReplayServer  # noqa: E402

FINISHERS = ("linarith", "nlinarith", "simp", "norm_num", "omega", "positivity", "ring", "tauto")
LADDER = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128]  # fine rungs: the token levels read between them
STEP_BUDGETS = LADDER[:-2]  # expansions (8 candidates each)
WHOLE_BUDGETS = LADDER  # proofs sampled
HYBRID_BUDGETS = LADDER  # proofs sampled
_DECLARATION = re.compile(r"theorem ([^\s(){}\[\]:]+)")  # its name, before its binders (policy.declaration_form)


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


def learn(spec: TheoremSpec) -> Knowledge | None:
    """The theorem's replayable proofs from where burnqed starts it (`lean.start.START_FORM`, binder form: the
    recorded proofs as they run from there, `TheoremSpec.binder_proofs`) and its per-goal tactics; None when every
    proof needs a bare `have`."""
    proofs = []
    for tactics in spec.binder_proofs():
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
    known = Knowledge(spec, proofs)
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
        if STATE_COMMENT_OPEN not in prompt:
            match = _DECLARATION.search(prompt)
            known = self.by_name.get(match.group(1)) if match else None
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
    mode: SearchMode
    result: EvalResult
    wall_s: float


def run_mode(mode: SearchMode, theorems: Sequence[Knowledge], error_rate: float, seeds: int,
             lean_ms: float, step_error_rate: float | None = None) -> ModeRun:
    corpus = Corpus(name="benchmark", theorems=[known.spec for known in theorems])
    guard = TacticGuard.from_config(LeanConfig())
    settings: SearchSettings
    if mode is SearchMode.STEP:
        budgets = STEP_BUDGETS
        settings = StepSettings(fmt=PromptFormat.PLAIN_TACTIC, sampling=Sampling(n=8, stop=("```",)),
                                max_nodes=budgets[-1], timeout_s=600, marks=tuple(budgets))
    elif mode is SearchMode.WHOLE:
        budgets = WHOLE_BUDGETS
        settings = WholeSettings(fmt=PromptFormat.PLAIN_WHOLE, sampling=Sampling(n=8, stop=("```",)),
                                 max_proofs=budgets[-1], timeout_s=600, marks=tuple(budgets))
    else:
        budgets = HYBRID_BUDGETS
        settings = HybridSettings(fmt=PromptFormat.PLAIN_PROOF, sampling=Sampling(stop=("```",)), num_proofs=8,
                                  min_proofs=4, max_proofs=budgets[-1], max_rounds=budgets[-1], timeout_s=600,
                                  marks=tuple(budgets))
    latency = (lambda: lean_ms / 1000) if lean_ms else None
    specs = [Theorem.from_recorded(known.spec) for known in theorems]
    attempts: list[list[TheoremResult]] = []
    started = time.perf_counter()
    for seed in range(seeds):
        policy = SimulatedProver(theorems, error_rate, seed, step_error_rate)

        async def go(policy: SimulatedProver = policy) -> list[TheoremResult]:
            pool = InProcessReplayPool(lambda: ReplayServer(corpus), size=4, latency=latency)
            return await run_theorems(specs, pool, policy, settings, guard, concurrency=4)

        attempts.append(asyncio.run(go()))
    wall = time.perf_counter() - started
    # Each seed is one attempt of every theorem: scored as pass@1 per seed, summed below through the levels.
    results = [build_eval_result([attempt], budgets, benchmark="bundled", model="simulated", ebm=None,
                                 lean_backend="replay", iteration=0, config_digest="benchmark", git_commit=None,
                                 theorem_names=[t.name for t in specs], mode=mode) for attempt in attempts]
    return ModeRun(mode, _merge(results), wall)


def _merge(results: list[EvalResult]) -> EvalResult:
    """Seeds as more theorems: solved, totals, tokens and Lean calls added up, rates recomputed."""
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
    return first.model_copy(update={"budgets": rows, "total": sum(r.total for r in results)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--error-rate", type=float, default=0.5, help="chance that each tactic written is wrong")
    parser.add_argument("--step-error-rate", type=float, default=None,
                        help="chance that a tactic asked for alone is wrong (default: --error-rate)")
    parser.add_argument("--seeds", type=int, default=3, help="independent runs per mode (more = less noise)")
    parser.add_argument("--lean-ms", type=float, default=0.0, help="simulated Lean latency per tactic")
    args = parser.parse_args()

    known = [k for k in (learn(spec) for spec in load_corpus().theorems) if k is not None]
    lengths = [len(p.tactics) for k in known for p in k.proofs]
    step_rate = args.error_rate if args.step_error_rate is None else args.step_error_rate
    print(f"{len(known)} theorems × {args.seeds} seeds, recorded proofs of {min(lengths)}-{max(lengths)} tactics "
          f"(mean {sum(lengths) / len(lengths):.1f}); each tactic wrong with probability {args.error_rate} "
          f"({step_rate} one tactic at a time)")
    runs = [run_mode(mode, known, args.error_rate, args.seeds, args.lean_ms, args.step_error_rate)
            for mode in SearchMode]
    for run in runs:
        unit = run.result.budget_unit
        cells = ", ".join(f"{row.budget}: {row.solved} @ {row.avg_tokens:.0f} tok/{row.lean_calls / row.total:.0f} Lean"
                          for row in run.result.budgets if row.avg_tokens is not None and row.lean_calls is not None
                          and row.budget in (1, 4, 16, 64, 128))
        print(f"{run.mode:6s} ({unit}, {run.wall_s:.1f}s) budget: solved @ tokens/theorem / Lean calls/theorem -> "
              f"{cells}")
    total = runs[0].result.total
    tops = [max(row.avg_tokens or 0.0 for row in run.result.budgets) for run in runs]
    levels = [2 ** k for k in range(4, 16) if 2 ** k < max(tops)] + [math.ceil(max(tops))]
    print(f"\nat equal generated tokens per theorem (solved of {total}, rate × theorems; each mode at its largest "
          "budget within the level, ≈ interpolated towards the next budget, – not measured)")
    print(f"{'tokens':>8} {'step':>7} {'whole':>7} {'hybrid':>7} {'hyb/whole':>10} {'hyb/step':>9} {'whole/step':>10}")
    for level in levels:
        step, whole, hybrid = (_read(run.result, level) for run in runs)
        print(f"{level:8d} {_solved(step):>7} {_solved(whole):>7} {_solved(hybrid):>7} {_ratio(hybrid, whole):>10} "
              f"{_ratio(hybrid, step):>9} {_ratio(whole, step):>10}")


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

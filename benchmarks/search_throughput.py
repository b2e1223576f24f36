"""Search throughput with simulated latencies: how close the prover gets to the hardware's lower bound.

    .venv/bin/python benchmarks/search_throughput.py [--workers 8] [--gen-base 0.15] [--gen-exp 0.5]
                                                     [--candidates 8] [--checkpoint-edges 1000000]

Simulation (all in one process, wall-clock real):
- Lean: the in-process replay server over the bundled corpus; each tactic waits a log-normal latency
  with p50 22 ms and p95 300 ms (the burn-qed prototype's measurements).
- Policy: one simulated GPU that serves one request at a time; a request of b prompts takes
  gen_base × b^gen_exp seconds (sub-linear in the batch, like batched decoding). It answers with the
  corpus' recorded tactics for the state (failing ones first) padded with junk tactics to n candidates,
  so every expansion costs real Lean work.

Runs, on the same 51 theorems in one process:
- burnqed: one theorem per Lean worker, all searches sharing the batching policy;
- baseline: one theorem per worker, one policy request per node (no cross-theorem batching).
Lower bound for a run = max(total generation time at the batching it achieved, total Lean time /
workers). Prints efficiency = bound / wall (target ≥ 0.85) and the speed-up over the baseline.
Then the checkpoint cost: writing N edges with a checkpoint every 50 theorems vs writing them once
(target ≤ 1.3×), via benchmarks/trajectory_checkpoint.py.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from burnqed.config import LeanConfig  # noqa: E402
from burnqed.lean.corpus import load_corpus  # noqa: E402
from burnqed.lean.guard import TacticGuard  # noqa: E402
from burnqed.lean.replay.inprocess import InProcessReplayPool  # noqa: E402
from burnqed.lean.replay.server import ReplayServer  # noqa: E402
from burnqed.policy.base import AsyncClosing, Completion, Policy, Sampling  # noqa: E402
from burnqed.policy.batching import BatchingPolicy  # noqa: E402
from burnqed.search.runner import run_theorems  # noqa: E402
from burnqed.search.step import StepSettings  # noqa: E402
from tests.doubles.policy_double import corpus_oracle, state_of  # noqa: E402

P50_S, P95_S = 0.022, 0.300
SIGMA = math.log(P95_S / P50_S) / 1.6449


class LeanClock:
    """Log-normal tactic latencies (p50 22 ms, p95 300 ms), summed so the bound can be computed."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.total_s = 0.0

    def __call__(self) -> float:
        latency = self.rng.lognormvariate(math.log(P50_S), SIGMA)
        self.total_s += latency
        return latency


class SimulatedGPU(AsyncClosing):
    """One GPU serving one request at a time; a batch of b prompts takes base × b^exp seconds."""

    name = "simulated-gpu"

    def __init__(self, base_s: float, exponent: float, candidates: int) -> None:
        self.base_s = base_s
        self.exponent = exponent
        self.candidates = candidates
        self.script = corpus_oracle(load_corpus())
        self.lock = asyncio.Lock()
        self.gen_s = 0.0
        self.requests = 0
        self.prompts = 0

    async def generate(self, prompts: Sequence[str], sampling: Sampling) -> list[list[Completion]]:
        async with self.lock:
            cost = self.base_s * len(prompts) ** self.exponent
            await asyncio.sleep(cost)
            self.gen_s += cost
            self.requests += 1
            self.prompts += len(prompts)
        out = []
        for prompt in prompts:
            answers = self.script(state_of(prompt))[: self.candidates]
            junk = [(f"simp_junk_{i}", -3.0 - i) for i in range(self.candidates - len(answers))]
            out.append([Completion(f"{text}\n```", lp, 4) for text, lp in [*answers, *junk]])
        return out

    async def close(self) -> None:
        pass


@dataclass
class Run:
    wall_s: float
    gen_s: float
    lean_s: float
    requests: int
    prompts: int
    proved: int

    def bound(self, workers: int) -> float:
        return max(self.gen_s, self.lean_s / workers)


def one_run(workers: int, batching: bool, gen_base: float, gen_exp: float, candidates: int, seed: int) -> Run:
    corpus = load_corpus()
    theorems = [spec.as_theorem() for spec in corpus.theorems]
    clock = LeanClock(seed)
    gpu = SimulatedGPU(gen_base, gen_exp, candidates)
    settings = StepSettings(sampling=Sampling(n=candidates), max_nodes=50, timeout_s=600, verify=True)
    guard = TacticGuard.from_config(LeanConfig())

    async def go() -> int:
        pool = InProcessReplayPool(lambda: ReplayServer(corpus), size=workers, latency=clock)
        policy: Policy = BatchingPolicy(gpu, max_batch_prompts=256, max_inflight=1) if batching else gpu
        results = await run_theorems(theorems, pool, policy, settings, guard, concurrency=workers)
        return sum(r.proved for r in results)

    started = time.perf_counter()
    proved = asyncio.run(go())
    return Run(time.perf_counter() - started, gpu.gen_s, clock.total_s, gpu.requests, gpu.prompts, proved)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--gen-base", type=float, default=0.15, help="seconds for a 1-prompt request")
    parser.add_argument("--gen-exp", type=float, default=0.5, help="request time grows as batch^exp")
    parser.add_argument("--candidates", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint-edges", type=int, default=1_000_000, help="0 skips the checkpoint part")
    args = parser.parse_args()

    print(f"{args.workers} Lean workers, n={args.candidates}, gen = {args.gen_base} s × batch^{args.gen_exp}, "
          f"Lean p50 {P50_S * 1000:.0f} ms / p95 {P95_S * 1000:.0f} ms")
    runs = {}
    for label, batching in (("burnqed", True), ("baseline", False)):
        run = one_run(args.workers, batching, args.gen_base, args.gen_exp, args.candidates, args.seed)
        runs[label] = run
        bound = run.bound(args.workers)
        print(f"{label:9s} wall {run.wall_s:6.2f}s  gen {run.gen_s:6.2f}s in {run.requests} requests "
              f"(mean batch {run.prompts / max(run.requests, 1):.1f})  Lean {run.lean_s:6.2f}s "
              f"(/{args.workers} = {run.lean_s / args.workers:.2f}s)  bound {bound:.2f}s  "
              f"efficiency {bound / run.wall_s:.2f}  proved {run.proved}")
    ours, base = runs["burnqed"], runs["baseline"]
    print(f"efficiency (bound / wall): {ours.bound(args.workers) / ours.wall_s:.2f} (target >= 0.85); "
          f"speed-up over one-request-per-node baseline: {base.wall_s / ours.wall_s:.2f}x")
    if args.checkpoint_edges:
        from benchmarks.trajectory_checkpoint import run as checkpoint_run

        stats = checkpoint_run(edges=args.checkpoint_edges, theorems=2000, every=50)
        print("checkpoint cost: " + ", ".join(f"{k} {v:.3g}" for k, v in stats.items()))


if __name__ == "__main__":
    main()

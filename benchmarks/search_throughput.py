"""Search throughput with simulated peers: how close the prover gets to the hardware's lower bound, and how much
faster it is than searching one theorem per Lean worker at a time.

    nice -n 10 .venv/bin/python benchmarks/search_throughput.py [--scenario issue|generation|lean ...]
                                                                [--seed 0] [--checkpoint-edges 1000000]

Lean is the in-process replay server with the prototype's tactic latencies, the policy one simulated GPU with
continuous batching (`benchmarks/gpu_model.py`). Each scenario runs burnqed's search and its baselines on the same
theorems and prints efficiency (lower bound / wall), busy fractions, prompts per step and the speed-ups against
their targets, then the checkpoint cost (docs/benchmarks.md, "search_throughput.py").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.gpu_model import P50_S, P95_S, ContinuousBatchingGPU, LeanClock  # noqa: E402
from burnqed.config import LeanConfig, PolicyConfig, SearchConfig  # noqa: E402
from burnqed.lean.guard import TacticGuard  # noqa: E402
from burnqed.lean.inprocess import InProcessReplayPool  # noqa: E402
from burnqed.policy.base import Policy, Sampling  # noqa: E402
from burnqed.policy.batching import BatchingPolicy  # noqa: E402
from burnqed.policy.oracle import corpus_oracle  # noqa: E402
from burnqed.records.theorem import Theorem  # noqa: E402
from burnqed.search.monitor import SearchMonitor, ThroughputReport  # noqa: E402
from burnqed.search.runner import run_theorems  # noqa: E402
from burnqed.search.step import StepSettings  # noqa: E402
from leankit.corpus import load_corpus  # noqa: E402
from minilean.replay.replay_server import ReplayServer  # noqa: E402


@dataclass(frozen=True)
class Scenario:
    name: str
    about: str
    theorems: int  # the bundled corpus' theorems in order, repeated (renamed) when more are asked for
    workers: int
    theorems_per_worker: int
    candidates: int
    decode_steps: int
    lean_scale: float = 1.0  # multiplies every tactic latency
    one_at_a_time: bool = False  # also run the one-theorem-at-a-time baseline


SCENARIOS = {
    "issue": Scenario("issue", "the issue's: concurrency 16 against the GPU model", 48, 4, 4, 4, 24,
                      one_at_a_time=True),
    "generation": Scenario("generation", "generation-dominated", 102, 4, 8, 4, 40),
    "lean": Scenario("lean", "Lean-dominated: few workers, many theorems each", 153, 2, 16, 4, 24, lean_scale=1.5),
}


@dataclass
class Run:
    label: str
    workers: int
    wall_s: float
    gpu_busy_s: float  # as the steps really took
    gpu_ran_s: float  # the same steps at their modelled cost (the project's GPU bound)
    gpu_full_batch_s: float  # the prompts used, every step at the largest batch
    mean_running: float
    requests: int
    prompts: int
    used_prompts: int
    lean_s: float
    lean_calls: int
    proved: int
    policy_wait: float  # Σ policy_s / Σ time_s over theorems
    in_flight: float  # theorems searching, averaged over the run
    speculated: int
    speculation_used: int

    @property
    def lean_bound_s(self) -> float:
        return self.lean_s / self.workers

    @property
    def bound_s(self) -> float:
        return max(self.gpu_ran_s, self.lean_bound_s)

    @property
    def full_batch_bound_s(self) -> float:
        return max(self.gpu_full_batch_s, self.lean_bound_s)

    @property
    def efficiency(self) -> float:
        return self.bound_s / self.wall_s

    @property
    def side(self) -> str:
        return "GPU" if self.gpu_ran_s >= self.lean_bound_s else "Lean"

    def line(self) -> str:
        speculation = f", asked ahead {self.speculation_used}/{self.speculated} used" if self.speculated else ""
        return (f"  {self.label:12s} wall {self.wall_s:7.2f}s  GPU busy {self.gpu_busy_s / self.wall_s:4.2f} "
                f"({self.mean_running:4.1f} prompts/step, {self.prompts / max(self.requests, 1):3.1f}/request)  "
                f"Lean busy {self.lean_s / (self.workers * self.wall_s):4.2f} ({self.lean_calls} tactics)  "
                f"efficiency {self.efficiency:4.2f} ({self.side})  in flight {self.in_flight:4.1f}  "
                f"policy wait {self.policy_wait:4.2f}  "
                f"proved {self.proved}{speculation}")


def theorem_set(count: int) -> list[Theorem]:
    corpus = [Theorem.from_recorded(spec) for spec in load_corpus().theorems]
    theorems = []
    for index in range(count):
        base = corpus[index % len(corpus)]
        copy = index // len(corpus)
        theorems.append(base if copy == 0 else base.model_copy(update={"name": f"{base.name}_r{copy}"}))
    return theorems


def one_run(scenario: Scenario, label: str, per_worker: int, concurrency: int, ours: bool, seed: int) -> Run:
    corpus = load_corpus()
    theorems = theorem_set(scenario.theorems)
    clock = LeanClock(seed, scenario.lean_scale)
    gpu = ContinuousBatchingGPU(corpus_oracle(corpus), candidates=scenario.candidates,
                                decode_steps=scenario.decode_steps)
    search = SearchConfig()
    settings = StepSettings(sampling=Sampling(n=scenario.candidates), max_nodes=50, timeout_s=600, verify=True,
                            expand_batch=search.expand_batch, speculate=search.speculate if ours else 0)
    guard = TacticGuard.from_config(LeanConfig())
    policy_defaults = PolicyConfig()

    async def go() -> tuple[int, int, ThroughputReport]:
        pool = InProcessReplayPool(lambda: ReplayServer(corpus), size=scenario.workers,
                                   theorems_per_worker=per_worker, latency=clock)
        policy: Policy = gpu
        if ours:
            policy = BatchingPolicy(gpu, max_batch_prompts=policy_defaults.max_batch_prompts,
                                    max_inflight=policy_defaults.max_inflight_requests)
        monitor = SearchMonitor(concurrency=concurrency, pool=pool, policy=policy)
        results = await run_theorems(theorems, pool, policy, settings, guard, concurrency=concurrency,
                                     monitor=monitor)
        await gpu.close()
        return sum(r.proved for r in results), sum(r.nodes_expanded for r in results), monitor.report()

    started = time.perf_counter()
    proved, expansions, report = asyncio.run(go())
    wall = time.perf_counter() - started
    stats = gpu.stats
    batch = min(concurrency * settings.expand_batch, gpu.max_running)
    return Run(label, scenario.workers, wall, stats.busy_s, stats.nominal_s,
               gpu.lower_bound_s(expansions, batch), stats.mean_running, stats.requests, stats.prompts,
               expansions, clock.total_s, clock.calls, proved, report.policy_wait, report.mean_in_flight,
               report.speculated, report.speculation_used)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), help="default: all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint-edges", type=int, default=1_000_000, help="0 skips the checkpoint part")
    args = parser.parse_args()

    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; Lean p50 {P50_S * 1000:.0f} ms / "
          f"p95 {P95_S * 1000:.0f} ms per tactic; GPU step 40 ms + 2 ms per running prompt")
    for name in args.scenario or list(SCENARIOS):
        s = SCENARIOS[name]
        print(f"[{s.name}] {s.about}: {s.theorems} theorems, {s.workers} workers × {s.theorems_per_worker} "
              f"theorems, n={s.candidates}, {s.decode_steps} decode steps, Lean latency ×{s.lean_scale:g}")
        ours = one_run(s, "burnqed", s.theorems_per_worker, s.workers * s.theorems_per_worker, True, args.seed)
        print(ours.line(), flush=True)
        base = one_run(s, "per-worker", 1, s.workers, False, args.seed)
        print(base.line(), flush=True)
        # The issue scenario's targets are the GPU's busy fraction and the one-at-a-time baseline; the regimes'
        # are efficiency and the speed-up over one theorem per worker.
        regime = not s.one_at_a_time
        verdict = (f"  => efficiency {ours.efficiency:.2f}{' (target >= 0.85)' if regime else ''}; GPU busy "
                   f"{ours.gpu_busy_s / ours.wall_s:.2f}{'' if regime else ' (target >= 0.85)'}, Lean busy "
                   f"{ours.lean_bound_s / ours.wall_s:.2f}; wall {ours.wall_s / base.wall_s:.2f} of the per-worker "
                   f"baseline (speed-up {base.wall_s / ours.wall_s:.2f}x{', target >= 3x' if regime else ''}; the "
                   f"full-batch bound allows {base.wall_s / ours.full_batch_bound_s:.2f}x)")
        if s.one_at_a_time:
            single = one_run(s, "one-at-a-time", 1, 1, False, args.seed)
            print(single.line(), flush=True)
            verdict += f"; wall {ours.wall_s / single.wall_s:.2f} of the one-at-a-time baseline (target <= 0.33)"
        print(verdict, flush=True)
    print(f"load average {os.getloadavg()[0]:.2f}")
    if args.checkpoint_edges:
        from benchmarks.trajectory_checkpoint import run as checkpoint_run
        from burnqed.config import StorageConfig
        from burnqed.storage import Store

        stats = checkpoint_run(edges=args.checkpoint_edges, theorems=2000, every=50,
                               store=Store.from_config(StorageConfig()))
        print("checkpoint cost: " + ", ".join(f"{k} {v:.3g}" for k, v in stats.items()))


if __name__ == "__main__":
    main()

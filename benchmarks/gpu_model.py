"""Simulated peers for the throughput benchmark: one GPU with continuous batching (an SGLang double that costs time,
not a model) and Lean tactic latencies at the prototype's measurements.

    gpu = ContinuousBatchingGPU(corpus_oracle(corpus), candidates=4, decode_steps=24)   # a `Policy`
    clock = LeanClock(seed=0)                 # log-normal tactic latencies, p50 22 ms, p95 300 ms
    gpu.lower_bound_s(prompts, batch)         # the least GPU time `prompts` prompts can take at that batch

A step costs 40 ms + 2 ms per running prompt. How the engine steps, admits and answers, and the bounds:
docs/benchmarks.md, "search_throughput.py".
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from burnqed.policy.base import AsyncClosing, Completion, Sampling, Seeds
from burnqed.policy.oracle import Answer, state_of

P50_S, P95_S = 0.022, 0.300
SIGMA = math.log(P95_S / P50_S) / 1.6449


class LeanClock:
    """Log-normal tactic latencies (p50 22 ms, p95 300 ms), summed so the Lean bound can be computed."""

    def __init__(self, seed: int, scale: float = 1.0) -> None:
        self.rng = random.Random(seed)
        self.scale = scale
        self.total_s = 0.0
        self.calls = 0

    def __call__(self) -> float:
        latency = self.scale * self.rng.lognormvariate(math.log(P50_S), SIGMA)
        self.total_s += latency
        self.calls += 1
        return latency


@dataclass(eq=False)
class _Request:
    prompts: int
    future: asyncio.Future[None]
    done: int = 0


@dataclass(eq=False)
class _Sequence:
    request: _Request
    remaining: int


@dataclass
class GPUStats:
    """What the engine did."""

    steps: int = 0
    busy_s: float = 0.0  # wall time with at least one sequence running (steps, as they really took)
    nominal_s: float = 0.0  # the same steps at their modelled cost
    prompt_steps: int = 0  # Σ running over steps
    prompts: int = 0  # prompts finished
    requests: int = 0
    cancelled_prompts: int = 0
    step_sizes: list[int] = field(default_factory=list)

    @property
    def mean_running(self) -> float:
        return self.prompt_steps / self.steps if self.steps else 0.0


class ContinuousBatchingGPU(AsyncClosing):
    """A `Policy` over a simulated continuous-batching GPU; see the module docstring."""

    name = "simulated-gpu"

    def __init__(
        self,
        script: Callable[[str], Answer],
        *,
        candidates: int,
        step_base_s: float = 0.040,
        step_per_prompt_s: float = 0.002,
        decode_steps: int = 24,
        max_running: int = 256,
    ) -> None:
        self.script = script
        self.candidates = candidates
        self.step_base_s = step_base_s
        self.step_per_prompt_s = step_per_prompt_s
        self.decode_steps = decode_steps
        self.max_running = max_running
        self.stats = GPUStats()
        self._waiting: deque[_Sequence] = deque()
        self._running: list[_Sequence] = []
        self._engine: asyncio.Task[None] | None = None

    def lower_bound_s(self, prompts: int, batch: int) -> float:
        steps_of_base = math.ceil(prompts / max(batch, 1))
        return self.decode_steps * (prompts * self.step_per_prompt_s + steps_of_base * self.step_base_s)

    async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
        if prompts:
            request = _Request(len(prompts), asyncio.get_running_loop().create_future())
            self._waiting.extend(_Sequence(request, self.decode_steps) for _ in prompts)
            if self._engine is None or self._engine.done():
                self._engine = asyncio.get_running_loop().create_task(self._run())
            try:
                await request.future
            except asyncio.CancelledError:
                request.future.cancel()  # its sequences leave the engine at the next boundary
                raise
            self.stats.requests += 1
        return [self._answer(prompt, sampling.n) for prompt in prompts]

    def _answer(self, prompt: str, n: int) -> list[Completion]:
        answers = self.script(state_of(prompt))[: min(n, self.candidates)]
        junk = [(f"simp_junk_{i}", -3.0 - i) for i in range(min(n, self.candidates) - len(answers))]
        return [Completion(f"{text}\n```", lp, 4) for text, lp in [*answers, *junk]]

    async def _run(self) -> None:
        while True:
            self._drop_cancelled()
            while self._waiting and len(self._running) < self.max_running:
                self._running.append(self._waiting.popleft())
            if not self._running:
                return
            running = len(self._running)
            cost = self.step_base_s + self.step_per_prompt_s * running
            began = time.perf_counter()
            await asyncio.sleep(cost)
            self.stats.busy_s += time.perf_counter() - began
            self.stats.nominal_s += cost
            self.stats.steps += 1
            self.stats.prompt_steps += running
            self.stats.step_sizes.append(running)
            still: list[_Sequence] = []
            for sequence in self._running:
                sequence.remaining -= 1
                if sequence.remaining > 0:
                    still.append(sequence)
                    continue
                request = sequence.request
                request.done += 1
                self.stats.prompts += 1
                if request.done == request.prompts and not request.future.done():
                    request.future.set_result(None)
            self._running = still

    def _drop_cancelled(self) -> None:
        before = len(self._running) + len(self._waiting)
        self._running = [s for s in self._running if not s.request.future.cancelled()]
        self._waiting = deque(s for s in self._waiting if not s.request.future.cancelled())
        self.stats.cancelled_prompts += before - len(self._running) - len(self._waiting)

    async def close(self) -> None:
        if self._engine is not None:
            self._engine.cancel()

"""What a running search is doing, for the progress display and the search report: theorems solved so far, theorems
in flight, each Lean worker's load and memory, the policy's batch sizes and the time spent waiting for it.

    tally = SolveTally(); tally.add(result)   # a theorem finished (any pass of an eval; several: a resume's)
    tally.line()          # "solved 3/19 (15.8 %)": the progress line's science, always shown
    monitor = SearchMonitor(concurrency=16, pool=pool, policy=policy)
    async with monitor.watching():                   # samples once a second while the search runs
        await run_theorems(..., monitor=monitor)
    monitor.status()      # "in flight 16/16 · 11 asking the policy · …": the machinery, shown with -v
    monitor.report()      # ThroughputReport: into _SUCCESS.json (`extra.throughput`) and `burnqed summary`

The pool and the policy are read duck-typed: what one does not offer (`loads()`, `stats`, `waiting`) is not shown.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from burnqed.records.results import TheoremResult

SAMPLE_EVERY_S = 1.0


@dataclass(frozen=True, slots=True)
class WorkerReport:
    """One Lean worker over the run."""

    index: int
    peak_theorems: int
    peak_rss_mb: float
    last_rss_mb: float
    generation: int


@dataclass(frozen=True, slots=True)
class ThroughputReport:
    """Run-level counters of a search (the search report's `throughput`)."""

    wall_s: float
    theorems: int
    concurrency: int
    mean_in_flight: float  # theorems searching, averaged over the run's time
    peak_in_flight: int
    policy_requests: int
    policy_prompts: int
    mean_batch: float  # prompts per policy request
    policy_wait: float  # Σ time waiting for the policy / Σ theorem time
    lean_wait: float  # Σ time waiting for Lean (its pipe included) / Σ theorem time
    speculated: int  # nodes the policy was asked about ahead of their expansion
    speculation_used: int
    respawned: int | None
    recycled: int | None
    workers: list[WorkerReport] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ThroughputReport:
        """Read back `as_dict` (e.g. from a trajectory's `_SUCCESS.json`); unknown keys are ignored."""
        names = set(cls.__dataclass_fields__)
        fields = {key: value for key, value in data.items() if key in names}
        fields["workers"] = [WorkerReport(**worker) for worker in data.get("workers", [])]
        return cls(**fields)


class SolveTally:
    """Theorems finished and proved so far, by name: an eval's passes search each theorem again, and a theorem is
    solved when any attempt proved it (pass@N), so both counts are of distinct theorems."""

    def __init__(self) -> None:
        self._finished: set[str] = set()
        self._solved: set[str] = set()
        self._line = ""  # nothing to say before the first theorem finishes

    def add(self, *results: TheoremResult) -> None:
        for result in results:
            self._finished.add(result.name)
            if result.proved:
                self._solved.add(result.name)
        if not self._finished:
            return
        solved, finished = len(self._solved), len(self._finished)
        self._line = f"solved {solved}/{finished} ({100 * solved / finished:.1f} %)"

    def line(self) -> str:
        """`solved S/F (R %)` ("" before the first theorem finished): a plain string, safe to read from a display
        thread."""
        return self._line


@dataclass(slots=True)
class _Worker:
    peak_theorems: int = 0
    peak_rss_mb: float = 0.0
    last_rss_mb: float = 0.0
    generation: int = 0


class SearchMonitor:
    """Counters and samples of one search run; see the module docstring."""

    def __init__(self, *, concurrency: int, pool: object = None, policy: object = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.concurrency = concurrency
        self.pool = pool
        self.policy = policy
        self.clock = clock
        self.started_at = clock()
        self.in_flight = 0
        self.peak_in_flight = 0
        self.finished = 0
        self.speculated = 0
        self.speculation_used = 0
        self._theorem_s = 0.0
        self._policy_s = 0.0
        self._lean_s = 0.0
        self._area = 0.0  # ∫ in_flight dt
        self._since = self.started_at
        self._workers: dict[int, _Worker] = {}
        self._status = "starting"
        # The policy and the pool may have served earlier runs (eval's passes): count from here.
        self._base_policy = self._policy_counts()
        self._base_pool = self._pool_counts()

    # ------------------------------------------------------------------------------------------- events

    def _advance(self) -> None:
        now = self.clock()
        self._area += self.in_flight * (now - self._since)
        self._since = now

    def theorem_started(self) -> None:
        self._advance()
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def theorem_finished(self, result: TheoremResult | None, speculated: int = 0, speculation_used: int = 0) -> None:
        """A theorem left (None: cancelled or failed, nothing recorded)."""
        self._advance()
        self.in_flight -= 1
        if result is None:
            return
        self.finished += 1
        self._theorem_s += result.time_s
        self._policy_s += result.policy_s
        self._lean_s += result.lean_s
        self.speculated += speculated
        self.speculation_used += speculation_used

    # ------------------------------------------------------------------------------------------- samples

    def sample(self) -> None:
        """Read the pool's workers (load, RSS) and refresh the status line."""
        loads = self._loads()
        for load in loads:
            worker = self._workers.setdefault(int(load.index), _Worker())
            worker.peak_theorems = max(worker.peak_theorems, int(load.theorems))
            worker.peak_rss_mb = max(worker.peak_rss_mb, float(load.rss_mb))
            worker.last_rss_mb = float(load.rss_mb)
            worker.generation = int(load.generation)
        parts = [f"in flight {self.in_flight}/{self.concurrency}"]
        waiting = getattr(self.policy, "waiting", None)
        if isinstance(waiting, int):
            parts.append(f"{waiting} asking the policy")
        mean_batch = self._mean_batch()
        if mean_batch is not None:
            parts.append(f"{mean_batch:.1f} prompts/request")
        if self._theorem_s > 0:
            parts.append(f"policy wait {self._policy_s / self._theorem_s:.0%}")
        if loads:
            workers = " ".join(
                f"w{load.index}:{load.theorems}" + (f"/{load.rss_mb:.0f}M" if load.rss_mb else "")
                + ("/drain" if load.draining else "")
                for load in loads
            )
            parts.append(f"Lean {workers}")
        self._status = " · ".join(parts)

    def status(self) -> str:
        """The latest status line (a plain string: safe to read from a display thread)."""
        return self._status

    @contextlib.asynccontextmanager
    async def watching(self, every_s: float = SAMPLE_EVERY_S) -> AsyncIterator[SearchMonitor]:
        """Sample every `every_s` seconds while the block runs."""

        async def loop() -> None:
            while True:
                self.sample()
                await asyncio.sleep(every_s)

        task = asyncio.get_running_loop().create_task(loop())
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self.sample()

    # ------------------------------------------------------------------------------------------- report

    def report(self) -> ThroughputReport:
        self._advance()
        wall = self.clock() - self.started_at
        requests, prompts = (now - before for now, before in zip(self._policy_counts(), self._base_policy,
                                                                  strict=True))
        pool_now = self._pool_counts()
        respawned, recycled = (
            (pool_now[0] - self._base_pool[0], pool_now[1] - self._base_pool[1])
            if pool_now is not None and self._base_pool is not None else (None, None)
        )
        return ThroughputReport(
            wall_s=round(wall, 3),
            theorems=self.finished,
            concurrency=self.concurrency,
            mean_in_flight=round(self._area / wall, 3) if wall > 0 else 0.0,
            peak_in_flight=self.peak_in_flight,
            policy_requests=int(requests),
            policy_prompts=int(prompts),
            mean_batch=round(prompts / requests, 3) if requests else 0.0,
            policy_wait=round(self._policy_s / self._theorem_s, 4) if self._theorem_s else 0.0,
            lean_wait=round(self._lean_s / self._theorem_s, 4) if self._theorem_s else 0.0,
            speculated=self.speculated,
            speculation_used=self.speculation_used,
            respawned=respawned,
            recycled=recycled,
            workers=[
                WorkerReport(index, w.peak_theorems, round(w.peak_rss_mb, 1), round(w.last_rss_mb, 1), w.generation)
                for index, w in sorted(self._workers.items())
            ],
        )

    def _loads(self) -> list[Any]:
        loads = getattr(self.pool, "loads", None)
        return list(loads()) if callable(loads) else []

    def _mean_batch(self) -> float | None:
        requests, prompts = (now - before for now, before in zip(self._policy_counts(), self._base_policy,
                                                                  strict=True))
        return prompts / requests if requests else None

    def _policy_counts(self) -> tuple[int, int]:
        """(requests, prompts) the policy sent so far (0, 0 for a policy without `stats`)."""
        stats = getattr(self.policy, "stats", None)
        requests, prompts = getattr(stats, "requests", 0), getattr(stats, "prompts", 0)
        return (requests, prompts) if isinstance(requests, int) and isinstance(prompts, int) else (0, 0)

    def _pool_counts(self) -> tuple[int, int] | None:
        """(respawned, recycled) so far, or None for a pool without `stats`."""
        stats = getattr(self.pool, "stats", None)
        respawned, recycled = getattr(stats, "respawned", None), getattr(stats, "recycled", None)
        return (respawned, recycled) if isinstance(respawned, int) and isinstance(recycled, int) else None


def render_throughput(report: ThroughputReport) -> str:
    """Two or three lines for the terminal."""
    lines = [
        f"throughput: {report.theorems} theorems in {report.wall_s:.1f}s, {report.mean_in_flight:.1f} in flight on "
        f"average (peak {report.peak_in_flight}, concurrency {report.concurrency}); policy: {report.policy_requests} "
        f"requests, {report.mean_batch:.1f} prompts each; theorems waited {report.policy_wait:.0%} of their time for "
        f"the policy, {report.lean_wait:.0%} for Lean"
    ]
    if report.speculated:
        lines.append(f"speculative expansion: {report.speculated} nodes asked ahead, {report.speculation_used} used")
    if report.workers:
        workers = ", ".join(
            f"w{w.index} ≤{w.peak_theorems} theorems" + (f" {w.peak_rss_mb:.0f} MiB peak" if w.peak_rss_mb else "")
            for w in report.workers
        )
        restarts = f"; {report.respawned} respawned, {report.recycled} recycled" if report.respawned is not None else ""
        lines.append(f"Lean workers: {workers}{restarts}")
    return "\n".join(lines)

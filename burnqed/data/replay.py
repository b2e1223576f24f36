"""Replay whole proofs tactic by tactic through the Lean edge, recording Lean's states.

    results = await replay_all(jobs, pool, concurrency=size, guard=guard, on_done=advance)
    results[0].proofs[0].steps[0].state_before      # "⊢ ∀ (x : ℝ), 2 * x + 3 = 11 → x = 4"

A theorem keeps one leased worker for all its proofs, like a search, and sends each tactic as search does, so the
pairs' states match search's node states byte for byte; proofs sharing a prefix send it once. A failing proof is a
value (`ProofReplay.error`) and gives no steps (docs/data.md, "Rules", 6); a proof whose worker another theorem
crashed (`LeanStatesLostError`) is replayed again. Only infrastructure failures raise. The pool is a Protocol: the
CLI passes `LeanPool`, tests may pass `InProcessReplayPool`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from burnqed.errors import LeanCrashError, LeanProtocolError, LeanStatesLostError, LeanTimeoutError
from burnqed.lean.env import LeanEnv, WorkerPool
from burnqed.lean.guard import TacticGuard
from burnqed.lean.start import start_theorem
from burnqed.records.replies import Goal, TacticKind, first_line, pretty_state
from burnqed.records.theorem import Theorem
from burnqed.text.completion import normalize_tactic

MAX_REPLAYS = 10  # times one proof is replayed again after neighbours' crashes before it counts as failed


@dataclass(frozen=True, slots=True)
class ReplayJob:
    """One theorem to replay (started as search starts it: `burnqed.lean.start`) and its proofs (tactic scripts)."""

    theorem: Theorem
    proofs: tuple[tuple[str, ...], ...]

    @property
    def name(self) -> str:
        return self.theorem.name


@dataclass(frozen=True, slots=True)
class ReplayStep:
    """One replayed tactic with Lean's states around it. `depth` 0 = applied to the root state."""

    state_before: str
    tactic: str
    state_after: str
    depth: int


@dataclass(frozen=True, slots=True)
class ProofReplay:
    """The replay of one proof: its steps when it closed every goal, else where and why it failed."""

    steps: tuple[ReplayStep, ...] = ()
    error: str | None = None
    failed_step: int | None = None  # the failing tactic's index (None: start failure or goals left over)
    failed_tactic: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class TheoremReplay:
    """The replays of one theorem's proofs, in the job's order."""

    name: str
    proofs: tuple[ProofReplay, ...]


class _StartFailed(Exception):
    pass


async def replay_theorem(lean: LeanEnv, job: ReplayJob, guard: TacticGuard) -> TheoremReplay:
    """Replay every proof of `job` on `lean`. Never raises for a Lean-side failure (they are the result)."""
    replays: list[ProofReplay] = []
    cache: dict[tuple[str, ...], tuple[int, tuple[Goal, ...]]] = {}
    generation: int | None = None
    for proof in job.proofs:
        replay: ProofReplay | None = None
        for _ in range(MAX_REPLAYS):
            if generation != lean.generation:  # first proof, or the worker was replaced: (re)start the theorem
                try:
                    cache = {(): await _start(lean, job)}
                except _StartFailed as exc:
                    failure = ProofReplay(error=f"start failed: {exc}")
                    replays.extend(failure for _ in range(len(job.proofs) - len(replays)))
                    return TheoremReplay(job.name, tuple(replays))
                generation = lean.generation
            try:
                replay = await _replay_proof(lean, proof, cache, guard)
                break
            except LeanStatesLostError:
                continue  # a neighbour crashed the shared worker under this proof: start again, replay it again
        replays.append(replay or ProofReplay(error=f"the shared Lean worker was replaced {MAX_REPLAYS} times"))
    return TheoremReplay(job.name, tuple(replays))


async def _start(lean: LeanEnv, job: ReplayJob) -> tuple[int, tuple[Goal, ...]]:
    try:
        return await start_theorem(lean, job.theorem)
    except LeanProtocolError as exc:
        raise _StartFailed(f"{exc.kind}: {first_line(exc.desc)}") from exc
    except (LeanCrashError, LeanTimeoutError) as exc:
        raise _StartFailed(first_line(str(exc))) from exc


async def _replay_proof(
    lean: LeanEnv,
    proof: Sequence[str],
    cache: dict[tuple[str, ...], tuple[int, tuple[Goal, ...]]],
    guard: TacticGuard,
) -> ProofReplay:
    key: tuple[str, ...] = ()
    state_id, goals = cache[key]
    steps: list[ReplayStep] = []
    for depth, tactic in enumerate(proof):
        if not goals:
            return ProofReplay(error="no goals left for this tactic", failed_step=depth, failed_tactic=tactic)
        refusal = guard.refusal(tactic)
        if refusal is not None:
            return ProofReplay(error=refusal.reason, failed_step=depth, failed_tactic=tactic)
        key = (*key, normalize_tactic(tactic))
        known = cache.get(key)
        if known is None:
            result = await lean.tactic(state_id, tactic)
            if result.kind is not TacticKind.SUCCESS or result.state_id is None:
                return ProofReplay(error=result.reason, failed_step=depth, failed_tactic=tactic)
            if result.has_sorry or result.has_unsafe:
                return ProofReplay(error="Lean reports sorry/unsafe in the result", failed_step=depth,
                                   failed_tactic=tactic)
            known = (result.state_id, result.goals)
            cache[key] = known
        before = pretty_state(goals)
        state_id, goals = known
        steps.append(ReplayStep(before, tactic, pretty_state(goals), depth))
    if goals:
        return ProofReplay(error=f"{len(goals)} goal(s) remain after the last tactic", failed_step=None)
    return ProofReplay(steps=tuple(steps))


async def replay_all(
    jobs: Sequence[ReplayJob],
    pool: WorkerPool,
    *,
    concurrency: int,
    guard: TacticGuard,
    on_done: Callable[[TheoremReplay], None] = lambda _: None,
) -> list[TheoremReplay]:
    """Replay `jobs`, `concurrency` theorems at once (one lease each); results in the jobs' order.

    An infrastructure failure (`LeanStartError`, a closed pool) cancels the rest and propagates."""
    results: list[TheoremReplay | None] = [None] * len(jobs)
    queue: asyncio.Queue[int] = asyncio.Queue()
    for position in range(len(jobs)):
        queue.put_nowait(position)

    async def worker() -> None:
        while not queue.empty():
            position = queue.get_nowait()
            async with pool.lease(jobs[position].name, header=jobs[position].theorem.header) as lean:
                result = await replay_theorem(lean, jobs[position], guard)
            results[position] = result
            on_done(result)

    async with asyncio.TaskGroup() as group:
        for _ in range(max(1, min(concurrency, len(jobs)))):
            group.create_task(worker())
    return [result for result in results if result is not None]

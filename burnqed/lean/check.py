"""`burnqed lean check`: start every theorem of an index through the pool and say which fail and why (and
which Pantograph version the pool speaks).

A theorem that does not start (unknown identifier, renamed lemma, wrong imports, Lean crash) is lost
to search without anyone noticing; this lists them. Each theorem holds a worker only for
`goal.start` + `goal.print`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from pydantic import BaseModel, Field

from burnqed.errors import LeanCrashError, LeanProtocolError, LeanTimeoutError
from burnqed.lean.pool import LeanPool
from burnqed.lean.start import start_theorem as start_lean_theorem
from burnqed.records.theorem import Theorem, TheoremIndex


class TheoremStart(BaseModel):
    """How starting one theorem went."""

    name: str
    started: bool
    goals: int = Field(default=0, description="Number of goals of the started state.")
    elapsed_ms: float = 0.0
    error_kind: str | None = Field(default=None, description="elab | index | ... (Lean's kind), crash or timeout.")
    error: str | None = None
    state: str | None = Field(default=None, description="The first goal, pretty-printed, when started.")


class CheckReport(BaseModel):
    """The report `burnqed lean check --output` writes."""

    index: str
    lean_command: list[str]
    pantograph_version: str = Field(description="The Pantograph version the pool speaks (configured or detected).")
    total: int
    started: int
    elapsed_s: float
    failures: list[TheoremStart] = Field(description="Theorems that failed to start, in index order.")
    theorems: list[TheoremStart]

    @property
    def summary(self) -> str:
        return f"started {self.started}/{self.total}"


async def start_theorem(pool: LeanPool, theorem: Theorem) -> TheoremStart:
    """Start one theorem; every Lean failure becomes a value."""
    started = time.perf_counter()

    def failed(kind: str, message: str) -> TheoremStart:
        return TheoremStart(name=theorem.name, started=False, error_kind=kind, error=message,
                            elapsed_ms=(time.perf_counter() - started) * 1000)

    async with pool.lease(theorem.name, header=theorem.header) as lean:
        try:
            _, goals = await start_lean_theorem(lean, theorem)
        except LeanProtocolError as exc:
            return failed(exc.kind, exc.desc)
        except LeanTimeoutError as exc:
            return failed("timeout", str(exc))
        except LeanCrashError as exc:
            return failed("crash", str(exc))
    return TheoremStart(
        name=theorem.name,
        started=True,
        goals=len(goals),
        state=goals[0].pretty() if goals else None,
        elapsed_ms=(time.perf_counter() - started) * 1000,
    )


async def check_index(
    pool: LeanPool,
    index: TheoremIndex,
    lean_command: list[str],
    on_done: Callable[[TheoremStart], None] = lambda _: None,
) -> CheckReport:
    """Start every theorem (as many at once as the pool has workers). A pool start failure propagates:
    it is a configuration problem, not a per-theorem result."""
    began = time.perf_counter()

    async def one(theorem: Theorem) -> TheoremStart:
        result = await start_theorem(pool, theorem)
        on_done(result)
        return result

    results = await asyncio.gather(*(one(t) for t in index.theorems))
    return CheckReport(
        index=index.name,
        lean_command=lean_command,
        pantograph_version=str(pool.version),
        total=len(results),
        started=sum(r.started for r in results),
        elapsed_s=time.perf_counter() - began,
        failures=[r for r in results if not r.started],
        theorems=list(results),
    )

"""`LeanLease`: one theorem's view of a shared Lean worker (the `LeanEnv` a search gets from `LeanPool.lease`).

    async with pool.lease(theorem.name) as lean:        # bound to one worker for the whole search
        state = await lean.start_goal(expr=theorem.statement)
        result = await lean.tactic(state, "intro x")

The lease keeps what makes sharing a worker safe (docs/lean.md, "Workers shared by theorems"): it frees the state
ids it created on release, sends a request naming states only to the process that made them (`LeanStatesLostError`
otherwise), refuses `reset` and state ids it did not create, carries its theorem's header with every scoped request,
and sends `compile` to a verifier worker when the pool has one. When `generation` changes, the search rebuilds its
nodes (`burnqed.search.step`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from burnqed.errors import LeanError, LeanStatesLostError
from burnqed.lean import payloads
from burnqed.lean.commands import SCOPED_COMMANDS, PantographCommands
from burnqed.records.replies import CompileResult
from leankit.version import PantographVersion

log = logging.getLogger(__name__)

_STATE_COMMANDS = frozenset({"goal.tactic", "goal.print", "goal.delete"})


class PoolWorker(Protocol):
    """What the pool and its leases need from a worker (`LeanWorker`, `InProcessReplay`)."""

    version: PantographVersion | None
    starts: int  # successful starts
    respawns: int  # starts its own requests made after the process died
    requests: int  # requests answered by the current process

    @property
    def alive(self) -> bool: ...

    @property
    def repl_scope(self) -> str | None:
        """The header whose scope the REPL holds ("" empty, None unknown)."""
        ...

    @property
    def generation(self) -> int: ...

    @property
    def pid(self) -> int | None: ...

    @property
    def age_s(self) -> float: ...

    def rss_mb(self) -> float: ...

    async def protocol_version(self) -> PantographVersion: ...

    async def start(self) -> None: ...

    async def restart(self) -> None: ...

    async def close(self) -> None: ...

    async def request(
        self, command: str, payload: Mapping[str, Any], timeout_s: float | None = None, *,
        generation: int | None = None, scope: str | None = None,
    ) -> dict[str, Any]: ...

    async def compile(self, text: str, timeout_s: float | None = None) -> CompileResult: ...


def made_states(command: str, reply: Mapping[str, Any]) -> list[int]:
    """The state ids a reply created: `goal.start`'s `stateId`, `goal.tactic`'s `nextStateId`, each
    `frontend.distil` target's `stateId`, each `frontend.process` unit's `goalStateId` (sorrys)."""
    if command == "goal.start":
        found: list[Any] = [reply.get("stateId")]
    elif command == "goal.tactic":
        found = [reply.get("nextStateId")]
    elif command == "frontend.distil":
        found = [t.get("stateId") for t in reply.get("targets") or () if isinstance(t, Mapping)]
    elif command == "frontend.process":
        found = [u.get("goalStateId") for u in reply.get("units") or () if isinstance(u, Mapping)]
    else:
        found = []
    return [s for s in found if isinstance(s, int) and not isinstance(s, bool)]


class LeanLease(PantographCommands):
    """A `LeanEnv` bound to one shared worker; see the module docstring."""

    def __init__(self, worker: PoolWorker, owner: str | None = None, header: str | None = None,
                 verifier: Callable[[], Awaitable[PoolWorker]] | None = None) -> None:
        self.worker = worker
        self.owner = owner  # the theorem, for logs and the pool's load report
        self.header = payloads.header_text(header)
        self.verifier = verifier  # the pool's next verifier worker, if it keeps any
        self.version = worker.version
        self.requests = 0
        self._states: set[int] = set()
        self._states_generation: int | None = None  # the process the ids in _states belong to
        self._returned = False

    @property
    def generation(self) -> int:
        return self.worker.generation

    @property
    def states(self) -> int:
        """State ids this lease holds in the current process (what release will free)."""
        return len(self._states) if self._states_generation == self.worker.generation else 0

    async def protocol_version(self) -> PantographVersion:
        return await self.worker.protocol_version()

    async def request(
        self, command: str, payload: Mapping[str, Any], timeout_s: float | None = None, *, scope: str | None = None
    ) -> dict[str, Any]:
        if self._returned:
            raise RuntimeError(f"the Lean lease of {self.owner or 'a theorem'} was returned to the pool")
        if command == "reset":
            raise RuntimeError("a lease shares its worker: free states with delete(); the pool resets an empty worker")
        self.requests += 1
        # Scoped commands always name this theorem's header, never the worker's default.
        if scope is None and command in SCOPED_COMMANDS:
            scope = self.header
        if command in _STATE_COMMANDS:
            ids = payload["stateIds"] if command == "goal.delete" else [payload["stateId"]]
            generation = self._states_generation
            if generation is None or any(state_id not in self._states for state_id in ids):
                raise LeanStatesLostError(
                    f"`{command}` names state(s) {list(ids)} that this theorem does not hold in the worker's current "
                    "process (it was replaced): not sent"
                )
            reply = await self.worker.request(command, payload, timeout_s, generation=generation, scope=scope)
        else:
            reply = await self.worker.request(command, payload, timeout_s, scope=scope)
            # Read at once, with no await in between: this is the process that answered (a replacement needs
            # the worker's lock, which this task held until the reply).
            generation = self.worker.generation
        if command == "goal.delete":
            self._states.difference_update(ids)
        else:
            for made in made_states(command, reply):
                self._track(made, generation)
        return reply

    async def compile(self, text: str, timeout_s: float | None = None) -> CompileResult:
        """`frontend.process` of a proof on a verifier worker (module docstring), else on this lease's worker."""
        if self.verifier is None:
            return await super().compile(text, timeout_s)
        lane = await self.verifier()
        if self._returned:
            raise RuntimeError(f"the Lean lease of {self.owner or 'a theorem'} was returned to the pool")
        self.requests += 1
        return await lane.compile(text, timeout_s)

    def _track(self, state_id: int, generation: int) -> None:
        if generation != self._states_generation:
            self._states, self._states_generation = set(), generation
        self._states.add(state_id)

    async def free(self) -> int:
        """Return the lease: `goal.delete` every state it created in the live process (none when that process
        is gone: its states went with it). Returns how many were freed. Failures are logged, not raised: the
        pool resets or replaces the worker when it is empty anyway."""
        freed = 0
        if self._states and self._states_generation == self.worker.generation and self.worker.alive:
            ids = sorted(self._states)
            try:
                await self.worker.request("goal.delete", payloads.goal_delete(ids), generation=self._states_generation)
                freed = len(ids)
            except LeanStatesLostError:
                pass  # replaced meanwhile: the states are gone already
            except LeanError as exc:
                log.warning("freeing %d states of %s failed: %s", len(ids), self.owner or "a theorem", exc)
        self._states = set()
        self._returned = True
        return freed

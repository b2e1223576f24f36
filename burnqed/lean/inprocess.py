"""`InProcessReplay`: a Lean worker that answers through a server object inside this process, with simulated
latency and faults — no subprocess, no pipes. For benchmarks that study scheduling and for fast search tests.

    from minilean.replay.replay_server import ReplayServer         # the embedded Lean's replay server (a peer)

    pool = InProcessReplayPool(lambda: ReplayServer(load_corpus()), size=4, theorems_per_worker=4,
                               latency=lambda: 0.022)
    async with pool.lease("mathd_algebra_10") as lean: ...      # the same pool logic as LeanPool's
    env = InProcessReplay(ReplayServer(load_corpus()))           # or one worker used directly as a LeanEnv

The server is reached only through the protocol (`LineServer`: a request line in, a reply line out, `restart` for a
new process); only the pipe is skipped. Like a real worker it serves one request at a time, refuses states of a
replaced process, and `crash_on` makes a tactic containing that text crash it (`LeanCrashError`); so does a server
whose `handle` raises `LeanCrashError` (a double emulating a process that dies on a request).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Protocol, Self

from burnqed.errors import LeanCrashError, LeanStatesLostError
from burnqed.lean.commands import PantographCommands, ScopeTracker
from burnqed.lean.pool import LeanPool
from burnqed.lean.protocol import encode_request
from leankit.version import PantographVersion


class LineServer(Protocol):
    """A Pantograph REPL as an object: the version it speaks, the reply line to one request line, and a restart
    (a new process: no states, the empty scope). `minilean.replay.replay_server.ReplayServer` is one."""

    @property
    def version(self) -> PantographVersion: ...

    def handle(self, line: str) -> str: ...

    def restart(self) -> None: ...


class InProcessReplay(PantographCommands):
    """A Lean worker over a `LineServer` object. `latency()` returns seconds to wait per tactic."""

    def __init__(
        self,
        server: LineServer,
        latency: Callable[[], float] | None = None,
        crash_on: str | None = None,
    ) -> None:
        self.server = server
        self.version = server.version
        self.latency = latency
        self.crash_on = crash_on
        self.starts = 1
        self.respawns = 0  # starts a request made because the "process" had died
        self.requests = 0  # requests answered by the current "process"
        self.started_at = time.monotonic()
        self._alive = True
        self._lock = asyncio.Lock()
        self.scope = ScopeTracker()

    @property
    def repl_scope(self) -> str | None:
        """As `LeanWorker.repl_scope`: the header whose scope the server holds ("" once the "process" is gone)."""
        return self.scope.current if self._alive else ""

    # -- the worker lifecycle `LeanPool` drives ---------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._alive

    @property
    def generation(self) -> int:
        """As `LeanWorker.generation`: the current process while it runs, the next one once it is gone."""
        return self.starts if self._alive else self.starts + 1

    @property
    def pid(self) -> int | None:
        return None

    @property
    def age_s(self) -> float:
        return time.monotonic() - self.started_at if self._alive else 0.0

    def rss_mb(self) -> float:
        return 0.0  # no process of its own

    async def protocol_version(self) -> PantographVersion:
        return self.server.version

    async def start(self) -> None:
        if not self._alive:
            self._boot()

    async def restart(self) -> None:
        async with self._lock:
            self._boot()

    async def close(self) -> None:
        self._alive = False

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    def _boot(self) -> None:
        self.server.restart()  # a new "process": no states, empty scope
        self.scope = ScopeTracker()
        self.starts += 1
        self.requests = 0
        self.started_at = time.monotonic()
        self._alive = True

    # -- requests -----------------------------------------------------------------------------------------

    async def request(
        self, command: str, payload: Mapping[str, Any], timeout_s: float | None = None, *,
        generation: int | None = None, scope: str | None = None,
    ) -> dict[str, Any]:
        async with self._lock:
            if generation is not None and generation != self.generation:
                raise LeanStatesLostError(f"`{command}` names states of replaced worker generation {generation}")
            if not self._alive:
                self.respawns += 1
                self._boot()
            if command == "goal.tactic":
                if self.latency is not None:
                    await asyncio.sleep(self.latency())
                if self.crash_on is not None and self.crash_on in str(payload.get("tactic", "")):
                    self._alive = False  # every state is gone with the "process"
                    raise LeanCrashError("simulated worker crash")
            header = self.scope.needs(command, scope, self.header)
            if header is not None:
                load = self.scope.payload(self.server.version, header)
                self.scope.loaded(header, self._send("frontend.process", load))
            return self._send(command, payload)

    def _send(self, command: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        self.requests += 1
        try:
            line = self.server.handle(encode_request(command, payload).decode("utf-8"))
        except LeanCrashError:
            self._alive = False  # the server's "process" died on this request: every state is gone with it
            raise
        reply = json.loads(line)
        assert isinstance(reply, dict)
        return reply


class InProcessReplayPool(LeanPool):
    """`size` in-process replay workers behind `LeanPool`'s leases (`theorems_per_worker` theorems each).
    Starts on first use; `env_options` go to every `InProcessReplay` (latency, crash_on)."""

    def __init__(
        self,
        server: Callable[[], LineServer],
        size: int,
        *,
        theorems_per_worker: int = 1,
        **env_options: Any,
    ) -> None:
        super().__init__(
            lambda: InProcessReplay(server(), **env_options),
            size,
            theorems_per_worker=theorems_per_worker,
            recycle_requests=10**12,
            recycle_seconds=float("inf"),
        )

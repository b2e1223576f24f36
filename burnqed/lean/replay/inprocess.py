"""`InProcessReplay`: a `LeanEnv` that answers from the replay corpus inside this process, with simulated
latency and faults — no subprocess, no pipes. For benchmarks that study scheduling (how well the search
keeps Lean and the policy busy) and for fast search tests.

    env = InProcessReplay(ReplayServer(load_corpus()), latency=lambda: 0.022)

It inherits the subprocess client's command methods (`PantographCommands`): `encode_request` builds the
line the server parses, and replies go through the same parsing, so only the pipe is skipped. `crash_on`
makes tactics containing that text behave like a crashed worker: the result says `states_lost`, every
state is dropped and `generation` advances, like a respawned process.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from burnqed.lean.commands import PantographCommands
from burnqed.lean.protocol import encode_request
from burnqed.lean.replay.server import ReplayServer
from burnqed.records import TacticKind, TacticResult


class InProcessReplay(PantographCommands):
    """A `LeanEnv` over a `ReplayServer` object. `latency()` returns seconds to wait per tactic."""

    def __init__(
        self,
        server: ReplayServer,
        latency: Callable[[], float] | None = None,
        crash_on: str | None = None,
    ) -> None:
        self.server = server
        self.version = server.version
        self.latency = latency
        self.crash_on = crash_on
        self.generation = 1
        self.requests = 0

    async def request(self, command: str, payload: Mapping[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        self.requests += 1
        reply = json.loads(self.server.handle(encode_request(command, payload).decode("utf-8")))
        assert isinstance(reply, dict)
        return reply

    async def tactic(self, state_id: int, tactic: str, goal_id: int | None = None) -> TacticResult:
        started = time.perf_counter()
        if self.latency is not None:
            await asyncio.sleep(self.latency())
        if self.crash_on is not None and self.crash_on in tactic:
            self.server.reset({})
            self.generation += 1
            return TacticResult(TacticKind.CRASH, errors=("simulated worker crash",), states_lost=True)
        result = await super().tactic(state_id, tactic, goal_id)
        return dataclasses.replace(result, elapsed_ms=(time.perf_counter() - started) * 1000)


class InProcessReplayPool:
    """`size` in-process replay workers behind the `worker()` interface of `LeanPool`."""

    def __init__(self, corpus_server: Callable[[], ReplayServer], size: int, **env_options: Any) -> None:
        self.size = size
        self._idle: asyncio.Queue[InProcessReplay] = asyncio.Queue()
        for _ in range(size):
            self._idle.put_nowait(InProcessReplay(corpus_server(), **env_options))

    @contextlib.asynccontextmanager
    async def worker(self) -> AsyncIterator[InProcessReplay]:
        env = await self._idle.get()
        try:
            yield env
        finally:
            await env.reset()
            self._idle.put_nowait(env)

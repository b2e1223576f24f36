"""`InProcessReplay`: a `LeanEnv` that answers from the replay corpus inside this process, with simulated
latency and faults — no subprocess, no pipes. For benchmarks that study scheduling (how well the search
keeps Lean and the policy busy) and for fast search tests.

    env = InProcessReplay(ReplayServer(load_corpus()), latency=lambda: 0.022)

Requests go through the real wire code in both directions: `encode_request` builds the line the server
parses, and the reply goes through the same `parse_*` functions the subprocess client uses, so only the
pipe is skipped. `crash_on` makes tactics containing that text behave like a crashed worker: the result
says `states_lost`, every state is dropped and `generation` advances, like a respawned process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from burnqed.lean.protocol import (
    encode_request,
    parse_compile_reply,
    parse_print_reply,
    parse_start_reply,
    parse_tactic_reply,
    raise_for_error,
)
from burnqed.lean.replay.server import ReplayServer
from burnqed.records import CompileResult, Goal, RootInfo, TacticKind, TacticResult


class InProcessReplay:
    """A `LeanEnv` over a `ReplayServer` object. `latency()` returns seconds to wait per tactic."""

    def __init__(
        self,
        server: ReplayServer,
        latency: Callable[[], float] | None = None,
        crash_on: str | None = None,
    ) -> None:
        self.server = server
        self.latency = latency
        self.crash_on = crash_on
        self.generation = 1
        self.requests = 0

    def _call(self, command: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        self.requests += 1
        line = encode_request(command, payload).decode("utf-8")
        reply = json.loads(self.server.handle(line))
        assert isinstance(reply, dict)
        return reply

    async def start_goal(self, expr: str | None = None, copy_from: str | None = None) -> int:
        if (expr is None) == (copy_from is None):
            raise ValueError("give exactly one of expr and copy_from")
        payload = {"expr": expr} if expr is not None else {"copyFrom": copy_from}
        return parse_start_reply(self._call("goal.start", payload))

    async def tactic(self, state_id: int, tactic: str, goal_id: int | None = None) -> TacticResult:
        started = time.perf_counter()
        if self.latency is not None:
            await asyncio.sleep(self.latency())
        if self.crash_on is not None and self.crash_on in tactic:
            self.server.reset({})
            self.generation += 1
            return TacticResult(TacticKind.CRASH, errors=("simulated worker crash",), states_lost=True)
        payload: dict[str, Any] = {"stateId": state_id, "tactic": tactic}
        if goal_id is not None:
            payload["goalId"] = goal_id
        return parse_tactic_reply(self._call("goal.tactic", payload), (time.perf_counter() - started) * 1000)

    async def goals(self, state_id: int) -> tuple[Goal, ...]:
        return parse_print_reply(self._call("goal.print", {"stateId": state_id, "goals": True}))[1]

    async def root_info(self, state_id: int) -> RootInfo:
        return parse_print_reply(self._call("goal.print", {"stateId": state_id, "rootExpr": True}))[0]

    async def delete(self, state_ids: Sequence[int]) -> None:
        if state_ids:
            raise_for_error(self._call("goal.delete", {"stateIds": list(state_ids)}), "goal.delete")

    async def compile(self, text: str, timeout_s: float | None = None) -> CompileResult:
        payload = {"file": text, "invocations": False, "sorrys": False, "newConstants": False}
        return parse_compile_reply(self._call("frontend.process", payload))

    def reset(self) -> None:
        self.server.reset({})


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
            env.reset()
            self._idle.put_nowait(env)

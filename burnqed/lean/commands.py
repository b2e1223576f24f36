"""Pantograph's commands, one method each, over an abstract `request(command, payload)`.

`LeanWorker` (a real process over pipes) and `InProcessReplay` (the replay server inside this process)
both inherit them, so the payloads sent (`burnqed.lean.payloads`, per Pantograph version) and the way
replies are parsed exist once. Payloads depend on the Pantograph version: every command first asks
`protocol_version()` (a worker learns it from its configuration or its REPL's `--version`; a pool does that
once for all its workers).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from burnqed.errors import LeanCrashError, LeanStartError, LeanTimeoutError
from burnqed.lean import payloads
from burnqed.lean.protocol import (
    parse_compile_reply,
    parse_count_reply,
    parse_print_reply,
    parse_start_reply,
    parse_tactic_reply,
    raise_for_error,
)
from burnqed.lean.version import PantographVersion
from burnqed.records import CompileResult, Goal, RootInfo, TacticKind, TacticResult


class PantographCommands(ABC):
    """`goal.start`, `goal.tactic`, `goal.print`, `goal.delete`, `frontend.process`, `reset`, `stat`."""

    version: PantographVersion | None = None

    async def protocol_version(self) -> PantographVersion:
        """The Pantograph version requests are written for."""
        if self.version is None:
            raise LeanStartError("the Pantograph version of this Lean worker is unknown: set lean.pantograph_version")
        return self.version

    @abstractmethod
    async def request(self, command: str, payload: Mapping[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        """Send one command and return its reply object (raises LeanTimeoutError / LeanCrashError)."""

    async def start_goal(self, expr: str | None = None, copy_from: str | None = None) -> int:
        """`goal.start` by expression or by copying a theorem's type; returns the state id."""
        payload = payloads.goal_start(expr=expr, copy_from=copy_from)
        return parse_start_reply(await self.request("goal.start", payload))

    async def tactic(self, state_id: int, tactic: str, goal_id: int | None = None) -> TacticResult:
        """`goal.tactic`: every outcome, crash and watchdog timeout included, comes back as a value."""
        payload = payloads.goal_tactic(state_id, tactic, 0 if goal_id is None else goal_id)
        started = time.perf_counter()
        try:
            version = await self.protocol_version()
            reply = await self.request("goal.tactic", payload)
        except LeanTimeoutError as exc:
            return TacticResult(TacticKind.TIMEOUT, errors=(str(exc),), states_lost=True,
                                elapsed_ms=(time.perf_counter() - started) * 1000)
        except LeanCrashError as exc:
            return TacticResult(TacticKind.CRASH, errors=(str(exc),), states_lost=True,
                                elapsed_ms=(time.perf_counter() - started) * 1000)
        return parse_tactic_reply(reply, (time.perf_counter() - started) * 1000, version)

    async def goals(self, state_id: int) -> tuple[Goal, ...]:
        """The goals of a state (`goal.start` only returns the state id)."""
        version = await self.protocol_version()
        reply = await self.request("goal.print", payloads.goal_print(state_id, goals=True))
        _, goals = parse_print_reply(reply, version)
        return goals

    async def root_info(self, state_id: int) -> RootInfo:
        """What Lean says of the proof term assembled up to this state (sorry, unsafe, metavariables)."""
        version = await self.protocol_version()
        reply = await self.request("goal.print", payloads.goal_print(state_id, root_expr=True))
        info, _ = parse_print_reply(reply, version)
        return info

    async def delete(self, state_ids: Sequence[int]) -> None:
        """Free pruned states in Lean (unknown ids are not an error)."""
        if state_ids:
            raise_for_error(await self.request("goal.delete", payloads.goal_delete(state_ids)), "goal.delete")

    async def compile(self, text: str, timeout_s: float | None = None) -> CompileResult:
        """`frontend.process` of a whole file in the REPL's environment (so `text` must not contain `import`
        lines): the final soundness check of an assembled proof."""
        payload = payloads.frontend_process(await self.protocol_version(), text)
        return parse_compile_reply(await self.request("frontend.process", payload, timeout_s))

    async def reset(self) -> int:
        """Drop every state of this worker (between theorems); returns how many there were."""
        return parse_count_reply(await self.request("reset", payloads.empty()), "reset")

    async def stat(self) -> int:
        """Number of goal states this worker holds."""
        return parse_count_reply(await self.request("stat", payloads.empty()), "stat")

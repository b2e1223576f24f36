"""Pantograph's commands, one method each, over an abstract `request(command, payload)`.

`LeanWorker` (a real process over pipes) and `InProcessReplay` (the replay server inside this process)
both inherit them, so the payloads sent and the way replies are parsed exist once.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from burnqed.errors import LeanCrashError, LeanTimeoutError
from burnqed.lean.protocol import (
    parse_compile_reply,
    parse_count_reply,
    parse_print_reply,
    parse_start_reply,
    parse_tactic_reply,
    raise_for_error,
)
from burnqed.records import CompileResult, Goal, RootInfo, TacticKind, TacticResult


class PantographCommands(ABC):
    """`goal.start`, `goal.tactic`, `goal.print`, `goal.delete`, `frontend.process`, `reset`, `stat`."""

    @abstractmethod
    async def request(self, command: str, payload: Mapping[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        """Send one command and return its reply object (raises LeanTimeoutError / LeanCrashError)."""

    async def start_goal(self, expr: str | None = None, copy_from: str | None = None) -> int:
        """`goal.start` by expression or by copying a theorem's type; returns the state id."""
        if (expr is None) == (copy_from is None):
            raise ValueError("give exactly one of expr and copy_from")
        payload = {"expr": expr} if expr is not None else {"copyFrom": copy_from}
        return parse_start_reply(await self.request("goal.start", payload))

    async def tactic(self, state_id: int, tactic: str, goal_id: int | None = None) -> TacticResult:
        """`goal.tactic`: every outcome, crash and watchdog timeout included, comes back as a value."""
        payload: dict[str, Any] = {"stateId": state_id, "tactic": tactic}
        if goal_id is not None:
            payload["goalId"] = goal_id
        started = time.perf_counter()
        try:
            reply = await self.request("goal.tactic", payload)
        except LeanTimeoutError as exc:
            return TacticResult(TacticKind.TIMEOUT, errors=(str(exc),), states_lost=True,
                                elapsed_ms=(time.perf_counter() - started) * 1000)
        except LeanCrashError as exc:
            return TacticResult(TacticKind.CRASH, errors=(str(exc),), states_lost=True,
                                elapsed_ms=(time.perf_counter() - started) * 1000)
        return parse_tactic_reply(reply, (time.perf_counter() - started) * 1000)

    async def goals(self, state_id: int) -> tuple[Goal, ...]:
        """The goals of a state (`goal.start` only returns the state id)."""
        _, goals = parse_print_reply(await self.request("goal.print", {"stateId": state_id, "goals": True}))
        return goals

    async def root_info(self, state_id: int) -> RootInfo:
        """What Lean says of the proof term assembled up to this state (sorry, unsafe, metavariables)."""
        info, _ = parse_print_reply(await self.request("goal.print", {"stateId": state_id, "rootExpr": True}))
        return info

    async def delete(self, state_ids: Sequence[int]) -> None:
        """Free pruned states in Lean (unknown ids are not an error)."""
        if state_ids:
            raise_for_error(await self.request("goal.delete", {"stateIds": list(state_ids)}), "goal.delete")

    async def compile(self, text: str, timeout_s: float | None = None) -> CompileResult:
        """`frontend.process` of a whole file: the final soundness check of an assembled proof."""
        payload = {"file": text, "invocations": False, "sorrys": False, "newConstants": False}
        return parse_compile_reply(await self.request("frontend.process", payload, timeout_s))

    async def reset(self) -> int:
        """Drop every state of this worker (between theorems); returns how many there were."""
        return parse_count_reply(await self.request("reset", {}), "reset")

    async def stat(self) -> int:
        """Number of goal states this worker holds."""
        return parse_count_reply(await self.request("stat", {}), "stat")

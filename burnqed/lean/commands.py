"""Pantograph's commands, one method each, over an abstract `request(command, payload)` (docs/lean.md, "Theorems
as written").

    state = await worker.start_theorem(header, "theorem t (n : ℕ) : n + 0 = n")   # the binders are hypotheses
    result = await worker.tactic(state, "simp")                                 # run under the header's scope
    sketched = await worker.draft_sketch(state, sketch)     # a sketch's holes as subgoals (`goal.tactic {draft}`)

`LeanWorker` (a process over pipes) and `InProcessReplay` (a server inside this process) both inherit them, so the
payloads (`burnqed.lean.payloads`, per Pantograph version) and the parsing of replies exist once. Every scoped
request (`goal.start`, `goal.tactic`, `goal.print`) carries the header whose scope it needs, and the worker first
loads that header when its REPL holds another (`ScopeTracker`): a tactic never runs under another theorem's opens.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from burnqed.errors import LeanCrashError, LeanProtocolError, LeanStartError, LeanTimeoutError
from burnqed.lean import payloads
from burnqed.lean.protocol import (
    parse_compile_reply,
    parse_count_reply,
    parse_distil_reply,
    parse_distil_sketch,
    parse_draft_reply,
    parse_print_reply,
    parse_process_sketch,
    parse_sorry_start_reply,
    parse_start_reply,
    parse_tactic_reply,
    raise_for_error,
)
from burnqed.records.replies import CompileResult, Goal, RootInfo, SketchResult, TacticKind, TacticResult
from burnqed.text.sketch import Sketch
from leankit.version import PantographVersion

# The commands Pantograph runs in the REPL's scope (`runCoreM`/`liftTermElabM`/`liftMetaM` in Repl.lean).
# `frontend.process` and `frontend.distil` start their text from an empty scope and are not among them.
SCOPED_COMMANDS = frozenset({"goal.start", "goal.tactic", "goal.print"})


def unknown_command(reply: Mapping[str, Any]) -> bool:
    """Pantograph's answer to a command its version does not have (`Repl.lean`, `execute`)."""
    return reply.get("error") == "command" and str(reply.get("desc", "")).startswith("Unknown command")


class ScopeTracker:
    """Which scope one REPL process holds, and the request that changes it. A worker owns one and asks `needs`
    before each request under its lock. The scope is a header's scope commands (`payloads.scope_text`): headers
    that differ only in their declarations share it. `""` is the empty scope of a fresh process, None unknown (a
    load failed half-way: Pantograph sets the scope even when the text has errors)."""

    def __init__(self) -> None:
        self.current: str | None = ""

    def needs(self, command: str, scope: str | None, default: str) -> str | None:
        """The header to load before `command` (None: nothing to do). `scope` is the request's, else `default`
        applies to the scoped commands."""
        want = scope if scope is not None else (default if command in SCOPED_COMMANDS else None)
        if want is None or payloads.scope_text(want) == self.current:
            return None
        return want

    def payload(self, version: PantographVersion, header: str) -> Mapping[str, Any]:
        if not version.repl_scope:
            raise LeanProtocolError(
                "scope", f"Pantograph {version} keeps no REPL scope: the header's opens and options cannot hold "
                "for goal.tactic (0.3.0 added it); use Pantograph >= 0.3.0 or a theorem without them in its header",
                "frontend.process")
        self.current = None
        return payloads.scope_load(version, header)

    def loaded(self, header: str, reply: Mapping[str, Any]) -> None:
        """Record the header load's outcome; LeanProtocolError when Lean did not accept the header's scope
        commands, naming the header's declarations when it has any (a scope command may need one of them)."""
        result = parse_compile_reply(reply)
        errors = [m.text for unit in result.units for m in unit.messages if m.severity == "error"]
        if errors:
            declared = payloads.header_declarations(header)
            cause = "" if not declared else (
                " (the scope load carries the header's scope commands only; its declarations are elaborated with each "
                "start, in the start's own file, so a scope command cannot use them, e.g. `open` a namespace only "
                f"they create; the header declares: {'; '.join(' '.join(d.split())[:60] for d in declared)})")
            raise LeanProtocolError("header", f"the theorem's header does not elaborate: {errors[0][:300]}{cause}",
                                    "frontend.process")
        self.current = payloads.scope_text(header)


class PantographCommands(ABC):
    """`goal.start`, `goal.tactic`, `goal.print`, `goal.delete`, `frontend.process`, `frontend.distil`, `reset`,
    `stat`, and `start_theorem` over them."""

    version: PantographVersion | None = None
    # The header (import lines removed) whose scope this object's scoped requests run in: its theorem's.
    header: str = ""
    # A "0.3.6" build without `frontend.distil` answers "Unknown command": then sorrys are read from
    # `frontend.process` (set by the first start that finds out).
    distil_missing: bool = False

    async def protocol_version(self) -> PantographVersion:
        """The Pantograph version requests are written for."""
        if self.version is None:
            raise LeanStartError("the Pantograph version of this Lean worker is unknown: set lean.pantograph_version")
        return self.version

    @abstractmethod
    async def request(
        self, command: str, payload: Mapping[str, Any], timeout_s: float | None = None, *, scope: str | None = None
    ) -> dict[str, Any]:
        """Send one command and return its reply object (raises LeanTimeoutError / LeanCrashError). The REPL
        first holds `scope`'s header (for the scoped commands, `header` when `scope` is None)."""

    async def start_theorem(self, header: str | None, declaration: str) -> int:
        """Start a theorem as a Lean user's file states it: `header` (its opens, options and definitions; `import`
        lines are dropped) and `declaration` (`theorem NAME <binders> : T`, without `:= by sorry`). Returns the
        state whose one goal is the theorem's, its binders hypotheses in context; every later `goal.tactic`/
        `goal.print` through this object runs under the header's scope.

        The sorry becomes a goal through `frontend.distil` (from 0.3.6, `ignoreValues: false`), else through
        `frontend.process {sorrys: true}` (up to 0.3.6), in a file that restates the whole header: the header's
        definitions are elaborated there, in that file's environment, which the goal state carries, and never
        enter the REPL's environment. The REPL's scope (the header's scope commands only, `payloads.scope_text`)
        is loaded with the first scoped request after the start (`request`'s `scope`). LeanProtocolError when
        Lean does not elaborate the declaration or the header, when the header leaves a definition `sorry` that
        becomes a goal of its own (an answer slot to fill first), or when the version keeps no REPL scope
        (0.2.25) and the header has scope commands."""
        version = await self.protocol_version()
        self.header = payloads.header_text(header)
        text = payloads.theorem_file(header, declaration)
        # frontend.distil/process read no REPL scope: the scope is loaded after them, so a scope command that
        # needs a header declaration fails the start as Lean answers it, whatever the order a double learns in.
        if version.distil and not self.distil_missing:
            reply = await self.request("frontend.distil", payloads.frontend_distil(text))
            if not (unknown_command(reply) and version.process_sorrys):
                return parse_distil_reply(reply)
            self.distil_missing = True  # a "0.3.6" build from before frontend.distil
        if not version.process_sorrys:
            raise LeanProtocolError("command", f"Pantograph {version} has no frontend.distil", "frontend.distil")
        payload = payloads.frontend_process(version, text, sorrys=True, new_constants=False)
        return parse_sorry_start_reply(await self.request("frontend.process", payload), text)

    async def start_goal(self, expr: str | None = None, copy_from: str | None = None) -> int:
        """`goal.start` by expression or by copying a theorem's type; returns the state id."""
        payload = payloads.goal_start(expr=expr, copy_from=copy_from)
        return parse_start_reply(await self.request("goal.start", payload))

    async def tactic(self, state_id: int, tactic: str, goal_id: int | None = None) -> TacticResult:
        """`goal.tactic`: every outcome, crash and watchdog timeout included, comes back as a value."""
        return await self._tactic_request(payloads.goal_tactic(state_id, tactic, 0 if goal_id is None else goal_id))

    async def _tactic_request(self, payload: Mapping[str, Any]) -> TacticResult:
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

    async def draft_sketch(self, state_id: int, sketch: Sketch, goal_id: int = 0) -> SketchResult:
        """Elaborate `sketch` against goal `goal_id` of a state (a theorem's start: one goal) with `goal.tactic
        {draft}`, in the REPL's scope like a tactic: one subgoal per hole, each with its context (the binders and
        the holes before it), all in the one new state; or Lean's messages when the sketch does not elaborate (its
        closing tactics fail with the holes in scope, a statement that does not typecheck, a parse error). Check
        the sketch with `TacticGuard.check_sketch` first: this sends it as it is. Every outcome is a value."""
        payload = payloads.goal_draft(state_id, sketch.draft_term(), goal_id)
        return parse_draft_reply(await self._tactic_request(payload), sketch.holes)

    async def file_sketch(self, header: str | None, declaration: str, sketch: Sketch) -> SketchResult:
        """Elaborate `sketch` as the proof of `declaration` in its own file under `header`, as the assembled proof's
        compile will (`frontend.distil {ignoreValues: false}` from 0.3.6, `frontend.process {sorrys: true}` up to
        0.3.6, as `start_theorem` picks): the same subgoals as `draft_sketch`, read from Lean's whole-file
        elaboration; later scoped requests through this object run under the header's scope. Every outcome of the
        sketch is a value; a version with neither route raises LeanProtocolError."""
        version = await self.protocol_version()
        self.header = payloads.header_text(header)
        text = payloads.sketch_file(header, declaration, sketch.proof_body())
        started = time.perf_counter()
        try:
            if version.distil and not self.distil_missing:
                reply = await self.request("frontend.distil", payloads.frontend_distil(text))
                if not (unknown_command(reply) and version.process_sorrys):
                    return parse_distil_sketch(reply, sketch.holes, (time.perf_counter() - started) * 1000)
                self.distil_missing = True  # a "0.3.6" build from before frontend.distil
            if not version.process_sorrys:
                raise LeanProtocolError("command", f"Pantograph {version} has no frontend.distil", "frontend.distil")
            payload = payloads.frontend_process(version, text, sorrys=True, new_constants=False)
            reply = await self.request("frontend.process", payload)
        except (LeanTimeoutError, LeanCrashError) as exc:
            kind = TacticKind.TIMEOUT if isinstance(exc, LeanTimeoutError) else TacticKind.CRASH
            return SketchResult(kind, "", errors=(str(exc),), states_lost=True,
                                elapsed_ms=(time.perf_counter() - started) * 1000)
        return parse_process_sketch(reply, sketch.holes, (time.perf_counter() - started) * 1000)

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

"""One Lean worker: a Pantograph `repl` process (or anything speaking its protocol) and its lifecycle.

    async with LeanWorker.from_config(cfg.lean) as worker:
        state = await worker.start_goal(expr="∀ (n : ℕ), n + 0 = n")
        result = await worker.tactic(state, "intro n")

The process runs in its own session with a sealed environment (`burnqed.base.sandbox`) and dies with burnqed. It
must print `ready.` within `ready_timeout_s` (else `LeanStartError`); every request runs under a client watchdog
above Lean's own timeout, and a watchdog kill, a crash, EOF or non-JSON output end the process (the next request
starts it again). `generation` names the process whose state ids are valid: a request naming states of another one
raises `LeanStatesLostError` and sends nothing. The lifecycle in full: docs/lean.md, "One worker".
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import resource
import secrets
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

from burnqed.base.sandbox import LeanIdentity, lean_identity, sealed_environment, spawn_options
from burnqed.base.signals import dies_with_parent
from burnqed.config import LeanConfig
from burnqed.errors import (
    LeanCrashError,
    LeanError,
    LeanStartError,
    LeanStatesLostError,
    LeanTimeoutError,
    from_leankit,
)
from burnqed.lean import payloads
from burnqed.lean.commands import PantographCommands, ScopeTracker
from burnqed.lean.protocol import encode_request, raise_for_error
from leankit.failures import LeankitFailure
from leankit.version import PantographVersion, detect_version

log = logging.getLogger(__name__)

READY_LINE = b"ready."
MAX_REPLY_BYTES = 512 * 1024 * 1024  # a reply line may be far over 1 MB (huge goals); beyond this it is garbage
STDERR_TAIL_LINES = 40
VERSION_TIMEOUT_S = 60.0  # least time the `--version` probe gets (a `lake env` wrapper may resolve a workspace)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "is still running"
    if code < 0:
        return f"was killed by signal {-code} (exit {128 - code})"
    return f"exited with code {code}"


# What a process writes when an allocation fails: Lean's runtime (`lean_internal_panic_out_of_memory`: "INTERNAL
# PANIC: out of memory"), C++'s `std::bad_alloc`, the C library's ENOMEM.
OUT_OF_MEMORY = ("out of memory", "bad_alloc", "Cannot allocate memory")


def child_setup(memory_limit_mb: int) -> Callable[[], None] | None:
    """The worker's `preexec_fn`: it dies with this process (`dies_with_parent`) and, given a limit, may hold no more
    than `memory_limit_mb` MiB of private writable memory (RLIMIT_DATA: its heap, anonymous maps, thread stacks), so
    code Lean runs while elaborating (a tactic configuration, `decide`'s evaluation) fails alone instead of taking the
    machine. Not RLIMIT_AS: the `.olean` files Lean maps read-only (gigabytes for Mathlib) fill the address space but
    are page cache, not memory the process holds."""
    dying = dies_with_parent()
    if not memory_limit_mb:
        return dying
    limit = memory_limit_mb * 2**20

    def setup() -> None:
        if dying is not None:
            dying()
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))

    return setup


# The requests that elaborate a whole file, code in it included: a fence (`LeanWorker._fence`) follows each.
FENCED = frozenset({"frontend.process", "frontend.distil"})


class LeanWorker(PantographCommands):
    """A single Lean process speaking the Pantograph protocol: one request at a time on its pipe (callers queue
    on a FIFO lock, so the theorems sharing it are served in turn)."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        ready_timeout_s: float = 120.0,
        tactic_timeout_s: float = 25.0,
        watchdog_grace_s: float = 5.0,
        automatic_mode: bool = True,
        max_reply_bytes: int = MAX_REPLY_BYTES,
        version: PantographVersion | None = None,
        run_as: LeanIdentity | None = None,
        memory_limit_mb: int = 0,
    ) -> None:
        if not argv:
            raise LeanStartError("lean.command is empty: give the argv of the Lean REPL, e.g. ['repl', 'Mathlib']")
        self.argv = list(argv)
        self.cwd = cwd
        self.env = dict(env or {})
        self.version = version  # None: detected before the first start
        self.run_as = run_as  # the user Lean runs as (burnqed.base.sandbox); None = this process's
        self.memory_limit_mb = memory_limit_mb  # lean.worker_memory_limit_mb: the process's RLIMIT_DATA (0 = none)
        self.ready_timeout_s = ready_timeout_s
        self.tactic_timeout_s = tactic_timeout_s
        self.watchdog_s = tactic_timeout_s + watchdog_grace_s
        self.automatic_mode = automatic_mode
        self.max_reply_bytes = max_reply_bytes
        self.starts = 0  # successful starts; the process of generation g is the g-th start
        self.respawns = 0  # starts a request made because the process had died (crash, watchdog kill)
        self._serving = False  # the current process finished starting (between `ready.` and options.set it has not)
        self.requests = 0  # requests answered by the current process
        self.started_at = 0.0
        self.preamble: list[str] = []  # stdout lines seen before `ready.`
        self._proc: asyncio.subprocess.Process | None = None
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._stderr_task: asyncio.Task[None] | None = None
        self._reaping: set[asyncio.Task[None]] = set()  # processes killed on cancellation, not yet reaped
        self._lock = asyncio.Lock()
        self._version_lock = asyncio.Lock()
        self.scope = ScopeTracker()  # the header whose scope the current process holds

    @property
    def repl_scope(self) -> str | None:
        """The header (import lines removed) whose scope the REPL holds now: "" empty, None unknown."""
        return self.scope.current

    @classmethod
    def from_config(cls, config: LeanConfig) -> LeanWorker:
        return cls(
            config.argv(),
            cwd=config.cwd,
            env=config.env,
            ready_timeout_s=config.ready_timeout_s,
            tactic_timeout_s=config.tactic_timeout_s,
            watchdog_grace_s=config.watchdog_grace_s,
            automatic_mode=config.automatic_mode,
            version=PantographVersion.parse(config.pantograph_version) if config.pantograph_version else None,
            run_as=lean_identity(config.run_as_uid),
            memory_limit_mb=config.worker_memory_limit_mb,
        )

    def process_environment(self) -> dict[str, str]:
        """The sealed environment the Lean process (and the version probe) runs with."""
        return sealed_environment(os.environ, self.env)

    async def protocol_version(self) -> PantographVersion:
        """The Pantograph version: given, or asked once from the command (`--version`) and kept across restarts."""
        if self.version is None:
            async with self._version_lock:
                if self.version is None:
                    try:
                        self.version = await detect_version(
                            self.argv, cwd=self.cwd, env=self.process_environment(),
                            timeout_s=max(self.ready_timeout_s, VERSION_TIMEOUT_S),
                            spawn=spawn_options(self.run_as, os.environ),
                        )
                    except LeankitFailure as exc:  # a LeanStartError, which the pool does not retry in a loop
                        raise from_leankit(exc) from None
        return self.version

    # ----------------------------------------------------------------------------------------------
    # lifecycle

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    @property
    def generation(self) -> int:
        """The process whose state ids are valid: the current one while it runs; once it is gone, the next one
        (so the states of the dead process are seen as lost at once, not only after the respawn)."""
        return self.starts if self._serving and self.alive else self.starts + 1

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def age_s(self) -> float:
        return time.monotonic() - self.started_at if self.alive else 0.0

    def stderr_tail(self) -> str:
        return "\n".join(self._stderr_tail)

    def rss_mb(self) -> float:
        """Resident memory of the worker's process tree in MiB (0 when it is not running)."""
        if not self.alive or self._proc is None:
            return 0.0
        import psutil

        try:
            root = psutil.Process(self._proc.pid)
            procs = [root, *root.children(recursive=True)]
            total = 0
            for proc in procs:
                with contextlib.suppress(psutil.Error):
                    total += proc.memory_info().rss
            return total / (1024 * 1024)
        except psutil.Error:
            return 0.0

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Spawn the process and wait for `ready.`; then set Lean-side timeout and automatic mode."""
        if self.alive:
            return
        await self._kill()
        version = await self.protocol_version()
        env = self.process_environment()
        self._stderr_tail.clear()
        self.preamble = []
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.cwd,
                env=env,
                start_new_session=True,
                # A SIGKILLed search runs none of its cleanup: the kernel ends the worker with it (its own session
                # keeps it out of the terminal's signals, so nothing else would); its memory is bounded.
                preexec_fn=child_setup(self.memory_limit_mb),
                limit=self.max_reply_bytes,
                **spawn_options(self.run_as, os.environ),
            )
        except OSError as exc:
            raise LeanStartError(
                f"cannot start Lean worker {self.argv!r}: {exc}. Check lean.command and lean.cwd."
            ) from None
        self._proc = proc
        self.scope = ScopeTracker()  # a fresh process: the empty scope
        self._stderr_task = asyncio.create_task(self._drain_stderr(proc))
        try:
            await self._await_ready(proc)
            self.requests = 0
            self.started_at = time.monotonic()
            options = payloads.options_set(
                version, timeout_ms=round(self.tactic_timeout_s * 1000), automatic_mode=self.automatic_mode
            )
            reply = await self._roundtrip("options.set", options, self.ready_timeout_s)
            raise_for_error(reply, "options.set")
            self.starts += 1
            self._serving = True
        except LeanError as exc:
            await self._kill()
            if isinstance(exc, LeanStartError):
                raise
            raise LeanStartError(f"Lean worker {self.argv!r} failed right after start: {exc}") from None
        except asyncio.CancelledError:
            self._abandon()  # a half-started process must not look alive to the next request
            raise
        log.debug("lean worker pid %s ready (generation %d)", proc.pid, self.starts)

    async def _await_ready(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            remaining = deadline - time.monotonic()
            try:
                async with asyncio.timeout(max(remaining, 0.0)):
                    line = await proc.stdout.readline()
            except TimeoutError:
                raise LeanStartError(
                    f"Lean worker {self.argv!r} printed no `ready.` within lean.ready_timeout_s="
                    f"{self.ready_timeout_s:g}s (Mathlib import takes 60-90 s; raise the timeout if the "
                    f"machine is slow).{self._stderr_hint()}"
                ) from None
            except (ValueError, asyncio.LimitOverrunError):
                raise LeanStartError(f"Lean worker {self.argv!r} wrote an endless line before `ready.`") from None
            if not line:
                code = await self._wait_exit(proc, 2.0)
                await self._stderr_read(1.0)  # its last words explain the exit: read them before quoting them
                raise LeanStartError(
                    f"Lean worker {self.argv!r} {_describe_exit(code)} before printing `ready.`: "
                    f"check lean.command, lean.cwd and LEAN_PATH (a configuration problem; not retried)."
                    f"{self._stderr_hint()}"
                )
            if line.rstrip(b"\r\n") == READY_LINE:
                return
            self.preamble.append(line.decode("utf-8", errors="replace").rstrip("\n"))

    def _stderr_hint(self) -> str:
        tail = self.stderr_tail()
        return f" stderr: {tail[-2000:]}" if tail else ""

    async def _drain_stderr(self, proc: asyncio.subprocess.Process) -> None:
        # An undrained stderr pipe fills (64 KiB) and blocks the Lean process forever.
        assert proc.stderr is not None
        with contextlib.suppress(Exception):
            while True:
                chunk = await proc.stderr.read(65536)
                if not chunk:
                    return
                for line in chunk.decode("utf-8", errors="replace").splitlines():
                    if line.strip():
                        self._stderr_tail.append(line[:2000])

    async def _stderr_read(self, timeout: float) -> None:
        """Wait until the stderr drain has read everything (the pipe closed), at most `timeout` seconds (a child the
        process left behind may hold the pipe open). An exited process's stderr may still sit in the pipe when its
        stdout ends; the start error that quotes it must not race the drain (a crash's error is built after `_kill`,
        whose reaping waits for the drain the same way)."""
        if self._stderr_task is not None:
            await asyncio.wait({self._stderr_task}, timeout=timeout)

    async def _wait_exit(self, proc: asyncio.subprocess.Process, timeout: float) -> int | None:
        try:
            async with asyncio.timeout(timeout):
                return await proc.wait()
        except TimeoutError:
            return proc.returncode

    def _kill_now(self) -> tuple[asyncio.subprocess.Process, asyncio.Task[None] | None] | None:
        """SIGKILL the whole process group; detach the process and its stderr drain (no waiting)."""
        proc, self._proc = self._proc, None
        drain, self._stderr_task = self._stderr_task, None
        self._serving = False
        self.scope = ScopeTracker()  # the scope went with the process
        if proc is None:
            return None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.stdin is not None:
            proc.stdin.close()
        return proc, drain

    def _abandon(self) -> None:
        """Kill now and reap in the background: for cancellation, where awaiting is not allowed.
        `_kill` (hence `close` and the next `start`) waits for these reapers."""
        killed = self._kill_now()
        if killed is not None:
            task = asyncio.get_running_loop().create_task(self._reap(*killed))
            self._reaping.add(task)
            task.add_done_callback(self._reaping.discard)

    async def _kill(self) -> None:
        """Kill the whole process group and reap it, and any killed earlier on cancellation. Idempotent."""
        killed = self._kill_now()
        if killed is not None:
            await self._reap(*killed)
        if self._reaping:
            await asyncio.gather(*self._reaping, return_exceptions=True)

    async def _reap(self, proc: asyncio.subprocess.Process, drain: asyncio.Task[None] | None) -> None:
        with contextlib.suppress(ProcessLookupError):
            await proc.wait()
        if drain is not None:
            try:
                async with asyncio.timeout(1.0):
                    await drain
            except TimeoutError:
                drain.cancel()

    async def close(self) -> None:
        """Stop the worker (kills its process group). Safe to call twice."""
        async with self._lock:
            await self._kill()

    async def restart(self) -> None:
        """Replace the process with a fresh one (recycling). All state ids become invalid."""
        async with self._lock:
            await self._kill()
            await self.start()

    # ----------------------------------------------------------------------------------------------
    # requests

    async def request(
        self, command: str, payload: Mapping[str, Any], timeout_s: float | None = None, *,
        generation: int | None = None, scope: str | None = None,
    ) -> dict[str, Any]:
        """Send one command and return its reply object. Raises LeanTimeoutError / LeanCrashError
        (the process is killed then; the next request respawns it) or LeanStartError. With `generation` (the
        request names states made by that process) it is sent only to that process: once it has been replaced,
        `LeanStatesLostError` is raised and nothing is sent or started. Under the same lock, the REPL is first
        given `scope`'s header when it holds another (`ScopeTracker`; for the scoped commands `scope` defaults
        to `header`); LeanProtocolError if Lean refuses the header."""
        async with self._lock:
            if generation is not None and generation != self.generation:
                raise LeanStatesLostError(
                    f"`{command}` names states of Lean process generation {generation}, which was replaced "
                    f"(now {self.generation}): not sent"
                )
            if not self.alive:
                if self.starts:
                    self.respawns += 1
                await self.start()
            wait_s = timeout_s if timeout_s is not None else self.watchdog_s
            header = self.scope.needs(command, scope, self.header)
            if header is not None:
                load = self.scope.payload(await self.protocol_version(), header)
                self.scope.loaded(header, await self._roundtrip("frontend.process", load, self.watchdog_s))
            return await self._roundtrip(command, payload, wait_s)

    async def _roundtrip(self, command: str, payload: Mapping[str, Any], timeout_s: float) -> dict[str, Any]:
        """`command`'s reply, the next line Lean writes; after a request that elaborates a file, fenced (`_fence`)."""
        reply = await self._exchange(command, payload, timeout_s)
        if command in FENCED:
            await self._fence(command, timeout_s)
        self.requests += 1
        return reply

    async def _fence(self, command: str, timeout_s: float) -> None:
        """Code in an elaborated file (an `#eval` writing to the process's stdout) could print a line that reads as
        the file's reply, a compile that counts. So the next request echoes a number drawn now, which no code in the
        file can know: its answer must be the next line. A line printed before the reply leaves the reply itself
        there instead: the worker is killed and LeanCrashError raised (a failed verdict, docs/lean.md, "Soundness")."""
        nonce = str(secrets.randbelow(9 * 10**17) + 10**17)
        echo = await self._exchange("expr.echo", payloads.expr_echo(f"({nonce} : Nat)"), timeout_s)
        if nonce not in json.dumps(echo.get("expr")):
            await self._kill()
            raise LeanCrashError(
                f"the line after Lean's reply to `{command}` is not the echo of the number sent after it: Lean wrote "
                f"a line that was no reply before its reply (code in the file printing?); worker killed")

    async def _exchange(self, command: str, payload: Mapping[str, Any], timeout_s: float) -> dict[str, Any]:
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        data = encode_request(command, payload)
        try:
            async with asyncio.timeout(timeout_s):
                proc.stdin.write(data)
                await proc.stdin.drain()
                line = await proc.stdout.readline()
        except TimeoutError:
            await self._kill()
            raise LeanTimeoutError(
                f"Lean did not answer `{command}` within {timeout_s:g}s; worker killed (it will be respawned)"
            ) from None
        except (BrokenPipeError, ConnectionResetError):
            line = b""
        except asyncio.CancelledError:
            # The caller gave up (e.g. a per-theorem deadline): the reply would still arrive and answer
            # the next request, so this process must go. Kill now; reap in the background (close() waits).
            self._abandon()
            raise
        except (ValueError, asyncio.LimitOverrunError):
            await self._kill()
            raise LeanCrashError(
                f"Lean's reply to `{command}` exceeded {self.max_reply_bytes} bytes without a newline; worker killed"
            ) from None
        if not line.endswith(b"\n"):
            code = await self._wait_exit(proc, 0.5)
            await self._kill()
            partial = f" after a partial line of {len(line)} bytes" if line else ""
            if self.memory_limit_mb and any(mark in self.stderr_tail() for mark in OUT_OF_MEMORY):
                raise LeanCrashError(
                    f"Lean worker ran out of memory while answering `{command}`: it may hold "
                    f"lean.worker_memory_limit_mb={self.memory_limit_mb} MiB, and what it elaborated (code Lean ran, a "
                    f"tactic configuration, a huge term) allocated past that; worker replaced.{self._stderr_hint()}"
                )
            raise LeanCrashError(
                f"Lean worker {_describe_exit(code)} while answering `{command}`{partial}.{self._stderr_hint()}"
            )
        try:
            reply = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            await self._kill()
            raise LeanCrashError(
                f"Lean answered `{command}` with a line that is not JSON: {line[:200]!r}; worker killed"
            ) from None
        if not isinstance(reply, dict):
            await self._kill()
            raise LeanCrashError(f"Lean answered `{command}` with JSON that is not an object: {line[:200]!r}")
        return reply

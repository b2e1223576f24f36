"""SIGTERM and SIGINT end a command cleanly: children stopped and reaped, what finished kept, one line, 143 / 130.

    with stop_on_signals("burnqed search to runs/x", kept="finished theorems were committed",
                         continue_with=same_command(add=["--resume"])):
        result = run_async(main())   # a stop cancels this main task: every `async with` closes its processes
    stop_process_group(proc)         # a child started with process_group=0: SIGTERM, a grace, SIGKILL, reaped

In synchronous code a stop raises `Terminated` (a `KeyboardInterrupt`, so Ctrl-C's clean-up runs on SIGTERM too),
as it does in an event loop that does not take the cancellation within ESCALATE_S. The block turns the stop into one
`StoppedError` (what stopped, what was kept, the command that continues it): one line, exit 128 + the signal. A
second signal is ignored. What each command keeps: docs/pipeline.md, "Signals".
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from types import FrameType
from typing import Protocol, TypeVar

from burnqed.errors import StoppedError

T = TypeVar("T")
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# Set (to the parent's pid) in the environment of a child whose parent reports its stop (the local runner's
# stages): the child exits 128 + N without a line of its own, so a stopped `iterate` prints one line, not one per
# process; and it gets SIGTERM when the parent dies (`follow_parent`), even by SIGKILL.
SUPERVISED_ENV = "BURNQED_SUPERVISED"
# The program name the commands a stage names for the user start with (`program_name`): its parent `iterate`'s.
PROGRAM_ENV = "BURNQED_PROGRAM"
ESCALATE_S = 1.0  # how long a running event loop has to take our cancellation before `Terminated` is raised
STOP_GRACE_S = 6.0  # a child's time to save and exit after SIGTERM before SIGKILL (search flushes in < 1 s)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGINT arrived while synchronous code ran (raised by the handler of `stop_on_signals`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def raise_on_sigterm() -> None:
    """From the start of the process, SIGTERM raises `Terminated` as Ctrl-C raises KeyboardInterrupt, so a command
    stopped before (or outside) its `stop_on_signals` block unwinds (nothing half-written is published) and exits
    143 with one line (`burnqed.commands.kit.reports_errors`) instead of dying silently. Main thread only."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        del frame
        signal.signal(signum, signal.SIG_IGN)  # once: the unwinding is not interrupted again
        raise Terminated(signum)

    signal.signal(signal.SIGTERM, handler)


_SUPERVISED = threading.Event()  # set: this process is a stage of the local runner (`follow_parent` saw it)


def supervised() -> bool:
    """True in a stage of the local runner, whose stop the runner reports: the stage exits 128 + N silently."""
    return _SUPERVISED.is_set() or bool(os.environ.get(SUPERVISED_ENV))


def follow_parent(environ: dict[str, str] | None = None) -> None:
    """In a child of the local runner (SUPERVISED_ENV holds its pid): ask Linux for SIGTERM when the parent dies
    (prctl PR_SET_PDEATHSIG), so a stage does not run on after a SIGKILLed `iterate` beside the next one; when the
    parent is gone already, stop now. Elsewhere (not Linux, no such variable) nothing happens."""
    env = os.environ if environ is None else environ
    parent = env.get(SUPERVISED_ENV, "")
    if environ is None:
        os.environ.pop(SUPERVISED_ENV, None)  # ours, not our children's (their parent is not the runner)
    if not parent.isdigit():
        return
    _SUPERVISED.set()
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != int(parent):  # it died before we asked
        raise Terminated(signal.SIGTERM)


def dies_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` for a child that must not outlive this process even when this process is SIGKILLed (which runs
    none of our cleanup): Linux sends the child SIGKILL when the thread that started it exits (prctl
    PR_SET_PDEATHSIG), and a child whose parent died before the call kills itself. SIGKILL, not SIGTERM: it also ends
    a child that is stopped (SIGSTOP) or never reads its input (a Lean worker importing Mathlib, or stuck in a
    tactic), which would otherwise run on, orphaned, beside the resumed run. Call it in the thread that starts the
    child (the event loop's, for asyncio subprocesses). None where there is no such call (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the child only calls it
    except (OSError, AttributeError):
        return None
    parent = os.getpid()
    pr_set_pdeathsig = 1

    def preexec() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # the parent died between fork and prctl: nobody would send the signal
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


def _as_typed(path: str) -> str:
    """A program's path as the user can type it again here: its bare name when the shell finds this very file on
    PATH, else the path relative to the working folder when it lies under it (`./x` for a file in it), else as
    given."""
    if os.sep not in path:
        return path
    name = os.path.basename(path)
    found = shutil.which(name)
    with contextlib.suppress(OSError):
        if found is not None and os.path.samefile(found, path):
            return name
    relative = os.path.relpath(path)
    if relative.startswith(os.pardir):
        return path
    return relative if os.sep in relative else f".{os.sep}{relative}"


def program_name() -> str:
    """The program as the user invoked it, as a shell reads it back: `.venv/bin/burnqed` when so run, `burnqed` when
    the shell finds it on PATH, `python -m burnqed` (the interpreter as typed) when run as a module. A stage of
    `burnqed iterate` names its parent's (`PROGRAM_ENV`, set by the local runner)."""
    given = os.environ.get(PROGRAM_ENV)
    if given:
        return given
    first = sys.argv[0] if sys.argv else ""
    if not first or first in ("-c", "-"):  # `python -c …` (pytest-xdist's workers) or a script on stdin: no program
        return "burnqed"
    if not first.endswith(".py"):
        return shlex.quote(_as_typed(first))
    original = list(getattr(sys, "orig_argv", []))  # `python -m burnqed`: its module file is argv[0]
    module = original[original.index("-m", 1) + 1] if "-m" in original[1:-1] else None
    return shlex.join([_as_typed(original[0]), "-m", module]) if module in ("burnqed", "burnqed.cli") else "burnqed"


def command_text(argv: Sequence[str]) -> str:
    """`PROGRAM ARGV` as a shell reads it back (each argument quoted where it needs it; `program_name`): how a command
    line that burnqed names for the user is written, so that it runs as printed."""
    return f"{program_name()} {shlex.join(argv)}" if argv else program_name()


def same_command(add: Sequence[str] = (), drop: Sequence[str] = ()) -> str:
    """This process's command line as the user would type it again (`PROGRAM ARGS`: `program_name`), with the flags
    in `add` that it lacks appended (e.g. `--resume`) and those in `drop` left out (`--force`: continuing must not
    start over)."""
    argv = [arg for arg in sys.argv[1:] if arg not in drop]
    argv += [flag for flag in add if flag not in argv]
    return command_text(argv)


_MAIN_TASKS: list[asyncio.Task[object]] = []  # the tasks `run_async` runs, which a stop cancels


def run_async(main: Coroutine[object, object, T]) -> T:
    """`asyncio.run(main)`, with `main` as the task a stop cancels (as asyncio.run does on its own for Ctrl-C
    only). Cancelling every task instead would cancel asyncio's own (a subprocess transport's pipe connection),
    and a Lean worker being spawned would then wait forever for its exit."""

    async def registered() -> T:
        task = asyncio.current_task()
        assert task is not None
        _MAIN_TASKS.append(task)
        try:
            return await main
        finally:
            _MAIN_TASKS.remove(task)

    return asyncio.run(registered())


def _cancel_main(loop: asyncio.AbstractEventLoop) -> bool:
    """Cancel the `run_async` tasks of `loop`; False when there are none."""
    tasks = [task for task in _MAIN_TASKS if task.get_loop() is loop and not task.done()]
    for task in tasks:
        task.cancel()
    return bool(tasks)


@contextlib.contextmanager
def stop_on_signals(what: str | Callable[[], str], *, kept: str, continue_with: str) -> Iterator[list[int]]:
    """Handle SIGTERM/SIGINT inside the block (module docstring); yields the list the caught signal is appended to.
    `what` names the work ("iterate", "search of runs/x"; a callable is asked when the stop comes), `kept` says what a
    stop keeps, and `continue_with` is the command that continues the work. A handler installed inside the block (the
    search runner's checkpointing one) wins while it is installed."""
    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught  # signals reach the main thread only: whoever runs us there handles them
        return

    previous = {signum: signal.signal(signum, _StopHandler(caught)) for signum in STOP_SIGNALS}
    try:
        yield caught
    except StoppedError as exc:
        raise StoppedError(exc.signum, _line(what, exc.signum, kept, continue_with)) from None
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:
        signum = _stopped_by(exc, caught)
        if signum is None:
            raise
        raise StoppedError(signum, _line(what, signum, kept, continue_with)) from None
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
    if caught:  # the work finished although a signal came: it saved what it had; say so the same way
        raise StoppedError(caught[0], _line(what, caught[0], kept, continue_with))


class _StopHandler:
    """The SIGTERM/SIGINT handler of one `stop_on_signals` block: the first signal is appended to `caught` and
    cancels the main task at the event loop's next step; if the loop has not run that cancellation within
    ESCALATE_S, the signal is sent to the main thread again and `Terminated` is raised where it is."""

    def __init__(self, caught: list[int]) -> None:
        self.caught = caught
        self.main_ident = threading.main_thread().ident or 0
        self.cancelled = threading.Event()  # the loop ran our cancellation
        self.escalate = threading.Event()  # it did not in time: raise where the main thread is

    def cancel_main(self, loop: asyncio.AbstractEventLoop) -> None:
        if _cancel_main(loop):
            self.cancelled.set()
        # else: a loop not run by `run_async`: `unless_cancelled` raises `Terminated` in it, as Ctrl-C would

    def unless_cancelled(self) -> None:
        if not self.cancelled.wait(ESCALATE_S):
            self.escalate.set()
            # a real signal to the main thread: it interrupts a blocking call there too (interrupt_main would not)
            signal.pthread_kill(self.main_ident, self.caught[0])

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        del frame
        if self.caught:
            if self.escalate.is_set() and not self.cancelled.is_set():
                self.cancelled.set()  # once
                raise Terminated(self.caught[0])
            return  # the stop is under way
        self.caught.append(signum)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise Terminated(signum) from None
        # Cancel at the loop's next step; a loop blocked in synchronous work (a model loading, an import) gets
        # `Terminated` raised in that work instead after ESCALATE_S.
        loop.call_soon_threadsafe(self.cancel_main, loop)
        threading.Thread(target=self.unless_cancelled, name="stop", daemon=True).start()


def _stopped_by(exc: KeyboardInterrupt | asyncio.CancelledError, caught: list[int]) -> int | None:
    """The signal that stopped the work, given what reached the end of the block; None: a cancellation that no
    signal of ours caused (it propagates as it is)."""
    if isinstance(exc, Terminated):
        return exc.signum
    if caught:
        return caught[0]
    if isinstance(exc, KeyboardInterrupt):
        return signal.SIGINT  # Python's own Ctrl-C handler (asyncio.run installs one when ours is not)
    return None


def _line(what: str | Callable[[], str], signum: int, kept: str, continue_with: str) -> str:
    if callable(what):
        what = what()
    return f"{what} stopped by {signal_name(signum)}; {kept}: continue with `{continue_with}`"


class Child(Protocol):
    """A child process as `stop_process_group` uses it (`subprocess.Popen` is one)."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def stop_process_group(proc: Child, grace_s: float = STOP_GRACE_S) -> int | None:
    """Stop a child started with `process_group=0`, its group and every process it started: SIGTERM to the group,
    up to `grace_s` for the child to exit (it stops its own children: a stage closes its Lean pool), then SIGKILL
    to the group and to every descendant still alive (Lean workers run in sessions of their own, out of reach of
    the group); reaps the child and returns its exit code. Idempotent."""
    import psutil

    pgid = proc.pid
    seen: dict[int, psutil.Process] = {}

    def look() -> None:  # the descendants now (a stopping stage may still be starting Lean workers)
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(proc.pid).children(recursive=True):
                seen.setdefault(child.pid, child)

    if proc.poll() is None:
        look()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while proc.poll() is None and time.monotonic() < deadline:
            look()
            time.sleep(0.05)
    descendants = list(seen.values())
    # The leader is gone (or late): whatever of its group and of its descendants is left goes now. psutil checks
    # each process's start time, so a pid reused since the snapshot is not touched.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    code = proc.wait()
    for child in descendants:
        with contextlib.suppress(psutil.Error):
            child.kill()
    psutil.wait_procs(descendants, timeout=grace_s)
    return code

"""Running `burnqed` as a user does, in tests: to completion, or in the background to be signalled or killed; its
command line app in this process where only what the command decides is checked (`burnqed_in_process`); and the Lean
workers a command started, to check that none outlives it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psutil

BURNQED = [sys.executable, "-m", "burnqed.cli"]


def burnqed(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BURNQED, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, check=False)


def burnqed_in_process(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`burnqed ARGS` run by its command line app in this process (typer's CliRunner), with the exit code, stdout and
    stderr a process would give: for what the commands decide (reuse, refusals, one-line errors), without a process
    start and its imports each time. What the process itself does (signals, its entry point) needs `burnqed`.

    As in a fresh process, the command's logging goes to its own stderr (the root logger's handlers, pytest's among
    them, are set aside meanwhile) and so do the warnings a process shows (Python's default filters)."""
    import logging
    import warnings

    from typer.testing import CliRunner

    from burnqed.cli import app

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: object = None,
             line: str | None = None) -> None:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers.clear()
    try:
        with warnings.catch_warnings():
            warnings.resetwarnings()
            for category in (ResourceWarning, ImportWarning, PendingDeprecationWarning, DeprecationWarning):
                warnings.simplefilter("ignore", category)
            warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
            warnings.showwarning = show
            done = CliRunner().invoke(app, list(args), env=env, prog_name="burnqed")
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        raise done.exception  # a bug keeps its traceback, as in the process
    return subprocess.CompletedProcess(["burnqed", *args], done.exit_code, done.stdout, done.stderr)


@contextmanager
def background(*args: str, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[str]]:
    """A burnqed command in its own session (so its Lean workers can be killed with it)."""
    proc = subprocess.Popen([*BURNQED, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, **(env or {})})
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        _kill_group(proc.pid)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def wait_for(predicate: Callable[[], object], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def descendants(pid: int) -> list[psutil.Process]:
    """Every live process below `pid` (Lean workers run in sessions of their own, but are still its children)."""
    try:
        found = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [proc for proc in found if _alive(proc)]


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def survivors(processes: list[psutil.Process], grace: float) -> list[list[str]]:
    """The command lines of `processes` still alive after `grace` seconds (each is then killed, so that a failing
    test leaves nothing behind)."""
    deadline = time.monotonic() + grace
    alive = [proc for proc in processes if _alive(proc)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [proc for proc in alive if _alive(proc)]
    lines = []
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            lines.append(proc.cmdline())
            proc.kill()
    return lines

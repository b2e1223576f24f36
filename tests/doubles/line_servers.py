"""Lean peers as `LineServer` objects for `burnqed.lean.inprocess.InProcessReplay`: the protocol without a process or
a pipe, where the wire is not what a test checks.

    lean = InProcessReplay(MiniLean(version=PantographVersion.parse("0.3.4")))   # minilean, in this process
    lean = InProcessReplay(DoubleServer("0.3.4", closes=("exact h₀",)))         # the strict double
    lean = InProcessReplay(DoubleServer("0.3.4", log=tmp_path / "log"))         # … logging each request line

`MiniLean` is minilean's server whose `restart` forgets its states, as a new process would; `DoubleServer` is the
fault-injecting double of tests/doubles/lean_double.py (`closes`: tactics that close any goal; `log`: a file each
request line is appended to, as the double's `--log` writes it).

Where they are more lenient than the peer: no process, so nothing of a crash read off a pipe, a hung read, a
watchdog or a recycle is exercised here (tests/lean's subprocess tests cover those), and replies are never split or
delayed on a pipe; each is as strict as the server it wraps in everything it answers. A request that ends the
double's process (`crash`, `partial`, `eof`, a stack overflow) raises `LeanCrashError` here, and `InProcessReplay`
starts another "process" on the next request, as the client does; one that hangs it (`hang`, a compile that never
ends) raises `ProcessFault`: a test of a hang needs the process and the client's watchdog."""

from __future__ import annotations

import io
from pathlib import Path

from burnqed.errors import LeanCrashError
from leankit.version import PantographVersion
from minilean.server import Server
from tests.doubles.lean_double import Double


class MiniLean(Server):
    def restart(self) -> None:
        self.states.clear()


class ProcessFault(AssertionError):
    """A request the double answers by hanging its process: a test of that needs the process."""


class _Double(Double):
    def die(self, signum: int | None = None) -> None:
        raise LeanCrashError(f"the double's process ended ({'exit 0' if signum is None else signum!r})")

    def hang(self) -> None:
        raise ProcessFault("the double's process would never answer here")


class DoubleServer:
    """The strict double as a `LineServer`; `closes`: tactics that close any goal (the subgoals' proofs); `log`: the
    file every request line is appended to (the double's `--log`)."""

    def __init__(self, version: str, closes: tuple[str, ...] = (), log: Path | None = None) -> None:
        self.version = PantographVersion.parse(version)
        self.closes = closes
        self.log = log
        self.double = _Double(io.BytesIO(), self.version, closes=closes)

    def handle(self, line: str) -> str:
        if self.log is not None:
            with self.log.open("a", encoding="utf-8") as log:
                log.write(line.rstrip("\n") + "\n")
        return self.double.handle(line)

    def restart(self) -> None:
        self.double = _Double(io.BytesIO(), self.version, closes=self.closes)

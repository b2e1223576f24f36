"""Lean peers as `LineServer` objects for `burnqed.lean.inprocess.InProcessReplay`: the protocol without a process or
a pipe, where the wire is not what a test checks.

    lean = InProcessReplay(MiniLean(version=PantographVersion.parse("0.3.4")))   # minilean, in this process
    lean = InProcessReplay(DoubleServer("0.3.4", closes=("exact h₀",)))         # the strict double

`MiniLean` is minilean's server whose `restart` forgets its states, as a new process would; `DoubleServer` is the
fault-injecting double of tests/doubles/lean_double.py (`closes`: tactics that close any goal).

Where they are more lenient than the peer: no process, so nothing of a crash, a hung read, a watchdog or a recycle
is exercised here (tests/lean's subprocess tests cover those), and replies are never split or delayed on a pipe;
each is as strict as the server it wraps in everything it answers."""

from __future__ import annotations

import io

from leankit.version import PantographVersion
from minilean.server import Server
from tests.doubles.lean_double import Double


class MiniLean(Server):
    def restart(self) -> None:
        self.states.clear()


class DoubleServer:
    """The strict double as a `LineServer`; `closes`: tactics that close any goal (the subgoals' proofs)."""

    def __init__(self, version: str, closes: tuple[str, ...] = ()) -> None:
        self.version = PantographVersion.parse(version)
        self.closes = closes
        self.double = Double(io.BytesIO(), self.version, closes=closes)

    def handle(self, line: str) -> str:
        return self.double.handle(line)

    def restart(self) -> None:
        self.double = Double(io.BytesIO(), self.version, closes=self.closes)

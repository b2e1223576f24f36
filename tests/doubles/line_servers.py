"""Lean peers as `LineServer` objects for `burnqed.lean.inprocess.InProcessReplay`: the protocol without a process or
a pipe, where the wire is not what a test checks.

    lean = InProcessReplay(MiniLean(version=PantographVersion.parse("0.3.4")))   # minilean, in this process
    lean = InProcessReplay(DoubleServer("0.3.4", closes=("exact h₀",)))         # the strict double
    lean = InProcessReplay(DoubleServer("0.3.4", log=tmp_path / "log"))         # … logging each request line
    lean = minilean_worker(config.lean)          # what `{python} -m minilean …` would answer; None: needs the process

`MiniLean` is minilean's server whose `restart` forgets its states, as a new process would; `DoubleServer` is the
fault-injecting double of tests/doubles/lean_double.py (`closes`: tactics that close any goal; `log`: a file each
request line is appended to, as the double's `--log` writes it); `MiniLeanProcess` is minilean as `lean.command`
starts it (a fresh server per start, the client's `options.set`, the fallback REPL a process started on first
need), what tests/conftest.py's `minilean_in_process` gives a configured pool.

Where they are more lenient than the peer: no process, so nothing of a crash read off a pipe, a hung read, a
watchdog or a recycle is exercised here (tests/lean's subprocess tests cover those), and replies are never split or
delayed on a pipe; each is as strict as the server it wraps in everything it answers. A request that ends the
double's process (`crash`, `partial`, `eof`, a stack overflow) raises `LeanCrashError` here, and `InProcessReplay`
starts another "process" on the next request, as the client does; one that hangs it (`hang`, a compile that never
ends) raises `ProcessFault`: a test of a hang needs the process and the client's watchdog. An in-process minilean
thinks on the event loop's thread (a tactic that sleeps stops everything meanwhile), and no reply is too long."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from burnqed.config import LeanConfig
from burnqed.errors import LeanCrashError
from burnqed.lean import payloads
from burnqed.lean.inprocess import InProcessReplay
from burnqed.lean.protocol import encode_request
from leankit.version import PantographVersion
from minilean import wire
from minilean.fallback import Fallback
from minilean.server import DEFAULT_VERSION, SUPPORTED, Server
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


MINILEAN_RECURSION_LIMIT = 10_000  # what `python -m minilean` sets (minilean/server.py `main`)


class MiniLeanProcess:
    """minilean as a `lean.command` of `{python} -m minilean [--fallback-module M]` runs it, as a `LineServer`: a fresh
    `Server` at each (re)start (no states, no environment, the default options; the fallback REPL a process of its
    own, started on first need as minilean starts it), then the `options.set` a `LeanWorker` sends after `ready.`
    (the Lean-side timeout, automatic mode). `close` ends the fallback's process, as minilean's exit does."""

    def __init__(self, version: PantographVersion, options: Mapping[str, Any], fallback: str | None = None) -> None:
        self.version = version
        self.options = dict(options)
        self.fallback = fallback
        self.server = Server(version=version)
        self.restart()

    def handle(self, line: str) -> str:
        """As minilean's REPL loop answers a line (`minilean.wire.serve`), under the recursion limit its `main` sets."""
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, MINILEAN_RECURSION_LIMIT))
        try:
            return self.server.handle(line.strip())
        except RecursionError:
            return wire.dumps(wire.error_reply("internal", "maximum recursion depth has been reached"))
        finally:
            sys.setrecursionlimit(limit)

    def restart(self) -> None:
        self.close()
        self.server = Server(version=self.version)
        if self.fallback is not None:
            argv = [sys.executable, "-m", self.fallback, "--pantograph-version", str(self.version)]
            self.server.fallback = Fallback(argv, self.server.allocate)
        reply = json.loads(self.server.handle(encode_request("options.set", self.options).decode("utf-8")))
        if reply != {}:
            raise AssertionError(f"minilean refused the client's options.set: {reply}")

    def close(self) -> None:
        if self.server.fallback is not None:
            self.server.fallback.close()


class MiniLeanWorker(InProcessReplay):
    """An `InProcessReplay` over `MiniLeanProcess` whose close ends what its "process" started (the fallback)."""

    server: MiniLeanProcess

    async def close(self) -> None:
        await super().close()
        self.server.close()


def minilean_worker(config: LeanConfig) -> MiniLeanWorker | None:
    """An in-process worker answering as the process `config` names would: where `lean.command` is this
    interpreter's `-m minilean` with at most `--fallback-module M`, `--pantograph-version V` (a version minilean
    emulates) and module names, run as this user, the client's version the one minilean emulates. None for anything
    else (another peer, `--version`, an option minilean refuses, a version the client does not share): the process
    decides those."""
    argv = config.argv()
    if argv[:3] != [sys.executable, "-m", "minilean"] or config.run_as_uid is not None:
        return None
    words, given = argv[3:], dict[str, str]()
    for flag in ("--pantograph-version", "--fallback-module"):
        if flag in words:
            at = words.index(flag)
            if at + 1 >= len(words) or words[at + 1].startswith("-"):
                return None
            given[flag] = words[at + 1]
            words = words[:at] + words[at + 2:]
    if any(word.startswith("-") for word in words):
        return None  # --version, a flag given twice or as --flag=V, a Lean option: the process decides
    try:
        version = PantographVersion.parse(given.get("--pantograph-version", str(DEFAULT_VERSION)))
        if config.pantograph_version and PantographVersion.parse(config.pantograph_version) != version:
            return None
    except ValueError:
        return None  # an unparsable version: its refusal is the subject
    if version not in SUPPORTED:
        return None
    options = payloads.options_set(version, timeout_ms=round(config.tactic_timeout_s * 1000),
                                   automatic_mode=config.automatic_mode)
    return MiniLeanWorker(MiniLeanProcess(version, options, given.get("--fallback-module")))

"""Lean peers as `LineServer` objects for `burnqed.lean.inprocess.InProcessReplay`: the protocol without a process or
a pipe, where the wire is not what a test checks.

    lean = InProcessReplay(MiniLean(version=PantographVersion.parse("0.3.4")))   # minilean, in this process
    lean = InProcessReplay(DoubleServer("0.3.4", closes=("exact h₀",)))         # the strict double
    lean = InProcessReplay(DoubleServer("0.3.4", log=tmp_path / "log"))         # … logging each request line
    lean = minilean_worker(config.lean)          # what `{python} -m minilean …` would answer; None: needs the process

`MiniLean` is minilean's server whose `restart` forgets its states, as a new process would; `DoubleServer` is the
fault-injecting double of tests/doubles/lean_double.py (`closes`: tactics that close any goal; `log`: a file each
request line is appended to, as the double's `--log` writes it); `MiniLeanProcess` is minilean as `lean.command`
starts it (a fresh server per start, the client's `options.set`, the fallback REPL started on first need: the replay
server in this process, `InProcessFallback`, for `--fallback-module minilean.replay`, else a process), what
tests/conftest.py's `minilean_in_process` gives a configured pool.

Where they are more lenient than the peer: no process, so nothing of a crash read off a pipe, a hung read, a
watchdog or a recycle is exercised here (tests/lean's subprocess tests cover those), and replies are never split or
delayed on a pipe; each is as strict as the server it wraps in everything it answers. A request that ends the
double's process (`crash`, `partial`, `eof`, a stack overflow) raises `LeanCrashError` here, and `InProcessReplay`
starts another "process" on the next request, as the client does; one that hangs it (`hang`, a compile that never
ends) raises `ProcessFault`: a test of a hang needs the process and the client's watchdog. An in-process minilean
thinks on the event loop's thread (a tactic that sleeps stops everything meanwhile), and no reply is too long."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import sys
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

from burnqed.config import LeanConfig
from burnqed.errors import LeanCrashError
from burnqed.lean import payloads
from burnqed.lean.inprocess import InProcessReplay
from burnqed.lean.lease import PoolWorker
from burnqed.lean.protocol import encode_request
from leankit.corpus import Corpus
from leankit.version import DEFAULT_EMULATED, PantographVersion
from leankit.version import SUPPORTED as EMULATED
from minilean import wire
from minilean.fallback import Fallback
from minilean.replay.replay_server import LATENCY_VARIABLE, ReplayServer
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


REPLAY_MODULE = "minilean.replay"


@functools.cache
def replay_corpus(path: str | None = None) -> Corpus:
    """What `python -m minilean.replay [--corpus PATH]` serves: that corpus (without: the embedded one) with the
    conformance theorems, loaded once per test process."""
    from leankit.corpus import load_corpus
    from leankit.world import embedded_corpus
    from minilean.replay.replay_server import with_conformance

    return with_conformance(load_corpus(Path(path)) if path is not None else embedded_corpus())


class InProcessFallback(Fallback):
    """minilean's fallback REPL as `python -m minilean.replay --pantograph-version V` answers it, the replay server in
    this process: started on the first request that needs it (the remembered options and scopes replayed to it, as
    to a new process), gone at `close`. Its requests are the ones the process would read."""

    def __init__(self, version: PantographVersion, allocate: Callable[[], int]) -> None:
        super().__init__([sys.executable, "-m", REPLAY_MODULE, "--pantograph-version", str(version)], allocate)
        self.version = version
        self.replay: ReplayServer | None = None

    def _answer(self, replay: ReplayServer, command: str, payload: wire.JsonObj) -> wire.JsonObj:
        reply = json.loads(replay.handle(f"{command} {wire.dumps(payload)}"))
        if not isinstance(reply, dict):
            raise AssertionError(f"the replay server answered {reply!r}")
        return reply

    def request(self, command: str, payload: wire.JsonObj) -> wire.JsonObj:
        if self.replay is None:
            self.replay = ReplayServer(replay_corpus(), version=self.version)
            self.remote.clear()
            for earlier, sent in self.history:
                self._answer(self.replay, earlier, sent)
        return self._answer(self.replay, command, payload)

    def remember(self, command: str, payload: wire.JsonObj) -> None:
        self.history.append((command, payload))
        if self.replay is not None:
            self.request(command, payload)

    def reset(self) -> None:
        if self.replay is not None:
            self.request("reset", {})
        self.remote.clear()

    def close(self) -> None:
        self.replay = None
        self.remote.clear()


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
        if self.fallback == REPLAY_MODULE:
            self.server.fallback = InProcessFallback(self.version, self.server.allocate)
        elif self.fallback is not None:
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
    emulates) and module names, or its `-m minilean.replay` with at most `--corpus P` and `--pantograph-version V`
    and no latency set (`replay_worker`), run as this user, the client's version the one minilean emulates. None
    for anything else (another peer, `--version`, an option minilean refuses, a version the client does not share):
    the process decides those."""
    argv = config.argv()
    if argv[:3] == [sys.executable, "-m", REPLAY_MODULE] and config.run_as_uid is None:
        return replay_worker(config, argv[3:])
    if argv[:3] != [sys.executable, "-m", "minilean"] or config.run_as_uid is not None:
        return None
    read = _flags(argv[3:], ("--pantograph-version", "--fallback-module"))
    if read is None or any(word.startswith("-") for word in read[1]):
        return None  # --version, a flag given twice or as --flag=V, a Lean option: the process decides
    given = read[0]
    version = _version(config, given, DEFAULT_VERSION, SUPPORTED)
    if version is None:
        return None
    return MiniLeanWorker(MiniLeanProcess(version, _options(config, version), given.get("--fallback-module")))


def _flags(words: list[str], flags: tuple[str, ...]) -> tuple[dict[str, str], list[str]] | None:
    """The values of `flags` in a command's `words` (each `--flag VALUE`) and the words left; None for a flag
    without its value."""
    given = dict[str, str]()
    for flag in flags:
        if flag in words:
            at = words.index(flag)
            if at + 1 >= len(words) or words[at + 1].startswith("-"):
                return None
            given[flag] = words[at + 1]
            words = words[:at] + words[at + 2:]
    return given, words


def _version(config: LeanConfig, given: Mapping[str, str], default: PantographVersion,
             served: Collection[PantographVersion]) -> PantographVersion | None:
    """The version a command serves (`--pantograph-version`, else `default`), if it is one of `served` and the
    client speaks it; None otherwise (an unparsable version: its refusal is the process's subject)."""
    try:
        version = PantographVersion.parse(given.get("--pantograph-version", str(default)))
        if config.pantograph_version and PantographVersion.parse(config.pantograph_version) != version:
            return None
    except ValueError:
        return None
    return version if version in served else None


def _options(config: LeanConfig, version: PantographVersion) -> dict[str, Any]:
    """The `options.set` a `LeanWorker` sends after `ready.`."""
    return payloads.options_set(version, timeout_ms=round(config.tactic_timeout_s * 1000),
                                automatic_mode=config.automatic_mode)


class ReplayProcess:
    """`python -m minilean.replay [--corpus P]` as `lean.command` starts it, as a `LineServer`: a fresh replay
    server per (re)start over the corpus the process would load (`replay_corpus`), then the client's `options.set`."""

    def __init__(self, version: PantographVersion, options: Mapping[str, Any], corpus: str | None) -> None:
        self.version = version
        self.options = dict(options)
        self.corpus = corpus
        self.restart()

    def handle(self, line: str) -> str:
        return self.server.handle(line.strip())

    def restart(self) -> None:
        self.server: ReplayServer = ReplayServer(replay_corpus(self.corpus), version=self.version)
        reply = json.loads(self.server.handle(encode_request("options.set", self.options).decode("utf-8")))
        if reply != {}:
            raise AssertionError(f"the replay server refused the client's options.set: {reply}")

    def close(self) -> None:
        return None


def replay_worker(config: LeanConfig, words: list[str]) -> MiniLeanWorker | None:
    """`minilean_worker` for `-m minilean.replay WORDS`; None where the process decides (another flag, a latency in
    `lean.env` or this environment, a version it does not emulate or the client does not share)."""
    if LATENCY_VARIABLE in config.env or LATENCY_VARIABLE in os.environ:
        return None
    read = _flags(words, ("--corpus", "--pantograph-version"))
    if read is None or read[1]:
        return None
    given = read[0]
    version = _version(config, given, DEFAULT_EMULATED, EMULATED)
    if version is None:
        return None
    return MiniLeanWorker(ReplayProcess(version, _options(config, version), given.get("--corpus")))


@contextlib.contextmanager
def lean_in_process() -> Iterator[list[object]]:
    """While the block runs, the pools' worker factory (`burnqed.lean.pool.worker_from_config`) answers with
    `minilean_worker` where the configured command allows it, else starts the process as before; gives the list of
    in-process workers made (tests/conftest.py `minilean_in_process`; a forked stage inherits it)."""
    from burnqed.lean import pool

    made: list[object] = []
    as_process = pool.worker_from_config

    def worker(config: LeanConfig) -> PoolWorker:
        in_process = minilean_worker(config)
        if in_process is None:
            return as_process(config)
        made.append(in_process)
        return in_process

    pool.worker_from_config = worker
    try:
        yield made
    finally:
        pool.worker_from_config = as_process

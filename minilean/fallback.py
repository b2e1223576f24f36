"""A second Pantograph-protocol REPL that answers what lies outside minilean's fragment.

    python -m minilean --fallback-module minilean.replay

With a fallback, a `goal.start` whose statement minilean cannot parse or elaborate (or a `copyFrom` of a name it
does not know), and a `frontend.process` with a declaration outside the fragment, are sent to the fallback REPL
(a subprocess started on first need, with the same `--pantograph-version`); the states it creates get minilean
state ids, and every later request on them (`goal.tactic`, `goal.print`, `goal.delete`) goes there too. The
fallback sees the options minilean was given and, replayed when it starts, the `frontend.process` requests
with `inheritEnv` minilean answered before (the header scopes the client loads). Without a fallback those
requests are answered by minilean itself (an `elab`/`parsing` error, or the error message in the unit).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import IO, Any

from minilean.wire import JsonObj, dumps, error_reply


class Fallback:
    """The fallback REPL process and the map from minilean state ids to its state ids."""

    def __init__(self, argv: list[str], allocate: Callable[[], int]) -> None:
        self.argv = argv
        self.allocate = allocate  # a fresh minilean state id (shared with minilean's own states)
        self.remote: dict[int, int] = {}
        self.history: list[tuple[str, JsonObj]] = []  # options.set and inheritEnv loads, replayed at start
        self._process: subprocess.Popen[bytes] | None = None

    # -- the process ----------------------------------------------------------------------------------

    def _stdio(self) -> tuple[IO[bytes], IO[bytes]]:
        process = self._process
        if process is None or process.poll() is not None:
            process = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL)
            assert process.stdin is not None and process.stdout is not None
            first = process.stdout.readline().decode("utf-8").strip()
            if first != "ready.":
                process.kill()
                raise OSError(f"the fallback REPL {' '.join(self.argv)} did not print ready. (got {first!r})")
            self._process = process
            self.remote.clear()
            for command, payload in self.history:
                self._exchange(process.stdin, process.stdout, command, payload)
        assert process.stdin is not None and process.stdout is not None
        return process.stdin, process.stdout

    @staticmethod
    def _exchange(stdin: IO[bytes], stdout: IO[bytes], command: str, payload: JsonObj) -> JsonObj:
        stdin.write(f"{command} {dumps(payload)}\n".encode())
        stdin.flush()
        line = stdout.readline()
        if not line:
            raise OSError("the fallback REPL exited")
        reply: Any = json.loads(line.decode("utf-8"))
        if not isinstance(reply, dict):
            raise OSError(f"the fallback REPL answered {line[:200]!r}")
        return reply

    def request(self, command: str, payload: JsonObj) -> JsonObj:
        try:
            return self._exchange(*self._stdio(), command, payload)
        except (OSError, ValueError) as exc:
            self.close()
            return error_reply("internal", f"minilean: fallback REPL: {exc}")

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._process = None
        self.remote.clear()

    # -- what minilean forwards ---------------------------------------------------------------------------

    def remember(self, command: str, payload: JsonObj) -> None:
        """A request the fallback must also have seen (options, header scopes): sent at once if it runs, and again
        whenever it (re)starts."""
        self.history.append((command, payload))
        if self._process is not None and self._process.poll() is None:
            self.request(command, payload)

    def _local(self, remote_id: Any) -> int:
        local = self.allocate()
        self.remote[local] = int(remote_id)
        return local

    def start(self, payload: JsonObj) -> JsonObj:
        reply = self.request("goal.start", payload)
        if "stateId" in reply:
            reply["stateId"] = self._local(reply["stateId"])
        return reply

    def on_state(self, command: str, payload: JsonObj) -> JsonObj:
        """`goal.tactic`/`goal.print` on a state the fallback holds."""
        reply = self.request(command, {**payload, "stateId": self.remote[int(payload["stateId"])]})
        if "nextStateId" in reply:
            reply["nextStateId"] = self._local(reply["nextStateId"])
        return reply

    def delete(self, local_ids: list[int]) -> None:
        remote = [self.remote.pop(i) for i in local_ids if i in self.remote]
        if remote:
            self.request("goal.delete", {"stateIds": remote})

    def process(self, payload: JsonObj) -> JsonObj:
        reply = self.request("frontend.process", payload)
        for unit in reply.get("units", []) if isinstance(reply.get("units"), list) else []:
            if isinstance(unit, dict) and unit.get("goalStateId") is not None:
                unit["goalStateId"] = self._local(unit["goalStateId"])
        return reply

    def reset(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self.request("reset", {})
        self.remote.clear()

"""A fault-injecting stand-in for Pantograph's `repl`, for tests and benchmarks.

    python tests/doubles/lean_double.py [--ready-delay S] [--no-ready CODE] [--stderr-bytes N]
                                        [--preamble TEXT] [--log FILE] [--starts FILE]

Process-level faults come from flags; per-request behaviour from the tactic text of `goal.tactic`
(or the expression of `goal.start`), so one process can misbehave on demand:

    hang          never answers                 crash       SIGKILLs itself (exit 137)
    garbage       a line that is not JSON       partial     half a JSON line, then exits
    eof           closes stdout, exits 0        interrupt   {"error":"internal","desc":"interrupt"}
    huge:N        a goal whose target has N characters
    echo ...      success; the goal's target is the tactic text exactly as received
    sleep:MS      answers after MS milliseconds
    done          closes all goals, cleanly     sorry       goals [] with hasSorry
    unsafe        goals [] with hasUnsafe       bullet      goals [] but the root keeps a metavariable
    nogoals       success shape without goals   nullstate   nextStateId null, goals []
    parse         {"parseError": ...}           strmsg      failure with plain-string messages
    legacy-ok / legacy-err   v0.2.x shapes      error       a v0.3 failure with an error message
    anything else success with one new goal `after <tactic>`
`frontend.process` fails when the file contains FAILCOMPILE or sorry. Default latency is zero.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from typing import Any

OK_GOAL_VARS = [{"userName": "x", "type": {"pp": "ℕ"}, "name": "_uniq.1", "isInaccessible": False}]


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def goal(target: str) -> dict[str, Any]:
    return {"vars": OK_GOAL_VARS, "target": {"pp": target}, "name": "_uniq.2", "fragment": "tactic"}


class Double:
    def __init__(self, out: Any) -> None:
        self.out = out
        self.states: dict[int, dict[str, bool]] = {}
        self.next_id = 0

    def emit(self, text: str) -> None:
        self.out.write(text.encode("utf-8") + b"\n")
        self.out.flush()

    def new_state(self, *, sorry: bool = False, mvar: bool = True) -> int:
        sid = self.next_id
        self.next_id += 1
        self.states[sid] = {"sorry": sorry, "mvar": mvar}
        return sid

    def success(self, goals: list[dict[str, Any]], *, sorry: bool = False, unsafe: bool = False,
                mvar: bool | None = None) -> str:
        sid = self.new_state(sorry=sorry, mvar=bool(goals) if mvar is None else mvar)
        return dumps({"nextStateId": sid, "messages": [], "hasUnsafe": unsafe, "hasSorry": sorry, "goals": goals})

    def behave(self, word: str) -> str | None:
        """Process-level misbehaviour shared by goal.start and goal.tactic; None = not a fault word."""
        if word == "hang":
            time.sleep(3600)
        if word == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        if word == "garbage":
            return "this is not json at all"
        if word == "partial":
            self.out.write(b'{"nextStateId":1,"goa')
            self.out.flush()
            os._exit(0)
        if word == "eof":
            self.out.close()
            os._exit(0)
        if word == "interrupt":
            return dumps({"error": "internal", "desc": "interrupt"})
        if word.startswith("sleep:"):
            time.sleep(int(word.split(":", 1)[1]) / 1000)
        return None

    def tactic(self, payload: dict[str, Any]) -> str:
        sid = payload.get("stateId")
        if sid not in self.states:
            return dumps({"error": "index", "desc": f"Invalid state index {sid}"})
        tactic = str(payload.get("tactic", ""))
        word = tactic.split(maxsplit=1)[0] if tactic.split() else ""
        faulty = self.behave(word)
        if faulty is not None:
            return faulty
        if word.startswith("huge:"):
            return self.success([goal("x = " + "a" * int(word.split(":", 1)[1]))])
        if word == "echo":
            return self.success([goal(tactic)])
        if word == "done":
            return self.success([], mvar=False)
        if word == "sorry":
            return self.success([], sorry=True, mvar=False)
        if word == "unsafe":
            return self.success([], unsafe=True, mvar=False)
        if word == "bullet":
            return self.success([], mvar=True)
        if word == "nogoals":
            sid2 = self.new_state()
            return dumps({"nextStateId": sid2, "messages": [], "hasUnsafe": False, "hasSorry": False})
        if word == "nullstate":
            return dumps({"nextStateId": None, "messages": [], "hasUnsafe": False, "hasSorry": False, "goals": []})
        if word == "parse":
            return dumps({"parseError": "<input>:1:5: unexpected token"})
        if word == "strmsg":
            return dumps({"messages": ["unknown identifier 'foo'"], "hasUnsafe": False, "hasSorry": False})
        if word == "legacy-ok":
            sid2 = self.new_state()
            return dumps({"nextStateId": sid2, "goals": [{"vars": [], "target": {"pp": "p"}, "name": "_uniq.3",
                                                          "isConversion": False}]})
        if word == "legacy-err":
            return dumps({"tacticErrors": ["tactic 'assumption' failed\n⊢ p"]})
        if word == "error":
            return dumps({"messages": [{"severity": "error", "pos": {"line": 0, "column": 0},
                                        "kind": "[anonymous]", "keepFullRange": False, "isSilent": False,
                                        "fileName": "<Pantograph>", "endPos": None,
                                        "data": "linarith failed to find a contradiction", "caption": ""}],
                          "hasUnsafe": False, "hasSorry": False})
        return self.success([goal(f"after {tactic}")])

    def handle(self, line: str) -> str:
        command, _, raw = line.partition(" ")
        try:
            payload = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            return dumps({"error": "command", "desc": f"Unable to parse json: {exc}"})
        if command == "options.set":
            return "{}"
        if command == "goal.start":
            expr = str(payload.get("expr") or payload.get("copyFrom") or "")
            faulty = self.behave(expr.split(maxsplit=1)[0] if expr.split() else "")
            if faulty is not None:
                return faulty
            if expr.startswith("bad"):
                return dumps({"error": "elab", "desc": f"unknown identifier '{expr}'"})
            return dumps({"stateId": self.new_state(), "root": "_uniq.1"})
        if command == "goal.tactic":
            return self.tactic(payload)
        if command == "goal.print":
            state = self.states.get(payload.get("stateId", -1))
            if state is None:
                return dumps({"error": "index", "desc": "Invalid state index"})
            return dumps({"rootHasUnsafe": False, "rootHasSorry": state["sorry"], "rootHasMVar": state["mvar"],
                          "root": {"pp": "fun x => ?m.1" if state["mvar"] else "fun x => x"},
                          "goals": [goal("start")] if payload.get("goals") else [], "extraMVars": []})
        if command == "goal.delete":
            for sid in payload.get("stateIds", []):
                self.states.pop(sid, None)
            return "{}"
        if command == "frontend.process":
            text = str(payload.get("file", ""))
            if "FAILCOMPILE" in text:
                message = {"severity": "error", "pos": {"line": 3, "column": 2}, "data": "unsolved goals"}
                return dumps({"units": [{"messages": [message], "boundary": [0, len(text.encode())]}]})
            if "sorry" in text:
                message = {"severity": "warning", "kind": "hasSorry", "data": "declaration uses 'sorry'"}
                return dumps({"units": [{"messages": [message], "boundary": [0, len(text.encode())]}]})
            return dumps({"units": [{"messages": [], "boundary": [0, len(text.encode())]}]})
        if command in ("reset", "stat"):
            count = len(self.states)
            if command == "reset":
                self.states.clear()
                self.next_id = 0
            return dumps({"nGoals": count})
        return dumps({"error": "command", "desc": f"Unknown command {command}"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ready-delay", type=float, default=0.0)
    parser.add_argument("--no-ready", type=int, default=None, help="exit with this code instead of `ready.`")
    parser.add_argument("--stderr-bytes", type=int, default=0, help="write this much to stderr first")
    parser.add_argument("--preamble", default=None, help="a stdout line before `ready.`")
    parser.add_argument("--log", default=None, help="append every request line (raw bytes) to this file")
    parser.add_argument("--starts", default=None, help="append one line per process start to this file")
    args, _ = parser.parse_known_args()
    if args.starts:
        with open(args.starts, "a") as handle:
            handle.write(f"{os.getpid()}\n")
    if args.stderr_bytes:
        sys.stderr.write("w" * args.stderr_bytes + "\n")
        sys.stderr.flush()
    if args.no_ready is not None:
        sys.stderr.write("error: unknown package 'Mathlib'\n")
        sys.exit(args.no_ready)
    time.sleep(args.ready_delay)
    out = sys.stdout.buffer
    if args.preamble:
        out.write(args.preamble.encode() + b"\n")
    out.write(b"ready.\n")
    out.flush()
    double = Double(out)
    log = open(args.log, "ab") if args.log else None  # noqa: SIM115 - lives as long as the process
    for raw in sys.stdin.buffer:
        if log is not None:
            log.write(raw)
            log.flush()
        line = raw.decode("utf-8").rstrip("\n")
        if not line.strip():
            return
        double.emit(double.handle(line))


if __name__ == "__main__":
    main()

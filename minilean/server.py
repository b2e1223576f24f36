"""The minilean REPL: Pantograph's commands over stdin/stdout, answered by minilean's elaborator and tactics.

    python -m minilean [--pantograph-version V] [ignored module names / --opt=v …]
    python -m minilean --version

It prints `ready.`, then one compact JSON line per request line `command {json}` (or `{"cmd", "payload"}`)
until an empty line or EOF. Commands: `options.set`, `options.print`, `goal.start` (`expr`, or `copyFrom` a
theorem an earlier `frontend.process` with `inheritEnv` declared), `goal.tactic` (`tactic`, `expr`, `have`),
`goal.print`, `goal.delete`, `frontend.process`, `frontend.distil` (0.3.6+), `reset`, `stat`. Requests are
parsed like the emulated Pantograph version parses them (`minilean.protocol`), replies have its shapes.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from minilean.elab import ElabError, elaborate_prop
from minilean.fallback import Fallback
from minilean.goals import Goal, TacticError
from minilean.protocol import (
    DEFAULT_OPTIONS,
    DEFAULT_VERSION,
    SUPPORTED,
    JsonObj,
    Version,
    dumps,
    error_reply,
    message,
    request_problem,
)
from minilean.syntax import Expr, ParseError, parse, pp
from minilean.tactics import OUTSIDE_FRAGMENT, TACTIC_NAMES, Engine, split_top

MAX_SLEEP_MS = 600_000


@dataclass
class State:
    """A goal state: its goals (the first is the main goal), whether a sorry is on its path, and whether any
    tactic ran yet (Pantograph prints no root before that)."""

    goals: tuple[Goal, ...]
    has_sorry: bool = False
    is_root: bool = False
    root: str = ""


@dataclass
class Declared:
    """A theorem in the REPL's environment (declared by `frontend.process` with `inheritEnv`)."""

    name: str
    statement: Expr
    axioms: tuple[str, ...]


@dataclass
class Server:
    version: Version = DEFAULT_VERSION
    options: JsonObj = field(default_factory=dict)
    states: dict[int, State] = field(default_factory=dict)
    env: dict[str, Declared] = field(default_factory=dict)
    next_state_id: int = 0
    next_uniq: int = 1
    fallback: Fallback | None = None

    def __post_init__(self) -> None:
        if not self.options:
            self.options = {k: v for k, v in DEFAULT_OPTIONS.items()
                            if k != "timeout" or self.version.timeout_option}

    # -- helpers --------------------------------------------------------------------------------

    def uniq(self) -> str:
        name = f"_uniq.{self.next_uniq}"
        self.next_uniq += 1
        return name

    def new_state(self, state: State) -> int:
        state_id = self.allocate()
        self.states[state_id] = state
        return state_id

    def allocate(self) -> int:
        """A fresh state id (minilean's states and the fallback's share the numbering)."""
        state_id = self.next_state_id
        self.next_state_id += 1
        return state_id

    def remote(self, args: JsonObj) -> bool:
        """Is `stateId` a state the fallback REPL holds?"""
        return self.fallback is not None and args.get("stateId") in self.fallback.remote

    def goal_json(self, goal: Goal) -> JsonObj:
        variables = [{"userName": h.name, "type": {"pp": pp(h.ty)}, "name": h.uniq, "isInaccessible": h.inaccessible}
                     for h in goal.hyps]
        obj: JsonObj = {"vars": variables, "target": {"pp": pp(goal.target)}, "name": goal.mvar}
        if self.version.goal_fragment:
            obj["fragment"] = "tactic"
        else:
            obj["isConversion"] = False
        if goal.case:
            obj["userName"] = goal.case
        return obj

    def flags(self, has_sorry: bool) -> JsonObj:
        return {"hasSorry": has_sorry, "hasUnsafe": False} if self.version.sorry_flags else {}

    def failure(self, text: str) -> JsonObj:
        if self.version.tactic_errors:
            return {"tacticErrors": [text]}
        return {"messages": [message(self.version, text, prefixed=False)], **self.flags(False)}

    # -- framing --------------------------------------------------------------------------------

    def handle(self, line: str) -> str:
        text = line.strip()
        if text.startswith("{"):
            wrapped, problem = _parse_json(text)
            if problem is not None:
                return dumps(error_reply("command", f"Unable to parse json: {problem}"))
            if not isinstance(wrapped, dict) or not isinstance(wrapped.get("cmd"), str):
                return dumps(error_reply("command", "Unable to parse json: cmd: String expected"))
            command, payload = wrapped["cmd"], wrapped.get("payload", {})
        else:
            command, _, body = text.partition(" ")
            payload, problem = _parse_json(body) if body.strip() else ({}, None)
            if problem is not None:
                return dumps(error_reply("command", f"Unable to parse json: {problem}"))
        handler = {
            "reset": self.reset, "stat": self.stat, "options.set": self.options_set,
            "options.print": self.options_print, "goal.start": self.goal_start, "goal.tactic": self.goal_tactic,
            "goal.delete": self.goal_delete, "goal.print": self.goal_print,
            "frontend.process": self.frontend_process,
            **({"frontend.distil": self.frontend_distil} if self.version.distil else {}),
        }.get(command)
        if handler is None:
            return dumps(error_reply("command", f"Unknown command {command}"))
        args = payload if isinstance(payload, dict) else {}
        problem = request_problem(self.version, command, args)
        if problem is not None:
            return dumps(error_reply("command", f"Unable to parse json: {problem}"))
        return dumps(handler(args))

    # -- commands -------------------------------------------------------------------------------

    def reset(self, _: JsonObj) -> JsonObj:
        count = len(self.states) + (len(self.fallback.remote) if self.fallback is not None else 0)
        self.states.clear()
        if self.fallback is not None:
            self.fallback.reset()
        self.next_state_id = 0
        return {"nGoals": count}

    def stat(self, _: JsonObj) -> JsonObj:
        return {"nGoals": len(self.states) + (len(self.fallback.remote) if self.fallback is not None else 0)}

    def options_set(self, args: JsonObj) -> JsonObj:
        for key in self.options:
            if args.get(key) is not None:
                self.options[key] = args[key]
        if self.fallback is not None:
            self.fallback.remember("options.set", args)
        return {}

    def options_print(self, _: JsonObj) -> JsonObj:
        return dict(self.options)

    def goal_start(self, args: JsonObj) -> JsonObj:
        expr, copy_from = args.get("expr"), args.get("copyFrom")
        if (expr is None) == (copy_from is None):
            return error_reply("arguments", "Exactly one of {expr, copyFrom} must be supplied")
        if copy_from is not None:
            declared = self.env.get(copy_from)
            if declared is None:
                if self.fallback is not None:
                    return self.fallback.start(args)
                return error_reply("index", f"Symbol not found: {copy_from}")
            statement = declared.statement
        else:
            try:
                statement = elaborate_prop(parse(str(expr)), {})
            except ParseError as exc:
                if self.fallback is not None:
                    return self.fallback.start(args)
                return error_reply("parsing", f"<stdin>:1:{exc.column}: {exc.message}")
            except ElabError as exc:
                if self.fallback is not None:
                    return self.fallback.start(args)
                return error_reply("elab", exc.message)
        root = self.uniq()
        state_id = self.new_state(State((Goal((), statement, None, root),), is_root=True, root=root))
        return {"stateId": state_id, "root": root}

    def goal_tactic(self, args: JsonObj) -> JsonObj:
        if self.fallback is not None and self.remote(args):
            return self.fallback.on_state("goal.tactic", args)
        state_id = args["stateId"]
        state = self.states.get(state_id)
        if state is None:
            return error_reply("index", f"Invalid state index {state_id}")
        goal_id = args.get("goalId") or 0
        if goal_id >= len(state.goals) and (state.goals or "goalId" in args):
            return error_reply("index", f"Invalid goal index {goal_id}")
        keys: tuple[str, ...]
        if self.version.mode_field:
            keys, kind_of_error = ("tactic", "mode", "expr", "have", "let", "draft"), "operation"
        else:
            keys, kind_of_error = ("tactic", "expr", "have", "let", "calc", "conv", "draft"), "arguments"
        given = [key for key in keys if args.get(key) is not None]
        if len(given) != 1:
            # 0.2.x names fewer fields in this message than it reads.
            listed = ("tactic", "expr", "have", "calc", "conv") if not self.version.header_flags else keys
            return error_reply(kind_of_error, f"Exactly one of {{{', '.join(listed)}}} must be supplied")
        kind = given[0]
        value = str(args[kind])
        if kind in ("conv", "draft", "mode", "calc"):
            return error_reply("invalid", f"minilean: `{kind}` is outside minilean's fragment")
        tactic = _as_tactic(kind, value, args.get("binderName"))
        problem = parse_problem(tactic, single=kind == "tactic")
        if problem is not None:
            return {"parseError": problem, **self.flags(False)}
        if not state.goals:
            if not self.options["automaticMode"]:
                return error_reply("index", "No goals to be solved")
            # From 0.3.3 a tactic without goalId runs on all goals: here none, so it fails like Lean's.
            return self.failure("no goals to be proved")
        focus = state.goals[goal_id]
        others = state.goals[:goal_id] + state.goals[goal_id + 1 :]
        engine = Engine(self.uniq)
        started = time.perf_counter()
        try:
            produced = engine.run((focus,), tactic)
        except TacticError as exc:
            if self._interrupted(engine.run_info.sleep_ms, started):
                return error_reply(self.version.interrupt_kind, "interrupt")
            return self.failure(exc.message)
        except Exception as exc:  # a bug in minilean must fail the tactic, never kill the REPL or pass it
            return self.failure(f"minilean: internal error: {type(exc).__name__}: {exc}")
        if self._interrupted(engine.run_info.sleep_ms, started):
            return error_reply(self.version.interrupt_kind, "interrupt")
        goals = produced + others if self.options["automaticMode"] else produced
        has_sorry = engine.run_info.sorried
        next_id = self.new_state(State(goals, state.has_sorry or has_sorry, False, state.root))
        reply: JsonObj = {"nextStateId": next_id, "goals": [self.goal_json(g) for g in goals]}
        if self.version.sorry_flags:
            reply.update({"messages": [], **self.flags(has_sorry)})
        return reply

    def _interrupted(self, sleep_ms: int, started: float) -> bool:
        """Lean's `options.set timeout` (ms): a tactic that ran longer (or slept longer) is interrupted."""
        timeout = int(self.options.get("timeout", 0) or 0)
        elapsed_ms = (time.perf_counter() - started) * 1000 + sleep_ms
        if timeout > 0 and elapsed_ms > timeout:
            time.sleep(max(0.0, (timeout - (time.perf_counter() - started) * 1000) / 1000))
            return True
        if sleep_ms:
            time.sleep(sleep_ms / 1000)
        return False

    def goal_delete(self, args: JsonObj) -> JsonObj:
        if self.fallback is not None:
            self.fallback.delete(list(args["stateIds"]))
        for state_id in args["stateIds"]:
            self.states.pop(state_id, None)
        return {}

    def goal_print(self, args: JsonObj) -> JsonObj:
        if self.fallback is not None and self.remote(args):
            return self.fallback.on_state("goal.print", args)
        state_id = args["stateId"]
        state = self.states.get(state_id)
        if state is None:
            return error_reply("index", f"Invalid state index {state_id}")
        result: JsonObj = {"goals": [self.goal_json(g) for g in state.goals] if args.get("goals") else [],
                           "extraMVars": []}
        assigned = not state.is_root
        if self.version.sorry_flags:
            result.update({"rootHasUnsafe": False, "rootHasSorry": assigned and state.has_sorry,
                           "rootHasMVar": assigned and bool(state.goals)})
        root_pp = _root_pp(state)
        if args.get("rootExpr") and assigned:
            result["root"] = {"pp": root_pp}
        if args.get(self.version.parent_exprs_key):
            if self.version.goal_fragment:
                result["parentExprs"] = [{"pp": root_pp} for _ in state.goals]
            else:
                result["parent"] = {"pp": root_pp}
        return result

    def frontend_process(self, args: JsonObj) -> JsonObj:
        from minilean.frontend import process

        reply = process(self, args)
        if self.fallback is not None and args.get("inheritEnv") and "units" in reply \
                and not any(unit.get("goalStateId") is not None for unit in reply["units"]):
            self.fallback.remember("frontend.process", args)  # a header scope the fallback must share
        return reply

    def frontend_distil(self, args: JsonObj) -> JsonObj:
        from minilean.frontend import distil

        return distil(self, args)


def _root_pp(state: State) -> str:
    """The root proof term as minilean can show it: `?m.N` holes while goals remain, `⋯` for the proof term
    (minilean keeps no proof terms; Lean elides big proofs the same way), `sorry` when one was used."""
    if state.goals:
        holes = [f"?m.{g.mvar.rsplit('.', 1)[-1]}" for g in state.goals]
        return holes[0] if len(holes) == 1 else f"⟨{', '.join(holes)}⟩"
    return "sorry" if state.has_sorry else "⋯"


def _parse_json(text: str) -> tuple[Any, str | None]:
    import json

    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"{exc.msg} (offset {exc.pos})"
    except RecursionError:
        return None, "maximum nesting depth exceeded"


def _as_tactic(kind: str, value: str, binder: Any) -> str:
    if kind == "tactic":
        return value
    if kind == "expr":
        stripped = value.strip()
        if re.match(r"by\b", stripped):
            return stripped[2:]
        return f"exact {stripped}"
    name = binder if isinstance(binder, str) and binder else "this"
    return f"{kind} {name} : {value}"


_BRACKETS = {"(": ")", "[": "]", "{": "}", "⟨": "⟩"}


def parse_problem(text: str, single: bool = True) -> str | None:
    """Pantograph's `parseError` for tactic text, or None: empty input, unbalanced brackets, an unknown tactic
    head, and (for `tactic`, which Pantograph parses as ONE tactic) a top-level `;`."""
    stripped = re.sub(r"--[^\n]*", "", text)
    if not stripped.strip():
        return "<input>:1:0: unexpected end of input"
    stack: list[str] = []
    for index, char in enumerate(stripped):
        if char in _BRACKETS:
            stack.append(_BRACKETS[char])
        elif char in _BRACKETS.values():
            if not stack or stack[-1] != char:
                return f"<input>:1:{index}: unexpected token '{char}'; expected term"
            stack.pop()
    if stack:
        return f"<input>:1:{len(stripped)}: unexpected end of input; expected '{stack[-1]}'"
    if single:
        pieces = split_top(stripped.strip(), ";")
        if len(pieces) > 1:
            column = len(pieces[0]) + (len(stripped) - len(stripped.lstrip()))
            return f"<input>:1:{column}: unexpected token ';'; expected end of input"
    stray = stripped.find("\ufffd")
    if stray >= 0:  # what a byte-level model writes for a broken character: no Lean token starts with it
        return f"<input>:1:{stray}: unexpected token '\ufffd'; expected term"
    for line in stripped.split("\n"):
        head = re.match(r"\s*(?:[·.]\s*)?([A-Za-z_][\w'!?]*)", line)
        if head is None:
            continue
        word = head.group(1)
        bad = _bad_intro_name(word, line[head.end():])
        if bad is not None:
            return f"<input>:1:{head.end() + bad[0]}: unexpected token '{bad[1]}'; expected term"
        if word in TACTIC_NAMES or word in _STRUCTURAL or word in OUTSIDE_FRAGMENT:
            continue
        if line.strip().startswith("|"):
            continue
        return f"<input>:1:{head.start(1)}: unknown tactic"
    return None


# A name `intro`/`intros` binds: an identifier without dots, or `_` (`intro ⟨a, b⟩` and `intro (h)` are patterns,
# which `rintro` reads). `intro h₀, h₁` and `intro h.1` do not parse in Lean.
_BINDER_NAME = re.compile(r"_|[A-Za-z_α-κμ-ωΑ-Ωℕℤℚℝ𝔽][A-Za-z_0-9'!?α-ωΑ-Ω₀-₉ₐ-ₜ]*")


def _bad_intro_name(head: str, rest: str) -> tuple[int, str] | None:
    """(offset in `rest`, offending character) of the first name `intro`/`intros` cannot bind, else None."""
    if head not in ("intro", "intros") or any(c in rest for c in "⟨(|"):
        return None
    for found in re.finditer(r"\S+", rest):
        if not _BINDER_NAME.fullmatch(found.group()):
            word = found.group()
            valid = _BINDER_NAME.match(word)
            offset = valid.end() if valid is not None and valid.end() > 0 else 0
            return found.start() + offset, word[offset]
    return None


_STRUCTURAL = frozenset({"all_goals", "any_goals", "try", "focus", "repeat", "iterate", "first", "case", "next",
                         "skip", "done", "with", "at", "only", "using"})
# ---------------------------------------------------------------------------------------------------
# Process entry point.


def serve(server: Server, stdin: IO[bytes], stdout: IO[bytes]) -> int:
    stdout.write(b"ready.\n")
    stdout.flush()
    for raw in stdin:
        line = raw.decode("utf-8", errors="replace").strip()
        if not line:
            return 0
        try:
            reply = server.handle(line)
        except RecursionError:
            reply = dumps(error_reply("internal", "maximum recursion depth has been reached"))
        stdout.write(reply.encode("utf-8") + b"\n")
        stdout.flush()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minilean",
                                     description="A small Lean 4 with real semantics behind the Pantograph protocol.")
    parser.add_argument("--pantograph-version", default=str(DEFAULT_VERSION),
                        help=f"the Pantograph version to emulate ({', '.join(map(str, SUPPORTED))})")
    parser.add_argument("--version", action="store_true",
                        help="print the emulated Pantograph version and exit (alone, like `repl --version`)")
    parser.add_argument("--fallback-module", default=None, metavar="MODULE",
                        help="a Python module speaking the same protocol (`python -m MODULE`) that answers what is "
                        "outside minilean's fragment (minilean/fallback.py), e.g. minilean.replay")
    args, ignored = parser.parse_known_args(argv)
    try:
        version = Version.parse(args.pantograph_version)
    except ValueError as exc:
        print(f"minilean: {exc}", file=sys.stderr)
        return 2
    if version not in SUPPORTED:
        print(f"minilean: Pantograph {version} is not emulated (supported: {', '.join(map(str, SUPPORTED))})",
              file=sys.stderr)
        return 2
    if args.version:
        if ignored:
            print("uncaught exception: Options cannot be parsed: invalid configuration option entry, it must be "
                  "of the form '<key> = <value>'", file=sys.stderr)
            return 1
        print(version)
        return 0
    sys.setrecursionlimit(10_000)
    server = Server(version=version)
    if args.fallback_module:
        argv = [sys.executable, "-m", args.fallback_module, "--pantograph-version", str(version)]
        server.fallback = Fallback(argv, server.allocate)
    try:
        return serve(server, sys.stdin.buffer, sys.stdout.buffer)
    except (BrokenPipeError, KeyboardInterrupt):
        return 0
    finally:
        if server.fallback is not None:
            server.fallback.close()


__all__ = ["Server", "State", "main", "parse_problem", "serve"]

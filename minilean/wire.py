"""The Pantograph wire protocol as the embedded Lean speaks it: the one layer under both of its servers, minilean's
(`minilean.server`) and the replay server (`minilean.replay.replay_server`). Framing, request parsing and every
reply shape that differs between Pantograph versions are written here once; what a request does is each server's.

    reply_line = answer(line, version, {"goal.start": server.goal_start, ...})   # framing, parsing, dispatch
    goal = goal_object(version, [Variable("x", "ℝ", "_uniq.3", False)], "0 < x", "_uniq.4", case=None)
    serve(server, sys.stdin.buffer, sys.stdout.buffer)                            # `ready.`, then line by line

Replies are compact JSON, raw UTF-8, keys in reverse code-point order (Lean's `Json.compress`); the versions are
`leankit.version`'s, the table the client reads too. docs/minilean.md, "Protocol", lists what each version changes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol, TypeVar

from leankit.failures import BadInput
from leankit.names import wire_name
from leankit.version import PantographVersion
from minilean.schema import request_problem, structure

JsonObj = dict[str, Any]
Handler = Callable[[JsonObj], JsonObj]

DEFAULT_OPTIONS: JsonObj = {
    "timeout": 0,
    "printJsonPretty": False,
    "printImplementationDetailHyps": False,
    "printExprPretty": True,
    "printExprAST": False,
    "printDependentMVars": False,
    "printAuxDecls": False,
    "noRepeat": False,
    "automaticMode": True,
}

# ---------------------------------------------------------------------------------------------------
# JSON and framing.


def parse_json(text: str) -> tuple[Any, str | None]:
    """The JSON value of `text`, or None and the reason it does not parse (deep nesting included)."""
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"{exc.msg} (offset {exc.pos})"
    except RecursionError:
        return None, "maximum nesting depth exceeded"


def ordered(value: Any) -> Any:
    """Lean's `Json.compress` writes object keys in reverse code-point order; mirror it recursively."""
    if isinstance(value, dict):
        return {key: ordered(value[key]) for key in sorted(value, reverse=True)}
    if isinstance(value, list):
        return [ordered(item) for item in value]
    return value


def dumps(value: Any) -> str:
    """One reply line: compact, raw UTF-8, keys ordered like Pantograph's."""
    return json.dumps(ordered(value), ensure_ascii=False, separators=(",", ":"))


def error_reply(kind: str, desc: str) -> JsonObj:
    return {"error": kind, "desc": desc}


class ArgumentError(Exception):
    """A request field a handler reads is not of its type (answered as Pantograph's parse error)."""

    def __init__(self, field_name: str, expected: str) -> None:
        super().__init__(f"{field_name}: {expected}")
        self.field = field_name
        self.expected = expected


_NUMERAL_ECHO = re.compile(r"\(\s*(\d+)\s*:\s*(?:Nat|ℕ)\s*\)")


def echo_numeral(args: JsonObj) -> JsonObj:
    """`expr.echo` of a numeral ascribed `Nat` (`(42 : Nat)`), as Pantograph answers it: the expression and its type,
    pretty-printed. The one expression the embedded Lean echoes (the client's fence after a compile sends no other);
    any other is answered with an elaboration error, where Pantograph would elaborate it."""
    found = _NUMERAL_ECHO.fullmatch(str(args.get("expr", "")).strip())
    if found is None:
        return error_reply("elab", f"the embedded Lean echoes only a numeral ascribed Nat, not {args.get('expr')!r}")
    return {"type": {"pp": "Nat"}, "expr": {"pp": str(int(found.group(1)))}}


def nat_arg(args: JsonObj, key: str, default: int = 0, optional: bool = False) -> int:
    """The natural number `args[key]` (`default` when optional and absent); ArgumentError otherwise."""
    if key not in args or args[key] is None:
        if optional:
            return default
        raise ArgumentError(key, "Nat expected")
    value = args[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ArgumentError(f"{key}{'?' if optional else ''}", "Nat expected")
    return value


def _request(line: str) -> tuple[str, Any] | str:
    """(command, payload) of one request line, or the reply line refusing it."""
    text = line.strip()
    if text.startswith("{"):
        # Pantograph also accepts `{"cmd": ..., "payload": ...}` on one line.
        wrapped, problem = parse_json(text)
        if problem is not None:
            return dumps(error_reply("command", f"Unable to parse json: {problem}"))
        if not isinstance(wrapped, dict) or not isinstance(wrapped.get("cmd"), str):
            return dumps(error_reply("command", "Unable to parse json: cmd: String expected"))
        return wrapped["cmd"], wrapped.get("payload", {})
    command, _, body = text.partition(" ")
    payload, problem = parse_json(body) if body.strip() else ({}, None)
    if problem is not None:
        return dumps(error_reply("command", f"Unable to parse json: {problem}"))
    return command, payload


def answer(line: str, version: PantographVersion, handlers: Mapping[str, Handler]) -> str:
    """The reply line (without newline) to one non-empty request line: parsed as `version` parses it, then
    handed to the command's handler."""
    request = _request(line)
    if isinstance(request, str):
        return request
    command, payload = request
    handler = handlers.get(command)
    if handler is None:
        return dumps(error_reply("command", f"Unknown command {command}"))
    # Lean reads every field of a payload that is not an object (null included) as null.
    args = payload if isinstance(payload, dict) else {}
    problem = request_problem(version, command, args)
    if problem is not None:
        return dumps(error_reply("command", f"Unable to parse json: {problem}"))
    try:
        return dumps(handler(args))
    except ArgumentError as exc:
        spec = structure(version, command)
        name = spec[0] if spec is not None else command
        return dumps(error_reply("command", f"Unable to parse json: Pantograph.Protocol.{name}.{exc.field}: "
                                            f"{exc.expected}"))


class LineServer(Protocol):
    def handle(self, line: str) -> str: ...


class _WithGoals(Protocol):
    @property
    def goals(self) -> Sequence[object]: ...


State = TypeVar("State", bound=_WithGoals)


def find_state(states: Mapping[int, State], args: JsonObj) -> State | JsonObj:
    """The state `stateId` names, or the index error Pantograph answers for a state it does not hold."""
    state_id = nat_arg(args, "stateId")
    state = states.get(state_id)
    return error_reply("index", f"Invalid state index {state_id}") if state is None else state


def find_goal(states: Mapping[int, State], args: JsonObj) -> tuple[State, int] | JsonObj:
    """`goal.tactic`'s state and goal index (`goalId`, else the first goal), or the index error."""
    state = find_state(states, args)
    if isinstance(state, dict):
        return state
    goal_id = nat_arg(args, "goalId", default=0, optional=True)
    if goal_id >= len(state.goals) and (state.goals or "goalId" in args):
        return error_reply("index", f"Invalid goal index {goal_id}")
    return state, goal_id


def serve(server: LineServer, stdin: IO[bytes], stdout: IO[bytes]) -> int:
    """The REPL loop: `ready.`, then one reply line per request line; an empty line or EOF ends it."""
    stdout.write(b"ready.\n")
    stdout.flush()
    for raw in stdin:
        line = raw.decode("utf-8", errors="replace").strip()
        if not line:
            return 0
        try:
            reply = server.handle(line)
        except RecursionError:  # a request nested past the guards: an error reply, never a dead REPL
            reply = dumps(error_reply("internal", "maximum recursion depth has been reached"))
        stdout.write(reply.encode("utf-8") + b"\n")
        stdout.flush()
    return 0


def run(server: LineServer) -> int:
    """`serve` on this process's stdin and stdout; a closed pipe or Ctrl-C ends it cleanly."""
    try:
        return serve(server, sys.stdin.buffer, sys.stdout.buffer)
    except (BrokenPipeError, KeyboardInterrupt):
        return 0


def command_line(parser: argparse.ArgumentParser, argv: Sequence[str] | None, *, name: str, default: str,
                 supported: str, accept: Callable[[str], PantographVersion]) -> tuple[argparse.Namespace,
                                                                                   PantographVersion] | int:
    """`parser` with Pantograph's `repl` arguments added (`--pantograph-version`, `--version`; module names and
    `--opt=v` flags accepted and ignored, as `repl Mathlib` takes them), read from `argv`: the arguments and the
    version `accept` reads (what it raises is its refusal: one line on stderr, exit 2), or the exit code
    when nothing is to be served (`--version` alone prints the version, exit 0; with other arguments it fails as
    `repl Mathlib --version` does, exit 1)."""
    parser.add_argument("--pantograph-version", default=default,
                        help=f"the Pantograph version to emulate ({supported})")
    parser.add_argument("--version", action="store_true",
                        help="print the emulated Pantograph version and exit (alone, like `repl --version`)")
    args, ignored = parser.parse_known_args(argv)
    try:
        version = accept(args.pantograph_version)
    except (BadInput, ValueError) as exc:  # an unsupported or unparsable version: leankit.version or minilean.server
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    if args.version:
        if ignored:
            # `repl Mathlib --version` reads `--version` as a Lean option and fails (Main.lean, Library.lean).
            print("uncaught exception: Options cannot be parsed: invalid configuration option entry, it must be "
                  "of the form '<key> = <value>'", file=sys.stderr)
            return 1
        print(version)
        return 0
    return args, version


# ---------------------------------------------------------------------------------------------------
# Replies, as each version shapes them.


def default_options(version: PantographVersion) -> JsonObj:
    """`options.print` of a fresh REPL (no `timeout` before 0.3.0)."""
    return {key: value for key, value in DEFAULT_OPTIONS.items() if key != "timeout" or version.timeout_option}


def set_options(options: JsonObj, args: JsonObj) -> JsonObj:
    """`options.set`: types were checked against the version's OptionsSet; keys it does not know are ignored,
    as in Lean."""
    for key in options:
        if args.get(key) is not None:
            options[key] = args[key]
    return {}


def message(version: PantographVersion, text: str, *, severity: str = "error", file_name: str = "<Pantograph>",
            pos: tuple[int, int] | None = None, end: tuple[int, int] | None = None,
            prefixed: bool = True) -> JsonObj | str:
    """One Lean message as `version` writes it: a SerialMessage object (0.3.4+), else Lean's `Message.toString`
    (`file:line:col: severity: text` and a newline; information messages carry no prefix). `prefixed=False` is a
    tactic failure caught as an exception, which Pantograph before 0.3.4 sends as the bare text."""
    line, column = pos or (0, 0)
    if version.message_objects:
        return {
            "severity": severity,
            "pos": {"line": line, "column": column},
            "kind": "hasSorry" if severity == "warning" else "[anonymous]",
            "keepFullRange": False,
            "isSilent": False,
            "fileName": file_name,
            "endPos": None if end is None else {"line": end[0], "column": end[1]},
            "data": text,
            "caption": "",
        }
    if not prefixed:
        return text
    head = "" if severity == "information" else f"{file_name}:{line}:{column}: {severity}: "
    return f"{head}{text}\n"


@dataclass(frozen=True)
class Variable:
    """One hypothesis of a goal: its name as Lean displays it, its type's text, its free variable's unique name."""

    user_name: str
    type_pp: str
    fvar: str
    inaccessible: bool


def goal_object(version: PantographVersion, variables: Sequence[Variable], target: str, mvar: str,
                case: str | None) -> JsonObj:
    """A goal as `version` sends it (names as its wire writes Lean names)."""
    goal: JsonObj = {
        "vars": [{"userName": wire_name(v.user_name, version), "type": {"pp": v.type_pp}, "name": v.fvar,
                  "isInaccessible": v.inaccessible} for v in variables],
        "target": {"pp": target},
        "name": mvar,
    }
    if version.goal_fragment:
        goal["fragment"] = "tactic"
    else:
        goal["isConversion"] = False
    if case is not None:
        goal["userName"] = wire_name(case, version)
    return goal


def flags(version: PantographVersion, has_sorry: bool) -> JsonObj:
    """`hasSorry`/`hasUnsafe`: non-Option fields of GoalTacticResult from 0.3.1, so always written there."""
    return {"hasSorry": has_sorry, "hasUnsafe": False} if version.sorry_flags else {}


def failure(version: PantographVersion, text: str) -> JsonObj:
    """A failed tactic: `tacticErrors` before 0.3.1, `messages` and the flags after."""
    if version.tactic_errors:
        return {"tacticErrors": [text]}
    return {"messages": [message(version, text, prefixed=False)], **flags(version, False)}


def parse_error(version: PantographVersion, problem: str) -> JsonObj:
    """A tactic that does not parse."""
    return {"parseError": problem, **flags(version, False)}


def tactic_success(version: PantographVersion, next_id: int, goals: list[JsonObj], has_sorry: bool) -> JsonObj:
    """A tactic that ran: the new state and its goals (and, from 0.3.1, no messages and the flags)."""
    reply: JsonObj = {"nextStateId": next_id, "goals": goals}
    if version.sorry_flags:
        reply.update({"messages": [], **flags(version, has_sorry)})
    return reply


def interrupt(version: PantographVersion) -> JsonObj:
    """The reply to a tactic Lean's `options.set timeout` interrupted."""
    return error_reply(version.interrupt_kind, "interrupt")


def exactly_one(args: JsonObj, keys: tuple[str, str]) -> JsonObj | None:
    """The `arguments` error of a request that gives both or neither of two alternative fields, else None."""
    if (args.get(keys[0]) is None) == (args.get(keys[1]) is None):
        return error_reply("arguments", f"Exactly one of {{{keys[0]}, {keys[1]}}} must be supplied")
    return None


def tactic_field(version: PantographVersion, args: JsonObj) -> str | JsonObj:
    """Which one of `goal.tactic`'s tactic fields the request gives, or the error reply when it is not exactly
    one."""
    keys: tuple[str, ...]
    if version.mode_field:
        keys, kind_of_error = ("tactic", "mode", "expr", "have", "let", "draft"), "operation"
    else:
        keys, kind_of_error = ("tactic", "expr", "have", "let", "calc", "conv", "draft"), "arguments"
    given = [key for key in keys if args.get(key) is not None]
    if len(given) != 1:
        # 0.2.x names fewer fields in this message than it reads.
        listed = ("tactic", "expr", "have", "calc", "conv") if not version.header_flags else keys
        return error_reply(kind_of_error, f"Exactly one of {{{', '.join(listed)}}} must be supplied")
    return given[0]


def as_tactic(kind: str, value: str, binder: Any) -> str:
    """The tactic text equivalent to a `goal.tactic` request field."""
    if kind == "tactic":
        return value
    if kind == "expr":
        stripped = value.strip()
        if re.match(r"by\b", stripped):
            return stripped[2:]
        return f"exact {stripped}"
    if kind in ("have", "let"):
        name = binder if isinstance(binder, str) and binder else "this"
        return f"{kind} {name} : {value}"
    return f"calc {value}"


def no_goals(version: PantographVersion, options: JsonObj) -> JsonObj:
    """A tactic on a state without goals: an index error without automatic mode, else Lean's failure (from 0.3.3
    a tactic without goalId runs on all goals: here none)."""
    if not options["automaticMode"]:
        return error_reply("index", "No goals to be solved")
    return failure(version, "no goals to be proved")


def root_pp(goal_names: Sequence[str], has_sorry: bool) -> str:
    """The root proof term as the embedded Lean shows it: `?m.N` holes while goals remain, `⋯` for a finished
    proof (Lean elides proof terms so; the embedded Lean keeps none), `sorry` when one was used."""
    if goal_names:
        holes = [f"?m.{name.rsplit('.', 1)[-1]}" for name in goal_names]
        return holes[0] if len(holes) == 1 else f"⟨{', '.join(holes)}⟩"
    return "sorry" if has_sorry else "⋯"


def print_reply(version: PantographVersion, args: JsonObj, goals: Callable[[], list[JsonObj]], *, open_goals: int,
                is_root: bool, has_sorry: bool, root: str) -> JsonObj:
    """`goal.print` of a state with `open_goals` goals (`goals()` writes them, only when asked) whose root prints
    as `root`. Before any tactic the root metavariable is unassigned: Lean prints no root and all flags false."""
    result: JsonObj = {"goals": goals() if args.get("goals") else [], "extraMVars": []}
    assigned = not is_root
    if version.sorry_flags:
        result.update({"rootHasUnsafe": False, "rootHasSorry": assigned and has_sorry,
                       "rootHasMVar": assigned and open_goals > 0})
    if args.get("rootExpr") and assigned:
        result["root"] = {"pp": root}
    if args.get(version.parent_exprs_key):
        if version.goal_fragment:
            result["parentExprs"] = [{"pp": root} for _ in range(open_goals)]
        else:
            result["parent"] = {"pp": root}
    return result


# ---------------------------------------------------------------------------------------------------
# frontend.process: the request's file and what it asks to be written.


def read_file(args: JsonObj) -> tuple[str, str] | JsonObj:
    """(text, name shown in messages) of `frontend.process`'s `file` or `fileName`, or the error reply."""
    refused = exactly_one(args, ("fileName", "file"))
    if refused is not None:
        return refused
    file, file_name = args.get("file"), args.get("fileName")
    if file_name is not None:
        try:
            return Path(str(file_name)).read_text(encoding="utf-8"), str(file_name)
        except OSError as exc:
            return error_reply("io", str(exc))
    return str(file), "<anonymous>"


def reads_header(version: PantographVersion, args: JsonObj) -> bool:
    """Whether the file's `import` header is read: `readHeader` from 0.3.0; before, only for a `fileName` (a
    `file` is elaborated in the REPL's environment from byte 0, where an `import` is an ordinary, failing
    command)."""
    return bool(args.get("readHeader")) if version.header_flags else args.get("fileName") is not None


def wants_sorrys(version: PantographVersion, args: JsonObj) -> bool:
    """`sorrys: true` (up to 0.3.6; from 0.3.7 FrontendProcess has no such field: the key is ignored)."""
    return bool(args.get("sorrys")) and version.process_sorrys


def add_invocations(version: PantographVersion, args: JsonObj, units: Sequence[JsonObj],
                    invocations: Sequence[list[JsonObj]]) -> JsonObj | None:
    """The tactic invocations of each unit where the request asks for them: a Bool up to 0.3.1 (in the units),
    an output path from 0.3.2 (written there, each unit counting its own); None, or the error reply when the
    path cannot be written."""
    if version.invocations_is_path:
        output = args.get("invocations")
        if output is None:
            return None
        try:
            Path(str(output)).write_text(dumps({"units": [{"invocations": tactics} for tactics in invocations]}),
                                         encoding="utf-8")
        except OSError as exc:
            return error_reply("io", str(exc))
        for unit, tactics in zip(units, invocations, strict=True):
            unit["nInvocations"] = len(tactics)
    elif args.get("invocations"):
        for unit, tactics in zip(units, invocations, strict=True):
            unit["invocations"] = tactics
    return None

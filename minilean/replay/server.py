"""The replay Lean server: speaks the Pantograph REPL protocol, answers from a recorded corpus.

    python -m minilean.replay [--corpus PATH] [--latency-ms F] [--pantograph-version V] [ignored args…]
    python -m minilean.replay --version

It prints `ready.`, then answers one compact JSON line per request line `command {json}` until an
empty line or EOF. It emulates one Pantograph version (default 0.3.4, any of 0.2.25 and 0.3.0-0.3.16): that
version's request parsing (`minilean.schema`: a request lacking a required field, or with a wrong type,
gets the same `Unable to parse json: …` error) and reply shapes (messages as strings before 0.3.4, `tacticErrors`
and no sorry flags before 0.3.1, `isConversion` and `parentExpr` before 0.3.3).

Goals, tactics and errors come from the corpus (`burnqed.lean.corpus`): a state is a list of goal ids; a
tactic on goal i is looked up in that goal's recorded transitions, its children replace the goal
(automatic mode: the other goals follow). Tactics the corpus does not know are
answered as Lean would answer a failing tactic, with a message that depends on the tactic's head
(`burnqed.world.messages`, the messages the generated world records for its wrong tactics).
`frontend.distil` (from 0.3.6) and `frontend.process {sorrys: true}` (up to 0.3.6) start a corpus theorem
written in binder form at the recorded goal after `intro <binder names>` (`frontend.binder_start`). The REPL
scope (`frontend.process {inheritEnv: true}`) is recorded (`scope_text`) but recorded tactics are answered
whatever it is: more lenient than Pantograph, because the corpus records outcomes, not how names resolve.
Everything is labelled "replay" by the callers; `docs/replay-corpus.md` describes each command.

Only the standard library and pydantic (through the corpus loader) are imported, so it starts fast.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO

from burnqed.errors import ConfigError, InputError
from burnqed.lean.corpus import (
    Corpus,
    GoalSpec,
    load_corpus,
    split_hypothesis,
)
from burnqed.lean.names import wire_name
from burnqed.lean.version import DEFAULT_EMULATED, PantographVersion, supported_version
from burnqed.lean_text import SORRY_WORDS, read_as_lean
from burnqed.world.messages import corpus_vocabulary, tactic_error
from minilean.replay import frontend
from minilean.replay.states import GoalRef, GoalState, Run, Session, TacticFailure
from minilean.replay.tactics import (
    MAX_NESTING,
    MAX_SLEEP_MS,
    JsonObj,
    dedent,
    goals_pp,
    max_depth,
    parse_problem,
    sequence_problem,
    split_blocks,
    split_top,
    strip_comments,
)
from minilean.replay.wire import (
    DEFAULT_OPTIONS,
    ArgumentError,
    as_tactic,
    dumps,
    error_reply,
    lean_message,
    nat_arg,
    parse_json,
    struct_name,
)
from minilean.schema import request_problem

# `decide` whose proof only the kernel checks, under the option that switches the kernel off (the option's
# name as Lean reads it): Lean adds the auxiliary lemma unchecked and the goal closes, true or false.
KERNEL_OFF = re.compile(r"set_option\s+debug\.skipKernelTC\s+true\s+in\s+"
                        r"decide(?:\s*\+kernel|\s*\(config\s*:=\s*\{\s*kernel\s*:=\s*true\s*\}\)|!)")

# ---------------------------------------------------------------------------------------------------
# The server.


class ReplayServer:
    """The REPL state machine; `handle(line)` answers one request line (pure apart from sleeping)."""

    def __init__(self, corpus: Corpus, latency_ms: float = 0.0, version: PantographVersion = DEFAULT_EMULATED) -> None:
        self.corpus = corpus
        self.latency_ms = latency_ms
        self.version = version
        self.options: JsonObj = {
            key: value for key, value in DEFAULT_OPTIONS.items() if key != "timeout" or version.timeout_option
        }
        self.states: dict[int, GoalState] = {}
        self.next_state_id = 0
        # Metavariable/free-variable counter: deterministic, never reset (like Lean's name generator).
        self.next_uniq = 1
        self.vocabulary = corpus_vocabulary(corpus)
        self._commands = {
            "reset": self.reset,
            "stat": self.stat,
            "options.set": self.options_set,
            "options.print": self.options_print,
            "goal.start": self.goal_start,
            "goal.tactic": self.goal_tactic,
            "goal.delete": self.goal_delete,
            "goal.print": self.goal_print,
            "frontend.process": self.frontend_process,
        }
        if version.distil:
            self._commands["frontend.distil"] = self.frontend_distil
        # The scope `goal.tactic` would run in (set by `frontend.process {inheritEnv: true}`): the text of the
        # last header loaded. Recorded tactics are answered whatever it is (the corpus records outcomes, not
        # the names a scope resolves); it is kept so a test can see which header a worker loaded.
        self.scope_text = ""

    def restart(self) -> None:
        """A new process: no states, the empty scope (the name counter goes on, so names stay unique)."""
        self.reset({})
        self.scope_text = ""

    # -- framing ------------------------------------------------------------------------------------

    def handle(self, line: str) -> str:
        """The reply line (without newline) for one non-empty request line."""
        text = line.strip()
        if text.startswith("{"):
            # Pantograph also accepts `{"cmd": ..., "payload": ...}` on one line.
            wrapped, problem = parse_json(text)
            if problem is not None:
                return dumps(error_reply("command", f"Unable to parse json: {problem}"))
            if not isinstance(wrapped, dict) or not isinstance(wrapped.get("cmd"), str):
                return dumps(error_reply("command", "Unable to parse json: cmd: String expected"))
            command, payload = wrapped["cmd"], wrapped.get("payload", {})
        else:
            command, _, body = text.partition(" ")
            payload, problem = parse_json(body) if body.strip() else ({}, None)
            if problem is not None:
                return dumps(error_reply("command", f"Unable to parse json: {problem}"))
        handler = self._commands.get(command)
        if handler is None:
            return dumps(error_reply("command", f"Unknown command {command}"))
        # Lean reads every field of a payload that is not an object (null included) as null.
        args = payload if isinstance(payload, dict) else {}
        problem = request_problem(self.version, command, args)
        if problem is not None:
            return dumps(error_reply("command", f"Unable to parse json: {problem}"))
        try:
            return dumps(handler(args))
        except ArgumentError as exc:
            return dumps(
                error_reply("command", f"Unable to parse json: {struct_name(command)}.{exc.field}: {exc.expected}")
            )

    # -- helpers ------------------------------------------------------------------------------------

    def uniq(self) -> str:
        name = f"_uniq.{self.next_uniq}"
        self.next_uniq += 1
        return name

    def new_state(self, state: GoalState) -> int:
        state_id = self.next_state_id
        self.states[state_id] = state
        self.next_state_id += 1
        return state_id

    def goal_json(self, session: Session, ref: GoalRef) -> JsonObj:
        spec = session.theorem.goals[ref.goal_id]
        variables = []
        for hyp in spec.hyps:
            for name, type_ in split_hypothesis(hyp):
                fvar = session.fvars.get((name, type_))
                if fvar is None:
                    fvar = session.fvars[(name, type_)] = self.uniq()
                # the corpus records names as Lean displays them; the emulated version puts them on the wire
                variables.append({"userName": wire_name(name, self.version), "type": {"pp": type_}, "name": fvar,
                                  "isInaccessible": name.endswith("✝")})
        goal: JsonObj = {"vars": variables, "target": {"pp": spec.target}, "name": ref.name}
        if self.version.goal_fragment:
            goal["fragment"] = "tactic"
        else:
            goal["isConversion"] = False
        if spec.case is not None:
            goal["userName"] = wire_name(spec.case, self.version)
        return goal

    def specs(self, session: Session, goals: Iterable[GoalRef]) -> list[GoalSpec]:
        return [session.theorem.goals[ref.goal_id] for ref in goals]

    def message(
        self,
        text: str,
        *,
        severity: str = "error",
        file_name: str = "<Pantograph>",
        pos: tuple[int, int] | None = None,
        end: tuple[int, int] | None = None,
        prefixed: bool = True,
    ) -> JsonObj | str:
        """One Lean message as this version writes it: a SerialMessage object (0.3.4), else Lean's
        `Message.toString`: `file:line:col: severity: text` and a newline (no prefix for information).
        `prefixed=False` is a tactic failure caught as an exception, which Pantograph < 0.3.4 sends bare."""
        if self.version.message_objects:
            extra: JsonObj = {"kind": "hasSorry" if severity == "warning" else "[anonymous]"}
            if pos is not None:
                extra["pos"] = {"line": pos[0], "column": pos[1]}
            if end is not None:
                extra["endPos"] = {"line": end[0], "column": end[1]}
            return lean_message(text, severity=severity, file_name=file_name, **extra)
        if not prefixed:
            return text
        line, column = pos or (0, 0)
        head = "" if severity == "information" else f"{file_name}:{line}:{column}: {severity}: "
        return f"{head}{text}\n"

    # -- tactic execution ---------------------------------------------------------------------------

    def execute(self, session: Session, goals: tuple[GoalRef, ...], text: str, run: Run) -> tuple[GoalRef, ...]:
        """Run a tactic script on `goals` (the first is the main goal); raises TacticFailure."""
        text = dedent(text)
        stripped = text.strip()
        if stripped in ("skip", ""):
            return goals
        if stripped == "done":
            if goals:
                raise TacticFailure(f"unsolved goals\n{goals_pp(self.specs(session, goals))}")
            return goals
        if not goals:
            raise TacticFailure("no goals to be proved")
        theorem = session.theorem
        first, rest = goals[0], goals[1:]
        recorded = theorem.lookup(first.goal_id, stripped)
        if recorded is not None:
            if recorded.error is not None:
                raise TacticFailure(recorded.error)
            assert recorded.result is not None
            return tuple(GoalRef(child, self.uniq()) for child in recorded.result) + rest
        return self._compound(session, goals, stripped, run)

    def _compound(self, session: Session, goals: tuple[GoalRef, ...], stripped: str, run: Run) -> tuple[GoalRef, ...]:
        """`execute` past the recorded answers: blocks, combinators, `;` and `<;>` sequences, then one tactic."""
        first, rest = goals[0], goals[1:]
        blocks = split_blocks(stripped)
        if len(blocks) > 1:
            for block in blocks:
                goals = self.execute(session, goals, block, run)
            return goals
        # `try`/`all_goals`/… take the whole tactic sequence after them, so they bind looser than `;`.
        combinator = re.match(r"(all_goals|any_goals|try|focus)\s+(.*)$", stripped, re.DOTALL)
        if combinator is not None:
            return self._combinator(session, goals, combinator.group(1), combinator.group(2), run)
        pieces = split_top(stripped, re.compile(r";(?!>)"))
        pieces = [piece for piece in pieces if piece.strip()]
        if len(pieces) > 1:
            for piece in pieces:
                goals = self.execute(session, goals, piece, run)
            return goals
        alternatives = split_top(stripped, re.compile(r"<;>"))
        if len(alternatives) > 1:
            current = self.execute(session, (first,), alternatives[0], run)
            for piece in alternatives[1:]:
                current = tuple(ref for goal in current for ref in self.execute(session, (goal,), piece, run))
            return current + rest
        return self._single(session, goals, stripped, run)

    def _single(self, session: Session, goals: tuple[GoalRef, ...], stripped: str, run: Run) -> tuple[GoalRef, ...]:
        """One tactic that is not a sequence: a focus dot, parentheses, `case`, `sorry`, a kernel bypass, `sleep`."""
        first, rest = goals[0], goals[1:]
        if stripped[0] == "·" or stripped.startswith(". "):
            inner = self.execute(session, (first,), " " + stripped[1:], run)
            if inner:
                raise TacticFailure(f"unsolved goals\n{goals_pp(self.specs(session, inner))}")
            return rest
        if stripped.startswith("(") and stripped.endswith(")") and len(split_top(stripped, re.compile("$^"))) == 1:
            return self.execute(session, goals, stripped[1:-1], run)
        case = re.match(r"(case|next)\b\s*([^=]*?)\s*=>\s*(.*)$", stripped, re.DOTALL)
        if case is not None:
            return self._case(session, goals, case, run)
        if SORRY_WORDS.search(stripped):
            run.sorried.append(first)
            return rest
        if KERNEL_OFF.fullmatch(read_as_lean(stripped)):
            # As Lean: `decide`'s auxiliary lemma goes in without the kernel, which alone would have refused it.
            run.unchecked = True
            return rest
        sleep = re.fullmatch(r"sleep\s+(\d+)", stripped)
        if sleep is not None:
            run.sleep_ms += min(int(sleep.group(1)), MAX_SLEEP_MS)
            return goals
        raise TacticFailure(tactic_error(session.theorem.goals[first.goal_id], stripped, self.vocabulary))

    def execute_guarded(
        self, session: Session, goals: tuple[GoalRef, ...], text: str, run: Run
    ) -> tuple[GoalRef, ...]:
        """`execute`, with absurdly nested input answered like Lean's recursion limit instead of crashing."""
        limit = "maximum recursion depth has been reached\nuse `set_option maxRecDepth <num>` to increase limit"
        # Deep bracket nesting is refused up front: unwinding it level by level is quadratic.
        if max_depth(text) > MAX_NESTING:
            raise TacticFailure(limit)
        try:
            return self.execute(session, goals, text, run)
        except RecursionError:
            raise TacticFailure(limit) from None

    def _combinator(
        self, session: Session, goals: tuple[GoalRef, ...], name: str, body: str, run: Run
    ) -> tuple[GoalRef, ...]:
        if name == "try":
            try:
                return self.execute(session, goals, body, run)
            except TacticFailure:
                return goals
        if name == "focus":
            return self.execute(session, (goals[0],), body, run) + goals[1:]
        result: list[GoalRef] = []
        progressed = False
        for goal in goals:
            try:
                result.extend(self.execute(session, (goal,), body, run))
                progressed = True
            except TacticFailure:
                if name == "all_goals":
                    raise
                result.append(goal)
        if not progressed:
            raise TacticFailure(f"{name} failed on every goal")
        return tuple(result)

    def _case(
        self, session: Session, goals: tuple[GoalRef, ...], case: re.Match[str], run: Run
    ) -> tuple[GoalRef, ...]:
        """`case tag => tac` / `next => tac`: focus the goal, which `tac` must close."""
        keyword, tag, body = case.group(1), case.group(2), case.group(3)
        index = 0
        if keyword == "case":
            wanted = (tag.split(maxsplit=1) or [""])[0]
            matches = [
                i
                for i, ref in enumerate(goals)
                if (tag_of := session.theorem.goals[ref.goal_id].case) is not None
                and (tag_of == wanted or tag_of.split(".")[-1] == wanted)
            ]
            if not matches:
                raise TacticFailure(f"Case tag '{wanted}' not found.\n\nThere are no cases to select.")
            index = matches[0]
        inner = self.execute(session, (goals[index],), body, run)
        if inner:
            raise TacticFailure(f"unsolved goals\n{goals_pp(self.specs(session, inner))}")
        return goals[:index] + goals[index + 1 :]

    # -- commands -----------------------------------------------------------------------------------

    def reset(self, _: JsonObj) -> JsonObj:
        count = len(self.states)
        self.states.clear()
        self.next_state_id = 0
        return {"nGoals": count}

    def stat(self, _: JsonObj) -> JsonObj:
        return {"nGoals": len(self.states)}

    def options_set(self, args: JsonObj) -> JsonObj:
        # Types were checked against this version's OptionsSet; keys it does not know are ignored, as in Lean.
        for key in self.options:
            if args.get(key) is not None:
                self.options[key] = args[key]
        return {}

    def options_print(self, _: JsonObj) -> JsonObj:
        return dict(self.options)

    def goal_start(self, args: JsonObj) -> JsonObj:
        expr, copy_from = args.get("expr"), args.get("copyFrom")
        if (expr is None) == (copy_from is None):
            return error_reply("arguments", "Exactly one of {expr, copyFrom} must be supplied")
        if copy_from is not None:
            if not isinstance(copy_from, str):
                raise ArgumentError("copyFrom?", "String expected")
            theorem = self.corpus.by_name(copy_from)
            if theorem is None:
                return error_reply("index", f"Symbol not found: {copy_from}")
        else:
            if not isinstance(expr, str):
                raise ArgumentError("expr?", "String expected")
            problem = parse_problem(expr.replace("\n", " ")) if any(c in expr for c in '()[]{}⟨⟩"') else None
            if problem is not None and "unknown tactic" not in problem:
                return error_reply("parsing", problem.replace("<input>", "<stdin>"))
            theorem = self.corpus.by_statement(expr)
            if theorem is None:
                return error_reply(
                    "elab",
                    "replay: no theorem of the replay corpus has this statement (whitespace-insensitive); "
                    f"the replay server can only start recorded statements: {' '.join(expr.split())}",
                )
        root = self.uniq()
        session = Session(theorem=theorem, root=root)
        state_id = self.new_state(
            GoalState(session=session, goals=(GoalRef(theorem.root, root),), has_sorry=False, is_root=True)
        )
        return {"stateId": state_id, "root": root}

    def goal_tactic(self, args: JsonObj) -> JsonObj:
        state_id = nat_arg(args, "stateId")
        goal_id = nat_arg(args, "goalId", default=0, optional=True)
        state = self.states.get(state_id)
        if state is None:
            return error_reply("index", f"Invalid state index {state_id}")
        if goal_id >= len(state.goals) and (state.goals or "goalId" in args):
            return error_reply("index", f"Invalid goal index {goal_id}")
        kind = self._tactic_field(args)
        if not isinstance(kind, str):
            return kind
        value = args[kind]
        if kind in {"conv", "draft", "mode"}:
            return error_reply("invalid", f"replay: `{kind}` is not supported by the replay server")
        tactic = as_tactic(kind, value, args.get("binderName"))
        problem = parse_problem(strip_comments(tactic))
        if problem is None and kind == "tactic":
            problem = sequence_problem(tactic)
        if problem is not None:
            self._delay(0)
            return {"parseError": problem, **self._flags(False)}
        if not state.goals:
            if not self.options["automaticMode"]:
                return error_reply("index", "No goals to be solved")
            # From 0.3.3 a tactic without goalId runs on all goals: here none, so it fails like Lean's.
            return self._failure("no goals to be proved")
        return self._run_tactic(state, goal_id, tactic)

    def _tactic_field(self, args: JsonObj) -> str | JsonObj:
        """Which one of the tactic fields the request gives, or the error reply when it is not exactly one."""
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
        return given[0]

    def _run_tactic(self, state: GoalState, goal_id: int, tactic: str) -> JsonObj:
        """Run a checked tactic on goal `goal_id` of `state`: the new state's reply, or the failure's."""
        session = state.session
        focus = state.goals[goal_id]
        others = state.goals[:goal_id] + state.goals[goal_id + 1 :]
        run = Run()
        try:
            produced = self.execute_guarded(session, (focus,), strip_comments(tactic), run)
        except TacticFailure as failure:
            if self._delay(run.sleep_ms):
                return error_reply(self.version.interrupt_kind, "interrupt")
            return self._failure(failure.message)
        if self._delay(run.sleep_ms):
            return error_reply(self.version.interrupt_kind, "interrupt")
        goals = produced + others if self.options["automaticMode"] else produced
        has_sorry = bool(run.sorried)
        next_id = self.new_state(GoalState(session=session, goals=goals, has_sorry=state.has_sorry or has_sorry))
        reply: JsonObj = {"nextStateId": next_id, "goals": [self.goal_json(session, ref) for ref in goals]}
        if self.version.sorry_flags:
            reply.update({"messages": [], **self._flags(has_sorry)})
        return reply

    def _flags(self, has_sorry: bool) -> JsonObj:
        """`hasSorry`/`hasUnsafe`: non-Option fields of GoalTacticResult from 0.3.1, so always written."""
        return {"hasSorry": has_sorry, "hasUnsafe": False} if self.version.sorry_flags else {}

    def _failure(self, text: str) -> JsonObj:
        """A failed tactic: `tacticErrors` before 0.3.1, `messages` and the flags after."""
        if self.version.tactic_errors:
            return {"tacticErrors": [text]}
        return {"messages": [self.message(text, prefixed=False)], **self._flags(False)}

    def _delay(self, sleep_ms: int) -> bool:
        """Sleep the configured latency plus `sleep N` tactics; True if Lean's timeout would interrupt."""
        total = self.latency_ms + sleep_ms
        timeout = int(self.options.get("timeout", 0))  # 0.2.x has no Lean-side timeout
        interrupted = timeout > 0 and total > timeout
        if interrupted:
            total = timeout
        if total > 0:
            time.sleep(total / 1000)
        return interrupted

    def goal_delete(self, args: JsonObj) -> JsonObj:
        for state_id in args["stateIds"]:
            self.states.pop(state_id, None)
        return {}

    def goal_print(self, args: JsonObj) -> JsonObj:
        state_id = nat_arg(args, "stateId")
        state = self.states.get(state_id)
        if state is None:
            return error_reply("index", f"Invalid state index {state_id}")
        root_pp = self._root_pp(state)
        result: JsonObj = {
            "goals": [self.goal_json(state.session, ref) for ref in state.goals] if args.get("goals") else [],
            "extraMVars": [],
        }
        if self.version.sorry_flags:
            # Before any tactic the root metavariable is unassigned: Lean prints no root and all flags false.
            assigned = not state.is_root
            result.update({"rootHasUnsafe": False, "rootHasSorry": assigned and state.has_sorry,
                           "rootHasMVar": assigned and bool(state.goals)})
        if args.get("rootExpr") and not state.is_root:
            result["root"] = {"pp": root_pp}
        if args.get(self.version.parent_exprs_key):
            parent = {"pp": root_pp}
            if self.version.goal_fragment:
                result["parentExprs"] = [parent for _ in state.goals]
            else:
                result["parent"] = parent
        return result

    @staticmethod
    def _root_pp(state: GoalState) -> str:
        holes = [f"?m.{ref.name.rsplit('.', 1)[-1]}" for ref in state.goals]
        if state.goals:
            return holes[0] if len(holes) == 1 else f"⟨{', '.join(holes)}⟩"
        # Lean elides proof terms as `⋯`; a sorry'd proof shows `sorry`.
        return "sorry" if state.has_sorry else "⋯"

    def frontend_process(self, args: JsonObj) -> JsonObj:
        reply = frontend.process(self, args)
        if self.version.header_flags and args.get("inheritEnv") and "units" in reply:
            self.scope_text = str(args.get("file") or "")
        return reply

    def frontend_distil(self, args: JsonObj) -> JsonObj:
        return frontend.distil(self, args)


# ---------------------------------------------------------------------------------------------------
# Process entry point.


def serve(server: ReplayServer, stdin: IO[bytes], stdout: IO[bytes]) -> int:
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


CONFORMANCE_CORPUS = Path(__file__).parent / "conformance.json"


def with_conformance(corpus: Corpus) -> Corpus:
    """`corpus` and the theorems `burnqed lean selftest` starts and proves (`conformance.json`, recorded as Lean
    answers them under miniF2F's header), unless it already has theorems of those names. They are in no theorem
    index, so nothing searches or trains on them; the server answers them like any recorded theorem."""
    known = {theorem.name for theorem in corpus.theorems}
    extra = [theorem for theorem in load_corpus(CONFORMANCE_CORPUS).theorems if theorem.name not in known]
    return Corpus(name=corpus.name, theorems=[*corpus.theorems, *extra]) if extra else corpus


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m minilean.replay",
        description="Pantograph-protocol Lean server that answers from a recorded corpus (no Lean needed).",
    )
    parser.add_argument("--corpus", type=Path, default=None,
                        help="corpus file or folder (default: the embedded corpus, bundled theorems + generated world)")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="sleep before each goal.tactic reply")
    parser.add_argument("--pantograph-version", default=str(DEFAULT_EMULATED),
                        help="the Pantograph version to emulate (0.2.25, 0.3.0-0.3.16)")
    parser.add_argument("--version", action="store_true",
                        help="print the emulated Pantograph version and exit (alone, like `repl --version`)")
    # Real Pantograph takes module names and `--opt=v` flags (`repl Mathlib`): accept and ignore them.
    args, ignored = parser.parse_known_args(argv)
    try:
        version = supported_version(args.pantograph_version, "--pantograph-version")
    except ConfigError as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    if args.version:
        if ignored:
            # `repl Mathlib --version` reads `--version` as a Lean option and fails (Main.lean, Library.lean).
            print("uncaught exception: Options cannot be parsed: invalid configuration option entry, it must be "
                  "of the form '<key> = <value>'", file=sys.stderr)
            return 1
        print(version)
        return 0
    from burnqed.world import embedded_corpus  # the default corpus: the bundled theorems and the generated world

    try:
        corpus = with_conformance(load_corpus(args.corpus) if args.corpus is not None else embedded_corpus())
    except InputError as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    server = ReplayServer(corpus, latency_ms=max(0.0, args.latency_ms), version=version)
    try:
        return serve(server, sys.stdin.buffer, sys.stdout.buffer)
    except (BrokenPipeError, KeyboardInterrupt):
        return 0

"""The minilean REPL: Pantograph's commands over stdin/stdout, answered by minilean's elaborator and tactics.

    python -m minilean [--pantograph-version V] [ignored module names / --opt=v …]
    python -m minilean --version

It prints `ready.`, then one compact JSON line per request line `command {json}` (or `{"cmd", "payload"}`)
until an empty line or EOF. Commands: `options.set`, `options.print`, `goal.start` (`expr`, or `copyFrom` a
theorem an earlier `frontend.process` with `inheritEnv` declared), `goal.tactic` (`tactic`, `expr`, `have`,
`draft`: each `sorry` of a sketch a goal), `goal.print`, `goal.delete`, `frontend.process`, `frontend.distil`
(0.3.6+), `reset`, `stat`. Requests are
parsed like the emulated Pantograph version parses them and replies have its shapes: the embedded Lean's one
wire layer (`minilean.wire`, shared with the replay server).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from leankit.version import DEFAULT_EMULATED, V0_3_6, PantographVersion
from leankit.version import SUPPORTED as PANTOGRAPH
from minilean import frontend, wire
from minilean.constants import Env, using
from minilean.elab import ElabError, is_type, subst_many
from minilean.elaborator import Elaborator, elaborate_prop
from minilean.fallback import Fallback
from minilean.goals import Goal, TacticError, pp_goals
from minilean.parser import ParseError, TermTooDeep, parse
from minilean.proof_states import Declared, State
from minilean.syntax import pp
from minilean.tactic_parse import parse_problem
from minilean.tactics import Engine
from minilean.wire import JsonObj, serve

MAX_SLEEP_MS = 600_000
# The Pantograph versions minilean emulates: up to 0.3.6, the last whose `frontend.process` starts sorries itself.
SUPPORTED = tuple(version for version in PANTOGRAPH if version <= V0_3_6)
DEFAULT_VERSION = DEFAULT_EMULATED


@dataclass
class Server:
    version: PantographVersion = DEFAULT_VERSION
    options: JsonObj = field(default_factory=dict)
    states: dict[int, State] = field(default_factory=dict)
    env: dict[str, Declared] = field(default_factory=dict)
    next_state_id: int = 0
    next_uniq: int = 1
    fallback: Fallback | None = None

    def __post_init__(self) -> None:
        if not self.options:
            self.options = wire.default_options(self.version)

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

    def constants(self) -> Env:
        """The definitions of the REPL's environment (those a `frontend.process` with `inheritEnv` declared)."""
        return {name: found.definition for name, found in self.env.items() if found.definition is not None}

    def goal_json(self, goal: Goal) -> JsonObj:
        variables = [wire.Variable(h.name, pp(h.ty), h.uniq, h.inaccessible) for h in goal.hyps]
        return wire.goal_object(self.version, variables, pp(goal.target), goal.mvar, goal.case or None)

    # -- framing --------------------------------------------------------------------------------

    def handle(self, line: str) -> str:
        return wire.answer(line, self.version, {
            "reset": self.reset, "stat": self.stat, "options.set": self.options_set,
            "options.print": self.options_print, "goal.start": self.goal_start, "goal.tactic": self.goal_tactic,
            "goal.delete": self.goal_delete, "goal.print": self.goal_print, "expr.echo": wire.echo_numeral,
            "frontend.process": self.frontend_process,
            **({"frontend.distil": self.frontend_distil} if self.version.distil else {}),
        })

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
        wire.set_options(self.options, args)
        if self.fallback is not None:
            self.fallback.remember("options.set", args)
        return {}

    def options_print(self, _: JsonObj) -> JsonObj:
        return dict(self.options)

    def goal_start(self, args: JsonObj) -> JsonObj:
        refused = wire.exactly_one(args, ("expr", "copyFrom"))
        if refused is not None:
            return refused
        expr, copy_from = args.get("expr"), args.get("copyFrom")
        if copy_from is not None:
            declared = self.env.get(copy_from)
            if declared is None:
                if self.fallback is not None:
                    return self.fallback.start(args)
                return wire.error_reply("index", f"Symbol not found: {copy_from}")
            statement = declared.statement
        else:
            try:
                with using(self.constants()):
                    statement = elaborate_prop(parse(str(expr)), {})
            except TermTooDeep as exc:  # a limit of the embedded Lean as a whole: answered here, not by the fallback
                return wire.error_reply("elab", exc.message)
            except ParseError as exc:
                return self._outside(args, "parsing", f"<stdin>:1:{exc.column}: {exc.message}")
            except ElabError as exc:
                return self._outside(args, "elab", exc.message)
        root = self.uniq()
        state_id = self.new_state(State((Goal((), statement, None, root),), is_root=True, root=root,
                                        constants=self.constants()))
        return {"stateId": state_id, "root": root}

    def _outside(self, args: JsonObj, kind: str, reason: str) -> JsonObj:
        """A `goal.start` of an expression minilean cannot parse or elaborate (`reason`): the fallback's state when
        it starts one; else minilean's own error, the fallback's refusal after it (a fallback that did not answer,
        an `internal` error, is passed on as it is)."""
        if self.fallback is None:
            return wire.error_reply(kind, reason)
        reply = self.fallback.start(args)
        if "error" not in reply or reply["error"] == "internal":
            return reply
        refusal = str(reply.get("desc", reply["error"])).split("\n")[0]
        return wire.error_reply(kind, f"{reason}\n(its fallback REPL did not start it either: {refusal})")

    def goal_tactic(self, args: JsonObj) -> JsonObj:
        if self.fallback is not None and self.remote(args):
            return self.fallback.on_state("goal.tactic", args)
        found = wire.find_goal(self.states, args)
        if isinstance(found, dict):
            return found
        state, goal_id = found
        kind = wire.tactic_field(self.version, args)
        if not isinstance(kind, str):
            return kind
        value = str(args[kind])
        if kind == "draft":
            return self._draft(state, goal_id, value)
        if kind in ("conv", "mode", "calc"):
            return wire.error_reply("invalid", f"minilean: `{kind}` is outside minilean's fragment")
        tactic = wire.as_tactic(kind, value, args.get("binderName"))
        problem = parse_problem(tactic, single=kind == "tactic")
        if problem is not None:
            return wire.parse_error(self.version, problem)
        if not state.goals:
            return wire.no_goals(self.version, self.options)
        return self._run_tactic(state, goal_id, tactic)

    def _run_tactic(self, state: State, goal_id: int, tactic: str) -> JsonObj:
        """`goal.tactic`'s tactic run on the goal `goal_id` of `state` (a type to fill: `_fill`): the new state, or
        Lean's failure or interruption."""
        focus = state.goals[goal_id]
        others = state.goals[:goal_id] + state.goals[goal_id + 1 :]
        if is_type(focus.target):
            return self._fill(state, focus, others, tactic)
        engine = Engine(self.uniq)
        started = time.perf_counter()
        try:
            with using(state.constants):
                produced = engine.run((focus,), tactic)
        except TacticError as exc:
            if self._interrupted(engine.run_info.sleep_ms, started):
                return wire.interrupt(self.version)
            return wire.failure(self.version, exc.message)
        except Exception as exc:  # a bug in minilean must fail the tactic, never kill the REPL or pass it
            return wire.failure(self.version, f"minilean: internal error: {type(exc).__name__}: {exc}")
        if self._interrupted(engine.run_info.sleep_ms, started):
            return wire.interrupt(self.version)
        goals = produced + others if self.options["automaticMode"] else produced
        has_sorry = engine.run_info.sorried
        next_id = self.new_state(State(goals, state.has_sorry or has_sorry, False, state.root, state.constants))
        return wire.tactic_success(self.version, next_id, [self.goal_json(g) for g in goals], has_sorry)

    def _draft(self, state: State, goal_id: int, term: str) -> JsonObj:
        """`goal.tactic {draft}` (Pantograph's `Tactic/Assign.lean`, evalDraft): the term elaborated against the goal,
        every `sorry` in it a new goal with the context at its place (a `have` before it in scope), in source order,
        the other goals after them (automatic mode); the term's own tactics must close what they leave, or it fails
        with Lean's message. No `hasSorry`: each sorry became a goal."""
        if not state.goals:
            return wire.no_goals(self.version, self.options)
        stripped = term.strip()
        script = stripped[2:] if re.match(r"by(?![\w'])", stripped) else f"exact {stripped}"
        problem = parse_problem(script, single=False)
        if problem is not None:
            return wire.parse_error(self.version, problem)
        focus = state.goals[goal_id]
        others = state.goals[:goal_id] + state.goals[goal_id + 1 :]
        engine = Engine(self.uniq)
        try:
            with using(state.constants):
                remaining = engine.run((focus,), script)
        except TacticError as exc:
            return wire.failure(self.version, exc.message)
        except Exception as exc:  # a bug in minilean must fail the draft, never kill the REPL or pass it
            return wire.failure(self.version, f"minilean: internal error: {type(exc).__name__}: {exc}")
        if remaining:
            return wire.failure(self.version, f"unsolved goals\n{pp_goals(remaining)}")
        holes = tuple(Goal(goal.hyps, goal.target, None, self.uniq()) for goal in engine.run_info.sorried_goals)
        goals = holes + others if self.options["automaticMode"] else holes
        next_id = self.new_state(State(goals, state.has_sorry, False, state.root, state.constants))
        return wire.tactic_success(self.version, next_id, [self.goal_json(g) for g in goals], False)

    def _fill(self, state: State, focus: Goal, others: tuple[Goal, ...], tactic: str) -> JsonObj:
        """A goal that is a value of a type (a definition's `sorry`, `?sol : ℕ`): `exact v` assigns it, and a goal
        coupled to it (named by the definition, as `frontend.distil` names it) sees `v` in place of `?sol`."""
        found = re.fullmatch(r"\s*exact\s+(.+?)\s*", tactic, re.DOTALL)
        if found is None:
            return wire.failure(self.version, f"minilean: only `exact` fills a goal of type {pp(focus.target)} (a "
                                "value, not a proposition)")
        try:
            with using(state.constants):
                value = Elaborator(focus.ctx).value(parse(found.group(1)), focus.target)
        except (ElabError, ParseError) as exc:
            return wire.failure(self.version, exc.message)
        if focus.case is not None:
            others = tuple(Goal(goal.hyps, subst_many(goal.target, {f"?{focus.case}": value}), goal.case, goal.mvar)
                           for goal in others)
        goals = others if self.options["automaticMode"] else ()
        next_id = self.new_state(State(goals, state.has_sorry, False, state.root, state.constants))
        return wire.tactic_success(self.version, next_id, [self.goal_json(g) for g in goals], False)

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
        state = wire.find_state(self.states, args)
        if isinstance(state, dict):
            return state
        # minilean keeps no proof terms: the root shows as its holes, or `⋯` (as Lean elides a big proof)
        root = wire.root_pp([goal.mvar for goal in state.goals], state.has_sorry)
        return wire.print_reply(self.version, args, lambda: [self.goal_json(goal) for goal in state.goals],
                                open_goals=len(state.goals), is_root=state.is_root, has_sorry=state.has_sorry,
                                root=root)

    def frontend_process(self, args: JsonObj) -> JsonObj:
        reply = frontend.process(self, args)
        if self.fallback is not None and args.get("inheritEnv") and "units" in reply \
                and not any(unit.get("goalStateId") is not None for unit in reply["units"]):
            self.fallback.remember("frontend.process", args)  # a header scope the fallback must share
        return reply

    def frontend_distil(self, args: JsonObj) -> JsonObj:
        return frontend.distil(self, args)


# ---------------------------------------------------------------------------------------------------
# Process entry point.


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minilean",
                                     description="A small Lean 4 with real semantics behind the Pantograph protocol.")
    parser.add_argument("--fallback-module", default=None, metavar="MODULE",
                        help="a Python module speaking the same protocol (`python -m MODULE`) that answers what is "
                        "outside minilean's fragment (minilean/fallback.py), e.g. minilean.replay")
    read = wire.command_line(parser, argv, name="minilean", default=str(DEFAULT_VERSION),
                             supported=", ".join(map(str, SUPPORTED)), accept=_emulated)
    if isinstance(read, int):
        return read
    args, version = read
    sys.setrecursionlimit(10_000)
    server = Server(version=version)
    if args.fallback_module:
        argv = [sys.executable, "-m", args.fallback_module, "--pantograph-version", str(version)]
        server.fallback = Fallback(argv, server.allocate)
    try:
        return wire.run(server)
    finally:
        if server.fallback is not None:
            server.fallback.close()


def _emulated(text: str) -> PantographVersion:
    """The version `--pantograph-version` names, if minilean emulates it; ValueError otherwise."""
    version = PantographVersion.parse(text)
    if version not in SUPPORTED:
        raise ValueError(f"Pantograph {version} is not emulated (supported: {', '.join(map(str, SUPPORTED))})")
    return version


__all__ = ["Server", "main", "serve"]

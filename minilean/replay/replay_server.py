"""The replay Lean server: the Pantograph REPL protocol answered from a recorded corpus (`leankit.corpus`).

    python -m minilean.replay [--corpus PATH] [--latency-ms F] [--pantograph-version V] [ignored args…]
    MINILEAN_REPLAY_LATENCY_MS=F python -m minilean.replay …   # the latency's default
    python -m minilean.replay --version
    ReplayServer(load_corpus()).handle('goal.start {"copyFrom": "logic_or_comm"}')   # in-process, one reply line

A state is a list of corpus goals. A tactic is looked up among its goal's recorded transitions, else taken apart
as Lean would (blocks, `;`, `<;>`, combinators), else answered with the failure its head gets
(`leankit.world.messages`). It emulates one Pantograph version through the embedded Lean's wire layer
(`minilean.wire`); docs/replay-corpus.md describes each command and the corpus format.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from leankit.corpus import (
    Corpus,
    GoalSpec,
    goals_pp,
    load_corpus,
    split_hypothesis,
)
from leankit.failures import BadInput
from leankit.text import SORRY_WORDS, read_as_lean
from leankit.version import DEFAULT_EMULATED, SUPPORTED_TEXT, PantographVersion, supported_version
from leankit.world.messages import corpus_vocabulary, tactic_error
from minilean import wire
from minilean.replay import corpus_cache, replay_frontend
from minilean.replay.states import GoalRef, GoalState, Run, Session, TacticFailure
from minilean.replay.tactic_reader import (
    MAX_NESTING,
    MAX_SLEEP_MS,
    dedent,
    max_depth,
    parse_problem,
    sequence_problem,
    split_blocks,
    split_top,
    strip_comments,
)
from minilean.wire import JsonObj, serve

# `decide` whose proof only the kernel checks, under the option that switches the kernel off (the option's
# name as Lean reads it): Lean adds the auxiliary lemma unchecked and the goal closes, true or false.
KERNEL_OFF = re.compile(r"set_option\s+debug\.skipKernelTC\s+true\s+in\s+"
                        r"decide(?:\s*\+kernel|\s*\(config\s*:=\s*\{\s*kernel\s*:=\s*true\s*\}\)|!)")

# ---------------------------------------------------------------------------------------------------
# The server.


class ReplayServer:
    """The REPL state machine; `handle(line)` answers one request line (pure apart from sleeping)."""

    def __init__(self, corpus: Corpus, latency_ms: float = 0.0, version: PantographVersion = DEFAULT_EMULATED,
                 vocabulary: frozenset[str] | None = None) -> None:
        """`vocabulary`: `corpus_vocabulary(corpus)` when the caller has it (a cached start), else computed."""
        self.corpus = corpus
        self.latency_ms = latency_ms
        self.version = version
        self.options: JsonObj = wire.default_options(version)
        self.states: dict[int, GoalState] = {}
        self.next_state_id = 0
        # Metavariable/free-variable counter: deterministic, never reset (like Lean's name generator).
        self.next_uniq = 1
        self.vocabulary = corpus_vocabulary(corpus) if vocabulary is None else vocabulary
        self._commands = {
            "reset": self.reset,
            "stat": self.stat,
            "options.set": self.options_set,
            "options.print": self.options_print,
            "goal.start": self.goal_start,
            "goal.tactic": self.goal_tactic,
            "goal.delete": self.goal_delete,
            "goal.print": self.goal_print,
            "expr.echo": wire.echo_numeral,
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
        return wire.answer(line, self.version, self._commands)

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
                # the corpus records names as Lean displays them; the wire layer writes them as the version sends
                variables.append(wire.Variable(name, type_, fvar, name.endswith("✝")))
        return wire.goal_object(self.version, variables, spec.target, ref.name, spec.case)

    def specs(self, session: Session, goals: Iterable[GoalRef]) -> list[GoalSpec]:
        return [session.theorem.goals[ref.goal_id] for ref in goals]

    def message(self, text: str, *, severity: str = "error", file_name: str = "<Pantograph>",
                pos: tuple[int, int] | None = None, end: tuple[int, int] | None = None,
                prefixed: bool = True) -> JsonObj | str:
        """One Lean message as this version writes it (`minilean.wire.message`)."""
        return wire.message(self.version, text, severity=severity, file_name=file_name, pos=pos, end=end,
                            prefixed=prefixed)

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
        return wire.set_options(self.options, args)

    def options_print(self, _: JsonObj) -> JsonObj:
        return dict(self.options)

    def goal_start(self, args: JsonObj) -> JsonObj:
        refused = wire.exactly_one(args, ("expr", "copyFrom"))
        if refused is not None:
            return refused
        expr, copy_from = args.get("expr"), args.get("copyFrom")
        if copy_from is not None:
            if not isinstance(copy_from, str):
                raise wire.ArgumentError("copyFrom?", "String expected")
            theorem = self.corpus.by_name(copy_from)
            if theorem is None:
                return wire.error_reply("index", f"Symbol not found: {copy_from}")
        else:
            if not isinstance(expr, str):
                raise wire.ArgumentError("expr?", "String expected")
            problem = parse_problem(expr.replace("\n", " ")) if any(c in expr for c in '()[]{}⟨⟩"') else None
            if problem is not None and "unknown tactic" not in problem:
                return wire.error_reply("parsing", problem.replace("<input>", "<stdin>"))
            theorem = self.corpus.by_statement(expr)
            if theorem is None:
                return wire.error_reply(
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
        found = wire.find_goal(self.states, args)
        if isinstance(found, dict):
            return found
        state, goal_id = found
        kind = wire.tactic_field(self.version, args)
        if not isinstance(kind, str):
            return kind
        value = args[kind]
        if kind in {"conv", "draft", "mode"}:
            return wire.error_reply("invalid", f"replay: `{kind}` is not supported by the replay server")
        tactic = wire.as_tactic(kind, value, args.get("binderName"))
        problem = parse_problem(strip_comments(tactic))
        if problem is None and kind == "tactic":
            problem = sequence_problem(tactic)
        if problem is not None:
            self._delay(0)
            return wire.parse_error(self.version, problem)
        if not state.goals:
            return wire.no_goals(self.version, self.options)
        return self._run_tactic(state, goal_id, tactic)

    def _run_tactic(self, state: GoalState, goal_id: int, tactic: str) -> JsonObj:
        """Run a checked tactic on goal `goal_id` of `state`: the new state's reply, or the failure's."""
        session = state.session
        focus = state.goals[goal_id]
        others = state.goals[:goal_id] + state.goals[goal_id + 1 :]
        run = Run()
        try:
            produced = self.execute_guarded(session, (focus,), strip_comments(tactic), run)
        except TacticFailure as failed:
            if self._delay(run.sleep_ms):
                return wire.interrupt(self.version)
            return wire.failure(self.version, failed.message)
        if self._delay(run.sleep_ms):
            return wire.interrupt(self.version)
        goals = produced + others if self.options["automaticMode"] else produced
        has_sorry = bool(run.sorried)
        next_id = self.new_state(GoalState(session=session, goals=goals, has_sorry=state.has_sorry or has_sorry))
        return wire.tactic_success(self.version, next_id, [self.goal_json(session, ref) for ref in goals], has_sorry)

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
        state = wire.find_state(self.states, args)
        if isinstance(state, dict):
            return state
        # Lean elides proof terms as `⋯`; a sorry'd proof shows `sorry`.
        root = wire.root_pp([ref.name for ref in state.goals], state.has_sorry)
        return wire.print_reply(self.version, args, lambda: [self.goal_json(state.session, ref) for ref in state.goals],
                                open_goals=len(state.goals), is_root=state.is_root, has_sorry=state.has_sorry,
                                root=root)

    def frontend_process(self, args: JsonObj) -> JsonObj:
        reply = replay_frontend.process(self, args)
        if self.version.header_flags and args.get("inheritEnv") and "units" in reply:
            self.scope_text = str(args.get("file") or "")
        return reply

    def frontend_distil(self, args: JsonObj) -> JsonObj:
        return replay_frontend.distil(self, args)


# ---------------------------------------------------------------------------------------------------
# Process entry point.


CONFORMANCE_CORPUS = Path(__file__).parent / "conformance.json"


def with_conformance(corpus: Corpus) -> Corpus:
    """`corpus` and the theorems `burnqed lean selftest` starts and proves (`conformance.json`, recorded as Lean
    answers them under miniF2F's header), unless it already has theorems of those names. They are in no theorem
    index, so nothing searches or trains on them; the server answers them like any recorded theorem."""
    known = {theorem.name for theorem in corpus.theorems}
    extra = [theorem for theorem in load_corpus(CONFORMANCE_CORPUS).theorems if theorem.name not in known]
    return Corpus(name=corpus.name, theorems=[*corpus.theorems, *extra]) if extra else corpus


LATENCY_VARIABLE = "MINILEAN_REPLAY_LATENCY_MS"  # how slow this Lean is, apart from the command (lean.env sets it)


def _latency_from_environment() -> float | None:
    """The default --latency-ms: $MINILEAN_REPLAY_LATENCY_MS when set (None when it is not a number). Being slow is
    a property of the machine, not of the command: a run slowed so that a signal lands mid-search and its resume at
    full speed keep one `lean.command`, which stages record among their inputs (the variable reaches Lean through
    `lean.env`)."""
    text = os.environ.get(LATENCY_VARIABLE, "").strip()
    try:
        return float(text) if text else 0.0
    except ValueError:
        return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m minilean.replay",
        description="Pantograph-protocol Lean server that answers from a recorded corpus (no Lean needed).",
    )
    parser.add_argument("--corpus", type=Path, default=None,
                        help="corpus file or folder (default: the embedded corpus, bundled theorems + generated world)")
    parser.add_argument("--latency-ms", type=float, default=None,
                        help=f"sleep before each goal.tactic reply (default: ${LATENCY_VARIABLE}, else 0)")
    read = wire.command_line(parser, argv, name="replay", default=str(DEFAULT_EMULATED), supported=SUPPORTED_TEXT,
                             accept=lambda text: supported_version(text, "--pantograph-version"))
    if isinstance(read, int):
        return read
    args, version = read
    latency_ms = args.latency_ms if args.latency_ms is not None else _latency_from_environment()
    if latency_ms is None:
        print(f"replay: {LATENCY_VARIABLE}={os.environ[LATENCY_VARIABLE]!r} is not a number of milliseconds",
              file=sys.stderr)
        return 2
    try:
        served = corpus_cache.load_served(lambda: served_corpus(args.corpus), args.corpus,
                                          corpus_cache.cache_folder(os.environ))
    except BadInput as exc:  # the corpus loader's refusal (leankit.corpus), one line naming the file and the problem
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    return wire.run(ReplayServer(served.corpus, latency_ms=max(0.0, latency_ms), version=version,
                                 vocabulary=served.vocabulary))


def served_corpus(path: Path | None) -> corpus_cache.Served:
    """What a start serves, built: the corpus at `path` (None: the embedded corpus, the bundled theorems and the
    generated world) with the conformance theorems, and its vocabulary. `main` reads it from `corpus_cache`."""
    from leankit.world import embedded_corpus

    corpus = with_conformance(load_corpus(path) if path is not None else embedded_corpus())
    return corpus_cache.Served(corpus, corpus_vocabulary(corpus))


__all__ = ["CONFORMANCE_CORPUS", "ReplayServer", "main", "serve", "served_corpus", "with_conformance"]

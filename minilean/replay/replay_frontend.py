"""`frontend.process` and `frontend.distil` of the replay server: a Lean file split into commands, each a
compilation unit; a theorem is checked by running its tactic blocks like `goal.tactic` from the corpus goal its
declaration starts at (the root, or for binders the goal their recorded `intro` reaches: `binder_start`).

    reply = process(server, {"file": text, "readHeader": False, "sorrys": True, ...})   # {"units": [...]}

A declaration the corpus does not record is refused, its proof `sorry` or not: with no elaborator the server cannot
tell a well-formed statement from an ill-formed one. The commands reach their server only through `FrontendHost`
(`ReplayServer` implements it). docs/replay-corpus.md, "frontend.process", gives each rule."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from leankit.corpus import Corpus, GoalSpec, TheoremSpec, goals_pp, normalize_expr, split_hypothesis
from leankit.declaration import declaration_in, qualified_name, track_scope
from leankit.recheck import RECHECK_REPORT, recheck_command
from leankit.text import SORRY_WORDS, bracket_delta, mask_comments
from leankit.version import PantographVersion
from minilean.replay.leanfile import (
    Block,
    Command,
    Declaration,
    is_declaration,
    parse_declaration,
    split_commands,
    term_tactic,
)
from minilean.replay.states import GoalRef, GoalState, Run, Session, TacticFailure
from minilean.replay.tactic_reader import parse_problem, strip_comments
from minilean.wire import JsonObj, add_invocations, error_reply, read_file, reads_header, wants_sorrys

IMPORT_ERROR = "invalid 'import' command, it must be used in the beginning of the file"
_IMPORT = re.compile(r"(import|prelude)\b")
_PRINT_AXIOMS = re.compile(r"#print\s+axioms\s+(\S+)")
_RECHECK_NAME = re.compile(r"#\[``(\S+)\]")
# What `#print axioms` reports for a corpus proof that replays cleanly (Lean's order, as Mathlib proofs show)
# and for a declaration with `sorry` or an error in it.
STANDARD_AXIOMS: tuple[str, ...] = ("propext", "Classical.choice", "Quot.sound")
SORRY_AXIOMS: tuple[str, ...] = ("propext", "sorryAx", "Classical.choice", "Quot.sound")


class FrontendHost(Protocol):
    """What the frontend commands need from the server they run in (`ReplayServer` is the one implementation):
    its corpus and emulated version, fresh unique names and state ids, goals written as that version writes them,
    its message format and its guarded tactic execution."""

    corpus: Corpus
    version: PantographVersion

    def uniq(self) -> str: ...

    def new_state(self, state: GoalState) -> int: ...

    def goal_json(self, session: Session, ref: GoalRef) -> JsonObj: ...

    def specs(self, session: Session, goals: Iterable[GoalRef]) -> list[GoalSpec]: ...

    def message(self, text: str, *, severity: str = "error", file_name: str = "<Pantograph>",
                pos: tuple[int, int] | None = None, end: tuple[int, int] | None = None,
                prefixed: bool = True) -> JsonObj | str: ...

    def execute_guarded(self, session: Session, goals: tuple[GoalRef, ...], text: str,
                        run: Run) -> tuple[GoalRef, ...]: ...


@dataclass
class _Options:
    """What one `frontend.process` request asked for."""

    file_name: str
    sorrys: bool
    new_constants: bool
    # name -> axioms its proof depends on, for the declarations of this file so far (`#print axioms`)
    declared: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # name -> an auxiliary lemma of its proof that the kernel never checked (decide with the kernel off)
    unchecked: dict[str, str] = field(default_factory=dict)
    # the namespaces (their name parts; [] for a section) open at this point of the file
    scopes: list[list[str]] = field(default_factory=list)

    def constant(self, name: str) -> str:
        """The constant `theorem name` declares here: inside `namespace Ns` it is `Ns.name`, as in Lean."""
        return qualified_name(name, self.scopes)

    def resolve(self, name: str) -> str:
        """A name as a command here reads it: a declaration of the open namespace first, as Lean resolves it."""
        inner = self.constant(name)
        return inner if inner in self.declared else name


def process(server: FrontendHost, args: JsonObj) -> JsonObj:
    """`frontend.process`: argument types were checked against the version's FrontendProcess already."""
    version = server.version
    read = read_file(args)
    if isinstance(read, dict):
        return read
    text, shown = read
    # `inheritEnv: true` is accepted but the replay server keeps no environment between calls (more lenient than
    # Pantograph: declarations do not persist).
    options = _Options(file_name=shown, sorrys=wants_sorrys(version, args),
                       new_constants=bool(args.get("newConstants")))
    commands = split_commands(text, header=reads_header(version, args))
    results = [_unit(server, command, options, _first_token(commands[index + 1:]))
               for index, command in enumerate(commands)]
    units = [unit for unit, _ in results]
    refused = add_invocations(version, args, units, [tactics for _, tactics in results])
    return refused if refused is not None else {"units": units}


def _pairs(hyps: Sequence[str]) -> list[tuple[str, str]] | None:
    try:
        return [(name, normalize_expr(type_)) for hyp in hyps for name, type_ in split_hypothesis(hyp)]
    except ValueError:
        return None


def binder_start(theorem: TheoremSpec, decl: Declaration) -> tuple[TheoremSpec, str] | None:
    """The corpus goal a binder-form declaration of `theorem` starts at, with the theorem whose graph holds it
    (`TheoremSpec.binder_start`, module docstring), or None."""
    if not decl.binders:
        return theorem, theorem.root
    wanted = _pairs(decl.binders)
    if wanted is None or decl.target is None:
        return None
    return theorem.binder_start(wanted, decl.target)


def _sorry_only(decl: Declaration) -> bool:
    """The proof is `sorry` (as a term or the one tactic of a `by` block)."""
    if decl.term is not None:
        return SORRY_WORDS.fullmatch(decl.term.strip()) is not None
    return len(decl.blocks) == 1 and SORRY_WORDS.fullmatch(strip_comments(decl.blocks[0].text).strip()) is not None


def search_target(server: FrontendHost, decl: Declaration, ignore_values: bool) -> tuple[Session, GoalRef] | None:
    """The goal `frontend.distil` makes of a sorry'd declaration of a corpus theorem: with `ignore_values` its type
    (the ∀ statement), else the sorry's goal, binders as hypotheses. None when the corpus records no such goal (the
    replay cannot elaborate the declaration)."""
    theorem = server.corpus.by_name(decl.name) if decl.name else None
    if theorem is None and decl.statement is not None:
        theorem = server.corpus.by_statement(decl.statement)
    if theorem is not None and decl.statement is not None and not decl.binders and (
            normalize_expr(decl.statement) != normalize_expr(theorem.statement)):
        theorem = None  # binder-form declarations are matched by their binders (binder_start)
    if theorem is None:
        return None
    found = (theorem, theorem.root) if ignore_values else binder_start(theorem, decl)
    if found is None:
        return None
    return Session(theorem=found[0], root=server.uniq()), GoalRef(found[1], server.uniq())


def distil(server: FrontendHost, args: JsonObj) -> JsonObj:
    """`frontend.distil {file, ignoreValues}`: each sorry'd declaration of the file becomes one target, a new
    state with its goal. A file the replay cannot elaborate is refused the way Pantograph reports a file with
    errors (an `io` error carrying the message)."""
    text = str(args["file"])
    targets: list[JsonObj] = []
    commands = split_commands(text, header=False)
    for index, command in enumerate(commands):
        if _IMPORT.match(command.text):
            return error_reply("io", f"<anonymous>:{command.line}:0: error: {IMPORT_ERROR}")
        decl = parse_declaration(command)
        if decl is None and is_declaration(command):  # Pantograph refuses a file that does not parse
            following = _first_token(commands[index + 1 :])
            return error_reply("io", f"<anonymous>:{command.line}:0: error: {parse_error(command, following)}")
        if decl is None or not _sorry_only(decl):
            continue
        found = search_target(server, decl, bool(args["ignoreValues"]))
        if found is None:
            return error_reply("io", f"<anonymous>:{command.line}:0: error: replay: cannot elaborate the "
                                     f"declaration {decl.name or 'example'}")
        session, ref = found
        state = GoalState(session=session, goals=(ref,), has_sorry=False)
        targets.append({"stateId": server.new_state(state), "goals": [server.goal_json(session, ref)]})
    return {"targets": targets}


def _message(
    server: FrontendHost, options: _Options, text: str, pos: tuple[int, int], end: tuple[int, int],
    severity: str = "error",
) -> JsonObj | str:
    return server.message(text, severity=severity, file_name=options.file_name, pos=pos, end=end)


def _print_axioms(server: FrontendHost, command: Command, options: _Options, unit: JsonObj) -> None:
    """`#print axioms NAME` of a declaration of this file: one information message (other commands: none)."""
    match = _PRINT_AXIOMS.match(command.text)
    if match is None:
        return
    name = options.resolve(match.group(1))
    axioms = options.declared.get(name)
    position = (command.line, 0)
    if axioms is None:
        # The replay server's REPL environment holds no theorems: only this file's declarations are known.
        end = (command.line, len(command.text.split("\n")[0]))
        unit["messages"] = [_message(server, options, f"unknown constant '{name}'", position, end)]
    elif axioms:
        text = f"'{name}' depends on axioms: [{', '.join(axioms)}]"
        unit["messages"] = [_message(server, options, text, position, position, severity="information")]
    else:
        text = f"'{name}' does not depend on any axioms"
        unit["messages"] = [_message(server, options, text, position, position, severity="information")]


def _recheck(server: FrontendHost, command: Command, options: _Options, unit: JsonObj) -> None:
    """burnqed's kernel recheck of NAME (`leankit.recheck.recheck_command`, character for character): its
    report for a declaration of this file, the kernel's error for one whose proof holds an unchecked lemma. The
    replay server runs no other metaprogram: any other `run_cmd` is an error."""
    match = _RECHECK_NAME.search(command.text)
    name = match.group(1) if match is not None else None
    position = (command.line, 0)
    end = (command.line, len(command.text.split("\n")[0]))
    if name is None or command.text.rstrip("\n") != recheck_command(name).rstrip("\n"):
        text = "replay: the replay server cannot run this metaprogram"
        unit["messages"] = [_message(server, options, text, position, end)]
        return
    name = options.resolve(name)
    if name not in options.declared:
        unit["messages"] = [_message(server, options, f"unknown constant '{name}'", position, end)]
    elif name in options.unchecked:
        text = (f"(kernel) declaration type mismatch, '_burnqed_recheck.{options.unchecked[name]}' has type\n"
                "  decide p = true\nbut it is expected to have type\n  p")
        unit["messages"] = [_message(server, options, text, position, end)]
    else:
        text = RECHECK_REPORT.format(name=name, count=1)
        unit["messages"] = [_message(server, options, text, position, position, severity="information")]


def _unit(server: FrontendHost, command: Command, options: _Options,
          following: str | None = None) -> tuple[JsonObj, list[JsonObj]]:
    """One compilation unit, and the tactic invocations it ran (`following`: the next command's first token)."""
    unit: JsonObj = {"messages": [], "boundary": [command.start_byte, command.end_byte]}
    invocations: list[JsonObj] = []
    decl = parse_declaration(command)
    if re.match(r"(namespace|section|end)\b", command.text):
        track_scope(options.scopes, command.text.split("\n")[0].strip())
    constant = options.constant(decl.name) if decl is not None and decl.name else ""
    if options.new_constants:
        unit["newConstants"] = [constant] if constant else []
    if _IMPORT.match(command.text):
        end = (command.line, len(command.text.split("\n")[0].rstrip()))
        unit["messages"] = [_message(server, options, IMPORT_ERROR, (command.line, 0), end)]
        return unit, invocations
    if decl is None:
        _not_a_declaration(server, command, options, unit, following)
        return unit, invocations
    theorem, start = _find_theorem(server, decl)
    # Lean adds a declaration that failed to elaborate with `sorryAx` in place of the failing part.
    if constant:
        options.declared[constant] = SORRY_AXIOMS
    if theorem is None:
        _unknown_theorem(server, decl, options, unit)
        return unit, invocations
    if decl.statement is not None and not decl.binders and normalize_expr(decl.statement) != normalize_expr(
            theorem.statement):
        unit["messages"] = [
            _message(
                server,
                options,
                f"replay: the statement of '{theorem.name}' differs from the recorded statement\n  "
                f"{theorem.statement}",
                *decl.label_span,
            )
        ]
        return unit, invocations
    assert start is not None
    _check_proof(server, decl, theorem, start, constant, options, unit, invocations)
    return unit, invocations


def _not_a_declaration(server: FrontendHost, command: Command, options: _Options, unit: JsonObj,
                       following: str | None = None) -> None:
    """A command that declares no theorem: an unreadable theorem's parse error, `run_cmd` or `#print axioms`."""
    if is_declaration(command):  # a theorem the parser cannot read: Lean reports a parse error, never nothing
        end = (command.line, len(command.text.split("\n")[0].rstrip()))
        unit["messages"] = [_message(server, options, parse_error(command, following), (command.line, 0), end)]
    elif command.text.startswith("run_cmd"):
        _recheck(server, command, options, unit)
    else:
        _print_axioms(server, command, options, unit)


def parse_error(command: Command, following: str | None) -> str:
    """Why a theorem command does not parse: Lean's own message when its brackets close and it never reaches its
    `:=` (a line comment swallowed it, so Lean reads on into `following`, the next command's first token, or the
    end of the file); the replay's own for anything else (an unclosed bracket)."""
    read = declaration_in(command.text)
    if read is not None and read.assign < 0 and bracket_delta(mask_comments(command.text)) == 0:
        unexpected = "end of input" if following is None else f"token '{following}'"
        return f"unexpected {unexpected}; expected ':=', 'where' or '|'"
    return "replay: cannot parse this declaration (unexpected end of input or unbalanced brackets)"


def _first_token(commands: Sequence[Command]) -> str | None:
    """The first token of the first of `commands` (comments skipped), None when there is none: the end of input."""
    for command in commands:
        words = mask_comments(command.text).split(maxsplit=1)
        if words:
            return words[0]
    return None


def _find_theorem(server: FrontendHost, decl: Declaration) -> tuple[TheoremSpec | None, str | None]:
    """The corpus theorem `decl` states (by name, else by statement) and its start goal; (None, None): a state
    the corpus does not know."""
    theorem = server.corpus.by_name(decl.name) if decl.name else None
    if theorem is None and decl.statement is not None:
        theorem = server.corpus.by_statement(decl.statement)
    found = binder_start(theorem, decl) if theorem is not None else None
    return found if found is not None else (None, None)


def _unknown_theorem(server: FrontendHost, decl: Declaration, options: _Options, unit: JsonObj) -> None:
    """A declaration the corpus does not know: an error, its proof `sorry` or not (no goal is started for it). A
    recorded theorem's name with binders its recorded `intro` does not give is said to be one."""
    what = f"'{decl.name}'" if decl.name else "of this example"
    text = (f"replay: unknown theorem {what}: the replay corpus has no theorem with this name or statement, so the "
            "replay server cannot check it")
    recorded = server.corpus.by_name(decl.name) if decl.name else None
    if recorded is not None and decl.binders:
        text = (f"replay: '{recorded.name}' is recorded, but no goal these binders start it at (the replay corpus "
                "records its `intro` names), so the replay server cannot check it")
    unit["messages"] = [_message(server, options, text, *decl.label_span)]


def _check_proof(
    server: FrontendHost,
    decl: Declaration,
    theorem: TheoremSpec,
    start: str,
    constant: str,
    options: _Options,
    unit: JsonObj,
    invocations: list[JsonObj],
) -> None:
    """Run the proof's tactic blocks from `start`; the first failure, or the unsolved goals, become the message."""
    session = Session(theorem=theorem, root=server.uniq())
    goals: tuple[GoalRef, ...] = (GoalRef(start, server.uniq()),)
    run = Run()
    blocks = decl.blocks if decl.term is None else [Block(decl.term_pos, term_tactic(decl.term))]
    for block in blocks:
        before = goals
        problem = parse_problem(strip_comments(block.text))
        try:
            if problem is not None:
                raise TacticFailure(problem.split(": ", 1)[-1])
            goals = server.execute_guarded(session, goals, strip_comments(block.text), run)
        except TacticFailure as failure:
            first_line = block.text.split("\n")[0]
            end = (block.pos[0], block.pos[1] + len(first_line))
            unit["messages"] = [_message(server, options, failure.message, block.pos, end)]
            return
        invocations.append(
            {
                "goalBefore": goals_pp(server.specs(session, before)),
                "goalAfter": goals_pp(server.specs(session, goals)),
                "tactic": block.text,
                "usedConstants": [],
            }
        )
    _finish_proof(server, decl, session, goals, run, constant, options, unit)


def _finish_proof(
    server: FrontendHost,
    decl: Declaration,
    session: Session,
    goals: tuple[GoalRef, ...],
    run: Run,
    constant: str,
    options: _Options,
    unit: JsonObj,
) -> None:
    """After every block ran: unsolved goals, a sorry warning, or the constant's axioms."""
    if goals:
        unsolved = f"unsolved goals\n{goals_pp(server.specs(session, goals))}"
        unit["messages"] = [_message(server, options, unsolved, decl.by_pos, decl.end_pos)]
    elif run.sorried:
        unit["messages"] = [
            _message(server, options, "declaration uses 'sorry'", *decl.label_span, severity="warning")
        ]
        if options.sorrys:
            _attach_sorrys(server, unit, session, run.sorried, decl.sorry_spans)
    elif constant and run.unchecked:
        # The unchecked lemma proves the goal outright: no axiom, and one more constant.
        options.declared[constant] = ()
        options.unchecked[constant] = f"{constant}.proof_1"
        if options.new_constants:
            unit["newConstants"] = [constant, f"{constant}.proof_1"]
    elif constant:
        options.declared[constant] = STANDARD_AXIOMS


def _attach_sorrys(
    server: FrontendHost, unit: JsonObj, session: Session, sorried: Sequence[GoalRef], spans: Sequence[tuple[int, int]]
) -> None:
    """Each sorry becomes a goal of a new state, usable with goal.tactic (like Pantograph)."""
    goals = tuple(sorried)
    unit["goals"] = [server.goal_json(session, ref) for ref in goals]
    unit["goalStateId"] = server.new_state(GoalState(session=session, goals=goals, has_sorry=False))
    unit["goalSrcBoundaries"] = [list(span) for span in spans[: len(goals)]]

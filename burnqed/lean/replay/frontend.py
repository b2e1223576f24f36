"""`frontend.process` of the replay server: a Lean file split into commands, each a compilation unit; theorem
declarations are checked by running their tactic blocks like `goal.tactic` (docs/replay-corpus.md)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from burnqed.lean.corpus import SORRY_WORDS, TheoremSpec, normalize_expr
from burnqed.lean.replay.leanfile import Block, Command, parse_declaration, split_commands, term_tactic
from burnqed.lean.replay.states import GoalRef, GoalState, Run, Session, TacticFailure
from burnqed.lean.replay.tactics import JsonObj, goals_pp, parse_problem, strip_comments
from burnqed.lean.replay.wire import ArgumentError, error_reply, lean_message

if TYPE_CHECKING:
    from burnqed.lean.replay.server import ReplayServer


def process(server: ReplayServer, args: JsonObj) -> JsonObj:
    file, file_name = args.get("file"), args.get("fileName")
    if (file is None) == (file_name is None):
        return error_reply("arguments", "Exactly one of {fileName, file} must be supplied")
    if file_name is not None:
        if not isinstance(file_name, str):
            raise ArgumentError("fileName?", "String expected")
        try:
            text = Path(file_name).read_text(encoding="utf-8")
        except OSError as exc:
            return error_reply("io", str(exc))
        shown = file_name
    else:
        if not isinstance(file, str):
            raise ArgumentError("file?", "String expected")
        text, shown = file, "<anonymous>"
    flags = {key: bool(args.get(key)) for key in ("sorrys", "invocations", "newConstants")}
    return {"units": [_unit(server, command, shown, flags) for command in split_commands(text)]}


def _unit(server: ReplayServer, command: Command, file_name: str, flags: dict[str, bool]) -> JsonObj:
    unit: JsonObj = {"messages": [], "boundary": [command.start_byte, command.end_byte]}
    decl = parse_declaration(command)
    if flags["newConstants"]:
        unit["newConstants"] = [decl.name] if decl is not None and decl.name else []
    if decl is None:
        return unit
    theorem = server.corpus.by_name(decl.name) if decl.name else None
    if theorem is None and decl.statement is not None:
        theorem = server.corpus.by_statement(decl.statement)
    name_span = decl.label_span

    def message(text: str, pos: tuple[int, int], end: tuple[int, int], severity: str = "error") -> JsonObj:
        return lean_message(
            text,
            severity=severity,
            file_name=file_name,
            pos={"line": pos[0], "column": pos[1]},
            endPos={"line": end[0], "column": end[1]},
            kind="hasSorry" if severity == "warning" else "[anonymous]",
        )

    if theorem is None:
        synthetic = decl.synthetic_goal()
        if decl.term is not None and SORRY_WORDS.fullmatch(decl.term.strip()) and synthetic is not None:
            # A sorry'd declaration we cannot check still elaborates: a warning, and its goal.
            unit["messages"] = [message("declaration uses 'sorry'", *name_span, severity="warning")]
            if flags["sorrys"]:
                corpus_free = TheoremSpec(
                    name=decl.name or "_example",
                    split="test",
                    topic="logic",
                    statement=synthetic.target,
                    root="g0",
                    goals={"g0": synthetic},
                    transitions=[],
                    proofs=[],
                )
                session = Session(theorem=corpus_free, root=server._uniq())
                _attach_sorrys(server, unit, session, [GoalRef("g0", server._uniq())], decl.sorry_spans)
            return unit
        what = f"'{decl.name}'" if decl.name else "of this example"
        unit["messages"] = [
            message(
                f"replay: unknown theorem {what}: the replay corpus has no theorem with this name or "
                "statement, so the replay server cannot check it",
                *name_span,
            )
        ]
        return unit
    if decl.statement is not None and normalize_expr(decl.statement) != normalize_expr(theorem.statement):
        unit["messages"] = [
            message(
                f"replay: the statement of '{theorem.name}' differs from the recorded statement\n  "
                f"{theorem.statement}",
                *name_span,
            )
        ]
        return unit
    session = Session(theorem=theorem, root=server._uniq())
    goals: tuple[GoalRef, ...] = (GoalRef(theorem.root, server._uniq()),)
    run = Run()
    invocations: list[JsonObj] = []
    blocks = decl.blocks if decl.term is None else [Block(decl.term_pos, term_tactic(decl.term))]
    for block in blocks:
        before = goals
        problem = parse_problem(strip_comments(block.text))
        try:
            if problem is not None:
                raise TacticFailure(problem.split(": ", 1)[-1])
            goals = server._execute_guarded(session, goals, strip_comments(block.text), run)
        except TacticFailure as failure:
            first_line = block.text.split("\n")[0]
            end = (block.pos[0], block.pos[1] + len(first_line))
            unit["messages"] = [message(failure.message, block.pos, end)]
            break
        invocations.append(
            {
                "goalBefore": goals_pp(server._specs(session, before)),
                "goalAfter": goals_pp(server._specs(session, goals)),
                "tactic": block.text,
                "usedConstants": [],
            }
        )
    else:
        if goals:
            unsolved = f"unsolved goals\n{goals_pp(server._specs(session, goals))}"
            unit["messages"] = [message(unsolved, decl.by_pos, decl.end_pos)]
        elif run.sorried:
            unit["messages"] = [message("declaration uses 'sorry'", *name_span, severity="warning")]
            if flags["sorrys"]:
                _attach_sorrys(server, unit, session, run.sorried, decl.sorry_spans)
    if flags["invocations"]:
        unit["invocations"] = invocations
    return unit


def _attach_sorrys(
    server: ReplayServer, unit: JsonObj, session: Session, sorried: Sequence[GoalRef], spans: Sequence[tuple[int, int]]
) -> None:
    """Each sorry becomes a goal of a new state, usable with goal.tactic (like Pantograph)."""
    goals = tuple(sorried)
    unit["goals"] = [server._goal_json(session, ref) for ref in goals]
    unit["goalStateId"] = server._new_state(GoalState(session=session, goals=goals, has_sorry=False))
    unit["goalSrcBoundaries"] = [list(span) for span in spans[: len(goals)]]

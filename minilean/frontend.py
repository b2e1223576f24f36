"""`frontend.process` and `frontend.distil` for minilean: a Lean file split into commands, each a compilation unit.

    reply = process(server, {"file": text, "readHeader": False, "inheritEnv": True, ...})   # {"units": [...]}
    reply = distil(server, {"file": text, "ignoreValues": False})                          # {"targets": [...]}

A theorem is compiled: its binders become the local context, its statement is elaborated and its proof runs on
minilean's engine block by block, with Lean's errors at Lean's positions; a `def`/`abbrev` is a constant the later
commands see; `#print axioms` and the client's kernel recheck are answered for the file's declarations. The commands
reach their server only through `FrontendHost`.
docs/minilean.md, "frontend.process", gives each rule.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from leankit.recheck import RECHECK_REPORT, recheck_command
from leankit.version import PantographVersion
from minilean.constants import SORRY_AXIOM, Constant, Env, FileTheorems, active, reached, using, using_theorems
from minilean.elab import NAT, NUMBER_TYPES, PROP, ElabError, element_type, normalize_type, subst_many
from minilean.elaborator import Elaborator
from minilean.fallback import Fallback
from minilean.goals import Goal, Hyp, TacticError, pp_goals
from minilean.parser import ParseError, TermTooDeep, parse
from minilean.proof_states import Declared, State
from minilean.source import (
    DECL,
    DEFINITIONS,
    Command,
    Decl,
    balanced,
    blank_comments,
    byte_offset,
    file_offset,
    line_column,
    parse_decl,
    split_binders,
    split_commands,
    syntax_error,
    tactic_blocks,
)
from minilean.syntax import Binder, By, Expr, Op, Var, free_vars, pp
from minilean.tactics import Engine
from minilean.wire import JsonObj, add_invocations, error_reply, message, read_file, reads_header, wants_sorrys

STANDARD_AXIOMS = ("propext", "Classical.choice", "Quot.sound")
SORRY_AXIOMS = ("propext", "sorryAx", "Classical.choice", "Quot.sound")
IMPORT_ERROR = "invalid 'import' command, it must be used in the beginning of the file"

_AXIOM_ORDER = ("propext", SORRY_AXIOM, "Classical.choice", "Quot.sound")  # as the answers list them
_SORRY = re.compile(r"(?<![\w.'])(sorry|admit)(?![\w'])")


class FrontendHost(Protocol):
    """What the file commands need from the server they run in (`minilean.server.Server` is the one
    implementation): its emulated version, its fallback REPL, its environment and goal states, fresh unique
    names and state ids, and goals written as that version writes them."""

    version: PantographVersion
    fallback: Fallback | None
    env: dict[str, Declared]
    states: dict[int, State]

    def constants(self) -> Env: ...

    def uniq(self) -> str: ...

    def new_state(self, state: State) -> int: ...

    def goal_json(self, goal: Goal) -> JsonObj: ...


@dataclass
class FileState:
    file_name: str
    text: str
    declared: dict[str, tuple[str, ...]] = field(default_factory=dict)
    statements: dict[str, Expr] = field(default_factory=dict)
    definitions: dict[str, Constant] = field(default_factory=dict)
    uses: dict[str, frozenset[str]] = field(default_factory=dict)  # the constants each declaration mentions
    theorems: dict[str, Expr] = field(default_factory=dict)  # the file's theorems as terms' types (`FileTheorems`)
    # (name, state id (-1: not made, distil makes it), goals, sorry spans, the constants it was started under)
    sorry_states: list[tuple[str, int, list[Goal], list[tuple[int, int]], Env]] = field(default_factory=list)
    outside: bool = False  # a declaration's statement is outside the fragment (the fallback REPL may take it)
    # The units of those declarations: (unit, minilean's message, where it stands: start and end offsets)
    unelaborated: list[tuple[JsonObj, str, int, int]] = field(default_factory=list)


def process(server: FrontendHost, args: JsonObj) -> JsonObj:
    """`frontend.process` (argument types were checked against the version's FrontendProcess)."""
    version = server.version
    read = read_file(args)
    if isinstance(read, dict):
        return read
    text, shown = read
    state = FileState(shown, text)
    commands = split_commands(text, header=reads_header(version, args))
    units = []
    for command in commands:
        before, earlier = set(state.statements), FileTheorems(dict(state.theorems))
        with using(_visible(server, state)), using_theorems(earlier):
            units.append(_unit(server, state, command, args))
        _add_theorems(state, before, earlier.used)
    if state.outside and server.fallback is not None:
        forwarded = server.fallback.process(args)
        return _not_started(server, state, forwarded) if wants_sorrys(version, args) else forwarded
    if args.get("inheritEnv"):
        for name, axioms in state.declared.items():
            server.env[name] = Declared(name, state.statements[name], axioms, state.definitions.get(name),
                                        state.uses.get(name, frozenset()))
    # minilean records no tactic invocations: every unit has none
    refused = add_invocations(version, args, units, [[] for _ in units])
    return refused if refused is not None else {"units": units}


def _visible(server: FrontendHost, state: FileState) -> Env:
    """The constants a command of the file sees: the REPL environment's definitions, then the file's own."""
    return {**server.constants(), **state.definitions}


def _not_started(server: FrontendHost, state: FileState, forwarded: JsonObj) -> JsonObj:
    """A sorry start the fallback answered: where it started no goal for a declaration minilean could not elaborate
    but gave an error, the start fails with minilean's own reason, its elaborator's message, the fallback's after
    it. A fallback that did not answer (an `internal` error) is passed on as it is: no fault of the declaration."""
    units = forwarded.get("units")
    if not isinstance(units, list):
        return forwarded
    by_boundary = {tuple(unit["boundary"]): unit for unit in units
                   if isinstance(unit, dict) and isinstance(unit.get("boundary"), list)}
    for mine, text, start, end in state.unelaborated:
        theirs = by_boundary.get(tuple(mine["boundary"]))
        if theirs is None or theirs.get("goalStateId") is not None:
            continue
        error = _first_error(theirs.get("messages"))
        if error is not None:
            note = f"(its fallback REPL did not start it either: {error})"
            theirs["messages"] = [_message(server, state, f"{text}\n{note}", start, end)]
    return forwarded


def _first_error(messages: object) -> str | None:
    """The first line of the first error among a unit's messages (objects from 0.3.4, strings before), or None."""
    for found in messages if isinstance(messages, list) else []:
        if isinstance(found, dict) and found.get("severity") == "error":
            return str(found.get("data", "")).split("\n")[0]
        if isinstance(found, str) and ": error: " in found:
            return found.split(": error: ", 1)[1].split("\n")[0]
    return None


def distil(server: FrontendHost, args: JsonObj) -> JsonObj:
    """`frontend.distil` (0.3.6+): the sorry targets of a file as goal states, one target per declaration. With
    `binderName` the binders are folded back into the target (`∀ (p : Prop), p → p`), as Pantograph's simple
    case shows; a declaration's sorries are its target's goals last first (a sketch's holes: Test/Frontend/Distil.lean,
    test_distil_induction). A command with an error answers no targets but an `io` error: that command's messages,
    each as Lean's `Message.toString` writes it, joined by newlines (`distilSearchTargets` throws them).
    A definition whose value is `sorry` is, without `ignoreValues`, a goal of its type named by it, and a later
    target that mentions it is coupled to it: one target, the definition's goal first, the constant a hole `?f` in
    the others (Pantograph's coupled sorries); with `ignoreValues` it is an opaque constant and no target."""
    text = str(args["file"])
    state = FileState("<anonymous>", text)
    fake_args = {"sorrys": True, "newConstants": False, "distil": True}
    for command in split_commands(text, header=True):
        with using(_visible(server, state)):
            unit = _unit(server, state, command, fake_args)
        errors = [m for m in unit["messages"] if (isinstance(m, dict) and m.get("severity") == "error")
                  or (isinstance(m, str) and ": error: " in m)]
        if errors:  # `distilSearchTargets` throws the first failing command's messages: an `io` error
            return error_reply("io", "\n".join(_message_string(m) for m in unit["messages"]))
    targets: list[tuple[list[Goal], set[str], Env]] = []  # goals, the definitions they hold as holes, constants
    for name, _state_id, sorried, _spans, constants in state.sorry_states:
        definition = state.definitions.get(name)
        if definition is not None:
            if not args.get("ignoreValues"):
                targets.append(([Goal((), definition.ty, name, server.uniq())], {name}, constants))
            continue
        holes = {hole: Var(f"?{hole}") for _, held, _ in targets for hole in held}
        goals = [_with_holes(goal, holes) for goal in reversed(sorried)]  # a declaration's sorries, last first
        mentioned = {name for goal in sorried for name in _mentions(goal)}
        coupled = [target for target in targets if target[1] & mentioned]
        if not coupled:
            targets.append((goals, set(), constants))
            continue
        into = coupled[0]
        for other in coupled[1:]:
            into[0].extend(other[0])
            into[1].update(other[1])
            targets.remove(other)
        into[0].extend(goals)
    replies = []
    for found, _held, constants in targets:
        goals = [_close_over(g) for g in found] if args.get("binderName") is not None else found
        root = goals[0].mvar if len(goals) == 1 else ""
        state_id = server.new_state(State(tuple(goals), False, False, root, constants))
        replies.append({"stateId": state_id, "goals": [server.goal_json(g) for g in goals]})
    return {"targets": replies}


def _message_string(found: object) -> str:
    """A unit's message as Lean's `Message.toString` writes it: `file:line:col: severity: text` (an information
    message without the prefix), the caption before the text, and a final newline."""
    if not isinstance(found, dict):
        text = str(found)
        return text if text.endswith("\n") else f"{text}\n"
    caption = str(found.get("caption") or "")
    text = f"{caption}:\n{found.get('data', '')}" if caption else str(found.get("data", ""))
    severity = str(found.get("severity", "error"))
    if severity != "information":
        pos = found.get("pos") or {}
        text = f"{found.get('fileName', '<anonymous>')}:{pos.get('line', 0)}:{pos.get('column', 0)}: {severity}: {text}"
    return text if text.endswith("\n") else f"{text}\n"


def _with_holes(goal: Goal, holes: Mapping[str, Expr]) -> Goal:
    """`goal` with the constants `holes` names written as the holes standing for their values (`?f`)."""
    return Goal(tuple(Hyp(h.name, subst_many(h.ty, holes), h.uniq) for h in goal.hyps),
                subst_many(goal.target, holes), goal.case, goal.mvar)


def _mentions(goal: Goal) -> set[str]:
    return set(free_vars(goal.target)).union(*(free_vars(h.ty) for h in goal.hyps))


def _close_over(goal: Goal) -> Goal:
    target = goal.target
    for hyp in reversed(goal.hyps):
        target = Binder("∀", hyp.name, hyp.ty, target)
    return Goal((), target, goal.case, goal.mvar)


def _message(server: FrontendHost, state: FileState, text: str, start: int, end: int | None = None,
             severity: str = "error") -> JsonObj | str:
    pos = line_column(state.text, start)
    end_pos = line_column(state.text, end) if end is not None else None
    return message(server.version, text, severity=severity, file_name=state.file_name, pos=pos, end=end_pos)


def _unit(server: FrontendHost, state: FileState, command: Command, args: JsonObj) -> JsonObj:
    text = state.text
    unit: JsonObj = {"messages": [], "boundary": [byte_offset(text, command.start),
                                                  byte_offset(text, command.start + len(command.text))]}
    decl = parse_decl(command.text)
    if args.get("newConstants"):
        unit["newConstants"] = [decl.name] if decl is not None and decl.name else []
    first_line = command.text.split("\n")[0].rstrip()
    if re.match(r"(import|prelude)\b", command.text):
        unit["messages"] = [_message(server, state, IMPORT_ERROR, command.start, command.start + len(first_line))]
        return unit
    if re.match(r"(open|set_option|section|namespace|end|universe|variable)\b", command.text):
        return unit
    axioms = re.match(r"#print\s+axioms\s+(\S+)", command.text)
    if axioms is not None:
        name = axioms.group(1)
        found = _axioms(server, state, name)
        if found is None:
            unit["messages"] = [_message(server, state, f"unknown constant '{name}'", command.start,
                                         command.start + len(first_line))]
        elif found:
            unit["messages"] = [_message(server, state, f"'{name}' depends on axioms: [{', '.join(found)}]",
                                         command.start, command.start, severity="information")]
        else:
            unit["messages"] = [_message(server, state, f"'{name}' does not depend on any axioms",
                                         command.start, command.start, severity="information")]
        return unit
    recheck = _recheck_name(command.text) if command.text.startswith("run_cmd") else None
    if recheck is not None:
        _kernel_recheck(server, state, command, recheck, unit)
        return unit
    code = blank_comments(command.text)[0]
    if decl is None and DECL.match(code.lstrip()) is not None and balanced(code):
        # Lean parses on past the type to the next command (or the end of the file) looking for `:=` (a line
        # comment may have swallowed it): a parse error where the text ends, and nothing is declared.
        following = blank_comments(text[command.start + len(command.text) :])[0].split(maxsplit=1)
        unexpected = f"token '{following[0]}'" if following else "end of input"
        end = command.start + len(command.text)
        unit["messages"] = [_message(server, state, f"unexpected {unexpected}; expected ':=', 'where' or '|'", end,
                                     end)]
        return unit
    if decl is None:
        unit["messages"] = [_message(server, state, "minilean: only `theorem`, `lemma`, `example`, `def`, `abbrev`, "
                                     "`open`, `set_option` and `#print axioms` are in minilean's fragment",
                                     command.start, command.start + len(first_line))]
        return unit
    _declaration(server, state, command, decl, unit, args)
    return unit


def _axioms(server: FrontendHost, state: FileState, name: str) -> tuple[str, ...] | None:
    """What `#print axioms name` lists: its own axioms and those of every definition it reaches (a definition
    left `sorry` brings `sorryAx`); None for a name neither the file nor the REPL's environment declares."""
    own, uses = state.declared.get(name), state.uses.get(name, frozenset())
    if own is None and name in server.env:
        own, uses = server.env[name].axioms, server.env[name].uses
    if own is None:
        return None
    found = set(own)
    visible = _visible(server, state)
    for lemma in _theorems_reached(state, name):
        found.update(state.declared.get(lemma, ()))
        uses = uses | state.uses.get(lemma, frozenset())
    for used in reached(uses, visible):
        found.update(visible[used].axioms)
    return tuple(axiom for axiom in _AXIOM_ORDER if axiom in found) + tuple(sorted(found - set(_AXIOM_ORDER)))


def _add_theorems(state: FileState, before: set[str], used: set[str]) -> None:
    """After a command: each theorem it declared (its statement elaborated, its proof failed or not: Lean holds it)
    is usable by name in the commands after it (`FileTheorems`), and the earlier theorems its proof used are among
    what it uses (`#print axioms` and the kernel recheck reach them)."""
    for name in set(state.statements) - before - set(state.definitions):
        state.theorems[name] = _as_type(state.statements[name])
        state.uses[name] = state.uses.get(name, frozenset()) | frozenset(used)


def _as_type(statement: Expr) -> Expr:
    """A theorem's statement (each binder a `∀`) as the type of its name: a binder whose type is a proposition, and
    that nothing after it mentions, a premise `→` (`exact name x h` passes a proof there, as Lean's does)."""
    if not (isinstance(statement, Binder) and statement.kind == "∀"):
        return statement
    body = _as_type(statement.body)
    ty = statement.ty
    if ty is None or ty in NUMBER_TYPES or element_type(ty) is not None or ty == PROP:
        return Binder("∀", statement.name, ty, body)
    return Binder("∀", statement.name, ty, body) if statement.name in free_vars(body) else Op("→", (ty, body))


def _theorems_reached(state: FileState, name: str) -> list[str]:
    """The file's earlier theorems `name`'s proof used, and those their proofs used in turn (what Lean's `#print
    axioms` and the kernel recheck reach), in the order first reached."""
    order: list[str] = []
    pending = sorted(used for used in state.uses.get(name, frozenset()) if used in state.theorems and used != name)
    while pending:
        found = pending.pop(0)
        if found not in order:
            order.append(found)
            pending.extend(sorted(u for u in state.uses.get(found, frozenset()) if u in state.theorems
                                  and u not in order and u != name))
    return order


def _recheck_name(text: str) -> str | None:
    """The name a client's kernel recheck command rechecks (burnqed's: a `run_cmd` that re-adds through the kernel
    the constants NAME uses and logs one report), when `text` is that command for a name it quotes (``NAME),
    character for character; None for any other command. minilean has no metaprogramming and no kernel to switch
    off: what its tactic engine accepted is checked, so it answers that one command."""
    for name in dict.fromkeys(re.findall(r"``([^\s\]),]+)", text)):
        if text.rstrip() == recheck_command(name).rstrip():
            return str(name)
    return None


def _kernel_recheck(server: FrontendHost, state: FileState, command: Command, name: str, unit: JsonObj) -> None:
    """The recheck's report for a declaration of this file: the theorem (or definition) and the definitions it
    reaches, each one constant in minilean; or the error Lean's would raise: an unknown constant, or a theorem whose
    proof failed (Lean added it with `sorryAx` in place of the proof)."""
    end = command.start + len(command.text.split("\n")[0].rstrip())
    found = state.declared.get(name)
    if found is None:
        unit["messages"] = [_message(server, state, f"burnqed kernel recheck: unknown constant {name}",
                                     command.start, end)]
    elif SORRY_AXIOM in found and name not in state.definitions:
        unit["messages"] = [_message(server, state, f"(kernel) declaration has metavariables '{name}'",
                                     command.start, end)]
    else:
        theorems = _theorems_reached(state, name)
        uses = frozenset().union(state.uses.get(name, frozenset()), *(state.uses.get(t, frozenset()) for t in theorems))
        count = 1 + len(theorems) + len(reached(uses, _visible(server, state)))
        unit["messages"] = [_message(server, state, RECHECK_REPORT.format(name=name, count=count), command.start,
                                     command.start, severity="information")]


def _declaration(server: FrontendHost, state: FileState, command: Command, decl: Decl, unit: JsonObj,
                 args: JsonObj) -> None:
    base = command.start
    name_start, name_end = base + decl.name_span[0], base + decl.name_span[1]
    if decl.name and (decl.name in state.declared or decl.name in server.env):
        # the environment (the REPL's, kept by `inheritEnv`, or this file's) already has it: nothing is added
        unit["messages"] = [_message(server, state, f"'{decl.name}' has already been declared", name_start,
                                     name_end)]
        if "newConstants" in unit:
            unit["newConstants"] = []
        return
    if decl.keyword in DEFINITIONS:
        _definition(server, state, decl, unit, args, (name_start, name_end))
        return
    # Lean adds a declaration whose proof fails with `sorryAx` in place of the failing part.
    if decl.name:
        state.declared[decl.name] = SORRY_AXIOMS
    goal = _goal(server, state, decl, unit, (name_start, name_end))
    if goal is None:
        return
    body = decl.body
    body_offset = base + decl.body_start + (len(body) - len(body.lstrip()))
    by_pos = body_offset
    engine = Engine(server.uniq)
    goals = _run_body(server, state, engine, goal, body, body_offset, unit)
    if goals is None:
        return
    sorried = engine.run_info.sorried_goals
    end_offset = base + len(command.text.rstrip())
    if goals:
        unit["messages"] = [_message(server, state, f"unsolved goals\n{pp_goals(goals)}", by_pos, end_offset)]
        return
    if engine.run_info.sorried:
        unit["messages"] = [_message(server, state, "declaration uses 'sorry'", name_start, name_end,
                                     severity="warning")]
        if args.get("sorrys"):
            _sorry_state(server, state, unit, args, decl, base, goal.mvar, sorried)
        return
    if decl.name:
        state.declared[decl.name] = STANDARD_AXIOMS


def _goal(server: FrontendHost, state: FileState, decl: Decl, unit: JsonObj,
          name_span: tuple[int, int]) -> Goal | None:
    """The goal of a declaration's statement under its binders, recorded in `state`; None when it does not
    elaborate (the error then in `unit`'s messages)."""
    name_start, name_end = name_span
    try:
        hyps: list[Hyp] = []
        ctx: dict[str, Expr] = {}
        for name, ty_text in split_binders(decl.binders):
            ty_expr = parse(ty_text)
            try:
                ty = normalize_type(ty_expr)
            except ElabError:
                ty = Elaborator(ctx, decl.name or "_example").prop(ty_expr)
            hyps.append(Hyp(name, ty, server.uniq()))
            ctx[name] = ty
        target = Elaborator(ctx, decl.name or "_example").prop(parse(decl.statement))
    except (ElabError, ParseError) as exc:
        text = exc.message
        unit["messages"] = [_message(server, state, text, name_start, name_end)]
        # A term too deep is over a limit of the embedded Lean as a whole: answered here, not by the fallback.
        if not isinstance(exc, TermTooDeep):
            state.outside = True
            state.unelaborated.append((unit, text, name_start, name_end))
        return None
    statement = target
    for hyp in reversed(hyps):
        statement = Binder("∀", hyp.name, hyp.ty, statement)
    if decl.name:
        state.statements[decl.name] = statement
        state.uses[decl.name] = free_vars(statement) & frozenset(active())
    return Goal(tuple(hyps), target, None, server.uniq())


def _run_body(server: FrontendHost, state: FileState, engine: Engine, goal: Goal, body: str, body_offset: int,
              unit: JsonObj) -> tuple[Goal, ...] | None:
    """The goals left after a declaration's body (a `by` block's tactics, or a term as `exact`) runs on `goal`;
    None when it stops on an error (then in `unit`'s messages)."""
    stripped = body.strip()
    if re.match(r"by\b", stripped):
        blocks = tactic_blocks(stripped[2:], body_offset + 2, state.text)
    else:
        blocks = [(body_offset, "sorry" if _SORRY.fullmatch(stripped) else f"exact {stripped}")]
    goals: tuple[Goal, ...] = (goal,)
    tactic_block = bool(re.match(r"by\b", stripped))  # a term body is checked by its elaboration
    for offset, block in blocks:
        syntax = syntax_error(block) if tactic_block else None
        if syntax is not None:  # Lean's parser stops there: no tactic of the block runs
            where = file_offset(state.text, offset, block, syntax[0])
            unit["messages"] = [_message(server, state, syntax[1], where, where + 1)]
            return None
        try:
            goals = engine.run(goals, block)
        except TacticError as exc:
            end = offset + len(block.split("\n")[0])
            unit["messages"] = [_message(server, state, exc.message, offset, end)]
            return None
        except Exception as exc:  # a bug in minilean is an error of this declaration, never a pass
            unit["messages"] = [_message(server, state, f"minilean: internal error: {type(exc).__name__}: {exc}",
                                         offset)]
            return None
    return goals


def _sorry_state(server: FrontendHost, state: FileState, unit: JsonObj, args: JsonObj, decl: Decl, base: int,
                 root: str, sorried: list[Goal]) -> None:
    """A unit's sorries as a goal state under the constants the declaration was elaborated with (Pantograph's
    GoalState keeps its environment), its goals and the spans of its `sorry`s; `frontend.distil` makes its states
    itself (`distil` in `args`)."""
    state_id = -1 if args.get("distil") else server.new_state(State(tuple(sorried), False, False, root, active()))
    unit["goals"] = [server.goal_json(g) for g in sorried]
    unit["goalStateId"] = state_id
    spans = [(byte_offset(state.text, base + decl.body_start + m.start()),
              byte_offset(state.text, base + decl.body_start + m.end())) for m in _SORRY.finditer(decl.body)]
    unit["goalSrcBoundaries"] = [list(span) for span in spans[: len(sorried)]]
    state.sorry_states.append((decl.name, state_id, sorried, spans, active()))


def _definition(server: FrontendHost, state: FileState, decl: Decl, unit: JsonObj, args: JsonObj,
                name_span: tuple[int, int]) -> None:
    """`def`/`abbrev` (`noncomputable` either way): its binders and `fun` parameters, its type (or the type of its
    value) and its value, elaborated as a theorem's statement is; a value `sorry` is the sorry warning and, with
    `sorrys`, a goal of its type. The constant is declared for the commands after it."""
    name_start, name_end = name_span
    params: list[tuple[str, Expr]] = []
    try:
        ctx: dict[str, Expr] = {}
        for name, ty_text in split_binders(decl.binders):
            params.append((name, normalize_type(parse(ty_text))))
            ctx[name] = params[-1][1]
        result = normalize_type(parse(decl.statement)) if decl.statement.strip() else None
        body = blank_comments(decl.body)[0].strip()  # the comments after the value (`-- 2`) are no part of it
        value: Expr | None = None
        if _SORRY.fullmatch(body) is None:
            term = parse(body)
            while isinstance(term, Binder) and term.kind == "fun" and isinstance(result, Op) and result.op == "→":
                if term.ty is not None and normalize_type(term.ty) != result.args[0]:
                    raise ElabError(f"type mismatch: {term.name} is expected to have type {pp(result.args[0])}")
                params.append((term.name, result.args[0]))
                ctx[term.name] = result.args[0]
                result, term = result.args[1], term.body
            if isinstance(term, By):
                raise ElabError("minilean: a definition's value by tactics is outside minilean's fragment")
            elaborator = Elaborator(ctx, decl.name or "_example")
            if result is None:
                result = elaborator.infer_type(term) or NAT
            value = elaborator.prop(term) if result == PROP else elaborator.value(term, result)
        elif result is None:
            raise ElabError("failed to infer definition type")
    except (ElabError, ParseError) as exc:
        unit["messages"] = [_message(server, state, exc.message, name_start, name_end)]
        if not isinstance(exc, TermTooDeep):
            state.outside = True
            state.unelaborated.append((unit, exc.message, name_start, name_end))
        return
    bound = {name for name, _ in params}
    mentioned = (free_vars(result) | (free_vars(value) if value is not None else frozenset())) - bound
    constant = Constant(decl.name, tuple(params), result, value, decl.keyword == "abbrev",
                        mentioned & frozenset(active()))
    state.definitions[decl.name] = constant
    state.declared[decl.name] = constant.axioms
    state.statements[decl.name] = constant.ty
    state.uses[decl.name] = constant.uses
    if value is None:
        unit["messages"] = [_message(server, state, "declaration uses 'sorry'", name_start, name_end,
                                     severity="warning")]
        if args.get("sorrys"):
            goal = Goal(tuple(Hyp(name, ty, server.uniq()) for name, ty in params), result, None, server.uniq())
            _sorry_state(server, state, unit, args, decl, name_start - decl.name_span[0], goal.mvar, [goal])


__all__ = ["distil", "process"]

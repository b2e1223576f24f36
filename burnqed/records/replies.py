"""What Lean answered, as records: goals, tactic results, sketches' subgoals, root flags, compiles. No I/O here.

    result = await lean.tactic(state_id, goal_id, "simp")    # a TacticResult
    if result.kind is TacticKind.SUCCESS: text = pretty_state(result.goals)

`burnqed.lean.protocol` parses Lean's replies into these once, at the edge; a domain failure (a tactic Lean
rejects) is a value of these types, never an exception. Frozen slotted dataclasses: they are on the hot path.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from leankit.text import find_depth0


@dataclass(frozen=True, slots=True)
class Variable:
    """One hypothesis of a goal: `name : type` (or `name : type := value` for a let binding)."""

    name: str
    type: str
    value: str | None = None
    inaccessible: bool = False


@dataclass(frozen=True, slots=True)
class Goal:
    """One open Lean goal, pretty-printed the way Lean shows it in the infoview."""

    target: str
    variables: tuple[Variable, ...] = ()
    case: str | None = None  # Lean's userName of the goal (`case inl`), if any
    mvar: str | None = None  # Lean's internal metavariable name; opaque, never compared

    def pretty(self) -> str:
        """Lean's rendering: optional `case` line, hypotheses (consecutive ones of equal type grouped), `⊢ target`."""
        lines: list[str] = []
        if self.case:
            lines.append(f"case {self.case}")
        group: list[str] = []
        group_type: str | None = None
        for var in self.variables:
            if var.value is None and group and var.type == group_type:
                group.append(var.name)
                continue
            if group:
                lines.append(f"{' '.join(group)} : {group_type}")
                group = []
            if var.value is not None:
                lines.append(f"{var.name} : {var.type} := {var.value}")
                group_type = None
            else:
                group = [var.name]
                group_type = var.type
        if group:
            lines.append(f"{' '.join(group)} : {group_type}")
        lines.append(f"⊢ {self.target}")
        return "\n".join(lines)

    @classmethod
    def from_pretty(cls, text: str) -> Goal:
        """The goal `pretty` printed (the inverse up to grouping: `x y : ℕ` is two variables): an optional `case`
        line, `NAMES : TYPE` or `NAME : TYPE := VALUE` lines, the `⊢ TARGET` line; a line indented deeper continues
        the one before. A name holding `✝` is inaccessible. ValueError when `text` is not one goal (no `⊢` line, or
        a second goal after a blank line)."""
        entries: list[str] = []
        for line in text.strip("\n").split("\n"):
            if not line.strip():
                raise ValueError("a blank line: a state of several goals is not one goal")
            if entries and line[:1].isspace():
                entries[-1] += "\n" + line
            else:
                entries.append(line)
        case = entries.pop(0).removeprefix("case ").strip() if entries and entries[0].startswith("case ") else None
        if not entries or not entries[-1].startswith("⊢"):
            raise ValueError("no `⊢` line ends the text: it is not a goal")
        variables: list[Variable] = []
        for entry in entries[:-1]:
            names, colon, rest = entry.partition(" : ")
            if not colon or not names.split() or entry.startswith("⊢"):
                raise ValueError(f"{first_line(entry)!r} is no hypothesis (`NAME : TYPE`) of one goal")
            assign = find_depth0(rest, " := ")
            type_, value = (rest, None) if assign < 0 else (rest[:assign], rest[assign + len(" := "):])
            variables += [Variable(name, type_, value, "✝" in name) for name in names.split()]
        return cls(entries[-1].removeprefix("⊢").strip(), tuple(variables), case or None)


def pretty_state(goals: tuple[Goal, ...] | list[Goal]) -> str:
    """A whole tactic state as text: goals separated by a blank line; `no goals` when closed."""
    if not goals:
        return "no goals"
    return "\n\n".join(goal.pretty() for goal in goals)


def first_line(text: str) -> str:
    """The first line of a (possibly empty, possibly multi-line) message."""
    return text.split("\n", 1)[0]


class TacticKind(StrEnum):
    """What became of one tactic application."""

    SUCCESS = "success"  # Lean accepted it: `goals` is the new state (empty = all goals closed)
    ERROR = "error"  # Lean rejected it (elaboration/tactic failure); the old state is still valid
    PARSE_ERROR = "parse_error"  # the text did not parse as a tactic
    TIMEOUT = "timeout"  # Lean-side interrupt, or the client watchdog fired (then states_lost is True)
    CRASH = "crash"  # the Lean process died or sent garbage; the worker was restarted, states are lost
    REFUSED = "refused"  # the tactic guard refused it before it reached Lean


@dataclass(frozen=True, slots=True)
class TacticResult:
    """The typed outcome of `goal.tactic`. Domain failures are values of this type, not exceptions."""

    kind: TacticKind
    state_id: int | None = None  # the new state id; set only when kind is SUCCESS
    goals: tuple[Goal, ...] = ()  # the new state's goals; meaningful only when kind is SUCCESS
    errors: tuple[str, ...] = ()  # error-severity messages, parse error or refusal reason
    warnings: tuple[str, ...] = ()  # other messages Lean attached (info/warning)
    has_sorry: bool = False
    has_unsafe: bool = False
    # Lean reported hasSorry/hasUnsafe (Pantograph >= 0.3.1). When False both flags are unknown, not false:
    # only the compile can then show that the proof is free of sorry (burnqed.lean.soundness).
    flags_reported: bool = True
    states_lost: bool = False  # the worker was restarted: every state id of this worker is invalid now
    elapsed_ms: float = 0.0

    @property
    def closed_all_goals(self) -> bool:
        """Lean reported no goals left. Necessary for a proof, not sufficient: see `burnqed.lean.soundness`."""
        return self.kind is TacticKind.SUCCESS and self.state_id is not None and not self.goals

    @property
    def reason(self) -> str:
        """One line saying why the tactic failed (empty on success)."""
        if self.kind is TacticKind.SUCCESS:
            return ""
        first = first_line(self.errors[0]) if self.errors else ""
        return f"{self.kind.value}: {first}" if first else self.kind.value


@dataclass(frozen=True, slots=True)
class Subgoal:
    """One hole of a sketch (`have NAME : P := by sorry`) as Lean made it a goal (docs/lean.md, "Sketches")."""

    name: str  # the have's name, as Lean reads it
    statement: str  # its statement as the sketch wrote it
    state_id: int  # the state that holds every subgoal of the sketch
    goal_id: int  # this subgoal's index among that state's goals (`goal.tactic`'s goalId)
    goal: Goal  # as Lean printed it: the binders and the holes before this one in context, the target P


@dataclass(frozen=True, slots=True)
class SketchResult:
    """What Lean made of a sketch. SUCCESS: one subgoal per hole, in the sketch's order, and the skeleton's closing
    tactics accepted with the holes in scope. Otherwise no subgoals and `errors` says why: Lean's messages (ERROR,
    PARSE_ERROR), the guard's refusal (REFUSED, nothing sent), or the worker's fate (TIMEOUT, CRASH)."""

    kind: TacticKind
    route: str  # "draft" (goal.tactic), "distil" (frontend.distil) or "process" (frontend.process sorrys); "" refused
    state_id: int | None = None
    subgoals: tuple[Subgoal, ...] = ()
    errors: tuple[str, ...] = ()
    states_lost: bool = False
    elapsed_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class RootInfo:
    """What `goal.print {rootExpr: true}` says about the proof term assembled so far.

    `root` is None when Lean printed no root: the root metavariable is not assigned (nothing proved yet).
    `flags_reported` is False for Pantograph < 0.3.1, which has no root flags: the three are unknown then.
    """

    has_sorry: bool
    has_unsafe: bool
    has_mvar: bool
    root: str | None = None
    flags_reported: bool = True


@dataclass(frozen=True, slots=True)
class CompileMessage:
    """One message of `frontend.process` (Pantograph < 0.3.4 sends strings: their severity is read from the
    `file:line:col: error: ` prefix Lean writes; a string without one is an information message)."""

    severity: str  # "error" | "warning" | "information"
    text: str
    kind: str = ""
    line: int | None = None  # 1-based, in the compiled file
    column: int | None = None  # 0-based (in codepoints, as Lean counts them), on `line`

    @property
    def is_sorry_warning(self) -> bool:
        return self.kind == "hasSorry" or "declaration uses 'sorry'" in self.text.replace("`", "'")


@dataclass(frozen=True, slots=True)
class CompileUnit:
    """One compilation unit (one top-level command) of `frontend.process`."""

    start: int  # boundary: UTF-8 byte offsets [start, end) of the command in the file
    end: int
    messages: tuple[CompileMessage, ...] = ()
    new_constants: tuple[str, ...] | None = None  # None: the reply did not list them (never "no constants")


@dataclass(frozen=True, slots=True)
class CompileResult:
    """Outcome of compiling a whole file with `frontend.process`: its units, in file order."""

    units: tuple[CompileUnit, ...]

    @property
    def messages(self) -> tuple[CompileMessage, ...]:
        return tuple(m for unit in self.units for m in unit.messages)

    @property
    def errors(self) -> tuple[CompileMessage, ...]:
        return tuple(m for m in self.messages if m.severity == "error")

    @property
    def has_sorry(self) -> bool:
        return any(m.is_sorry_warning for m in self.messages)

    @property
    def ok(self) -> bool:
        """No error and no sorry warning. Necessary, not sufficient for a proof: see `burnqed.lean.soundness`."""
        return bool(self.units) and not self.errors and not self.has_sorry

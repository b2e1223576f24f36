"""Shared nouns of burnqed: goals, tactic results, theorems. No I/O here.

Wire formats are parsed into these records once, at the edge (`burnqed.lean.protocol` for Lean replies,
`Theorem`/`TheoremIndex` for theorem index files), and everything inside works on records.
Hot-path records are frozen slotted dataclasses; file formats are pydantic models (validated on load).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator


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
class RootInfo:
    """What `goal.print {rootExpr: true}` says about the proof term assembled so far."""

    has_sorry: bool
    has_unsafe: bool
    has_mvar: bool
    root: str | None = None


@dataclass(frozen=True, slots=True)
class CompileMessage:
    """One message of `frontend.process`."""

    severity: str  # "error" | "warning" | "information"
    text: str
    kind: str = ""
    line: int | None = None


@dataclass(frozen=True, slots=True)
class CompileResult:
    """Outcome of compiling a whole file with `frontend.process`."""

    messages: tuple[CompileMessage, ...]

    @property
    def errors(self) -> tuple[CompileMessage, ...]:
        return tuple(m for m in self.messages if m.severity == "error")

    @property
    def has_sorry(self) -> bool:
        return any(m.kind == "hasSorry" or "declaration uses 'sorry'" in m.text.replace("`", "'")
                   for m in self.messages)

    @property
    def ok(self) -> bool:
        return not self.errors and not self.has_sorry


class Theorem(BaseModel):
    """One entry of a theorem index (design §4)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="Fully qualified theorem name; unique within an index.")
    statement: str | None = Field(
        default=None,
        description="The type as Lean source (∀-form), passed to `goal.start expr`; without it the goal is "
        "started with `goal.start copyFrom=name` (the theorem must exist in the Lean environment).",
    )
    header: str | None = Field(default=None, description="Imports/opens the statement needs, for compiling.")
    source: str | None = Field(default=None, description="Where the theorem comes from (dataset name).")
    split: str | None = Field(default=None, description="train | valid | test, when the source defines one.")

    @field_validator("statement")
    @classmethod
    def _statement_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("statement is blank")
        return value


class TheoremIndex(BaseModel):
    """A named list of theorems (design §4), as stored in a theorem index JSON file."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="Name of this index (benchmark or dataset).")
    theorems: list[Theorem] = Field(description="The theorems, in a stable order.")

    @field_validator("theorems")
    @classmethod
    def _unique_names(cls, theorems: list[Theorem]) -> list[Theorem]:
        seen: set[str] = set()
        for theorem in theorems:
            if theorem.name in seen:
                raise ValueError(f"duplicate theorem name {theorem.name!r}")
            seen.add(theorem.name)
        return theorems

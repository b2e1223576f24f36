"""Lean's messages on a failed proof, as a repair prompt shows them: the record search keeps on the failed attempt's
trajectory row and SFT reads back, and the rule that caps them (docs/search.md, "Repair", "The cap").

    feedback = Feedback("intro h\\nlinarith", (FeedbackMessage("error", "linarith failed …", 2, 0),), goal="…")
    row.feedback = feedback.to_json()
    assert Feedback.from_json(row.feedback) == feedback
    kept, cut = cap_messages(messages, proof, budget=512)   # cut: the messages not shown whole

`proof` is the failed proof's body as it was checked (`text.completion.join_tactics(tactics, indent="")`); `line` 1
is its first line, `column` 0-based in codepoints, `line` 0 the theorem's `:= by` (a message on the declaration),
None no position in the proof. `prompt.build_repair_prompt` maps them onto the code block it shows. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["LABEL_BYTES", "Feedback", "FeedbackMessage", "cap_messages", "cut_to_bytes"]

LABEL_BYTES = 32  # what a message's label (its position and severity) costs against the budget, whatever its form
_SEVERITY_ORDER = {"error": 0, "warning": 1}


@dataclass(frozen=True, slots=True)
class FeedbackMessage:
    """One of Lean's messages on a failed proof, its position mapped onto the proof's body (module docstring)."""

    severity: str  # "error" | "warning"
    text: str
    line: int | None = None
    column: int | None = None


@dataclass(frozen=True, slots=True)
class Feedback:
    """What a repair prompt shows about a failed proof: the proof as it was checked, Lean's messages on it (capped),
    how many messages the cap left out or cut, and the goal at the first error when the Lean edge gave it."""

    proof: str
    messages: tuple[FeedbackMessage, ...]
    cut: int = 0
    goal: str | None = None

    def to_json(self) -> str:
        """The trajectory column's text (compact JSON, raw UTF-8)."""
        return json.dumps({"proof": self.proof, "messages": [[m.severity, m.text, m.line, m.column]
                                                              for m in self.messages],
                           "cut": self.cut, "goal": self.goal}, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Feedback:
        """The record `to_json` wrote; ValueError when `text` is not one."""
        try:
            raw = json.loads(text)
            messages = tuple(FeedbackMessage(_str(s), _str(t), _position(line), _position(column))
                             for s, t, line, column in raw["messages"])
            return cls(_str(raw["proof"]), messages, _count(raw["cut"]),
                       None if raw["goal"] is None else _str(raw["goal"]))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a repair feedback record: {exc}") from None


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


def _position(value: Any) -> int | None:
    if value is None:
        return None
    return _count(value)


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a whole number, got {value!r}")
    return value


def quoted_line(proof: str, message: FeedbackMessage) -> str:
    """The proof line a message points at ("" when it points at none)."""
    lines = proof.split("\n")
    if message.line is None or not 1 <= message.line <= len(lines):
        return ""
    return lines[message.line - 1]


def cut_to_bytes(text: str, budget: int) -> str:
    """The longest prefix of `text` whose UTF-8 encoding has at most `budget` bytes (a character boundary)."""
    return text.encode("utf-8")[: max(budget, 0)].decode("utf-8", errors="ignore")


def _cost(message: FeedbackMessage, proof: str) -> int:
    return len(message.text.encode("utf-8")) + len(quoted_line(proof, message).encode("utf-8")) + LABEL_BYTES


def cap_messages(messages: Sequence[FeedbackMessage], proof: str, budget: int,
                 goal: str | None = None) -> Feedback:
    """The feedback a repair prompt shows for `messages` on `proof` under a `budget` of tokens (the rule:
    docs/search.md, "Repair", "The cap")."""
    ordered = sorted(messages, key=lambda m: (_SEVERITY_ORDER.get(m.severity, 2), m.line is None, m.line or 0,
                                              m.column or 0))
    kept: list[FeedbackMessage] = []
    left = budget
    for index, message in enumerate(ordered):
        cost = _cost(message, proof)
        if cost <= left:
            kept.append(message)
            left -= cost
            continue
        room = left - (cost - len(message.text.encode("utf-8")))  # what is left for its text
        lines = message.text.split("\n")
        shown: list[str] = []
        for line in lines:
            if len("\n".join([*shown, line]).encode("utf-8")) > room:
                break
            shown.append(line)
        if not shown and not kept:
            shown = [cut_to_bytes(lines[0], room)]
        if "".join(shown):
            kept.append(FeedbackMessage(message.severity, "\n".join(shown), message.line, message.column))
        # It did not fit whole (its cost is over what was left), so it and every later message count as cut.
        return Feedback(proof, tuple(kept), len(ordered) - index, None)
    fits = goal is not None and len(goal.encode("utf-8")) <= left
    return Feedback(proof, tuple(kept), 0, goal if fits else None)

"""What a sketch search says of what failed (docs/search.md, "Sketch search"): one failure as a re-plan prompt shows
it, why a subgoal's search ended without a proof, the failed sketch a re-plan shows, and a search's summary.
"""

from __future__ import annotations

from collections.abc import Sequence

from burnqed.records.results import FailureReason, SketchOutcome
from burnqed.search.hybrid_settings import HybridSettings
from burnqed.search.lemma_graph import Tried
from burnqed.search.step import StepSettings

__all__ = ["MAX_FAILURE_CHARS", "cap", "summary", "to_show", "why"]

MAX_FAILURE_CHARS = 600  # what a re-plan prompt shows of one failure (Lean's message, a search's end), at most


def cap(text: str) -> str:
    """One failure as a re-plan prompt shows it: at most MAX_FAILURE_CHARS characters."""
    return text if len(text) <= MAX_FAILURE_CHARS else text[: MAX_FAILURE_CHARS - 1].rstrip() + "…"


def why(reason: FailureReason | None, units: int, subgoal: StepSettings | HybridSettings, said: str | None) -> str:
    """Why a subgoal's search ended without a proof, in words, with Lean's first message on a tactic at its root."""
    unit = "rounds" if isinstance(subgoal, HybridSettings) else "expansions"
    words = {
        FailureReason.MAX_NODES: f"its share of the budget ({units} {unit}) was spent",
        FailureReason.MAX_ROUNDS: f"its share of the budget ({units} {unit}) was spent",
        FailureReason.TIMEOUT: "the theorem's time ran out",
        FailureReason.EXHAUSTED: "its search had nothing left to try",
        FailureReason.PROMPT_REJECTED: "the policy refused its prompt",
    }
    text = words.get(reason, str(reason)) if reason is not None else "not proved"
    return f"{text}; Lean's first message on a tactic there: {said}" if said else text


def to_show(tried: Sequence[Tried]) -> Tried | None:
    """The failed sketch a re-plan shows the planner: the elaborated one with the most subgoals proved, else the first
    Lean rejected, else the first refused or unreadable one with a body; None when the request gave nothing to show."""
    shown = [t for t in tried if t.failures and t.record.body.strip()]
    elaborated = [t for t in shown if t.record.outcome is SketchOutcome.ELABORATED]
    if elaborated:
        return max(elaborated, key=lambda t: (len(t.leaves), -tried.index(t)))
    for outcome in (SketchOutcome.ERROR, SketchOutcome.REFUSED, SketchOutcome.UNREADABLE):
        first = next((t for t in shown if t.record.outcome is outcome), None)
        if first is not None:
            return first
    return None


def summary(sketches: Sequence[Tried]) -> str:
    """What a sketch search that found no proof tried, in one line."""
    elaborated = [t for t in sketches if t.record.outcome is SketchOutcome.ELABORATED]
    subgoals = [s for t in elaborated for s in t.record.subgoals]
    rounds = max(t.record.round for t in sketches) + 1
    return (f"{len(sketches)} sketch(es) in {rounds} planner request(s), {len(elaborated)} elaborated; "
            f"{sum(s.proved for s in subgoals)} of {len(subgoals)} subgoals proved; no assembled proof counted")


"""What sketch search keeps of each sketch it tries (docs/search.md, "Sketch search")."""

from __future__ import annotations

from dataclasses import dataclass, field

from burnqed.records.results import Edge, SketchAttempt
from burnqed.text.sketch import Sketch

__all__ = ["Tried"]


@dataclass(slots=True)
class Tried:
    """A sketch of this search: its record, its row, and (elaborated) its subgoals' closing rows in order."""

    record: SketchAttempt
    row: Edge
    sketch: Sketch | None = None
    leaves: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # what failed, for a re-plan

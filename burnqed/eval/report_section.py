"""A section of the iteration report that stands on its own: the `Report` field it fills, how it is built from what
the report read, how report.md shows it and what it draws. `eval.report_model.SECTIONS` lists them in report.md's
order; `eval.report` builds each one, `eval.report_markdown` writes each one after the search modes, and
`eval.report.write_report` draws each one's plots.

    SECTION = ReportSection(field="repairs", build=lambda got: repair_rows(got.at, got.iteration, got.evals,
                            store=got.store), markdown=repair_markdown)

A new section is a module holding its model, its `SECTION` and its functions, a `Report` field of that model and its
entry in `SECTIONS` (docs/pipeline.md, "Report and go/no-go gates").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from burnqed import storage
from burnqed.eval.result import EvalResult
from burnqed.layout import Layout

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ReportInputs:
    """What a section is built from: the run, the iteration reported, and the evals the report read."""

    root: str
    iteration: int
    store: storage.Store
    evals: Sequence[tuple[str, EvalResult]]  # this iteration's evals by label: its main eval, its ablation, eval_modes
    steps: Sequence[tuple[str, str, EvalResult]]  # each step's main eval: (step 'base' or 'iteration i', arm, result)
    rl: bool = False  # the iteration's plan has an rl stage (rl.enabled)
    rl_switched: tuple[str, ...] = ()  # the SFT settings rl.enabled turned on (report_rl.switched_by_rl)
    eval_uris: Mapping[str, str] = field(default_factory=dict)  # `evals`' result URIs by label (trajectories beside)

    @property
    def at(self) -> Layout:
        return Layout(self.root)


@dataclass(frozen=True, slots=True)
class ReportSection(Generic[T]):
    """One section: `build` gives the value of the `Report` field named `field`; `markdown` its report.md lines
    (none: not shown); `plots` draws its figures into the report's folder (a plot with nothing to draw is not
    written)."""

    field: str
    build: Callable[[ReportInputs], T]
    markdown: Callable[[T], list[str]]
    plots: Callable[[T, Path], None] | None = None

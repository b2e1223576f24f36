"""A section of the iteration report: the `Report` field(s) it fills, how they are built from what the report read,
how report.md shows them and what it draws. Every section of report.md is one; `report.document.SECTIONS` lists
them in report.md's order, `report.build.build_report` builds each one, `report.markdown` writes each one under
the report's head and `report.build.write_report` draws each one's plots.

    SECTION = ReportSection(field="repairs", build=lambda got: repair_rows(got.at, got.iteration, got.evals,
                            store=got.store), markdown=repair_markdown)
    PROOFS = ReportSection(field="proofs", build=build_proofs, markdown=lambda shown: proofs_markdown(*shown),
                           reads=("iteration", "learning"))       # markdown gets (proofs, iteration, learning)

A new section is a module holding its model, its `SECTION` and its functions, then a `Report` field of that model
and its entry in `SECTIONS` (CONTRIBUTING.md, "A new section of the iteration report").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic

from typing_extensions import TypeVar

from burnqed import storage
from burnqed.config import PipelineConfig
from burnqed.eval.result import EvalResult
from burnqed.layout import Layout

T = TypeVar("T")  # what `build` gives: the value of the field (a tuple of values for several fields)
V = TypeVar("V", default=T)  # what `markdown` and `plots` are given (with `reads`: a tuple, the values read after)


@dataclass(frozen=True, slots=True)
class ReadEval:
    """One eval result the report read for an iteration: where, its result, and how the report names it (`arm`:
    'base', 'llm' or 'llm+ebm'; `step`: 'base' or 'iteration i' for a step's main eval, None for an ablation)."""

    uri: str
    result: EvalResult
    iteration: int
    arm: str
    step: str | None


@dataclass(frozen=True, slots=True)
class ReportInputs:
    """What a section is built from: the run, the iteration reported, and the evals the report read."""

    root: str
    iteration: int
    store: storage.Store
    evals: Sequence[tuple[str, EvalResult]]  # this iteration's evals by label: its main eval, its ablation, eval_modes
    steps: Sequence[tuple[str, str, EvalResult]]  # each step's main eval: (step 'base' or 'iteration i', arm, result)
    rl: bool = False  # the iteration's plan has an rl stage (rl.enabled)
    rl_switched: tuple[str, ...] = ()  # the SFT settings rl.enabled turned on (report.rl_steps.switched_by_rl)
    eval_uris: Mapping[str, str] = field(default_factory=dict)  # `evals`' result URIs by label (trajectories beside)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)  # the gates' thresholds, the eval modes
    read: Sequence[ReadEval] = ()  # the base eval, then each iteration's main eval and ablation, as published
    load: Callable[[str], EvalResult | None] = field(default=lambda uri: None)  # the report's reader (each file once)
    read_first: Sequence[str] = ()  # the eval URIs read before any section was built, in the order read

    @property
    def at(self) -> Layout:
        return Layout(self.root)


@dataclass(frozen=True, slots=True)
class ReportSection(Generic[T, V]):
    """One section: `build` gives the value of the `Report` field named `field` (several fields: a tuple of their
    values in that order); `markdown` its report.md lines and `plots` its figures, drawn into the report's folder (a
    plot with nothing to draw is not written), from that value read back from the report, followed, when the
    section names `reads`, by the other `Report` fields it shows (then as one tuple)."""

    field: str | tuple[str, ...]
    build: Callable[[ReportInputs], T]
    markdown: Callable[[V], list[str]]
    plots: Callable[[V, Path], None] | None = None
    reads: tuple[str, ...] = ()

    @property
    def fills(self) -> tuple[str, ...]:
        """The `Report` fields this section fills."""
        return (self.field,) if isinstance(self.field, str) else self.field

    def values(self, inputs: ReportInputs) -> dict[str, Any]:
        """Build the section: its fields' values by name."""
        built = self.build(inputs)
        if isinstance(self.field, str):
            return {self.field: built}
        return dict(zip(self.field, built, strict=True))  # type: ignore[call-overload]

    def shown(self, report: object) -> V:
        """What `markdown` and `plots` are given, read from a `Report`."""
        own = [getattr(report, name) for name in self.fills]
        if isinstance(self.field, str) and not self.reads:
            return own[0]  # type: ignore[no-any-return]
        return (*own, *(getattr(report, name) for name in self.reads))  # type: ignore[return-value]

"""The report's sections that stand on their own (`eval.report_section`, `eval.report_model.SECTIONS`): each names a
field of `Report`, and one entry in SECTIONS is all a section needs to reach report.json, report.md and the plots."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnqed.config import PipelineConfig
from burnqed.eval import report, report_markdown
from burnqed.eval.report import build_report, write_report
from burnqed.eval.report_model import SECTIONS, Report
from burnqed.eval.report_repair import RepairRow
from burnqed.eval.report_section import ReportInputs, ReportSection
from burnqed.eval.result import write_eval_result
from burnqed.layout import Layout
from burnqed.storage import Store
from burnqed.text.prompt import SearchMode
from tests.eval.test_compare import BASE, costed


def test_each_section_fills_its_own_field_of_the_report() -> None:
    fields = [section.field for section in SECTIONS]
    # report.md's order after the search modes
    assert fields == ["repairs", "sketches", "rl", "joint_study", "learning_curve"]
    assert set(fields) <= set(Report.model_fields) and len(set(fields)) == len(fields)


@pytest.mark.slow
def test_a_registered_section_reaches_the_json_the_markdown_and_the_plots(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[ReportInputs] = []

    def build(got: ReportInputs) -> list[RepairRow]:
        seen.append(got)
        return [RepairRow(iteration=got.iteration, source=f"{len(got.evals)} evals", theorems=len(got.steps),
                          repaired=0, revisions=0, proved=0)]

    def draw(rows: list[RepairRow], folder: Path) -> None:
        (folder / "section.png").write_text(rows[0].source)

    section = ReportSection(field="repairs", build=build, markdown=lambda rows: ["## A section", "", rows[0].source],
                            plots=draw)
    for module in (report, report_markdown):
        monkeypatch.setattr(module, "SECTIONS", (section,))
    root = f"file://{tmp_path}/run"
    write_eval_result(costed(BASE, [10, 30], SearchMode.STEP, 100), Layout(root).eval_result(0), store=store)
    built = build_report(root, 0, PipelineConfig(), store=store)
    assert [(got.root, got.iteration, [label for label, _ in got.evals], [s for s, _, _ in got.steps],
             dict(got.eval_uris)) for got in seen] == [(root, 0, ["step"], ["iteration 0"],
                                                        {"step": Layout(root).eval_result(0)})]
    assert [(row.iteration, row.source, row.theorems) for row in built.repairs] == [(0, "1 evals", 1)]
    folder = tmp_path / "report"
    write_report(built, folder)
    markdown = (folder / "report.md").read_text()
    assert "\n## A section\n\n1 evals\n" in markdown  # after the search modes, before the provenance
    assert markdown.index("## Search modes") < markdown.index("## A section") < markdown.index("## Provenance")
    assert '"source": "1 evals"' in (folder / "report.json").read_text()
    assert (folder / "section.png").read_text() == "1 evals"


@pytest.mark.parametrize(("solved", "total"), [(0, 7), (0, 9), (10, 10)])
def test_the_error_bars_of_a_rate_of_0_or_1_are_never_negative(solved: int, total: int) -> None:
    # The Wilson interval's end is the rate up to rounding here (about -1e-17 apart); matplotlib 3.10 refuses a
    # negative yerr and the report's plot would fail.
    from burnqed.eval.report_model import RateRow
    from burnqed.eval.report_plots import _error_bars

    row = RateRow(budget=1, solved=solved, total=total, rate=solved / total)
    below, above = _error_bars([row])
    assert min(below + above) >= 0.0 and max(below + above) > 0.0

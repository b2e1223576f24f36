"""The report's sections (`report.section`, `report.document.SECTIONS`): each names the fields of `Report` it
fills, every field is filled by one, every `ReportSection` defined in burnqed is in SECTIONS, and one entry in
SECTIONS is all a section needs to reach report.json, report.md and the plots (CONTRIBUTING.md, "A new section of
the iteration report": its module and `report/document.py`, no list here to edit)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import burnqed
from burnqed.config import PipelineConfig
from burnqed.eval.result import write_eval_result
from burnqed.layout import Layout
from burnqed.records.enums import SearchMode
from burnqed.report import build as report_build
from burnqed.report import markdown as report_markdown
from burnqed.report.build import build_report, write_report
from burnqed.report.document import SECTIONS, Report
from burnqed.report.repairs import RepairRow
from burnqed.report.section import ReportInputs, ReportSection
from burnqed.storage import Store
from tests.eval.test_compare import BASE, costed

# report.md's order of the sections that were there when the order was pinned; a new section goes anywhere among
# them (its place in SECTIONS) without an edit here.
PINNED_ORDER = [
    "not_compared", "rows", "curves", "learning", "changes", "unsolved", "ceiling", "not_evaluated", "proofs",
    "training", "training_summaries", "base_arm", "depth_outcomes", "costs", "stage_costs", "iteration_costs",
    "iterations", "modes", "mode_comparison", "repairs", "sketches", "rl", "joint_study", "learning_curve", "overlaps",
    "decontamination", "provenance", "gates"]


def test_each_section_fills_its_own_fields_and_every_field_is_filled_by_one() -> None:
    fields = [name for section in SECTIONS for name in section.fills]
    assert [name for name in fields if name in PINNED_ORDER] == PINNED_ORDER
    own = {"root", "iteration", "made_by", "inputs"}  # the report's own: where, which iteration, by what, read what
    assert sorted(fields) == sorted(set(Report.model_fields) - own)
    assert all(set(section.reads) <= set(Report.model_fields) for section in SECTIONS)


def defined_sections(folder: Path, package: str) -> dict[str, ReportSection[object, object]]:
    """`module.NAME` → every `ReportSection` at the top of a module under `folder` (the package `package`, importable;
    a section imported elsewhere is found under each name): the modules that name the class are imported, the rest
    only read."""
    found: dict[str, ReportSection[object, object]] = {}
    for path in sorted(folder.rglob("*.py")):
        if "ReportSection" not in path.read_text(encoding="utf-8"):
            continue
        parts = path.relative_to(folder).with_suffix("").parts
        name = ".".join((package, *(parts[:-1] if parts[-1] == "__init__" else parts)))
        module = importlib.import_module(name)
        for attribute, value in vars(module).items():
            if isinstance(value, ReportSection):
                found.setdefault(f"{name}.{attribute}", value)
    return found


def test_every_section_defined_in_burnqed_is_in_the_report() -> None:
    defined = defined_sections(Path(burnqed.__file__).parent, "burnqed")
    listed = {id(section) for section in SECTIONS}
    assert sorted(name for name, section in defined.items() if id(section) not in listed) == []
    assert len({id(section) for section in defined.values()}) == len(SECTIONS)  # each one found, none twice listed


def test_a_section_left_out_of_the_report_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "grown_report"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "plain.py").write_text("X = 1\n")
    (package / "new_section.py").write_text(
        "from burnqed.report.section import ReportSection\n"
        "NEW = ReportSection(field='new', build=lambda got: [], markdown=lambda rows: [])\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = defined_sections(package, "grown_report")
    assert list(found) == ["grown_report.new_section.NEW"]
    assert id(found["grown_report.new_section.NEW"]) not in {id(section) for section in SECTIONS}


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
    sections = tuple(section if other.field == "repairs" else other for other in SECTIONS)
    for module in (report_build, report_markdown):
        monkeypatch.setattr(module, "SECTIONS", sections)
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
    from burnqed.report.plots import _error_bars
    from burnqed.report.tables import RateRow

    row = RateRow(budget=1, solved=solved, total=total, rate=solved / total)
    below, above = _error_bars([row])
    assert min(below + above) >= 0.0 and max(below + above) > 0.0

"""The report's search modes: every eval of an iteration with its cost, side by side at equal tokens, and the plot
of solve rate against generated tokens."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnqed.config import PipelineConfig
from burnqed.eval.compare import compare_results
from burnqed.eval.result import write_eval_result
from burnqed.layout import Layout
from burnqed.records.enums import SearchMode
from burnqed.report.build import build_report, write_report
from burnqed.report.markdown import render_markdown
from burnqed.storage import Store
from tests.eval.test_compare import BASE, CAND, costed


@pytest.mark.slow
def test_the_report_puts_the_modes_side_by_side_at_equal_tokens(tmp_path: Path, store: Store) -> None:
    root = f"file://{tmp_path}/run"
    at = Layout(root)
    write_eval_result(costed(BASE, [10, 30, 60], SearchMode.STEP, 100), at.eval_result(0), store=store)
    write_eval_result(costed(CAND, [10, 30, 60], SearchMode.WHOLE, 50), at.eval_result(0, mode="whole"), store=store)
    pipeline = PipelineConfig(eval_modes=[SearchMode.WHOLE, SearchMode.HYBRID])  # no hybrid eval published
    report = build_report(root, 0, pipeline, store=store)
    assert [(r.label, r.budget, r.unit, r.avg_tokens) for r in report.modes] == [
        ("step", 10, "expansions", 875.0), ("step", 30, "expansions", 2250.0), ("step", 60, "expansions", 3750.0),
        ("whole", 10, "proofs", 437.5), ("whole", 30, "proofs", 1062.5), ("whole", 60, "proofs", 1687.5),
    ]
    assert report.mode_comparison is not None and report.mode_comparison.labels == ["step", "whole"]
    text = render_markdown(report)
    section = text[text.index("## Search modes at equal tokens") : text.index("## Go / no-go")]
    assert "| whole | 60 proofs | 3/4 (75.0%, 30.1–95.4%) | 1688 | 135 |" in section  # Lean calls: 5 + 60 + 20 + 50
    # At 1,688 tokens whole is read at 60 proofs; step, with no curves, between its rungs 10 (875) and 30 (2,250),
    # never a rung below the level as if that were equal.
    assert "| 1,688 | ≈39.8 % @10–30 · 875–2,250 | 3/4 (75.0%, 30.1–95.4%) @60 · 1,688 | ≈+35.2 pts |" in section
    assert "| 438 | not measured | 1/4 (25.0%, 4.6–69.9%) @10 · 438 | – |" in section
    # Lean calls (one a unit): 8.75 per theorem at 10 in both.
    assert "| Lean calls/theorem | step | whole | Δ |" in section
    assert "| 8.75 | 1/4 (25.0%, 4.6–69.9%) @10 · 8.75 | 1/4 (25.0%, 4.6–69.9%) @10 · 8.75 | +0.0 pts |" in section
    assert "modes_tokens.png" in section
    folder = tmp_path / "report"
    write_report(report, folder)
    assert (folder / "modes_tokens.png").stat().st_size > 0


def test_a_report_json_with_rung_only_levels_loads_without_its_comparison() -> None:
    from burnqed.report.document import Report

    entry = {"label": "step", "budget": None, "solved": 0, "total": 4, "rate": 0.0, "avg_tokens": None}
    rung_only = {"labels": ["step", "whole"], "budgets": [], "common_budget": None, "newly_solved": [], "lost": [],
                 "warnings": [], "token_levels": [{"tokens": 437.5, "entries": [entry, entry],
                                                    "delta_rate_points": 0.0}]}
    base = {"root": "r", "iteration": 0, "rows": [], "iterations": [], "gates": []}
    assert Report.model_validate({**base, "mode_comparison": rung_only}).mode_comparison is None
    current = compare_results([("step", costed(BASE, [10], SearchMode.STEP, 100)),
                               ("whole", costed(CAND, [10], SearchMode.WHOLE, 50))])
    loaded = Report.model_validate({**base, "mode_comparison": current.model_dump(mode="json")})
    assert loaded.mode_comparison == current

"""The iteration report: the base policy's arm, the learning table base → iteration 0 → iteration 1 per theorem
source, and the baseline gate on the base eval (iteration 0's when a run has none)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from burnqed.config import PipelineConfig
from burnqed.eval.report import build_report, render_markdown
from burnqed.eval.results import build_eval_result, write_eval_result
from burnqed.pipeline import Layout
from burnqed.records import FailureReason, TheoremResult

NAMES = [f"world_{k}" for k in range(8)] + ["hand_0", "hand_1"]
SOURCES = {name: "burnqed-bundled" if name.startswith("hand") else "burnqed-world" for name in NAMES}


def publish(path: str, solved: set[str], ebm: str | None = None, iteration: int = 0) -> None:
    attempts = [[TheoremResult(name=name, proved=True, budget_at_proof=3, nodes_expanded=3, time_s=1.0, proof="p")
                 if name in solved else
                 TheoremResult(name=name, proved=False, failure_reason=FailureReason.EXHAUSTED, nodes_expanded=2,
                               time_s=1.0)
                 for name in NAMES]]
    result = build_eval_result(attempts, [10, 50], benchmark="embedded-test", model="tiny", ebm=ebm,
                               lean_backend="replay", iteration=iteration, config_digest="0" * 16, git_commit=None,
                               theorem_names=NAMES, timestamp=datetime(2026, 1, 1, tzinfo=UTC),
                               theorem_sources=SOURCES, seed=0)
    write_eval_result(result, path)


def test_learning_rows_per_group_and_the_baseline_gate_on_the_base_eval(tmp_path: Path) -> None:
    root = f"file://{tmp_path}"
    at = Layout(root)
    publish(at.eval_base(), {"world_0"})
    publish(at.eval_result(0), {"world_0", "world_1", "world_2", "world_3", "hand_0"})
    publish(at.eval_result(1), {"world_0", "world_1", "world_2", "world_3", "world_4", "world_5", "hand_0"},
            ebm=at.ebm(1), iteration=1)
    publish(at.eval_result(1, with_ebm=False), {"world_0", "world_1", "world_2", "world_3", "world_4", "hand_0"},
            iteration=1)
    report = build_report(root, 1, PipelineConfig(gate_min_rate=0.1))
    rows = [(r.step, r.arm, r.group, r.solved, r.total, None if r.gain is None else round(100 * r.gain, 1))
            for r in report.learning]
    assert rows == [
        ("base", "base", "all", 1, 10, None), ("base", "base", "burnqed-world", 1, 8, None),
        ("base", "base", "burnqed-bundled", 0, 2, None),
        ("iteration 0", "llm", "all", 5, 10, 40.0), ("iteration 0", "llm", "burnqed-world", 4, 8, 37.5),
        ("iteration 0", "llm", "burnqed-bundled", 1, 2, 50.0),
        ("iteration 1", "llm+ebm", "all", 7, 10, 20.0), ("iteration 1", "llm+ebm", "burnqed-world", 6, 8, 25.0),
        ("iteration 1", "llm+ebm", "burnqed-bundled", 1, 2, 0.0),
    ]
    assert {(r.iteration, r.arm) for r in report.rows} == {(0, "base"), (0, "llm"), (1, "llm"), (1, "llm+ebm")}
    baseline = report.gates[0]
    assert (baseline.name, baseline.passed) == ("baseline", True)
    assert baseline.detail == "the base policy solves 10.0% at its largest budget (gate: ≥ 10.0%)"
    assert report.iterations[0].eval_base == at.eval_base()
    markdown = render_markdown(report)
    assert "| theorems | base | iteration 0 | iteration 1 |" in markdown
    assert "| burnqed-world | 1/8 (12.5%) | 4/8 (50.0%) (+37.5) | 6/8 (75.0%) (+25.0) |" in markdown
    assert "| 0 | base | 1/10 (10.0%) | 1/10 (10.0%) |" in markdown


def test_a_run_without_a_base_eval_gates_on_iteration_0(tmp_path: Path) -> None:
    root = f"file://{tmp_path}"
    publish(Layout(root).eval_result(0), {"world_0"})
    report = build_report(root, 0, PipelineConfig(gate_min_rate=0.2))
    assert report.gates[0].detail == "iteration 0 solves 10.0% at its largest budget (gate: ≥ 20.0%)"
    assert not report.gates[0].passed and not report.go
    assert [r.step for r in report.learning] == ["iteration 0"] * 3

"""The iteration report: the base policy's arm, the learning table base → iteration 0 → iteration 1 per theorem
source, and the baseline gate on the base eval (iteration 0's when a run has none)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from burnqed.config import PipelineConfig
from burnqed.eval.pass_at import build_eval_result
from burnqed.eval.result import write_eval_result
from burnqed.layout import Layout
from burnqed.records.results import FailureReason, TheoremResult
from burnqed.report.build import build_report
from burnqed.report.markdown import render_markdown
from burnqed.storage import Store

NAMES = [f"world_{k}" for k in range(8)] + ["hand_0", "hand_1"]
SOURCES = {name: "burnqed-bundled" if name.startswith("hand") else "burnqed-world" for name in NAMES}


def publish(path: str, solved: set[str], ebm: str | None = None, iteration: int = 0, *, store: Store) -> None:
    attempts = [[TheoremResult(name=name, proved=True, budget_at_proof=3, nodes_expanded=3, time_s=1.0, proof="p")
                 if name in solved else
                 TheoremResult(name=name, proved=False, failure_reason=FailureReason.EXHAUSTED, nodes_expanded=2,
                               time_s=1.0)
                 for name in NAMES]]
    result = build_eval_result(attempts, [10, 50], benchmark="embedded-test", model="tiny", ebm=ebm,
                               lean_backend="replay", iteration=iteration, config_digest="0" * 16, git_commit=None,
                               theorem_names=NAMES, timestamp=datetime(2026, 1, 1, tzinfo=UTC),
                               theorem_sources=SOURCES, seed=0)
    write_eval_result(result, path, store=store)


def test_learning_rows_per_group_and_the_baseline_gate_on_the_base_eval(tmp_path: Path, store: Store) -> None:
    root = f"file://{tmp_path}"
    at = Layout(root)
    publish(at.eval_base(), {"world_0"}, store=store)
    publish(at.eval_result(0), {"world_0", "world_1", "world_2", "world_3", "hand_0"}, store=store)
    publish(at.eval_result(1), {"world_0", "world_1", "world_2", "world_3", "world_4", "world_5", "hand_0"},
            ebm=at.ebm(1), iteration=1, store=store)
    publish(at.eval_result(1, with_ebm=False), {"world_0", "world_1", "world_2", "world_3", "world_4", "hand_0"},
            iteration=1, store=store)
    report = build_report(root, 1, PipelineConfig(gate_min_rate=0.1), store=store)
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
    assert baseline.detail == ("the base policy (tiny) solves 1/10 (10.0%, 1.8–40.4%) of embedded-test at its "
                               "largest budget, 50 (gate: ≥ 10.0% [pipeline.gate_min_rate = 0.1])")
    assert report.iterations[0].eval_base == at.eval_base()
    markdown = render_markdown(report)
    assert "| theorems | base | iteration 0 | iteration 1 |" in markdown
    assert ("| burnqed-world | 1/8 (12.5%, 2.2–47.1%) | 4/8 (50.0%, 21.5–78.5%) (+37.5) | 6/8 (75.0%, 40.9–92.9%) "
            "(+25.0) |") in markdown
    assert "| 0 | base | 1/10 (10.0%, 1.8–40.4%) | 1/10 (10.0%, 1.8–40.4%) |" in markdown


def test_a_run_without_a_base_eval_gates_on_iteration_0(tmp_path: Path, store: Store) -> None:
    root = f"file://{tmp_path}"
    publish(Layout(root).eval_result(0), {"world_0"}, store=store)
    report = build_report(root, 0, PipelineConfig(gate_min_rate=0.2), store=store)
    assert report.gates[0].detail == ("iteration 0 (tiny) solves 1/10 (10.0%, 1.8–40.4%) of embedded-test at its "
                                      "largest budget, 50 (gate: ≥ 20.0% [pipeline.gate_min_rate = 0.2])")
    assert not report.gates[0].passed and not report.go
    assert [r.step for r in report.learning] == ["iteration 0"] * 3


def test_the_report_shows_each_exports_merge_and_its_qlora_gap(tmp_path: Path, store: Store) -> None:
    from burnqed.sft.manifests import EXPORT_RECORD, ExportRecord, QloraGap

    root = f"file://{tmp_path}"
    publish(Layout(root).eval_result(0), {"world_0"}, store=store)
    gap = QloraGap(measured=True, reason="64 held-out examples of the SFT's eval split on cuda",
                   adapter_nf4_loss=0.4125, merged_loss=0.4311, examples=64)
    record = ExportRecord(source="s", method="qlora", base_model="b", dtype="bfloat16", params=6_910_365_696,
                          files={}, max_logit_diff=1e-3, probe_state="p", probe_tactic="simp", qlora_gap=gap,
                          written_at=datetime(2026, 1, 1, tzinfo=UTC))
    with store.staged_output(Layout(root).export(0), "export") as folder:
        (folder / EXPORT_RECORD).write_text(record.model_dump_json())
    text = render_markdown(build_report(root, 0, PipelineConfig(), store=store))
    assert ("- iteration 0: qlora, bfloat16, 6,910,365,696 params; QLoRA gap: held-out loss adapter on NF4 0.4125, "
            "merged 0.4311 (Δ +0.0186 nats/token; 64 held-out examples of the SFT's eval split on cuda)") in text


def publish_at(path: str, found: dict[str, int], iteration: int = 0, *, store: Store) -> None:
    """An eval at budgets 10 and 50 proving each theorem of `found` at its budget_at_proof, with costs."""
    attempts = [[TheoremResult(name=name, proved=True, budget_at_proof=found[name], nodes_expanded=found[name],
                               time_s=2.0, proof=f"theorem {name} : p := by\n  exact h", edges=4, policy_s=1.5,
                               lean_s=0.5, tokens=100)
                 if name in found else
                 TheoremResult(name=name, proved=False, failure_reason=FailureReason.MAX_NODES, nodes_expanded=50,
                               time_s=3.0, edges=9, policy_s=2.0, lean_s=1.0, value_s=0.25, tokens=300)
                 for name in NAMES]]
    result = build_eval_result(attempts, [10, 50], benchmark="embedded-test", model="tiny", ebm=None,
                               lean_backend="replay", iteration=iteration, config_digest="0" * 16, git_commit=None,
                               theorem_names=NAMES, timestamp=datetime(2026, 1, 1, tzinfo=UTC), seed=0, wall_s=30.0)
    write_eval_result(result, path, store=store)


@pytest.mark.slow
def test_solve_rate_against_budget_costs_and_proofs_found(tmp_path: Path, store: Store) -> None:
    root = f"file://{tmp_path}"
    at = Layout(root)
    publish_at(at.eval_result(0), {"world_0": 3, "world_1": 3, "world_2": 40}, store=store)
    publish_at(at.eval_result(1, with_ebm=True), {"world_0": 2, "world_2": 8, "world_3": 20, "hand_0": 50},
               iteration=1, store=store)
    report = build_report(root, 1, PipelineConfig(), store=store)
    curve = [(p.budget, p.solved) for p in report.curves if p.iteration == 0]
    assert curve == [(0, 0), (3, 2), (40, 3), (50, 3)]  # cumulative over budget_at_proof, up to the largest budget
    curve = [(p.budget, round(100 * p.rate)) for p in report.curves if p.iteration == 1]
    assert curve == [(0, 0), (2, 10), (8, 20), (20, 30), (50, 40)]
    cost = report.costs[1]
    assert (cost.iteration, cost.wall_s, cost.search_s, cost.policy_s, cost.lean_s, cost.value_s, cost.edges) == (
        1, 30.0, 4 * 2.0 + 6 * 3.0, 4 * 1.5 + 6 * 2.0, 4 * 0.5 + 6 * 1.0, 6 * 0.25, 4 * 4 + 6 * 9)
    assert cost.tokens == 4 * 100 + 6 * 300
    new = sorted(p.theorem for p in report.proofs if p.iteration == 1 and p.new)
    assert new == ["hand_0", "world_3"]
    markdown = render_markdown(report)
    assert "## Time and tokens" in markdown and "| 1 | llm | 30.0 s | 26.0 s | 18.0 s | 8.0 s | 1.5 s | 2200 | 70 |" \
        in markdown
    assert "## Proofs found by iteration 1" in markdown
    assert "| `hand_0` **new** | 50 | `exact h` |" in markdown and "| `world_0` | 2 | `exact h` |" in markdown
    folder = tmp_path / "report"
    from burnqed.report.build import write_report

    write_report(report, folder)
    # two iterations: the learning curve too (report.iterations); nothing else to draw
    assert {p.name for p in folder.iterdir()} == {"report.md", "report.json", "solve_rate.png", "learning_curve.png"}


def test_a_root_without_the_iteration_or_without_any_eval_is_refused_before_anything_is_written(
    tmp_path: Path, store: Store
) -> None:
    from burnqed.errors import InputError

    with pytest.raises(InputError, match=r"iter_0 does not exist \(.*typo does not exist\)"):
        build_report(str(tmp_path / "typo"), 0, PipelineConfig(), store=store)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"iter_0 does not exist \(it holds no iteration\)"):
        build_report(str(tmp_path / "empty"), 0, PipelineConfig(), store=store)
    (tmp_path / "run" / "iter_0" / "data").mkdir(parents=True)
    with pytest.raises(InputError, match=r"iter_1 does not exist \(it holds iterations \[0\]\)"):
        build_report(str(tmp_path / "run"), 1, PipelineConfig(), store=store)
    with pytest.raises(InputError, match="no eval result under"):
        build_report(str(tmp_path / "run"), 0, PipelineConfig(), store=store)


def test_the_report_lists_the_overlaps_prepare_dropped_and_those_an_eval_found(tmp_path: Path, store: Store) -> None:
    from burnqed.data.data_report import BenchmarkOverlap, CheckedBenchmark, DataReport, TrainingDataCheck
    from burnqed.eval.result import load_eval_result

    root = f"file://{tmp_path}"
    at = Layout(root)
    dropped = BenchmarkOverlap(training="algebra_2x_plus_3_eq_11", training_source="bundled", benchmark="bench_bundled",
                               benchmark_source="MyBench", benchmark_split="test",
                               statement="∀ (x : ℝ), 2 * x + 3 = 11 → x = 4", route="pipeline.benchmark")
    data = DataReport(created_at=datetime(2026, 1, 1, tzinfo=UTC), replay=True, lean_command=None, valid_fraction=0.1,
                      split_salt="burnqed", contrastive_min_depth=3, sources=[], theorems=2, pairs=0, splits={},
                      depth_histogram={}, contrastive=0, overlaps=[dropped], elapsed_s=1.0,
                      benchmarks=[CheckedBenchmark(route="pipeline.benchmark", name="MyBench", theorems=3)])
    store.write_bytes(f"{at.data()}/report.json", data.model_dump_json().encode())
    publish(at.eval_result(0), {"world_0"}, store=store)
    trained = dropped.model_copy(update={"training": "world_1", "training_source": "world", "benchmark": "world_0",
                                         "benchmark_source": "embedded-test", "route": "eval"})
    check = TrainingDataCheck(data=at.data(), training_theorems=4, overlaps=[trained])
    result = load_eval_result(at.eval_result(0), store=store).model_copy(update={"training_check": check})
    write_eval_result(result, at.eval_result(0), store=store)
    report = build_report(root, 0, PipelineConfig(), store=store)
    assert [(o.benchmark, o.training, o.route, o.dropped, o.listed_in) for o in report.overlaps] == [
        ("bench_bundled", "algebra_2x_plus_3_eq_11", "pipeline.benchmark", True, f"{at.data()}/report.json"),
        ("world_0", "world_1", "eval", False, at.eval_result(0)),
    ]
    assert report.decontamination == [
        f"prepared data {at.data()}: 1 training theorems dropped as restating a benchmark theorem (pipeline.benchmark: "
        "1); compared with: MyBench (pipeline.benchmark, 3 theorems)",
        f"eval {at.eval_result(0)}: 1 of the 4 training theorems of {at.data()} (the model's training data) restate a "
        "theorem of embedded-test",
    ]
    markdown = render_markdown(report)
    assert ("| bench_bundled (MyBench) | algebra_2x_plus_3_eq_11 (bundled) | pipeline.benchmark | no: dropped | "
            f"`{at.data()}/report.json` |") in markdown
    assert f"| world_0 (embedded-test) | world_1 (world) | eval | **yes** | `{at.eval_result(0)}` |" in markdown

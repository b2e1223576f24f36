"""What the iteration report tells a researcher (issue 47, item 4), on a small run root written in-process: every
solve rate with its n and 95 % Wilson interval, the theorems each step gained and lost, the unsolved theorems with
their reason and the budget they used by source, the SFT and value-model training curves, where search spends and
proves, what each stage cost, the provenance of every eval, and the headline `iterate` prints."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from burnqed.config import PipelineConfig
from burnqed.eval.pass_at import build_eval_result
from burnqed.eval.result import rate_text, wilson_interval, write_eval_result
from burnqed.layout import Layout, StageRun, StageTimes
from burnqed.records.results import EdgeOutcome, FailureReason, TheoremResult
from burnqed.report.build import build_report, headline, write_report
from burnqed.report.document import Report
from burnqed.report.markdown import render_markdown
from burnqed.report.tables import Change, IterationCost, StageCost
from burnqed.storage import Store
from tests.trajectory.factories import edge, result, write_trajectory

WORLD = [f"w{k}" for k in range(6)]
NAMES = [*WORLD, "h0", "h1"]
SOURCES = {name: "burnqed-world" if name.startswith("w") else "burnqed-bundled" for name in NAMES}
# Why each unsolved theorem fails, and how many expansions its search spent.
FAILURES = {"w2": (FailureReason.MAX_NODES, 50), "w3": (FailureReason.MAX_NODES, 50),
            "w4": (FailureReason.EXHAUSTED, 2), "w5": (FailureReason.START_ERROR, 0),
            "h1": (FailureReason.TIMEOUT, 7)}
STARTED = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)


def publish(uri: str, solved: dict[str, int], *, iteration: int, ebm: str | None = None,
            pantograph: str | None = "0.3.4", store: Store) -> None:
    """An eval at budgets 10 and 50 proving each theorem of `solved` at its budget_at_proof."""
    attempts = []
    for name in NAMES:
        if name in solved:
            attempts.append(TheoremResult(name=name, proved=True, budget_at_proof=solved[name],
                                          nodes_expanded=solved[name], time_s=1.0, proof="theorem t : p := by\n  simp",
                                          edges=3, tokens=40))
            continue
        reason, nodes = FAILURES.get(name, (FailureReason.MAX_NODES, 50))
        attempts.append(TheoremResult(name=name, proved=False, failure_reason=reason, nodes_expanded=nodes,
                                      time_s=2.5, edges=4 * nodes, tokens=100,
                                      detail="unknown identifier 'foo'" if reason is FailureReason.START_ERROR
                                      else None))
    built = build_eval_result([attempts], [10, 50], benchmark="embedded-test", model="runs/iter_0/export", ebm=ebm,
                              lean_backend="minilean", iteration=iteration, config_digest="c0ffee", git_commit="a" * 40,
                              theorem_names=NAMES, timestamp=STARTED, theorem_sources=SOURCES, seed=0, wall_s=12.0,
                              pantograph_version=pantograph)
    write_eval_result(built, uri, store=store)


def sft_record(iteration: int) -> dict[str, object]:
    counts = {"train_examples": 120, "eval_examples": 10, "base_pairs": 100, "positives": 20 * iteration,
              "positive_upsample": 2, "positives_held_out": 0, "too_long": 0, "eval_source": "valid-split",
              "rows": 120, "tokens": 9000, "supervised_tokens": 2000}
    return {"method": "full", "base_model": None, "base_fingerprint": "f", "base_dtype": "float32",
            "init": "runs/iter_0/sft" if iteration else None,
            "iteration": iteration, "data": "d", "trajectories": [], "prompt_format": "deepseek-tactic", "seed": 7,
            "steps": 40, "learning_rate": 1e-4, "resumed_from_step": None, "train_loss": 1.2, "first_train_loss": 3.0,
            "eval_loss": 1.5, "data_counts": counts, "adapter_rank": None, "trainable_params": 10, "total_params": 10,
            "train_seconds": 30.0, "tokens_per_second": None, "device": "cpu",
            "history": [{"step": 10, "loss": 3.0}, {"step": 20, "loss": 2.0, "eval_loss": 2.2},
                        {"step": 40, "loss": 1.2, "eval_loss": 1.5}],
            "written_at": "2026-01-02T03:04:00Z"}


def snapshot(step: int, split: str, loss: float, rank1: float) -> str:
    return json.dumps({"step": step, "split": split, "groups": 8, "loss": loss, "infonce": loss, "depth_loss": None,
                       "energy_gap": 0.1, "rank1": rank1, "rank1_by_depth": {}, "groups_by_depth": {},
                       "temperature": 1.0})


@pytest.fixture
def root(tmp_path: Path, store: Store) -> str:
    """Iterations 0 and 1 of a small run: base 1/8 → iteration 0 4/8 → iteration 1 5/8 (w3 and w4 new, w2 lost)."""
    at = Layout(f"file://{tmp_path}/run")
    publish(at.eval_base(), {"w0": 8}, iteration=0, store=store)
    publish(at.eval_result(0), {"w0": 3, "w1": 9, "w2": 40, "h0": 5}, iteration=0, store=store)
    publish(at.eval_result(1), {"w0": 2, "w1": 4, "w3": 30, "w4": 6, "h0": 5}, iteration=1, ebm=at.ebm(1),
            store=store)
    publish(at.eval_result(1, with_ebm=False), {"w0": 2, "w1": 4}, iteration=1, store=store)
    for iteration in (0, 1):
        with store.staged_output(at.sft(iteration), "sft") as folder:
            (folder / "sft.json").write_text(json.dumps(sft_record(iteration)))
    with store.staged_output(at.ebm(1), "train-ebm") as folder:
        (folder / "metrics.jsonl").write_text("\n".join([
            snapshot(0, "train", 2.08, 0.125), snapshot(0, "valid", 2.1, 0.1),
            snapshot(25, "train", 1.1, 0.6), snapshot(25, "valid", 1.6, 0.4)]) + "\n")
        (folder / "metrics.json").write_text(json.dumps({"steps": 25, "train_seconds": 3.5,
                                                         "counts": {"train_positives": 12}}))
    runs = [StageRun(stage="sft", shard=None, status="ran", exit_code=0, started_at=STARTED, wall_s=60.0, cpu_s=100.0),
            StageRun(stage="search", shard=0, status="failed", exit_code=143, started_at=STARTED, wall_s=30.0,
                     cpu_s=20.0),
            StageRun(stage="search", shard=0, status="ran", exit_code=0, started_at=STARTED.replace(hour=4),
                     wall_s=45.0, cpu_s=40.0),
            StageRun(stage="search", shard=1, status="ran", exit_code=0, started_at=STARTED, wall_s=50.0, cpu_s=45.5)]
    store.write_bytes(at.stage_times(1), StageTimes(iteration=1, runs=runs).model_dump_json().encode())
    # the training searches of iteration 1: one proof of depth 2; the main eval: a failed and a closed tactic
    proof = [edge(1), edge(2, outcome=EdgeOutcome.ERROR), edge(3, 1, EdgeOutcome.CLOSED, depth=2),
             edge(4, 1, EdgeOutcome.TIMEOUT, depth=2)]
    for k in (0, 2):
        proof[k].on_proof_path = True
    write_trajectory(at.trajectories(1), [(result("t", True, edges=4, depth=2), proof),
                                          (result("u", edges=1), [edge(1, outcome=EdgeOutcome.REFUSED)])],
                     iteration=1, store=store)
    closed = edge(2, outcome=EdgeOutcome.CLOSED)
    closed.on_proof_path = True
    write_trajectory(at.eval_trajectories(1), [(result("w0", True, edges=2, depth=1), [edge(1), closed])],
                     iteration=1, store=store)
    return at.root


def test_the_wilson_interval_is_the_score_interval() -> None:
    # Wilson (1927); e.g. 1/10: 0.0179–0.4042, the textbook value; never outside [0, 1], not zero-wide at 0 or n.
    assert [tuple(round(end, 4) for end in wilson_interval(s, n)) for s, n in ((1, 10), (0, 8), (8, 8), (0, 0))] == [
        (0.0179, 0.4042), (0.0, 0.3244), (0.6756, 1.0), (0.0, 1.0)]
    assert rate_text(32, 71) == "32/71 (45.1%, 34.0–56.6%)"


def test_every_rate_carries_its_n_and_interval(root: str, store: Store) -> None:
    report = build_report(root, 1, PipelineConfig(gate_min_rate=0.1, gate_min_gain=0.0, start="best"), store=store)
    saved = json.loads(report.model_dump_json())
    first = saved["rows"][0]
    assert (first["arm"], first["budget"], first["solved"], first["total"], round(first["interval_low"], 4),
            round(first["interval_high"], 4)) == ("base", 10, 1, 8, 0.0224, 0.4709)
    assert Report.model_validate(saved).rows == report.rows  # report.json reads back (run-all reads it)
    markdown = render_markdown(report)
    assert "Every solve rate is shown as solved/n (rate, 95% Wilson score interval)." in markdown
    assert "Solve rate of `embedded-test` (8 theorems) at the largest budget (50); each iteration's main" in markdown
    assert ("| all | 1/8 (12.5%, 2.2–47.1%) | 4/8 (50.0%, 21.5–78.5%) (+37.5) | 5/8 (62.5%, 30.6–86.3%) (+12.5) |"
            in markdown)
    assert "| 1 | llm+ebm | 4/8 (50.0%, 21.5–78.5%) | 5/8 (62.5%, 30.6–86.3%) |" in markdown
    assert [gate.detail for gate in report.gates] == [
        "the base policy (export) solves 1/8 (12.5%, 2.2–47.1%) of embedded-test at its largest budget, 50 (gate: ≥ "
        "10.0% [pipeline.gate_min_rate = 0.1])",
        "iteration 1 vs 0: 2 gained and 1 lost (4/8 → 5/8; difference +12.5 pts, 95% interval -30.3 to +49.6) "
        "(gate: the difference ≥ +0.0 pts [pipeline.gate_min_gain = 0])",
        "LLM only 2/8 vs the best so far, iteration 0's 4/8, at budget 50: the next iteration starts from iteration "
        "0's policy (no-go)",
        "LLM+EBM 5/8 (62.5%, 30.6–86.3%) vs LLM only 2/8 (25.0%, 7.1–59.1%) at the largest budget"]


def test_new_and_lost_theorems_come_from_compare(root: str, store: Store) -> None:
    report = build_report(root, 1, PipelineConfig(), store=store)
    assert report.changes == [
        Change(before="base", after="iteration 0", compared_at="budget 50", new=["h0", "w1", "w2"], lost=[]),
        Change(before="iteration 0", after="iteration 1", compared_at="budget 50", new=["w3", "w4"], lost=["w2"]),
    ]
    assert sorted(p.theorem for p in report.proofs if p.iteration == 1 and p.new) == ["w3", "w4"]
    markdown = render_markdown(report)
    assert ("- **iteration 1** vs iteration 0 (budget 50): 2 new, 1 lost\n  - new: `w3`, `w4`\n  - lost: `w2`"
            in markdown)


def test_the_unsolved_theorems_with_their_reason_and_budget_by_source(root: str, store: Store) -> None:
    report = build_report(root, 1, PipelineConfig(), store=store)
    assert [(r.group, r.theorem, r.reason, r.budget_used, r.edges) for r in report.unsolved] == [
        ("burnqed-bundled", "h1", "timeout", 7, 28),
        ("burnqed-world", "w2", "max_nodes", 50, 200),
        ("burnqed-world", "w5", "start_error", 0, 0),
    ]
    markdown = render_markdown(report)
    section = markdown[markdown.index("## Unsolved theorems of iteration 1"):markdown.index("## Proofs found")]
    assert ("| burnqed-bundled | 1 of 2 | 0 | 1 of 2 | timeout 1 |\n"
            "| burnqed-world | 2 of 6 | 0 | 4 of 6 | max_nodes 1, start_error 1 |") in section
    assert ("| `w5` | start_error | 0 | 2.5 s | 0 | Lean could not start the goal: unknown identifier 'foo' |"
            in section)
    assert "| theorem | reason | budget used (expansions, of 50) | time | edges | what happened |" in section
    assert "Budget used: what a theorem's search spent of the largest budget (50 expansions;" in section


def test_training_curves_of_the_policy_and_the_value_model(root: str, store: Store) -> None:
    report = build_report(root, 1, PipelineConfig(), store=store)
    assert [(p.iteration, p.model, p.split, p.step, p.loss) for p in report.training] == [
        (0, "policy", "train", 10, 3.0), (0, "policy", "train", 20, 2.0), (0, "policy", "held-out", 20, 2.2),
        (0, "policy", "train", 40, 1.2), (0, "policy", "held-out", 40, 1.5),
        (1, "policy", "train", 10, 3.0), (1, "policy", "train", 20, 2.0), (1, "policy", "held-out", 20, 2.2),
        (1, "policy", "train", 40, 1.2), (1, "policy", "held-out", 40, 1.5),
        (1, "value", "train", 0, 2.08), (1, "value", "held-out", 0, 2.1), (1, "value", "train", 25, 1.1),
        (1, "value", "held-out", 25, 1.6)]
    markdown = render_markdown(report)
    assert ("| 1 | full, 40 steps on 120 examples (20 positives from trajectories), 30.0 s | "
            "3.000 → 1.200 (step 10 → 40) | 2.200 → 1.500 (step 20 → 40) | 25 steps on 12 positive states, 3.5 s | "
            "2.080 → 1.100 (step 0 → 25) | "
            "2.100 → 1.600 (step 0 → 25) | 40.0% (step 25) |") in markdown
    assert "![training curves](training.png)" in markdown


def test_where_search_spends_and_proves_by_depth(root: str, store: Store) -> None:
    report = build_report(root, 1, PipelineConfig(), store=store)
    assert [(r.source, r.depth, r.outcomes, r.on_path) for r in report.depth_outcomes] == [
        ("search", 1, {"error": 1, "ok": 1, "refused": 1}, 1),
        ("search", 2, {"closed": 1, "timeout": 1}, 1),
        ("eval", 1, {"closed": 1, "ok": 1}, 1),
    ]
    markdown = render_markdown(report)
    assert "| depth | edges | ok | closed | error | timeout | refused | other | on a proof path |" in markdown
    assert "| 1 | 3 | 1 | 0 | 1 | 0 | 1 | 0 | 1 |\n| 2 | 2 | 0 | 1 | 0 | 1 | 0 | 0 | 1 |" in markdown


def test_per_stage_wall_and_cpu_time_and_the_totals(root: str, store: Store) -> None:
    report = build_report(root, 1, PipelineConfig(), store=store)
    assert report.stage_costs == [StageCost(iteration=1, stage="sft", runs=1, failed=0, wall_s=60.0, cpu_s=100.0),
                                  StageCost(iteration=1, stage="search", runs=3, failed=1, wall_s=125.0, cpu_s=105.5)]
    assert report.iteration_costs == [IterationCost(iteration=0, recorded=False),
                                      IterationCost(iteration=1, recorded=True, stage_runs=4, wall_s=185.0,
                                                    cpu_s=205.5, span_s=3600.0 + 45.0)]
    markdown = render_markdown(report)
    assert "| search | 3 (1 stopped or failed) | 125.0 s | 105.5 s |" in markdown
    assert ("- iteration 0: not recorded (no stages.json)\n- iteration 1: 185.0 s of stage time over 4 stage runs, "
            "205.5 s CPU; span 60.8 min (first start to last end, pauses between interrupted runs included)"
            in markdown)


def test_provenance_of_every_eval(root: str, store: Store) -> None:
    report = build_report(root, 1, PipelineConfig(), store=store)
    assert [(p.iteration, p.arm, p.seed, p.burnqed_version, p.pantograph_version) for p in report.provenance] == [
        (0, "base", 0, "0.1.0", "0.3.4"), (0, "llm", 0, "0.1.0", "0.3.4"), (1, "llm+ebm", 0, "0.1.0", "0.3.4"),
        (1, "llm", 0, "0.1.0", "0.3.4")]
    markdown = render_markdown(report)
    assert (f"| iteration 1 llm+ebm | `runs/iter_0/export` | `{Layout(root).ebm(1)}` | embedded-test (8) | 1, step | 0 "
            "| `c0ffee` | aaaaaaaaaaaa | 0.1.0 | minilean (Pantograph 0.3.4) | 2026-01-02 03:04 UTC |") in markdown
    assert ("Policies trained (sft.json): iteration 0: full from the tiny embedded model, seed 7; iteration 1: full "
            "from `runs/iter_0/sft`, seed 7." in markdown)
    assert report.made_by.startswith("burnqed 0.1.0")


def test_the_headline_iterate_prints(root: str, store: Store) -> None:
    report = build_report(root, 1, PipelineConfig(gate_min_rate=0.1, gate_min_gain=0.0, start="best"), store=store)
    assert headline(report) == [
        "  solved at budget 50 (n/N, rate, 95% Wilson interval) of embedded-test from the base export, step by step:",
        "  all: base 1/8 (12.5%, 2.2–47.1%) → iteration 0 4/8 (50.0%, 21.5–78.5%) (+37.5) → iteration 1 5/8 "
        "(62.5%, 30.6–86.3%) (+12.5)",
        "  burnqed-world: base 1/6 (16.7%, 3.0–56.4%) → iteration 0 3/6 (50.0%, 18.8–81.2%) (+33.3) → iteration 1 4/6 "
        "(66.7%, 30.0–90.3%) (+16.7)",
        "  burnqed-bundled: base 0/2 (0.0%, 0.0–65.8%) → iteration 0 1/2 (50.0%, 9.5–90.5%) (+50.0) → iteration 1 1/2 "
        "(50.0%, 9.5–90.5%) (+0.0)",
        "  iteration 1 vs iteration 0: 2 new, 1 lost (lost: w2)",
        "  iteration 1 took 60.8 min from its first stage's start to its last one's end: 3.1 min of stage time over "
        "4 runs, 3.4 CPU-min",
        "  PASS baseline: the base policy (export) solves 1/8 (12.5%, 2.2–47.1%) of embedded-test at its largest "
        "budget, 50 (gate: ≥ 10.0% [pipeline.gate_min_rate = 0.1])",
        "  PASS gain: iteration 1 vs 0: 2 gained and 1 lost (4/8 → 5/8; difference +12.5 pts, 95% interval -30.3 to "
        "+49.6) (gate: the difference ≥ +0.0 pts [pipeline.gate_min_gain = 0])",
        "  WARN policy: LLM only 2/8 vs the best so far, iteration 0's 4/8, at budget 50: the next iteration starts "
        "from iteration 0's policy (no-go)",
        "  PASS ebm-helps: LLM+EBM 5/8 (62.5%, 30.6–86.3%) vs LLM only 2/8 (25.0%, 7.1–59.1%) at the largest budget",
        "  decision: go: the baseline gate passed",
    ]


def test_the_iteration_0_report_shows_the_same_from_base_to_iteration_0(root: str, store: Store) -> None:
    report = build_report(root, 0, PipelineConfig(), store=store)
    assert [(c.before, c.after, c.new, c.lost) for c in report.changes] == [("base", "iteration 0",
                                                                            ["h0", "w1", "w2"], [])]
    assert [r.theorem for r in report.unsolved] == ["h1", "w4", "w3", "w5"]  # by source, reason, name
    assert {p.model for p in report.training} == {"policy"} and report.depth_outcomes == []
    markdown = render_markdown(report)
    assert "Not recorded: the local runner (`burnqed iterate`) writes each stage run's wall and CPU time" in markdown
    assert "## Provenance" in markdown and "## Unsolved theorems of iteration 0" in markdown


def test_a_damaged_value_model_log_is_one_line_naming_it(root: str, store: Store, tmp_path: Path) -> None:
    from burnqed.errors import InputError

    (tmp_path / "run" / "iter_1" / "ebm" / "metrics.jsonl").write_text('{"step": 1}\n')
    with pytest.raises(InputError, match=r"value-model metrics log .*iter_1/ebm/metrics.jsonl, line 1: Field required"):
        build_report(root, 1, PipelineConfig(), store=store)


@pytest.mark.slow  # matplotlib draws four figures
def test_the_plots_are_written_when_they_have_something_to_show(root: str, store: Store, tmp_path: Path) -> None:
    folder = tmp_path / "report"
    write_report(build_report(root, 1, PipelineConfig(), store=store), folder)
    assert {p.name for p in folder.iterdir()} == {"report.md", "report.json", "solve_rate.png", "training.png",
                                                  "outcomes_by_depth.png", "modes_tokens.png",
                                                  "learning_curve.png"}
    assert all((folder / name).stat().st_size > 10_000 for name in ("solve_rate.png", "training.png"))
    iteration_0 = tmp_path / "report-0"
    write_report(build_report(root, 0, PipelineConfig(), store=store), iteration_0)
    # one eval in iteration 0: nothing to set side by side, and no trajectories to count by depth
    assert {p.name for p in iteration_0.iterdir()} == {"report.md", "report.json", "solve_rate.png", "training.png"}


def test_every_per_budget_figure_an_eval_declares_reaches_its_table_its_file_and_the_report(root: str,
                                                                                          store: Store) -> None:
    """A per-budget figure is declared once (a BudgetRow field marked with `figure`, computed by eval.scoring):
    the eval's table, its result file, report.json and report.md then show it with no other change (this test
    included: it reads the declarations, so a new figure is checked without editing it)."""
    from burnqed.eval.rendering import render_eval_table
    from burnqed.eval.result import BudgetRow, load_eval_result

    declared = BudgetRow.figures()
    assert {"avg_nodes", "avg_time_s", "median_time_s", "avg_tokens", "lean_calls"} <= {n for n, _ in declared}
    at = Layout(root)
    result = load_eval_result(at.eval_result(1), store=store)
    figures = result.budgets[-1]
    assert all(getattr(figures, name) is not None for name, _ in declared)  # every figure computed, none left empty
    header = next(line for line in render_eval_table(result, width=250).splitlines() if "┃ budget ┃" in line)
    columns = [cell.strip() for cell in header.strip("┃ ").split("┃")]
    assert columns == ["budget", "solved", "rate", "95% CI",
                       *("avg nodes" if name == "avg_nodes" else title for name, title in declared)]
    report = build_report(root, 1, PipelineConfig(gate_min_rate=0.1, gate_min_gain=0.0), store=store)
    row = next(r for r in report.rows if (r.iteration, r.arm, r.budget) == (1, "llm+ebm", 50))
    assert row.figures == figures.figure_values() and set(row.figures) == {n for n, _ in declared}
    markdown = render_markdown(report)
    assert "| iteration | arm | budget | " + " | ".join(title for _, title in declared) + " |" in markdown
    cells = [BudgetRow.shown(name, getattr(figures, name)) for name, _ in declared]
    assert "| 1 | llm+ebm | 50 | " + " | ".join(cells) + " |" in markdown
    assert cells[:3] == [f"{figures.avg_nodes:.1f}", f"{figures.avg_time_s:.1f} s", f"{figures.median_time_s:.1f} s"]

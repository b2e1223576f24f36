"""Eval and report with repair (docs/search.md, "Repair"): an eval records the repair settings and per theorem what
was revised; `compare` puts whole pass@N beside whole+repair (labelled so) at each budget and at equal tokens; the
iteration report's repair table counts the proofs revised, the revisions and the theorems proved by revision k."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from burnqed.config import PipelineConfig
from burnqed.eval.compare import compare_results, render_comparison
from burnqed.eval.pass_at import build_eval_result
from burnqed.eval.result import EvalResult, write_eval_result
from burnqed.eval.settings import EvalSettings
from burnqed.layout import Layout
from burnqed.records.enums import SearchMode
from burnqed.records.results import FailureReason, TheoremResult, UsageCurve
from burnqed.report.build import build_report
from burnqed.report.markdown import render_markdown
from burnqed.storage import Store
from tests.eval.test_compare import BASE, costed, curved

# theorem → (proofs sampled when proved or None, revisions sampled, revision of the counted proof)
REPAIRED = {"a": (4, 1, 0), "b": (12, 3, 1), "c": (20, 4, 2), "d": (None, 6, None)}


def settings(rounds: int) -> EvalSettings:
    return EvalSettings(backend="local", prompt_format="plain-whole", num_candidates=8, temperature=0.8, top_p=0.95,
                        max_new_tokens=512, max_proofs=30, timeout_s=300.0, verify=True, stop_at_first=True,
                        concurrency=4, repair_rounds=rounds, repair_message_tokens=512 if rounds else None)


def with_repair(budgets: list[int]) -> EvalResult:
    """A whole+repair eval whose searches record their curves: each proof sampled costs 50 tokens and a Lean call."""

    def attempt(name: str, at: int | None, revisions: int, revision: int | None) -> TheoremResult:
        spent = budgets[-1] if at is None else at
        curve = UsageCurve(tokens=[50 * k for k in range(1, spent + 1)], lean_calls=list(range(1, spent + 1)))
        return TheoremResult(name=name, mode=SearchMode.WHOLE, proved=at is not None, budget_at_proof=at,
                             failure_reason=None if at else FailureReason.MAX_PROOFS, time_s=1.0,
                             proof="p" if at else None, tokens=50 * spent, lean_calls=spent, proofs_sampled=spent,
                             repaired=min(revisions, 2), revisions=revisions, revision_at_proof=revision, curve=curve)

    return build_eval_result(
        [[attempt(name, *spec) for name, spec in REPAIRED.items()]], budgets, benchmark="mini", model="tiny",
        ebm=None, lean_backend="replay", iteration=0, config_digest="d", git_commit=None,
        theorem_names=list(REPAIRED), timestamp=datetime(2025, 1, 1, tzinfo=UTC), mode=SearchMode.WHOLE,
        settings=settings(2),
    )


def test_an_eval_records_repair_per_theorem_and_compare_labels_the_repair_arm() -> None:
    repaired = with_repair([10, 30])
    assert repaired.search_label == "whole+repair"
    assert [(t.name, t.repaired, t.revisions, t.revision_at_proof) for t in repaired.per_theorem] == [
        ("a", 1, 1, 0), ("b", 2, 3, 1), ("c", 2, 4, 2), ("d", 2, 6, None)]
    plain = curved(BASE, [10, 30], SearchMode.WHOLE, [50], 1)  # a: 5, b: 25 proofs sampled, c and d never
    plain = plain.model_copy(update={"settings": settings(0)})
    assert plain.search_label == "whole"
    comparison = compare_results([("pass@N", plain), ("repair", repaired)])
    assert comparison.comparable and comparison.modes == ["whole", "whole+repair"]
    # Both count proofs sampled (a revision is one): a Δ at each budget, and one at equal generated tokens.
    assert [(b.budget, b.delta_solved) for b in comparison.budgets] == [(10, 0), (30, 1)]
    # Per theorem, pass@N costs 437.5 and 1125 tokens at 10 and 30 proofs, whole+repair 425 and 825 (it stops
    # sooner). Each arm is read where it spent the level, not a rung below: at 825 tokens pass@N at 20 proofs
    # (5 + 3·20 proofs sampled, 812.5 tokens per theorem: 1 solved), whole+repair at 30 (3 solved). At 425 pass@N's
    # 9 proofs cost 400, below 95 % of the level: its rate is interpolated towards 10 (437.5).
    assert [(level.level, [(e.budget, e.cost, e.solved, e.interpolated) for e in level.entries],
             level.delta_rate_points) for level in comparison.token_levels] == [
        (425.0, [(9, 400.0, 1, True), (10, 425.0, 1, False)], 0.0),
        (437.5, [(10, 437.5, 1, False), (10, 425.0, 1, False)], 0.0),
        (825.0, [(20, 812.5, 1, False), (30, 825.0, 3, False)], 50.0)]
    assert "pass@N (whole)" in render_comparison(comparison) and "repair (whole+repair)" in render_comparison(
        comparison)


@pytest.mark.slow
def test_the_iteration_report_has_a_repair_table(tmp_path: Path, store: Store) -> None:
    root = f"file://{tmp_path}/run"
    at = Layout(root)
    write_eval_result(costed(BASE, [10, 30], SearchMode.STEP, 100), at.eval_result(0), store=store)
    write_eval_result(with_repair([10, 30]), at.eval_result(0, mode="whole"), store=store)
    report = build_report(root, 0, PipelineConfig(eval_modes=[SearchMode.WHOLE]), store=store)
    assert [(r.source, r.theorems, r.repaired, r.revisions, r.proved, r.by_revision) for r in report.repairs] == [
        ("whole+repair", 4, 7, 14, 3, {0: 1, 1: 1, 2: 1})]
    text = render_markdown(report)
    section = text[text.index("## Repair: failed proofs revised") :]
    assert "| iteration | source | theorems | proofs revised | revisions | proved | fresh attempt | revision 1 | " \
           "revision 2 |" in section
    assert "| 0 | whole+repair | 4 | 7 | 14 | 3 | 1 | 1 | 1 |" in section
    # The step eval revised nothing: no row of its own; a report with no repair at all has no such section.
    alone = tmp_path / "alone"
    write_eval_result(costed(BASE, [10, 30], SearchMode.STEP, 100), Layout(f"file://{alone}").eval_result(0),
                      store=store)
    assert "## Repair" not in render_markdown(build_report(f"file://{alone}", 0, PipelineConfig(), store=store))

"""Eval and compare with sketch mode (docs/search.md, "`burnqed compare`"): a sketch eval counts node expansions as step
does, so `compare` reads it beside step at each budget and beside step or hybrid at equal tokens and Lean calls (the
same reading whatever the other's unit)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from itertools import accumulate, cycle, islice

from burnqed.eval.compare import compare_results, cost_ladder, read_at_level
from burnqed.eval.pass_at import build_eval_result
from burnqed.eval.result import EvalResult
from burnqed.records import FailureReason, TheoremResult, UsageCurve
from burnqed.text.prompt import SearchMode
from tests.eval.test_compare import BASE


def curved(proofs: Mapping[str, int | None], budgets: list[int], mode: SearchMode, unit_tokens: int,
           unit_calls: int) -> EvalResult:
    """An eval whose searches record their curves: `name` proved at `proofs[name]` units of budget (None: never, the
    largest spent), each unit costing `unit_tokens` tokens and `unit_calls` Lean calls; step and sketch count the
    units as node expansions, whole and hybrid as proofs sampled."""

    def attempt(name: str, at: int | None) -> TheoremResult:
        spent = budgets[-1] if at is None else at
        tokens = list(accumulate(islice(cycle([unit_tokens]), spent)))
        calls = [unit_calls * k for k in range(1, spent + 1)]
        units = ({"nodes_expanded": spent} if mode in (SearchMode.STEP, SearchMode.SKETCH)
                 else {"proofs_sampled": spent})
        return TheoremResult(name=name, mode=mode, proved=at is not None, budget_at_proof=at,
                             failure_reason=None if at else FailureReason.MAX_NODES, time_s=1.0,
                             proof="p" if at else None, tokens=tokens[-1], lean_calls=calls[-1],
                             curve=UsageCurve(tokens=tokens, lean_calls=calls), **units)

    return build_eval_result(
        [[attempt(name, at) for name, at in proofs.items()]], budgets, benchmark="mini", model="tiny", ebm=None,
        lean_backend="replay", iteration=0, config_digest="d", git_commit=None, theorem_names=list(proofs),
        timestamp=datetime(2025, 1, 1, tzinfo=UTC), mode=mode,
    )


SKETCHED = {"a": 2, "b": 10, "c": 20, "d": None}  # expansions (planner requests and subgoal expansions) at proof


def test_a_sketch_eval_compares_with_step_at_each_budget_and_at_equal_tokens() -> None:
    # step: 30 tokens and one Lean call an expansion; sketch: 90 tokens and two calls (a planner request writes
    # several sketches). Per theorem, step costs 262.5 and 675 tokens at 10 and 30 expansions, sketch 720 and 1,395.
    step = curved(BASE, [10, 30], SearchMode.STEP, 30, 1)
    sketch = curved(SKETCHED, [10, 30], SearchMode.SKETCH, 90, 2)
    assert sketch.budget_unit == "expansions" and [row.avg_nodes for row in sketch.budgets] == [8.0, 15.5]
    comparison = compare_results([("step", step), ("sketch", sketch)])
    assert comparison.comparable and comparison.modes == ["step", "sketch"]
    assert not any("different units" in warning for warning in comparison.warnings)
    # Both count expansions: a Δ at each budget (sketch proves a, b within 10, a, b, c within 30) ...
    assert [(b.budget, [e.solved for e in b.entries], b.delta_solved) for b in comparison.budgets] == [
        (10, [1, 2], 1), (30, [2, 3], 1)]
    # ... but at equal generated tokens sketch's expansions cost three times as much: at 675 tokens step is read at
    # 30 expansions (a, b), sketch at 9 (652.5 tokens: a only). At 262.5 sketch's 3 expansions cost 247.5, below 95 %
    # of the level: interpolated towards 4 (315).
    assert [(level.level, [(e.budget, e.cost, e.solved, e.interpolated) for e in level.entries],
             level.delta_rate_points) for level in comparison.token_levels] == [
        (262.5, [(10, 262.5, 1, False), (3, 247.5, 1, True)], 0.0),
        (675.0, [(30, 675.0, 2, False), (9, 652.5, 1, False)], -25.0)]
    # At equal Lean calls (per theorem: step 8.75 and 22.5 at its rungs, sketch 16 and 31; two an expansion):
    # 16 calls read step at 19 expansions (15.5 calls: a) and sketch at its rung 10 (a, b); 22.5 read sketch at 16.
    assert [(level.level, [(e.budget, e.cost, e.solved) for e in level.entries], level.delta_rate_points)
            for level in comparison.call_levels] == [
        (8.75, [(10, 8.75, 1), (5, 8.5, 1)], 0.0), (16.0, [(19, 15.5, 1), (10, 16.0, 2)], 25.0),
        (22.5, [(30, 22.5, 2), (16, 22.0, 2)], 0.0)]


def test_the_equal_token_reading_of_a_sketch_eval_does_not_depend_on_the_other_arms_unit() -> None:
    # The same searches as step's, counted as proofs sampled (hybrid): no budget in common with sketch, the same
    # token levels, and sketch is read at each exactly as beside step.
    step = curved(BASE, [10, 30], SearchMode.STEP, 30, 1)
    hybrid = curved(BASE, [10, 30], SearchMode.HYBRID, 30, 1)
    sketch = curved(SKETCHED, [10, 30], SearchMode.SKETCH, 90, 2)
    beside_step = compare_results([("other", step), ("sketch", sketch)])
    beside_hybrid = compare_results([("other", hybrid), ("sketch", sketch)])
    assert beside_hybrid.budgets == [] and beside_hybrid.common_budget is None
    assert "budgets are in different units (other: proofs, sketch: expansions): compared at equal tokens only" in (
        beside_hybrid.warnings)
    assert beside_hybrid.token_levels == beside_step.token_levels
    assert beside_hybrid.call_levels == beside_step.call_levels
    ladder = cost_ladder(sketch, "tokens")
    assert ladder is not None
    assert [level.entries[1] for level in beside_hybrid.token_levels] == [
        read_at_level("sketch", ladder, level.level) for level in beside_hybrid.token_levels]
    # Newly solved and lost are taken where both are read exactly (675 tokens): b lost, nothing new.
    assert (beside_hybrid.compared_at, beside_hybrid.newly_solved, beside_hybrid.lost) == (
        "≤ 675 tokens per theorem", [], ["b"])

"""Eval, compare and report with sketch mode (docs/search.md, "`burnqed compare`"; docs/pipeline.md, "Report and
go/no-go gates"): a sketch eval counts node expansions as step does, so `compare` reads it beside step at each budget
and beside step or hybrid at equal tokens and Lean calls (the same reading whatever the other's unit); the iteration
report's sketch table counts sketches tried, subgoals proved by source, re-plans and cache hits from the
TheoremResults beside each sketch eval, and names a source it cannot count instead of showing zeros."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from itertools import accumulate, cycle, islice
from pathlib import Path

import pytest

from burnqed.config import PipelineConfig
from burnqed.eval.compare import compare_results, cost_ladder, read_at_level
from burnqed.eval.pass_at import build_eval_result
from burnqed.eval.result import EvalResult, write_eval_result
from burnqed.layout import Layout
from burnqed.records.enums import SearchMode
from burnqed.records.results import (
    FailureReason,
    SketchAttempt,
    SketchOutcome,
    SubgoalAttempt,
    SubgoalSource,
    TheoremResult,
    UsageCurve,
)
from burnqed.report.build import build_report
from burnqed.report.markdown import render_markdown
from burnqed.report.sketches import (
    SketchCounts,
    inconsistencies,
    looked_up,
    sketch_counts,
    sketch_markdown,
    sketch_rows,
)
from burnqed.storage import Store
from tests.eval.test_compare import BASE, costed
from tests.trajectory.factories import write_trajectory


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


def goal(name: str, proved: bool, source: SubgoalSource | None = None, spent: int = 0) -> SubgoalAttempt:
    return SubgoalAttempt(name=name, statement=f"P {name}", goal=f"x : ℕ\n⊢ P {name}", proved=proved,
                          tactics=["simp"] if proved else [], source=source, spent=spent,
                          detail=None if proved else "max_nodes")


def sketch(round_: int, outcome: SketchOutcome, *subgoals: SubgoalAttempt, verified: bool = False) -> SketchAttempt:
    return SketchAttempt(round=round_, body="have h : P := by sorry\nexact h", outcome=outcome,
                         detail=None if outcome is SketchOutcome.ELABORATED else outcome.value,
                         subgoals=list(subgoals), tokens=40, verified=verified)


E, S, C, K = SketchOutcome.ELABORATED, SubgoalSource.SEARCH, SubgoalSource.CACHE, SubgoalSource.KEPT
# a: a subgoal proved by search and one not (2 expansions spent), a completion with no sketch; the re-plan keeps the
#    first and gets the second from the cache: proved through it.
# b: refused, rejected by Lean; re-plan 1's first subgoal not proved (the budget was spent: nothing searched), its
#    second never reached; re-plan 2's first proved by search, its second searched in vain (5 spent).
# c: Lean could not start the statement (no sketch asked). d: both subgoals from the cache.
# 8 sketches, 5 elaborated with 10 subgoals; lookups: every subgoal reached but the kept one (8), 3 of them hits.
SKETCHES: dict[str, tuple[int | None, list[SketchAttempt]]] = {
    "a": (6, [sketch(0, E, goal("h1", True, S, 3), goal("h2", False, spent=2)),
              sketch(0, SketchOutcome.UNREADABLE),
              sketch(1, E, goal("h1", True, K), goal("h2", True, C), verified=True)]),
    "b": (None, [sketch(0, SketchOutcome.REFUSED), sketch(0, SketchOutcome.ERROR),
                 sketch(1, E, goal("h", False), goal("h4", False)),
                 sketch(2, E, goal("h", True, S, 4), goal("h3", False, spent=5))]),
    "c": (None, []),
    "d": (2, [sketch(0, E, goal("g1", True, C), goal("g2", True, C), verified=True)]),
}
COUNTS = SketchCounts(searches=4, sketches=8, elaborated=5, refused=1, unreadable=1, rejected=1, replans=3,
                      replanned_sketches=3, subgoals=10, by_search=2, from_cache=3, kept=1, lookups=8, proved=2,
                      via_sketch=2)


def searched(name: str, at: int | None, sketches: Sequence[SketchAttempt], budget: int = 10) -> TheoremResult:
    start = name == "c"
    reason = None if at is not None else FailureReason.START_ERROR if start else FailureReason.MAX_NODES
    spent = 0 if start else at or budget
    return TheoremResult(name=name, mode=SearchMode.SKETCH, proved=at is not None, budget_at_proof=at,
                         proof="theorem t : P := by\n  have h : P := by simp\n  exact h" if at else None,
                         failure_reason=reason, nodes_expanded=spent, tokens=40 * len(sketches) + 10 * spent,
                         lean_calls=3 * spent, time_s=0.5 + spent, sketches=list(sketches))


def sketch_eval(results: Sequence[TheoremResult], budgets: list[int], pass_n: int = 1) -> EvalResult:
    return build_eval_result(
        [list(results)] * pass_n, budgets, benchmark="mini", model="tiny", ebm=None, lean_backend="replay",
        iteration=0, config_digest="d", git_commit=None, theorem_names=[r.name for r in results],
        timestamp=datetime(2025, 1, 1, tzinfo=UTC), mode=SearchMode.SKETCH)


def test_counts_of_sketches_subgoals_replans_and_cache_hits() -> None:
    results = [searched(name, at, sketches) for name, (at, sketches) in SKETCHES.items()]
    assert inconsistencies(results) == []
    counts = sketch_counts(results)
    assert counts == COUNTS
    assert counts.hit_rate == pytest.approx(3 / 8)
    # Other modes' results are left out; a cache never asked has no hit rate (not measured, never 0 %).
    step = TheoremResult(name="s", proved=False, failure_reason=FailureReason.MAX_NODES, nodes_expanded=10)
    assert sketch_counts([*results, step]) == COUNTS
    unelaborated = searched("k", None, [sketch(0, SketchOutcome.UNREADABLE), sketch(1, SketchOutcome.REFUSED)])
    alone = sketch_counts([unelaborated])
    assert (alone.lookups, alone.from_cache, alone.hit_rate, alone.replans) == (0, 0, None, 1)
    # A subgoal kept from an earlier sketch is not looked up; one after the first not proved is never reached.
    assert [looked_up(s) for s in SKETCHES["a"][1] + SKETCHES["b"][1]] == [2, 0, 1, 0, 0, 1, 2]


def test_inconsistent_sketch_results_are_named() -> None:
    silent = [searched(name, None, []) for name in ("p", "q")]
    unproved = searched("r", 4, [sketch(0, E, goal("h", False, spent=3), verified=True)])
    sourceless = searched("s", None, [sketch(0, E, goal("h", True))])
    assert inconsistencies([*silent, unproved, sourceless, searched("c", None, [])]) == [
        "2 sketch-mode searches record no sketch (p, q)",
        "1 record a verified sketch that was not elaborated or left a subgoal unproved (r)",
        "1 record a proved subgoal without its source or an unproved one with a source (s)"]
    many = [searched(f"t{k}", None, []) for k in range(7)]
    assert inconsistencies(many) == ["7 sketch-mode searches record no sketch (t0, t1, t2, t3, t4 and 2 more)"]


@pytest.mark.slow
def test_a_pass_at_n_sketch_eval_is_counted_over_every_pass(tmp_path: Path, store: Store) -> None:
    at = Layout(f"file://{tmp_path}/run")
    results = [searched(name, at_, sketches) for name, (at_, sketches) in SKETCHES.items()]
    result = sketch_eval(results, [5, 10], pass_n=2)
    uri = at.eval_result(0, mode="sketch")
    for k in range(2):
        write_trajectory(f"{at.eval_trajectories(0, mode='sketch')}/pass-{k}", [(r, []) for r in results],
                         store=store)
    rows = sketch_rows(at, 0, [("step", costed(BASE, [5, 10], SearchMode.STEP, 10)), ("sketch", result)],
                       {"sketch": uri}, store=store)
    doubled = SketchCounts(**{name: 2 * value for name, value in COUNTS.model_dump().items()})
    assert [(row.source, row.budget, row.trajectories, row.problem, row.counts) for row in rows] == [
        ("sketch", "10 expansions", f"{at.eval_trajectories(0, mode='sketch')}/pass-0", None, doubled)]
    # The iteration's search in sketch mode is a source too; one whose results record no sketch is named.
    write_trajectory(at.trajectories(0), [(r, []) for r in [*results, searched("e", None, [])]], store=store)
    assert [(row.source, row.budget, row.problem) for row in sketch_rows(at, 0, [], {}, store=store)] == [
        ("search", None, "1 sketch-mode searches record no sketch (e)")]
    # Told no URI for it, the eval is named, not counted.
    assert [(row.source, row.problem, row.counts) for row in sketch_rows(at, 0, [("sketch", result)], {},
                                                                        store=store)][1:] == [
        ("sketch", "the report was not told where its result lies: its trajectories cannot be found", None)]


@pytest.mark.slow
def test_the_iteration_report_has_a_sketch_table(tmp_path: Path, store: Store) -> None:
    root = f"file://{tmp_path}/run"
    at = Layout(root)
    results = [searched(name, at_, sketches) for name, (at_, sketches) in SKETCHES.items()]
    write_eval_result(costed(BASE, [5, 10], SearchMode.STEP, 100), at.eval_result(0), store=store)
    write_eval_result(sketch_eval(results, [5, 10]), at.eval_result(0, mode="sketch"), store=store)
    write_trajectory(at.eval_trajectories(0, mode="sketch"), [(r, []) for r in results], store=store)
    report = build_report(root, 0, PipelineConfig(eval_modes=[SearchMode.SKETCH]), store=store)
    assert [(row.source, row.budget, row.problem, row.counts) for row in report.sketches] == [
        ("sketch", "10 expansions", None, COUNTS)]
    text = render_markdown(report)
    section = text[text.index("## Sketches: the planner's subgoals") :]
    assert ("| iteration | source | budget | searches | sketches | elaborated | refused | unreadable | rejected by "
            "Lean | re-plans (sketches) | subgoals | proved by search | from cache | kept | cache hits / lookups | "
            "hit rate | proved | via a sketch |") in section
    assert "| 0 | sketch | 10 expansions | 4 | 8 | 5 | 1 | 1 | 1 | 3 (3) | 10 | 2 | 3 | 1 | 3 / 8 | 37.5 % | 2 | 2 |" \
        in section
    # The sketch eval sits beside the step one at equal tokens in the search modes' section.
    assert report.mode_comparison is not None and report.mode_comparison.modes == ["step", "sketch"]
    # A sketch eval whose trajectories are gone is named, with no zeros; a report without one has no section.
    lost = tmp_path / "lost"
    write_eval_result(sketch_eval(results, [5, 10]), Layout(f"file://{lost}").eval_result(0), store=store)
    named = build_report(f"file://{lost}", 0, PipelineConfig(), store=store)
    beside = Layout(f"file://{lost}").eval_trajectories(0)
    assert [(row.source, row.problem, row.counts) for row in named.sketches] == [
        ("sketch", f"its trajectories {beside} do not exist (an eval run with --no-trajectories-out keeps none)",
         None)]
    assert sketch_markdown(named.sketches)[-2:] == [
        f"- **sketch** (iteration 0): its sketches are not counted: its trajectories {beside} do not exist (an eval "
        "run with --no-trajectories-out keeps none).", ""]
    assert "| 0 | sketch |" not in render_markdown(named)
    alone = tmp_path / "alone"
    write_eval_result(costed(BASE, [5, 10], SearchMode.STEP, 100), Layout(f"file://{alone}").eval_result(0),
                      store=store)
    assert "## Sketches" not in render_markdown(build_report(f"file://{alone}", 0, PipelineConfig(), store=store))

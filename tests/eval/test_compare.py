"""Comparing eval results: common budgets, the Δ row, newly solved and lost theorems, warnings."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

import pytest

from burnqed.errors import InputError
from burnqed.eval.compare import BudgetComparison, CompareEntry, compare_results, render_comparison
from burnqed.eval.schema import EvalResult
from burnqed.eval.scoring import build_eval_result
from burnqed.prompt import SearchMode
from burnqed.records import FailureReason, TheoremResult


def result(
    proofs: Mapping[str, int | None],
    budgets: list[int],
    *,
    benchmark: str = "mini",
    pass_n: int = 1,
    lean_backend: str = "replay",
) -> EvalResult:
    """An eval where theorem `name` is proved at `proofs[name]` expansions in every pass (None = never)."""

    def attempt(name: str, at: int | None) -> TheoremResult:
        if at is None:
            return TheoremResult(
                name=name, proved=False, failure_reason=FailureReason.MAX_NODES, nodes_expanded=budgets[-1], time_s=1.0
            )
        return TheoremResult(name=name, proved=True, budget_at_proof=at, nodes_expanded=at, time_s=1.0, proof="p")

    attempts = [[attempt(name, at) for name, at in proofs.items()] for _ in range(pass_n)]
    return build_eval_result(
        attempts, budgets, benchmark=benchmark, model="tiny", ebm=None, lean_backend=lean_backend, iteration=0,
        config_digest="d", git_commit=None, theorem_names=list(proofs), timestamp=datetime(2025, 1, 1, tzinfo=UTC),
    )


BASE = {"a": 5, "b": 25, "c": None, "d": None}  # solved at 10/30/60: 1, 2, 2
CAND = {"a": 5, "b": None, "c": 20, "d": 50}  # solved at 30/60/100: 2, 3, 3


def test_common_budgets_delta_and_newly_solved():
    comparison = compare_results([("iter0", result(BASE, [10, 30, 60])), ("iter1", result(CAND, [30, 60, 100]))])
    assert comparison.labels == ["iter0", "iter1"]
    assert comparison.budgets == [
        BudgetComparison(
            budget=30,
            entries=[
                CompareEntry(label="iter0", solved=2, total=4, rate=0.5),
                CompareEntry(label="iter1", solved=2, total=4, rate=0.5),
            ],
            delta_solved=0,
            delta_rate_points=0.0,
        ),
        BudgetComparison(
            budget=60,
            entries=[
                CompareEntry(label="iter0", solved=2, total=4, rate=0.5),
                CompareEntry(label="iter1", solved=3, total=4, rate=0.75),
            ],
            delta_solved=1,
            delta_rate_points=25.0,
        ),
    ]
    assert comparison.common_budget == 60
    assert comparison.newly_solved == ["c", "d"]
    assert comparison.lost == ["b"]
    assert comparison.warnings == ["budgets [10, 100] are not in every result and are left out"]


def test_newly_solved_uses_the_largest_common_budget_not_each_results_largest():
    # d is proved at 50 by the candidate, which ran up to 100; at the common budget 30 it does not count.
    comparison = compare_results([("old", result(BASE, [10, 30])), ("new", result(CAND, [30, 100]))])
    assert comparison.common_budget == 30
    assert comparison.newly_solved == ["c"]
    assert comparison.lost == ["b"]


def test_delta_is_last_minus_first_with_three_results():
    middle = {"a": 5, "b": 5, "c": 5, "d": 5}
    comparison = compare_results(
        [("i0", result(BASE, [60])), ("i1", result(middle, [60])), ("i2", result(CAND, [60]))]
    )
    (block,) = comparison.budgets
    assert [(e.label, e.solved) for e in block.entries] == [("i0", 2), ("i1", 4), ("i2", 3)]
    assert (block.delta_solved, block.delta_rate_points) == (1, 25.0)
    assert (comparison.newly_solved, comparison.lost) == (["c", "d"], ["b"])
    assert comparison.warnings == []


def test_unlike_results_are_shown_side_by_side_without_a_delta_or_newly_solved_theorems():
    other = {"a": 5, "e": 5}
    comparison = compare_results(
        [
            ("minif2f", result(BASE, [30], benchmark="minif2f-test", pass_n=1, lean_backend="pantograph")),
            ("mathlib", result(other, [30], benchmark="mathlib-test", pass_n=4, lean_backend="replay")),
        ]
    )
    assert comparison.warnings == [
        "different benchmarks (minif2f: minif2f-test, mathlib: mathlib-test)",
        "different theorem sets (minif2f: 4, mathlib: 2 theorems; 1 in common)",
        "different pass_n (minif2f: 1, mathlib: 4)",
        "different Lean backends (minif2f: pantograph, mathlib: replay)",
        "not compared: no Δ and no newly solved or lost theorems across different theorem sets, pass_n or Lean "
        "backends",
    ]
    (block,) = comparison.budgets
    assert [(e.solved, e.total) for e in block.entries] == [(2, 4), (2, 2)]
    assert (block.delta_solved, block.delta_rate_points) == (None, None)
    assert (comparison.comparable, comparison.newly_solved, comparison.lost) == (False, [], [])
    text = render_comparison(comparison)
    assert "Δ" not in text.replace("no Δ", "") and "newly solved" not in text.replace("no newly solved", "")
    assert "2/4" in text and "2/2" in text


def test_the_same_count_of_other_theorems_is_not_the_same_benchmark():
    comparison = compare_results([("a", result(BASE, [30])), ("b", result({"w": 5, "x": 5, "y": None, "z": 9}, [30]))])
    assert comparison.warnings[0] == "different theorem sets (a: 4, b: 4 theorems; 0 in common)"
    assert not comparison.comparable and comparison.budgets[0].delta_solved is None


def test_the_report_also_asks_for_the_same_mode_largest_budget_and_time_limit():
    from burnqed.eval.compare import unlike

    same = [("a", result(BASE, [10, 30])), ("b", result(CAND, [20, 30]))]
    assert unlike(same, budgets=True) == []
    other = [("a", result(BASE, [10, 30])), ("b", result(CAND, [30, 60]))]
    assert unlike(other) == []  # compare: at the common budget 30
    assert unlike(other, budgets=True) == ["different largest budgets (a: 30 expansions, b: 60 expansions)"]


def test_no_common_budget_is_an_input_error():
    with pytest.raises(InputError, match=r"no budget in common \(x: \[10, 30\] expansions; y: \[60\] expansions\)"):
        compare_results([("x", result(BASE, [10, 30])), ("y", result(CAND, [60]))])


def costed(proofs: Mapping[str, int | None], budgets: list[int], mode: SearchMode, per_unit: int) -> EvalResult:
    """Like `result`, in `mode`, each unit of budget costing `per_unit` tokens (and one Lean request)."""
    step = mode is SearchMode.STEP

    def attempt(name: str, at: int | None) -> TheoremResult:
        spent = budgets[-1] if at is None else at
        units = {"nodes_expanded": spent} if step else {"proofs_sampled": spent}
        return TheoremResult(name=name, mode=mode, proved=at is not None, budget_at_proof=at,
                             failure_reason=None if at else FailureReason.MAX_PROOFS, time_s=1.0,
                             proof="p" if at else None, tokens=per_unit * spent, lean_calls=spent, **units)

    return build_eval_result(
        [[attempt(name, at) for name, at in proofs.items()]], budgets, benchmark="mini", model="tiny", ebm=None,
        lean_backend="replay", iteration=0, config_digest="d", git_commit=None, theorem_names=list(proofs),
        timestamp=datetime(2025, 1, 1, tzinfo=UTC), mode=mode,
    )


def test_modes_with_different_budget_units_are_compared_at_equal_tokens():
    # step: 100 tokens an expansion → 875, 2250, 3750 tokens per theorem at 10/30/60;
    # whole: 50 tokens a proof → 437.5, 1062.5, 1687.5 (unsolved attempts pro rata beyond a budget).
    step = costed(BASE, [10, 30, 60], SearchMode.STEP, 100)
    whole = costed(CAND, [10, 30, 60], SearchMode.WHOLE, 50)
    assert [row.avg_tokens for row in step.budgets] == [875.0, 2250.0, 3750.0]
    assert [row.avg_tokens for row in whole.budgets] == [437.5, 1062.5, 1687.5]
    comparison = compare_results([("step", step), ("whole", whole)])
    assert comparison.budgets == [] and comparison.common_budget is None and comparison.modes == ["step", "whole"]
    assert comparison.warnings == ["budgets are in different units (step: expansions, whole: proofs): compared at "
                                   "equal tokens only"]
    assert [(b.tokens, [(e.budget, e.solved) for e in b.entries], b.delta_rate_points)
            for b in comparison.token_levels] == [
        (437.5, [(None, 0), (10, 1)], 25.0),
        (875.0, [(10, 1), (10, 1)], 0.0),
        (1062.5, [(10, 1), (30, 2)], 25.0),
        (1687.5, [(10, 1), (60, 3)], 50.0),
    ]
    assert (comparison.compared_at, comparison.newly_solved, comparison.lost) == (
        "≤ 1688 tokens per theorem", ["c", "d"], [])
    text = render_comparison(comparison)
    assert "at equal generated tokens per theorem" in text and "whole (whole)" in text
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in text.splitlines() if line.startswith("│")]
    assert rows[-1] == ["1688", "25.0 % @10", "75.0 % @60", "+50.0 pts"]
    assert "at ≤ 1688 tokens per theorem, whole vs step:" in text


def test_results_without_tokens_and_without_a_common_budget_cannot_be_compared():
    old = result(BASE, [10]).model_copy(update={"budgets": [
        row.model_copy(update={"tokens": None, "lean_calls": None, "avg_tokens": None})
        for row in result(BASE, [10]).budgets
    ]})
    with pytest.raises(InputError, match="do not all record tokens"):
        compare_results([("old", old), ("whole", costed(CAND, [10], SearchMode.WHOLE, 50))])


def test_fewer_than_two_results_or_repeated_labels_are_input_errors():
    with pytest.raises(InputError, match="at least two"):
        compare_results([("x", result(BASE, [10]))])
    with pytest.raises(InputError, match="distinct"):
        compare_results([("x", result(BASE, [10])), ("x", result(CAND, [10]))])


def test_render_shows_rows_delta_and_names():
    comparison = compare_results([("iter0", result(BASE, [10, 30, 60])), ("iter1", result(CAND, [30, 60, 100]))])
    text = render_comparison(comparison)
    lines = text.splitlines()
    assert lines[0] == "warning: budgets [10, 100] are not in every result and are left out"
    assert "budget 30" in lines
    assert "budget 60" in lines
    cells = [[c.strip() for c in line.strip("│┃ ").split("│")] for line in lines if line.startswith("│")]
    assert cells == [
        ["iter0", "2/4", "50.0 %"],
        ["iter1", "2/4", "50.0 %"],
        ["Δ iter1 − iter0", "+0", "+0.0 pts"],
        ["iter0", "2/4", "50.0 %"],
        ["iter1", "3/4", "75.0 %"],
        ["Δ iter1 − iter0", "+1", "+25.0 pts"],
    ]
    tail = text[text.index("at budget 60") :].splitlines()
    assert tail == ["at budget 60, iter1 vs iter0:", "newly solved (2):", "  c", "  d", "lost (1):", "  b"]


def test_render_truncates_long_name_lists():
    names = [f"t{k:02d}" for k in range(25)]
    before = result(dict.fromkeys(names), [10])
    after = result(dict.fromkeys(names, 1), [10])
    text = render_comparison(compare_results([("before", before), ("after", after)]))
    tail = text[text.index("newly solved") :].splitlines()
    assert tail[0] == "newly solved (25):"
    assert tail[1:21] == [f"  t{k:02d}" for k in range(20)]
    assert tail[21:] == ["  … and 5 more", "lost (0):"]
    assert compare_results([("after", after), ("before", before)]).lost == names

"""Comparing eval results: common budgets, the Δ row, newly solved and lost theorems, warnings."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from itertools import accumulate, cycle, islice
from pathlib import Path

import pytest

from burnqed.errors import InputError
from burnqed.eval.compare import (
    BudgetComparison,
    CompareEntry,
    Comparison,
    CostEntry,
    CostLevel,
    compare_results,
    cost_ladder,
    read_at_level,
    render_comparison,
)
from burnqed.eval.pass_at import build_eval_result
from burnqed.eval.result import EvalResult, load_eval_result, write_eval_result
from burnqed.records.enums import SearchMode
from burnqed.records.results import FailureReason, TheoremResult, UsageCurve
from burnqed.storage import Store
from tests.processes import cli


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
    assert [b.model_copy(update={"delta_interval_points": None}) for b in comparison.budgets] == [
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


def test_results_without_curves_are_read_between_their_rungs():
    # step: 100 tokens an expansion → 875, 2250, 3750 tokens per theorem at 10/30/60;
    # whole: 50 tokens a proof → 437.5, 1062.5, 1687.5 (unsolved attempts pro rata beyond a budget). No curves: each
    # result is read at its rungs, and between two rungs by interpolation.
    step = costed(BASE, [10, 30, 60], SearchMode.STEP, 100)
    whole = costed(CAND, [10, 30, 60], SearchMode.WHOLE, 50)
    assert [row.avg_tokens for row in step.budgets] == [875.0, 2250.0, 3750.0]
    assert [row.avg_tokens for row in whole.budgets] == [437.5, 1062.5, 1687.5]
    assert not step.has_curves and not whole.has_curves
    comparison = compare_results([("step", step), ("whole", whole)])
    assert comparison.budgets == [] and comparison.common_budget is None and comparison.modes == ["step", "whole"]
    assert [(b.level, [(e.measured, e.budget, e.next_budget, e.rate) for e in b.entries], b.delta_rate_points)
            for b in comparison.token_levels] == [
        # step's first rung costs 875: not measured at 437.5, and no Δ there.
        (437.5, [(False, None, None, None), (True, 10, None, 0.25)], None),
        # whole: 437.5 at 10 (1 solved), 1062.5 at 30 (2): 875 is 70 % of the way, 1.7 solved of 4.
        (875.0, [(True, 10, None, 0.25), (True, 10, 30, pytest.approx(0.425))], pytest.approx(17.5)),
        # step: 875 at 10 (1), 2250 at 30 (2): 1062.5 is 187.5 / 1375 of the way; 1687.5 is 812.5 / 1375.
        (1062.5, [(True, 10, 30, pytest.approx((1 + 187.5 / 1375) / 4)), (True, 30, None, 0.5)],
         pytest.approx(50 - 100 * (1 + 187.5 / 1375) / 4)),
        (1687.5, [(True, 10, 30, pytest.approx((1 + 812.5 / 1375) / 4)), (True, 60, None, 0.75)],
         pytest.approx(75 - 100 * (1 + 812.5 / 1375) / 4)),
    ]
    assert [b.interpolated for b in comparison.token_levels] == [False, True, True, True]
    # step is read exactly only where whole is not: no level lists newly solved or lost theorems.
    assert (comparison.compared_at, comparison.newly_solved, comparison.lost) == ("", [], [])
    assert comparison.warnings == [
        "budgets are in different units (step: expansions, whole: proofs): compared at equal tokens only",
        "no token level reads step and whole both exactly: no newly solved or lost theorems listed"]
    text = render_comparison(comparison)
    assert "at equal generated tokens per theorem" in text and "whole (whole)" in text
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in text.splitlines() if line.startswith("│")]
    assert rows[:4] == [["438", "not measured", "25.0 % @10 · 438", "–"],
                        ["875", "25.0 % @10 · 875", "≈42.5 % @10–30 · 438–1,062", "≈+17.5 pts"],
                        ["1,062", "≈28.4 % @10–30 · 875–2,250", "50.0 % @30 · 1,062", "≈+21.6 pts"],
                        ["1,688", "≈39.8 % @10–30 · 875–2,250", "75.0 % @60 · 1,688", "≈+35.2 pts"]]
    assert "newly solved (" not in text


def curved(proofs: Mapping[str, int | None], budgets: list[int], mode: SearchMode, unit_tokens: Sequence[int],
           unit_calls: int) -> EvalResult:
    """An eval whose searches record their curves: theorem `name` proved at `proofs[name]` units of budget (None:
    never, the largest spent); unit k costs `unit_tokens[(k - 1) % len]` tokens and `unit_calls` Lean calls, after 2
    calls to start."""
    step = mode is SearchMode.STEP

    def attempt(name: str, at: int | None) -> TheoremResult:
        spent = budgets[-1] if at is None else at
        tokens = list(accumulate(islice(cycle(unit_tokens), spent)))
        calls = [2 + unit_calls * k for k in range(1, spent + 1)]
        units = {"nodes_expanded": spent} if step else {"proofs_sampled": spent}
        return TheoremResult(name=name, mode=mode, proved=at is not None, budget_at_proof=at,
                             failure_reason=None if at else FailureReason.MAX_PROOFS, time_s=1.0,
                             proof="p" if at else None, tokens=tokens[-1], lean_calls=calls[-1],
                             curve=UsageCurve(tokens=tokens, lean_calls=calls), **units)

    return build_eval_result(
        [[attempt(name, at) for name, at in proofs.items()]], budgets, benchmark="mini", model="tiny", ebm=None,
        lean_backend="replay", iteration=0, config_digest="d", git_commit=None, theorem_names=list(proofs),
        timestamp=datetime(2025, 1, 1, tzinfo=UTC), mode=mode,
    )


# plain: 30 tokens and 1 Lean call a unit; a, b, c proved at 1, 3, 6, d never (8 spent). Per theorem, within budget
# 1…8: 30, 52.5, 75, 90, 105, 120, 127.5, 135 tokens (rungs 2, 4, 8: 52.5, 90, 135); 3, 3.75, 4.5, 5, 5.5, 6, 6.25,
# 6.5 Lean calls; solved 1, 1, 2, 2, 2, 3, 3, 3.
PLAIN = {"a": 1, "b": 3, "c": 6, "d": None}
# repair: units cost 60 and 20 tokens in turn (a fresh proof, a revision) and 2 Lean calls; a, b proved at 2, c at 5.
# Per theorem: 60, 80, 110, 120, 150, 155, 170, 175 tokens (rungs 80, 120, 175); 4, 6, 7, 8, 9, 9.5, 10, 10.5 Lean
# calls; solved 0, 2, 2, 2, 3, 3, 3, 3.
REPAIR = {"a": 2, "b": 2, "c": 5, "d": None}


def uneven() -> list[tuple[str, EvalResult]]:
    return [("plain", curved(PLAIN, [2, 4, 8], SearchMode.STEP, [30], 1)),
            ("repair", curved(REPAIR, [2, 4, 8], SearchMode.WHOLE, [60, 20], 2))]


def readings(levels: Sequence[CostLevel]) -> list[tuple[float, list[tuple[int | None, float | None, float | None,
                                                                           bool]], float | None]]:
    return [(b.level, [(e.budget, e.cost, e.rate, e.interpolated) for e in b.entries], b.delta_rate_points)
            for b in levels]


def test_arms_of_uneven_cost_per_unit_are_read_at_the_same_tokens_exactly_or_interpolated():
    results = uneven()
    assert results[0][1].mean_curve("tokens") == [30, 52.5, 75, 90, 105, 120, 127.5, 135]
    assert results[1][1].mean_curve("tokens") == [60, 80, 110, 120, 150, 155, 170, 175]
    comparison = compare_results(results)
    # Levels: each arm's rungs up to the smaller largest (135): 52.5, 90, 135 and 80, 120.
    assert readings(comparison.token_levels) == [
        (52.5, [(2, 52.5, 0.25, False), (None, None, None, False)], None),  # repair's first proof costs 60
        (80.0, [(3, 75.0, 0.5, True), (2, 80.0, 0.5, False)], 0.0),  # 75 < 95 % of 80: between 3 and 4
        (90.0, [(4, 90.0, 0.5, False), (2, 80.0, 0.5, True)], 0.0),
        (120.0, [(6, 120.0, 0.75, False), (4, 120.0, 0.5, False)], -25.0),
        (135.0, [(8, 135.0, 0.75, False), (4, 120.0, 0.625, True)], -12.5),  # 120 → 150 at 4 → 5: 2.5 of 4 solved
    ]
    assert [e.measured for e in comparison.token_levels[0].entries] == [True, False]
    assert (comparison.token_levels[-1].entries[1].next_budget, comparison.token_levels[-1].entries[1].next_cost) == (
        5, 150.0)
    # Every row reads the arms within 5 % of one another's tokens, or says it interpolated.
    for level in comparison.token_levels:
        costs = [e.cost for e in level.entries if e.measured and e.cost is not None]
        assert level.interpolated or min(costs) >= 0.95 * max(costs), level
    # newly solved and lost at the largest level both arms are read exactly at: 120 tokens, plain at 6, repair at 4.
    assert (comparison.compared_at, comparison.newly_solved, comparison.lost) == ("≤ 120 tokens per theorem", [],
                                                                                   ["c"])


def test_the_same_arms_at_equal_lean_calls():
    comparison = compare_results(uneven())
    assert readings(comparison.call_levels) == [
        (3.75, [(2, 3.75, 0.25, False), (None, None, None, False)], None),  # repair's first proof: 4 calls
        (5.0, [(4, 5.0, 0.5, False), (1, 4.0, 0.25, True)], -25.0),  # 4 → 6 calls at 1 → 2: 1 of 4 solved
        (6.0, [(6, 6.0, 0.75, False), (2, 6.0, 0.5, False)], -25.0),
        (6.5, [(8, 6.5, 0.75, False), (2, 6.0, 0.5, True)], -25.0),
    ]
    text = render_comparison(comparison)
    table = text[text.index("at equal Lean calls per theorem"):]
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in table.splitlines() if line.startswith("│")]
    assert rows == [["3.75", "25.0 % @2 · 3.75", "not measured", "–"],
                    ["5", "50.0 % @4 · 5", "≈25.0 % @1–2 · 4–6", "≈-25.0 pts"],
                    ["6", "75.0 % @6 · 6", "50.0 % @2 · 6", "-25.0 pts"],
                    ["6.5", "75.0 % @8 · 6.5", "≈50.0 % @2–3 · 6–7", "≈-25.0 pts"]]


def test_a_level_beyond_what_a_result_spent_is_not_measured():
    _, plain = uneven()[0]
    ladder = cost_ladder(plain, "tokens")
    assert ladder is not None and ladder.budgets == list(range(1, 9))
    assert read_at_level("plain", ladder, 200.0) == CostEntry(label="plain", total=4, measured=False)
    assert read_at_level("plain", ladder, 140.0).model_dump(include={"budget", "cost", "interpolated"}) == {
        "budget": 8, "cost": 135.0, "interpolated": False}  # within 5 %
    # Attempts that all ended by budget 2: their totals hold from 3 up to the largest budget, which stands for them.
    early = curved({"a": 1, "b": 2}, [2, 10], SearchMode.WHOLE, [30], 1)
    ladder = cost_ladder(early, "tokens")
    assert ladder is not None
    assert (ladder.budgets, ladder.costs, ladder.solved) == ([1, 2, 10], [30.0, 45.0, 45.0], [1, 2, 2])
    assert read_at_level("early", ladder, 45.0).budget == 10


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
        ["Δ iter1 − iter0", "+0", "+0.0 pts (95 %: -49.5 to +49.5)"],
        ["iter0", "2/4", "50.0 %"],
        ["iter1", "3/4", "75.0 %"],
        ["Δ iter1 − iter0", "+1", "+25.0 pts (95 %: -46.1 to +74.7)"],
    ]
    tail = text[text.index("at budget 60") :].splitlines()
    assert tail == ["at budget 60, iter1 vs iter0:", "newly solved (2):", "  c", "  d", "lost (1):", "  b"]


def test_each_common_budgets_delta_has_its_interval_paired_over_the_theorems():
    """At budget 30 a and b against a and c (one new, one lost, one neither): Newcombe's hybrid score interval of a
    paired difference of 0 on 4 theorems; at 60 two new and one lost. Results that are not comparable (another
    pass_n): no Δ, no interval."""
    comparison = compare_results([("iter0", result(BASE, [30, 60])), ("iter1", result(CAND, [30, 60]))])
    assert [(b.budget, b.delta_rate_points, tuple(round(x, 2) for x in b.delta_interval_points or ()))
            for b in comparison.budgets] == [(30, 0.0, (-49.49, 49.49)), (60, 25.0, (-46.13, 74.69))]
    # iter1 solves what iter0 did and one more (both 2, new 1, neither 1): the pairing is by theorem name
    nested = compare_results([("iter0", result(BASE, [60])), ("iter1", result({**BASE, "c": 20}, [60]))])
    assert [round(x, 2) for x in nested.budgets[0].delta_interval_points or ()] == [-31.96, 65.53]
    other = compare_results([("iter0", result(BASE, [60])), ("iter1", result(CAND, [60], pass_n=2))])
    assert other.budgets[0].delta_interval_points is None
    assert "95 %" not in render_comparison(other)


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


def written_results(folder: Path, store: Store) -> list[str]:
    """The `uneven()` results written as eval result files in `folder`, their paths in order."""
    paths = [str(folder / f"{label}.json") for label, _ in uneven()]
    for path, (_, result) in zip(paths, uneven(), strict=True):
        write_eval_result(result, path, store=store)
    return paths


@pytest.mark.slow  # the command in-process: its imports
def test_compare_output_writes_the_comparison_it_prints(tmp_path: Path, store: Store) -> None:


    paths = written_results(tmp_path, store)
    output = tmp_path / "comparison.json"
    done = cli("compare", *paths, "--output", str(output))
    assert done.returncode == 0, done.stderr
    written = Comparison.model_validate_json(output.read_text(encoding="utf-8"))
    assert written == compare_results([(path, load_eval_result(path, store=store)) for path in paths])
    assert render_comparison(written) in done.stdout and done.stdout.endswith(f"wrote {output}\n")
    raw = json.loads(output.read_text(encoding="utf-8"))
    assert raw["token_levels"][-1] == {"level": 135.0, "delta_rate_points": -12.5, "interpolated": True, "entries": [
        {"label": paths[0], "total": 4, "measured": True, "budget": 8, "cost": 135.0, "solved": 3, "rate": 0.75,
         "interpolated": False, "next_budget": None, "next_cost": None},
        {"label": paths[1], "total": 4, "measured": True, "budget": 4, "cost": 120.0, "solved": 2, "rate": 0.625,
         "interpolated": True, "next_budget": 5, "next_cost": 150.0}]}
    assert [level["level"] for level in raw["call_levels"]] == [3.75, 5.0, 6.0, 6.5]
    # An --output that cannot be written is refused before anything is read.
    refused = cli("compare", *paths, "--output", str(tmp_path))
    assert (refused.returncode, refused.stderr) == (2, f"error: --output {tmp_path} is a directory; give a file name\n")
    again = cli("compare", *paths, "--output", str(output))  # an earlier comparison: replaced
    assert again.returncode == 0, again.stderr


@pytest.mark.slow  # the command in-process: its imports
def test_compare_output_is_never_an_input_nor_a_file_of_another_kind(tmp_path: Path, store: Store) -> None:
    """The audit's case: `compare A.json B.json --output A.json` wrote the comparison over the eval result A."""


    paths = written_results(tmp_path, store)
    config = tmp_path / "burnqed.toml"
    config.write_text("[search]\n")
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    for output, why in [(paths[0], f"--output {paths[0]} is also an input ({paths[0]})"),
                        (f"{tmp_path}/x/../{Path(paths[1]).name}", "is also an input"),
                        (str(config), f"{config} exists and is not a comparison (`burnqed compare --output`)")]:
        refused = cli("compare", *paths, "--output", output)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
        assert refused.stderr.startswith("error: --output ") and why in refused.stderr, refused.stderr
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before


@pytest.mark.slow  # the command in-process: its imports
def test_compare_given_a_report_says_what_it_got_and_what_it_takes(tmp_path: Path, store: Store) -> None:
    """The new user's case: `compare runs/iter_0/report/report.json …` said "timestamp: Field required (and 44 more
    problems)"."""

    from burnqed.report.document import Report

    paths = written_results(tmp_path, store)
    report = tmp_path / "report.json"
    report.write_text(json.dumps({name: None for name, field in Report.model_fields.items() if field.is_required()}))
    index = tmp_path / "theorems.json"
    index.write_text(json.dumps({"name": "b", "theorems": []}))
    takes = ("compare takes eval results (the eval.json `burnqed eval --output` writes; an iteration's: "
             "iter_N/eval/eval.json)")
    for given, what in ((report, "an iteration report (the report.json `burnqed report` writes)"),
                        (index, "a theorem index (what --theorems reads)")):
        refused = cli("compare", paths[0], str(given))
        assert (refused.returncode, refused.stderr) == (2, f"error: {given} is {what}, not an eval result: {takes}\n")
    # a broken eval result still names its first problem
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({**json.loads(Path(paths[0]).read_text()), "total": "many"}))
    refused = cli("compare", paths[0], str(broken))
    assert refused.returncode == 2 and refused.stderr.startswith(f"error: eval result {broken}: total: ")

"""benchmarks/search_modes.py on two theorems of the bundled corpus, one seed, every tactic right: every mode of the
registry (`search.modes.MODES`) gets a run and a row, searched by its own engine with the settings `burnqed eval`
builds for it (`stages.search.settings_from_config`), so a mode added to the registry is measured without touching
the benchmark. The runs are made once for the module (`runs`)."""

from __future__ import annotations

import itertools

import pytest

from benchmarks import search_modes
from burnqed.config import SearchConfig
from burnqed.records.enums import SearchMode
from burnqed.records.results import SketchOutcome
from burnqed.search.modes import MODES, mode_of
from burnqed.stages.search import settings_from_config

# The first proves with one recorded proof and has no `have` to sketch; the second's proofs give a sketch.
NAMES = ["algebra_2x_plus_3_eq_11", "algebra_sum_product_squares"]


@pytest.fixture(scope="module")
def runs() -> list[search_modes.ModeRun]:
    known = {k.spec.name: k for k in search_modes.known_theorems()}
    theorems = [known[name] for name in NAMES]
    return [search_modes.run_mode(mode, theorems, error_rate=0.0, seeds=1, lean_ms=0.0) for mode in MODES.values()]


@pytest.mark.slow
def test_every_mode_of_the_registry_is_searched_by_its_own_engine_with_the_settings_eval_builds(
        runs: list[search_modes.ModeRun]) -> None:
    assert [run.mode for run in runs] == list(MODES.values())
    for run in runs:
        mode, budgets = run.mode, search_modes.BUDGETS[run.mode.unit]
        built = settings_from_config(SearchConfig(mode=mode.name, timeout_s=search_modes.TIMEOUT_S),
                                     search_modes.POLICY, budgets[-1], marks=budgets, verify=True)
        assert mode_of(run.settings) is mode and run.settings == built, mode.label
        assert [[(r.name, r.mode) for r in attempt] for attempt in run.attempts] == [
            [(name, mode.name) for name in NAMES]], mode.label  # each result written by the mode's own engine
        assert (run.result.mode, run.result.budget_unit) == (mode.name, mode.unit)
        assert [row.budget for row in run.result.budgets] == list(budgets)
        assert run.result.settings is not None and run.result.settings.prompt_format == str(run.settings.fmt)
    assert len({type(run.settings) for run in runs}) == len(MODES)


@pytest.mark.slow
def test_every_tactic_right_step_whole_and_hybrid_prove_both_and_the_replay_server_drafts_no_sketch(
        runs: list[search_modes.ModeRun]) -> None:
    proved = {run.mode.label: [r.proved for r in run.attempts[0]] for run in runs}
    assert {label: proved[label] for label in ("step", "whole", "hybrid", "sketch")} == {
        "step": [True, True], "whole": [True, True], "hybrid": [True, True], "sketch": [False, False]}
    sketch = next(run for run in runs if run.mode.label == "sketch")
    first, second = sketch.attempts[0]
    assert {s.outcome for s in first.sketches} == {SketchOutcome.UNREADABLE}  # no `have`: the prover has no sketch
    assert {(s.outcome, s.detail) for s in second.sketches} == {
        (SketchOutcome.ERROR, "invalid: replay: `draft` is not supported by the replay server")}


@pytest.mark.slow
def test_the_report_has_a_row_and_a_column_for_every_mode_and_a_ratio_for_every_pair(
        runs: list[search_modes.ModeRun]) -> None:
    lines = search_modes.report(runs)
    labels = [mode.label for mode in MODES.values()]
    rows = lines[:lines.index("")]
    assert [line.split(" ", 1)[0] for line in rows if not line.startswith(" ")] == labels
    under = rows[next(k for k, line in enumerate(rows) if line.startswith("sketch ")) + 1]
    assert under.strip() == ("17 sketches: unreadable 11, error 6 (error: invalid: replay: `draft` is not supported by "
                             "the replay server; unreadable: a sketch without a `have NAME : P := by sorry` hole)")
    header = next(line for line in lines if line.lstrip().startswith("tokens"))
    assert header.split() == ["tokens", *labels, *(f"{b}/{a}" for a, b in itertools.combinations(labels, 2))]


@pytest.mark.slow
def test_seeds_are_read_as_more_theorems_at_equal_tokens() -> None:
    """Two seeds of whole mode, every tactic right: both theorems proved in each, and the table's reading at what the
    run spent counts all four searches, the curves of both seeds (not the first seed's over both seeds' total)."""
    known = {k.spec.name: k for k in search_modes.known_theorems()}
    run = search_modes.run_mode(MODES[SearchMode.WHOLE], [known[name] for name in NAMES], error_rate=0.0, seeds=2,
                                lean_ms=0.0)
    assert [[r.proved for r in attempt] for attempt in run.attempts] == [[True, True], [True, True]]
    assert len(run.result.per_theorem) == run.result.total == 4
    spent = sum(r.tokens for attempt in run.attempts for r in attempt) / 4
    assert search_modes._solved(search_modes._read(run.result, spent)) == "4.0"

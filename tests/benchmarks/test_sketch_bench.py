"""benchmarks/sketch_cost.py's table and benchmarks/sketch_figure.py's commands and analysis, on constructed eval
results of a step arm and a sketch arm (their trajectories beside them); benchmarks/sketch_mechanics.py on one
situation of the world's sketch family, searched in minilean with its scripted planner."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from benchmarks import sketch_cost, sketch_figure, sketch_mechanics
from burnqed.eval.pass_at import build_eval_result
from burnqed.eval.result import EvalResult, write_eval_result
from burnqed.layout import trajectories_beside
from burnqed.records.enums import SearchMode
from burnqed.records.results import FailureReason, SketchAttempt, SubgoalSource, TheoremResult, UsageCurve
from burnqed.storage import Store
from tests.eval.test_compare import BASE
from tests.eval.test_report_sketch import SKETCHES, curved
from tests.trajectory.factories import write_trajectory

BUDGETS = [10, 30]


def sketch_search(name: str, at: int | None, sketches: Sequence[SketchAttempt]) -> TheoremResult:
    """A sketch search of `name` proved at `at` expansions (None: never, the largest spent; `c` could not start),
    each expansion costing 90 tokens and two Lean calls, 1.5 s."""
    start = name == "c"
    spent = 0 if start else at or BUDGETS[-1]
    reason = None if at is not None else FailureReason.START_ERROR if start else FailureReason.MAX_NODES
    tokens, calls = [90 * k for k in range(1, spent + 1)], [2 * k for k in range(1, spent + 1)]
    return TheoremResult(name=name, mode=SearchMode.SKETCH, proved=at is not None, budget_at_proof=at,
                         proof="theorem t : P := by\n  have h : P := by simp\n  exact h" if at else None,
                         failure_reason=reason, nodes_expanded=spent, tokens=tokens[-1] if tokens else 0,
                         lean_calls=calls[-1] if calls else 0, time_s=1.5 * spent, lean_s=0.5 * spent,
                         curve=UsageCurve(tokens=tokens, lean_calls=calls), sketches=list(sketches))


def write_sketch_arm(path: Path, store: Store, *, trajectories: bool = True) -> EvalResult:
    results = [sketch_search(name, at, sketches) for name, (at, sketches) in SKETCHES.items()]
    result = build_eval_result(
        [results], BUDGETS, benchmark="mini", model="tiny", ebm=None, lean_backend="replay", iteration=1,
        config_digest="d", git_commit=None, theorem_names=list(SKETCHES), timestamp=datetime(2025, 1, 1, tzinfo=UTC),
        mode=SearchMode.SKETCH, wall_s=40.0)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_eval_result(result, path, store=store)
    if trajectories:
        write_trajectory(trajectories_beside(str(path)), [(r, []) for r in results], store=store)
    return result


def write_step_arm(path: Path, store: Store) -> EvalResult:
    result = curved(BASE, BUDGETS, SearchMode.STEP, 30, 1).model_copy(update={"wall_s": 20.0})
    path.parent.mkdir(parents=True, exist_ok=True)
    write_eval_result(result, path, store=store)
    return result


@pytest.mark.slow
def test_the_cost_table_of_sketch_against_step(tmp_path: Path, store: Store, capsys: pytest.CaptureFixture[str]
                                               ) -> None:
    step, sketch = tmp_path / "step.json", tmp_path / "sketch.json"
    write_step_arm(step, store)
    write_sketch_arm(sketch, store)
    assert sketch_cost.main([str(step), str(sketch), "--output", str(tmp_path / "cost.json")]) == 0
    # Step: a, b proved at 5 and 25 expansions, c and d spend 30: 22.5 Lean calls, 675 tokens per theorem, 1 s each
    # (0 s of it Lean's: no ratio). Sketch: a at 6, d at 2, b spends 30, c never starts: 19 calls, 855 tokens, 1.5 s
    # an expansion (9, 45, 0, 3 s: mean 14.25, median 6), a third of it Lean's.
    assert capsys.readouterr().out.splitlines() == [
        "| arm | mode | solved | Lean calls/thm | wall s/thm (mean, median) | Lean s/thm | tokens/thm | eval wall s |",
        "|---|---|---|---|---|---|---|---|",
        "| step | step | 2/4 | 22.5 | 1.00, 1.00 | 0.00 | 675 | 20.0 |",
        "| sketch | sketch | 2/4 | 19.0 | 14.25, 6.00 | 4.75 | 855 | 40.0 |",
        "| sketch ÷ step | | +0 solved | 0.84× | 14.25×, 6.00× | – | 1.27× | 2.00× |",
        "",
        "subgoal cache (sketch): 3 hits of 8 lookups, hit rate 37.5 %"]
    written = json.loads((tmp_path / "cost.json").read_text())
    assert (written["sketch"]["lean_calls"], written["cache"]) == (19.0, {"hits": 3, "lookups": 8,
                                                                          "rate": 3 / 8, "problem": None})


def test_the_cost_script_names_what_it_cannot_read(tmp_path: Path, store: Store,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    step, sketch = tmp_path / "step.json", tmp_path / "sketch.json"
    write_step_arm(step, store)
    write_sketch_arm(sketch, store, trajectories=False)
    assert sketch_cost.main([str(step), str(sketch)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"subgoal cache (sketch): not read: its trajectories {tmp_path}/sketch.trajectories do not exist (an eval run "
        "with --no-trajectories-out keeps none)")
    # The arms in the wrong order, or evals of other theorems, are refused.
    assert sketch_cost.main([str(sketch), str(step)]) == 2
    assert capsys.readouterr().err == f"error: {sketch} is a sketch eval: the first eval must be a step eval\n"
    other = tmp_path / "other.json"
    write_eval_result(curved({"a": 5, "z": None}, BUDGETS, SearchMode.STEP, 30, 1), other, store=store)
    assert sketch_cost.main([str(other), str(sketch)]) == 2
    assert "the two evals do not measure the same thing: different theorem sets" in capsys.readouterr().err


def test_the_figure_runs_each_step_once_with_the_arms_settings(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[list[str]] = []

    def run(argv: list[str], env: dict[str, str], log: Path) -> tuple[float, float]:
        ran.append(argv)
        assert env["BURNQED_HOME"] == str(tmp_path / "seed-4" / "home") and log == tmp_path / "seed-4" / "log.txt"
        return 1.0, 1.0

    monkeypatch.setattr(sketch_figure, "_run", run)
    sketch_figure.run_seed(4, tmp_path, "B", (10, 50))
    seed = ["--set", "policy.seed=4", "--set", "sft.seed=4", "--set", "ebm.seed=4", "--set", "data.world_seed=4",
            "--set", "data.world_sketches=true"]
    pipeline = [*seed, "--set", "sft.sketch_examples=true", "--set", "pipeline.eval_base=false", "--set",
                "pipeline.noise_temperature=null", "--set", "pipeline.start=previous", "--set", "sft.later_epochs=0",
                "--set", "sft.proofs_per_theorem=all"]
    runs, folder = str(tmp_path / "seed-4" / "runs"), tmp_path / "seed-4"
    models = ["--model", f"{runs}/iter_1/export", "--ebm", f"{runs}/iter_1/ebm"]
    evaluate = ["-m", "burnqed.cli", "eval", "--iter", "1", "--split", "test", "--budgets", "10,50", "--pass-n", "1",
                *models]
    assert ran == [
        ["-m", "burnqed.cli", "iterate", "--iter", "0", "--root", runs, *pipeline],
        ["-m", "burnqed.cli", "iterate", "--iter", "1", "--root", runs, "--only", "sft", "--only", "export", "--only",
         "train-ebm", *pipeline],
        [*evaluate, "--output", str(folder / "step.json"), *seed, "--set", "search.mode=step"],
        [*evaluate, "--output", str(folder / "sketch-B.json"), *seed, "--set", "search.mode=sketch",
         "--set", "search.sketch_rounds=4", "--set", "planner.temperature=0.2"]]
    assert json.loads((folder / "times.json").read_text()) == {"iteration 0": 1.0, "iteration 1 models": 1.0,
                                                               "eval step": 1.0, "eval sketch B": 1.0}
    # What is finished is not run again: the iterations' markers, the evals' results.
    for stage in ("iter_0/report", "iter_1/sft", "iter_1/export", "iter_1/ebm"):
        (folder / "runs" / stage).mkdir(parents=True)
        (folder / "runs" / stage / "_SUCCESS.json").write_text("{}")
    (folder / "step.json").write_text("{}")
    ran.clear()
    sketch_figure.run_seed(4, tmp_path, "A", (10, 50))
    assert ran == [[*evaluate, "--output", str(folder / "sketch-A.json"), *seed, "--set", "search.mode=sketch"]]


def test_the_figure_reads_both_arms_at_equal_tokens(tmp_path: Path, store: Store,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    for seed in (0, 1):
        write_step_arm(tmp_path / f"seed-{seed}" / "step.json", store)
    write_sketch_arm(tmp_path / "seed-0" / "sketch-A.json", store)
    assert sketch_figure.main(["--analyse-only", "--workdir", str(tmp_path), "--seeds", "0,1"]) == 1  # seed 1: none
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "sketch-figure-A.json").read_text())
    figures = summary["seeds"]["0"]
    assert list(summary["seeds"]) == ["0"] and summary["settings"] == []
    # Per theorem, step costs 262.5 and 675 tokens at 10 and 30 expansions, sketch 405 and 855; the largest level
    # both are read at is step's 675: step at 30 (a, b), sketch at 22 (675 tokens: a, d). Lean calls: sketch spends
    # 19 per theorem in all, below step's 22.5 at 30: the largest level is sketch's 19, which reads step at 23
    # expansions (18.5 calls, within 5 %: a only).
    assert figures["arms"] == {
        "step": {"budget": 30, "solved": 2, "total": 4, "rate": 0.5, "avg_tokens": 675.0,
                 "lean_calls_per_theorem": 22.5},
        "sketch": {"budget": 30, "solved": 2, "total": 4, "rate": 0.5, "avg_tokens": 855.0,
                   "lean_calls_per_theorem": 19.0}}
    assert figures["tokens"] == {"level": 675.0, "step": "50.0 % @30 · 675", "sketch": "50.0 % @22 · 675",
                                 "step_rate": 0.5, "sketch_rate": 0.5, "gain_points": 0.0, "interpolated": False}
    assert figures["lean_calls"] == {"level": 19.0, "step": "25.0 % @23 · 18.5", "sketch": "50.0 % @30 · 19",
                                     "step_rate": 0.25, "sketch_rate": 0.5, "gain_points": 25.0, "interpolated": False}
    assert (figures["sketches"]["sketches"], figures["sketches"]["lookups"], figures["sketch_problem"]) == (8, 8, None)
    assert "seed 1: an arm is missing under" in out
    assert ("| 0 | 2/4 · 675 | 2/4 · 855 | 675 | 50.0 % @30 · 675 | 50.0 % @22 · 675 | +0.0 | 19 | 25.0 % @23 · "
            "18.5 | 50.0 % @30 · 19 | +25.0 | 8 sketches, 5 elaborated, 3 re-plans; 6/10 subgoals proved; cache 3/8 "
            "(37.5 %) |") in out
    assert ("sketch over step at equal generated tokens, over 1 seed(s): +0.0 ± 0.0 points (target +3: not met); at "
            "equal Lean calls: +25.0 ± 0.0 points") in out


def test_the_figure_refuses_bad_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert sketch_figure.parse_budgets("50,10,10") == (10, 50)
    for argv, said in ((["--budgets", "0,10"], "--budgets: expected comma-separated whole numbers from 1"),
                       (["--seeds", "a"], "--seeds: expected comma-separated integers"),
                       (["--variant", "C"], "invalid choice: 'C'"), (["--jobs", "0"], "--jobs: expected at least 1")):
        with pytest.raises(SystemExit) as stopped:
            sketch_figure.main(["--analyse-only", *argv])
        assert stopped.value.code == 2 and said in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ sketch_mechanics.py


@pytest.mark.slow
def test_the_mechanics_of_one_situation_the_cache_serving_its_shared_facts(capsys: pytest.CaptureFixture[str]
                                                                          ) -> None:
    """The test split's first situation: three theorems with the same two facts. Every arm proves all three; the shared
    cache searches each fact once and serves it to the two later theorems (re-checked in Lean), a cache per theorem
    never hits; fewer Lean calls for sketch search with the shared cache than without, and than step search."""
    theorems = sketch_mechanics.sketch_family(0, "test")[:3]
    assert [recorded.role for _, recorded in theorems] == ["sketch"] * 3
    facts = {tuple(step for step in recorded.proofs[0] if step.startswith("have ")) for _, recorded in theorems}
    assert len(facts) == 1 and len(next(iter(facts))) == 2  # one situation: two facts, shared by the three
    step, shared, alone = asyncio.run(sketch_mechanics.run_arms(theorems, budget=32, candidates=16))
    assert [sum(r.proved for r in arm.results) for arm in (step, shared, alone)] == [3, 3, 3]
    assert [r.mode for r in step.results] == ["step"] * 3 and all(r.mode == "sketch" for r in shared.results)
    assert shared.cache is not None and alone.cache is not None
    assert (shared.cache.lookups, shared.cache.hits, shared.cache.stored, shared.cache.rejected) == (6, 4, 2, 0)
    assert (alone.cache.lookups, alone.cache.hits, alone.cache.stored, alone.cache.rejected) == (6, 0, 6, 0)
    assert [[s.source for s in r.sketches[0].subgoals] for r in shared.results] == [
        [SubgoalSource.SEARCH] * 2, [SubgoalSource.CACHE] * 2, [SubgoalSource.CACHE] * 2]
    assert sketch_mechanics.subgoal_sources(alone.results) == {"search": 6}
    calls = [[r.lean_calls for r in arm.results] for arm in (step, shared, alone)]
    assert calls[1][0] == calls[2][0]  # the first theorem: nothing to share yet
    assert all(shared_calls < own_calls for shared_calls, own_calls in zip(calls[1][1:], calls[2][1:], strict=True))
    assert all(own_calls < step_calls for step_calls, own_calls in zip(calls[0], calls[2], strict=True))
    assert sketch_mechanics.main(["--limit", "0"]) == 2
    assert "no sketch-family theorems" in capsys.readouterr().err
    assert sketch_mechanics.main(["--split", "valid"]) == 2
    assert "unknown split 'valid'" in capsys.readouterr().err


def test_the_script_proposes_the_recorded_step_last_and_nothing_off_the_proof() -> None:
    script = sketch_mechanics.Script(sketch="intro h₀\nhave hx : x = 3 := by sorry\nsubst hx\nnorm_num",
                                     steps={"x : ℝ ⊢ 2 * x = 6 → x ^ 3 = 27": "intro h₀"},
                                     facts={"x = 3": "linarith"}, tactics=("intro h₀", "linarith", "norm_num"))
    state = "/- tactic state:\n    x : ℝ\n    h₀ : 2 * x = 6\n    ⊢ x = 3\n-/"
    assert script.answer(state) == [("intro h₀", -0.1), ("norm_num", -0.1), ("linarith", -0.5)]
    assert script.answer("/- tactic state:\n    x : ℝ\n    ⊢ 2 * x = 6 → x ^ 3 = 27\n-/")[-1] == ("intro h₀", -0.5)
    assert script.answer("/- tactic state:\n    x : ℝ\n    ⊢ x ^ 3 = 27\n-/") == []
    assert script.answer("Sketch a proof of this theorem") == [(script.sketch, -0.5)]


# -------------------------------------------------------------------------------------------- sketch_grammar.py


@pytest.mark.slow
def test_the_grammar_figure_arms_on_one_theorem(tiny_model_dir: Path) -> None:
    """One theorem, a small budget: every sketch the grammar arms write is well-formed, and the table reads them."""
    from benchmarks import sketch_grammar
    from burnqed.policy.localmodel import LocalModel

    theorems = [theorem for theorem, _ in sketch_mechanics.sketch_family(0, "test")[:1]]
    model = LocalModel.load(tiny_model_dir, device="cpu", seed=0)
    arms = asyncio.run(sketch_grammar.run_arms(theorems, model, 0, budget=4, plans=2))
    assert [arm.label for arm in arms] == [label for label, _ in sketch_grammar.ARMS]
    assert [r.mode for arm in arms for r in arm.results] == ["step", "sketch", "sketch", "sketch"]
    for arm in arms[2:]:
        outcomes = arm.outcomes()
        assert outcomes["written"] > 0 and outcomes["well-formed"] == outcomes["written"], outcomes
    table = sketch_grammar.report(arms).splitlines()
    assert len(table) == 5 and table[3].startswith("sketch, grammar ")

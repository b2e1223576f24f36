"""benchmarks/learning.py's post-hoc analysis on a small synthetic run folder; benchmarks/retrieval.py's renaming."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from benchmarks import learning, retrieval
from burnqed.config import load_config
from burnqed.eval.pass_at import build_eval_result
from burnqed.eval.result import write_eval_result
from burnqed.records.results import FailureReason, TheoremResult
from burnqed.records.theorem import Theorem
from burnqed.storage import Store
from leankit.world.checked import embedded_world

WHEN = datetime(2026, 11, 23, 6, 0, 0, tzinfo=UTC)
SEED = 0


def _test_names() -> tuple[list[str], list[str]]:
    """Four taught and four held-out world theorems of seed 0, and two bundled names. (The world tests held-out
    templates only; taught theorems stand in for an eval over other theorems, which the analysis must still split
    by role.)"""
    world = embedded_world(SEED).theorems
    taught = [t.name for t in world if t.role == "taught"][:4]
    held = [t.name for t in world if t.split == "test" and t.role == "held_out"][:4]
    return taught + held, ["bundled_one", "bundled_two"]


def _write_eval(path: Path, proved_at: dict[str, int], names: list[str], reasons: dict[str, FailureReason]) -> None:
    results = [TheoremResult(name=n, proved=True, budget_at_proof=proved_at[n], nodes_expanded=proved_at[n],
                             time_s=1.0) if n in proved_at else
               TheoremResult(name=n, proved=False, failure_reason=reasons.get(n, FailureReason.MAX_NODES),
                             nodes_expanded=3 if reasons.get(n) is FailureReason.EXHAUSTED else 100, time_s=2.0)
               for n in names]
    sources = {n: ("burnqed-world" if n.startswith("world_") else "burnqed-bundled") for n in names}
    result = build_eval_result([results], list(learning.EVAL_BUDGETS), benchmark="embedded-test", model="m",
                               ebm=None, lean_backend="minilean", iteration=0, config_digest="d", git_commit=None,
                               theorem_names=names, timestamp=WHEN, theorem_sources=sources, seed=SEED)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_eval_result(result, path, store=Store.from_config(load_config().storage))


@pytest.fixture
def run_folder(tmp_path: Path) -> Path:
    world, bundled = _test_names()
    names = world + bundled
    taught, held = world[:4], world[4:]
    root = tmp_path / f"seed-{SEED}" / "runs"
    # base: one taught theorem; iteration 0: + two more (one only beyond budget 10), one held-out;
    # iteration 1: + a held-out one and a bundled one; its LLM-only ablation lacks the bundled one.
    base = {taught[0]: 3}
    it0 = {**base, taught[1]: 5, taught[2]: 40, held[0]: 60}
    it1 = {**it0, held[1]: 7, bundled[0]: 9}
    noebm = {k: v for k, v in it1.items() if k != bundled[0]}
    reasons = {taught[3]: FailureReason.EXHAUSTED, held[2]: FailureReason.EXHAUSTED}
    _write_eval(root / learning.EVALS["base"], base, names, reasons)
    _write_eval(root / learning.EVALS["iter 0"], it0, names, reasons)
    _write_eval(root / learning.EVALS["iter 1"], it1, names, reasons)
    _write_eval(root / learning.EVALS["iter 1 LLM only"], noebm, names, reasons)
    _write_eval(root / learning.EVALS["iter 0 concurrency 1"], {**it0, held[1]: 80}, names, reasons)
    (root / learning.RETRIEVAL).parent.mkdir(parents=True)
    (root / learning.RETRIEVAL).write_text(json.dumps({"solved": 2, "total": 10, "sources": {"sft": 5, "search": 1},
                                                       "proofs": {held[3]: {}, bundled[1]: {}}}), encoding="utf-8")
    (root.parent / "times.json").write_text(json.dumps({"0": {"wall_s": 250.0, "cpu_s": 300.0, "load_before": 2.0,
                                                              "load_after": 3.0}}), encoding="utf-8")
    (root.parent / "log.txt").write_text("[1/3] prepare-data: finished in 20.5s\n[2/3] sft: finished in 100.0s\n"
                                         "noise\n[1/2] sft: finished in 7.0s\n", encoding="utf-8")
    return tmp_path


def test_analysis_figures_from_a_run_folder(run_folder: Path) -> None:
    figures = learning.seed_figures(learning.load_seed(run_folder, SEED))
    budget = figures["budget"]
    assert (budget["small"], budget["large"]) == (2, 4)  # taught[2] at 40 and held[0] at 60 count only at 100
    assert budget["ratio"] == 2.0
    assert (budget["failures"], budget["exhausted"]) == (6, 2)
    rates = figures["rates"]
    assert rates["all"]["base"] == (1, 10) and rates["all"]["iter 0"] == (4, 10) and rates["all"]["iter 1"] == (6, 10)
    assert rates["held out"]["iter 0"] == (1, 4) and rates["held out"]["iter 1"] == (2, 4)
    assert rates["bundled"]["iter 1"] == (1, 2) and rates["bundled"]["iter 1 LLM only"] == (0, 2)
    assert rates["world"]["base"][1] == 8
    assert figures["retrieval"] == {"solved": 2, "total": 10, "iter1": 6, "sources": {"sft": 5, "search": 1},
                                    "held_out": (1, 4), "iter1_held_out": 2}
    concurrency = figures["concurrency"]
    assert not concurrency["same"] and concurrency["only_one"] == [_test_names()[0][5]]
    assert figures["iter0_wall_s"] == 250.0 and figures["iter0_stages"] == {"prepare-data": 20.5, "sft": 100.0}
    text = "\n".join(learning.analyse([learning.load_seed(run_folder, SEED)]))
    assert "2 → 4 (×2.00, target ≥ 1.3: MET)" in text
    assert "exhausted 2/6 failures (33 %, target ≤ 50 %: MET)" in text
    assert "seed 0: 2/10 vs 6 (MET)" in text  # retrieval: at most half of iteration 1
    assert "60.0 vs 50.0 (+10.0, MET)" in text  # LLM+EBM vs LLM only
    # the bundled theorem is the value model's alone; of the four neither arm proves, two ended exhausted
    assert figures["ebm_overlap"] == {"both": 5, "only_ebm": 1, "only_llm": 0, "neither": 4,
                                      "neither_reasons": {"exhausted": 2, "max_nodes": 2}}
    assert ("proved by both 5, only with the value model 1, only by LLM only 0, by neither 4 (LLM only's ending "
            "there: exhausted 2, max_nodes 2)") in text
    # the bundled theorem only the value model's run proves, at budget 9: the same gap at every budget
    assert figures["ebm_by_budget"][10] == ((4, 10), (3, 10)) and figures["ebm_by_budget"][100] == ((6, 10), (5, 10))
    assert "the same gap at every budget (points, mean over seeds): 10: +10.0 ± 0.0, 50: +10.0 ± 0.0" in text
    # iteration 1's gain with its value model, and in brackets without it
    assert "10.0 →  40.0 →  60.0 ( 50.0); gains +30.0, +20.0 (+10.0) (targets ≥ 10, ≥ 5: MET)" in text
    assert "same set: False" in text and "250 s (MET)" in text


def test_the_curve_across_five_iterations_and_the_targets_of_issue_69(tmp_path: Path) -> None:
    world, bundled = _test_names()
    names = world + bundled
    root = tmp_path / f"seed-{SEED}" / "runs"
    # LLM only 2, 4, 3, 5, 6 of 10; with the value model at iterations 1..4: 5, 3, 5, 8 (budget 50, proved at 9)
    for j, (alone, with_it) in enumerate([(2, None), (4, 5), (3, 3), (5, 5), (6, 8)]):
        it = root / f"iter_{j}" / "eval"
        _write_eval(it / ("eval.json" if j == 0 else "eval-noebm.json"), dict.fromkeys(names[:alone], 9), names, {})
        if with_it is not None:
            _write_eval(it / "eval.json", dict.fromkeys(names[:with_it], 9), names, {})
    # --resample at iteration 4: LLM only at two more sampling seeds, 3 and 6 of 10 (mean (6 + 3 + 6) / 3 = 5)
    for sampling, solved in zip(learning.RESAMPLE_SEEDS, (3, 6), strict=False):
        _write_eval(root / learning.resampled_eval(4, sampling), dict.fromkeys(names[:solved], 9), names, {})
    (root / "iter_3" / "sft").mkdir(parents=True)
    (root / "iter_3" / "sft" / "sft.json").write_text(json.dumps({
        "init": "file:///r/iter_1/sft", "data_counts": {"positives": 863, "positive_upsample": 5},
        "history": [{"step": 20, "loss": 0.3, "eval_loss": 0.6}, {"step": 40, "loss": 0.26, "eval_loss": 0.55}]}),
        encoding="utf-8")
    (root / "iter_3" / "start.json").write_text(json.dumps({"policy_from": 1, "value_model_from": 1,
                                                           "search_value_model": False}), encoding="utf-8")
    lines = learning.write_curve(tmp_path, [SEED], 5)
    written = json.loads((tmp_path / "curve.json").read_text(encoding="utf-8"))
    point = written["seeds"]["0"][3]
    assert point == {"iteration": 3, "llm": {"50": 5, "100": 5}, "llm_ebm": {"50": 5, "100": 5}, "total": 10,
                     "resamples": 0, "llm_resampled": {"50": None, "100": None},
                     "positives": 863, "upsample": 5, "train_loss": 0.26, "held_out_loss": 0.55,
                     "sft_init": "file:///r/iter_1/sft",
                     "start": {"policy_from": 1, "value_model_from": 1, "search_value_model": False}}
    summary = written["summary"]
    assert summary["mean_pct"] == {"llm": {"0": 20.0, "1": 40.0, "2": 30.0, "3": 50.0, "4": 60.0},
                                   "llm_ebm": {"1": 50.0, "2": 30.0, "3": 50.0, "4": 80.0},
                                   "llm_resampled": {"4": 50.0}}
    assert written["seeds"]["0"][4]["resamples"] == 2 and written["seeds"]["0"][4]["llm_resampled"]["50"] == 5.0
    # iteration 2 fell below iteration 1 in both arms; iteration 4 is 20 and 30 points above iteration 1
    assert summary["targets"]["llm"] == {"never_below_best_earlier": {"2": False, "3": True, "4": True},
                                         "iter4_minus_iter1_pts": 20.0, "iter4_at_least_5_above_iter1": True}
    assert summary["targets"]["llm_ebm"]["never_below_best_earlier"] == {"2": False, "3": True, "4": True}
    assert lines[4] == ("   seed 0 iter 3: LLM only 5 / 5, LLM+EBM 5 / 5 of 10; positives 863 ×5; held-out 0.5500; "
                        "started from policy 1, value model 1, search without it")
    assert lines[5] == ("   seed 0 iter 4: LLM only 6 / 6, LLM+EBM 8 / 8, LLM only over 3 samplings 5.0 / 5.0 of 10; "
                        "positives None ×None; held-out –")
    assert "   mean llm_resampled at 50: iter 4 50.0 %" in lines
    # one iteration resampled: nothing earlier to be compared with, so the targets are not measured
    assert summary["targets"]["llm_resampled"]["never_below_best_earlier"] == {"2": None, "3": None, "4": None}


def test_analysis_of_an_empty_folder_reports_nothing(tmp_path: Path) -> None:
    figures = learning.seed_figures(learning.load_seed(tmp_path, 3))
    assert set(figures) == {"seed", "gates"}


def test_stage_times_split_per_iterate_call() -> None:
    log = "[1/2] a: finished in 1.5s\n[2/2] b: finished in 2s\n[1/3] a: finished in 3s\n"
    assert learning.stage_times(log) == [{"a": 1.5, "b": 2.0}, {"a": 3.0}]


def test_rename_tactics_replaces_whole_identifiers_at_once() -> None:
    names = retrieval.renaming(["a", "b", "c"], ["b", "a"])
    assert names == {"a": "b", "b": "a"}
    tactics = ["intro h", "nlinarith [sq_nonneg (a - b), ha, h.a, a', c]", "use b"]
    assert retrieval.rename_tactics(tactics, names) == ["intro h", "nlinarith [sq_nonneg (b - a), ha, h.a, a', c]",
                                                        "use a"]
    assert retrieval.rename_tactics(["exact x₁"], {"x₁": "y₁"}) == ["exact y₁"]


def test_binder_list_and_candidates() -> None:
    source = Theorem(name="src", statement="∀ (a b : ℝ), 2 * a * b ≤ a ^ 2 + b ^ 2", header="import Mathlib",
                     source="world", split="train")
    target = Theorem(name="tgt", statement="∀ (x y : ℝ), 2 * x * y ≤ x ^ 2 + y ^ 2", header="import Mathlib",
                     source="world", split="test")
    assert retrieval.binder_list(source) == ["a", "b"]
    proof = retrieval.SourceProof(source, ("nlinarith [sq_nonneg (a - b)]",), "sft")
    texts = list(retrieval.candidates(target, [proof, proof]))
    assert len(texts) == 1  # the same text is tried once
    assert "theorem tgt (x y : ℝ) : 2 * x * y ≤ x ^ 2 + y ^ 2 := by\n  nlinarith [sq_nonneg (x - y)]" in texts[0]


def test_renamed_proof_compiles_through_the_lean_edge() -> None:
    source = Theorem(name="src", statement="∀ (a b : ℝ), 2 * a * b ≤ a ^ 2 + b ^ 2", header="import Mathlib",
                     source="world", split="train")
    target = Theorem(name="tgt", statement="∀ (x y : ℝ), 2 * x * y ≤ x ^ 2 + y ^ 2", header="import Mathlib",
                     source="world", split="test")
    other = Theorem(name="oth", statement="∀ (x y : ℝ), x * y ≤ x ^ 2 + y ^ 2 - 1", header="import Mathlib",
                    source="world", split="test")
    sources = [retrieval.SourceProof(source, ("nlinarith [sq_nonneg (a - b)]",), "sft")]
    cfg = load_config(sets=["lean.verifier_workers=1"])
    solved = asyncio.run(retrieval._solve_all(cfg, [target, other], sources, 1))
    assert set(solved) == {"tgt"} and solved["tgt"]["from"] == "src"

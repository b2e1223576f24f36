"""`EvalJobSettings`: what the eval stage takes from the configuration, built at the command layer; `EvalRequest`:
the arms of one `burnqed eval` and the checks made before any search."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from burnqed.config import load_config
from burnqed.errors import InputError
from burnqed.eval.arms import EvalArm, EvalRequest, ablation_output, check_eval_request, finished_eval
from burnqed.eval.identity import EvalJobSettings
from burnqed.eval.metadata import config_digest
from burnqed.eval.pass_at import build_eval_result
from burnqed.eval.result import write_eval_result
from burnqed.eval.run import eval_settings
from burnqed.records.results import FailureReason, TheoremResult
from burnqed.search.hybrid_settings import HybridSettings
from burnqed.search.step import StepSettings
from burnqed.search.whole import WholeSettings
from burnqed.storage import Store


def test_eval_settings_search_at_the_largest_budget_mark_every_budget_and_always_verify(
        caplog: pytest.LogCaptureFixture) -> None:
    cfg = load_config(sets=["search.verify=false", "policy.seed=7", "search.max_nodes=50"])
    with caplog.at_level(logging.WARNING):
        settings = EvalJobSettings.from_config(cfg, [10, 30])
    assert "search.verify=false is ignored here" in caplog.text
    engine = settings.job.engine
    assert isinstance(engine, StepSettings)
    assert (engine.max_nodes, engine.marks, engine.verify) == (30, (10, 30), True)
    assert settings.budgets == (10, 30) and settings.seed == 7 and settings.backend == cfg.policy.backend
    assert settings.config_digest == config_digest(cfg)  # the whole configuration, as results always recorded


def test_eval_settings_refuse_budgets_out_of_order() -> None:
    with pytest.raises(ValueError, match="unique and ascending"):
        EvalJobSettings.from_config(load_config(), [30, 10])


@pytest.mark.parametrize(("output", "twin"), [
    ("results/iter_1.json", "results/iter_1-noebm.json"),
    ("s3://b/run/eval.v2.json", "s3://b/run/eval.v2-noebm.json"),
    ("results.d/iter_1", "results.d/iter_1-noebm.json"),  # a dot in a folder name is no extension
])
def test_the_ablation_arm_writes_beside_the_output(output: str, twin: str) -> None:
    assert ablation_output(output) == twin


def test_an_ablation_runs_the_value_model_arm_first_then_the_arm_without_it() -> None:
    request = EvalRequest("r.json", ebm="runs/ebm", ablation=True, trajectories="runs/traj/")
    assert request.arms() == [EvalArm("r.json", "runs/traj/", "runs/ebm"),
                              EvalArm("r-noebm.json", "runs/traj-noebm", None)]
    assert request.outputs == ["r.json", "r-noebm.json"] and request.prefixes == ["runs/traj/", "runs/traj-noebm"]
    kept = EvalRequest("out/r.json", ebm="runs/ebm", ablation=True)  # each arm's trajectories beside its result
    assert kept.arms() == [EvalArm("out/r.json", "out/r.trajectories", "runs/ebm"),
                           EvalArm("out/r-noebm.json", "out/r-noebm.trajectories", None)]
    plain = EvalRequest("r.json", ebm="runs/ebm", keep_trajectories=False)
    assert plain.arms() == [EvalArm("r.json", None, "runs/ebm")] and plain.prefixes == []


@pytest.mark.parametrize(("request_", "message"), [
    (EvalRequest("r.json", ablation=True), "give --ebm too"),
    (EvalRequest("r.json", resume=True, keep_trajectories=False), "which --no-trajectories-out does not keep"),
    (EvalRequest("r.json", trajectories="t", keep_trajectories=False), "--no-trajectories-out and "
                                                                       "--trajectories-out contradict each other"),
])
def test_a_request_that_cannot_run_is_refused_before_anything_starts(request_: EvalRequest, message: str,
                                                                     store: Store) -> None:
    with pytest.raises(InputError, match=message):
        check_eval_request(request_, store=store)


def test_a_finished_eval_is_found_only_when_every_arm_is_written(store: Store, tmp_path: Path) -> None:
    result = build_eval_result([[TheoremResult(name="t", proved=False, failure_reason=FailureReason.EXHAUSTED)]], [5],
                               benchmark="b", model="m", ebm="e", lean_backend="replay", iteration=0,
                               config_digest="d", git_commit=None, theorem_names=["t"])
    request = EvalRequest(str(tmp_path / "r.json"), ebm="e", ablation=True)
    write_eval_result(result, request.output, store=store)
    assert finished_eval(request, store=store) is None  # the -noebm arm is missing: the eval runs again
    write_eval_result(result, ablation_output(request.output), store=store)
    found = finished_eval(request, store=store)
    assert found is not None and [r.benchmark for r in found] == ["b", "b"]


def test_an_eval_records_each_engine_setting_its_settings_record_names() -> None:
    step = eval_settings("local", StepSettings(alpha=0.7, probe_tactics=("simp",), max_nodes=5, revisits=3), 2)
    assert (step.alpha, step.probe_tactics, step.max_nodes, step.max_proofs, step.repair_rounds) == (
        0.7, ["simp"], 5, None, None)  # a tuple as a list; revisits has no field of the record
    whole = eval_settings("local", WholeSettings(max_proofs=9), 2)
    assert (whole.max_proofs, whole.verify, whole.max_depth, whole.alpha, whole.repair_rounds) == (
        9, True, None, None, 0)
    hybrid = eval_settings("local", HybridSettings(num_proofs=6, max_tokens=300, max_depth=7, verify=False), 2)
    assert (hybrid.num_candidates, hybrid.max_new_tokens, hybrid.max_depth, hybrid.verify, hybrid.value_weight) == (
        6, 300, 7, False, None)  # the priority's value weight is no field of the engine's own

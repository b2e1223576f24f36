"""pipeline.py: the iteration as data — stages, order, iteration-dependent steps, fan-out, URIs."""

from __future__ import annotations

import pytest

from burnqed.config import PipelineConfig, load_config
from burnqed.layout import Layout
from burnqed.runner.plan import Resource, build_iteration, iteration_of

ROOT = "s3://bucket/run"


def test_iteration_0_has_data_base_eval_noise_search_and_no_ebm() -> None:
    it = build_iteration(PipelineConfig(search_shards=3), ROOT, 0)
    assert it.names == ["prepare-data", "eval-base", "sft", "export", "search", "search-noise", "merge-trajectories",
                        "eval", "report"]
    search = it.stage("search")
    assert search.shards == 3 and search.resource is Resource.GPU_LEAN
    assert search.argv_for(2)[-2:] == ["--output", f"{ROOT}/iter_0/search/shard-2"]
    assert "2/3" in search.argv_for(2)
    split = search.argv.index("--split")
    assert search.argv[split - 1 : split + 2] == (f"{ROOT}/iter_0/data/theorems.json", "--split", "train,pool")
    assert search.ebm is None and search.policy_model == f"{ROOT}/iter_0/export"
    noise = it.stage("search-noise")
    assert "policy.temperature=1.2" in noise.argv
    merge = it.stage("merge-trajectories")
    assert merge.argv[1:7] == tuple([f"{ROOT}/iter_0/search/shard-{k}" for k in range(3)]
                                    + [f"{ROOT}/iter_0/search-noise/shard-{k}" for k in range(3)])
    assert set(merge.after) == {"search", "search-noise"}
    assert it.stage("eval").argv[-1] == f"{ROOT}/iter_0/eval/eval.json"
    assert "eval-base" in it.stage("report").after


def test_eval_base_evaluates_the_base_model_like_every_eval() -> None:
    cfg = PipelineConfig(eval_budgets=[5, 20], eval_pass_n=2, benchmark="s3://b/minif2f.json")
    it = build_iteration(cfg, ROOT, 0, base_model="s3://models/prover-7b")
    base, main = it.stage("eval-base"), it.stage("eval")
    assert base.argv == ("eval", "--iter", "0", "--theorems", "s3://b/minif2f.json", "--budgets", "5,20", "--pass-n",
                         "2", "--resume", "--model", "s3://models/prover-7b", "--output",
                         f"{ROOT}/iter_0/eval-base/eval.json")
    assert main.argv[:10] == base.argv[:10]  # the same benchmark, budgets and pass@N as the trained policy's eval
    assert base.outputs == (Layout(ROOT).eval_base(),) and base.after == ()
    assert (base.policy_model, base.inputs, base.resource) == ("s3://models/prover-7b", ("s3://models/prover-7b",),
                                                               Resource.GPU_LEAN)
    embedded = build_iteration(PipelineConfig(), ROOT, 0).stage("eval-base")
    assert "--set" not in embedded.argv and embedded.policy_model is None  # the default (tiny) model
    assert "eval-base" not in build_iteration(PipelineConfig(eval_base=False), ROOT, 0).names
    assert "eval-base" not in build_iteration(PipelineConfig(), ROOT, 1).names
    searched = build_iteration(PipelineConfig(search_splits=["pool"]), ROOT, 1).stage("search").argv
    assert searched[searched.index("--split") + 1] == "pool"


def test_iteration_2_trains_an_ebm_on_all_earlier_trajectories_and_runs_the_ablation() -> None:
    # pipeline.start = "previous": iteration i-1's models ("best"'s start stage: tests/eval/test_start.py)
    it = build_iteration(PipelineConfig(noise_temperature=None, start="previous"), ROOT, 2)
    assert it.names == ["sft", "export", "train-ebm", "search", "merge-trajectories", "eval", "eval-noebm", "report"]
    sft = it.stage("sft").argv
    assert [sft[i + 1] for i, a in enumerate(sft) if a == "--trajectories"] == [
        f"{ROOT}/iter_0/trajectories", f"{ROOT}/iter_1/trajectories"]
    assert sft[sft.index("--init") + 1] == f"{ROOT}/iter_1/sft"
    ebm = it.stage("train-ebm")
    assert ebm.argv[ebm.argv.index("--init") + 1] == f"{ROOT}/iter_1/ebm"
    assert ebm.argv[ebm.argv.index("--model") + 1] == f"{ROOT}/iter_2/export"
    assert "--ebm" in it.stage("search").argv and it.stage("search").ebm == f"{ROOT}/iter_2/ebm"
    assert "--ebm" in it.stage("eval").argv
    assert "--ebm" not in it.stage("eval-noebm").argv
    assert it.stage("eval-noebm").outputs == (f"{ROOT}/iter_2/eval/eval-noebm.json",)
    # iteration 1 has no previous head to start from
    assert "--init" not in build_iteration(PipelineConfig(start="previous"), ROOT, 1).stage("train-ebm").argv
    # the default ("base"): SFT from the base model on the same data; the value model train-ebm starts from and
    # search's use of it from the start stage's record (tests/eval/test_start.py), at iteration 1 as "previous"
    base = build_iteration(PipelineConfig(noise_temperature=None), ROOT, 2)
    assert base.names == ["start", *it.names] and "--init" not in base.stage("sft").argv
    assert [a for a in sft if a not in ("--init", f"{ROOT}/iter_1/sft")] == list(base.stage("sft").argv)
    start = ("--start", f"{ROOT}/iter_2/start.json")
    assert base.stage("train-ebm").argv == (*ebm.argv[:-4], *start, *ebm.argv[-2:])  # for --init ITER_1/EBM
    first = build_iteration(PipelineConfig(noise_temperature=None), ROOT, 1)
    assert first.stage("train-ebm").argv == build_iteration(PipelineConfig(start="previous"), ROOT, 1).stage(
        "train-ebm").argv


@pytest.mark.parametrize("iteration", [0, 1, 3])
def test_dependencies_point_backwards_and_outputs_are_unique(iteration: int) -> None:
    it = build_iteration(PipelineConfig(search_shards=2), ROOT, iteration)
    seen: set[str] = set()
    outputs: list[str] = []
    for stage in it.stages:
        assert set(stage.after) <= seen, f"{stage.name} depends on a later stage"
        seen.add(stage.name)
        outputs += stage.all_outputs()
        assert all(uri.startswith(f"{ROOT}/iter_") for uri in stage.all_outputs())
    assert len(outputs) == len(set(outputs))


def test_layout_and_bad_iteration() -> None:
    at = Layout("file:///r/")
    assert at.search_shard(1, 0, noise=True) == "file:///r/iter_1/search-noise/shard-0"
    assert at.data() == "file:///r/iter_0/data"
    with pytest.raises(ValueError, match="≥ 0"):
        build_iteration(PipelineConfig(), ROOT, -1)
    with pytest.raises(KeyError, match="no stage 'train-ebm'"):
        build_iteration(PipelineConfig(), ROOT, 0).stage("train-ebm")


def test_eval_modes_add_one_eval_per_mode_with_the_mode_on_its_command_line() -> None:
    cfg = PipelineConfig(noise_temperature=None, eval_modes=["whole", "hybrid"], eval_proof_budgets=[8, 32])
    it = build_iteration(cfg, ROOT, 1)
    assert it.names[-4:] == ["eval-noebm", "eval-whole", "eval-hybrid", "report"]
    whole, hybrid = it.stage("eval-whole"), it.stage("eval-hybrid")
    for stage, mode in ((whole, "whole"), (hybrid, "hybrid")):
        argv = stage.argv
        assert f"search.mode={mode}" in argv and argv[argv.index("--budgets") + 1] == "8,32"
        assert stage.outputs == (f"{ROOT}/iter_1/eval/eval-{mode}.json",) and stage.resource is Resource.GPU_LEAN
    assert "--ebm" not in whole.argv and whole.ebm is None  # whole mode orders no frontier
    assert hybrid.argv[hybrid.argv.index("--ebm") + 1] == f"{ROOT}/iter_1/ebm" == hybrid.ebm
    assert {"eval-whole", "eval-hybrid"} <= set(it.stage("report").after)
    step = build_iteration(PipelineConfig(eval_modes=["step"]), ROOT, 0).stage("eval-step")
    assert step.argv[step.argv.index("--budgets") + 1] == "10,50" and "search.mode=step" in step.argv
    # Sketch mode counts expansions too (planner requests and subgoal expansions): the main eval's budgets, the EBM.
    sketch = build_iteration(PipelineConfig(eval_modes=["sketch"], eval_proof_budgets=[8, 32]), ROOT, 1)
    sketched = sketch.stage("eval-sketch")
    assert sketched.argv[sketched.argv.index("--budgets") + 1] == "10,50" and "search.mode=sketch" in sketched.argv
    assert sketched.ebm == f"{ROOT}/iter_1/ebm"
    default = build_iteration(PipelineConfig(eval_modes=["hybrid"]), ROOT, 0, max_proofs=64).stage("eval-hybrid")
    assert default.argv[default.argv.index("--budgets") + 1] == "16,32,64"  # a quarter, half and all of max_proofs
    with pytest.raises(ValueError, match="the eval-hybrid stage needs max_proofs"):
        build_iteration(PipelineConfig(eval_modes=["hybrid"]), ROOT, 0)


def test_in_sketch_mode_every_shard_and_iteration_shares_the_runs_subgoal_cache() -> None:
    shared = f"search.subgoal_cache={Layout(ROOT).subgoal_cache()}"
    sketch = load_config(sets=["search.mode=sketch", "pipeline.search_shards=2", "pipeline.noise_temperature=1.2"])
    for i in (0, 1):
        stages = iteration_of(sketch, ROOT, i)
        searches = [s for s in stages.stages if s.name.startswith("search")]
        assert [s.name for s in searches] == (["search", "search-noise"] if i == 0 else ["search"])
        for stage in searches:
            assert stage.argv[stage.argv.index(shared) - 1] == "--set"
    step = iteration_of(load_config(sets=["pipeline.search_shards=2"]), ROOT, 1)
    assert not any(arg.startswith("search.subgoal_cache=") for s in step.stages for arg in s.argv)
    # iteration_of reads every option from the config: the same plan as build_iteration given them by hand.
    assert step == build_iteration(PipelineConfig(search_shards=2), ROOT, 1)

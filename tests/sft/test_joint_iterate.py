"""`burnqed iterate --iter 1` with `sft.joint = true`, warm-started (`pipeline.start = "best"`), on the embedded
defaults (replay Lean server, tiny model, the small generated world of tests/pipeline/iteration.py, tiny step
counts), from the iteration 0 the end-to-end tests share (`iteration_0`, copied): the iteration trains policy and
head jointly, search and eval score with exactly the exported head, and the report carries the A/B/C study with
every metric measured. Every stage runs but the EBM ablation's eval (`eval-noebm`, which no assertion here reads:
`STAGES`), the training search in one shard at a small budget (its trajectories feed the report alone; the study
reads iteration 0's)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from tests.pipeline.iteration import iterate_env, iterate_forked

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

QUICK = {
    "BURNQED_SFT__JOINT": "true",
    "BURNQED_SFT__MAX_STEPS": "30",
    "BURNQED_PIPELINE__START": "best",  # a warm start of 8 steps (the default trains the base for an epoch)
    "BURNQED_SFT__LATER_EPOCHS": "0",
    "BURNQED_SFT__WARM_STEPS": "8",
    "BURNQED_SFT__JOINT_GROUPS": "4",
    "BURNQED_SFT__JOINT_PROBE_EVERY": "4",
    "BURNQED_EBM__STEPS": "60",
    "BURNQED_EBM__HIDDEN_DIMS": "[32]",
    "BURNQED_PIPELINE__SEARCH_SHARDS": "1",
    "BURNQED_SEARCH__MAX_NODES": "8",
    # The three evals (main, A, B): what the study reads of them is each budget's solve rate and tokens a theorem,
    # numbers whether or not a theorem is proved; iteration 0's are 5 and 10 (tests/pipeline/iteration.py).
    "BURNQED_PIPELINE__EVAL_BUDGETS": "[2, 4]",
}
# The joint iteration 1's stages (burnqed.runner.plan) less eval-noebm; `iterate --only` checks each name.
STAGES = ("start", "sft", "export", "train-ebm", "search", "merge-trajectories", "eval", "study-sft-a",
          "study-export-a", "study-ebm-a", "study-ebm-b", "study-eval-a", "study-eval-b", "study-metrics", "report")


def _numbers(value: object, where: str) -> None:
    """Every leaf of `value` is a finite number (or a string/bool label): nothing left unmeasured."""
    if isinstance(value, dict):
        for key, item in value.items():
            _numbers(item, f"{where}.{key}")
    elif isinstance(value, list):
        for k, item in enumerate(value):
            _numbers(item, f"{where}[{k}]")
    elif isinstance(value, float):
        assert math.isfinite(value), where
    else:
        assert value is not None, f"{where} is not measured"
        assert isinstance(value, (int, str, bool)), where


def test_a_joint_iteration_runs_the_study_and_scores_with_the_exported_head(
        iteration_0: Path, iterate_home: Path, tmp_path: Path) -> None:
    root = tmp_path / "run"
    shutil.copytree(iteration_0 / "run" / "iter_0", root / "iter_0", symlinks=True)  # the shared run stays as it is
    only = [arg for name in STAGES for arg in ("--only", name)]
    done = iterate_forked(str(root), 1, iterate_env(iterate_home, QUICK), *only)
    assert done.returncode == 0, done.stderr[-4000:]
    # the study loads each policy once: A's SFT export, then the iteration's export for both B and C
    loads = [line.split("joint-study: ")[1].split(" embedded once")[0] for line in done.stderr.splitlines()
             if " embedded once with " in line]  # "[study-metrics] joint-study: B and C embedded once with …"
    assert loads == ["A", "B and C"]
    check_joint_run(root)


def check_joint_run(root: Path) -> None:
    """What a finished joint iteration 1 under `root` must hold (also run by hand on a resumed run)."""
    from safetensors.torch import load_file

    it1 = root / "iter_1"
    # The policy and head were trained together and search scored with that very head.
    joint = json.loads((it1 / "sft" / "joint" / "joint.json").read_text())
    assert joint["steps"] == 8 and joint["probes"]
    trained = load_file(str(it1 / "sft" / "joint" / "head.safetensors"))
    published = load_file(str(it1 / "ebm" / "head.safetensors"))
    assert trained.keys() == published.keys()
    assert all(bool((trained[k] == published[k]).all()) for k in trained)
    manifest = json.loads((it1 / "ebm" / "ebm.json").read_text())
    assert manifest["encoder"]["model"].rstrip("/").endswith("iter_1/export")
    assert "joint" in manifest["init"]["reason"]
    main_eval = json.loads((it1 / "eval" / "eval.json").read_text())
    assert main_eval["ebm"].rstrip("/").endswith("iter_1/ebm")
    # The study: A, B and C with every metric measured, at the same budgets, in report.json and report.md.
    report = json.loads((it1 / "report" / "report.json").read_text())
    study = report["joint_study"]
    assert list(study["configurations"]) == ["A", "B", "C"]
    study_file = json.loads((it1 / "study" / "metrics" / "study.json").read_text())
    assert study_file["configurations"]["C"]["encoder_digest"] == manifest["encoder"]["digest"]
    assert study_file["configurations"]["C"]["ebm"].rstrip("/").endswith("iter_1/ebm")
    budgets = {tuple(row["budget"] for row in entry["solve"]) for entry in study["configurations"].values()}
    assert budgets == {(2, 4)}
    for name, entry in study["configurations"].items():
        embedding, value = entry["embedding"], entry["value"]
        for key in ("centroid_l2", "linear_probe", "norm_gap", "effective_rank"):
            assert isinstance(embedding[key], float | int), f"{name}: {key} = {embedding[key]}"
        assert (embedding["sibling_l2"] is None) == (embedding["siblings"] == 0)  # no positive with a sibling
        assert embedding["spectrum"] and embedding["by_depth"]
        for key in ("rank1", "energy_gap"):
            assert isinstance(value[key], float | int), f"{name}: {key} = {value[key]}"
        assert value["rank1_by_depth"]
        # Sibling discrimination needs expanded nodes with children on and off a proof path; this small world's
        # short proofs may have none, and then it says so instead of a number (the embedded defaults have them).
        siblings = ("sibling_accuracy", "sibling_chance")
        if value["sibling_decisions"]:
            assert all(isinstance(value[key], float | int) for key in siblings) and value["sibling_by_depth"]
        else:
            assert all(value[key] is None for key in siblings) and value["sibling_split"].startswith("not measured")
        assert all(row["avg_tokens"] is not None for row in entry["solve"])
        _numbers({k: v for k, v in entry.items() if k not in ("embedding", "value")}, name)
        _numbers({k: v for k, v in value.items() if k not in siblings}, f"{name}.value")
        _numbers({k: v for k, v in embedding.items() if k not in ("by_depth", "sibling_l2")}, f"{name}.embedding")
    measured_siblings = all(e["value"]["sibling_decisions"] for e in study["configurations"].values())
    for attribution in study["attributions"]:
        assert all(v is not None for k, v in attribution["deltas"].items()
                   if measured_siblings or not k.startswith("sibling_")), attribution
    assert [a["name"] for a in study["attributions"]] == ["A→B", "B→C", "A→C"]
    markdown = (it1 / "report" / "report.md").read_text()
    assert "## Joint training study (iteration 1)" in markdown
    assert (it1 / "report" / "joint_spectrum.png").is_file() and (it1 / "report" / "joint_projection.png").is_file()

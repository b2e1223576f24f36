"""The joint-training study (issue 29): embedding health on embeddings with known structure, the study's stages in
the pipeline, and the report's `joint_study` section (A, B, C side by side with attributions and plots)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import torch

from burnqed.config import PipelineConfig
from burnqed.ebm.metrics import embedding_health
from burnqed.ebm.sampling import EbmDataset, build_dataset
from burnqed.errors import InputError
from burnqed.eval.joint_study import (
    STUDY_FILE,
    ConfigurationMetrics,
    StudyMetrics,
    ValueHealth,
    policy_runs,
    study_configurations,
    study_evals,
)
from burnqed.layout import Layout
from burnqed.report.build import build_report, write_report
from burnqed.report.markdown import render_markdown
from burnqed.runner.plan import build_iteration
from burnqed.storage import Store
from burnqed.trajectory.schema import theorems_to_table
from tests.doubles.ebm_doubles import proved_tree, unproved_tree
from tests.eval.test_report import publish


def dataset() -> EbmDataset:
    trees = [(f"p{k}", proved_tree(f"p{k} ")) for k in range(10)]
    trees += [(f"u{k}", unproved_tree(f"u{k} ")) for k in range(3)]
    data = build_dataset([theorems_to_table("run", 0, trees)], valid_fraction=0.4)
    assert data.split_states("train") and data.split_states("valid")
    return data


def embeddings(data: EbmDataset, *, separated: bool, dim: int = 12) -> tuple[torch.Tensor, dict[str, int]]:
    """Per text: noise, plus a ±3 offset along one axis by label when `separated`, else all crowded along one
    direction (a collapse: the labels share one tight cluster)."""
    texts = data.texts()
    positive = {s.text for s in data.states if s.positive}
    generator = torch.Generator().manual_seed(0)
    noise = torch.randn(len(texts), dim, generator=generator)
    if separated:
        sign = torch.tensor([1.0 if t in positive else -1.0 for t in texts])
        table = noise
        table[:, 0] += 3 * sign
    else:
        table = 0.01 * noise
        table[:, 0] += torch.randn(len(texts), generator=generator)
    return table, {t: i for i, t in enumerate(texts)}


def test_embedding_health_tells_separated_embeddings_from_a_collapse() -> None:
    data = dataset()
    good = embedding_health(data, *embeddings(data, separated=True))
    bad = embedding_health(data, *embeddings(data, separated=False))
    assert good.centroid_l2 > 4 and bad.centroid_l2 < 0.5
    assert good.linear_probe is not None and bad.linear_probe is not None
    assert good.linear_probe > 0.9 and bad.linear_probe < good.linear_probe
    assert good.sibling_l2 is not None and bad.sibling_l2 is not None and good.sibling_l2 > 3 * bad.sibling_l2
    assert good.siblings > 0
    assert bad.effective_rank < 1.5 < good.effective_rank  # the collapse crowds its variance into one direction
    assert bad.spectrum[0] > 0.95 > good.spectrum[0]
    assert all(a >= b for a, b in zip(good.spectrum, good.spectrum[1:], strict=False))
    assert sum(good.spectrum) <= 1 + 1e-6 and len(good.spectrum) == 12
    assert good.norm_gap is not None
    assert set(good.by_depth) == {"1", "2"}  # the depths of proved_tree's non-root states
    for depth in good.by_depth.values():
        assert depth.states > 0 and depth.effective_rank is not None
    assert good.by_depth["1"].centroid_l2 is not None and good.by_depth["1"].centroid_l2 > 4


def test_the_joint_pipeline_runs_the_three_configurations_at_the_same_budgets() -> None:
    cfg = PipelineConfig(start="best")
    plain = build_iteration(cfg, "runs", 1, joint=False)
    assert not [n for n in plain.names if n.startswith("study")]
    assert not [n for n in build_iteration(cfg, "runs", 0, joint=True).names if n.startswith("study")]
    it = build_iteration(cfg, "runs", 1, joint=True)
    for name in ("study-sft-a", "study-export-a", "study-ebm-a", "study-ebm-b", "study-eval-a", "study-eval-b",
                 "study-metrics"):
        assert name in it.names
        assert set(it.stage(name).after) <= set(it.names[:it.names.index(name)])
    at = Layout("runs")
    sft_a = it.stage("study-sft-a").argv
    assert sft_a[sft_a.index("--set") + 1] == "sft.joint=false" and "--start" in sft_a  # as the iteration's SFT
    assert it.stage("study-sft-a").after == ("start",)
    base = build_iteration(PipelineConfig(), "runs", 1, joint=True).stage("study-sft-a")  # the default start
    assert "--start" not in base.argv and "--init" not in base.argv and base.after == ()  # the base, as its SFT
    assert it.stage("study-sft-a").argv[:8] == it.stage("sft").argv[:8]  # the same data and trajectories
    assert "--joint" not in it.stage("study-ebm-b").argv and at.export(1) in it.stage("study-ebm-b").argv
    main = it.stage("eval").argv
    common = main[:main.index("--ebm")]
    for name, (policy, ebm) in study_configurations(at, 1).items():
        stage = it.stage({"A": "study-eval-a", "B": "study-eval-b", "C": "eval"}[name])
        assert stage.argv[:len(common)] == common  # same benchmark, budgets and pass@N
        assert stage.policy_model == policy and stage.ebm == ebm
        assert study_evals(at, 1)[name] in stage.outputs
    assert {"study-metrics", "study-eval-a", "study-eval-b"} <= set(it.stage("report").after)


def test_configurations_with_the_same_policy_next_to_each_other_share_one_encoder() -> None:
    assert policy_runs({"A": ("p0", "e0"), "B": ("p1", "e1"), "C": ("p1", "e2")}) == [("p0", ["A"]),
                                                                                      ("p1", ["B", "C"])]
    assert policy_runs({"A": ("p1", "e0"), "B": ("p0", "e1"), "C": ("p1", "e2")}) == [  # one model at a time
        ("p1", ["A"]), ("p0", ["B"]), ("p1", ["C"])]
    assert policy_runs({}) == []


def study_metrics(data: EbmDataset) -> StudyMetrics:
    configs = {}
    for name, separated, rank1 in (("A", False, 0.3), ("B", True, 0.5), ("C", True, 0.8)):
        table, rows = embeddings(data, separated=separated)
        value = ValueHealth(split="valid", groups=10, rank1=rank1, rank1_by_depth={"1": rank1, "2": rank1 / 2},
                            energy_gap=rank1 * 2, infonce=1.0, temperature=1.0, sibling_split="valid",
                            sibling_decisions=4, sibling_accuracy=rank1, sibling_chance=0.5,
                            sibling_by_depth={"1": rank1})
        configs[name] = ConfigurationMetrics(
            name=name, description=name, policy=f"p{name}", ebm=f"e{name}", encoder_digest="d",
            embedding=embedding_health(data, table, rows), value=value,
            projection=[(0.1 * k, -0.1 * k, 1 + k % 4, k % 2 == 0) for k in range(12)], explained=[0.5, 0.2])
    return StudyMetrics(iteration=1, trajectories=["t"], configurations=configs, written_at=datetime.now(UTC))


def test_the_report_shows_a_b_c_side_by_side_with_attributions_and_plots(tmp_path: Path, store: Store) -> None:
    root = str(tmp_path / "run")
    at = Layout(root)
    publish(at.eval_result(0), {"world_0"}, store=store)
    publish(at.eval_result(1), {"world_0", "world_1", "world_2"}, ebm="e", iteration=1, store=store)  # C
    evals = study_evals(at, 1)
    publish(evals["A"], {"world_0"}, ebm="e", iteration=1, store=store)
    publish(evals["B"], {"world_0", "world_1"}, ebm="e", iteration=1, store=store)
    metrics = study_metrics(dataset())
    # Before the study stage finished there is no section; once it did, every configuration's eval must exist.
    assert build_report(root, 1, PipelineConfig(), store=store).joint_study is None
    with store.staged_output(at.study(1, "metrics"), "joint-study") as folder:
        (folder / STUDY_FILE).write_text(metrics.model_dump_json(), encoding="utf-8")
    report = build_report(root, 1, PipelineConfig(), store=store)
    study = report.joint_study
    assert study is not None and list(study.configurations) == ["A", "B", "C"] and study.budget == 50
    rates = {name: entry.solve[-1].rate for name, entry in study.configurations.items()}
    assert rates == {"A": 0.1, "B": 0.2, "C": 0.3}
    deltas = {a.name: a.deltas for a in study.attributions}
    assert deltas["A→B"]["solve_rate"] == pytest.approx(0.1) and deltas["A→C"]["rank1"] == pytest.approx(0.5)
    a, b = (metrics.configurations[n].embedding for n in "AB")
    assert deltas["A→B"]["centroid_l2"] == pytest.approx(b.centroid_l2 - a.centroid_l2, abs=1e-5)
    assert deltas["B→C"]["centroid_l2"] == pytest.approx(0.0)
    markdown = render_markdown(report)
    assert "## Joint training study (iteration 1)" in markdown and "| centroid L2 |" in markdown
    assert "| rank-1 |" in markdown and "Sibling L2 by depth" in markdown
    assert ("| solve rate | 1/10 (10.0%, 1.8–40.4%) | 2/10 (20.0%, 5.7–51.0%) | 3/10 (30.0%, 10.8–60.3%) | +10.0 pt |"
            in markdown)  # n and the interval, like every rate of the report
    out = tmp_path / "report"
    write_report(report, out)
    saved = json.loads((out / "report.json").read_text())["joint_study"]
    assert set(saved["configurations"]) == {"A", "B", "C"}
    assert [x["name"] for x in saved["attributions"]] == ["A→B", "B→C", "A→C"]
    for plot in ("joint_spectrum.png", "joint_projection.png"):
        assert (out / plot).stat().st_size > 1000
    Path(evals["B"]).unlink()
    with pytest.raises(InputError, match="configuration B's eval"):
        build_report(root, 1, PipelineConfig(), store=store)


def test_the_argo_iteration_trains_on_the_gpu_pool_and_fans_the_three_evals_out() -> None:
    from burnqed.cluster.render import render_templates
    from burnqed.config import Config
    from tests.cluster.conftest import WORKFLOWS, by_name, template

    cfg = Config.model_validate({"sft": {"joint": True, "processes": 2, "batch_size": 4, "joint_groups": 8}})
    doc = by_name(render_templates(cfg, [], WORKFLOWS), "burnqed-iteration-1")
    for name in ("sft", "study-sft-a"):
        assert template(doc, name)["container"]["resources"]["limits"]["nvidia.com/gpu"] == "2"
    for name in ("study-export-a", "study-ebm-a", "study-ebm-b", "study-metrics"):
        assert template(doc, name)["container"]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert template(doc, "study-metrics")["container"]["args"][0] == "joint-study"
    dag = {task["name"]: task for t in doc["spec"]["templates"] if "dag" in t for task in t["dag"]["tasks"]}
    depends = {name: task.get("depends", "") for name, task in dag.items()}
    # The three evals wait only for their own policy and value model, so Argo runs them side by side.
    assert "study-ebm-a" in depends["study-eval-a"] and "train-ebm" not in depends["study-eval-a"]
    assert "study-ebm-b" in depends["study-eval-b"] and "study-eval-a" not in depends["study-eval-b"]
    assert "study-eval" not in depends["eval"]
    for name in ("study-eval-a", "study-eval-b"):
        sidecars = template(doc, name).get("sidecars") or template(doc, name).get("initContainers") or []
        assert sidecars, f"{name} has no SGLang sidecar"
    assert all(n in depends["report"] for n in ("study-metrics", "study-eval-a", "study-eval-b"))

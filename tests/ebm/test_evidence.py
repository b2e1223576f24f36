"""The value model's evidence: rank accuracy among siblings by depth and calibration, on hand-built trajectories
with known answers (burnqed/ebm/metrics.py, sampling.py's decisions, train.py's `value_evidence`), and the
report's section that shows them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from burnqed.config import PipelineConfig
from burnqed.ebm.formats import (
    Calibration,
    CalibrationBin,
    DepthEnergy,
    DepthRank,
    SiblingRank,
    ValueEvidence,
)
from burnqed.ebm.metrics import calibration, energy_by_depth, sibling_rank
from burnqed.ebm.sampling import Decision, build_dataset
from burnqed.layout import Layout
from burnqed.records.results import Edge
from burnqed.report.build import build_report
from burnqed.report.markdown import render_markdown
from burnqed.stages.ebm_fit import fit_head, goal_energies, state_energies, value_evidence
from burnqed.storage import Store
from burnqed.trajectory.schema import theorems_to_table
from tests.doubles.ebm_doubles import proved_tree, unproved_tree
from tests.ebm.test_train import config, synthetic
from tests.eval.test_report import publish


def table(*theorems: tuple[str, list[Edge]]) -> object:
    return theorems_to_table("run", 0, list(theorems))


def index(data: object, text: str) -> int:
    return next(i for i, s in enumerate(data.states) if s.text == text)  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------------------------- decisions


def test_decisions_are_the_nodes_with_children_on_and_off_the_proof_path() -> None:
    # proved_tree: the root's children 1 (on the path) and 2 (off), node 1's children 4 (on) and 6 (off); node 4
    # only closes the goal (no state). The factory's log-probs are -0.5 × node id.
    data = build_dataset([table(("A", proved_tree()), ("B", unproved_tree()))], valid_fraction=0.0)
    assert [(d.theorem, d.depth, [data.states[c].text for c in d.children], d.on_path, d.logprobs)
            for d in data.decisions] == [
        ("A", 1, ["state 1", "state 2"], (True, False), (-0.5, -1.0)),
        ("A", 2, ["state 4", "state 6"], (True, False), (-2.0, -3.0)),
    ]  # B has no proof: no decision
    assert data.split_decisions("train") == data.decisions and data.split_decisions("valid") == []


def test_rows_without_log_probs_give_decisions_without_a_policy_pick() -> None:
    tab = table(("A", proved_tree()))
    data = build_dataset([tab.drop_columns(["logprob"])], valid_fraction=0.0)  # type: ignore[attr-defined]
    assert [d.logprobs for d in data.decisions] == [None, None]
    energy = {c: float(c) for d in data.decisions for c in d.children}
    rank = sibling_rank(data.decisions, energy)
    assert rank is not None and rank.policy is None and rank.by_depth["1"].policy is None


# ----------------------------------------------------------------------------------------- sibling rank


def test_sibling_rank_counts_the_lowest_energy_on_the_path_by_depth_against_the_policy_and_chance() -> None:
    decisions = [
        Decision("A", 1, (0, 1), (True, False), (-1.0, -0.5)),  # energy right, policy wrong
        Decision("A", 2, (2, 3, 4), (False, True, False), (-0.1, -0.2, -0.3)),  # energy wrong, policy wrong
        Decision("B", 1, (5, 6), (False, True), (-2.0, -0.1)),  # energy tied (half), policy right
        Decision("C", 5, (7, 8, 9, 10), (True, True, False, False), (-1.0, -3.0, -2.0, -4.0)),  # both right
    ]
    energy = {0: -1.0, 1: 2.0, 2: 0.0, 3: 1.0, 4: 5.0, 5: 0.3, 6: 0.3, 7: 4.0, 8: -4.0, 9: 0.0, 10: 1.0}
    rank = sibling_rank(decisions, energy)
    assert rank == SiblingRank(
        decisions=4, accuracy=round((1 + 0 + 0.5 + 1) / 4, 6), chance=round((1 / 2 + 1 / 3 + 1 / 2 + 2 / 4) / 4, 6),
        policy=0.5,
        by_depth={"1": DepthRank(decisions=2, accuracy=0.75, chance=0.5, policy=0.5),
                  "2": DepthRank(decisions=1, accuracy=0.0, chance=round(1 / 3, 6), policy=0.0),
                  "4+": DepthRank(decisions=1, accuracy=1.0, chance=0.5, policy=1.0)})
    assert sibling_rank([], energy) is None


# ------------------------------------------------------------------------------------------- calibration


def test_calibration_bins_by_energy_and_pairs_states_within_a_theorem() -> None:
    positives = {0, 1, 2, 5}
    scored = [("A", float(e), e in positives) for e in range(10)]
    scored += [("B", 100.0, True), ("B", 50.0, False)]  # B's positive has the higher energy: one lost pair
    cal = calibration(scored, bins=4)
    assert cal.states == 12 and cal.positives == 5
    # A: 24 pairs, lost only by 5 against 3 and 4 → 22 won; B: 1 pair, lost. Never A against B.
    assert cal.auc == round(22 / 25, 6)
    assert cal.bins == [
        CalibrationBin(low=0.0, high=2.0, states=3, positives=3, rate=1.0),
        CalibrationBin(low=3.0, high=5.0, states=3, positives=1, rate=round(1 / 3, 6)),
        CalibrationBin(low=6.0, high=8.0, states=3, positives=0, rate=0.0),
        CalibrationBin(low=9.0, high=100.0, states=3, positives=1, rate=round(1 / 3, 6)),
    ]
    few = calibration([("A", 1.0, True)], bins=5)
    assert len(few.bins) == 1 and few.auc is None
    assert calibration([("A", 1.0, True), ("A", 1.0, False)]).auc == 0.5  # a tie is half a win


def test_energy_by_depth_averages_each_bucket_on_and_off_the_path() -> None:
    scored = [(1, -1.0, True), (1, 0.5, False), (1, 1.5, False), (2, -2.0, True), (5, 0.25, False),
              (4, 0.75, False)]
    assert energy_by_depth(scored) == {
        "1": DepthEnergy(positives=1, negatives=2, positive=-1.0, negative=1.0),
        "2": DepthEnergy(positives=1, negatives=0, positive=-2.0, negative=None),
        "4+": DepthEnergy(positives=0, negatives=2, positive=None, negative=0.5),
    }  # no state at depth 3: no bucket
    assert energy_by_depth([]) == {}


# --------------------------------------------------------------------------------------- the trained head


@pytest.mark.slow
def test_a_trained_head_ranks_the_held_out_siblings_it_separates() -> None:
    data, embeddings, rows = synthetic()
    fit = fit_head(data, embeddings, rows, config())
    evidence = value_evidence(fit.head, data, embeddings, rows)
    assert evidence is not None and evidence.split == "valid"
    ranking = evidence.siblings
    assert ranking.decisions == len(data.split_decisions("valid")) == 2 * len(
        [t for t in data.theorems.values() if t.split == "valid" and t.name.startswith("t")])
    assert ranking.chance == 0.5 and ranking.policy == 1.0  # the factory's log-probs favour the lower node id
    assert ranking.accuracy >= 0.9 and set(ranking.by_depth) == {"1", "2"}
    # The same figure from the energies themselves.
    energy = state_energies(fit.head, data, embeddings, rows, data.split_states("valid"))
    hits = [min(zip((energy[c] for c in d.children), d.on_path, strict=True))[1]
            for d in data.split_decisions("valid")]
    assert ranking.accuracy == pytest.approx(sum(hits) / len(hits), abs=1e-6)
    assert evidence.calibration.states == len(data.split_states("valid"))
    assert evidence.calibration.auc is not None and evidence.calibration.auc >= 0.9
    assert evidence.calibration.bins[0].rate > evidence.calibration.bins[-1].rate
    # The energy by depth: each state's energy less its goal's own, averaged per bucket on the path and off it.
    valid = [t.name for t in data.theorems.values() if t.split == "valid"]
    goal = goal_energies(fit.head, data, embeddings, rows, valid)
    on_path = [energy[i] - goal[data.states[i].theorem] for i in data.split_states("valid")
               if data.states[i].positive and data.states[i].depth == 1]
    assert set(evidence.by_depth) == {"1", "2"}
    assert evidence.by_depth["1"].positives == len(on_path)
    assert evidence.by_depth["1"].positive == pytest.approx(sum(on_path) / len(on_path), abs=1e-5)
    assert all(row.positive is not None and row.negative is not None and row.positive < row.negative
               for row in evidence.by_depth.values())  # the head separates them at every depth


def test_without_a_decision_there_is_no_evidence() -> None:
    data = build_dataset([table(("B", unproved_tree()))], valid_fraction=0.0)
    texts = data.texts()
    embeddings = torch.zeros(len(texts), 4)
    from burnqed.ebm.head import GoalConditionedEnergyHead, head_spec

    head = GoalConditionedEnergyHead(head_spec(config(hidden_dims=[8]), 4))
    assert value_evidence(head, data, embeddings, {t: i for i, t in enumerate(texts)}) is None


# --------------------------------------------------------------------------------------------- the report


def test_the_report_shows_the_evidence_of_each_value_model(tmp_path: Path, store: Store) -> None:
    root = f"file://{tmp_path}"
    evidence = ValueEvidence(
        split="valid",
        siblings=SiblingRank(decisions=40, accuracy=0.625, chance=0.4, policy=0.55,
                             by_depth={"1": DepthRank(decisions=30, accuracy=0.7, chance=0.4, policy=0.6),
                                       "2": DepthRank(decisions=10, accuracy=0.4, chance=0.4, policy=None)}),
        calibration=Calibration(states=100, positives=30, auc=0.71, bins=[
            CalibrationBin(low=-2.0, high=0.0, states=50, positives=25, rate=0.5),
            CalibrationBin(low=0.1, high=3.0, states=50, positives=5, rate=0.1)]),
        by_depth={"1": DepthEnergy(positives=20, negatives=30, positive=-0.5, negative=0.25),
                  "4+": DepthEnergy(positives=0, negatives=10, positive=None, negative=1.0)},
    )
    with store.staged_output(Layout(root).ebm(1), "train-ebm") as folder:
        (folder / "metrics.json").write_text(json.dumps({"steps": 5, "evidence": evidence.model_dump(mode="json")}))
    publish(Layout(root).eval_result(1), {"world_0"}, iteration=1, store=store)  # report needs an eval result
    report = build_report(root, 1, PipelineConfig(), store=store)
    assert report.iterations[1].ebm_evidence == evidence and report.iterations[0].ebm_evidence is None
    text = render_markdown(report)
    assert "## Value model: does it pick the proof path?" in text
    assert ("| 1 | valid | 40 | 62.5% | 55.0% | 40.0% | 1: 70% / 60% (30); 2: 40% / – (10) | 0.710 | 50% → 10% "
            "| 1: -0.50 / +0.25; 4+: – / +1.00 |" in text)
    # metrics written before the energy by depth was recorded still load, and show a dash there
    older = evidence.model_dump(mode="json")
    del older["by_depth"]
    assert ValueEvidence.model_validate(older).by_depth == {}


def test_a_metrics_file_without_evidence_shows_no_section(tmp_path: Path, store: Store) -> None:
    root = f"file://{tmp_path}"
    with store.staged_output(Layout(root).ebm(1), "train-ebm") as folder:
        (folder / "metrics.json").write_text(json.dumps({"steps": 5, "evidence": {"split": "nowhere"}}))
    publish(Layout(root).eval_result(1), {"world_0"}, iteration=1, store=store)  # report needs an eval result
    report = build_report(root, 1, PipelineConfig(), store=store)
    assert report.iterations[1].ebm_evidence is None
    assert "does it pick the proof path" not in render_markdown(report)

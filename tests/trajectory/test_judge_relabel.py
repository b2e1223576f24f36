"""A merge's refused searches read directly (`stages.judge_merge`): a refusal belongs to its input prefix, run and
theorem only (`ShardVerdicts.refused_in`), and only those rows are relabelled as an unproved theorem's (`relabel`).
Exact values where the mutation run (scripts/mutation.py, docs/results.md) found no test reading them."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa

from burnqed.records.results import TheoremResult
from burnqed.stages.judge_merge import ShardVerdicts, relabel
from burnqed.trajectory.schema import PartManifest


def manifest(run_id: str, *names: str) -> PartManifest:
    return PartManifest(part=0, data="p.parquet", rows=0, theorems=[TheoremResult(name=n, proved=True) for n in names],
                        run_id=run_id, iteration=0, written_at=datetime(2026, 11, 29, tzinfo=UTC))


def test_a_refusal_belongs_to_its_prefix_its_run_and_its_theorem_only() -> None:
    refused = TheoremResult(name="a", proved=False)
    other = TheoremResult(name="b", proved=False)
    verdicts = ShardVerdicts(refused={("s1", "r1", "a"): refused, ("s2", "r1", "b"): other})
    assert verdicts.refused_in("s1", manifest("r1", "a", "b")) == {("r1", "a"): refused}
    assert verdicts.refused_in("s1", manifest("r2", "a", "b")) == {}
    assert verdicts.refused_in("s2", manifest("r1", "a")) == {}
    assert verdicts.refused_in("s3", manifest("r1", "a", "b")) == {}


def test_only_the_refused_searches_rows_are_relabelled_as_an_unproved_theorems() -> None:
    table = pa.table({
        "run_id": ["r1", "r1", "r1", "r2"], "theorem": ["a", "a", "b", "a"],
        "outcome": ["ok", "error", "ok", "ok"], "label": ["positive", "negative", "positive", "positive"],
        "on_proof_path": [True, False, True, True], "proof_complete": [True, False, True, True]})
    after = relabel(table, {("r1", "a"): TheoremResult(name="a", proved=False)}).to_pydict()
    assert (after["label"], after["on_proof_path"], after["proof_complete"]) == (
        ["unknown", "negative", "positive", "positive"], [False, False, True, True], [False, False, True, True])
    assert after["outcome"] == ["ok", "error", "ok", "ok"]

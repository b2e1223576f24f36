"""A trajectory written by an older burnqed still reads: tests/fixtures/trajectory-v1 holds a step and a whole search
written before the schema recorded repairs (version 1). Rows read with today's columns (the repair columns at their
defaults), results with today's fields, a merge copies the parts as they are (beside a part of today's version),
SFT finds its positives and proof examples and no repair example (nothing is inferred from a version-1 row's text),
and the summary reads it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from burnqed.sft.examples import read_positives, read_proof_examples
from burnqed.stages.merge import merge_trajectories
from burnqed.stages.summary import summarize
from burnqed.storage import Store
from burnqed.trajectory.reader import committed_parts, read_edges, read_results
from burnqed.trajectory.schema import COLUMNS, SCHEMA_VERSION
from tests.trajectory.factories import simple_theorem, write_trajectory

FIXTURES = Path(__file__).parents[1] / "fixtures" / "trajectory-v1"


@pytest.fixture
def old(tmp_path: Path) -> Path:
    """A copy of the fixture (readers never write, but a merge's output goes beside it)."""
    target = tmp_path / "v1"
    shutil.copytree(FIXTURES, target)
    return target


def test_version_1_parts_read_with_todays_columns(old: Path, store: Store) -> None:
    for name in ("step", "whole"):
        (manifest,) = committed_parts(str(old / name), store=store)
        assert manifest.schema_version == 1
    rows = read_edges(str(old / "whole"), store=store)
    assert tuple(rows.column_names) == COLUMNS
    assert rows.column("revision").to_pylist() == [0, 0]
    assert rows.column("revises").to_pylist() == [None, None]
    assert rows.column("feedback").to_pylist() == [None, None]
    assert rows.column("outcome").to_pylist() == ["error", "closed"]
    some = read_edges(str(old / "step"), ["tactic", "revision", "outcome"], store=store)
    assert some.column_names == ["tactic", "revision", "outcome"]
    assert some.column("tactic").to_pylist() == ["intro hx", "linarith", "field_simp", "nlinarith [sq_nonneg (x - 1)]"]
    assert some.column("revision").to_pylist() == [0, 0, 0, 0]
    (result,) = read_results(str(old / "whole"), store=store)
    assert result.proved and (result.repaired, result.revisions, result.revision_at_proof) == (0, 0, None)


def test_a_merge_keeps_each_parts_version(old: Path, tmp_path: Path, store: Store) -> None:
    new = f"file://{tmp_path}/new"
    write_trajectory(new, [simple_theorem("other", proved=True)], run_id="fixture-step", store=store)
    out = str(tmp_path / "merged")
    report = merge_trajectories([str(old / "step"), new], out, store=store)
    assert (report.parts, report.theorems) == (2, 2)
    assert [m.schema_version for m in committed_parts(out, store=store)] == [1, SCHEMA_VERSION]
    assert read_edges(out, ["revision"], store=store).num_rows == 4 + 2


def test_training_and_the_summary_read_an_old_trajectory(old: Path, store: Store) -> None:
    uris = [str(old / "step"), str(old / "whole")]
    positives = read_positives(uris, store=store)
    assert sorted(p.tactic for p in positives) == ["field_simp", "intro hx", "nlinarith [sq_nonneg (x - 1)]"]
    examples = read_proof_examples(uris, store=store)
    assert {e.variant for e in examples} == {"whole", "proof"}  # no repair example: version 1 kept no feedback
    summary = summarize(str(old / "whole"), store=store)
    assert (summary.theorems, summary.proved, summary.edges) == (1, 1, 2)

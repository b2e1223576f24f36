"""`burnqed search` into a trajectory prefix that holds a run: `--resume` continues or reuses only the run made with
the same inputs (theorems, settings, models: `_INPUTS.json`), refuses any other naming the first difference, and
`--force` searches again from nothing (docs/pipeline.md, "Reused or refused")."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from burnqed.config import load_config
from burnqed.data.index import bundled_index_path, load_local_theorem_index
from burnqed.provenance import INPUTS_NAME, when
from burnqed.records.theorem import TheoremIndex
from burnqed.runner.reuse import search_inputs
from burnqed.storage import Store
from burnqed.trajectory.reader import read_marker, read_results
from tests.processes import cli
from tests.trajectory.factories import simple_theorem, write_trajectory


def burnqed(*args: str) -> subprocess.CompletedProcess[str]:
    return cli(*args, env={"BURNQED_HOME": None})


@pytest.fixture
def index(tmp_path: Path) -> tuple[Path, TheoremIndex]:
    """Two bundled theorems in an index file."""
    full = load_local_theorem_index(bundled_index_path("test"))
    index = TheoremIndex(name="two", theorems=full.theorems[:2])
    path = tmp_path / "two.json"
    path.write_text(index.model_dump_json(), encoding="utf-8")
    return path, index


def searched(prefix: Path, index: TheoremIndex, store: Store, *sets: str, finish: bool = True,
             record: bool = True) -> None:
    """A search of `index` into `prefix`, finished or interrupted after its first theorem, recording what it is made
    from as `burnqed search --set SETS` does (nothing, with `record` False: an older burnqed's)."""
    theorems = [simple_theorem(t.name, 2) for t in index.theorems]
    write_trajectory(str(prefix), theorems if finish else theorems[:1], every=1, finish=finish, store=store)
    if record:
        made = search_inputs(load_config(sets=sets), store, index, shard=None, iteration=0, ebm=None)
        (prefix / INPUTS_NAME).write_text(made.model_dump_json(), encoding="utf-8")


def test_resume_reuses_a_finished_search_made_with_the_same_inputs_and_refuses_another(
    tmp_path: Path, store: Store, index: tuple[Path, TheoremIndex]
) -> None:
    path, theorems = index
    prefix = tmp_path / "shard-0"
    searched(prefix, theorems, store)
    marker = read_marker(str(prefix), store=store)
    assert marker is not None
    same = burnqed("search", "--theorems", str(path), "--output", str(prefix), "--resume")
    assert same.returncode == 0, same.stderr
    assert same.stdout == f"reusing {prefix} (finished {when(marker.written_at)}, same inputs); --force redoes it\n"
    hotter = burnqed("search", "--theorems", str(path), "--output", str(prefix), "--resume",
                     "--set", "policy.temperature=0.5")
    assert hotter.returncode == 2 and hotter.stderr == (
        f"error: {prefix} is a finished search output made with other inputs: policy.temperature was 0.8, now "
        "0.5; --force redoes it, or choose another --output\n")
    path.write_text(TheoremIndex(name="two", theorems=theorems.theorems[:1]).model_dump_json(), encoding="utf-8")
    fewer = burnqed("search", "--theorems", str(path), "--output", str(prefix), "--resume")
    assert fewer.returncode == 2 and "made with other inputs: theorems was 2, now 1;" in fewer.stderr
    again = burnqed("search", "--theorems", str(path), "--output", str(prefix))  # no --resume: nothing is reused
    assert again.returncode == 2 and again.stderr == (
        f"error: output {prefix} holds a finished search: pass --resume to reuse it (when made with the same "
        "inputs), --force to search again from nothing, or choose another --output\n")


def test_resume_refuses_to_continue_an_interrupted_search_made_with_other_inputs(
    tmp_path: Path, store: Store, index: tuple[Path, TheoremIndex]
) -> None:
    path, theorems = index
    prefix = tmp_path / "shard-0"
    searched(prefix, theorems, store, "search.max_nodes=7", finish=False)
    refused = burnqed("search", "--theorems", str(path), "--output", str(prefix), "--resume", "--shard", "0/1")
    assert refused.returncode == 2 and refused.stderr == (
        f"error: {prefix} holds an interrupted search made with other inputs: --shard was unset, now '0/1'; resume "
        "with its settings, or --force searches again from nothing\n")
    assert [r.name for r in read_results(str(prefix), store=store)] == [theorems.theorems[0].name]  # untouched


def test_a_search_finished_by_an_older_burnqed_is_reused_saying_its_inputs_were_not_recorded(
    tmp_path: Path, store: Store, index: tuple[Path, TheoremIndex]
) -> None:
    path, theorems = index
    prefix = tmp_path / "shard-0"
    searched(prefix, theorems, store, record=False)
    done = burnqed("search", "--theorems", str(path), "--output", str(prefix), "--resume")
    assert done.returncode == 0 and done.stdout.startswith(f"reusing {prefix} (finished ")
    assert "made by an older burnqed: its inputs were not recorded, so they could not be compared" in done.stdout


@pytest.mark.slow  # a real search of two theorems (the tiny model, minilean)
def test_force_searches_again_from_nothing(tmp_path: Path, store: Store, index: tuple[Path, TheoremIndex],
                                           tiny_model_dir: Path) -> None:
    path, theorems = index
    prefix = tmp_path / "shard-0"
    searched(prefix, theorems, store)
    (prefix / "_inflight").mkdir()
    (prefix / "_inflight" / "x.json").write_text("{}")  # a hybrid search's checkpoint: burnqed's, deleted too
    forced = burnqed("search", "--theorems", str(path), "--output", str(prefix), "--force",
                     "--set", "policy.temperature=0.5", "--set", f"policy.model={tiny_model_dir}",
                     "--set", "lean.workers=1", "--set", "search.max_nodes=2")
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.startswith("searched 2 theorems (0 already done)")
    marker = read_marker(str(prefix), store=store)
    assert marker is not None and marker.run_id != "run" and marker.theorems == 2  # a new run, not the old one's
    recorded = json.loads((prefix / INPUTS_NAME).read_text(encoding="utf-8"))
    assert recorded["settings"]["policy.temperature"] == 0.5
    assert not (prefix / "_inflight" / "x.json").exists()

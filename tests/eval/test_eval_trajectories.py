"""An eval keeps its trajectories beside its result unless told not to (`R.json` → `R.trajectories`), so that every
eval can be resumed and `burnqed show` can draw its searches; `--force` starts them over (`--no-trajectories`, which
keeps none: tests/eval/test_run.py)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from burnqed.commands.outputs import restart_trajectory_prefix
from burnqed.errors import InputError
from burnqed.layout import trajectories_beside
from burnqed.provenance import IDENTITY_NAME
from burnqed.storage import Store
from burnqed.storage.place_lease import LEASE_NAME
from burnqed.trajectory.reader import committed_parts, is_complete, read_results
from tests.trajectory.factories import simple_theorem, write_trajectory

# What the commands make of Lean's replies is the subject, not the worker's process: minilean answers in this
# process (tests/conftest.py `minilean_in_process`).
pytestmark = pytest.mark.usefixtures("minilean_in_process")


def test_the_default_prefix_is_named_after_the_result() -> None:
    assert trajectories_beside("runs/iter_0/eval/eval.json") == "runs/iter_0/eval/eval.trajectories"
    assert trajectories_beside("s3://b/r/eval-noebm.json") == "s3://b/r/eval-noebm.trajectories"
    assert trajectories_beside("results/out") == "results/out.trajectories"


def test_force_deletes_only_what_an_eval_wrote_and_keeps_the_lease(tmp_path: Path, store: Store) -> None:
    prefix = tmp_path / "r.trajectories"
    write_trajectory(str(prefix), [simple_theorem("a", proved=True), simple_theorem("b")], every=1, store=store)
    (prefix / LEASE_NAME).write_text("{}")
    (prefix / IDENTITY_NAME).write_text("{}")
    # two parts (data + manifest each), the marker and the eval's identity
    assert restart_trajectory_prefix(store, str(prefix), stage="eval") == 6
    assert sorted(p.name for p in prefix.iterdir()) == [LEASE_NAME]
    write_trajectory(str(prefix), [simple_theorem("a")], store=store)
    (prefix / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match=r"holds 1 file a trajectory prefix does not hold \(notes\.txt\)"):
        restart_trajectory_prefix(store, str(prefix), stage="eval")
    assert is_complete(str(prefix), store=store)  # nothing deleted
    (prefix / "notes.txt").unlink()  # a search's output (no eval identity there) is not an eval's to start over
    with pytest.raises(InputError, match=r"is the output of stage search, not eval: eval writes only to a new"):
        restart_trajectory_prefix(store, str(prefix), stage="eval")
    assert is_complete(str(prefix), store=store)


@pytest.mark.slow  # two evals on the tiny model, the command in this process (`cli`)
def test_an_eval_keeps_its_trajectories_force_starts_them_over_and_show_draws_them(
        tiny_model_dir: Path, tmp_path: Path, store: Store) -> None:
    from tests.processes import cli
    from tests.search.helpers import small_index

    common = ["--theorems", str(small_index(tmp_path, count=2)), "--budgets", "2", "--set",
              f"policy.model={tiny_model_dir}", "--set", "lean.workers=1", "--set", "search.max_nodes=2"]
    out, kept = tmp_path / "r.json", tmp_path / "r.trajectories"
    first = cli("eval", "--output", str(out), *common)
    assert first.returncode == 0, first.stderr
    assert is_complete(str(kept), store=store)
    names = sorted(result.name for result in read_results(str(kept), store=store))
    assert len(names) == 2
    # the show it names (a theorem it evaluated) repeats the --sets it reads (storage settings, pipeline.eval_modes):
    # none of these; pasted as printed, it draws that theorem's search
    printed = first.stdout.splitlines()[-1]
    command = printed.split("`")[1]
    assert printed == f"wrote {out} (trajectories: {kept}; `{command}` draws one theorem's search)"
    program, *arguments = shlex.split(command)
    assert program == "burnqed" and arguments[0] == "show" and arguments[1] in names
    assert arguments[2:] == ["--trajectories", str(kept)]
    pasted = cli(*arguments)
    assert pasted.returncode == 0 and pasted.stdout.startswith(f"{arguments[1]}: "), pasted.stderr
    again = cli("eval", "--output", str(out), "--force", *common)
    assert again.returncode == 0, again.stderr
    assert f"--force: the trajectories under {kept} start over" in again.stderr
    parts = committed_parts(str(kept), store=store)
    assert [part.part for part in parts] == [0, 1]  # one part per theorem, numbered from 0 again: not added to
    shown = cli("show", names[0], "--trajectories", str(kept))
    assert shown.returncode == 0 and shown.stdout.startswith(f"{names[0]}: ")

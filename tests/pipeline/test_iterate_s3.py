"""`burnqed iterate --force` with its run root on S3 (moto), as a user redoes an iteration with another setting: the
iteration 0 the end-to-end tests share (tests/pipeline/test_iterate.py's `iteration_0`), uploaded, is refused with
another `sft.learning_rate` before any stage, then redone by `--force` from SFT on (each later stage's own --force),
the stages before it kept; what the S3 run then holds is the local run's files, each stage's stale files replaced.
(Its `prepare-data` on S3 is tests/data/test_cli.py's, byte for byte against a local one; a whole iteration on S3
step by step is the rehearsal's, tests/cluster/test_rehearsal.py.) It runs beside test_iterate.py under `pytest -n`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from burnqed.storage import Store
from tests.pipeline.iteration import files_under, iterate_env, iterate_forked, iterate_in_process
from tests.processes import stage_commands

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def test_iterate_force_on_s3_with_another_sft_learning_rate_redoes_sft_and_every_stage_after_it(
        iteration_0: Path, iterate_home: Path, s3_root: str, store: Store) -> None:
    local_run = iteration_0 / "run"
    fs, path = store.resolve(s3_root)
    fs.put(str(local_run / "iter_0"), f"{path}/iter_0", recursive=True)  # the shared run stays as it is
    local_files = {name for name in files_under(local_run) if name.startswith("iter_0/")}
    # Without the noise search (its uploaded copy stays, unused): the same `search` command as the main search, 2
    # shards each, redone here by the same code. Each redone shard commits its theorems in one part (search's
    # checkpoint_every, which names no input of the stage): fewer S3 requests, and the copy's many parts past the
    # first must go. The redone SFT trains 10 steps and the search expands 8 nodes a theorem (iteration 0's: 40 and
    # 16): what they make is not compared here, only which stages are redone and which files each then holds.
    env = iterate_env(iterate_home, {"BURNQED_PIPELINE__NOISE_TEMPERATURE": "null",
                                     "BURNQED_SEARCH__CHECKPOINT_EVERY": "100", "BURNQED_SFT__MAX_STEPS": "10",
                                     "BURNQED_SEARCH__MAX_NODES": "8"})
    changed = ("--set", "sft.learning_rate=0.001")
    # Refused without --force, before any stage. (The copy's SFT records the data folder of the shared run, which
    # differs first: a run moved elsewhere is redone from SFT on, like a run with another sft.learning_rate.)
    refused = iterate_in_process(s3_root, 0, env, *changed)
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert refused.stderr.splitlines()[-1].startswith(
        "error: iteration 0: stage sft finished with other inputs than this run gives it: --data was ")
    assert refused.stderr.endswith("; run it as it was made, or --force redoes it and every stage after it\n")
    assert stage_commands(refused.stderr) == []
    kept = {name: store.read_bytes(f"{s3_root}/iter_0/{name}") for name in ("data/theorems.json", "eval-base/eval.json",
                                                                          "data/pairs.parquet")}
    done = iterate_forked(s3_root, 0, env, "--force", *changed)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "prepare-data: done already, skipped" in done.stderr and "eval-base: done already, skipped" in done.stderr
    redone = sorted({args[0] for args in stage_commands(done.stderr) if args[-1] == "--force"})
    assert redone == ["eval", "export", "merge-trajectories", "report", "search", "sft"]
    assert all("--resume" not in args for args in stage_commands(done.stderr))
    assert json.loads(store.read_bytes(f"{s3_root}/iter_0/sft/sft.json"))["learning_rate"] == 0.001
    assert {name: store.read_bytes(f"{s3_root}/iter_0/{name}") for name in kept} == kept
    again = iterate_in_process(s3_root, 0, env, *changed)  # the redone run is this setting's now: nothing to do
    assert again.returncode == 0 and "nothing to do, all stages finished" in again.stdout, again.stderr[-3000:]

    # Each redone stage replaced its output on S3: the files each holds are the ones its redo wrote (the publish
    # deletes the old output's files), and they are the local run's; only the search committed its theorems in
    # other parts (the stopped local run in more, smaller ones) and merged the noise search's too.
    fs.invalidate_cache()
    remote_files = {key.removeprefix(f"{path}/") for key in fs.find(path)}
    for stage in ("data", "sft", "export", "search/shard-0", "search/shard-1", "trajectories", "report"):
        assert f"iter_0/{stage}/_SUCCESS.json" in remote_files, stage
        marker = json.loads(store.read_bytes(f"{s3_root}/iter_0/{stage}/_SUCCESS.json"))
        if "files" in marker:  # a stage's marker lists its files
            listed = set(marker["files"])
        else:  # a trajectory prefix's lists its parts, each a .json and a .parquet, beside its inputs record
            listed = {"_INPUTS.json", *marker["parts"], *(part.removesuffix(".json") + ".parquet"
                                                          for part in marker["parts"])}
        held = {name.removeprefix(f"iter_0/{stage}/") for name in remote_files if name.startswith(f"iter_0/{stage}/")}
        assert held == listed | {"_SUCCESS.json"}, stage
    assert "iter_0/eval/eval.json" in remote_files

    def without_parts(names: set[str]) -> set[str]:
        return {n for n in names if "/search/" not in n and "/trajectories/part-" not in n}

    # and the run root's experiment, recorded by the first run that worked there (the --force one: the refused run
    # wrote nothing), with the setting it was given
    assert without_parts(remote_files) == without_parts(local_files) | {"experiment.json"}
    assert json.loads(store.read_bytes(f"{s3_root}/experiment.json"))["settings"]["sft.learning_rate"] == 0.001
    assert {n for n in remote_files if "/search/" in n and n.endswith("_SUCCESS.json")} == {
        n for n in local_files if "/search/" in n and n.endswith("_SUCCESS.json")}


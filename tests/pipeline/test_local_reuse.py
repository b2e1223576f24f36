"""The local runner and finished stages: one made with the inputs this run gives it is skipped, one made with other
inputs is refused before anything runs, and `--force` redoes it and every stage after it (docs/pipeline.md, "Reused
or refused"). The stages' processes are a stand-in that records its command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnqed.config import load_config
from burnqed.errors import ConfigError
from burnqed.provenance import StageInputs
from burnqed.runner.local import LocalRunner, StageStatus
from burnqed.runner.plan import Iteration, Resource, Stage
from burnqed.runner.requests import ExportRequest, ReportRequest, SearchRequest
from burnqed.runner.reuse import export_inputs, report_inputs
from burnqed.storage import Store


def publish(store: Store, uri: str, stage: str, made_from: StageInputs | None = None) -> None:
    with store.staged_output(uri, stage, made_from=made_from) as folder:
        (folder / "file.txt").write_text("x")


FAKE_PYTHON = """#!/bin/sh
# A stand-in for `python -m burnqed.cli ARGS`: records ARGS, publishes nothing.
shift 2
echo "$*" >> "$RAN_LOG"
"""


@pytest.fixture
def two_stages(tmp_path: Path, store: Store) -> tuple[Iteration, Path, dict[str, str]]:
    """A finished report over an empty root, and an export made from it (a stand-in for any stage after another);
    each recorded with what its command would record."""
    root = f"file://{tmp_path}/run"
    report_out, export_out = f"{root}/report", f"{root}/export"
    cfg = load_config()
    publish(store, report_out, "report", report_inputs(cfg, store, root=root, iteration=0))
    publish(store, export_out, "export", export_inputs(cfg, store, sft=report_out))
    stages = (
        Stage(name="report", summary="report", request=ReportRequest(root=root, iteration=0, output=report_out),
              outputs=(report_out,), inputs=(), resource=Resource.CPU),
        Stage(name="export", summary="export", request=ExportRequest(sft=report_out, output=export_out),
              outputs=(export_out,), inputs=(report_out,), resource=Resource.CPU, after=("report",)),
    )
    script = tmp_path / "fake-python"
    script.write_text(FAKE_PYTHON)
    script.chmod(0o755)
    log = tmp_path / "ran.txt"
    return Iteration(index=0, root=root, stages=stages), log, {"PATH": "/usr/bin:/bin", "RAN_LOG": str(log),
                                                               "FAKE": str(script)}


def test_the_runner_skips_stages_made_with_the_same_inputs(two_stages: tuple[Iteration, Path, dict[str, str]],
                                                           store: Store) -> None:
    iteration, log, environ = two_stages
    lines: list[str] = []
    outcome = LocalRunner(python=environ["FAKE"], environ=environ, echo=lines.append,
                          store=store).run(iteration)
    assert [(run.stage, run.status) for run in outcome.runs] == [("report", StageStatus.SKIPPED),
                                                                 ("export", StageStatus.SKIPPED)]
    assert lines == ["[1/2] report: done already, skipped", "[2/2] export: done already, skipped"]
    assert not log.exists()


def test_the_runner_refuses_a_stage_made_with_other_inputs_and_force_redoes_it_and_every_stage_after_it(
    two_stages: tuple[Iteration, Path, dict[str, str]], store: Store
) -> None:
    iteration, log, environ = two_stages
    changed = ["pipeline.gate_min_rate=0.3"]  # shapes the report, not the export
    with pytest.raises(ConfigError) as refused:
        LocalRunner(python=environ["FAKE"], sets=changed, environ=environ, echo=lambda _: None,
                    store=store).run(iteration)
    assert str(refused.value) == (
        "iteration 0: stage report finished with other inputs than this run gives it: pipeline.gate_min_rate was "
        "0.05, now 0.3; run it as it was made, or --force redoes it and every stage after it")
    assert not log.exists()  # refused before anything ran
    outcome = LocalRunner(python=environ["FAKE"], sets=changed, environ=environ,
                          echo=lambda _: None, store=store,
                          force=True).run(iteration)
    # the export is made from the report, which runs again: it runs again too, though its own inputs are the same now
    assert [(run.stage, run.status) for run in outcome.runs] == [("report", StageStatus.RAN),
                                                                 ("export", StageStatus.RAN)]
    # each through its own --force: without it the command refuses its own finished output (exit 2)
    report, export = (iteration.stage(name) for name in ("report", "export"))
    assert log.read_text().splitlines() == [" ".join([*report.argv, "--force"]), " ".join([*export.argv, "--force"])]


def test_the_runner_skips_an_older_output_saying_its_inputs_were_not_recorded(
    two_stages: tuple[Iteration, Path, dict[str, str]], store: Store
) -> None:
    iteration, log, environ = two_stages
    publish(store, iteration.stage("export").outputs[0], "export")  # no record: an older burnqed's
    lines: list[str] = []
    LocalRunner(python=environ["FAKE"], environ=environ, echo=lines.append, store=store).run(iteration)
    assert lines[1] == "[2/2] export: done already, skipped (made by an older burnqed: its inputs were not recorded)"
    assert not log.exists()


def test_a_finished_stage_whose_inputs_cannot_be_read_now_is_refused(tmp_path: Path, store: Store) -> None:
    prefix, theorems = f"file://{tmp_path}/search", tmp_path / "gone.json"
    store.write_bytes(f"{prefix}/_SUCCESS.json", b"{}")
    stage = Stage(name="search", summary="search", request=SearchRequest(theorems=str(theorems), output=prefix),
                  outputs=(prefix,), inputs=(), resource=Resource.GPU_LEAN)
    with pytest.raises(ConfigError) as refused:
        LocalRunner(environ={}, echo=lambda _: None, store=store).run(Iteration(0,
                    f"file://{tmp_path}", (stage,)))
    assert str(refused.value) == (
        "iteration 0: stage search finished with other inputs than this run gives it: what it is made from cannot be "
        f"read now (theorem index {theorems} does not exist); run it as it was made, or --force redoes it and every "
        "stage after it")


def test_force_redoes_an_interrupted_search_made_with_other_inputs_through_its_own_force(
    tmp_path: Path, store: Store
) -> None:
    """An unfinished search shard holding a run made with other inputs: `search --resume` refuses it ("--force
    searches again from nothing"), so `iterate --force` runs it with --force; one made with the same inputs resumes.
    The stage's process is the stand-in that records its command line."""
    from burnqed.data.index import bundled_index_path
    from burnqed.data.theorems import load_index
    from burnqed.provenance import INPUTS_NAME
    from burnqed.runner.reuse import search_inputs

    prefix, theorems = f"file://{tmp_path}/search", str(bundled_index_path())
    stage = Stage(name="search", summary="search", request=SearchRequest(theorems=theorems, resume=True, output=prefix),
                  outputs=(prefix,), inputs=(), resource=Resource.GPU_LEAN)
    argv = stage.argv  # search --iter 0 --theorems THEOREMS --resume --output PREFIX
    iteration = Iteration(0, f"file://{tmp_path}", (stage,))
    script = tmp_path / "fake-python"
    script.write_text(FAKE_PYTHON)
    script.chmod(0o755)
    log = tmp_path / "ran.txt"
    environ = {"PATH": "/usr/bin:/bin", "RAN_LOG": str(log)}
    for recorded_with, force, expected in (
        (["policy.seed=7"], True, [*argv[:5], *argv[6:], "--force"]),  # other inputs, --force: started over
        (["policy.seed=7"], False, list(argv)),  # without --force: resumed, and the stage refuses in its own words
        ([], True, list(argv)),  # the same inputs: resumed, --force or not
    ):
        cfg = load_config(None, recorded_with, {})
        made = search_inputs(cfg, store, load_index(theorems, None, store=store), shard=None, iteration=0, ebm=None)
        store.write_bytes(f"{prefix}/{INPUTS_NAME}", made.model_dump_json().encode())
        LocalRunner(python=str(script), environ=environ, echo=lambda _: None, store=store,
                    force=force).run(iteration)
        assert log.read_text().splitlines() == [" ".join(expected)]
        log.unlink()

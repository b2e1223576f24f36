"""The local runner records each stage run's wall and CPU time in `iter_i/stages.json` (`layout.StageTimes`), which
the report reads (tests/eval/test_report_contents.py): real processes (the stand-in `burnqed` of
tests/pipeline/test_local.py), a failed run recorded as failed, a re-run adding only what ran again."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from burnqed.layout import Layout, StageTimes
from burnqed.runner.local import LocalRunner
from burnqed.runner.plan import Iteration
from burnqed.storage import Store
from tests.pipeline.test_local import _fake, fake_runner  # noqa: F401  (the fixture, used by name)


@pytest.mark.slow  # four stage processes
def test_every_stage_run_is_recorded_with_its_wall_and_cpu_time(
        tmp_path: Path, store: Store, fake_runner: tuple[Path, Path, dict[str, str]]) -> None:  # noqa: F811
    script, _, environ = fake_runner
    root = f"file://{tmp_path}"
    stages = (_fake(tmp_path, "a", 0.3), _fake(tmp_path, "s", 0.1, after=("a",), shards=2),
              _fake(tmp_path, "broken", 0.1, after=("s",), code=3))
    lines: list[str] = []
    runner = LocalRunner(python=str(script), jobs=1, environ=environ, echo=lines.append, store=store)
    before = datetime.now(UTC)
    assert runner.run(Iteration(index=0, root=root, stages=stages)).failed is not None
    uri = Layout(root).stage_times(0)
    runs = store.read_model(uri, StageTimes, "stage times").runs
    assert [(r.stage, r.shard, r.status, r.exit_code) for r in runs] == [
        ("a", None, "ran", 0), ("s", 0, "ran", 0), ("s", 1, "ran", 0), ("broken", None, "failed", 3)]
    assert runs[0].wall_s >= 0.3 and all(r.cpu_s is not None and r.cpu_s >= 0 for r in runs)
    assert all(before <= r.started_at <= r.finished_at <= datetime.now(UTC) for r in runs)
    # fixed and run again: the finished stages are skipped and not recorded again; the new run is added
    fixed = (*stages[:2], _fake(tmp_path, "broken", 0.1, after=("s",)))
    assert runner.run(Iteration(index=0, root=root, stages=fixed)).failed is None
    again = store.read_model(uri, StageTimes, "stage times").runs
    assert again[:4] == runs and [(r.stage, r.status) for r in again[4:]] == [("broken", "ran")]
    # nothing ran: the file is not touched
    written = Path(tmp_path / "iter_0" / "stages.json").stat().st_mtime_ns
    assert runner.run(Iteration(index=0, root=root, stages=fixed)).ran == []
    assert Path(tmp_path / "iter_0" / "stages.json").stat().st_mtime_ns == written


def test_a_stages_file_that_is_not_the_runners_is_left_alone(
        tmp_path: Path, store: Store, fake_runner: tuple[Path, Path, dict[str, str]]) -> None:  # noqa: F811
    script, _, environ = fake_runner
    theirs = tmp_path / "iter_0" / "stages.json"
    theirs.parent.mkdir()
    theirs.write_text("my notes\n")
    lines: list[str] = []
    runner = LocalRunner(python=str(script), jobs=1, environ=environ, echo=lines.append, store=store)
    assert runner.run(Iteration(index=0, root=f"file://{tmp_path}", stages=(_fake(tmp_path, "a", 0.1),))).failed is None
    assert theirs.read_text() == "my notes\n"
    assert [line for line in lines if line.startswith("warning:")] == [
        f"warning: stage times not recorded: stage times {theirs} is not valid JSON: Expecting value: line 1 column 1 "
        "(char 0)"]

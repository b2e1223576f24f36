"""local.py: stages run as `burnqed` subprocesses in order; finished ones are skipped; a failure stops the
iteration; the user's overrides reach children as env vars that a stage's own --set beats."""

from __future__ import annotations

from pathlib import Path

import pytest

from burnqed.errors import ConfigError
from burnqed.runner.checks import require_earlier
from burnqed.runner.local import LocalRunner, StageStatus, env_for
from burnqed.runner.plan import Iteration, Resource, Stage
from burnqed.runner.requests import OtherRequest, ReportRequest
from burnqed.storage import Store
from tests.processes import forked_stages


def test_env_for_turns_sets_into_env_vars(tmp_path: Path) -> None:
    cfg = tmp_path / "b.toml"
    env = env_for(["lean.workers=2", "policy.model=s3://b/m"], cfg, {"PATH": "/bin"})
    assert env == {"PATH": "/bin", "BURNQED_CONFIG": str(cfg.resolve()), "BURNQED_LEAN__WORKERS": "2",
                   "BURNQED_POLICY__MODEL": "s3://b/m"}
    with pytest.raises(ConfigError, match=r"expected section\.key=value"):
        env_for(["workers"], None, {})


def _report_stage(name: str, root: str, out: str, after: tuple[str, ...] = ()) -> Stage:
    return Stage(name=name, summary=f"write {name}", request=ReportRequest(root=root, iteration=0, output=out),
                 outputs=(out,), inputs=(), resource=Resource.CPU, after=after)


@pytest.mark.slow
def test_runner_runs_in_order_skips_finished_and_stops_at_a_failure(tmp_path: Path, store: Store) -> None:
    from burnqed.layout import Layout
    from tests.eval.test_report import publish

    root = f"file://{tmp_path}/run"
    publish(Layout(root).eval_result(0), {"hand_0"}, store=store)  # report refuses a root without an eval
    first = _report_stage("first", root, f"{root}/a")
    failing = Stage(name="broken", summary="fails",
                    request=OtherRequest(words=("compare", str(tmp_path / "only-one.json"))),
                    outputs=(f"{root}/never.json",), inputs=(), resource=Resource.CPU, after=("first",))
    last = _report_stage("last", root, f"{root}/b", after=("broken",))
    iteration = Iteration(index=0, root=root, stages=(first, failing, last))
    lines: list[str] = []
    runner = LocalRunner(echo=lines.append, store=store)
    with forked_stages():  # the order and the skips are the subject; a spawned stage's process is the next tests'
        outcome = runner.run(iteration)
    assert [(r.stage, r.status) for r in outcome.runs] == [("first", StageStatus.RAN), ("broken", StageStatus.FAILED)]
    assert outcome.failed is not None and outcome.failed.exit_code == 2
    assert store.is_done(f"{root}/a") and not store.is_done(f"{root}/b")
    assert [stage.name for stage, _ in runner.pending(iteration)] == ["broken", "last"]
    # re-run with the broken stage fixed (dropped): the finished stage is skipped, the rest runs
    fixed = Iteration(index=0, root=root, stages=(first, _report_stage("last", root, f"{root}/b")))
    with forked_stages():
        again = runner.run(fixed)
    assert [(r.stage, r.status) for r in again.runs] == [("first", StageStatus.SKIPPED), ("last", StageStatus.RAN)]
    assert runner.run(fixed).ran == []
    assert any("done already, skipped" in line for line in lines)


def test_only_unknown_stage_and_earlier_iterations(store: Store) -> None:
    iteration = Iteration(index=2, root="file:///r", stages=())
    with pytest.raises(ConfigError, match="unknown stage"):
        LocalRunner(store=store).run(iteration, only=["sft"])
    with pytest.raises(ConfigError, match="iteration 1 has not finished"):
        require_earlier(iteration, lambda j: j == 0)
    require_earlier(iteration, lambda j: True)


FAKE_BURNQED = """#!/bin/sh
# A stand-in for `python -m burnqed.cli NAME SECONDS OUTPUT EXIT`: logs its start and end, sleeps, prints a line,
# publishes OUTPUT (a .json file: finished for Store.is_done) when EXIT is 0, and exits EXIT.
shift 2
echo "start $1 OMP=$OMP_NUM_THREADS" >> "$FAKE_LOG"
sleep "$2"
echo "hello from $1"
echo "warning from $1" >&2
if [ "$4" = 0 ]; then echo '{}' > "$3"; fi
echo "end $1" >> "$FAKE_LOG"
exit "$4"
"""


def _fake(tmp_path: Path, name: str, seconds: float, after: tuple[str, ...] = (), code: int = 0,
          shards: int = 1) -> Stage:
    out = str(tmp_path / (f"{name}-{{shard}}.json" if shards > 1 else f"{name}.json"))
    return Stage(name=name, summary=f"fake {name}", request=OtherRequest(words=(
        f"{name}-{{shard}}" if shards > 1 else name, str(seconds), out, str(code))),
                 outputs=(f"file://{out}",), inputs=(), resource=Resource.CPU, after=after, shards=shards)


@pytest.fixture
def fake_runner(tmp_path: Path, store: Store) -> tuple[Path, Path, dict[str, str]]:
    script = tmp_path / "fake-python"
    script.write_text(FAKE_BURNQED)
    script.chmod(0o755)
    log = tmp_path / "log.txt"
    return script, log, {"PATH": "/usr/bin:/bin", "FAKE_LOG": str(log)}


def _events(log: Path) -> list[str]:
    return [" ".join(line.split()[:2]) for line in log.read_text().splitlines()]


def test_ready_stages_run_side_by_side_up_to_jobs_and_dependents_wait(
        tmp_path: Path, store: Store, fake_runner: tuple[Path, Path, dict[str, str]],
        capsys: pytest.CaptureFixture[str]) -> None:
    script, log, environ = fake_runner
    # a: 1 s; b: independent of a, 2 s; c: after a; d: after b and c, two shards (margins for a loaded machine)
    stages = (_fake(tmp_path, "a", 1.0), _fake(tmp_path, "b", 2.0), _fake(tmp_path, "c", 0.1, after=("a",)),
              _fake(tmp_path, "d", 0.1, after=("b", "c"), shards=2))
    iteration = Iteration(index=0, root=f"file://{tmp_path}", stages=stages)
    lines: list[str] = []
    runner = LocalRunner(python=str(script), jobs=2, environ=environ, echo=lines.append,
                         store=store, cpus=2)
    outcome = runner.run(iteration)
    assert outcome.failed is None and len(outcome.ran) == 5
    events = _events(log)
    # a and b start together (in either order: two processes race to the log); c starts when a ends, while b
    # still runs; d's shards only after b and c ended
    assert sorted(events[:2]) == ["start a", "start b"]
    assert events.index("start c") > events.index("end a") and events.index("start c") < events.index("end b")
    assert min(events.index("start d-0"), events.index("start d-1")) > max(events.index("end b"),
                                                                          events.index("end c"))
    assert all(line.endswith("OMP=1") for line in log.read_text().splitlines() if line.startswith("start"))
    assert all(run.cpu_seconds is not None and run.cpu_seconds >= 0 for run in outcome.ran)
    assert any(line.startswith("[2/4] b: finished in") and "(cpu " in line for line in lines)
    out, err = capsys.readouterr()
    assert "[b] hello from b" in out.splitlines() and "[d[1]] warning from d-1" in err.splitlines()
    # one at a time: strictly in the iteration's order, children's output not rewritten
    log.unlink()
    for stage in stages:
        for uri in stage.all_outputs():
            Path(uri.removeprefix("file://")).unlink()
    serial = LocalRunner(python=str(script), jobs=1, environ=environ, echo=lines.append, store=store)
    assert serial.run(iteration).failed is None
    assert _events(log) == ["start a", "end a", "start b", "end b", "start c", "end c", "start d-0", "end d-0",
                            "start d-1", "end d-1"]
    assert "OMP=1" not in log.read_text()  # the caller's environment unchanged


def test_a_single_process_stage_starts_before_the_shards_of_a_fanned_out_one(
        tmp_path: Path, store: Store, fake_runner: tuple[Path, Path, dict[str, str]]) -> None:
    script, log, environ = fake_runner
    # after a: s (two shards) and e (one process), e listed last; with two slots e takes one of the first two
    stages = (_fake(tmp_path, "a", 0.1), _fake(tmp_path, "s", 0.5, after=("a",), shards=2),
              _fake(tmp_path, "e", 0.5, after=("a",)))
    iteration = Iteration(index=0, root=f"file://{tmp_path}", stages=stages)
    runner = LocalRunner(python=str(script), jobs=2, environ=environ, echo=lambda line: None,
                         store=store, cpus=2)
    assert runner.run(iteration).failed is None
    events = _events(log)
    assert events.index("start e") < events.index("start s-1")
    assert events.index("start s-1") > min(events.index("end e"), events.index("end s-0"))


def test_a_failure_stops_its_dependents_lets_the_running_finish_and_a_rerun_skips_them(
        tmp_path: Path, store: Store, fake_runner: tuple[Path, Path, dict[str, str]]) -> None:
    script, log, environ = fake_runner
    broken = _fake(tmp_path, "a", 0.1, code=3)
    stages = (broken, _fake(tmp_path, "b", 1.5), _fake(tmp_path, "c", 0.1, after=("a",)),
              _fake(tmp_path, "e", 0.1))
    iteration = Iteration(index=0, root=f"file://{tmp_path}", stages=stages)
    lines: list[str] = []
    runner = LocalRunner(python=str(script), jobs=2, environ={**environ, "OMP_NUM_THREADS": "7"},
                         echo=lines.append, store=store, cpus=2)
    outcome = runner.run(iteration)
    assert outcome.failed is not None and (outcome.failed.stage, outcome.failed.exit_code) == ("a", 3)
    # b was running when a failed: it finished and is kept; nothing new started (c depends on a; e waited)
    assert [(r.stage, r.status) for r in outcome.runs] == [("a", StageStatus.FAILED), ("b", StageStatus.RAN)]
    assert "start c" not in _events(log) and "start e" not in _events(log)
    assert "OMP=7" in log.read_text()  # the caller's own setting wins
    assert any("a failed (exit code 3)" in line for line in lines)
    fixed = Iteration(index=0, root=f"file://{tmp_path}", stages=(_fake(tmp_path, "a", 0.1), *stages[1:]))
    again = runner.run(fixed)
    assert again.failed is None
    assert sorted((r.stage, r.status) for r in again.runs) == [
        ("a", StageStatus.RAN), ("b", StageStatus.SKIPPED), ("c", StageStatus.RAN), ("e", StageStatus.RAN)]


def test_only_runs_the_named_stages_whatever_they_come_after(
        tmp_path: Path, store: Store, fake_runner: tuple[Path, Path, dict[str, str]]) -> None:
    script, log, environ = fake_runner
    stages = (_fake(tmp_path, "a", 0.1), _fake(tmp_path, "c", 0.1, after=("a",)))
    runner = LocalRunner(python=str(script), jobs=2, environ=environ, echo=lambda line: None,
                         store=store)
    outcome = runner.run(Iteration(index=0, root=f"file://{tmp_path}", stages=stages), only=["c"])
    assert [(r.stage, r.status) for r in outcome.runs] == [("c", StageStatus.RAN)]
    assert _events(log) == ["start c", "end c"]


def test_default_jobs_is_one_per_core_up_to_a_cap() -> None:
    from burnqed.runner.local import MAX_DEFAULT_JOBS, default_jobs

    assert default_jobs(1) == 1 and default_jobs(2) == 2 and default_jobs(64) == MAX_DEFAULT_JOBS


def test_the_stages_without_a_model_do_not_import_torch() -> None:
    """prepare-data, merge-trajectories and report start as fresh processes of `burnqed iterate`: importing torch
    and transformers would cost each several CPU seconds for nothing (the rule: only model stages import them)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import burnqed.cli, burnqed.runner.local, burnqed.runner.plan\n"
        "import burnqed.data.prepare, burnqed.data.data_report, burnqed.lean.guard, burnqed.commands.edges\n"
        "import burnqed.stages.merge, burnqed.report.build\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'trl', 'peft', 'z3') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def test_a_stage_that_refuses_its_input_keeps_exit_2_through_iterate(tmp_path: Path, store: Store) -> None:
    """A stage's exit 2 (bad input or configuration) is the run's too, an `InputError`; any other failure stays a
    `StageFailedError` (exit 1). The stages are a stand-in that exits with the code given."""
    from burnqed.config import load_config
    from burnqed.errors import InputError
    from burnqed.runner.iterate import StageFailedError, run_iterations

    script = tmp_path / "fake-python"
    script.write_text('#!/bin/sh\nexit "$EXIT"\n')
    script.chmod(0o755)
    root, cfg = f"file://{tmp_path}/run", load_config(None, [], {})
    for code, error in (("2", InputError), ("1", StageFailedError)):
        runner = LocalRunner(python=str(script), environ={"PATH": "/usr/bin:/bin", "EXIT": code},
                             jobs=1,
                             echo=lambda line: None, store=store)
        with pytest.raises(error) as failed:
            run_iterations([0], root, None, runner, cfg, store, gates=False, echo=lambda *a, **k: None)
        assert str(failed.value) == (
            "iteration 0: stage prepare-data refused its input (exit code 2, its error above); fix it and re-run the "
            "same command: finished stages are skipped" if code == "2" else
            "iteration 0: stage prepare-data failed (exit code 1); fix the cause and re-run the same command: "
            "finished stages are skipped")


def test_a_stage_input_that_nothing_makes_or_a_stage_left_out_has_not_finished_is_refused_before_any_stage(
    tmp_path: Path, store: Store
) -> None:
    from burnqed.config import load_config
    from burnqed.errors import InputError
    from burnqed.runner.checks import check_stage_inputs
    from burnqed.runner.plan import iteration_of

    root = f"file://{tmp_path}/run"
    # iteration 1 with the rl stage, under a root whose iteration 0 ran without it: SFT would read its rollouts
    for made in ("data", "trajectories", "sft", "eval"):
        Path(tmp_path / "run" / "iter_0" / made).mkdir(parents=True)
    Path(tmp_path / "run" / "iter_0" / "eval" / "eval.json").write_text("{}")
    cfg = load_config(None, ["rl.enabled=true"], {})
    with pytest.raises(InputError) as refused:
        check_stage_inputs(iteration_of(cfg, root, 1), store)
    assert str(refused.value) == (f"iteration 1: stage sft reads {root}/iter_0/rl/trajectories, which does not "
                                  "exist and no stage of the iteration makes")
    check_stage_inputs(iteration_of(load_config(None, [], {}), root, 1), store)  # without rl: all there
    # --only sft before prepare-data finished
    with pytest.raises(InputError) as refused:
        check_stage_inputs(iteration_of(load_config(None, [], {}), root, 0), store, ["sft"])
    assert str(refused.value) == (f"iteration 0: stage sft reads {root}/iter_0/data, which stage prepare-data makes "
                                  "and has not finished: run it too (--only prepare-data, or no --only)")
    check_stage_inputs(iteration_of(load_config(None, [], {}), root, 0), store)  # the whole iteration makes them


@pytest.mark.slow  # a spawned stage process beside the forked ones
def test_a_forked_stage_gives_the_exit_code_output_and_environment_a_spawned_one_gives(tmp_path: Path) -> None:
    """tests/processes.py `forked_stages`, which the end-to-end tests of what the stages make use: the same request
    and environment give the same exit code, stdout and stderr called in the fork as the spawned process of its
    command line; the fork is reaped with its CPU time; a stage given more than one torch thread is spawned."""
    import os
    import sys

    from burnqed.base.signals import PROGRAM_ENV
    from burnqed.runner import local
    from burnqed.runner.requests import StageRequest, StartRequest
    from tests.processes import ForkedStage, forked_stages

    # the program the commands a stage suggests name: its runner's (`signals.program_name`), as the runner sets it
    env = {**os.environ, "OMP_NUM_THREADS": "1", "BURNQED_SEARCH__MAX_NODES": "7", PROGRAM_ENV: "burnqed"}
    root = f"file://{tmp_path}/run"
    commands: tuple[StageRequest, ...] = (
        OtherRequest(words=("config", "show")),
        OtherRequest(words=("config", "show", "--set", "search.max_nodes=zero")),
        ReportRequest(root=root, iteration=0, output=f"{root}/iter_0/report"),  # a root without a run: refused
        StartRequest(root=root, iteration=1, output=f"{root}/iter_1/start.json"))

    def run(request: StageRequest) -> tuple[bool, int, bytes, bytes, float]:
        proc = local.launch_stage(sys.executable, request, env, True)
        assert proc.stdout is not None and proc.stderr is not None
        out, err = proc.stdout.read(), proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        # user + system: a short process's time is split by the ticks that sampled it, so either may be 0 alone
        return (isinstance(proc, ForkedStage), os.waitstatus_to_exitcode(status), out, err,
                usage.ru_utime + usage.ru_stime)

    spawned = [run(request) for request in commands]
    with forked_stages():
        forked = [run(request) for request in commands]
        threads = local.launch_stage(sys.executable, OtherRequest(words=("--help",)), {**env, "OMP_NUM_THREADS": "2"},
                                     False)
        assert not isinstance(threads, ForkedStage) and threads.wait() == 0
    assert [s[0] for s in spawned] == [False] * 4 and [f[0] for f in forked] == [True] * 4
    assert [f[1:4] for f in forked] == [s[1:4] for s in spawned]
    assert forked[0][1] == 0 and b'"max_nodes": 7' in forked[0][2]
    assert forked[1][1] == 2 and b"search.max_nodes" in forked[1][3]
    assert forked[2][1] == forked[3][1] == 2 and b"error: " in forked[2][3] and b"error: " in forked[3][3]
    assert all(f[4] > 0 for f in forked)

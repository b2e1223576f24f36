"""The local runner (docs/pipeline.md, "Running locally"): runs `burnqed.runner.plan`'s stages on this machine,
in dependency order, each as a `burnqed …` subprocess, the command line its request renders: the same command lines the
Argo workflow runs in its pods.

    runner = LocalRunner(config=Path("burnqed.toml"), sets=["lean.workers=2"], jobs=1, store=store)
    outcome = runner.run(build_iteration(cfg.pipeline, root, 0))
    check_before_work(cfg, store)           # runner.checks: a model naming no folder, a missing benchmark: exit 2
    go = run_iterations([0, 1], root, None, runner, cfg, store, gates=True, echo=typer.echo)   # runner.iterate

A stage finished with the inputs this run gives it is skipped (`runner.request_inputs.stage_verdict`, from the request
the stage holds); one finished with other inputs is refused before anything runs (exit 2), or with `force` redone with
every finished stage after it.
The children get the configuration as pods do: `BURNQED_CONFIG`, the `--set`s as `BURNQED_SECTION__KEY`.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import IO, Any, Protocol, TextIO

from burnqed import storage
from burnqed.base.signals import (
    PROGRAM_ENV,
    SUPERVISED_ENV,
    command_text,
    program_name,
    stop_process_group,
)
from burnqed.config import load_config, parse_value
from burnqed.errors import ConfigError, InputError
from burnqed.layout import Layout, StageRun, StageTimes
from burnqed.runner.plan import Iteration, Stage
from burnqed.runner.request_inputs import Verdict, interrupted_difference, stage_verdict
from burnqed.runner.requests import StageRequest


class StageStatus(StrEnum):
    SKIPPED = "skipped"  # already finished
    RAN = "ran"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class ShardRun:
    """What happened to one stage shard."""

    stage: str
    shard: int | None  # None when the stage is not fanned out
    status: StageStatus
    seconds: float
    exit_code: int | None = None
    cpu_seconds: float | None = None  # user + system CPU of its process and the processes it waited for
    started_at: datetime | None = None  # wall clock at start (UTC); None for a skipped stage

    @property
    def label(self) -> str:
        return self.stage if self.shard is None else f"{self.stage}[{self.shard}]"


@dataclass(slots=True)
class IterationRun:
    """The runs of one iteration, in order; `failed` names the first failed shard, if any."""

    index: int
    runs: list[ShardRun] = field(default_factory=list)

    @property
    def failed(self) -> ShardRun | None:
        return next((run for run in self.runs if run.status is StageStatus.FAILED), None)

    @property
    def ran(self) -> list[ShardRun]:
        return [run for run in self.runs if run.status is StageStatus.RAN]


@dataclass(frozen=True, slots=True)
class ShardPlan:
    """What a run does with one stage shard (`LocalRunner.shard_plans`): `finished` when its outputs are all
    finished; `difference` (finished ones) the first difference between what it was made from and what this run
    gives it, None when the same; `recorded` False when a finished output records nothing (an older burnqed's);
    `redo` when a run with --force runs it again through its own --force (its request `redone()`)."""

    stage: Stage
    shard: int
    finished: bool
    difference: str | None = None
    recorded: bool = True
    redo: bool = False

    @property
    def runs(self) -> bool:
        """Whether a run that gets this far starts it: unfinished, or redone."""
        return not self.finished or self.redo

    @property
    def label(self) -> str:
        return self.stage.name if self.stage.shards == 1 else f"{self.stage.name}[{self.shard}]"


def other_inputs_refusal(index: int, shard: ShardPlan) -> str:
    """Why a run without --force refuses iteration `index` (`ConfigError`, exit 2): `shard` finished with other inputs
    than the run gives it. `burnqed plan` prints the same line."""
    return (f"iteration {index}: stage {shard.label} finished with other inputs than this run gives it: "
            f"{shard.difference}; run it as it was made, or --force redoes it and every stage after it")


def _comes_after(stage: Stage, names: set[str], stages: Mapping[str, Stage]) -> bool:
    """True when `stage` comes after one of the stages `names`, directly or not (`stages`: the iteration's, by
    name)."""
    seen: set[str] = set()
    todo = list(stage.after)
    while todo:
        name = todo.pop()
        if name in seen or name not in stages:
            continue
        seen.add(name)
        if name in names:
            return True
        todo.extend(stages[name].after)
    return False


def env_for(sets: Sequence[str], config: Path | None, base: Mapping[str, str]) -> dict[str, str]:
    """The children's environment: `base` + BURNQED_CONFIG + one BURNQED_SECTION__KEY per `--set`."""
    env = dict(base)
    if config is not None:
        env["BURNQED_CONFIG"] = str(config.resolve())
    for item in sets:
        key, sep, raw = item.partition("=")
        parts = key.strip().split(".")
        if not sep or len(parts) < 2 or not all(parts):
            raise ConfigError(f"--set {item!r}: expected section.key=value")
        parse_value(raw)  # JSON or string, as the child will parse it
        env["BURNQED_" + "__".join(part.upper() for part in parts)] = raw
    return env


class StageProcess(Protocol):
    """A started stage's process as the runner uses it (`subprocess.Popen[bytes]` is one): its pid, which is also
    its process group's id, its exit code once reaped, and its output pipes when they were asked for."""

    pid: int
    returncode: int | Any
    stdout: IO[bytes] | None
    stderr: IO[bytes] | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def launch_stage(python: str, request: StageRequest, env: Mapping[str, str], capture: bool) -> StageProcess:
    """Start `python -m burnqed.cli ARGV`, ARGV the command line `request` renders, in a process group of its own
    (`env` its whole environment; `capture`: stdout and stderr to pipes, else inherited). The one place a stage
    process starts, given the request: tests/processes.py `forked_stages` puts a fork of the test's own process here
    that calls the request's command function (`burnqed.cli.main_call`), for the tests whose subject is not the
    process."""
    pipe = subprocess.PIPE if capture else None
    return subprocess.Popen([python, "-m", "burnqed.cli", *request.argv()], env=dict(env), process_group=0,
                            stdout=pipe, stderr=pipe)


@dataclass(slots=True)
class _Running:
    """One stage shard's process while it runs (and the threads that copy its output, when they do)."""

    stage: Stage
    shard: int
    proc: StageProcess
    started: float
    copiers: list[threading.Thread]
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def label(self) -> str:
        return self.stage.name if self.stage.shards == 1 else f"{self.stage.name}[{self.shard}]"


@dataclass(slots=True)
class _Plan:
    """The state of one `LocalRunner.run`: what waits, runs and has finished."""

    iteration: Iteration
    number: dict[str, int]  # stage → its place in the iteration, from 1
    waiting: dict[str, list[int]] = field(default_factory=dict)  # stage → shards not started yet
    unfinished: dict[str, int] = field(default_factory=dict)  # stage → shards not finished yet
    runs: dict[str, list[ShardRun]] = field(default_factory=dict)  # stage → its shards' runs so far
    finished: set[str] = field(default_factory=set)  # finished before or now, or left out by `only`
    running: list[_Running] = field(default_factory=list)
    announced: set[str] = field(default_factory=set)  # stages whose summary line was shown
    redone: set[tuple[str, int]] = field(default_factory=set)  # (stage, shard) finished but redone (`force`)
    failed: bool = False

    def tag(self, stage: str) -> str:
        return f"[{self.number[stage]}/{len(self.number)}]"


def _copy_lines(source: IO[bytes], prefix: str, sink: TextIO) -> None:
    """Copy a child's output to `sink` line by line, each line prefixed (`[stage] ...`), until it closes."""
    for raw in iter(source.readline, b""):
        sink.write(prefix + raw.decode("utf-8", errors="replace").rstrip("\r\n") + "\n")
        sink.flush()
    source.close()


def default_jobs(cpus: int | None = None) -> int:
    """How many stage processes `burnqed iterate` runs at once unless told (`--jobs`): one per core, at most
    MAX_DEFAULT_JOBS (each process holds a model and its Lean workers in memory)."""
    return max(1, min(cpus if cpus is not None else (os.cpu_count() or 1), MAX_DEFAULT_JOBS))


MAX_DEFAULT_JOBS = 4


class LocalRunner:
    """Runs iterations on this machine: up to `jobs` stage processes at once (stages whose `after` stages have all
    finished, and shards of a fanned-out stage), single-process stages before shards (`_start_ready`).

    With `jobs` > 1 each child's stdout and stderr are copied to ours line by line, prefixed with its stage
    (`[search[0]] ...`), and, unless the caller's environment sets it, each child gets `OMP_NUM_THREADS` =
    cores // jobs (at least 1), so that concurrent torch processes do not each spin a thread per core. With
    `jobs` = 1 the children inherit our stdout, stderr and environment unchanged (a progress bar on a terminal)."""

    def __init__(
        self,
        *,
        config: Path | None = None,
        sets: Sequence[str] = (),
        jobs: int = 1,
        python: str = sys.executable,
        environ: Mapping[str, str] | None = None,
        echo: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
        store: storage.Store,
        cpus: int | None = None,
        force: bool = False,
    ) -> None:
        if jobs < 1:
            raise ConfigError(f"--jobs must be ≥ 1, got {jobs}")
        # the commands a stage names for the user start as this process was started (`signals.program_name`)
        self.env = {**env_for(sets, config, os.environ if environ is None else environ), PROGRAM_ENV: program_name()}
        self.settings_env = env_for(sets, config, {})  # what this run gives every stage beyond its command line
        self.jobs = jobs
        self.python = python
        self.echo = echo
        self.store = store  # where this process checks which outputs are finished
        self.force = force  # redo the stages finished with other inputs, and those after them
        self.current: str | None = None  # the stage shard(s) running (named when a signal stops the run)
        # The stages' own stop line would repeat ours: a stage run by this runner exits 143/130 silently.
        self.env[SUPERVISED_ENV] = str(os.getpid())
        if jobs > 1 and "OMP_NUM_THREADS" not in self.env:
            self.env["OMP_NUM_THREADS"] = str(max(1, (cpus or os.cpu_count() or 1) // jobs))

    def pending(self, iteration: Iteration) -> list[tuple[Stage, int]]:
        """The (stage, shard) pairs that are not finished yet, in run order."""
        return [
            (stage, shard)
            for stage in iteration.stages
            for shard in range(stage.shards)
            if not all(self.store.is_done(uri) for uri in stage.outputs_for(shard))
        ]

    def run(self, iteration: Iteration, only: Sequence[str] = (),
            before_start: Callable[[], None] | None = None) -> IterationRun:
        """Run every unfinished stage (or only the named ones) of `iteration`, a stage once every stage it comes
        `after` has finished (a stage left out by `only` counts as finished). After the first failure nothing new
        starts; what is running finishes (a finished stage is kept, a re-run skips it) and the run returns.
        `before_start` is called once the run is judged (nothing refused) and before anything starts."""
        unknown = [name for name in only if name not in iteration.names]
        if unknown:
            raise ConfigError(f"unknown stage(s) {', '.join(unknown)}; stages: {', '.join(iteration.names)}")
        result = IterationRun(iteration.index)
        plan = self._plan(iteration, only, result)
        if before_start is not None:
            before_start()
        try:
            while plan.waiting or plan.running:
                if not plan.failed:
                    self._start_ready(plan)
                for entry in list(plan.running):
                    run = self._reap(entry)
                    if run is not None:
                        plan.running.remove(entry)
                        self.current = ", ".join(r.label for r in plan.running) or None
                        result.runs.append(run)
                        self._record_time(iteration, run)
                        self._finished(plan, run)
                if plan.running:
                    time.sleep(0.1)
        finally:
            for entry in plan.running:  # interrupted: stop the children (TERM, a grace, KILL) and reap them
                stop_process_group(entry.proc)
                for copier in entry.copiers:
                    copier.join(timeout=1.0)
        return result

    def shard_plans(self, iteration: Iteration, only: Sequence[str] = (), *, force: bool | None = None
                    ) -> list[ShardPlan]:
        """What a run of `iteration` (or only of the stages `only` names) does with each stage shard, in run order,
        judged as `run` judges it (`force`: as a run with or without --force; default this runner's): a finished one is
        compared with what this run gives it (`request_inputs.stage_verdict`); with `force` one made with other inputs
        is redone, as is every finished one after a stage that runs, and an unfinished search holding a run made with
        other inputs starts over. `run` refuses a finished one made with other inputs without `force`; `burnqed plan`
        shows them all."""
        force = self.force if force is None else force
        plans: list[ShardPlan] = []
        running: set[str] = set()  # the stages with a shard that runs
        earlier = {s.name: s for s in iteration.stages}
        for stage in iteration.stages:
            if only and stage.name not in only:
                continue
            for k in range(stage.shards):
                if not all(self.store.is_done(u) for u in stage.outputs_for(k)):
                    # its --resume would refuse the interrupted run it holds: redone through its own --force
                    plans.append(ShardPlan(stage, k, finished=False,
                                           redo=force and self._interrupted_elsewise(stage, k)))
                else:
                    verdict = self._verdict(stage, k)
                    redo = force and (verdict.difference is not None or _comes_after(stage, running, earlier))
                    plans.append(ShardPlan(stage, k, finished=True, difference=verdict.difference,
                                           recorded=verdict.recorded, redo=redo))
                if plans[-1].runs:
                    running.add(stage.name)
        return plans

    def _plan(self, iteration: Iteration, only: Sequence[str], result: IterationRun) -> _Plan:
        """What `run` has to do (`shard_plans`): the shards that run, those redone through their own --force
        (their request `redone()`), the finished ones recorded skipped. A finished stage made with other inputs is
        refused without `force` (`ConfigError`, `other_inputs_refusal`) before anything runs."""
        plan = _Plan(iteration, {stage.name: k for k, stage in enumerate(iteration.stages, start=1)})
        skipped: list[ShardPlan] = []
        for shard in self.shard_plans(iteration, only):
            if shard.difference is not None and not self.force:
                raise ConfigError(other_inputs_refusal(iteration.index, shard))
            if not shard.runs:
                skipped.append(shard)
                continue
            plan.waiting.setdefault(shard.stage.name, []).append(shard.shard)
            plan.unfinished[shard.stage.name] = plan.unfinished.get(shard.stage.name, 0) + 1
            plan.runs[shard.stage.name] = []
            if shard.redo:
                plan.redone.add((shard.stage.name, shard.shard))
        for shard in skipped:
            stage, k = shard.stage, shard.shard
            result.runs.append(ShardRun(stage.name, k if stage.shards > 1 else None, StageStatus.SKIPPED, 0.0))
            if stage.name not in plan.waiting and k == stage.shards - 1:
                note = "" if shard.recorded else " (made by an older burnqed: its inputs were not recorded)"
                self.echo(f"{plan.tag(stage.name)} {stage.name}: done already, skipped{note}")
        plan.finished = {name for name in iteration.names if name not in plan.waiting}
        return plan

    def _record_time(self, iteration: Iteration, run: ShardRun) -> None:
        """Add `run` to the iteration's `stages.json` (`layout.StageTimes`, which the report reads): read, extended
        and written whole (one PUT on S3). A file there that is not a stage-times record is left alone, unrecorded."""
        if run.started_at is None:
            return
        uri = Layout(iteration.root).stage_times(iteration.index)
        try:
            times = (self.store.read_model(uri, StageTimes, "stage times") if self.store.exists(uri)
                     else StageTimes(iteration=iteration.index))
        except InputError as exc:
            self.echo(f"warning: stage times not recorded: {exc}")
            return
        times.runs.append(StageRun(stage=run.stage, shard=run.shard, status="ran" if run.status is StageStatus.RAN
                                   else "failed", exit_code=run.exit_code if run.exit_code is not None else -1,
                                   started_at=run.started_at, wall_s=round(run.seconds, 3),
                                   cpu_s=None if run.cpu_seconds is None else round(run.cpu_seconds, 3)))
        self.store.write_bytes(uri, times.model_dump_json(indent=1).encode())

    def _verdict(self, stage: Stage, shard: int) -> Verdict:
        """Whether the finished `shard` of `stage` was made from what this run would give it, computed here from
        its request and the configuration its process would load (file < our environment < its `--set`)."""
        config = self.env.get("BURNQED_CONFIG")
        try:
            return stage_verdict(stage.request_for(shard), lambda sets: load_config(Path(config) if config else None,
                                                                                    sets, self.env), self.store)
        except InputError as exc:  # an input it was made from cannot be read now (gone, damaged)
            return Verdict(f"what it is made from cannot be read now ({exc})")

    def _interrupted_elsewise(self, stage: Stage, shard: int) -> bool:
        """True when the unfinished `shard` of `stage` holds an interrupted run made with other inputs than this run
        gives it (`request_inputs.interrupted_difference`: a search's), which only the stage's --force starts over."""
        config = self.env.get("BURNQED_CONFIG")
        try:
            return interrupted_difference(stage.request_for(shard), lambda sets: load_config(
                Path(config) if config else None, sets, self.env), self.store) is not None
        except InputError:  # what it would be made from cannot be read now: the stage says so itself
            return False

    def _finished(self, plan: _Plan, run: ShardRun) -> None:
        """Account for a shard that has exited: a failure stops new starts; a stage's last shard finishes it."""
        plan.runs[run.stage].append(run)
        if run.status is StageStatus.FAILED:
            self.echo(f"{plan.tag(run.stage)} {run.label} failed (exit code {run.exit_code})")
            plan.failed = True
            plan.waiting.clear()  # let the running ones finish: what they finish is kept
            return
        plan.unfinished[run.stage] -= 1
        runs = plan.runs[run.stage]
        if plan.unfinished[run.stage] == 0 and all(r.status is StageStatus.RAN for r in runs):
            plan.finished.add(run.stage)
            self.echo(f"{plan.tag(run.stage)} {run.stage}: finished in {max(r.seconds for r in runs):.1f}s "
                      f"(cpu {sum(r.cpu_seconds or 0.0 for r in runs):.1f}s)")

    def _start_ready(self, plan: _Plan) -> None:
        """Start shards of ready stages while fewer than `jobs` run: single-process stages first, then the shards
        of fanned-out stages, each in the iteration's order. A single process cannot be split, so it starts as
        soon as it can; shards are smaller, interchangeable pieces that fill the slots around it. (In the
        iteration's order alone, eval waited behind both searches' shards and ran last, alone on one core.)"""
        for stage in sorted(plan.iteration.stages, key=lambda stage: stage.shards > 1):
            if len(plan.running) >= self.jobs:
                return
            shards = plan.waiting.get(stage.name)
            if not shards or not all(name in plan.finished for name in stage.after if name in plan.number):
                continue
            if stage.name not in plan.announced:
                plan.announced.add(stage.name)
                self.echo(f"{plan.tag(stage.name)} {stage.name}: {stage.summary}")
            while shards and len(plan.running) < self.jobs:
                shard = shards.pop(0)
                plan.running.append(self._start(stage, shard, redo=(stage.name, shard) in plan.redone))
            if not shards:
                del plan.waiting[stage.name]
            self.current = ", ".join(r.label for r in plan.running)

    def stage_line(self, argv: Sequence[str]) -> str:
        """A stage's command as a shell runs it again: the settings this run hands every stage through the
        environment (its --config and --sets, the run root's experiment), then the program as invoked and `argv`,
        each word quoted where it needs it. Without the settings, a pasted stage would run on the defaults."""
        settings = "".join(f"{key}={shlex.quote(value)} " for key, value in self.settings_env.items())
        return settings + command_text(argv)

    def _start(self, stage: Stage, shard: int, *, redo: bool = False) -> _Running:
        request = stage.request_for(shard).redone() if redo else stage.request_for(shard)
        self.echo("  $ " + self.stage_line(request.argv()))
        # A process group of its own: a stop reaches the stage and whatever it started, and nothing else; the
        # stage checkpoints on SIGTERM (search commits its finished theorems) and the next run resumes it.
        # `burnqed.base.signals.stop_on_signals` around the runner turns our own SIGTERM or Ctrl-C into `run`'s
        # `finally`.
        if self.jobs == 1:
            return _Running(stage, shard, launch_stage(self.python, request, self.env, False), time.monotonic(), [])
        proc = launch_stage(self.python, request, self.env, True)
        entry = _Running(stage, shard, proc, time.monotonic(), [])
        prefix = f"[{entry.label}] "
        for source, sink in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr)):
            assert source is not None
            copier = threading.Thread(target=_copy_lines, args=(source, prefix, sink), daemon=True,
                                      name=f"output of {entry.label}")
            copier.start()
            entry.copiers.append(copier)
        return entry

    def _reap(self, entry: _Running) -> ShardRun | None:
        """The shard's run once its process has exited (reaped here, with its CPU time), else None."""
        try:
            pid, status, usage = os.wait4(entry.proc.pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere (Popen's own bookkeeping): no CPU figure
            pid, usage = entry.proc.pid, None
            status = None
        if pid == 0:
            return None
        if status is not None:
            entry.proc.returncode = os.waitstatus_to_exitcode(status)
        code = entry.proc.wait()
        for copier in entry.copiers:  # the last lines before its status line
            copier.join()
        cpu = None if usage is None else usage.ru_utime + usage.ru_stime
        return ShardRun(entry.stage.name, entry.shard if entry.stage.shards > 1 else None,
                        StageStatus.RAN if code == 0 else StageStatus.FAILED, time.monotonic() - entry.started,
                        code, cpu, entry.started_at)

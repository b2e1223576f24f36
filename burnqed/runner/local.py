"""The local runner (docs/pipeline.md, "Running locally"): runs `burnqed.runner.plan`'s stages on this machine,
in dependency order, each as a `burnqed …` subprocess — the same command lines the Argo workflow runs in its pods.

    runner = LocalRunner(config=Path("burnqed.toml"), sets=["lean.workers=2"], jobs=1, store=store)
    outcome = runner.run(build_iteration(cfg.pipeline, root, 0))
    check_before_work(cfg, store)           # a model naming no folder, a missing benchmark: exit 2 before any stage
    go = run_iterations([0, 1], root, None, runner, cfg, store, gates=True, echo=typer.echo)   # iterate, run-all

A stage finished with the inputs this run gives it is skipped (`runner.reuse.stage_verdict`, from the request the stage
holds); one finished with
other inputs is refused before anything runs (exit 2), or with `force` redone with every finished stage after it.
The children get the configuration as pods do: `BURNQED_CONFIG`, the `--set`s as `BURNQED_SECTION__KEY`.
"""

from __future__ import annotations

import functools
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol, TextIO

from burnqed import storage
from burnqed.base.signals import (
    PROGRAM_ENV,
    SUPERVISED_ENV,
    command_text,
    program_name,
    signal_name,
    stop_process_group,
)
from burnqed.config import load_config, parse_value
from burnqed.errors import BurnqedError, ConfigError, InputError, StoppedError
from burnqed.layout import Layout, StageRun, StageTimes, trajectories_beside
from burnqed.runner.plan import Iteration, Stage
from burnqed.runner.requests import EvalRequest
from burnqed.runner.reuse import Verdict, interrupted_difference, stage_verdict

if TYPE_CHECKING:
    from burnqed.config import Config
    from burnqed.report.document import Report

STOPPED_CODES = (128 + signal.SIGTERM, 128 + signal.SIGINT)  # a stage's exit after it saved its work on a signal


class Echo(Protocol):
    """Where `run_iterations` says what it does (`typer.echo`: stdout, or stderr with `err=True`)."""

    def __call__(self, message: str, *, err: bool = False) -> Any: ...


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
    `redo` when a run with --force runs it again through its own --force (`redo_argv`)."""

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


class StageFailedError(BurnqedError):
    """A stage's command exited with an error; its own message is above it on stderr."""


class StageInputError(InputError):
    """A stage's command refused its input or configuration (exit 2; its own message is above it on stderr): the
    run exits 2 too (docs/errors.md), not 1 as for a failure of the machinery."""


INPUT_EXIT_CODE = 2  # a command's exit on bad input or configuration (`commands.kit.reports_errors`)


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


def redo_argv(argv: Sequence[str]) -> list[str]:
    """A finished stage's command line redone (`iterate --force`): with the stage's own `--force`, without `--resume`
    (a redo starts over; a search or eval would otherwise continue the trajectories of the run it replaces)."""
    return [*(word for word in argv if word not in ("--resume", "--force")), "--force"]


class StageProcess(Protocol):
    """A started stage's process as the runner uses it (`subprocess.Popen[bytes]` is one): its pid, which is also
    its process group's id, its exit code once reaped, and its output pipes when they were asked for."""

    pid: int
    returncode: int | Any
    stdout: IO[bytes] | None
    stderr: IO[bytes] | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def launch_stage(python: str, argv: Sequence[str], env: Mapping[str, str], capture: bool) -> StageProcess:
    """Start `python -m burnqed.cli ARGV` in a process group of its own (`env` its whole environment; `capture`:
    stdout and stderr to pipes, else inherited). The one place a stage process starts: tests/processes.py
    `forked_stages` puts a fork of the test's own process here, for the tests whose subject is not the process."""
    pipe = subprocess.PIPE if capture else None
    return subprocess.Popen([python, "-m", "burnqed.cli", *argv], env=dict(env), process_group=0, stdout=pipe,
                            stderr=pipe)


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
        judged as `run` judges it (`force`: as a run with or without --force; default this runner's): a finished
        one is compared with what this run gives it (`reuse.stage_verdict`); with `force` one made with other inputs
        is redone, as is every finished one after a stage that runs, and an unfinished search holding a run made
        with other inputs starts over. `run` refuses a finished one made with other inputs without `force`;
        `burnqed plan` shows them all."""
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
        (`redo_argv`), the finished ones recorded skipped. A finished stage made with other inputs is refused without
        `force` (`ConfigError`, `other_inputs_refusal`) before anything runs."""
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
        gives it (`reuse.interrupted_difference`: a search's), which only the stage's --force starts over."""
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
        argv = redo_argv(stage.argv_for(shard)) if redo else stage.argv_for(shard)
        self.echo("  $ " + self.stage_line(argv))
        # A process group of its own: a stop reaches the stage and whatever it started, and nothing else; the
        # stage checkpoints on SIGTERM (search commits its finished theorems) and the next run resumes it.
        # `burnqed.base.signals.stop_on_signals` around the runner turns our own SIGTERM or Ctrl-C into `run`'s
        # `finally`.
        if self.jobs == 1:
            return _Running(stage, shard, launch_stage(self.python, argv, self.env, False), time.monotonic(), [])
        proc = launch_stage(self.python, argv, self.env, True)
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


def check_models(cfg: Config, store: storage.Store) -> None:
    """`ModelInputError` (exit 2) when a model the run's stages load names no model folder: `sft.base_model` (SFT
    fine-tunes it, every export merges into it) and, with the local policy backend, `policy.model` (eval-base
    evaluates it); `--model` sets both. A local path is checked as every command checks it
    (`policy.modelpath.ensure_model`: the folder it likely meant); a remote one for its config.json, downloading
    nothing. Unset: the tiny embedded model, built by the first stage that needs it."""
    from burnqed.errors import ModelInputError
    from burnqed.policy.modelpath import ensure_model

    paths = [cfg.sft.base_model, cfg.policy.model if cfg.policy.backend == "local" else None]
    for path in dict.fromkeys(path for path in paths if path is not None):
        if storage.is_remote(path):
            if not store.exists(storage.join(path, "config.json")):
                raise ModelInputError(f"model folder {path} holds no config.json: it is not a model folder")
        else:
            ensure_model(path, store=store)


def _eval_trajectories(request: EvalRequest, output: str) -> str:
    """Where the eval `request` writing `output` keeps its trajectories: its --trajectories-out, else beside
    `output`."""
    return request.trajectories_out or trajectories_beside(output)


def check_stage_inputs(iteration: Iteration, store: storage.Store, only: Sequence[str] = ()) -> None:
    """`InputError` (exit 2) before the iteration's first stage when a stage it runs (or only those `only` names)
    reads a file or folder that no stage of the iteration makes and that does not exist (an earlier iteration's
    rollouts, the configured theorems), or that a stage left out by `only` makes and has not finished. (An eval
    makes its trajectories beside its result.)"""
    makers = {made: stage for stage in iteration.stages for uri in stage.all_outputs()
              for made in (uri, *((_eval_trajectories(stage.request, uri),) if isinstance(stage.request, EvalRequest)
                                  else ()))}
    for stage in iteration.stages:
        if only and stage.name not in only:
            continue
        for uri in stage.inputs:
            maker = makers.get(uri)
            if maker is None and not store.exists(uri):
                raise InputError(f"iteration {iteration.index}: stage {stage.name} reads {uri}, which does not "
                                 "exist and no stage of the iteration makes")
            if maker is not None and only and maker.name not in only and not store.is_done(uri):
                raise InputError(f"iteration {iteration.index}: stage {stage.name} reads {uri}, which stage "
                                 f"{maker.name} makes and has not finished: run it too (--only {maker.name}, or "
                                 "no --only)")


def check_before_work(cfg: Config, store: storage.Store) -> None:
    """Refuse, once and before any stage starts, what a stage of the run would refuse only when it comes, or what
    would train on the benchmark (`InputError`, exit 2): a model that names no model folder (`check_models`: --model,
    sft.base_model, policy.model), a `pipeline.benchmark` that is missing or holds no theorem
    (prepare-data decontaminates the training data against it and every eval evaluates it; the first eval comes
    after SFT and search), and a `pipeline.search_theorems` index that is missing or restates a theorem of that
    benchmark (search reads it as it is, and SFT trains on what search proves there)."""
    from burnqed.data.decontaminate import Twins
    from burnqed.data.theorems import load_setting_theorems, pipeline_benchmark

    check_models(cfg, store)
    if cfg.pipeline.benchmark is None and cfg.pipeline.search_theorems is None:
        return
    benchmark = pipeline_benchmark(cfg.pipeline.benchmark, cfg.data.world_seed, store=store,
                                   world_sketches=cfg.data.world_sketches)
    if cfg.pipeline.search_theorems is None:
        return
    searched = load_setting_theorems(cfg.pipeline.search_theorems, "pipeline.search_theorems", store=store)
    twins = Twins([benchmark])
    overlaps = [overlap for theorem in searched.theorems if (overlap := twins.overlap(theorem, searched.name))]
    if overlaps:
        shown = "; ".join(f"{o.training} restates {o.benchmark}" for o in overlaps[:5])
        more = f"; and {len(overlaps) - 5} more" if len(overlaps) > 5 else ""
        raise InputError(f"pipeline.search_theorems {cfg.pipeline.search_theorems}: {len(overlaps)} of its "
                         f"{len(searched.theorems)} theorems restate a theorem of the benchmark {benchmark.name} "
                         f"({shown}{more}); search would find their proofs and SFT train on them: remove them from "
                         "the index, or leave pipeline.search_theorems unset (the prepared data, decontaminated)")


def require_earlier(iteration: Iteration, earlier_done: Callable[[int], bool], carry: Sequence[str] = ()) -> None:
    """Refuse to start iteration i before iterations 0..i-1 finished (their outputs are its inputs), naming the
    command that runs the first unfinished one with the options `carry` (the run's --root, --model, --config and
    --sets, as given: `commands.kit.carried`)."""
    for j in range(iteration.index):
        if not earlier_done(j):
            command = command_text(["iterate", "--iter", str(j), *carry])
            raise ConfigError(f"iteration {j} has not finished under {iteration.root}: run `{command}` first")


def require_in_order(iters: Sequence[int], root: str, earlier_done: Callable[[int], bool],
                     carry: Sequence[str] = ()) -> None:
    """`require_earlier` for every iteration of `iters` (increasing) before any of them runs: each one's earlier
    iterations must be finished or among `iters` before it (`run-all --iters 0,2` is refused at once for 1, not after
    iteration 0 ran). No iteration is planned for it: an unfinished one is named at once, however large `iters`."""
    requested = set(iters)
    for i in iters:
        require_earlier(Iteration(index=i, root=root, stages=()), lambda j: j in requested or earlier_done(j), carry)


def check_iteration(iteration: Iteration, store: storage.Store, earlier_done: Callable[[int], bool],
                    only: Sequence[str] = (), carry: Sequence[str] = ()) -> None:
    """What `run_iterations` refuses of `iteration` before its first stage, in its order: an earlier iteration not
    finished (`require_earlier`, `earlier_done` telling which are; `ConfigError`), then an input that no stage makes
    and that does not exist (`check_stage_inputs`; `InputError`). `burnqed plan` prints the same line."""
    require_earlier(iteration, earlier_done, carry)
    check_stage_inputs(iteration, store, only)


def base_model_warning(iteration: Iteration, cfg: Config) -> str | None:
    """One line when the iteration's eval-base would evaluate another model as "the untrained base" than the one its
    SFT starts from, else None. Read from the plan: eval-base evaluates its `--model` (the pipeline passes
    sft.base_model when that is set), else policy.model, else the tiny embedded model; SFT starts from
    sft.base_model, else the tiny embedded model. `burnqed iterate`, `run-all` and `plan` print it before any work."""
    from burnqed.errors import InputError
    from burnqed.policy.modelpath import default_model_dir

    stage = next((stage for stage in iteration.stages if stage.name == "eval-base"), None)
    if stage is None:
        return None
    given = stage.request.model if isinstance(stage.request, EvalRequest) else None
    evaluated, why = (given, "its --model") if given is not None else (cfg.policy.model, "policy.model")
    trained = cfg.sft.base_model
    if evaluated == trained:
        return None
    if trained is None and evaluated is not None and "://" not in evaluated:
        try:
            if Path(os.path.abspath(os.path.expanduser(evaluated))) == default_model_dir():
                return None  # the tiny embedded model's own folder, named
        except InputError:  # no home for the tiny model: it cannot be that folder
            pass
    tiny = "the tiny embedded model"
    fix = f"; to train from {evaluated}, set sft.base_model={evaluated}" if evaluated is not None else ""
    return (f"warning: eval-base evaluates {evaluated or tiny} ({why}) as the untrained base, but SFT starts from "
            f"{trained or tiny} (sft.base_model{'' if trained else ' is unset'}): the report's base → iteration 0 "
            f"would compare two different models{fix}")


def run_iterations(iters: Sequence[int], run_root: str, only: Sequence[str] | None, runner: LocalRunner, cfg: Config,
                   store: storage.Store, *, gates: bool, echo: Echo, carry: Sequence[str] = (),
                   before_work: Callable[[], None] | None = None) -> bool:
    """Run the iterations `iters` under `run_root` in order with `runner` (`burnqed iterate`, `run-all`), saying on
    `echo` what each did and where its report is, with the report's headline (`report.build.headline`: solve rates
    with intervals, new and lost theorems, the cost, the gates) unless its report stage printed it in this run.
    Returns False when `gates` is on and a blocking gate failed (the iterations after it are not run), else True.
    `carry`: the options a command it names repeats (`require_earlier`); `before_work` is called once, when the
    first iteration is judged and before its first stage (the run root's experiment record). An iteration whose
    earlier ones are neither finished nor among `iters` before it is refused before any work (`ConfigError`), not
    after those before it ran.
    `StoppedError` when a stage was stopped by a signal, `StageFailedError` when one failed."""
    from burnqed.report.build import headline, load_report
    from burnqed.runner.plan import iteration_of

    @functools.cache
    def finished(j: int) -> bool:
        return not runner.pending(iteration_of(cfg, run_root, j))

    require_in_order(iters, run_root, finished, carry)
    for i in iters:
        iteration = iteration_of(cfg, run_root, i)
        finished.cache_clear()  # the iterations run before this one have finished since
        check_iteration(iteration, store, finished, only or (), carry)
        warning = base_model_warning(iteration, cfg)
        if warning is not None:
            echo(warning, err=True)
        echo(f"iteration {i} under {run_root}: {len(iteration.stages)} stages", err=True)
        outcome = runner.run(iteration, only or (), before_start=before_work if i == iters[0] else None)
        if outcome.failed is not None and outcome.failed.exit_code in STOPPED_CODES:
            signum = (outcome.failed.exit_code or 0) - 128  # the stage was stopped from outside and saved its work
            raise StoppedError(signum, f"stage {outcome.failed.label} stopped by {signal_name(signum)}")
        if outcome.failed is not None and outcome.failed.exit_code == INPUT_EXIT_CODE:
            raise StageInputError(
                f"iteration {i}: stage {outcome.failed.label} refused its input (exit code {INPUT_EXIT_CODE}, its "
                "error above); fix it and re-run the same command: finished stages are skipped")
        if outcome.failed is not None:
            raise StageFailedError(
                f"iteration {i}: stage {outcome.failed.label} failed (exit code {outcome.failed.exit_code}); "
                "fix the cause and re-run the same command: finished stages are skipped"
            )
        ran = len(outcome.ran)
        echo(f"iteration {i}: {'nothing to do, all stages finished' if not ran else f'{ran} stage runs'}")
        report_uri = iteration.stage("report").outputs[0]
        if store.is_done(report_uri):
            report = load_report(report_uri, store=store)
            echo(f"report: {storage.join(report_uri, 'report.md')}")
            if not any(run.stage == "report" for run in outcome.ran):  # a report stage that ran printed it already
                for line in headline(report):
                    echo(line)
            if gates and not report.go:
                left = "" if i == iters[-1] else f"stopping after iteration {i}: "
                echo(f"error: {left}a go/no-go gate of iteration {i} failed (see {report_uri}/report.md; "
                     "--no-gates to go on)", err=True)
                return False
    return True


def drawn_theorem(report: Report) -> str:
    """The theorem a suggested `show` names, so that it runs as printed: the first the report's iteration's main eval
    proved (its proof path drawn), else the first it left unsolved, else `THEOREM` (no eval was read)."""
    proved = [row.theorem for row in report.proofs if row.iteration == report.iteration]
    return next(iter([*proved, *(row.theorem for row in report.unsolved)]), "THEOREM")


# The settings that lower a blocking gate that stopped (`next_line`): what goes on past it, iteration by iteration.
LOWERS = {"baseline": ("pipeline.gate_min_rate=0",),
          "gain": ("pipeline.gate_min_gain=-1", "pipeline.gate_max_lost=null")}


def next_line(report: Report, again: Callable[[Sequence[str]], str], show: str) -> str:
    """The `next:` line after the iterations up to `report`'s: `again(SETS)` (the command running the one after, with
    `--set` each of SETS) only when its go/no-go gates say go; after a STOP by measured gates (the baseline's floor on
    a benchmark the base hardly solves, a gain too small) what the gate measured and the command that goes on with
    the gate lowered (`LOWERS`); after a blocking gate not measured no iteration; `show` (drawing one theorem's
    search) either way."""
    drawn = f"`{show}` draws one theorem's search"
    following = report.iteration + 1
    if report.go and report.decided:
        return f"next: `{again(())}` runs iteration {following}; {drawn}"
    stopped = [gate for gate in report.gates if gate.blocking and not gate.passed]
    if stopped and all(gate.measured and gate.name in LOWERS and (gate.name != "gain" or gate.change is not None)
                       for gate in stopped):
        lowered = [item for gate in stopped for item in LOWERS[gate.name]]
        return (f"next: iteration {report.iteration}'s decision: {report.decision}; to go on anyway, "
                f"`{again(lowered)}` runs iteration {following} with the gate{'s' if len(stopped) > 1 else ''} "
                f"lowered (run-all: --no-gates); see its report.md; {drawn}")
    return (f"next: no iteration {following} (iteration {report.iteration}'s decision: {report.decision}); "
            f"see its report.md; {drawn}")

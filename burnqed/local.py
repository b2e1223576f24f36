"""The local runner: runs `burnqed.pipeline`'s stages on this machine, in dependency order, each as a
`burnqed …` subprocess — the same command lines the Argo workflow runs in its pods.

    runner = LocalRunner(config=Path("burnqed.toml"), sets=["lean.workers=2"], jobs=1, store=store)
    outcome = runner.run(build_iteration(cfg.pipeline, root, 0))
    go = run_iterations([0, 1], root, None, runner, cfg, store, gates=True, echo=typer.echo)   # iterate, run-all

A stage whose outputs are all finished (`Store.is_done`) is skipped, so re-running a finished iteration
does no work and re-running an interrupted one continues it: search shards resume from their committed
parts, SFT from its checkpoints; any other unfinished stage runs again from scratch (stages publish
atomically, so nothing half-written is ever taken for done).

Configuration reaches the children as it reaches pods: the file through `BURNQED_CONFIG`, the user's
`--set` overrides as `BURNQED_SECTION__KEY` variables, so a stage's own `--set` (its model, the noise
temperature) wins over them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from burnqed import storage
from burnqed.config import parse_value
from burnqed.errors import BurnqedError, ConfigError, StoppedError
from burnqed.pipeline import Iteration, Stage
from burnqed.signals import SUPERVISED_ENV, signal_name, stop_process_group

if TYPE_CHECKING:
    from burnqed.config import Config

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


class StageFailedError(BurnqedError):
    """A stage's command exited with an error; its own message is above it on stderr."""


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


def _command(python: str, argv: Sequence[str]) -> list[str]:
    return [python, "-m", "burnqed.cli", *argv]


class LocalRunner:
    """Runs iterations stage by stage; `jobs` shards of a fanned-out stage at once."""

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
    ) -> None:
        if jobs < 1:
            raise ConfigError(f"--jobs must be ≥ 1, got {jobs}")
        self.env = env_for(sets, config, os.environ if environ is None else environ)
        self.jobs = jobs
        self.python = python
        self.echo = echo
        self.store = store  # where this process checks which outputs are finished
        self.current: str | None = None  # the stage shard started last (named when a signal stops the run)
        # The stages' own stop line would repeat ours: a stage run by this runner exits 143/130 silently.
        self.env[SUPERVISED_ENV] = str(os.getpid())

    def pending(self, iteration: Iteration) -> list[tuple[Stage, int]]:
        """The (stage, shard) pairs that are not finished yet, in run order."""
        return [
            (stage, shard)
            for stage in iteration.stages
            for shard in range(stage.shards)
            if not all(self.store.is_done(uri) for uri in stage.outputs_for(shard))
        ]

    def run(self, iteration: Iteration, only: Sequence[str] = ()) -> IterationRun:
        """Run every unfinished stage (or only the named ones) of `iteration`; stops at the first failure."""
        unknown = [name for name in only if name not in iteration.names]
        if unknown:
            raise ConfigError(f"unknown stage(s) {', '.join(unknown)}; stages: {', '.join(iteration.names)}")
        result = IterationRun(iteration.index)
        total = len(iteration.stages)
        for number, stage in enumerate(iteration.stages, start=1):
            if only and stage.name not in only:
                continue
            todo = [k for k in range(stage.shards) if not all(self.store.is_done(u) for u in stage.outputs_for(k))]
            fanned = stage.shards > 1
            for k in range(stage.shards):
                if k not in todo:
                    result.runs.append(ShardRun(stage.name, k if fanned else None, StageStatus.SKIPPED, 0.0))
            if not todo:
                self.echo(f"[{number}/{total}] {stage.name}: done already, skipped")
                continue
            self.echo(f"[{number}/{total}] {stage.name}: {stage.summary}")
            runs = self._run_shards(stage, todo)
            result.runs.extend(runs)
            failed = next((run for run in runs if run.status is StageStatus.FAILED), None)
            if failed is not None:
                self.echo(f"[{number}/{total}] {failed.label} failed (exit code {failed.exit_code})")
                return result
            took = max(run.seconds for run in runs)
            self.echo(f"[{number}/{total}] {stage.name}: finished in {took:.1f}s")
        return result

    def _run_shards(self, stage: Stage, shards: list[int]) -> list[ShardRun]:
        fanned = stage.shards > 1
        queue = list(shards)
        running: list[tuple[int, subprocess.Popen[bytes], float]] = []
        done: list[ShardRun] = []
        try:
            while queue or running:
                while queue and len(running) < self.jobs:
                    shard = queue.pop(0)
                    argv = stage.argv_for(shard)
                    self.echo("  $ burnqed " + " ".join(argv))
                    # A process group of its own: a stop reaches the stage and whatever it started, and nothing
                    # else; the stage checkpoints on SIGTERM (search commits its finished theorems) and the next
                    # run resumes it. `burnqed.signals.stop_on_signals` around the runner turns our own SIGTERM or
                    # Ctrl-C into the `finally` below.
                    proc = subprocess.Popen(_command(self.python, argv), env=self.env, process_group=0)
                    self.current = stage.name if not fanned else f"{stage.name}[{shard}]"
                    running.append((shard, proc, time.monotonic()))
                for entry in list(running):
                    shard, proc, started = entry
                    code = proc.poll()
                    if code is None:
                        continue
                    running.remove(entry)
                    status = StageStatus.RAN if code == 0 else StageStatus.FAILED
                    done.append(ShardRun(stage.name, shard if fanned else None, status,
                                         time.monotonic() - started, code))
                    if status is StageStatus.FAILED:
                        queue.clear()  # let the running shards finish: their committed parts are kept
                if running:
                    time.sleep(0.1)
        finally:
            for _, proc, _ in running:  # interrupted: stop the children (TERM, a grace, KILL) and reap them
                stop_process_group(proc)
        return done


def require_earlier(iteration: Iteration, earlier_done: Callable[[int], bool]) -> None:
    """Refuse to start iteration i before iterations 0..i-1 finished (their outputs are its inputs)."""
    for j in range(iteration.index):
        if not earlier_done(j):
            raise ConfigError(
                f"iteration {j} has not finished under {iteration.root}: run `burnqed iterate --iter {j}` first"
            )


def run_iterations(iters: Sequence[int], run_root: str, only: Sequence[str] | None, runner: LocalRunner, cfg: Config,
                   store: storage.Store, *, gates: bool, echo: Echo) -> bool:
    """Run the iterations `iters` under `run_root` in order with `runner` (`burnqed iterate`, `run-all`), saying on
    `echo` what each did and, once its report is finished, its learning curve and go/no-go gates. Returns False
    when `gates` is on and a blocking gate failed (the iterations after it are not run), else True.
    `StoppedError` when a stage was stopped by a signal, `StageFailedError` when one failed."""
    from burnqed.eval.report import load_report
    from burnqed.pipeline import build_iteration

    def finished(j: int) -> bool:
        return not runner.pending(build_iteration(cfg.pipeline, run_root, j, base_model=cfg.sft.base_model,
                                                  joint=cfg.sft.joint))

    for i in iters:
        iteration = build_iteration(cfg.pipeline, run_root, i, base_model=cfg.sft.base_model, joint=cfg.sft.joint)
        require_earlier(iteration, finished)
        echo(f"iteration {i} under {run_root}: {len(iteration.stages)} stages", err=True)
        outcome = runner.run(iteration, only or ())
        if outcome.failed is not None and outcome.failed.exit_code in STOPPED_CODES:
            signum = (outcome.failed.exit_code or 0) - 128  # the stage was stopped from outside and saved its work
            raise StoppedError(signum, f"stage {outcome.failed.label} stopped by {signal_name(signum)}")
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
            for group in dict.fromkeys(row.group for row in report.learning):
                steps = [row for row in report.learning if row.group == group]
                echo(f"  {group}: " + " → ".join(
                    f"{row.step} {row.rate:.1%}" + ("" if row.gain is None else f" ({100 * row.gain:+.1f})")
                    for row in steps))
            for gate in report.gates:
                mark = "PASS" if gate.passed else ("STOP" if gate.blocking else "WARN")
                echo(f"  {mark} {gate.name}: {gate.detail}")
            if gates and not report.go:
                left = "" if i == iters[-1] else f"stopping after iteration {i}: "
                echo(f"error: {left}a go/no-go gate of iteration {i} failed (see {report_uri}/report.md; "
                     "--no-gates to go on)", err=True)
                return False
    return True

"""The local runner: runs `burnqed.pipeline`'s stages on this machine, in dependency order, each as a
`burnqed …` subprocess — the same command lines the Argo workflow runs in its pods.

    runner = LocalRunner(config=Path("burnqed.toml"), sets=["lean.workers=2"], jobs=1, store=store)
    outcome = runner.run(build_iteration(cfg.pipeline, root, 0))

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
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from burnqed import storage
from burnqed.config import parse_value
from burnqed.errors import BurnqedError, ConfigError
from burnqed.pipeline import Iteration, Stage
from burnqed.signals import SUPERVISED_ENV, stop_process_group


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

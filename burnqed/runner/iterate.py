"""Iterations run one after the other with the local runner (`burnqed iterate`, `run-all`: `run_iterations`),
each refused before its first stage as `runner.checks` says, a stage stopped or failed raised as the run's error,
then the report's headline, the go/no-go gates and the `next:` line (`next_line`).
"""

from __future__ import annotations

import functools
import signal
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from burnqed import storage
from burnqed.base.signals import signal_name
from burnqed.errors import BurnqedError, InputError, StoppedError
from burnqed.runner.checks import base_model_warning, check_iteration, require_in_order
from burnqed.runner.local import LocalRunner

if TYPE_CHECKING:
    from burnqed.config import Config
    from burnqed.report.document import Report

STOPPED_CODES = (128 + signal.SIGTERM, 128 + signal.SIGINT)  # a stage's exit after it saved its work on a signal


class Echo(Protocol):
    """Where `run_iterations` says what it does (`typer.echo`: stdout, or stderr with `err=True`)."""

    def __call__(self, message: str, *, err: bool = False) -> Any: ...


class StageFailedError(BurnqedError):
    """A stage's command exited with an error; its own message is above it on stderr."""


class StageInputError(InputError):
    """A stage's command refused its input or configuration (exit 2; its own message is above it on stderr): the
    run exits 2 too (docs/errors.md), not 1 as for a failure of the machinery."""


INPUT_EXIT_CODE = 2  # a command's exit on bad input or configuration (`commands.kit.reports_errors`)


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

"""`burnqed iterate | run-all | report | plan`: one expert iteration (or several) on this machine (docs/pipeline.md).

    burnqed iterate --iter 0                 # the whole iteration on the embedded defaults, under ./runs
    burnqed iterate --iter 1 --root s3://bucket/run --set lean.workers=8
    burnqed iterate --root runs-mine --model MODEL_DIR   # from your model: its base eval and SFT's base
    burnqed run-all --iters 0-4              # stops at a failed go/no-go gate
    burnqed plan --iter 1                    # the stages and their commands, nothing run
    burnqed report --root runs               # the last iteration's report, to runs/iter_I/report

Stages run as `burnqed …` subprocesses (the same commands the Argo pods run); finished stages are skipped, so a
re-run does no work and an interrupted run continues where it stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NamedTuple

import typer

from burnqed.commands.kit import (
    ConfigOption,
    SetOption,
    VerboseOption,
    already_done,
    carried,
    check_packages,
    configure,
    reports_errors,
    setup,
    show_sets,
    suggestion,
)
from burnqed.commands.vocabulary import OUTPUT_METAVAR, IterationModelOption, model_set
from burnqed.errors import InputError

if TYPE_CHECKING:
    from burnqed.config import Config
    from burnqed.runner.local import LocalRunner
    from burnqed.storage import Store

RootOption = Annotated[
    str | None,
    typer.Option("--root", help="Run root URI (file path or s3://bucket/prefix); default: storage.root.",
                 show_default=False),
]
GATE_STOPPED = 3  # run-all's exit code when a blocking go/no-go gate failed (the stages themselves succeeded)
ForceOption = Annotated[bool, typer.Option(
    "--force", help="Redo the stages that finished with other inputs than this run gives them (another --set, an "
    "earlier stage redone since), and every stage after them; without it such a stage is refused (exit 2). Stages "
    "finished with the same inputs are still skipped. Another model, benchmark or setting of the run root's "
    "experiment is refused even so: a new --root is a new experiment.")]
JobsOption = Annotated[int | None, typer.Option(
    "--jobs", "-j", min=1, show_default=False,
    help="Stage processes run at once on this machine: stages whose earlier stages finished, and search shards "
    "(default: one per core, at most 4).")]


MAX_RUN_ITERATIONS = 1000  # one run-all's --iters: each iteration takes minutes to days, and each is planned first


def _parse_iters(text: str) -> list[int]:
    """`--iters`: a range `A-B` or a list `A,B,…` of increasing iterations from 0 to `MAX_ITERATION`, at most
    `MAX_RUN_ITERATIONS` of them; `InputError` (one line) otherwise, a range's size judged before it is built."""
    from burnqed.commands.prove import MAX_ITERATION

    try:
        if "-" in text:
            first, last = (int(part) for part in text.split("-", 1))
            count = last - first + 1
            iters = list(range(first, last + 1)) if count <= MAX_RUN_ITERATIONS else []
        else:
            iters = [int(part) for part in text.split(",") if part.strip()]
            count = len(iters)
    except ValueError:
        raise InputError(f"--iters {text!r}: expected a range like 0-4 or a list like 0,1,2") from None
    if count > MAX_RUN_ITERATIONS:
        raise InputError(f"--iters {text!r}: {count:,} iterations; one run-all runs at most {MAX_RUN_ITERATIONS:,} "
                         "(e.g. 0-4)")
    if not iters or min(iters) < 0 or iters != sorted(set(iters)):
        raise InputError(f"--iters {text!r}: expected increasing non-negative iterations, e.g. 0-4")
    if iters[-1] > MAX_ITERATION:
        raise InputError(f"--iters {text!r}: {iters[-1]} is past the last iteration a trajectory can record, "
                         f"{MAX_ITERATION:,}")
    return iters


def _local_run(root: str | None, config: Path | None, sets: list[str] | None, *,
               anew: list[str], jobs: int = 1, force: bool = False) -> LocalRun:
    """The configuration, store, run root and local runner of `iterate`, `run-all` and `plan` (`sets`: the user's,
    with --model's), after the checks a run makes before its first stage: the root's URI, the root's experiment
    (`_continued`: what it is not given is taken from the root, a setting of the experiment given otherwise is refused
    with `anew`, the command that starts the new experiment at iteration 0, to which `_new_root` adds a new --root),
    lean.workers against this machine, the models and benchmark (`runner.checks.check_before_work`) and that the root
    can be written (a file there is refused). The runner's stages get the configuration and sets, and storage.root =
    the run root; `plan` judges finished stages with the same runner, as `iterate` would."""
    from burnqed import storage
    from burnqed.base import uris
    from burnqed.base.resources import check_workers_fit
    from burnqed.runner.checks import check_before_work
    from burnqed.runner.local import LocalRunner

    cfg = configure(config, sets)
    uris.check_uri(root or cfg.storage.root, "--root" if root else "storage.root")
    store = storage.Store.from_config(cfg.storage)
    run_root = storage.normalize(root or cfg.storage.root)
    cfg, sets, given = _continued(cfg, config, sets, store, (run_root, root or cfg.storage.root),
                                  [*anew, "--root", _new_root(root or cfg.storage.root, store)])
    if cfg.lean.workers is not None:  # every stage's pool would refuse it: refuse it once, before the first stage
        check_workers_fit(cfg.lean.workers, cfg.lean.verifier_workers, cfg.lean.worker_memory_mb)
    check_before_work(cfg, store)
    store.check_writable(run_root, what="--root" if root else "storage.root", folder=True, key=False)
    runner = LocalRunner(config=config, sets=[*sets, f"storage.root={run_root}"], jobs=jobs, store=store,
                         force=force)
    return LocalRun(cfg, store, run_root, runner, given)


class LocalRun(NamedTuple):
    """What `_local_run` gives `iterate`, `run-all` and `plan`: `given` the settings the command was given (key →
    where from) when the root records no experiment yet (the first command to work there records it), else None."""

    cfg: Config
    store: Store
    run_root: str
    runner: LocalRunner
    given: dict[str, str] | None


def _new_root(root: str, store: Store) -> str:
    """A run root beside `root` (as the user named it) that holds nothing: `ROOT-2`, `ROOT-3`, …"""
    from burnqed import storage

    base = root.rstrip("/")
    k = 2
    while store.exists(storage.normalize(f"{base}-{k}")):
        k += 1
    return f"{base}-{k}"


def under_root(cfg: Config, config: Path | None, sets: list[str] | None, store: Store,
               root: str | None) -> tuple[Config, list[str]]:
    """The configuration and --sets of a command that reads a run under the run root `root` (report, start): the
    root's experiment continued as `iterate` continues it (`_continued`), a setting of the experiment given otherwise
    refused (exit 2)."""
    from burnqed import storage

    cfg, given_sets, _ = _continued(cfg, config, sets, store, (storage.normalize(root or cfg.storage.root),
                                                                root or cfg.storage.root), None)
    return cfg, given_sets


def _continued(cfg: Config, config: Path | None, sets: list[str] | None, store: Store, root: tuple[str, str],
               anew: list[str] | None) -> tuple[Config, list[str], dict[str, str] | None]:
    """The configuration and --sets of a command under the run root `root` (its URI, and as the user named it) that
    continue the root's experiment (`runner.experiment`): the root's value of each recorded setting not given here,
    said on stderr; `InputError` (one line, exit 2) naming each setting of the experiment given otherwise. With no
    record there: the configuration and sets as given, and the settings given (`LocalRun.given`)."""
    import os

    from burnqed.config.loader import given_keys
    from burnqed.layout import Layout
    from burnqed.runner.experiment import differences, read_experiment, refusal, taken_sets

    given = given_keys(config, sets or (), os.environ)
    record = read_experiment(store, Layout(root[0]))
    if record is None:
        return cfg, list(sets or ()), given
    found = differences(record, cfg, given, store)
    taken = taken_sets(record, cfg, given)
    if found:  # the new root's command keeps what the root's experiment has and this command does not change
        keep = [word for item in taken for word in ("--set", item)]
        raise InputError(refusal(root[1], found, None if anew is None else suggestion([*anew, *keep])))
    if not taken:
        return cfg, list(sets or ()), None
    typer.echo(f"{root[1]}: its experiment's settings not given here are the root's ({Layout(root[0]).experiment()}):"
               f" {' '.join(taken)}", err=True)
    sets = [*taken, *(sets or ())]
    return configure(config, sets), sets, None


def _run_iterations(name: str, iters: list[int], root: str | None, only: list[str] | None, jobs: int | None,
                    config: Path | None, given: tuple[str | None, list[str] | None], gates: bool,
                    force: bool) -> None:
    """Run `iters` with the user's --model and --sets (`given`); the commands it names carry them and --root and
    --config (`commands.kit.carried`), and after the last iteration's report it names the next iteration's command and
    `show`'s."""
    from burnqed.base.signals import same_command, stop_on_signals
    from burnqed.commands.vocabulary import require_run_root
    from burnqed.layout import Layout
    from burnqed.runner.iterate import run_iterations
    from burnqed.runner.local import default_jobs
    from burnqed.storage.place_lease import hold_lease

    model, given_sets = given
    carry = carried(root=root, model=model, config=config, sets=given_sets)
    first = ["iterate", "--iter", "0"] if name == "iterate" else ["run-all", "--iters", f"0-{iters[-1]}"]
    cfg, store, run_root, runner, unrecorded = _local_run(
        root, config, model_set(model, given_sets, base=True), jobs=jobs or default_jobs(), force=force,
        anew=[*first, *carried(model=model, config=config, sets=given_sets)])
    if min(iters) >= 1:  # a later iteration of a root that does not exist: a mistyped --root, not a new run
        require_run_root(Layout(run_root), store=store, command=suggestion(["iterate", "--iter", "0"], carry))
    command = same_command()

    def record() -> None:  # the first command to work under the root records its experiment, before its first stage
        if unrecorded is not None:
            from burnqed.runner.experiment import experiment_of, write_experiment

            write_experiment(store, Layout(run_root), experiment_of(cfg, unrecorded, store, command=command))

    def stopped() -> str:
        running = runner.current  # "search[0]", or "search[0], search[1]" when stages run side by side
        return f"burnqed {name}" + (f" (stage{'s' if running and ', ' in running else ''} {running})" if running
                                    else "")

    # One writer per run root (storage.place_lease); SIGTERM/Ctrl-C stop the stage running and keep what finished.
    with stop_on_signals(stopped, kept=f"finished stages and committed search parts under {run_root} are kept",
                         continue_with=command), \
            hold_lease(store, run_root, what="run root", command=command):
        if not run_iterations(iters, run_root, only, runner, cfg, store, gates=gates, echo=typer.echo, carry=carry,
                              before_work=record):
            raise typer.Exit(GATE_STOPPED)
    last = iters[-1]
    if store.is_done(Layout(run_root).report(last)):
        from burnqed.report.build import load_report
        from burnqed.runner.iterate import drawn_theorem, next_line

        def again(lowered: Sequence[str]) -> str:
            sets = [part for item in lowered for part in ("--set", item)]
            return suggestion(["iterate", "--iter", str(last + 1)], [*carry, *sets])

        report = load_report(Layout(run_root).report(last), store=store)
        show = suggestion(["show", drawn_theorem(report), "--iter", str(last)],
                          carried(root=root, config=config, sets=show_sets(given_sets)))
        typer.echo(next_line(report, again, show))


@reports_errors
def iterate(
    iteration: Annotated[int, typer.Option("--iter", min=0, metavar="I", help="The expert iteration to run (0..I-1 "
                                           "finished under the same root first).")] = 0,
    root: RootOption = None,
    model: IterationModelOption = None,
    only: Annotated[
        list[str] | None, typer.Option("--only", help="Run only this stage (repeatable); see `burnqed plan`.")
    ] = None,
    jobs: JobsOption = None,
    force: ForceOption = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Run nothing: print the iteration's stages and what "
                                          "iterate would do with each, as `burnqed plan` with the same options.")
                       ] = False,
    verbose: VerboseOption = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Run one expert iteration on this machine: data, base eval, SFT, export, EBM, search, merge, eval, report.

    With no configuration it runs on the embedded defaults (minilean as the Lean server, the tiny model, ./runs) in a
    few minutes on 2 cores. Iteration i ≥ 1 needs iterations 0..i-1 finished under the same root. Finished stages
    are skipped when made with the inputs this run gives them, refused otherwise (or redone with --force).
    --dry-run prints the plan instead (`burnqed plan`).
    """
    if dry_run:
        plan(iteration, root, model, config, set_)
        return
    _run_iterations("iterate", [iteration], root, only, jobs, config, (model, set_), gates=False, force=force)


@reports_errors
def run_all(
    iters: Annotated[str, typer.Option("--iters", metavar="I-J", help="Iterations to run: a range, e.g. 0-4, or a "
                                       "list, e.g. 0,1,2.")] = "0-4",
    root: RootOption = None,
    model: IterationModelOption = None,
    gates: Annotated[bool, typer.Option("--gates/--no-gates", help="Stop when a go/no-go gate fails.")] = True,
    jobs: JobsOption = None,
    force: ForceOption = False,
    verbose: VerboseOption = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Run several iterations in order, stopping when a go/no-go gate fails.

    Exit code 3 when a blocking gate failed (after the iteration that failed it; also when it is the last one),
    so a script can tell a no-go from a finished run (0) and a failed stage (1)."""
    _run_iterations("run-all", _parse_iters(iters), root, None, jobs, config, (model, set_), gates=gates,
                    force=force)


@reports_errors
def plan(
    iteration: Annotated[int, typer.Option("--iter", min=0, metavar="I", help="The expert iteration to plan.")] = 0,
    root: RootOption = None,
    model: IterationModelOption = None,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Print an iteration's stages, their commands and what `iterate` with the same options does with each; run
    nothing. `done`: finished with the inputs this run gives it (skipped); `todo`: not finished; `diff`: finished
    with other inputs (the first difference below it; `iterate` refuses the iteration, --force redoes it and every
    stage after it, each marked); the last line says so, or that iterate refuses the iteration for an earlier one
    not finished. Refuses what `iterate` refuses before its first stage (a --model naming no model folder, a --root
    that is a file). Warns first when eval-base would evaluate another model than SFT starts from
    (policy.model set, sft.base_model not)."""
    from burnqed.commands.vocabulary import require_run_root
    from burnqed.errors import BurnqedError
    from burnqed.layout import Layout
    from burnqed.runner.checks import base_model_warning, check_iteration
    from burnqed.runner.local import other_inputs_refusal
    from burnqed.runner.plan import iteration_of

    cfg, store, run_root, runner, _ = _local_run(
        root, config, model_set(model, set_, base=True), force=True,
        anew=["plan", "--iter", "0", *carried(model=model, config=config, sets=set_)])
    iteration_plan = iteration_of(cfg, run_root, iteration)
    warning = base_model_warning(iteration_plan, cfg)
    if warning is not None:
        typer.echo(warning, err=True)
    shards = runner.shard_plans(iteration_plan)  # as `iterate --force` would judge them: which it redoes
    refused = next((shard for shard in shards if shard.difference is not None), None)
    for shard in shards:
        state = "todo" if not shard.finished else "diff" if shard.difference is not None else "done"
        typer.echo(f"{state}  {shard.label:<22} {shard.stage.resource.value:<9} "
                   f"{runner.stage_line(shard.stage.argv_for(shard.shard))}")
        if shard.difference is not None:
            typer.echo(f"      finished with other inputs: {shard.difference}")
        elif shard.redo and not shard.finished:
            typer.echo("      holds an interrupted run made with other inputs: its --resume refuses it, --force "
                       "starts it over")
        elif shard.redo and refused is not None:
            typer.echo("      --force redoes it too: it comes after a stage that runs")
    carry = carried(root=root, model=model, config=config, sets=set_)
    try:  # what iterate refuses first: a root with no run for a later iteration, an earlier iteration not finished,
        # an input nothing makes
        if iteration >= 1:
            require_run_root(Layout(run_root), store=store, command=suggestion(["iterate", "--iter", "0"], carry))
        check_iteration(iteration_plan, store, lambda j: not runner.pending(iteration_of(cfg, run_root, j)),
                        carry=carry)
    except BurnqedError as exc:
        typer.echo(f"iterate refuses: {exc}")
    else:
        if refused is not None:
            typer.echo(f"iterate refuses: {other_inputs_refusal(iteration, refused)}")


@reports_errors
def report(
    iteration: Annotated[int | None, typer.Option(
        "--iter", min=0, metavar="I", show_default=False,
        help="The expert iteration to report on, with all earlier ones. Default: the last under the run root with a "
        "finished eval.")] = None,
    output: Annotated[str | None, typer.Option(
        "--output", "-o", metavar=OUTPUT_METAVAR, show_default=False,
        help="Report folder (path or URI). Default: the run layout's, ROOT/iter_I/report (where `burnqed iterate` "
        "writes it), once iteration I's eval is finished.")] = None,
    root: RootOption = None,
    force: Annotated[bool, typer.Option("--force", help="Write the report again even if OUTPUT is finished (from "
                                        "the same iterations' outputs: reused; from others: refused).")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Write the iteration report (report.md, report.json, plots): solve rates with their intervals across
    iterations and arms, new and lost theorems, the unsolved ones and why, training curves, where search spends and
    proves, what each eval and stage cost, provenance and the go/no-go gates. Prints its headline.

    A finished report made from the same outputs of iterations 0..ITER is reused (its headline is printed after
    "reusing OUTPUT …"); one made from others (an eval redone since, another root) is refused unless --force."""
    from burnqed import storage
    from burnqed.base import uris
    from burnqed.commands.vocabulary import last_evaluated, require_run_root
    from burnqed.layout import Layout
    from burnqed.report.build import build_report, headline, load_report, write_report
    from burnqed.runner.requests import ReportRequest
    from burnqed.runner.reuse import report_inputs

    cfg, store = setup(config, set_)
    uris.check_uri(root or cfg.storage.root, "--root" if root else "storage.root")
    cfg, _ = under_root(cfg, config, set_, store, root)  # its gates are the experiment's when not given
    for need in check_packages("report", cfg):  # the plots alone are optional
        typer.echo(f"warning: {need.why} needs the {need.distribution} package, which is not installed here: the "
                   f"report is written without them (pip install 'burnqed[{need.extra}]')", err=True)
    at = Layout(storage.normalize(root or cfg.storage.root))
    carry = carried(root=root, config=config, sets=set_)
    if iteration is None or output is None:  # else --output is checked first
        require_run_root(at, store=store, command=suggestion(["iterate"], carry))
    if iteration is None:
        iteration = last_evaluated(at, store=store, command=suggestion(["iterate"], carry))
    if output is None:
        output = at.report(iteration)
        if not store.exists(at.eval_result(iteration)):
            # iterate's report stage would take a report written now for its own and skip itself
            raise InputError(f"iteration {iteration}'s eval is not finished ({at.eval_result(iteration)} does not "
                             f"exist): `{suggestion(['iterate', '--iter', str(iteration)], carry)}` writes its report "
                             f"to {output} when it is; give --output to write a report of what there is elsewhere")
    store.check_writable(output, what="--output", folder=True)
    store.check_replaceable(output, "report", what="--output")
    asked = ReportRequest(root=at.root, iteration=iteration, output=output)
    made_from = report_inputs(cfg, store, root=asked.root, iteration=asked.iteration)
    if already_done(store, output, "report", made_from=made_from, force=force):
        typer.echo(f"report: {storage.join(output, 'report.md')}")
        for line in headline(load_report(output, store=store)):
            typer.echo(line)
        return
    from burnqed.report.rl_steps import switched_by_rl

    result = build_report(at.root, iteration, cfg.pipeline, rl=cfg.rl.enabled, rl_switched=switched_by_rl(cfg),
                          store=store)
    with store.staged_output(output, "report", {"go": result.go}, made_from=made_from) as folder:
        write_report(result, folder)
    for note in result.not_compared:
        typer.echo(f"not compared: {note}")
    typer.echo(f"report: {storage.join(output, 'report.md')}")
    for line in headline(result):
        typer.echo(line)

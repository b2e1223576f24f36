"""The `burnqed` command. Thin: parse arguments, load the configuration, call one stage function.

    burnqed lean check --theorems minif2f.json --output report.json --set lean.workers=4
    burnqed config show --set 'lean.command=["repl","Mathlib"]'

Every command takes `--config FILE` (or env BURNQED_CONFIG) and repeated `--set section.key=value`, and `-h`;
`burnqed -v COMMAND` (and `search`, `eval`, `iterate`, `run-all` with `-v`) shows the machinery in progress lines.
Exit codes: 0 done, 1 infrastructure failure (e.g. Lean cannot start), 2 bad input or configuration
(one line on stderr, nothing written; usage errors too), 3 `run-all` stopped by a go/no-go gate,
75 a storage error a retry can cure (burnqed.errors.TransientStorageError), 128 + N stopped by signal N.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Callable
from typing import Annotated, NoReturn

import typer

from burnqed import __version__
from burnqed.base.collector import tune_collector
from burnqed.base.cpu_kernels import pin_cpu_kernels
from burnqed.base.ending import Ending
from burnqed.base.signals import Terminated, follow_parent, raise_on_sigterm
from burnqed.commands import (
    cluster,
    data,
    ebm,
    judge,
    lean,
    merge,
    model,
    prove,
    results,
    stagecall,
    start,
    study,
    train,
    world,
)
from burnqed.commands import runs as pipeline
from burnqed.commands.kit import (
    HELP_OPTIONS,
    ConfigOption,
    OneLineErrors,
    SetOption,
    VerboseOption,
    configure,
    guard_output_streams,
    keep_working_directory,
    reports_errors,
)
from burnqed.commands.vocabulary import LISTING, RENAMES, Command, Group, command
from burnqed.runner.requests import OtherRequest, StageRequest

app = typer.Typer(
    name="burnqed",
    help="Lean 4 theorem proving by expert iteration. Runs on embedded defaults (minilean, a small Lean, on the "
    "bundled theorems and the generated world) with no configuration at all. Every configuration key: `burnqed config "
    "describe`; the words the reports use: docs/glossary.md; the options every command shares: docs/commands.md.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion and --show-completion (typer's, for bash, zsh, fish, PowerShell)
    pretty_exceptions_enable=False,
    cls=OneLineErrors,
    context_settings=HELP_OPTIONS,
)
config_app = typer.Typer(help="Inspect the configuration: every key, its value and its meaning.", no_args_is_help=True,
                         cls=Group)

# Every top-level command; `burnqed --help` lists them in the panels and order of vocabulary.LISTING.
COMMANDS: dict[str, Callable[..., None] | typer.Typer] = {
    "iterate": pipeline.iterate, "run-all": pipeline.run_all, "eval": prove.evaluate, "show": results.show,
    "config": config_app, "data": data.data_app, "sft": train.sft, "rl": train.rl, "export": train.export,
    "train-ebm": ebm.train_ebm,
    "search": prove.search, "merge-trajectories": merge.merge_trajectories, "ebm": ebm.ebm_app,
    "report": pipeline.report, "compare": results.compare, "summary": results.summary, "plan": pipeline.plan,
    "render": cluster.render, "submit": cluster.submit, "cluster": cluster.cluster_app, "fetch": cluster.fetch,
    "serve": model.serve, "lean": lean.lean_app, "model": model.model_app, "world": world.world_app,
    "joint-study": study.joint_study, "start": start.start, "judge": judge.judge,
}
for name, target in COMMANDS.items():
    if isinstance(target, typer.Typer):
        app.add_typer(target, name=name, rich_help_panel=LISTING[name])
    else:
        app.command(name, cls=command(RENAMES.get(name)), rich_help_panel=LISTING[name])(target)


def version_callback(value: bool) -> None:
    if value:
        typer.echo(f"burnqed {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool, typer.Option("--version", callback=version_callback, is_eager=True, help="Print the version.")
    ] = False,
    verbose: VerboseOption = False,
) -> None:
    """burnqed: Lean 4 prover trained by expert iteration."""


@config_app.command("show", cls=Command)
@reports_errors
def config_show(config: ConfigOption = None, set_: SetOption = None) -> None:
    """Print the effective configuration (file < BURNQED_* env < --set) as JSON."""
    cfg = configure(config, set_)
    typer.echo(json.dumps(cfg.model_dump(mode="json"), indent=2, ensure_ascii=False))


@config_app.command("describe", cls=Command)
@reports_errors
def config_describe(
    key: Annotated[str | None, typer.Argument(help="A key (search.max_nodes) or a section (search); none: every key.",
                                              show_default=False)] = None,
    markdown: Annotated[bool, typer.Option("--markdown", help="Print docs/config.md (every key, as tables); with KEY "
                                           "only its rows, as one table.")] = False,
) -> None:
    """Every configuration key with its type, default, environment variable and description (from the models)."""
    from burnqed.config import describe

    if markdown:
        typer.echo(describe.markdown(key), nl=False)
        return
    for entry in describe.describe(key):
        where = f"  ({entry.env})" if entry.settable else "  (an entry's field: set through the list)"
        typer.echo(f"{entry.path}  {entry.type}  default {entry.default}{where}")
        typer.echo(f"    {entry.description}")


def main() -> None:
    """The command line: `start_process`, then the command `sys.argv` names; ends with `SystemExit`."""
    start_process()
    app(prog_name="burnqed")


def console() -> None:
    """The `burnqed` program (its console script, `python -m burnqed`, `python -m burnqed.cli`): `main`, then the
    process ends without tearing the interpreter down, once every exit handler ran (burnqed.base.ending)."""
    ending = Ending.register()
    try:
        main()
    except SystemExit as stop:
        ending.arm(stop)
        raise


def main_call(request: StageRequest) -> NoReturn:
    """`main` for a stage run in this process as a call (`commands.stagecall`): the process set up as `main` sets it
    up, then the command function `request` runs, called with its fields; exits with the code a process of its
    command line ends with. An `OtherRequest`, a command line the pipeline does not build, runs through the app."""
    start_process()
    if isinstance(request, OtherRequest):
        app(args=list(request.argv()), prog_name="burnqed")
    sys.exit(stagecall.exit_code(request))


def start_process() -> None:
    """What every burnqed process does before its command runs: its cyclic collector tuned for torch's and
    transformers' heaps, its output streams guarded, its working directory kept, the CPU kernels pinned, SIGTERM
    raised as an exception, and a stage of `burnqed iterate` made to stop when iterate dies (exits 143 when it is
    gone already)."""
    tune_collector()  # before the heavy imports: fewer passes over a growing heap (burnqed.base.collector)
    guard_output_streams()  # an unencodable character or a closed pipe never ends a command (burnqed.commands.kit)
    try:
        keep_working_directory()  # relative paths keep their meaning if the directory is deleted mid-run
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    pin_cpu_kernels()  # before any torch operation: the same kernels on every x86-64 machine (burnqed.base.cpu_kernels)
    raise_on_sigterm()  # SIGTERM anywhere: one line and exit 143 (burnqed.base.signals)
    try:
        follow_parent()  # a stage of `burnqed iterate` stops when iterate dies
    except Terminated:
        print("error: stopped by SIGTERM: the parent `burnqed iterate` is gone", file=sys.stderr)
        sys.exit(128 + signal.SIGTERM)


if __name__ == "__main__":
    console()

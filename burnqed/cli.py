"""The `burnqed` command. Thin: parse arguments, load the configuration, call one stage function.

    burnqed lean check --theorems minif2f.json --output report.json --set lean.workers=4
    burnqed config show --set 'lean.command=["repl","Mathlib"]'

Every command takes `--config FILE` (or env BURNQED_CONFIG) and repeated `--set section.key=value`, and `-h`.
Exit codes: 0 done, 1 infrastructure failure (e.g. Lean cannot start), 2 bad input or configuration
(one line on stderr, nothing written; usage errors too), 3 `run-all` stopped by a go/no-go gate,
75 a storage error a retry can cure (burnqed.errors.TransientStorageError), 128 + N stopped by signal N.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from typing import Annotated

import typer

from burnqed import __version__
from burnqed.clikit import HELP_OPTIONS, ConfigOption, OneLineErrors, SetOption, configure, reports_errors
from burnqed.commands import cluster, data, ebm, model, pipeline, prove, study, train, world
from burnqed.signals import Terminated, follow_parent, raise_on_sigterm

app = typer.Typer(
    name="burnqed",
    help="Lean 4 theorem proving by expert iteration. Runs on embedded defaults (minilean, a small Lean, on the "
    "bundled theorems and the generated world) with no configuration at all.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=OneLineErrors,
    context_settings=HELP_OPTIONS,
)
lean_app = typer.Typer(help="The Lean edge: check that theorems start, and that this build conforms to the "
                       "configured Lean.", no_args_is_help=True)
config_app = typer.Typer(help="Inspect the configuration.", no_args_is_help=True)
app.add_typer(lean_app, name="lean")
app.add_typer(config_app, name="config")
app.add_typer(model.model_app, name="model")
app.command("serve")(model.serve)
app.command("search")(prove.search)
app.command("eval")(prove.evaluate)
app.command("compare")(prove.compare)
app.command("summary")(prove.summary)
app.command("merge-trajectories")(prove.merge_trajectories)
for module in (data, train, ebm, pipeline, cluster, world, study):
    module.register(app)


def version_callback(value: bool) -> None:
    if value:
        typer.echo(f"burnqed {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool, typer.Option("--version", callback=version_callback, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """burnqed: Lean 4 prover trained by expert iteration."""


@config_app.command("show")
@reports_errors
def config_show(config: ConfigOption = None, set_: SetOption = None) -> None:
    """Print the effective configuration (file < BURNQED_* env < --set) as JSON."""
    cfg = configure(config, set_)
    typer.echo(json.dumps(cfg.model_dump(mode="json"), indent=2, ensure_ascii=False))


@lean_app.command("check")
@reports_errors
def lean_check(
    theorems: Annotated[
        str | None,
        typer.Option(
            "--theorems",
            help="Theorem index JSON, a path or URI (docs/data.md). Default: the bundled corpus' index.",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", help="Write the JSON report here (path or URI).", show_default=False),
    ] = None,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Start every theorem of an index through the Lean pool; list the ones that fail to start and why.

    Prints the Pantograph version (lean.pantograph_version, else what `repl --version` says), then
    `started N/M`, and exits 0 when the run completed, whatever the count. Indexes without a top-level
    `name` (the prototype's benchmark files) are named after their file.
    """
    from burnqed.data.index import bundled_index_path, load_theorem_index
    from burnqed.lean.check import CheckReport, check_index
    from burnqed.lean.pool import LeanPool
    from burnqed.lean.version import version_probe_argv
    from burnqed.progress import progress_bar
    from burnqed.records import first_line
    from burnqed.storage import Store

    cfg = configure(config, set_)
    store = Store.from_config(cfg.storage)
    if output is not None:
        store.check_writable(output)
    index = load_theorem_index(theorems or bundled_index_path(), store=store)

    async def run() -> CheckReport:
        pool = LeanPool.from_config(cfg.lean)
        async with pool:
            source = ("lean.pantograph_version" if cfg.lean.pantograph_version
                      else f"`{' '.join(version_probe_argv(cfg.lean.argv()))}`")
            typer.echo(f"Pantograph {pool.version} (from {source})")
            with progress_bar("starting theorems", total=len(index.theorems)) as advance:
                return await check_index(pool, index, cfg.lean.argv(), on_done=lambda _: advance(1))

    report = asyncio.run(run())
    for failure in report.failures[:20]:
        typer.echo(f"  not started: {failure.name}: {failure.error_kind}: {first_line(failure.error or '')}",
                   err=True)
    if len(report.failures) > 20:
        typer.echo(f"  ... and {len(report.failures) - 20} more (see the report)", err=True)
    if output is not None:
        store.write_bytes(output, (report.model_dump_json(indent=2) + "\n").encode())
    typer.echo(f"{report.summary} ({report.elapsed_s:.1f}s)")


@lean_app.command("selftest")
@reports_errors
def lean_selftest(config: ConfigOption = None, set_: SetOption = None) -> None:
    """A one-minute conformance run against the configured Lean (lean.command): is this build's Lean edge right
    for it? Prints a table, one row per item, and exits 0 only when every item conforms (1 otherwise).

    Items: the Pantograph version; theorems written as miniF2F writes them start (its header's `open … Real Nat`,
    the scoped `π` and `n !`, binders as hypotheses); tactics run in the header's scope (`exact pi_pos`) and use
    the binders without `intro`; the proofs compile and count (`#print axioms`, the kernel check); every known
    exploit is refused by the tactic guard (lean.deny) and, sent past an open guard, not counted; and the time
    each took. The theorems are `burnqed_selftest_*`: in no index, never trained on.
    """
    from rich.console import Console
    from rich.table import Table

    from burnqed.commands.edges import open_pool
    from burnqed.lean.guard import TacticGuard
    from burnqed.lean.selftest import SelftestReport, run_selftest

    cfg = configure(config, set_)

    async def run() -> SelftestReport:
        async with open_pool(cfg.lean.model_copy(update={"workers": 1})) as (pool, _):
            return await run_selftest(pool, TacticGuard.from_config(cfg.lean))

    report = asyncio.run(run())
    table = Table(title=f"burnqed lean selftest: Pantograph {report.version} ({' '.join(cfg.lean.argv())})")
    for column in ("item", "result", "what Lean did", "ms"):
        table.add_column(column, justify="right" if column == "ms" else "left")
    for item in report.items:
        table.add_row(item.name, "ok" if item.ok else "[bold red]FAIL[/]", item.detail, f"{item.ms:.0f}")
    Console(width=max(120, Console().width)).print(table)
    if not report.ok:
        failed = ", ".join(item.name for item in report.failed)
        typer.echo(f"lean selftest: {len(report.failed)} of {len(report.items)} items do not conform: {failed}",
                   err=True)
        raise typer.Exit(1)
    typer.echo(f"lean selftest: all {len(report.items)} items conform")


def main() -> None:
    """Console-script entry point."""
    raise_on_sigterm()  # SIGTERM anywhere: one line and exit 143 (burnqed.signals)
    try:
        follow_parent()  # a stage of `burnqed iterate` stops when iterate dies
    except Terminated:
        print("error: stopped by SIGTERM: the parent `burnqed iterate` is gone", file=sys.stderr)
        sys.exit(128 + signal.SIGTERM)
    app(prog_name="burnqed")


if __name__ == "__main__":
    main()

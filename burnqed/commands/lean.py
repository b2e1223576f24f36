"""`burnqed lean check | selftest`: the Lean edge's commands (docs/lean.md).

    burnqed lean check --theorems minif2f.json --output report.json --set lean.workers=4
    burnqed lean selftest --set 'lean.command=["repl"]'

`check` starts every theorem of an index through the Lean pool and lists the ones that do not start
(`lean.check.check_index`); `selftest` runs the conformance items against the configured Lean
(`lean.selftest.run_selftest`).
"""

from __future__ import annotations

import asyncio
import os
from typing import Annotated

import typer

from burnqed.commands.kit import ConfigOption, SetOption, configure, reports_errors, setup
from burnqed.commands.vocabulary import OUTPUT_METAVAR, THEOREMS_HELP, Command, Group

lean_app = typer.Typer(help="The Lean edge: check that theorems start, and that this build conforms to the "
                       "configured Lean.", no_args_is_help=True, cls=Group)


@lean_app.command("check", cls=Command)
@reports_errors
def lean_check(
    theorems: Annotated[
        str | None,
        typer.Option("--theorems", metavar="PATH|URI", show_default=False,
                     help=f"{THEOREMS_HELP} Default: the bundled corpus' index."),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", metavar=OUTPUT_METAVAR, help="Write the JSON report here (path or URI).",
                     show_default=False),
    ] = None,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Start every theorem of an index through the Lean pool; list the ones that fail to start and why.

    Prints the Pantograph version (lean.pantograph_version, else what `repl --version` says), then
    `started N/M`, and exits 0 when the run completed, whatever the count. Indexes without a top-level
    `name` (the burn-qed prototype's published benchmark indexes, docs/data.md) are named after their file.
    """
    from burnqed.base.progress import progress_bar
    from burnqed.commands.edges import open_pool
    from burnqed.data.index import bundled_index_path, load_theorem_index
    from burnqed.data.theorems import load_theorems
    from burnqed.lean.check import CheckReport, check_index
    from burnqed.records.replies import first_line
    from leankit.version import version_probe_argv

    cfg, store = setup(config, set_, output=output)
    if output is not None:
        store.check_replaceable_file(output, CheckReport, "a lean check report")
    index = load_theorems(theorems, store=store) if theorems is not None else \
        load_theorem_index(bundled_index_path(), store=store)

    async def run() -> CheckReport:
        async with open_pool(cfg.lean) as (pool, _):
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
        store.check_replaceable_file(output, CheckReport, "a lean check report")  # again: it may have appeared
        store.write_bytes(output, (report.model_dump_json(indent=2) + "\n").encode())
    typer.echo(f"{report.summary} ({report.elapsed_s:.1f}s)")


@lean_app.command("selftest", cls=Command)
@reports_errors
def lean_selftest(config: ConfigOption = None, set_: SetOption = None) -> None:
    """A one-minute conformance run against the configured Lean (lean.command): is this build's Lean edge right
    for it? Prints a table, one row per item, and exits 0 only when every item conforms (1 otherwise).

    Items: the Pantograph version; the triple met (Pantograph from `--version`, Lean from its version line or
    `lean --version` where the workers run, Mathlib as the image declares it in BURNQED_LEAN_TRIPLE: a triple other
    than the declared one fails); theorems written as miniF2F writes them start (its header's `open … Real Nat`,
    the scoped `π` and `n !`, binders as hypotheses); tactics run in the header's scope (`exact pi_pos`) and use
    the binders without `intro`; the proofs compile and count (`#print axioms`, the kernel check); every known
    exploit is refused by the tactic guard (lean.deny) and, sent past an open guard, not counted; and the time
    each took. The theorems are `burnqed_selftest_*`: in no index, never trained on. With lean.judge = "comparator",
    a section judged by Lean's comparator (lean.comparator_command): an honest proof accepted, and a statement changed
    by a local notation, a sorryAx, a custom axiom, native_decide, debug.skipKernelTC and a filled answer slot of the
    wrong type each refused, with comparator's category.
    """
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from burnqed.base.sandbox import lean_identity, sealed_environment, spawn_options
    from burnqed.cluster.images import TRIPLE_ENV, lean_triples
    from burnqed.commands.edges import open_pool
    from burnqed.errors import from_leankit
    from burnqed.lean.comparator import ComparatorSettings
    from burnqed.lean.guard import TacticGuard
    from burnqed.lean.selftest import SelftestReport, TripleSources, run_selftest
    from leankit.failures import LeankitFailure
    from leankit.version import detect_lean_version, version_probe_argv

    cfg = configure(config, set_)

    async def lean_version() -> str:  # where and as the workers run (docs/lean.md, "Selftest")
        try:
            return await detect_lean_version(cwd=cfg.lean.cwd, env=sealed_environment(os.environ, cfg.lean.env),
                                             timeout_s=cfg.lean.ready_timeout_s,
                                             spawn=spawn_options(lean_identity(cfg.lean.run_as_uid), os.environ))
        except LeankitFailure as exc:  # a LeanStartError: the selftest names it as why Lean's version is unknown
            raise from_leankit(exc) from None

    asked = ("lean.pantograph_version (not asked)" if cfg.lean.pantograph_version
             else f"`{' '.join(version_probe_argv(cfg.lean.argv()))}`")
    sources = TripleSources(version_source=asked, version_asked=not cfg.lean.pantograph_version,
                            lean_probe=lean_version,
                            image_triple=os.environ.get(TRIPLE_ENV) or None, triples=lean_triples())

    judged = ComparatorSettings.of(cfg.lean) if cfg.lean.judged_by()[0] == "comparator" else None

    async def run() -> SelftestReport:
        async with open_pool(cfg.lean.model_copy(update={"workers": 1})) as (pool, _):
            return await run_selftest(pool, TacticGuard.from_config(cfg.lean), sources, judged)

    report = asyncio.run(run())
    table = Table(title=f"burnqed lean selftest: {report.triple or f'Pantograph {report.version}'} "
                        f"({' '.join(cfg.lean.argv())})")
    for column in ("item", "result", "what Lean did", "ms"):
        table.add_column(column, justify="right" if column == "ms" else "left")
    for item in report.items:
        table.add_row(escape(item.name), "ok" if item.ok else "[bold red]FAIL[/]", escape(item.detail),
                      f"{item.ms:.0f}")
    Console(width=max(120, Console().width)).print(table)
    if not report.ok:
        failed = ", ".join(item.name for item in report.failed)
        typer.echo(f"lean selftest: {len(report.failed)} of {len(report.items)} items do not conform: {failed}",
                   err=True)
        raise typer.Exit(1)
    typer.echo(f"lean selftest: all {len(report.items)} items conform")

"""`burnqed data prepare | trace | report`: the data stage's commands (docs/data.md).

    burnqed data prepare --output runs/iter_0/data                     # embedded defaults: the bundled corpus
    burnqed data prepare --source benchmark=MiniF2F/Test.lean --output bench   # a benchmark's theorem index
    burnqed data prepare --output s3://bucket/run/iter_0/data --config data.toml --force
    burnqed data trace --repo https://github.com/org/repo --commit SHA --output runs/traced/repo
    burnqed data report runs/iter_0/data

`prepare` reads `--source KIND=PATH` (repeatable), else `data.sources`, starts the Lean pool only when whole proofs
must be replayed, and publishes the folder atomically; a finished output made from the same sources and settings is
reused, one made from others refused unless `--force` (`commands.kit.already_done`). Warnings go to stderr.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, get_args

import typer

from burnqed.commands.kit import ConfigOption, SetOption, already_done, check_packages, reports_errors, setup
from burnqed.commands.vocabulary import OUTPUT_METAVAR, Command, Group
from burnqed.config.data import RENAMED_KINDS
from burnqed.errors import InputError

data_app = typer.Typer(help="Data preparation: sources → theorem index + tactic pairs (docs/data.md).",
                       no_args_is_help=True, cls=Group)

OutputOption = Annotated[str, typer.Option("--output", "-o", metavar=OUTPUT_METAVAR,
                                           help="Output folder (path, file:// or s3:// URI).")]


def source_kinds() -> tuple[str, ...]:
    """The kinds of data source (`SourceSpec.kind`), in the order docs/data.md lists them."""
    from burnqed.config import SourceSpec

    return get_args(SourceSpec.model_fields["kind"].annotation)


def sources_set(sources: list[str] | None, sets: list[str] | None) -> list[str] | None:
    """`--source KIND=PATH …` as the `--set data.sources=[…]` they equal (last, so they win over an earlier --set
    of data.sources); a KIND alone (`--source bundled`) is a source without a path. `InputError` naming the kinds
    for a kind that is none."""
    if not sources:
        return sets
    specs: list[dict[str, str]] = []
    kinds = source_kinds()
    for given in sources:
        kind, has_path, path = given.partition("=")
        if kind.strip() not in kinds and kind.strip() not in RENAMED_KINDS:  # an old name: the config warns
            raise InputError(f"--source {given!r}: {kind.strip()!r} is not a kind of source; give KIND=PATH with KIND "
                             f"one of {', '.join(kinds)} (`burnqed config describe data.sources` says what each reads)")
        if has_path and not path.strip():
            raise InputError(f"--source {given!r}: the path after = is empty; give KIND=PATH, or KIND alone for the "
                             "kinds that have a default (bundled, world)")
        specs.append({"kind": kind.strip(), **({"path": path} if has_path else {})})
    return [*(sets or ()), f"data.sources={json.dumps(specs, ensure_ascii=False)}"]


@data_app.command("prepare", cls=Command)
@reports_errors
def prepare(
    output: OutputOption,
    source: Annotated[list[str] | None, typer.Option(
        "--source", metavar="KIND=PATH", show_default=False,
        help="A source to read: its kind (benchmark for a benchmark: a .lean file or folder, a DeepSeek jsonl; "
        "lean-workbook, goedel-proofs, numina-lean, pairs, …) and its file, folder, s3:// URI or hub name. "
        "Repeatable, in order; replaces data.sources (the same as --set 'data.sources=[{\"kind\": KIND, \"path\": "
        "PATH}, …]'). Every kind: `burnqed config describe data.sources`.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Prepare again even if OUTPUT is already finished (made "
                                        "with the same inputs: reused; with others: refused).")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Convert the data sources (--source, else data.sources) into theorems.json, pairs.parquet, contrastive.json and
    report.json under OUTPUT.

    Training theorems that restate a benchmark theorem (of a benchmark source, or of pipeline.benchmark: what the evals
    evaluate, unset = the embedded test split) are dropped and listed; a pipeline.benchmark that is missing or holds
    no theorem stops it before any work (exit 2)."""
    from burnqed.commands.edges import open_pool
    from burnqed.data.data_report import render_report
    from burnqed.data.prepare import prepare_data, write_prepared
    from burnqed.data.theorems import pipeline_benchmark
    from burnqed.lean.guard import TacticGuard
    from burnqed.runner.reuse import prepare_inputs

    cfg, store = setup(config, sources_set(source, set_), output=output, folder=True, stage="prepare-data")
    if not cfg.data.sources:
        raise InputError("data.sources is empty: give a source (--source KIND=PATH, or data.sources), or leave "
                         "data.sources unset for its default (the bundled corpus and the generated world)")
    check_packages("data prepare", cfg)  # hub sources: datasets, before any work
    # What the evals evaluate: training theorems restating it are dropped (a missing or empty one: exit 2, here).
    benchmark = pipeline_benchmark(cfg.pipeline.benchmark, cfg.data.world_seed, store=store,
                                   world_sketches=cfg.data.world_sketches)
    made_from = prepare_inputs(cfg, store)
    if already_done(store, output, "prepared-data output", made_from=made_from, force=force):
        return
    prepared = asyncio.run(
        prepare_data(cfg.data, open_lean=lambda: open_pool(cfg.lean), guard=TacticGuard.from_config(cfg.lean),
                     lean_command=cfg.lean.argv(), store=store, benchmarks=[benchmark])
    )
    extra: dict[str, object] = {"theorems": prepared.report.theorems, "pairs": prepared.report.pairs,
                                "splits": {k: v.model_dump() for k, v in prepared.report.splits.items()}}
    with store.staged_output(output, "prepare-data", extra, made_from=made_from) as folder:
        write_prepared(folder, prepared)
    for warning in prepared.report.warnings:
        typer.echo(f"warning: {warning}", err=True)
    typer.echo(render_report(prepared.report), nl=False)
    typer.echo(f"wrote {output}")


@data_app.command("trace", cls=Command)
@reports_errors
def trace(
    repo: Annotated[str, typer.Option("--repo", help="Git URL of the Lean 4 repository to trace.")],
    commit: Annotated[str, typer.Option("--commit", help="Commit (SHA or tag) to trace.")],
    output: OutputOption,
    build_deps: Annotated[
        bool, typer.Option("--build-deps", help="Also trace the repository's dependencies (slow).")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Trace again even if OUTPUT is already finished.")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Trace a Lean repository with LeanDojo (extra `trace`) into a prepared-data folder of tactic pairs."""
    from burnqed.config import DataConfig, SourceSpec
    from burnqed.data.data_report import render_report
    from burnqed.data.prepare import prepare_data, write_prepared
    from burnqed.data.trace import TRACED_ROWS_FILE, require_tracing, write_traced_rows
    from burnqed.lean.guard import TacticGuard
    from burnqed.runner.reuse import trace_inputs

    cfg, store = setup(config, set_, output=output, folder=True, stage="trace-data")
    require_tracing()
    made_from = trace_inputs(cfg, repo=repo, commit=commit, build_deps=build_deps)
    if already_done(store, output, "traced-data output", made_from=made_from, force=force):
        return
    label = repo.rstrip("/").removesuffix(".git").rsplit("/", 1)[-1] or "traced"
    with store.staged_output(output, "trace-data", {"repo": repo, "commit": commit}, made_from=made_from) as folder:
        rows_file = folder / TRACED_ROWS_FILE
        rows = write_traced_rows(repo, commit, rows_file, build_deps=build_deps)
        data = DataConfig(
            sources=[SourceSpec(kind="lean-github", name=label, path=str(rows_file))],
            valid_fraction=cfg.data.valid_fraction,
            split_salt=cfg.data.split_salt,
            contrastive_min_depth=cfg.data.contrastive_min_depth,
            replay=False,
        )
        prepared = asyncio.run(prepare_data(data, open_lean=None, guard=TacticGuard.from_config(cfg.lean),
                                              store=store))
        write_prepared(folder, prepared)
    typer.echo(render_report(prepared.report), nl=False)
    typer.echo(f"traced {rows} tactics of {repo}@{commit} -> {output}")


@data_app.command("report", cls=Command)
@reports_errors
def report(
    uri: Annotated[str, typer.Argument(help="A prepared-data folder (path or URI).", show_default=False)],
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON instead of a table.")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Print the data report of a prepared-data folder."""
    from burnqed.data.data_report import read_report, render_report

    store = setup(config, set_).store
    loaded = read_report(uri, store=store)
    typer.echo(loaded.model_dump_json(indent=2) if json_out else render_report(loaded), nl=json_out)

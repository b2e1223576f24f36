"""`burnqed search | eval | compare | summary | merge-trajectories`: the prover's commands.

    burnqed search --theorems theorems.json --output runs/iter_0/search/shard-0 --shard 0/4 --resume
    burnqed eval --theorems minif2f-test.json --budgets 100,300,600 --pass-n 1 --output results/iter_0.json
    burnqed eval --ebm runs/iter_1/ebm --ablation --output results/iter_1.json   # + results/iter_1-noebm.json
    burnqed compare results/iter_0.json results/iter_1.json
    burnqed summary runs/iter_0/search/shard-0
    burnqed merge-trajectories runs/iter_0/search/shard-0 runs/iter_0/search/shard-1 --output runs/iter_0/trajectories

With no configuration these run on the embedded defaults: the replay Lean server on the bundled corpus and
the tiny model in-process. Point them at real Lean and SGLang with `--set lean.command=...`,
`--set policy.backend=sglang --set policy.url=http://host:30000`.
"""

from __future__ import annotations

import contextlib
from typing import Annotated

import typer

from burnqed.clikit import ConfigOption, SetOption, already_done, reports_errors, setup
from burnqed.errors import InputError
from burnqed.lease import hold_lease
from burnqed.outputs import check_trajectory_prefix
from burnqed.signals import run_async, same_command, stop_on_signals

EbmOption = Annotated[
    str | None,
    typer.Option(
        "--ebm",
        help="Value model (a train-ebm output, path or URI) mixed into the frontier score (search.value_weight). "
        "Embeddings come from ebm.encoder_backend on policy.model.",
        show_default=False,
    ),
]
TheoremsOption = Annotated[
    str | None,
    typer.Option(
        "--theorems",
        help="Theorem index JSON (docs/data.md), a path or URI. Default: the embedded corpus (the bundled theorems and "
        "the generated world; eval: its test split).",
        show_default=False,
    ),
]
SplitOption = Annotated[
    str | None,
    typer.Option("--split", help="Keep only the index's theorems of this split (train | valid | pool | test), or "
                 "of several: train,pool.", show_default=False),
]


@reports_errors
def search(
    output: Annotated[str, typer.Option("--output", "-o", help="Trajectory prefix (path or URI) to write.")],
    theorems: TheoremsOption = None,
    shard: Annotated[
        str | None, typer.Option("--shard", help="Search only shard I of N (theorem i where i % N == I), e.g. 0/4.")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue a run in OUTPUT: skip its committed theorems (a run made with "
                           "other inputs is refused; a finished one made with the same inputs is reused).")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Search again from nothing: delete what OUTPUT holds (a trajectory "
                           "prefix's files only) first.")
    ] = False,
    iteration: Annotated[int, typer.Option("--iter", min=0, help="Expert-iteration index recorded in rows.")] = 0,
    split: SplitOption = None,
    run_id: Annotated[
        str | None,
        typer.Option("--run-id", help="Run id recorded in rows; the shards of one search share it (so they "
                     "merge as one run). Default: a new id (a resumed run keeps its own).", show_default=False),
    ] = None,
    ebm: EbmOption = None,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Search theorems and write trajectories (one Parquet part per checkpoint, resumable).

    OUTPUT records what it is made from (theorems, settings, models); --resume continues only that run, and reuses
    it when finished ("reusing OUTPUT …"). --force searches again from nothing."""
    from burnqed.commands.edges import open_policy, open_pool, open_value_fn
    from burnqed.data.index import load_index
    from burnqed.outputs import clear_trajectory_prefix
    from burnqed.reuse import resume_prefix, reuse_line, search_inputs
    from burnqed.search.job import JobSettings, SearchReport, search_job
    from burnqed.search.runner import parse_shard

    cfg, store = setup(config, set_)
    settings = JobSettings.from_config(cfg.search, cfg.policy, cfg.lean)
    try:
        shard_spec = parse_shard(shard) if shard else None
    except ValueError as exc:
        raise InputError(str(exc)) from None
    store.check_writable(output, folder=True)
    check_trajectory_prefix(store, output)
    index = load_index(theorems, split, store=store, world_seed=cfg.data.world_seed)
    made_from = search_inputs(cfg, store, index, shard=shard, iteration=iteration, ebm=ebm)

    async def run() -> SearchReport:
        async with open_pool(cfg.lean, cfg.search.theorems_per_worker) as (pool, size), \
                open_policy(cfg.policy, store=store) as policy, open_value_fn(ebm, cfg, store=store) as value:
            return await search_job(
                index.theorems, output, pool=pool, pool_size=size, policy=policy, settings=settings,
                shard=shard_spec, resume=resume, iteration=iteration, run_id=run_id, value=value,
                made_from=made_from, store=store,
            )

    # One writer per output (burnqed.lease); SIGTERM/Ctrl-C commit the finished theorems and stop the Lean pool.
    with stop_on_signals(f"burnqed search to {output}", kept="finished theorems were committed",
                         continue_with=same_command(("--resume",), drop=("--force",))), \
            hold_lease(store, output, what="search output", command=same_command()):
        if force:
            clear_trajectory_prefix(store, output)
        elif (found := resume_prefix(store, output, made_from, resume=resume)) is not None:
            typer.echo(reuse_line(found))
            return
        report = run_async(run())
    rate = f"{report.proved}/{report.searched}" if report.searched else "0/0"
    typer.echo(
        f"searched {report.searched} theorems ({report.skipped} already done), proved {rate}, "
        f"in {report.elapsed_s:.1f}s -> {report.output} (run {report.run_id})"
    )
    if report.throughput is not None and report.searched:
        from burnqed.search.monitor import render_throughput

        typer.echo(render_throughput(report.throughput))


@reports_errors
def evaluate(
    output: Annotated[str, typer.Option("--output", "-o", help="Write the eval result JSON here (path or URI).")],
    theorems: TheoremsOption = None,
    budgets: Annotated[
        str | None,
        typer.Option("--budgets", help="Comma-separated budgets in the unit of search.mode (step: node expansions; "
                     "whole, hybrid: proofs sampled); one search with the largest answers them all. Default: "
                     "100,300,600 in step mode, search.max_proofs/4, /2 and all of it in whole and hybrid modes.",
                     show_default=False),
    ] = None,
    pass_n: Annotated[int, typer.Option("--pass-n", min=1, help="Independent attempts per theorem (pass@N).")] = 1,
    trajectories: Annotated[
        str | None,
        typer.Option("--trajectories", help="Also write trajectories under this prefix; each finished theorem is "
                     "committed there, so an interrupted eval can continue with --resume.", show_default=False),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option("--resume", help="Continue an interrupted eval from its --trajectories: theorems committed "
                     "there are not searched again (same --budgets, --pass-n and search.mode)."),
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Evaluate again even if OUTPUT (and with --ablation its -noebm twin) "
                           "is finished; without it a finished eval made with the same inputs is reused and one made "
                           "with other inputs is refused.")
    ] = False,
    show_theorems: Annotated[
        bool, typer.Option("--show-theorems", help="Also print one row per theorem: solved at which budget, or why "
                           "not; edges, tokens and where its time went.")
    ] = False,
    iteration: Annotated[int, typer.Option("--iter", min=0, help="Expert-iteration index to record.")] = 0,
    split: SplitOption = None,
    ebm: EbmOption = None,
    ablation: Annotated[
        bool,
        typer.Option("--ablation", help="With --ebm: also evaluate without the value model, write "
                     "OUTPUT-noebm.json beside OUTPUT and print both arms side by side."),
    ] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Evaluate on a benchmark at several budgets: a table on stdout, the full result as JSON (with the tokens
    generated and Lean requests sent at each budget, and per theorem what happened and what it cost).
    `--set search.mode=whole|hybrid` evaluates the whole-proof modes.

    Like every stage, a finished eval (OUTPUT exists) made with the same inputs (theorems, budgets, settings, model,
    value model) is reused: "reusing OUTPUT …" first, then its table; one made with other inputs is refused with the
    first difference (exit 2). --force evaluates again. Outputs, trajectories and credentials are checked before
    Lean or the model start.
    """
    from burnqed.commands.edges import open_policy, open_pool, open_value_fn
    from burnqed.data.index import load_index
    from burnqed.eval.run import (
        EvalIdentity,
        EvalJobSettings,
        EvalRequest,
        check_eval_request,
        check_resumable,
        eval_arms,
        eval_budgets,
        finished_eval,
        publish_eval,
        render_finished,
    )
    from burnqed.eval.schema import EvalResult
    from burnqed.reuse import check_reusable, eval_inputs, reuse_line
    from burnqed.reuse import finished_eval as finished

    cfg, store = setup(config, set_)
    budget_list = eval_budgets(budgets, cfg.search)
    request = EvalRequest(output, pass_n=pass_n, iteration=iteration, ebm=ebm, ablation=ablation,
                          trajectories=trajectories, resume=resume)
    check_eval_request(request, store=store)
    for prefix in request.prefixes:
        check_trajectory_prefix(store, prefix, what="--trajectories", passes=pass_n > 1)
    settings = EvalJobSettings.from_config(cfg, budget_list)
    index = load_index(theorems, split, default_split="test", store=store, world_seed=cfg.data.world_seed)
    made_from = [eval_inputs(EvalIdentity.of(index, settings, pass_n=pass_n, iteration=iteration, ebm=arm.ebm), cfg,
                             store) for arm in request.arms()]
    if not force and (results := finished_eval(request, store=store)) is not None:
        found = [finished(uri, result) for uri, result in zip(request.outputs, results, strict=True)]
        for arm, now in zip(found, made_from, strict=True):
            check_reusable(arm, now, "eval result")  # never another eval's table as this one's
        for arm in found:
            typer.echo(reuse_line(arm))
        for text in render_finished(results, show_theorems=show_theorems):
            typer.echo(text)
        return
    check_resumable(request, index, settings, store=store)

    async def run() -> list[EvalResult]:
        async with open_pool(cfg.lean, cfg.search.theorems_per_worker) as (pool, size), \
                open_policy(cfg.policy, store=store) as policy, open_value_fn(ebm, cfg, store=store) as value:
            return await eval_arms(request, index, settings, pool=pool, pool_size=size, policy=policy, value=value,
                                   store=store)

    # One writer per trajectory prefix (burnqed.lease); SIGTERM/Ctrl-C commit what finished and stop the Lean pool.
    kept = (f"finished theorems were committed under {trajectories}" if trajectories is not None else
            "nothing was saved (eval writes its result at the end; --trajectories PREFIX makes it resumable)")
    with stop_on_signals(f"burnqed eval to {output}", kept=kept,
                         continue_with=same_command(("--resume",) if trajectories is not None else ())), \
            contextlib.ExitStack() as leases:
        for prefix in request.prefixes:
            leases.enter_context(hold_lease(store, prefix, what="eval trajectories", command=same_command()))
        results = run_async(run())
    publish_eval(request, results, made_from=made_from, store=store, show_theorems=show_theorems, echo=typer.echo)
    typer.echo(f"wrote {' and '.join(request.outputs)}")


@reports_errors
def compare(
    results: Annotated[
        list[str], typer.Argument(help="Eval result JSON files (paths or URIs), oldest first.", show_default=False)
    ],
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Compare eval results: a table per budget, the change from the first to the last, newly solved theorems."""
    from burnqed.eval.compare import compare_results, render_comparison
    from burnqed.eval.schema import load_eval_result

    store = setup(config, set_).store
    if len(results) < 2:
        raise InputError("compare needs at least two result files")
    loaded = [(str(path), load_eval_result(path, store=store)) for path in results]
    typer.echo(render_comparison(compare_results(loaded)))


@reports_errors
def summary(
    uri: Annotated[str, typer.Argument(help="Trajectory prefix (path or URI).", show_default=False)],
    json_out: Annotated[bool, typer.Option("--json", help="Print the summary as JSON instead of a table.")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Summarise a trajectory prefix: proof rate, outcomes, proof depths, candidates per expansion, time split."""
    from burnqed.trajectory.reader import require_trajectories
    from burnqed.trajectory.summary import render_summary, summarize

    store = setup(config, set_).store
    require_trajectories(uri, store=store)
    result = summarize(uri, store=store)
    typer.echo(result.model_dump_json(indent=2) if json_out else render_summary(result))


@reports_errors
def merge_trajectories(
    inputs: Annotated[list[str], typer.Argument(help="Shard prefixes to merge.", show_default=False)],
    output: Annotated[str, typer.Option("--output", "-o", help="Merged trajectory prefix.")],
    allow_incomplete: Annotated[
        bool, typer.Option("--allow-incomplete", help="Merge shards that did not finish (no _SUCCESS.json).")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Merge again from nothing even if OUTPUT is finished (from the same "
                           "inputs: reused; from others: refused).")
    ] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Merge the trajectory prefixes of search shards into one prefix (idempotent). Every part of every input is
    verified (its Parquet footer readable, its row count the one its manifest records) before anything is
    written; a bad part is refused with its name (exit 2) and the output is left untouched."""
    from burnqed.outputs import clear_trajectory_prefix
    from burnqed.reuse import merge_inputs
    from burnqed.trajectory.merge import merge_trajectories as merge

    store = setup(config, set_, output=output, folder=True).store
    check_trajectory_prefix(store, output)
    made_from = merge_inputs(store, inputs=inputs)
    if already_done(store, output, "merged trajectory", made_from=made_from, force=force):
        return
    if force:
        clear_trajectory_prefix(store, output)
    report = merge(inputs, output, allow_incomplete=allow_incomplete, made_from=made_from, store=store)
    done = "already complete, nothing copied" if report.skipped else f"copied {report.copied} parts"
    typer.echo(
        f"merged {len(report.inputs)} prefixes -> {report.output}: {report.theorems} theorems, "
        f"{report.proved} proved, {report.rows} edges in {report.parts} parts ({done})"
    )

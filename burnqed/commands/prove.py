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
import re
from typing import TYPE_CHECKING, Annotated

import typer

from burnqed.clikit import ConfigOption, SetOption, reports_errors, setup
from burnqed.config.pipeline import MAX_PASS_N, MAX_SHARDS
from burnqed.config.search import MAX_BUDGET
from burnqed.errors import InputError
from burnqed.lease import hold_lease
from burnqed.outputs import check_trajectory_prefix
from burnqed.signals import run_async, same_command, stop_on_signals
from burnqed.storage import Store

if TYPE_CHECKING:
    from burnqed.config import SearchConfig
    from burnqed.records import TheoremIndex

MAX_ITERATION = 2**31 - 1  # trajectory rows store the iteration as int32 (burnqed.trajectory.schema)
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


def _load_index(
    theorems: str | None, split: str | None, default_split: str | None = None, *, store: Store, world_seed: int = 0
) -> TheoremIndex:
    from burnqed.data.index import embedded_index, load_theorem_index, select_split

    index = load_theorem_index(theorems, store=store) if theorems else embedded_index(default_split, world_seed)
    return select_split(index, split) if split else index


def default_budgets(search: SearchConfig) -> list[int]:
    """Eval's budgets when --budgets is not given: 100, 300, 600 expansions in step mode; a quarter, half and all
    of search.max_proofs proofs in whole and hybrid modes."""
    if search.mode == "step":
        return [100, 300, 600]
    return sorted({max(1, search.max_proofs // 4), max(1, search.max_proofs // 2), search.max_proofs})


def _parse_budgets(text: str) -> list[int]:
    """`--budgets`: comma-separated whole numbers from 1 to `MAX_BUDGET` (ASCII digits; spaces around them are
    fine), returned sorted and without repeats (they are rungs of one search); InputError naming the bad part."""
    budgets = []
    for part in text.split(","):
        if re.fullmatch(r"\s*-?[0-9]+\s*", part) is None:
            shown = f"{part.strip()!r} is not a whole number" if part.strip() else "a budget is missing"
            raise InputError(f"--budgets {text!r}: {shown}; give comma-separated budgets, e.g. 100,300,600")
        budget = int(part)
        if not 1 <= budget <= MAX_BUDGET:
            raise InputError(f"--budgets {text!r}: {budget} is out of range; a budget is 1 to {MAX_BUDGET:,} "
                             "(expansions or proofs), e.g. 100,300,600")
        budgets.append(budget)
    return sorted(set(budgets))


@reports_errors
def search(
    output: Annotated[str, typer.Option("--output", "-o", help="Trajectory prefix (path or URI) to write.")],
    theorems: TheoremsOption = None,
    shard: Annotated[
        str | None, typer.Option("--shard", help="Search only shard I of N (theorem i where i % N == I), e.g. 0/4; "
                                 f"0 <= I < N <= {MAX_SHARDS:,}. A shard with no theorem (more shards than "
                                 "theorems) finishes empty.")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue a run in OUTPUT: skip its committed theorems.")
    ] = False,
    iteration: Annotated[int, typer.Option("--iter", min=0, max=MAX_ITERATION,
                                           help="Expert-iteration index recorded in rows.")] = 0,
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
    """Search theorems and write trajectories (one Parquet part per checkpoint, resumable)."""
    from burnqed.commands.edges import check_repair_room, open_policy, open_pool, open_value_fn
    from burnqed.search.job import JobSettings, SearchReport, search_job
    from burnqed.search.runner import parse_shard

    cfg, store = setup(config, set_)
    settings = JobSettings.from_config(cfg.search, cfg.policy, cfg.lean)
    try:
        shard_spec = parse_shard(shard, MAX_SHARDS) if shard else None
    except ValueError as exc:
        raise InputError(str(exc)) from None
    store.check_writable(output, folder=True)
    check_trajectory_prefix(store, output)
    index = _load_index(theorems, split, store=store, world_seed=cfg.data.world_seed)

    async def run() -> SearchReport:
        async with open_pool(cfg.lean, cfg.search.theorems_per_worker) as (pool, size), \
                open_policy(cfg.policy, store=store) as policy, open_value_fn(ebm, cfg, store=store) as value:
            await check_repair_room(policy, cfg.search, cfg.policy)
            return await search_job(
                index.theorems, output, pool=pool, pool_size=size, policy=policy, settings=settings,
                shard=shard_spec, resume=resume, iteration=iteration, run_id=run_id, value=value, store=store,
            )

    # One writer per output (burnqed.lease); SIGTERM/Ctrl-C commit the finished theorems and stop the Lean pool.
    with stop_on_signals(f"burnqed search to {output}", kept="finished theorems were committed",
                         continue_with=same_command(("--resume",))), \
            hold_lease(store, output, what="search output", command=same_command()):
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
                     f"whole, hybrid: proofs sampled), each 1 to {MAX_BUDGET:,}; one search with the largest answers "
                     "them all, so they are sorted and repeats dropped (50,10,10 is 10,50). Default: 100,300,600 in "
                     "step mode, search.max_proofs/4, /2 and all of it in whole and hybrid modes.",
                     show_default=False),
    ] = None,
    pass_n: Annotated[int, typer.Option("--pass-n", min=1, max=MAX_PASS_N,
                                        help="Independent attempts per theorem (pass@N).")] = 1,
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
                           "already exists; without it a finished eval is not redone.")
    ] = False,
    show_theorems: Annotated[
        bool, typer.Option("--show-theorems", help="Also print one row per theorem: solved at which budget, or why "
                           "not; edges, tokens and where its time went.")
    ] = False,
    iteration: Annotated[int, typer.Option("--iter", min=0, max=MAX_ITERATION,
                                           help="Expert-iteration index to record.")] = 0,
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

    Like every stage, a finished eval (OUTPUT exists) is not redone: its table is printed and nothing else happens,
    unless --force. Outputs, trajectories and credentials are checked before Lean or the model start.
    """
    from burnqed.commands.edges import check_repair_room, open_policy, open_pool, open_value_fn
    from burnqed.eval.run import (
        EvalJobSettings,
        EvalRequest,
        check_eval_request,
        check_resumable,
        eval_arms,
        finished_eval,
        publish_eval,
        render_finished,
    )
    from burnqed.eval.schema import EvalResult

    cfg, store = setup(config, set_)
    budget_list = _parse_budgets(budgets) if budgets is not None else default_budgets(cfg.search)
    request = EvalRequest(output, pass_n=pass_n, iteration=iteration, ebm=ebm, ablation=ablation,
                          trajectories=trajectories, resume=resume)
    check_eval_request(request, store=store)
    for prefix in request.prefixes:
        check_trajectory_prefix(store, prefix, what="--trajectories", passes=pass_n > 1)
    if not force and (finished := finished_eval(request, store=store)) is not None:
        for text in render_finished(finished, show_theorems=show_theorems):
            typer.echo(text)
        typer.echo(f"{' and '.join(request.outputs)} already evaluated: nothing to do (--force evaluates again)")
        return
    settings = EvalJobSettings.from_config(cfg, budget_list)
    index = _load_index(theorems, split, default_split="test", store=store, world_seed=cfg.data.world_seed)
    check_resumable(request, index, settings, store=store)

    async def run() -> list[EvalResult]:
        async with open_pool(cfg.lean, cfg.search.theorems_per_worker) as (pool, size), \
                open_policy(cfg.policy, store=store) as policy, open_value_fn(ebm, cfg, store=store) as value:
            await check_repair_room(policy, cfg.search, cfg.policy)
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
    publish_eval(request, results, store=store, show_theorems=show_theorems, echo=typer.echo)
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
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Merge the trajectory prefixes of search shards into one prefix (idempotent). Every part of every input is
    verified (its Parquet footer readable, its row count the one its manifest records) before anything is
    written; a bad part is refused with its name (exit 2) and the output is left untouched."""
    from burnqed.trajectory.merge import merge_trajectories as merge

    store = setup(config, set_, output=output, folder=True).store
    check_trajectory_prefix(store, output)
    report = merge(inputs, output, allow_incomplete=allow_incomplete, store=store)
    done = "already complete, nothing copied" if report.skipped else f"copied {report.copied} parts"
    typer.echo(
        f"merged {len(report.inputs)} prefixes -> {report.output}: {report.theorems} theorems, "
        f"{report.proved} proved, {report.rows} edges in {report.parts} parts ({done})"
    )

"""`burnqed search | eval`: the prover's commands (docs/search.md); `merge-trajectories`, which merges a search's
shards, is `commands/merge.py`; those that read what they wrote, `compare`, `summary` and `show`, are
`commands/results.py`.

    burnqed search --theorems theorems.json --output runs/iter_0/search/shard-0 --shard 0/4 --resume
    burnqed eval --model runs/iter_0/export --theorems MiniF2F/Test.lean --output results/mine.json  # a .lean benchmark
    burnqed eval --ebm runs/iter_1/ebm --ablation --budgets 100,300 --output results/iter_1.json  # + iter_1-noebm.json

With no configuration these run on the embedded defaults: the replay Lean server, the tiny model in-process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from burnqed.base import progress
from burnqed.base.signals import run_async, same_command, stop_on_signals
from burnqed.commands.kit import (
    ConfigOption,
    SetOption,
    VerboseOption,
    carried,
    check_packages,
    reports_errors,
    setup,
    show_sets,
    suggestion,
)
from burnqed.commands.outputs import check_trajectory_prefix, restart_trajectory_prefix
from burnqed.commands.vocabulary import (
    OUTPUT_METAVAR,
    THEOREMS_HELP,
    ModelOption,
    StartOption,
    model_set,
)
from burnqed.config.pipeline import MAX_PASS_N, MAX_SHARDS
from burnqed.config.search import MAX_BUDGET
from burnqed.errors import InputError
from burnqed.storage import Store
from burnqed.storage.place_lease import hold_lease

if TYPE_CHECKING:
    from collections.abc import Sequence

    from burnqed.config import Config
    from burnqed.eval.arms import EvalRequest
    from burnqed.eval.result import EvalResult
    from burnqed.provenance import StageInputs
    from burnqed.search.judge import JudgeSettings
    from burnqed.stages.search import JobSettings


MAX_ITERATION = 2**31 - 1  # trajectory rows store the iteration as int32 (burnqed.trajectory.schema)


def _int32_iteration(value: int) -> int:
    """--iter of the commands that write trajectory rows: at most MAX_ITERATION, checked here rather than by typer's
    range, which would show it in help as a third form of --iter's placeholder."""
    if value > MAX_ITERATION:
        raise typer.BadParameter(f"{value} is above {MAX_ITERATION:,}, the largest iteration a trajectory row holds")
    return value


EbmOption = Annotated[
    str | None,
    typer.Option(
        "--ebm", metavar="DIR|URI",
        help="Value model (a train-ebm output, path or URI) mixed into the frontier score (search.value_weight). "
        "Embeddings come from ebm.encoder_backend on the policy model (--model).",
        show_default=False,
    ),
]


TheoremsOption = Annotated[
    str | None,
    typer.Option("--theorems", metavar="PATH|URI", show_default=False,
                 help=f"{THEOREMS_HELP} Default: the embedded corpus (the bundled theorems and the generated world; "
                 "eval: its test split)."),
]


SplitOption = Annotated[
    str | None,
    typer.Option("--split", help="Keep only the index's theorems of this split (train | valid | pool | test), or "
                 "of several: train,pool.", show_default=False),
]


ShardOption = Annotated[
    str | None, typer.Option("--shard", help="Search only shard I of N (theorem i where i % N == I), e.g. 0/4; "
                             f"0 <= I < N <= {MAX_SHARDS:,}. A shard with no theorem (more shards than "
                             "theorems) finishes empty.")
]


SearchResumeOption = Annotated[
    bool, typer.Option("--resume", help="Continue a run in OUTPUT: skip its committed theorems (a run made with "
                       "other inputs is refused; a finished one made with the same inputs is reused).")
]


SearchForceOption = Annotated[
    bool, typer.Option("--force", help="Search again from nothing: delete what OUTPUT holds (a trajectory "
                       "prefix's files only) first.")
]


UnsolvedFromOption = Annotated[
    str | None,
    typer.Option("--unsolved-from", metavar="PREFIX",
                 help="The previous iteration's trajectories: the theorems they searched and never proved are "
                 "searched at search.unsolved_budget_factor × the budget (which must then be above 1).",
                 show_default=False),
]


RunIdOption = Annotated[
    str | None,
    typer.Option("--run-id", help="Run id recorded in rows; the shards of one search share it (so they "
                 "merge as one run). Default: a new id (a resumed run keeps its own).", show_default=False),
]


@reports_errors
def search(
    output: Annotated[str, typer.Option("--output", "-o", metavar=OUTPUT_METAVAR,
                                        help="Trajectory prefix (path or URI) to write.")],
    theorems: TheoremsOption = None,
    model: ModelOption = None,
    shard: ShardOption = None,
    resume: SearchResumeOption = False,
    force: SearchForceOption = False,
    iteration: Annotated[int, typer.Option("--iter", min=0, metavar="I", callback=_int32_iteration,
                                           help="The expert iteration the rows record.")] = 0,
    split: SplitOption = None,
    run_id: RunIdOption = None,
    ebm: EbmOption = None,
    start: StartOption = None,
    unsolved_from: UnsolvedFromOption = None,
    verbose: VerboseOption = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Search theorems and write trajectories (one Parquet part per checkpoint, resumable).

    OUTPUT records what it is made from (theorems, settings, models); --resume continues only that run, and reuses
    it when finished ("reusing OUTPUT …"). --force searches again from nothing; the two together are refused."""
    from burnqed.commands.edges import open_search_edges
    from burnqed.data.theorems import load_index
    from burnqed.runner import request_inputs, reuse
    from burnqed.runner.requests import SearchRequest
    from burnqed.search.runner import parse_shard
    from burnqed.stages.search import SearchReport, search_job

    _refuse_contradictions(resume, force, start=start, ebm=ebm)
    asked = SearchRequest(iteration=iteration, theorems=theorems, split=split, shard=shard, run_id=run_id,
                          resume=resume, ebm=ebm, start=start, model=model, sets=tuple(set_ or ()),
                          unsolved_from=unsolved_from, output=output)
    cfg, store = setup(config, model_set(model, set_))
    ebm = _started_ebm(start, ebm, store)
    check_packages("search", cfg, ebm=ebm is not None)  # before the Lean pool starts
    settings = _job_settings(cfg, unsolved_from, store=store)
    try:
        shard_spec = parse_shard(shard, MAX_SHARDS) if shard else None
    except ValueError as exc:
        raise InputError(str(exc)) from None
    store.check_writable(output, folder=True)
    check_trajectory_prefix(store, output, stage="search")
    _check_ebm(ebm, store)  # after the output, before the theorems, Lean and the model
    index = load_index(theorems, split, store=store, world_seed=cfg.data.world_seed,
                       world_sketches=cfg.data.world_sketches)
    made_from = request_inputs.search_request_inputs(asked, cfg, store, index)

    async def run() -> SearchReport:
        async with open_search_edges(cfg, ebm, store=store) as edges:
            return await search_job(
                index.theorems, output, pool=edges.pool, pool_size=edges.pool_size, policy=edges.policy,
                settings=settings, shard=shard_spec, resume=resume, iteration=iteration, run_id=run_id,
                value=edges.value, made_from=made_from, planner=edges.planner,
                pantograph_version=edges.pantograph_version, store=store,
            )

    # One writer per output (storage.place_lease); SIGTERM/Ctrl-C commit the finished theorems and stop the Lean pool.
    with stop_on_signals(f"burnqed search to {output}", kept="finished theorems were committed",
                         continue_with=same_command(("--resume",), drop=("--force",))), \
            hold_lease(store, output, what="search output", command=same_command()):
        if force:
            restart_trajectory_prefix(store, output, stage="search")
        elif (found := reuse.resume_prefix(store, output, made_from, resume=resume)) is not None:
            typer.echo(reuse.reuse_line(found))
            return
        report = run_async(run())
    rate = f"{report.proved}/{report.searched}" if report.searched else "0/0"
    larger = (f", {report.larger} left unsolved last iteration at budget {report.larger_budget}"
              if report.larger_budget is not None else "")
    typer.echo(
        f"searched {report.searched} theorems ({report.skipped} already done{larger}), proved {rate}, "
        f"in {report.elapsed_s:.1f}s -> {report.output} (run {report.run_id})"
    )
    # The machinery: with -v (and always in `burnqed summary`).
    if report.throughput is not None and report.searched and progress.verbose():
        from burnqed.search.monitor import render_throughput

        typer.echo(render_throughput(report.throughput))


def _started_ebm(start: str | None, ebm: str | None, store: Store) -> str | None:
    """--ebm, or None when the start record (--start) says this search does without the value model (said so)."""
    if start is not None and ebm is not None:
        from burnqed.eval.best_so_far import read_start

        if not (begun := read_start(start, store)).search_value_model:
            typer.echo(f"searching without the value model {ebm}: {begun.reasons[-1]} ({start})", err=True)
            return None
    return ebm


def _check_ebm(ebm: str | None, store: Store) -> None:
    """--ebm is a finished value model, else one line saying what it is, before the Lean pool and the model start."""
    if ebm is not None:
        from burnqed.commands import edges

        edges.check_value_fn(ebm, store=store)


def _refuse_contradictions(resume: bool, force: bool, *, start: str | None, ebm: str | None) -> None:
    """`search --resume --force` and `search --start` without `--ebm`: refused in one line. Eval's pair redoes its
    result file from the trajectories it kept; a search's output is its trajectories, which --resume continues and
    --force deletes. The start record is read only to decide whether to use --ebm's value model."""
    if resume and force:
        raise InputError("--resume and --force contradict each other: --resume continues the search in --output, "
                         "--force deletes it and searches from nothing; give one of them")
    if start is not None and ebm is None:
        raise InputError("--start is read only to decide whether to use --ebm's value model: give --ebm too, or "
                         "drop --start")


def _job_settings(cfg: Config, unsolved_from: str | None, *, store: Store) -> JobSettings:
    """`burnqed search`'s job settings from the configuration; with `--unsolved-from`, the theorems those
    trajectories left unsolved are searched at the larger budget (`InputError` when search.unsolved_budget_factor
    is 1: there is no larger budget)."""
    from burnqed.stages.search import JobSettings, unsolved_in

    settings = JobSettings.from_config(cfg.search, cfg.policy, cfg.lean, planner=cfg.planner)
    if unsolved_from is not None:
        if cfg.search.unsolved_budget_factor == 1.0:
            raise InputError("--unsolved-from gives the theorems a larger budget: set search.unsolved_budget_factor "
                             "above 1 (it is 1)")
        settings = settings.with_unsolved(unsolved_in(unsolved_from, store=store), cfg.search, cfg.policy,
                                          cfg.planner)
    return settings


BudgetsOption = Annotated[
    str | None,
    typer.Option("--budgets", metavar="B,…", show_default=False,
                 help="Comma-separated budgets in the unit of search.mode (step, sketch: node expansions; whole, "
                 f"hybrid: proofs sampled), each 1 to {MAX_BUDGET:,}; one search with the largest answers them "
                 "all, so they are sorted and repeats dropped (50,10,10 is 10,50). Default: pipeline.eval_budgets, "
                 "the budgets `burnqed iterate` evaluates at."),
]


PassNOption = Annotated[int, typer.Option("--pass-n", min=1, max=MAX_PASS_N,
                                    help="Independent attempts per theorem (pass@N).")]


TrajectoriesOutOption = Annotated[
    str | None,
    typer.Option("--trajectories-out", metavar="PREFIX", show_default=False,
                 help="Write the trajectories under this prefix instead of beside OUTPUT (OUTPUT.json → "
                 "OUTPUT.trajectories); each finished theorem is committed there, so an interrupted eval can "
                 "continue with --resume, and `burnqed show` draws its search trees."),
]


NoTrajectoriesOutOption = Annotated[
    bool, typer.Option("--no-trajectories-out", help="Keep no trajectories: the eval cannot be resumed and "
                       "`burnqed show` has nothing to draw.")
]


EvalResumeOption = Annotated[
    bool,
    typer.Option("--resume", help="Continue an interrupted eval from its trajectories: theorems committed "
                 "there are not searched again (same --budgets, --pass-n and search.mode)."),
]


EvalForceOption = Annotated[
    bool, typer.Option("--force", help="Evaluate again even if OUTPUT (and with --ablation its -noebm twin) "
                       "is finished, starting its trajectories over (unless --resume); without it a finished eval "
                       "made with the same inputs is reused and one made with other inputs is refused.")
]


ShowTheoremsOption = Annotated[
    bool, typer.Option("--show-theorems", help="Also print one row per theorem: solved at which budget, or why "
                       "not; edges, tokens and where its time went.")
]


AblationOption = Annotated[
    bool,
    typer.Option("--ablation", help="With --ebm: also evaluate without the value model, write "
                 "OUTPUT-noebm.json beside OUTPUT and print both arms side by side."),
]

DeferJudgeOption = Annotated[
    bool, typer.Option("--defer-judge", help="With lean.judge = 'comparator': run no comparator here and record each "
                       "theorem's judge as pending; `burnqed judge` (the workflows' judge step, in a pod of its own) "
                       "judges the proofs OUTPUT counts. No effect with burnqed as the judge.")
]


@reports_errors
def evaluate(
    output: Annotated[str, typer.Option("--output", "-o", metavar=OUTPUT_METAVAR,
                                        help="Write the eval result JSON here (path or URI).")],
    theorems: TheoremsOption = None,
    model: ModelOption = None,
    budgets: BudgetsOption = None,
    pass_n: PassNOption = 1,
    trajectories_out: TrajectoriesOutOption = None,
    no_trajectories_out: NoTrajectoriesOutOption = False,
    resume: EvalResumeOption = False,
    force: EvalForceOption = False,
    show_theorems: ShowTheoremsOption = False,
    iteration: Annotated[int, typer.Option("--iter", min=0, metavar="I", callback=_int32_iteration,
                                           help="The expert iteration the result records.")] = 0,
    split: SplitOption = None,
    ebm: EbmOption = None,
    ablation: AblationOption = False,
    defer_judge: DeferJudgeOption = False,
    verbose: VerboseOption = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Evaluate on a benchmark at several budgets: a table on stdout, the full result as JSON (with the tokens
    generated and Lean requests sent at each budget, and per theorem what happened and what it cost).
    `--set search.mode=whole|hybrid` evaluates the whole-proof modes, `--set search.mode=sketch` sketch search (a
    planner writes `have … := by sorry` sketches, each hole searched step by step; the planner is the policy, or
    the model the planner section names, and must have been trained on the sketch format: docs/search.md, "Sketch
    search").

    Like every stage, a finished eval (OUTPUT exists) made with the same inputs (theorems, budgets, settings, model,
    value model) is reused: "reusing OUTPUT …" first, then its table; one made with other inputs is refused with the
    first difference (exit 2). --force evaluates again. Outputs, trajectories and credentials are checked before
    Lean or the model start.

    When the model records the data it was trained on (an iteration's export), the training theorems of that data
    that restate a theorem evaluated are named before the search and listed in OUTPUT (decontamination, docs/data.md).
    """
    from burnqed.commands.edges import open_search_edges
    from burnqed.data.theorems import load_index
    from burnqed.eval.arms import EvalRequest, check_eval_request
    from burnqed.eval.identity import EvalJobSettings, eval_budgets
    from burnqed.eval.stage import run_eval
    from burnqed.runner import requests
    from burnqed.runner.request_inputs import eval_request_inputs
    from burnqed.search.judge import check_definition_holes, check_judge

    cfg, store = setup(config, model_set(model, set_))
    check_packages("eval", cfg, ebm=ebm is not None)  # before the Lean pool starts
    budget_list = eval_budgets(budgets, cfg.pipeline)
    request = EvalRequest(output, pass_n=pass_n, iteration=iteration, ebm=ebm, ablation=ablation,
                          trajectories=trajectories_out, resume=resume, keep_trajectories=not no_trajectories_out)
    check_eval_request(request, store=store)
    for prefix in request.prefixes:
        check_trajectory_prefix(store, prefix, stage="eval", what="--trajectories-out", passes=pass_n > 1)
    _check_ebm(ebm, store)  # after the outputs, before the theorems, Lean and the model
    settings = EvalJobSettings.from_config(cfg, budget_list, defer_judge=defer_judge)
    index = load_index(theorems, split, default_split="test", store=store, world_seed=cfg.data.world_seed,
                       world_sketches=cfg.data.world_sketches)
    check_definition_holes(index.theorems, settings.judge, cfg.lean.lean_version())  # before any search
    asked = requests.EvalRequest(iteration=iteration, theorems=theorems, split=split, budgets=budgets, pass_n=pass_n,
                                 resume=resume, ebm=ebm, ablation=ablation, model=model, sets=tuple(set_ or ()),
                                 defer_judge=defer_judge, trajectories_out=trajectories_out, output=output)
    made_from = [made for _, made in eval_request_inputs(asked, cfg, store, index, settings)]
    if not force and (reused := _reused_eval(request, made_from, judge=settings.judge, show_theorems=show_theorems,
                                             store=store)) is not None:
        _alarm_exit(reused)
        return
    run_async(check_judge(settings.judge))  # positive evidence that comparator judges, before the search
    results = run_eval(request, index, settings, config=cfg, made_from=made_from,
             restart=force and not resume,  # the trajectories are this eval's own output: --force redoes them too
             open_edges=lambda: open_search_edges(cfg, ebm, store=store),
             start_over=lambda prefix: restart_trajectory_prefix(store, prefix, stage="eval",
                                                                 what="--trajectories-out", passes=pass_n > 1),
             show_theorems=show_theorems, store=store, echo=typer.echo, warn=lambda line: typer.echo(line, err=True))
    prefixes = request.prefixes
    show = suggestion(["show", _drawn(request.outputs[0], store), "--trajectories", prefixes[0]],
                      carried(config=config, sets=show_sets(set_))) if prefixes else ""
    kept_at = f" (trajectories: {' and '.join(prefixes)}; `{show}` draws one theorem's search)" if prefixes else ""
    typer.echo(f"wrote {' and '.join(request.outputs)}{kept_at}")
    _alarm_exit(results)


def _alarm_exit(results: Sequence[EvalResult]) -> None:
    """Exit SOUNDNESS_ALARM_EXIT, after one line, when comparator refused a proof burnqed counted (`eval.judging`)."""
    from burnqed.eval.judging import alarm_lines
    from burnqed.search.judge import SOUNDNESS_ALARM_EXIT

    if any(alarm_lines(result) for result in results):
        typer.echo(f"error: soundness alarm: comparator refused proofs burnqed counted (listed above; not counted); "
                   f"exit {SOUNDNESS_ALARM_EXIT}", err=True)
        raise typer.Exit(SOUNDNESS_ALARM_EXIT)


def _drawn(result: str, store: Store) -> str:
    """The theorem the `show` an eval suggests names, so that it runs as printed: the first the eval proved, else the
    first it evaluated, else `THEOREM`."""
    from burnqed.eval.result import load_eval_result

    evaluated = load_eval_result(result, store=store).per_theorem
    return next((t.name for t in evaluated if t.proved), evaluated[0].name if evaluated else "THEOREM")


def _reused_eval(request: EvalRequest, made_from: Sequence[StageInputs], *, judge: JudgeSettings,
                 show_theorems: bool, store: Store) -> list[EvalResult] | None:
    """`already_done` for an eval's arms: the results when every result file exists made from `made_from` (one per
    arm) and counted by the configured judge (`judge`), after printing "reusing OUTPUT …", the tables and the
    decontamination lines; `InputError` (exit 2) when one was made from other inputs or counted by another judge;
    None when one is missing."""
    from burnqed.data.decontaminate import check_lines
    from burnqed.eval.arms import finished_eval, render_finished
    from burnqed.eval.judging import judges_of
    from burnqed.runner.reuse import check_reusable, reuse_line
    from burnqed.runner.reuse import finished_eval as finished

    if (results := finished_eval(request, store=store)) is None:
        return None
    found = [finished(uri, result) for uri, result in zip(request.outputs, results, strict=True)]
    for arm, now in zip(found, made_from, strict=True):
        check_reusable(arm, now, "eval result")  # never another eval's table as this one's
    wanted = judge.name
    for uri, result in zip(request.outputs, results, strict=True):
        if judges_of(result) != {wanted}:
            raise InputError(f"{uri} was counted by {', '.join(sorted(judges_of(result)))}, not by {wanted} "
                             "(lean.judge): --force evaluates again")
    for arm in found:
        typer.echo(reuse_line(arm))
    for text in render_finished(results, show_theorems=show_theorems):
        typer.echo(text)
    for line in check_lines(results[0].training_check):
        typer.echo(line, err=True)
    return results



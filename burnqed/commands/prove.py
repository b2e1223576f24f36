"""`burnqed search | eval | compare | summary | show | merge-trajectories`: the prover's commands (docs/search.md).

    burnqed search --theorems theorems.json --output runs/iter_0/search/shard-0 --shard 0/4 --resume
    burnqed eval --model runs/iter_0/export --theorems MiniF2F/Test.lean --output results/mine.json  # a .lean benchmark
    burnqed eval --ebm runs/iter_1/ebm --ablation --budgets 100,300 --output results/iter_1.json  # + iter_1-noebm.json
    burnqed compare results/iter_0.json results/iter_1.json
    burnqed summary runs/iter_0/search/shard-0
    burnqed show mathd_algebra_10 --root runs --iter 1          # one theorem's search tree, from the trajectories
    burnqed merge-trajectories runs/iter_0/search/shard-0 runs/iter_0/search/shard-1 --output runs/iter_0/trajectories

With no configuration these run on the embedded defaults: the replay Lean server, the tiny model in-process.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from burnqed.base import progress
from burnqed.base.signals import run_async, same_command, stop_on_signals
from burnqed.commands.kit import (
    ConfigOption,
    SetOption,
    VerboseOption,
    already_done,
    carried,
    check_packages,
    reports_errors,
    setup,
    show_sets,
    suggestion,
)
from burnqed.commands.outputs import check_not_an_input, check_trajectory_prefix, restart_trajectory_prefix
from burnqed.commands.vocabulary import (
    OUTPUT_METAVAR,
    THEOREMS_HELP,
    ModelOption,
    StartOption,
    last_iteration,
    model_set,
)
from burnqed.config.pipeline import MAX_PASS_N, MAX_SHARDS
from burnqed.config.search import MAX_BUDGET
from burnqed.errors import BurnqedError, InputError
from burnqed.storage import Store
from burnqed.storage.place_lease import hold_lease

if TYPE_CHECKING:
    from collections.abc import Sequence

    from burnqed.config import Config
    from burnqed.eval.judging import JudgeSettings
    from burnqed.eval.result import EvalResult
    from burnqed.eval.run import EvalRequest
    from burnqed.provenance import StageInputs
    from burnqed.stages.search import JobSettings
    from burnqed.trajectory.reader import TheoremSearch

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
    from burnqed.runner.requests import SearchRequest
    from burnqed.runner.reuse import resume_prefix, reuse_line, search_request_inputs
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
    made_from = search_request_inputs(asked, cfg, store, index)

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
        elif (found := resume_prefix(store, output, made_from, resume=resume)) is not None:
            typer.echo(reuse_line(found))
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
    from burnqed.eval.judging import check_definition_holes, check_judge
    from burnqed.eval.run import EvalJobSettings, EvalRequest, check_eval_request, eval_budgets
    from burnqed.eval.stage import run_eval
    from burnqed.runner import requests
    from burnqed.runner.reuse import eval_request_inputs

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
    from burnqed.eval.judging import SOUNDNESS_ALARM_EXIT, alarm_lines

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
    from burnqed.eval.judging import judges_of
    from burnqed.eval.run import finished_eval, render_finished
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


@reports_errors
def compare(
    results: Annotated[
        list[str], typer.Argument(help="Eval result JSON files (paths or URIs), oldest first.", show_default=False)
    ],
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", metavar=OUTPUT_METAVAR, show_default=False,
                     help="Also write the comparison it prints as JSON here (path or URI)."),
    ] = None,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Compare eval results: a table per budget, the change from the first to the last, the results at equal
    generated tokens and at equal Lean calls per theorem, newly solved theorems. --output is never one of the
    results, and replaces only an earlier comparison."""
    from burnqed.eval.compare import Comparison, compare_results, render_comparison, write_comparison

    store = setup(config, set_).store
    if len(results) < 2:
        raise InputError("compare needs at least two result files")
    if output is not None:
        store.check_writable(output)
        check_not_an_input(output, results)
        store.check_replaceable_file(output, Comparison, "a comparison (`burnqed compare --output`)")
    loaded = [(str(path), _compared(path, store)) for path in results]
    comparison = compare_results(loaded)
    typer.echo(render_comparison(comparison))
    if output is not None:
        write_comparison(comparison, output, store=store)
        typer.echo(f"wrote {output}")


COMPARED = "eval results (the eval.json `burnqed eval --output` writes; an iteration's: iter_N/eval/eval.json)"


def _compared(path: str, store: Store) -> EvalResult:
    """The eval result at `path`; another document burnqed writes (an iteration's report.json, a data report, a
    theorem index) is refused saying what it is and what compare takes, not by its first missing field."""
    from burnqed.data.index import other_document
    from burnqed.eval.result import load_eval_result

    try:
        return load_eval_result(path, store=store)
    except InputError:
        try:
            document = json.loads(store.read_bytes(path))
        except (ValueError, BurnqedError):
            raise  # the eval result's own refusal
        other = ("a theorem index (what --theorems reads)" if isinstance(document, dict)
                 and isinstance(document.get("theorems"), list) else other_document(document))
        if other is None or other.startswith(("an eval result", "a JSON object", "an empty")):
            raise  # an eval result with a broken field, or other keys: its first problem says more
        raise InputError(f"{path} is {other}, not an eval result: compare takes {COMPARED}") from None


@reports_errors
def summary(
    uri: Annotated[str, typer.Argument(help="Trajectory prefix (path or URI).", show_default=False)],
    json_out: Annotated[bool, typer.Option("--json", help="Print the summary as JSON instead of a table.")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Summarise a trajectory prefix: proof rate, outcomes, proof depths, candidates per expansion, time split."""
    from burnqed.stages.summary import render_summary, summarize
    from burnqed.trajectory.reader import require_trajectories

    store = setup(config, set_).store
    require_trajectories(uri, store=store)
    result = summarize(uri, store=store)
    typer.echo(result.model_dump_json(indent=2) if json_out else render_summary(result))


@reports_errors
def show(
    theorem: Annotated[str, typer.Argument(help="The theorem's name.", show_default=False)],
    trajectories: Annotated[
        str | None,
        typer.Option("--trajectories", metavar="PREFIX", show_default=False,
                     help="Trajectory prefix to read (an eval's R.trajectories, a search output, merged trajectories). "
                     "Default: look in the run root's iteration (--root, --iter)."),
    ] = None,
    root: Annotated[
        str | None,
        typer.Option("--root", help="Run root URI whose iteration to look in; default: storage.root.",
                     show_default=False),
    ] = None,
    iteration: Annotated[
        int | None, typer.Option("--iter", min=0, metavar="I", show_default=False,
                                 help="The expert iteration to look in. Default: the last under the run root.")
    ] = None,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Which search, when the prefix holds several of the theorem (a "
                                 "merged prefix: the search and its noise pass).", show_default=False)
    ] = None,
    depth: Annotated[int, typer.Option("--depth", min=1, help="Draw nothing deeper than this.")] = 8,
    max_nodes: Annotated[
        int, typer.Option("--max-nodes", min=1, help="Draw at most this many nodes besides the proof path (breadth "
                          "first); what is left out is counted under its parent.")
    ] = 60,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Draw one theorem's search tree from the trajectories: the states, the tactics tried from each, Lean's answers,
    the search's scores and the proof path. Without --trajectories it looks in the run root's iteration: its evals'
    trajectories (kept beside each eval.json), then its training searches."""
    import shutil

    from burnqed.trajectory.theorem_tree import render_search

    cfg, store = setup(config, set_)
    searches = _find_searches(theorem, trajectories, root or cfg.storage.root, iteration, cfg.pipeline.eval_modes,
                              store=store)
    chosen = [s for s in searches if run_id is None or s.run_id == run_id]
    if not chosen:
        runs = ", ".join(s.run_id for s in searches)
        raise InputError(f"--run-id {run_id}: {theorem} was searched in run(s) {runs} under {searches[0].uri}")
    width = max(80, shutil.get_terminal_size((120, 24)).columns)
    typer.echo(render_search(chosen[0], max_depth=depth, max_nodes=max_nodes, width=width), nl=False)
    others = [s.run_id for s in searches if s is not chosen[0]]
    if others:
        typer.echo(f"also searched in run {', '.join(others)} (--run-id draws it)")


def _find_searches(theorem: str, trajectories: str | None, root: str, iteration: int | None,
                   modes: Sequence[str], *, store: Store) -> list[TheoremSearch]:
    """The searches of `theorem` in the first prefix that records it: `trajectories` (or its pass-K prefixes), else the
    iteration's eval trajectories (main, ablation, base, modes), then its training searches. `InputError` naming
    where it looked (and close names) when none does."""
    from difflib import get_close_matches

    from burnqed import storage
    from burnqed.base import uris
    from burnqed.layout import Layout
    from burnqed.trajectory.reader import read_results, read_theorem

    if trajectories is not None:
        if not store.exists(trajectories):
            raise InputError(f"--trajectories {trajectories} does not exist: give a trajectory prefix (an eval's "
                             "R.trajectories, a search output, merged trajectories)")
        places = [("--trajectories", trajectories)]
    else:
        uris.check_uri(root, "--root")
        at = Layout(storage.normalize(root))
        i = iteration if iteration is not None else last_iteration(at, store=store) or 0
        if not store.exists(at.iter_dir(i)):
            raise InputError(f"{at.iter_dir(i)} does not exist: check --root and --iter, or give --trajectories "
                             "PREFIX")
        places = [(f"iteration {i}'s eval", at.eval_trajectories(i))]
        places += [(f"iteration {i}'s eval without the value model", at.eval_trajectories(i, with_ebm=False))] if i \
            else [("the base policy's eval", at.eval_base_trajectories())]
        places += [(f"iteration {i}'s {mode} eval", at.eval_trajectories(i, mode=str(mode))) for mode in modes]
        places.append((f"iteration {i}'s training searches", at.trajectories(i)))
    names: set[str] = set()
    looked: list[str] = []
    for _, uri in places:
        for prefix in _with_passes(uri, store=store):
            found = read_theorem(prefix, theorem, store=store)
            if found:
                return found
            held = {result.name for result in read_results(prefix, store=store)}
            if held:
                names |= held
                looked.append(prefix)
    close = get_close_matches(theorem, sorted(names), n=3)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    where = ", ".join(looked) if looked else ", ".join(uri for _, uri in places) + " (none holds trajectories)"
    raise InputError(f"theorem {theorem} is in none of the trajectories looked in ({where}){hint} "
                     "(an eval run with --no-trajectories-out keeps none)")


def _with_passes(uri: str, *, store: Store) -> list[str]:
    """`uri`, or its pass prefixes (`pass-0`, `pass-1`, …) when it is a pass@N eval's trajectories."""
    from burnqed.storage import join
    from burnqed.trajectory.reader import committed_parts

    if committed_parts(uri, store=store) or not store.exists(join(uri, "pass-0")):
        return [uri]
    passes: list[str] = []
    while store.exists(join(uri, f"pass-{len(passes)}")):
        passes.append(join(uri, f"pass-{len(passes)}"))
    return passes


@reports_errors
def merge_trajectories(
    inputs: Annotated[list[str], typer.Argument(help="Shard prefixes to merge.", show_default=False)],
    output: Annotated[str, typer.Option("--output", "-o", metavar=OUTPUT_METAVAR,
                                                      help="Merged trajectory prefix (path or URI).")],
    allow_incomplete: Annotated[
        bool, typer.Option("--allow-incomplete", help="Merge shards that did not finish (no _SUCCESS.json).")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Merge again from nothing even if OUTPUT is finished (from the same "
                           "inputs: reused; from others: refused).")
    ] = False,
    theorems: TheoremsOption = None,
    split: SplitOption = None,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Merge the trajectory prefixes of search shards into one prefix (idempotent). Every part of every input is
    verified before anything is written: its bytes against the SHA-256 its manifest records (a part from before
    digests: its page checksums), its Parquet footer and columns, every row decoded and counted against its
    manifest; a bad part is refused with its name (exit 2) and the output is left untouched. With lean.judge =
    "comparator", the proofs the shards recorded are judged first (--theorems and --split name the search's
    theorems, as search's do): a proof comparator refuses is no positive in OUTPUT, a soundness alarm (exit 4)."""
    from burnqed.runner.requests import MergeRequest
    from burnqed.runner.reuse import merge_inputs
    from burnqed.stages.judge_merge import merge_judge
    from burnqed.stages.merge import merge_trajectories as merge
    from burnqed.trajectory.reader import read_marker

    cfg, store = setup(config, set_, output=output, folder=True)
    check_not_an_input(output, inputs)
    check_trajectory_prefix(store, output, stage="merge-trajectories")
    settings, judge = merge_judge(cfg, theorems, split, store=store)
    asked = MergeRequest(inputs=tuple(inputs), theorems=theorems, split=split, output=output)
    made_from = merge_inputs(store, inputs=asked.inputs, judged=settings.comparator is not None)
    if already_done(store, output, "merged trajectory", made_from=made_from, force=force):
        found = read_marker(output, store=store)
        _merge_alarms(found.extra if found is not None else {})
        return
    if force:
        restart_trajectory_prefix(store, output, stage="merge-trajectories")
    report = merge(inputs, output, allow_incomplete=allow_incomplete, made_from=made_from,
                   judge=judge() if settings.comparator is not None else None, store=store)
    done = "already complete, nothing copied" if report.skipped else f"copied {report.copied} parts"
    typer.echo(
        f"merged {len(report.inputs)} prefixes -> {report.output}: {report.theorems} theorems, "
        f"{report.proved} proved, {report.rows} edges in {report.parts} parts ({done})"
        + (f"; judged by comparator: {len(report.alarms)} refused" if report.judge == "comparator" else "")
    )
    _merge_alarms({"judge": {"alarms": report.alarms}})


def _merge_alarms(extra: dict[str, object]) -> None:
    """Each soundness alarm a merged prefix records (`_SUCCESS.json`'s `extra["judge"]`), then exit
    SOUNDNESS_ALARM_EXIT when there is one."""
    from burnqed.eval.judging import SOUNDNESS_ALARM_EXIT

    judged = extra.get("judge")
    alarms = judged.get("alarms") if isinstance(judged, dict) else None
    if not isinstance(alarms, list) or not alarms:
        return
    for line in alarms:
        typer.echo(str(line))
    typer.echo(f"error: soundness alarm: comparator refused proofs the search verified (listed above; no positive "
               f"in the merged trajectories); exit {SOUNDNESS_ALARM_EXIT}", err=True)
    raise typer.Exit(SOUNDNESS_ALARM_EXIT)

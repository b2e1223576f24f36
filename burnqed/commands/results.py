"""`burnqed compare | summary | show`: the commands that read what the prover wrote (docs/search.md).

    burnqed compare results/iter_0.json results/iter_1.json
    burnqed summary runs/iter_0/search/shard-0
    burnqed show mathd_algebra_10 --root runs --iter 1          # one theorem's search tree, from the trajectories
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from burnqed.commands.kit import (
    ConfigOption,
    SetOption,
    reports_errors,
    setup,
)
from burnqed.commands.outputs import check_not_an_input
from burnqed.commands.vocabulary import (
    OUTPUT_METAVAR,
    last_iteration,
)
from burnqed.errors import BurnqedError, InputError
from burnqed.storage import Store

if TYPE_CHECKING:
    from collections.abc import Sequence

    from burnqed.eval.result import EvalResult
    from burnqed.trajectory.reader import TheoremSearch


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

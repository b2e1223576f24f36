"""`burnqed merge-trajectories`: the trajectory prefixes of a search's shards merged into one (docs/search.md).

    burnqed merge-trajectories runs/iter_0/search/shard-0 runs/iter_0/search/shard-1 --output runs/iter_0/trajectories
"""

from __future__ import annotations

from typing import Annotated

import typer

from burnqed.commands.kit import ConfigOption, SetOption, already_done, reports_errors, setup
from burnqed.commands.outputs import check_not_an_input, check_trajectory_prefix, restart_trajectory_prefix
from burnqed.commands.prove import SplitOption, TheoremsOption
from burnqed.commands.vocabulary import OUTPUT_METAVAR


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
    from burnqed.search.judge import SOUNDNESS_ALARM_EXIT

    judged = extra.get("judge")
    alarms = judged.get("alarms") if isinstance(judged, dict) else None
    if not isinstance(alarms, list) or not alarms:
        return
    for line in alarms:
        typer.echo(str(line))
    typer.echo(f"error: soundness alarm: comparator refused proofs the search verified (listed above; no positive "
               f"in the merged trajectories); exit {SOUNDNESS_ALARM_EXIT}", err=True)
    raise typer.Exit(SOUNDNESS_ALARM_EXIT)

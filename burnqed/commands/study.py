"""`burnqed joint-study`: the measurement stage of the three-configuration study of joint training.

    burnqed joint-study --iter 1 --root runs --trajectories runs/iter_0/trajectories --output runs/iter_1/study/metrics

Reads the study's policies and value models from the run layout (`burnqed.eval.joint_study.study_configurations`:
A = iter_i/study/a/{export,ebm}, B = iter_i/export + iter_i/study/b/ebm, C = iter_i/export + iter_i/ebm), embeds
every trajectory state with each policy's encoder and writes `study.json` (embedding health, value-model metrics,
a 2-D projection per configuration) at OUTPUT. `burnqed report` joins it with the three evals.
"""

from __future__ import annotations

from typing import Annotated

import typer

from burnqed.commands.ebm import TrajectoriesOption
from burnqed.commands.kit import ConfigOption, SetOption, already_done, reports_errors, setup
from burnqed.commands.vocabulary import OUTPUT_METAVAR, last_iteration


@reports_errors
def joint_study(
    output: Annotated[str, typer.Option("--output", "-o", metavar=OUTPUT_METAVAR,
                                                      help="Output folder of study.json (path or URI).")],
    trajectories: TrajectoriesOption,
    iteration: Annotated[int | None, typer.Option(
        "--iter", min=1, metavar="I", show_default=False,
        help="The expert iteration whose study to measure (≥ 1). Default: the last under the run root.")] = None,
    root: Annotated[str | None, typer.Option("--root", help="Run root URI; default: storage.root.",
                                             show_default=False)] = None,
    force: Annotated[bool, typer.Option("--force", help="Measure again even if OUTPUT is already finished.")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Measure configurations A, B and C of the joint-training study (embedding health, value-model metrics)."""
    import asyncio

    from burnqed import storage
    from burnqed.base import uris
    from burnqed.commands.ebm import open_encoder
    from burnqed.errors import InputError
    from burnqed.eval.joint_study import STUDY_FILE, measure_study, study_configurations
    from burnqed.layout import Layout
    from burnqed.runner.requests import JointStudyRequest
    from burnqed.runner.reuse import joint_study_inputs

    cfg, store = setup(config, set_, output=output, folder=True, stage="joint-study")
    uris.check_uri(root or cfg.storage.root, "--root" if root else "storage.root")
    at = Layout(storage.normalize(root or cfg.storage.root))
    if iteration is None:
        iteration = last_iteration(at, store=store) or 0
        if iteration < 1:
            raise InputError(f"{at.root} holds no iteration ≥ 1, whose study joint-study measures: give --root or "
                             "--iter")
    asked = JointStudyRequest(iteration=iteration, root=root or cfg.storage.root, trajectories=tuple(trajectories),
                              output=output)
    made_from = joint_study_inputs(cfg, store, trajectories=asked.trajectories, root=asked.root,
                                   iteration=asked.iteration)
    if already_done(store, output, "joint-study output", made_from=made_from, force=force):
        return
    configurations = study_configurations(at, iteration)
    for name, needed in configurations.items():
        for uri in needed:
            if not store.is_done(uri):
                raise InputError(f"configuration {name} needs {uri}, which is not finished: run the iteration's "
                                 f"study stages first (burnqed plan --iter {iteration})")
    metrics = asyncio.run(measure_study(cfg, iteration=iteration, trajectories=trajectories,
                                        configurations=configurations, cache=output.rstrip("/") + "-cache",
                                        store=store, echo=lambda line: typer.echo(line, err=True),
                                        open_encoder=open_encoder))
    with store.staged_output(output, "joint-study", {"iteration": iteration}, made_from=made_from) as folder:
        (folder / STUDY_FILE).write_text(metrics.model_dump_json(indent=2) + "\n", encoding="utf-8")
    typer.echo(f"wrote {output}")

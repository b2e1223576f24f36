"""`burnqed judge`: a finished eval's counted proofs judged by Lean's comparator, apart from the search
(docs/cluster.md, "The judge step"; `burnqed.eval.judge_step`). The workflows run it as the judge step after each
eval when lean.judge = "comparator": the eval runs with --defer-judge (its judge `pending`), this writes the eval's
result with comparator's verdict where the reports read it.

    burnqed judge --input runs/iter_0/eval/eval.unjudged.json --theorems bench.json --output runs/iter_0/eval/eval.json

Exit 4 (SOUNDNESS_ALARM_EXIT) after writing OUTPUT when comparator refused a proof burnqed counted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from burnqed.commands.kit import ConfigOption, SetOption, reports_errors, setup
from burnqed.commands.prove import SplitOption, TheoremsOption
from burnqed.commands.prove import _alarm_exit as alarm_exit
from burnqed.commands.vocabulary import OUTPUT_METAVAR

if TYPE_CHECKING:
    from burnqed.eval.result import EvalResult


@reports_errors
def judge(
    input_: Annotated[str, typer.Option("--input", "-i", metavar="PATH|URI",
                                        help="The eval result to judge (an eval run with --defer-judge, or any "
                                        "finished eval.json).")],
    output: Annotated[str, typer.Option("--output", "-o", metavar=OUTPUT_METAVAR,
                                        help="Write the judged eval result here (path or URI).")],
    theorems: TheoremsOption = None,
    split: SplitOption = None,
    force: Annotated[bool, typer.Option("--force", help="Judge again even if OUTPUT is finished.")] = False,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Judge the proofs a finished eval counts with Lean's comparator (lean.judge = "comparator",
    lean.comparator_command) and write the result with its verdict: a proof comparator refuses is a soundness alarm,
    its theorem not counted at any budget (exit 4). --theorems and --split name the eval's benchmark, as eval's do.
    A finished OUTPUT is reused (its verdict printed again) unless --force."""
    from burnqed.base.signals import run_async
    from burnqed.data.theorems import load_index
    from burnqed.errors import InputError
    from burnqed.eval.arms import judge_texts
    from burnqed.eval.judge_step import judge_result
    from burnqed.eval.result import EvalResult, load_eval_result, write_eval_result
    from burnqed.lean.comparator import ComparatorSettings
    from burnqed.search.judge import JudgeSettings, check_definition_holes, check_judge

    cfg, store = setup(config, set_, output=output)
    found = load_eval_result(output, store=store) if store.is_done(output) and not force else None
    if found is not None and not _judged_from(found, load_eval_result(input_, store=store)):
        typer.echo(f"judging {input_} again: it is not the eval {output} was judged from")
        found = None
    if found is not None:
        judged = found
        typer.echo(f"reusing {output} (judged already; --force judges again)")
    else:
        if output.endswith(".json") and output == input_:
            raise InputError(f"--output {output} is --input: write the judged result beside it")
        store.check_replaceable_file(output, EvalResult, "an eval result")
        result = load_eval_result(input_, store=store)
        settings = JudgeSettings.of(cfg.lean.judged_by(), ComparatorSettings.of(cfg.lean), result.lean_backend)
        if settings.comparator is None:
            raise InputError(f"{input_}: nothing to judge with: burnqed judges a {result.lean_backend} Lean's proofs "
                             f"here ({settings.why}); the judge step needs comparator")
        index = load_index(theorems, split, default_split="test", store=store, world_seed=cfg.data.world_seed,
                           world_sketches=cfg.data.world_sketches)
        check_definition_holes(index.theorems, settings, cfg.lean.lean_version())
        run_async(check_judge(settings))  # positive evidence that comparator judges, before judging
        try:
            judged = run_async(judge_result(result, index.theorems, settings))
        except ValueError as exc:
            raise InputError(f"{input_}: {exc}") from None
        write_eval_result(judged, output, store=store)
        typer.echo(f"judged {len([r for r in judged.per_theorem if r.judge and r.judge.accepted is not None])} "
                   f"proof(s) of {input_} -> {output}")
    for line in judge_texts(judged):
        typer.echo(line)
    alarm_exit([judged])


def _judged_from(judged: EvalResult, unjudged: EvalResult) -> bool:
    """`judged` is the judge's result of `unjudged` (the same eval: its timestamp and what it was made from)."""
    return (judged.timestamp, judged.made_from) == (unjudged.timestamp, unjudged.made_from)

"""`burnqed start`: what iteration I ≥ 1 starts from, never below the best so far (docs/pipeline.md, "Start of an
iteration"): the best policy by its LLM-only eval, the best value model where it helped, and whether search uses the
value model, written as a start record that `sft --start`, `train-ebm --start` and `search --start` read.

    burnqed start --root runs --iter 3 --output runs/iter_3/start.json

The iteration's start stage runs it from iteration 1 when pipeline.start is "best", and from iteration 2 when it is
"base" (the default), which chooses no policy: SFT trains the base model afresh. It reads the published evals of
iterations 0..I-1 (`burnqed.eval.best_so_far`) and prints one line per decision.
"""

from __future__ import annotations

from typing import Annotated

import typer

from burnqed.commands.kit import ConfigOption, SetOption, reports_errors, setup
from burnqed.commands.runs import RootOption
from burnqed.commands.vocabulary import OUTPUT_METAVAR


@reports_errors
def start(
    iteration: Annotated[int | None, typer.Option(
        "--iter", min=1, metavar="I", show_default=False,
        help="The iteration to start (≥ 1). Default: the last under the run root with a finished eval, plus one.")
    ] = None,
    output: Annotated[str | None, typer.Option(
        "--output", "-o", metavar=OUTPUT_METAVAR, show_default=False,
        help="The start record (a .json path or URI) to write. Default: the run layout's, ROOT/iter_I/start.json.")
    ] = None,
    root: RootOption = None,
    config: ConfigOption = None,
    set_: SetOption = None,
) -> None:
    """Decide what iteration I starts from (the best policy so far, none under pipeline.start = "base"; the best
    value model so far, and whether search uses it) from the evals of iterations 0..I-1 and write it as a start
    record."""
    from burnqed import storage
    from burnqed.base import uris
    from burnqed.commands.kit import carried, suggestion
    from burnqed.commands.runs import under_root
    from burnqed.commands.vocabulary import last_evaluated, require_run_root
    from burnqed.errors import InputError
    from burnqed.eval.best_so_far import choose_start, load_results
    from burnqed.layout import Layout
    from burnqed.runner.requests import StartRequest
    from burnqed.runner.reuse import start_inputs

    if output is not None and not output.endswith(".json"):
        raise InputError(f"--output {output}: a start record is a .json file")
    cfg, store = setup(config, set_, output=output)
    uris.check_uri(root or cfg.storage.root, "--root" if root else "storage.root")
    cfg, _ = under_root(cfg, config, set_, store, root)  # pipeline.start is the experiment's when not given
    at = Layout(storage.normalize(root or cfg.storage.root))
    first = suggestion(["iterate", "--iter", "0"], carried(root=root, config=config, sets=set_))
    require_run_root(at, store=store, command=first)
    if iteration is None:
        iteration = last_evaluated(at, store=store, command=first) + 1
    if output is None:
        output = at.start(iteration)
        store.check_writable(output)
    asked = StartRequest(root=at.root, iteration=iteration, output=output)
    record = choose_start(load_results(at, iteration, store), iteration, at, rl=cfg.rl.enabled,
                          setting="base" if cfg.pipeline.start == "base" else "best",
                          search=cfg.pipeline.search_value_model).model_copy(
        update={"made_from": start_inputs(cfg, store, root=asked.root, iteration=asked.iteration)})
    store.write_bytes(output, (record.model_dump_json(indent=1) + "\n").encode())
    for reason in record.reasons:
        typer.echo(f"start of iteration {iteration}: {reason}")
    typer.echo(f"wrote {output}")

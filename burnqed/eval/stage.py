"""`burnqed eval` as one stage call: everything between a checked request and the summary line (docs/search.md,
"`burnqed eval` and `burnqed compare`").

    run_eval(request, index, settings, config=cfg, made_from=made_from, restart=force and not resume,
             open_edges=lambda: open_search_edges(cfg, ebm, store=store), start_over=start_over,
             show_theorems=False, store=store, echo=typer.echo, warn=lambda line: typer.echo(line, err=True))

In order: every pass prefix checked resumable (or, with `restart`, only writable) before Lean or the model start;
the model's training data checked against the theorems (decontamination, route `eval`: docs/data.md) and said on
`warn`; a warning for a sketch eval whose planner never trained on sketches; then, holding each prefix's lease
(`storage.place_lease`) and handling SIGTERM/Ctrl-C (`base.signals`: the finished theorems are committed, the
command to continue is named), the prefixes started over with `restart` and every arm run on the edges
`open_edges` opens; last, each arm's result published with what it is made from. Whether a finished eval is reused
is the command's question, asked before this (`runner.reuse` is a layer above).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Protocol

from burnqed.base.signals import run_async, same_command, stop_on_signals
from burnqed.data.decontaminate import check_lines, check_training_data
from burnqed.eval.arms import EvalRequest, check_resumable, eval_arms, publish_eval
from burnqed.eval.identity import EvalJobSettings
from burnqed.eval.lemma_library import attach_library
from burnqed.eval.result import EvalResult
from burnqed.eval.run import untrained_planner
from burnqed.storage import Store
from burnqed.storage.place_lease import hold_lease

if TYPE_CHECKING:
    from burnqed.config import Config
    from burnqed.lean.env import WorkerPool
    from burnqed.policy.base import Policy
    from burnqed.provenance import StageInputs
    from burnqed.records.theorem import TheoremIndex
    from burnqed.search.value import ValueFn


class EvalEdges(Protocol):
    """What an eval runs on, as the command opens it (`commands.edges.SearchEdges`)."""

    @property
    def pool(self) -> WorkerPool: ...

    @property
    def pool_size(self) -> int: ...

    @property
    def policy(self) -> Policy: ...

    @property
    def planner(self) -> Policy | None: ...

    @property
    def value(self) -> ValueFn | None: ...

    @property
    def pantograph_version(self) -> str | None: ...


def run_eval(
    request: EvalRequest,
    index: TheoremIndex,
    settings: EvalJobSettings,
    *,
    config: Config,
    made_from: Sequence[StageInputs],
    restart: bool,
    open_edges: Callable[[], AbstractAsyncContextManager[EvalEdges]],
    start_over: Callable[[str], int],
    show_theorems: bool,
    store: Store,
    echo: Callable[[str], None],
    warn: Callable[[str], None],
) -> list[EvalResult]:
    """Run and publish the eval `request` asks for (module docstring); returns the published results, one per arm.
    `made_from`: what each arm is made from (`runner.reuse.eval_inputs`); `restart`: start the trajectories over
    (`eval --force` without `--resume`), each prefix through `start_over` (the files it removed);
    `echo` gets the tables, `warn` the decontamination lines and warnings."""
    check_resumable(request, index, settings, store=store, restart=restart)
    # Decontamination (route `eval`): the model's training data against these theorems, said before the search.
    training_check = check_training_data(config.policy.model, index, store=store)
    for line in check_lines(training_check):
        warn(line)
    untrained = untrained_planner(config, store=store)  # a sketch eval of a planner never trained on sketches
    if untrained is not None:
        warn(untrained)

    async def run() -> list[EvalResult]:
        async with open_edges() as edges:  # a lemma library is frozen now, before the first search
            attached = attach_library(settings, index, edges.pantograph_version, store=store)
            return await eval_arms(request, index, attached, pool=edges.pool, pool_size=edges.pool_size,
                                   policy=edges.policy, value=edges.value,
                                   pantograph_version=edges.pantograph_version, planner=edges.planner, store=store)

    # One writer per trajectory prefix (storage.place_lease); SIGTERM/Ctrl-C commit the finished and stop the Lean pool.
    prefixes = request.prefixes
    kept = (f"finished theorems were committed under {' and '.join(prefixes)}" if prefixes else
            "nothing was saved (eval writes its result at the end; without --no-trajectories-out it is resumable)")
    continue_with = same_command(("--resume",) if prefixes else ())
    with stop_on_signals(f"burnqed eval to {request.output}", kept=kept, continue_with=continue_with), \
            contextlib.ExitStack() as leases:
        for prefix in prefixes:
            leases.enter_context(hold_lease(store, prefix, what="eval trajectories", command=same_command()))
            if restart and start_over(prefix):
                warn(f"--force: the trajectories under {prefix} start over")
        results = run_async(run())
    results = [result.model_copy(update={"training_check": training_check}) for result in results]
    publish_eval(request, results, made_from=made_from, store=store, show_theorems=show_theorems, echo=echo)
    return results

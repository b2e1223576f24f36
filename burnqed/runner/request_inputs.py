"""What a stage run as its request asks is made from (`made_from`: the `runner.reuse` builder of its command, fed
from the request as the command feeds it from its options, a `--start` record read as the command reads it:
`started`), and the local runner's verdict on a finished or interrupted stage (`stage_verdict`,
`interrupted_difference`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from burnqed.config import Config
from burnqed.provenance import INPUTS_NAME, StageInputs
from burnqed.runner.requests import (
    EvalRequest,
    ExportRequest,
    JointStudyRequest,
    MergeRequest,
    PrepareRequest,
    ReportRequest,
    RlRequest,
    SearchRequest,
    SftRequest,
    StageRequest,
    StartRequest,
    TrainEbmRequest,
)
from burnqed.runner.reuse import (
    eval_inputs,
    export_inputs,
    finished_output,
    finished_start,
    joint_study_inputs,
    merge_inputs,
    prepare_inputs,
    report_inputs,
    rl_inputs,
    search_inputs,
    sft_inputs,
    start_inputs,
    train_ebm_inputs,
)
from burnqed.storage import Store, join

if TYPE_CHECKING:
    from burnqed.eval.identity import EvalJobSettings
    from burnqed.records.theorem import TheoremIndex


# ---------------------------------------------------------------------------------------- from a request


def started(request: SftRequest | TrainEbmRequest | SearchRequest, store: Store) -> str | None:
    """What a request's `--start` record names for it (sft: the policy it starts from, in place of --init; train-ebm:
    the value model, in place of --init; search: --ebm unless the record drops it), else its own --init (--ebm); as
    the command resolves it."""
    own = request.ebm if isinstance(request, SearchRequest) else request.init
    if request.start is None or not store.exists(request.start):
        return own
    from burnqed.eval.best_so_far import read_start

    record = read_start(request.start, store)
    if isinstance(request, SearchRequest):
        return own if record.search_value_model else None
    return record.policy if isinstance(request, SftRequest) else record.value_model


def sft_request_inputs(request: SftRequest, cfg: Config, store: Store) -> StageInputs:
    """`sft_inputs` of `burnqed sft` as `request` asks for it."""
    return sft_inputs(cfg, store, data=request.data, trajectories=request.trajectories,
                      init=started(request, store), iteration=request.iteration)


def train_ebm_request_inputs(request: TrainEbmRequest, cfg: Config, store: Store) -> StageInputs:
    """`train_ebm_inputs` of `burnqed train-ebm` as `request` asks for it."""
    return train_ebm_inputs(cfg, store, trajectories=request.trajectories, model=request.model,
                            init=started(request, store), joint=request.joint, iteration=request.iteration)


def rl_request_inputs(request: RlRequest, cfg: Config, store: Store, index: TheoremIndex | None = None) -> StageInputs:
    """`rl_inputs` of `burnqed rl` as `request` asks for it; `index`: its theorems when already read (`rl_index`)."""
    from burnqed.data.theorems import rl_index

    if index is None:
        index = rl_index(request.theorems, request.split, cfg, store=store)
    return rl_inputs(cfg, store, sft=request.sft, index=index, trajectories=request.trajectories,
                     iteration=request.iteration)


def search_request_inputs(request: SearchRequest, cfg: Config, store: Store,
                          index: TheoremIndex | None = None) -> StageInputs:
    """`search_inputs` of `burnqed search` as `request` asks for it; `index`: its theorems when already read."""
    from burnqed.data.theorems import load_index

    if index is None:
        index = load_index(request.theorems, request.split, store=store, world_seed=cfg.data.world_seed,
                           world_sketches=cfg.data.world_sketches)
    return search_inputs(cfg, store, index, shard=request.shard, iteration=request.iteration,
                         ebm=started(request, store), unsolved_from=request.unsolved_from)


def eval_request_inputs(request: EvalRequest, cfg: Config, store: Store, index: TheoremIndex | None = None,
                        settings: EvalJobSettings | None = None) -> list[tuple[str, StageInputs]]:
    """Each arm of `burnqed eval` as `request` asks for it (its result file, `eval_inputs`); `index` and `settings`:
    its theorems and job settings when already read."""
    from burnqed.data.theorems import load_index
    from burnqed.eval import arms as eval_arms
    from burnqed.eval import identity as eval_identity

    if settings is None:
        budgets = eval_identity.eval_budgets(request.budgets, cfg.pipeline)
        settings = eval_identity.EvalJobSettings.from_config(cfg, budgets, defer_judge=request.defer_judge)
    if index is None:
        index = load_index(request.theorems, request.split, "test", store=store, world_seed=cfg.data.world_seed,
                           world_sketches=cfg.data.world_sketches)
    arms = eval_arms.EvalRequest(request.output, pass_n=request.pass_n, iteration=request.iteration,
                                 ebm=request.ebm, ablation=request.ablation).arms()
    return [(arm.output, eval_inputs(eval_identity.EvalIdentity.of(index, settings, pass_n=request.pass_n,
                                                                   iteration=request.iteration, ebm=arm.ebm),
                                     cfg, store))
            for arm in arms]


def _one_output(request: StageRequest, cfg: Config, store: Store) -> StageInputs | None:
    """What the run of a request with one output would be made from; None for another request."""
    match request:
        case SftRequest():
            return sft_request_inputs(request, cfg, store)
        case RlRequest():
            return rl_request_inputs(request, cfg, store)
        case ExportRequest():
            return export_inputs(cfg, store, sft=request.sft)
        case TrainEbmRequest():
            return train_ebm_request_inputs(request, cfg, store)
        case SearchRequest():
            return search_request_inputs(request, cfg, store)
        case StartRequest():
            return start_inputs(cfg, store, root=request.root, iteration=request.iteration)
        case MergeRequest():
            from burnqed.stages.judge_merge import judges_merge

            return merge_inputs(store, inputs=request.inputs, judged=judges_merge(cfg))
        case JointStudyRequest():
            return joint_study_inputs(cfg, store, trajectories=request.trajectories, root=request.root,
                                      iteration=request.iteration)
        case ReportRequest():
            return report_inputs(cfg, store, root=request.root, iteration=request.iteration)
    return None


def made_from(request: StageRequest, cfg: Config, store: Store) -> list[tuple[str, StageInputs]] | None:
    """What the run `request` asks for would be made from, as (output, inputs) pairs (an eval's: one per arm), with
    the builders its command calls; None for a command this module does not know (`OtherRequest`)."""
    if isinstance(request, EvalRequest):
        return eval_request_inputs(request, cfg, store)
    inputs = prepare_inputs(cfg, store) if isinstance(request, PrepareRequest) else _one_output(request, cfg, store)
    return None if inputs is None else [(request.output, inputs)]


# ---------------------------------------------------------------------------------------- the local runner


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a finished stage of the local runner may be reused: `difference` None (reuse it) or the first
    difference, in words; `recorded` False when an output it found records nothing (an older burnqed's)."""

    difference: str | None
    recorded: bool = True


def interrupted_difference(request: StageRequest, load: Callable[[Sequence[str]], Config],
                           store: Store) -> str | None:
    """The first difference between what an interrupted search run as `request` was made from (the `_INPUTS.json`
    its output prefix holds) and what the stage would be made from now, or None (the same, nothing there, or not a
    search): `search --resume` refuses such a run, and `iterate --force` redoes it with the stage's own --force.
    `load(sets)` is the configuration the stage's process would run with, given the request's own `--set`s."""
    if not isinstance(request, SearchRequest) or not store.exists(join(request.output, INPUTS_NAME)):
        return None
    recorded = store.read_model(join(request.output, INPUTS_NAME), StageInputs, "record of inputs")
    return recorded.difference(search_request_inputs(request, load(request.config_sets()), store))


def stage_verdict(request: StageRequest, load: Callable[[Sequence[str]], Config], store: Store) -> Verdict:
    """The verdict on a finished stage run as `request`, from every output it finds. `load(sets)` is the
    configuration the stage's process would run with, given the request's own `--set`s (`config_sets`). A command
    this module does not know is reused as it is."""
    built = made_from(request, load(request.config_sets()), store)
    if built is None:
        return Verdict(None)
    recorded = True
    for output, now in built:
        found = finished_start(store, output) if isinstance(request, StartRequest) else finished_output(store, output)
        if found is None:
            continue
        if found.made_from is None or found.partial:
            recorded = False
        if found.made_from is not None and (difference := found.difference(now)):
            return Verdict(difference, recorded)
    return Verdict(None, recorded)

"""What `burnqed iterate`, `run-all` and `plan` refuse before the first stage starts (docs/pipeline.md): a model that
names no model folder (`check_models`), a benchmark missing or restated by the searched theorems
(`check_before_work`), an earlier iteration not finished (`require_earlier`, `require_in_order`), an input that
no stage makes and that does not exist (`check_stage_inputs`, `check_iteration`); and the warning when eval-base
would evaluate another model than SFT starts from (`base_model_warning`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from burnqed import storage
from burnqed.base.signals import command_text
from burnqed.errors import ConfigError, InputError
from burnqed.layout import trajectories_beside
from burnqed.runner.plan import Iteration
from burnqed.runner.requests import EvalRequest

if TYPE_CHECKING:
    from burnqed.config import Config


def check_models(cfg: Config, store: storage.Store) -> None:
    """`ModelInputError` (exit 2) when a model the run's stages load names no model folder: `sft.base_model` (SFT
    fine-tunes it, every export merges into it) and, with the local policy backend, `policy.model` (eval-base
    evaluates it); `--model` sets both. A local path is checked as every command checks it
    (`policy.modelpath.ensure_model`: the folder it likely meant); a remote one for its config.json, downloading
    nothing. Unset: the tiny embedded model, built by the first stage that needs it."""
    from burnqed.errors import ModelInputError
    from burnqed.policy.modelpath import ensure_model

    paths = [cfg.sft.base_model, cfg.policy.model if cfg.policy.backend == "local" else None]
    for path in dict.fromkeys(path for path in paths if path is not None):
        if storage.is_remote(path):
            if not store.exists(storage.join(path, "config.json")):
                raise ModelInputError(f"model folder {path} holds no config.json: it is not a model folder")
        else:
            ensure_model(path, store=store)


def _eval_trajectories(request: EvalRequest, output: str) -> str:
    """Where the eval `request` writing `output` keeps its trajectories: its --trajectories-out, else beside
    `output`."""
    return request.trajectories_out or trajectories_beside(output)


def check_stage_inputs(iteration: Iteration, store: storage.Store, only: Sequence[str] = ()) -> None:
    """`InputError` (exit 2) before the iteration's first stage when a stage it runs (or only those `only` names)
    reads a file or folder that no stage of the iteration makes and that does not exist (an earlier iteration's
    rollouts, the configured theorems), or that a stage left out by `only` makes and has not finished. (An eval
    makes its trajectories beside its result.)"""
    makers = {made: stage for stage in iteration.stages for uri in stage.all_outputs()
              for made in (uri, *((_eval_trajectories(stage.request, uri),) if isinstance(stage.request, EvalRequest)
                                  else ()))}
    for stage in iteration.stages:
        if only and stage.name not in only:
            continue
        for uri in stage.inputs:
            maker = makers.get(uri)
            if maker is None and not store.exists(uri):
                raise InputError(f"iteration {iteration.index}: stage {stage.name} reads {uri}, which does not "
                                 "exist and no stage of the iteration makes")
            if maker is not None and only and maker.name not in only and not store.is_done(uri):
                raise InputError(f"iteration {iteration.index}: stage {stage.name} reads {uri}, which stage "
                                 f"{maker.name} makes and has not finished: run it too (--only {maker.name}, or "
                                 "no --only)")


def check_before_work(cfg: Config, store: storage.Store) -> None:
    """Refuse, once and before any stage starts, what a stage of the run would refuse only when it comes, or what
    would train on the benchmark (`InputError`, exit 2): a model that names no model folder (`check_models`: --model,
    sft.base_model, policy.model), a `pipeline.benchmark` that is missing or holds no theorem
    (prepare-data decontaminates the training data against it and every eval evaluates it; the first eval comes
    after SFT and search), and a `pipeline.search_theorems` index that is missing or restates a theorem of that
    benchmark (search reads it as it is, and SFT trains on what search proves there)."""
    from burnqed.data.decontaminate import Twins
    from burnqed.data.theorems import load_setting_theorems, pipeline_benchmark

    check_models(cfg, store)
    if cfg.pipeline.benchmark is None and cfg.pipeline.search_theorems is None:
        return
    benchmark = pipeline_benchmark(cfg.pipeline.benchmark, cfg.data.world_seed, store=store,
                                   world_sketches=cfg.data.world_sketches)
    if cfg.pipeline.search_theorems is None:
        return
    searched = load_setting_theorems(cfg.pipeline.search_theorems, "pipeline.search_theorems", store=store)
    twins = Twins([benchmark])
    overlaps = [overlap for theorem in searched.theorems if (overlap := twins.overlap(theorem, searched.name))]
    if overlaps:
        shown = "; ".join(f"{o.training} restates {o.benchmark}" for o in overlaps[:5])
        more = f"; and {len(overlaps) - 5} more" if len(overlaps) > 5 else ""
        raise InputError(f"pipeline.search_theorems {cfg.pipeline.search_theorems}: {len(overlaps)} of its "
                         f"{len(searched.theorems)} theorems restate a theorem of the benchmark {benchmark.name} "
                         f"({shown}{more}); search would find their proofs and SFT train on them: remove them from "
                         "the index, or leave pipeline.search_theorems unset (the prepared data, decontaminated)")


def require_earlier(iteration: Iteration, earlier_done: Callable[[int], bool], carry: Sequence[str] = ()) -> None:
    """Refuse to start iteration i before iterations 0..i-1 finished (their outputs are its inputs), naming the
    command that runs the first unfinished one with the options `carry` (the run's --root, --model, --config and
    --sets, as given: `commands.kit.carried`)."""
    for j in range(iteration.index):
        if not earlier_done(j):
            command = command_text(["iterate", "--iter", str(j), *carry])
            raise ConfigError(f"iteration {j} has not finished under {iteration.root}: run `{command}` first")


def require_in_order(iters: Sequence[int], root: str, earlier_done: Callable[[int], bool],
                     carry: Sequence[str] = ()) -> None:
    """`require_earlier` for every iteration of `iters` (increasing) before any of them runs: each one's earlier
    iterations must be finished or among `iters` before it (`run-all --iters 0,2` is refused at once for 1, not after
    iteration 0 ran). No iteration is planned for it: an unfinished one is named at once, however large `iters`."""
    requested = set(iters)
    for i in iters:
        require_earlier(Iteration(index=i, root=root, stages=()), lambda j: j in requested or earlier_done(j), carry)


def check_iteration(iteration: Iteration, store: storage.Store, earlier_done: Callable[[int], bool],
                    only: Sequence[str] = (), carry: Sequence[str] = ()) -> None:
    """What `run_iterations` refuses of `iteration` before its first stage, in its order: an earlier iteration not
    finished (`require_earlier`, `earlier_done` telling which are; `ConfigError`), then an input that no stage makes
    and that does not exist (`check_stage_inputs`; `InputError`). `burnqed plan` prints the same line."""
    require_earlier(iteration, earlier_done, carry)
    check_stage_inputs(iteration, store, only)


def base_model_warning(iteration: Iteration, cfg: Config) -> str | None:
    """One line when the iteration's eval-base would evaluate another model as "the untrained base" than the one its
    SFT starts from, else None. Read from the plan: eval-base evaluates its `--model` (the pipeline passes
    sft.base_model when that is set), else policy.model, else the tiny embedded model; SFT starts from
    sft.base_model, else the tiny embedded model. `burnqed iterate`, `run-all` and `plan` print it before any work."""
    from burnqed.errors import InputError
    from burnqed.policy.modelpath import default_model_dir

    stage = next((stage for stage in iteration.stages if stage.name == "eval-base"), None)
    if stage is None:
        return None
    given = stage.request.model if isinstance(stage.request, EvalRequest) else None
    evaluated, why = (given, "its --model") if given is not None else (cfg.policy.model, "policy.model")
    trained = cfg.sft.base_model
    if evaluated == trained:
        return None
    if trained is None and evaluated is not None and "://" not in evaluated:
        try:
            if Path(os.path.abspath(os.path.expanduser(evaluated))) == default_model_dir():
                return None  # the tiny embedded model's own folder, named
        except InputError:  # no home for the tiny model: it cannot be that folder
            pass
    tiny = "the tiny embedded model"
    fix = f"; to train from {evaluated}, set sft.base_model={evaluated}" if evaluated is not None else ""
    return (f"warning: eval-base evaluates {evaluated or tiny} ({why}) as the untrained base, but SFT starts from "
            f"{trained or tiny} (sft.base_model{'' if trained else ' is unset'}): the report's base → iteration 0 "
            f"would compare two different models{fix}")

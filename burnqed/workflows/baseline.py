"""Evaluate the base model only (the raw baseline of the go/no-go gates, docs/pipeline.md): the eval workflow on
sft.base_model, written to {root}/baseline/eval.json.

    burnqed render baseline                   # WorkflowTemplate burnqed-baseline
    burnqed submit baseline                   # model = sft.base_model (or --param model=URI)

Parameters: root (run root), model (default sft.base_model; required when that is unset).
"""

from __future__ import annotations

from collections.abc import Mapping

from hera.workflows import Workflow, WorkflowTemplate

from burnqed.config import Config

from ._params import MODEL, ROOT, Param, workflow_params
from ._pods import Profile
from ._shared import W, build, eval_stages

NAME = "baseline"


def templates(cfg: Config) -> list[WorkflowTemplate]:
    """burnqed-baseline."""
    return [_build(WorkflowTemplate, cfg, {})]


def workflow(cfg: Config, *, iteration: int, parameters: Mapping[str, str]) -> Workflow:
    """The baseline Workflow (`iteration` is not used)."""
    del iteration
    return _build(Workflow, cfg, parameters)


def _build(cls: type[W], cfg: Config, parameters: Mapping[str, str]) -> W:
    stages = eval_stages(cfg, model=MODEL, output=f"{ROOT}/baseline/eval.json")
    model = Param("model", cfg.sft.base_model, "URI of the base model folder (default: sft.base_model).")
    return build(
        cls,
        name="burnqed-baseline",
        kind=NAME,
        description="burnqed baseline: evaluation of the base model on the benchmark",
        stages=stages,
        params=workflow_params(cfg, parameters, run=False, extra=[model]),
        profile=Profile(cfg, require_done_model=False),
        mutex=False,
    )

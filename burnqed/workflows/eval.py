"""Evaluate a given model on the benchmark: one pod = Lean workers + the SGLang sidecar serving the model (downloaded
from its URI by the init container), at the budgets and pass@N of the pipeline configuration.

    burnqed render eval                                         # WorkflowTemplate burnqed-eval
    burnqed submit eval --param model=s3://bucket/models/prover-7b

Parameters: root (run root), model (URI of a model folder SGLang can load; required). The result goes to
{root}/evals/{workflow name}/eval.json. `--iter` is not used.
"""

from __future__ import annotations

from collections.abc import Mapping

from hera.workflows import Workflow, WorkflowTemplate

from burnqed.config import Config

from ._params import MODEL, ROOT, Param, workflow_params
from ._pods import Profile
from ._shared import W, build, eval_stages

NAME = "eval"


def templates(cfg: Config) -> list[WorkflowTemplate]:
    """burnqed-eval."""
    return [_build(WorkflowTemplate, cfg, {})]


def workflow(cfg: Config, *, iteration: int, parameters: Mapping[str, str]) -> Workflow:
    """The eval Workflow; `parameters` must name the model (and the root when storage.root is local)."""
    del iteration  # an evaluation belongs to no iteration
    return _build(Workflow, cfg, parameters)


def _build(cls: type[W], cfg: Config, parameters: Mapping[str, str]) -> W:
    stages = eval_stages(cfg, model=MODEL, output=f"{ROOT}/evals/{{{{workflow.name}}}}/eval.json")
    model = Param("model", None, "URI of the model folder to evaluate (SGLang loads it; no completion marker needed).")
    return build(
        cls,
        name="burnqed-eval",
        kind=NAME,
        description="burnqed evaluation of a given model on the benchmark",
        stages=stages,
        params=workflow_params(cfg, parameters, run=False, extra=[model]),
        profile=Profile(cfg, require_done_model=False),
        mutex=False,
    )

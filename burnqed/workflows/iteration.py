"""One expert iteration as an Argo workflow (docs/cluster.md): the stages of `runner.plan.build_iteration` as
a DAG of `burnqed <stage> …` containers — search fanned out over shards (`withSequence`), each shard pod = Lean
workers + an SGLang sidecar on one GPU; a mutex per run so two iterations of one run never overlap.

    burnqed render iteration                  # burnqed-iteration-0 .. N-1 (N = cluster.template_iterations)
    burnqed submit iteration --iter 2         # creates a Workflow for iteration 2 of the run at storage.root

Parameters: root (the run root; required when storage.root is a local path), run (mutex name, derived from root),
iteration (fixed per DAG: iteration 0 prepares data and searches at a noise temperature, iterations ≥ 1 train the
value model and run its ablation). With rl.enabled the rl step (GRPO in the rl image: one GPU and the reward's Lean
workers in one container) runs between sft and export, as `burnqed iterate` runs it.
"""

from __future__ import annotations

from collections.abc import Mapping

from hera.workflows import Workflow, WorkflowTemplate

from burnqed.config import Config
from burnqed.runner.plan import iteration_of

from ._params import ROOT, workflow_params
from ._pods import Profile
from ._shared import W, build

NAME = "iteration"


def templates(cfg: Config) -> list[WorkflowTemplate]:
    """burnqed-iteration-0 .. burnqed-iteration-{cluster.template_iterations - 1}."""
    return [_build(WorkflowTemplate, cfg, i, {}) for i in range(cfg.cluster.template_iterations)]


def workflow(cfg: Config, *, iteration: int, parameters: Mapping[str, str]) -> Workflow:
    """The Workflow of iteration `iteration` (any index), parameters (root, run) filled in."""
    return _build(Workflow, cfg, iteration, parameters)


def _build(cls: type[W], cfg: Config, iteration: int, parameters: Mapping[str, str]) -> W:
    stages = iteration_of(cfg, ROOT, iteration).stages
    return build(
        cls,
        name=f"burnqed-iteration-{iteration}",
        kind=NAME,
        description=f"burnqed expert iteration {iteration}: " + " → ".join(stage.name for stage in stages),
        stages=stages,
        params=workflow_params(cfg, parameters, iteration=iteration),
        profile=Profile(cfg),
        mutex=True,
    )

"""A tiny end-to-end iteration on CPU: `burnqed lean selftest` in the core image against its own Lean, then
iteration 0 on embedded defaults (the tiny model in-process, the replay Lean server, one search shard, no noise
pass, no GPU) in the train image. It checks the cluster plumbing (images, S3 run root, RBAC, DAG, mutex) in minutes
on any nodes (docs/cluster.md, "Workflows").

    burnqed render smoke                      # WorkflowTemplate burnqed-smoke
    burnqed submit smoke --root s3://bucket/smoke

The pods mount no burnqed config; they get storage.endpoint_url / storage.region from the configuration
`render`/`submit` ran with, S3 credentials from cluster.s3_secret, and the Lean worker count and recycling limit the
memory rule checked (SMOKE_LEAN under cluster.step_memory).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace

from hera.workflows import Workflow, WorkflowTemplate

from burnqed.cluster.images import declared
from burnqed.config import Config, LeanConfig, PipelineConfig
from burnqed.runner.plan import Resource, Stage, build_iteration
from burnqed.runner.requests import OtherRequest

from ._params import ROOT, workflow_params
from ._pods import Profile
from ._shared import W, build

NAME = "smoke"
# The embedded replay server is a small Python process: recycle it at 1 GiB instead of a Mathlib REPL's 12 GB, so
# the memory rule fits the CPU steps' cluster.step_memory.
SMOKE_LEAN = LeanConfig(recycle_rss_mb=1024)


def templates(cfg: Config) -> list[WorkflowTemplate]:
    """burnqed-smoke (iteration 0)."""
    return [_build(WorkflowTemplate, cfg, 0, {})]


def workflow(cfg: Config, *, iteration: int, parameters: Mapping[str, str]) -> Workflow:
    """The smoke Workflow of iteration `iteration` (0 unless a smoke run already has earlier iterations)."""
    return _build(Workflow, cfg, iteration, parameters)


# The Lean edge's conformance run (`burnqed lean selftest`), first: a build that does not conform stops the smoke
# test before any stage spends time on it. It runs against the core image's Lean: one Mathlib REPL that also
# compiles (no verifier), in the CPU steps' memory (cluster.step_memory, 8Gi by default: the plan holds 4096 MiB
# for the REPL beside cluster.lean_main_memory; one above it is restarted between the selftest's theorems).
CORE = declared()["core"]
SELFTEST_LEAN = LeanConfig(command=list(CORE.lean_command), cwd=CORE.lean_cwd, workers=1, verifier_workers=0,
                           recycle_rss_mb=4096)
SELFTEST = Stage(
    name="lean-selftest",
    summary="Check this build's Lean edge against the core image's Lean and name its triple (one minute).",
    request=OtherRequest(words=("lean", "selftest",
                                "--set", f"lean.command={json.dumps(SELFTEST_LEAN.command, separators=(',', ':'))}",
                                "--set", f"lean.cwd={SELFTEST_LEAN.cwd}",
                                "--set", f"lean.verifier_workers={SELFTEST_LEAN.verifier_workers}")),
    outputs=(), inputs=(), resource=Resource.LEAN)


def _build(cls: type[W], cfg: Config, iteration: int, parameters: Mapping[str, str]) -> W:
    pipeline = PipelineConfig(search_shards=1, noise_temperature=None)  # embedded defaults, one shard
    first, *rest = build_iteration(pipeline, root=ROOT, iteration=iteration).stages
    stages = (SELFTEST, replace(first, after=(*first.after, SELFTEST.name)), *rest)
    return build(
        cls,
        name="burnqed-smoke" if iteration == 0 else f"burnqed-smoke-{iteration}",
        kind=NAME,
        description=f"burnqed smoke test (iteration {iteration} on CPU, embedded defaults, one shard)",
        stages=stages,
        params=workflow_params(cfg, parameters, iteration=iteration),
        profile=Profile(cfg, mount_config=False, cpu_only=True, lean=SMOKE_LEAN,
                        image_lean={SELFTEST.name: SELFTEST_LEAN}),
        mutex=True,
    )

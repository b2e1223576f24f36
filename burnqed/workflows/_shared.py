"""How the stages of `runner.plan` become Argo container templates, and the spec every burnqed workflow shares
(docs/cluster.md, "What each step's pod looks like"); a helper of the workflow files here. Pods by resource:

    cpu       core image; step_cpu / step_memory; CPU pool
    lean      core image; the Lean workers' requests; CPU pool; label burnqed.io/lean=true (egress restricted)
    gpu       train image; GPUs, /dev/shm; GPU pool
    gpu+lean  core image with the Lean workers + the SGLang sidecar on the GPU (+ burnqed's encoder), model fetched;
              in sketch mode with a second served planner on loopback, the planner's SGLang sidecar on GPUs of its own
    judge     core image; judge_cpu / judge_memory; CPU pool; egress restricted; comparator's sandbox: never
              privileged, a non-root uid, no capability; for bubblewrap (lake comparator) seccomp and AppArmor
              Unconfined (user namespaces) (`burnqed.cluster.judge_pod`)
    train+lean  rl image; one GPU and the Lean workers in the main container (training's + search's requests); GPU pool;
              with rl.rollout_engine = 'served' (no rl.server_url) also the policy's SGLang sidecar on a GPU of its own

Every step runs `burnqed <stage> …` non-root on a read-only root filesystem, with no service-account token, the
config from a ConfigMap, S3 credentials from a Secret, and a retry expression for interruptions only
(`burnqed.cluster.retry`); Lean containers get the worker count render checked (`burnqed.cluster.memory`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import TypeVar

from hera.workflows import DAG, Container, Parameter, Resources, Task, Workflow
from hera.workflows import models as m

from burnqed.cluster.gpu_plan import (
    PLAN_ANNOTATION,
    check_cluster_planner,
    planner_sidecar,
    required_gpu_mib,
    rl_sidecar,
)
from burnqed.cluster.images import declared, step_requirements
from burnqed.cluster.judge_pod import JUDGE_LABEL, judge_security, sandbox_kind
from burnqed.cluster.memory import PlanKeys, add_quantities, lean_memory_plan
from burnqed.cluster.retry import retry_expression
from burnqed.config import ClusterConfig, Config
from burnqed.config.digest import DIGEST_ANNOTATION, pod_config_digest
from burnqed.records.enums import SearchMode
from burnqed.runner.plan import SHARD, Resource, Stage, build_iteration, judge_stage
from burnqed.runner.requests import EvalRequest

from ._params import ROOT, RUN, Param
from ._pods import CONFIG_DIR, Profile, env, env_from, images, security
from ._sidecars import gpu_containers, planner_sets, rl_served_model, rl_sidecar_sets, sidecar_sets

SHARD_INPUT = "{{inputs.parameters.shard}}"

LEAN_LABEL = "burnqed.io/lean"  # the chart's NetworkPolicy denies egress from pods with this label
NODE_POOL_LABEL = "burnqed.io/node-pool"  # gpu | cpu: the chart may replace node selectors / tolerations by pool
PART_OF = {"app.kubernetes.io/part-of": "burnqed"}
MUTEX_PREFIX = "burnqed-run-"

W = TypeVar("W", bound=Workflow)


# ------------------------------------------------------------------------------------------ pods


def _volume(name: str, *, size: str, memory: bool = False) -> m.Volume:
    return m.Volume(name=name, empty_dir=m.EmptyDirVolumeSource(medium="Memory" if memory else None, size_limit=size))


def _judge_security(profile: Profile) -> m.SecurityContext:
    """The judge step's container: what comparator's sandbox needs (`burnqed.cluster.judge_pod.judge_security`)."""
    return m.SecurityContext.model_validate(judge_security(sandbox_kind(profile.pod_lean),
                                                           profile.cfg.cluster.run_as_user))


def _lean_env(stage: Stage, profile: Profile) -> list[tuple[str, str]]:
    """The Lean worker count, recycling limit and per-worker memory limit of a Lean container, checked against its
    memory limit and pinned in its environment (it beats the mounted config file): the pod runs exactly what render
    checked."""
    cluster = profile.cfg.cluster
    small = profile.cpu_only  # the smoke workflow's Lean steps get the CPU steps' resources
    if stage.resource is Resource.TRAIN_LEAN and not small:
        # the trainer (burnqed itself here) gets a training pod's memory, the Lean workers a search pod's
        plan = lean_memory_plan(
            profile.stage_lean(stage), cpu_request=cluster.search_cpu, memory_limit=train_lean_memory(cluster),
            main_memory=cluster.train_memory,
            keys=PlanKeys(cpu="cluster.search_cpu", memory="cluster.train_memory + cluster.search_memory",
                          main="cluster.train_memory"),
            where=f"step {stage.name}",
        )
    else:
        keys = PlanKeys(cpu="cluster.step_cpu" if small else "cluster.search_cpu",
                        memory="cluster.step_memory" if small else "cluster.search_memory",
                        main="cluster.lean_main_memory")
        plan = lean_memory_plan(
            profile.stage_lean(stage),
            cpu_request=cluster.step_cpu if small else cluster.search_cpu,
            memory_limit=cluster.step_memory if small else cluster.search_memory,
            main_memory=cluster.lean_main_memory,
            keys=keys,
            where=f"step {stage.name}",
        )
    pinned = [("BURNQED_LEAN__WORKERS", str(plan.workers)), ("BURNQED_LEAN__RECYCLE_RSS_MB", str(plan.recycle_rss_mb)),
              ("BURNQED_LEAN__WORKER_MEMORY_LIMIT_MB", str(plan.worker_limit_mb))]
    if cluster.lean_uid is not None:
        pinned.append(("BURNQED_LEAN__RUN_AS_UID", str(cluster.lean_uid)))
    return pinned


def train_lean_memory(cluster: ClusterConfig) -> str:
    """The memory request and limit of a `train+lean` container (rl): a training pod's plus a search pod's."""
    return add_quantities((cluster.train_memory, "cluster.train_memory"),
                          (cluster.search_memory, "cluster.search_memory"))


def train_lean_cpu(cluster: ClusterConfig) -> str:
    """The CPU request of a `train+lean` container (rl): a training pod's plus a search pod's."""
    return add_quantities((cluster.train_cpu, "cluster.train_cpu"), (cluster.search_cpu, "cluster.search_cpu"))


def _gpu_memory_affinity(cfg: Config) -> m.Affinity | None:
    """Nodes whose GPUs have the memory the sidecar's plan was made for (cluster.gpu_memory_label, in MiB)."""
    label = cfg.cluster.gpu_memory_label
    if not label:
        return None
    requirement = m.NodeSelectorRequirement(key=label, operator="Gt", values=[str(required_gpu_mib(cfg) - 1)])
    return m.Affinity(node_affinity=m.NodeAffinity(required_during_scheduling_ignored_during_execution=m.NodeSelector(
        node_selector_terms=[m.NodeSelectorTerm(match_expressions=[requirement])])))


def _retry(cluster: ClusterConfig) -> m.RetryStrategy | None:
    if cluster.retries == 0:
        return None
    return m.RetryStrategy(
        limit=cluster.retries,
        # OnError alone misses evictions, node shutdown and preemption (Argo calls them failures): the expression
        # decides, and retries interruptions only, never a deterministic exit (burnqed.cluster.retry)
        retry_policy="Always",
        expression=retry_expression(oom=cluster.retry_oom_killed, storage_retries=cluster.storage_retries),
        backoff=m.Backoff(duration=f"{cluster.retry_backoff_s}s", factor=2, cap=f"{cluster.retry_backoff_cap_s}s"),
        affinity=m.RetryAffinity(node_anti_affinity=m.RetryNodeAntiAffinity()),  # retry on another node
    )


def stage_mode(stage: Stage, cfg: Config) -> SearchMode:
    """The search mode a stage's command runs in: its last `--set search.mode=M` (the eval-MODE stages), else
    search.mode."""
    mode = cfg.search.mode
    for item in stage.request.config_sets():
        if item.startswith("search.mode="):
            mode = SearchMode(item.partition("=")[2])
    return mode


def stage_gpus(stage: Stage, cfg: Config) -> int:
    """GPUs of a training pod: the SFT stages ask for one per data-parallel process when `sft.processes` > 1 (its
    `burnqed sft` command launches them under torchrun, docs/training.md), rl for one per process, `rl.processes`
    (`burnqed rl` launches them likewise; TRL's GRPOTrainer refuses several GPUs visible to one process), every other
    one `cluster.gpus_per_step`."""
    if stage.name in ("sft", "study-sft-a") and cfg.sft.processes > 1:  # study-sft-a: the joint study's plain SFT
        return cfg.sft.processes
    if stage.resource is Resource.TRAIN_LEAN:
        return cfg.rl.processes
    return cfg.cluster.gpus_per_step


def _step_volumes(profile: Profile, *, gpu: bool, sidecar: bool, models: bool) -> tuple[list[m.Volume],
                                                                                     list[m.VolumeMount]]:
    """A step's volumes and the main container's mounts: scratch at /tmp, the config map (`mount_config`), shared
    memory on a GPU pod (mounted in the main container unless the GPU is the sidecar's) and, with `models`, the
    sidecars' models (a search pod's SGLang, or the rl step's)."""
    cluster = profile.cfg.cluster
    volumes = [_volume("scratch", size=cluster.scratch_size)]
    mounts = [m.VolumeMount(name="scratch", mount_path="/tmp")]
    if profile.mount_config:
        volumes.append(m.Volume(name="config", config_map=m.ConfigMapVolumeSource(name=cluster.config_map)))
        mounts.append(m.VolumeMount(name="config", mount_path=CONFIG_DIR, read_only=True))
    if gpu:
        volumes.append(_volume("shm", size=cluster.shm_size, memory=True))
    if gpu and not sidecar:
        mounts.append(m.VolumeMount(name="shm", mount_path="/dev/shm"))
    if models:
        volumes.append(_volume("models", size=cluster.model_volume_size))
    return volumes, mounts


def _step_resources(stage: Stage, profile: Profile) -> Resources:
    """The main container's requests and limits, by the stage's resource class (a cpu_only workflow: every step
    a CPU step's)."""
    cluster = profile.cfg.cluster
    if profile.cpu_only or stage.resource is Resource.CPU:
        return Resources(cpu_request=cluster.step_cpu, memory_request=cluster.step_memory,
                         memory_limit=cluster.step_memory)
    if stage.resource is Resource.GPU:
        return Resources(cpu_request=cluster.train_cpu, memory_request=cluster.train_memory,
                         memory_limit=cluster.train_memory, gpus=stage_gpus(stage, profile.cfg))
    if stage.resource is Resource.JUDGE:
        return Resources(cpu_request=cluster.judge_cpu, memory_request=cluster.judge_memory,
                         memory_limit=cluster.judge_memory)
    if stage.resource is Resource.TRAIN_LEAN:  # the trainer and the reward's Lean workers in one container
        memory = train_lean_memory(cluster)
        return Resources(cpu_request=train_lean_cpu(cluster), memory_request=memory, memory_limit=memory,
                         gpus=stage_gpus(stage, profile.cfg))
    # Lean workers; the GPU of gpu+lean belongs to the sidecar
    return Resources(cpu_request=cluster.search_cpu, memory_request=cluster.search_memory,
                     memory_limit=cluster.search_memory)


def check_unserved(stage: Stage, cfg: Config) -> None:
    """A search or eval step with no model for a sidecar to serve (eval-base when sft.base_model is unset) runs the
    configured policy itself: in-process (policy.backend 'local', on the CPU pool), or at policy.url when that is a
    server of the user's own; `ValueError` when it would ask the pod's loopback, where no sidecar listens."""
    from burnqed.policy.sglang import is_loopback

    policy = cfg.policy
    if policy.backend == "sglang" and is_loopback(policy.url):
        raise ValueError(
            f"step {stage.name} evaluates the untrained base model with policy.backend = 'sglang' at {policy.url}, "
            "the pod's loopback, but has no sidecar there: it serves only a model it can fetch, and sft.base_model "
            "(the base model eval-base evaluates) is unset; set sft.base_model to the base model's folder at a URI "
            "(s3://…, a model folder SGLang loads), point policy.url at a server of your own, or set "
            "pipeline.eval_base = false")


def stage_template(stage: Stage, profile: Profile) -> Container:
    """The container template of one stage (see the module docstring for what each resource class gets)."""
    cluster = profile.cfg.cluster
    lean = stage.resource in (Resource.LEAN, Resource.GPU_LEAN, Resource.TRAIN_LEAN)
    judge = stage.resource is Resource.JUDGE  # comparator in its sandbox (burnqed.cluster.judge_pod), no Lean workers
    unserved = stage.resource is Resource.GPU_LEAN and stage.policy_model is None and not profile.cpu_only
    if unserved:  # eval-base of the configured policy: no model to fetch, so no sidecar and no GPU
        check_unserved(stage, profile.cfg)
    gpu = (not profile.cpu_only and not unserved
           and stage.resource in (Resource.GPU, Resource.GPU_LEAN, Resource.TRAIN_LEAN))
    trains = gpu and stage.resource in (Resource.GPU, Resource.TRAIN_LEAN)  # the GPU is the main container's
    sidecar = gpu and stage.resource is Resource.GPU_LEAN and stage.policy_model is not None
    # sketch mode with a second served planner: its own sidecar on loopback, or a deployment at planner.url
    sketch = sidecar and stage_mode(stage, profile.cfg) is SearchMode.SKETCH and profile.cfg.planner.served
    if sketch:
        check_cluster_planner(profile.cfg)
    planner = sketch and planner_sidecar(profile.cfg)
    # the served rollout engine: the rl step's own SGLang sidecar
    served = gpu and stage.resource is Resource.TRAIN_LEAN and rl_sidecar(profile.cfg)
    served_model = rl_served_model(stage, profile.cfg) if served else None
    args = [part.replace(SHARD, SHARD_INPUT) for part in stage.argv]
    if sidecar:
        args += sidecar_sets(stage) + (planner_sets() if planner else [])
    if served:
        args += rl_sidecar_sets()

    volumes, mounts = _step_volumes(profile, gpu=gpu, sidecar=sidecar, models=sidecar or served)
    resources = _step_resources(stage, profile)
    image = images(cluster)
    in_core = stage.name in profile.image_lean or not (profile.cpu_only or stage.resource is Resource.GPU)
    image_kind = "rl" if stage.resource is Resource.TRAIN_LEAN else "core" if in_core else "train"
    # what the step's command needs from its image and container (hub data, the value model and its device, rl's
    # trainer and Lean)
    pins = step_requirements(stage, profile.cfg, declared()[image_kind], where=f"step {stage.name}", gpu=trains)
    tolerations = cluster.gpu_tolerations if gpu else cluster.cpu_tolerations
    described, sidecars, inits = gpu_containers(stage, profile, sidecar=sidecar, planner=planner,
                                                trainer=gpu and stage.resource is Resource.TRAIN_LEAN,
                                                served_model=served_model)
    return Container(
        name=stage.name,
        image={"train": image.train, "rl": image.rl}.get(image_kind, image.core),
        image_pull_policy=cluster.image_pull_policy,
        command=["burnqed"],
        args=args,
        inputs=[Parameter(name="shard")] if stage.fanned_out else None,
        env=env(profile, [*(_lean_env(stage, profile) if lean else []), *pins]),
        env_from=env_from(cluster),
        resources=resources,
        volumes=volumes,
        volume_mounts=mounts,
        security_context=_judge_security(profile) if judge else security(cluster, read_only=True, lean=lean),
        sidecars=sidecars or None,
        init_containers=inits or None,
        node_selector=(cluster.gpu_node_selector if gpu else cluster.cpu_node_selector) or None,
        affinity=_gpu_memory_affinity(profile.cfg) if described is not None else None,
        tolerations=[m.Toleration.model_validate(t) for t in tolerations] or None,
        priority_class_name=cluster.priority_class_gpu if gpu else cluster.priority_class_cpu,
        retry_strategy=_retry(cluster),
        # Argo templates have no terminationGracePeriodSeconds field; a pod spec patch sets it (workflowpod.go
        # processPodSpecPatch). Lean and GPU pods get the time to save and upload what finished after SIGTERM.
        pod_spec_patch=(json.dumps({"terminationGracePeriodSeconds": cluster.termination_grace_s})
                        if lean or gpu or judge else None),
        active_deadline_seconds=cluster.step_deadline_s,
        labels={
            **PART_OF,
            "burnqed.io/stage": stage.name,
            NODE_POOL_LABEL: "gpu" if gpu else "cpu",
            **({LEAN_LABEL: "true"} if lean or judge else {}),  # the judge's builds reach nothing either
            **({JUDGE_LABEL: "true"} if judge else {}),  # comparator's sandbox is checked (cluster.judge_pod)
        },
        annotations={"burnqed.io/summary": stage.summary,
                     **({PLAN_ANNOTATION: described} if described is not None else {})},
    )


# ------------------------------------------------------------------------------------------ workflows


def eval_stage(cfg: Config, model: str, output: str) -> Stage:
    """The benchmark evaluation of `cfg.pipeline` on `model`, written to `output`: iteration 0's eval stage with the
    model and output swapped, so benchmark, budgets and pass@N stay exactly those of `burnqed.runner.plan`."""
    base = build_iteration(cfg.pipeline, root=ROOT, iteration=0, max_proofs=cfg.search.max_proofs).stage("eval")
    if not isinstance(base.request, EvalRequest):
        raise ValueError(f"the pipeline's eval stage runs no eval: {base.argv}")
    return replace(base, request=replace(base.request, model=model, output=output), outputs=(output,),
                   inputs=(model,), after=(), policy_model=model, ebm=None)


def eval_stages(cfg: Config, model: str, output: str) -> list[Stage]:
    """`eval_stage`, then, with lean.judge = "comparator", its judge step (`runner.plan.judge_stage`: the eval defers
    its judge and `burnqed judge` writes `output`)."""
    stage = eval_stage(cfg, model, output)
    return list(judge_stage(stage)) if cfg.lean.judged_by()[0] == "comparator" else [stage]


def build(
    cls: type[W],
    *,
    name: str,
    kind: str,
    description: str,
    stages: Sequence[Stage],
    params: Sequence[Param],
    profile: Profile,
    mutex: bool,
) -> W:
    """A Workflow (generateName `{name}-`, for `submit`) or a WorkflowTemplate (`name`) running `stages` as a DAG."""
    cluster = profile.cfg.cluster
    template = cls is not Workflow
    with cls(
        name=name if template else None,
        generate_name=None if template else f"{name}-",
        namespace=cluster.namespace,
        labels={**PART_OF, "burnqed.io/workflow": kind},
        annotations={"workflows.argoproj.io/description": description,
                     **({DIGEST_ANNOTATION: pod_config_digest(profile.cfg)} if profile.mount_config else {})},
        arguments=[param.hera() for param in params],
        entrypoint="main",
        service_account_name=cluster.service_account,
        automount_service_account_token=False,  # main containers get no token ...
        executor=m.ExecutorConfig(service_account_name=cluster.service_account),  # ... Argo's executor does
        security_context=m.PodSecurityContext(
            run_as_non_root=True,
            run_as_user=cluster.run_as_user,
            run_as_group=cluster.run_as_user,
            fs_group=cluster.run_as_user,
            seccomp_profile=m.SeccompProfile(type="RuntimeDefault"),
        ),
        image_pull_secrets=list(cluster.image_pull_secrets) or None,
        synchronization=m.Synchronization(mutexes=[m.Mutex(name=MUTEX_PREFIX + RUN)]) if mutex else None,
        active_deadline_seconds=cluster.workflow_deadline_s,
        pod_gc=m.PodGC(strategy=cluster.pod_gc, delete_delay_duration=cluster.pod_gc_delay),
        ttl_strategy=m.TTLStrategy(seconds_after_completion=cluster.ttl_after_finished_s),
        archive_logs=True,
        artifact_repository_ref=m.ArtifactRepositoryRef(config_map=cluster.artifact_repository, key="default"),
        pod_metadata=m.Metadata(labels=dict(PART_OF)),
    ) as workflow:
        containers = {stage.name: stage_template(stage, profile) for stage in stages}
        with DAG(name="main"):
            for stage in stages:
                Task(
                    name=stage.name,
                    template=containers[stage.name],
                    depends=" && ".join(stage.after) or None,
                    with_sequence=m.Sequence(count=str(stage.shards)) if stage.fanned_out else None,
                    arguments={"shard": "{{item}}"} if stage.fanned_out else None,
                )
    return workflow

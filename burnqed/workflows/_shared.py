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

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib.metadata import version
from typing import Any, TypeVar

from hera.workflows import DAG, Container, Parameter, Resources, Task, UserContainer, Workflow
from hera.workflows import models as m

from burnqed.cluster.gpu_plan import (
    PLAN_ANNOTATION,
    GpuPlan,
    check_cluster_planner,
    gpu_plan,
    planner_gpu_plan,
    planner_sidecar,
    required_gpu_mib,
    rl_sidecar,
)
from burnqed.cluster.images import declared, fetch_requirements, step_requirements
from burnqed.cluster.judge_pod import JUDGE_LABEL, judge_security, sandbox_kind
from burnqed.cluster.memory import PlanKeys, add_quantities, lean_memory_plan
from burnqed.cluster.retry import retry_expression
from burnqed.cluster.rl_plan import RL_LORA_SLOTS, rl_gpu_plan, rl_server_plan
from burnqed.config import ClusterConfig, Config, LeanConfig
from burnqed.config.digest import DIGEST_ANNOTATION, DIGEST_ENV, pod_config_digest
from burnqed.errors import ConfigError
from burnqed.records.enums import SearchMode
from burnqed.runner.plan import SHARD, Resource, Stage, build_iteration, judge_stage
from burnqed.runner.requests import EvalRequest, RlRequest

ROOT = "{{workflow.parameters.root}}"
RUN = "{{workflow.parameters.run}}"
MODEL = "{{workflow.parameters.model}}"
SHARD_INPUT = "{{inputs.parameters.shard}}"

CONFIG_DIR = "/etc/burnqed"
CONFIG_FILE = "burnqed.toml"  # the key of the config ConfigMap
MODELS_DIR = "/models"
POLICY_DIR = f"{MODELS_DIR}/policy"
PLANNER_DIR = f"{MODELS_DIR}/planner"  # the planner's model, beside the policy's in the same emptyDir
READY_FILE_NAME = ".burnqed-ready"  # written last by `burnqed fetch` (burnqed.cluster.fetch.READY_NAME)
LOOPBACK = "127.0.0.1"  # the sidecar listens on loopback only: nothing outside the pod reaches it
GENERATE_PORT = 30000
ENCODE_PORT = 30001
PLANNER_PORT = 30002  # the planner's sidecar (planner.url's default)
LEAN_LABEL = "burnqed.io/lean"  # the chart's NetworkPolicy denies egress from pods with this label
NODE_POOL_LABEL = "burnqed.io/node-pool"  # gpu | cpu: the chart may replace node selectors / tolerations by pool
PART_OF = {"app.kubernetes.io/part-of": "burnqed"}
MUTEX_PREFIX = "burnqed-run-"

W = TypeVar("W", bound=Workflow)


# ------------------------------------------------------------------------------------------ parameters


def remote_root(cfg: Config) -> str | None:
    """`storage.root` when pods can share it (s3:// and the like); None for a local path."""
    scheme, sep, _ = cfg.storage.root.partition("://")
    return cfg.storage.root.rstrip("/") if sep and scheme != "file" else None


def run_name(root: str) -> str:
    """A label- and mutex-safe name of a run root: s3://bucket/runs/exp1 -> bucket-runs-exp1 (long roots are cut
    and get a hash)."""
    body = root.split("://", 1)[-1].lower()
    slug = re.sub(r"[^a-z0-9]+", "-", body).strip("-") or "run"
    if len(slug) > 50:
        digest = hashlib.sha256(root.encode()).hexdigest()[:8]
        slug = f"{slug[:41].rstrip('-')}-{digest}"
    return slug


@dataclass(frozen=True, slots=True)
class Param:
    """A workflow parameter: None as value = required at submission."""

    name: str
    value: str | None
    description: str
    enum: tuple[str, ...] = ()

    def hera(self) -> Parameter:
        if self.value is None:
            return Parameter(name=self.name, description=self.description)
        return Parameter(name=self.name, value=self.value, description=self.description, enum=list(self.enum) or None)


def resolve(params: Sequence[Param], values: Mapping[str, str]) -> list[Param]:
    """`params` with the given values; unknown names are a `ValueError` naming the known ones."""
    known = {p.name for p in params}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown parameter(s) {', '.join(unknown)}; this workflow takes {', '.join(sorted(known))}")
    resolved = []
    for param in params:
        value = values.get(param.name, param.value)
        if value is not None and param.enum and value not in param.enum:
            raise ValueError(f"parameter {param.name} is fixed to {'|'.join(param.enum)} here, got {value!r}")
        resolved.append(replace(param, value=value))
    return resolved


def workflow_params(
    cfg: Config,
    values: Mapping[str, str],
    *,
    iteration: int | None = None,
    run: bool = True,
    extra: Sequence[Param] = (),
) -> list[Param]:
    """root (storage.root; required when that is a local path), run (the mutex name, derived from the root),
    for iterations the iteration (fixed: the DAG of iteration i depends on i), then `extra`; filled in from
    `values` (unknown names are a `ValueError`). A trailing slash of the root is dropped: `{root}/iter_0` must
    not become `…//iter_0`."""
    if values.get("root"):
        values = {**values, "root": values["root"].rstrip("/")}
    root = values.get("root") or remote_root(cfg)
    params = [Param("root", root, "Run root URI (s3://bucket/prefix): artifacts live under {root}/iter_{i}/{stage}/.")]
    if run:
        params.append(Param(
            "run",
            run_name(root) if root else None,
            "Name of the run: the mutex burnqed-run-{run} keeps two iterations of one run from overlapping. "
            "Derive it from the root (burnqed submit does).",
        ))
    if iteration is not None:
        params.append(
            Param("iteration", str(iteration), "Expert-iteration index (fixed for this DAG).", (str(iteration),))
        )
    return resolve([*params, *extra], values)


# ------------------------------------------------------------------------------------------ pods


@dataclass(frozen=True, slots=True)
class Images:
    core: str
    train: str
    sglang: str
    rl: str


def images(cluster: ClusterConfig) -> Images:
    """Our images, tagged with cluster.image_tag or the package version."""
    tag = cluster.image_tag or version("burnqed")
    registry = cluster.image_registry.rstrip("/")
    return Images(
        core=f"{registry}/burnqed-core:{tag}",
        train=f"{registry}/burnqed-train:{tag}",
        sglang=cluster.sglang_image or f"{registry}/burnqed-sglang:{tag}",
        rl=f"{registry}/burnqed-rl:{tag}",
    )


@dataclass(frozen=True, slots=True)
class Profile:
    """How one workflow dresses its pods."""

    cfg: Config
    mount_config: bool = True  # mount the config ConfigMap (BURNQED_CONFIG); smoke runs on embedded defaults
    cpu_only: bool = False  # smoke: no GPU, no sidecar, the stages in the train image with the policy in-process
    require_done_model: bool = True  # the served model must be a finished stage output (`fetch --require-done`)
    lean: LeanConfig | None = None  # the Lean settings the pods run when they are not cfg.lean (smoke)
    # Stages of a cpu_only workflow that run in the core image against the image's own Lean (smoke's selftest),
    # with the Lean settings their command line gives them.
    image_lean: Mapping[str, LeanConfig] = field(default_factory=dict)

    @property
    def pod_lean(self) -> LeanConfig:
        return self.lean or self.cfg.lean

    def stage_lean(self, stage: Stage) -> LeanConfig:
        """The Lean settings `stage`'s pod runs (its memory plan is checked against them)."""
        return self.image_lean.get(stage.name) or self.pod_lean


def _volume(name: str, *, size: str, memory: bool = False) -> m.Volume:
    return m.Volume(name=name, empty_dir=m.EmptyDirVolumeSource(medium="Memory" if memory else None, size_limit=size))


def _security(cluster: ClusterConfig, read_only: bool, lean: bool = False) -> m.SecurityContext:
    if lean and cluster.lean_uid is not None:
        # burnqed starts Lean under cluster.lean_uid (burnqed.base.sandbox): switching users takes root with
        # CAP_SETUID/CAP_SETGID, stopping the workers CAP_KILL; every other capability is dropped. Lean's uid then
        # cannot read burnqed's (or Argo's emissary's) /proc/PID/environ nor token files of mode 0600/0640.
        if cluster.lean_uid == cluster.run_as_user:
            raise ValueError(f"cluster.lean_uid = {cluster.lean_uid} equals cluster.run_as_user: Lean needs a uid of "
                             "its own")
        return m.SecurityContext(
            run_as_non_root=False,
            run_as_user=0,
            run_as_group=0,
            allow_privilege_escalation=False,
            read_only_root_filesystem=read_only,
            capabilities=m.Capabilities(drop=["ALL"], add=["SETUID", "SETGID", "KILL"]),
        )
    return m.SecurityContext(
        run_as_non_root=True,
        run_as_user=cluster.run_as_user,
        run_as_group=cluster.run_as_user,
        allow_privilege_escalation=False,
        read_only_root_filesystem=read_only,
        capabilities=m.Capabilities(drop=["ALL"]),
    )


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


def _env(profile: Profile, lean: list[tuple[str, str]] | None = None) -> list[m.EnvVar]:
    pairs = [
        ("PYTHONUNBUFFERED", "1"),
        ("BURNQED_LOG_LEVEL", "INFO"),
        ("HOME", "/tmp"),
        ("BURNQED_HOME", "/tmp/burnqed"),
        ("XDG_CACHE_HOME", "/tmp/cache"),
        ("HF_HOME", "/tmp/hf"),
    ]
    storage = profile.cfg.storage
    # also for commands that load no configuration (merge-trajectories): botocore and s3fs read these
    if storage.endpoint_url:
        pairs.append(("AWS_ENDPOINT_URL", storage.endpoint_url))
    if storage.region:
        pairs.append(("AWS_DEFAULT_REGION", storage.region))
    if profile.mount_config:
        # the pod refuses to start on a ConfigMap other than the one rendered from (burnqed.config.digest)
        pairs += [("BURNQED_CONFIG", f"{CONFIG_DIR}/{CONFIG_FILE}"), (DIGEST_ENV, pod_config_digest(profile.cfg))]
    else:  # embedded defaults, but the pods still need to reach the run root
        pairs += [(f"BURNQED_STORAGE__{key.upper()}", value) for key, value in
                  (("endpoint_url", storage.endpoint_url), ("region", storage.region)) if value]
    pairs += lean or []
    return [m.EnvVar(name=name, value=value) for name, value in pairs]


def _env_from(cluster: ClusterConfig) -> list[m.EnvFromSource] | None:
    if not cluster.s3_secret:
        return None
    return [m.EnvFromSource(secret_ref=m.SecretEnvSource(name=cluster.s3_secret))]


DETERMINISTIC = "--enable-deterministic-inference"  # SGLang 0.5.23 ignores sampling_seed without it
# Nothing sampled from the model folder: SGLang's default, "model", fills a chat request's missing temperature, top_p,
# top_k, min_p and repetition_penalty from generation_config.json (every /generate request carries them all anyway)
SAMPLING_DEFAULTS = ["--sampling-defaults", "openai"]


def _sglang_sidecar(stage: Stage, profile: Profile, plan: GpuPlan) -> UserContainer:
    """SGLang on the GPU, and, for a stage that scores with the value model, burnqed's encoder beside it (started
    first); memory from the GPU plan (`burnqed.cluster.gpu_plan`)."""
    cluster = profile.cfg.cluster
    pairs: list[tuple[str, str]] = []
    mounts = []
    if plan.encoder:
        pairs += [
            ("EMBED_PORT", str(ENCODE_PORT)),
            ("ENCODER_MEMORY_GIB", f"{plan.encoder_gib:.2f}"),
            ("ENCODER_BATCH_TOKENS", str(plan.encoder_batch_tokens)),
            ("BURNQED_HOME", "/tmp/burnqed"),
        ]
        if profile.mount_config:  # the encoder embeds with the same ebm.* settings as train-ebm, checked like main
            pairs += [("BURNQED_CONFIG", f"{CONFIG_DIR}/{CONFIG_FILE}"), (DIGEST_ENV, pod_config_digest(profile.cfg))]
            mounts.append(m.VolumeMount(name="config", mount_path=CONFIG_DIR, read_only=True))
    return _sglang_container("sglang", profile, plan, POLICY_DIR, GENERATE_PORT, pairs, mounts, cluster.sglang_args,
                             cluster.gpus_per_step, seeded=profile.cfg.policy.seed is not None)


def _planner_sidecar(profile: Profile, plan: GpuPlan) -> UserContainer:
    """The planner's SGLang (planner.model, fetched into PLANNER_DIR) on `planner.gpus` GPUs of its own, on loopback
    at PLANNER_PORT; memory from its GPU plan (`gpu_plan.planner_gpu_plan`)."""
    planner = profile.cfg.planner
    return _sglang_container("sglang-planner", profile, plan, PLANNER_DIR, PLANNER_PORT, [], [], planner.sglang_args,
                             planner.gpus, seeded=profile.cfg.policy.seed is not None)


def _rl_sidecar(profile: Profile, plan: GpuPlan) -> UserContainer:
    """The rl step's SGLang (rl.rollout_engine = 'served'): the policy's served model (`rl_served_model`) on
    loopback at GENERATE_PORT, on cluster.gpus_per_step GPUs of its own, memory from `rl_plan.rl_server_plan`; for an
    adapter policy with LoRA on (`rl_lora_args`), so that the trainer's pushed adapters load; always seeded (every
    rollout carries its sampling_seed, rl.served.sample_seed)."""
    cluster = profile.cfg.cluster
    return _sglang_container("sglang", profile, plan, POLICY_DIR, GENERATE_PORT, [], [],
                             [*cluster.sglang_args, *rl_lora_args(profile.cfg)], cluster.gpus_per_step, seeded=True)


def rl_lora_args(cfg: Config) -> list[str]:
    """SGLang's LoRA options for the rl sidecar of an adapter policy (sft.method lora or qlora; none for full weights,
    which reach it through /update_weights_from_disk): LoRA on with no adapter at start, so the rank and the modules
    are given (SGLang infers them only from --lora-paths), and RL_LORA_SLOTS adapters per batch."""
    if cfg.sft.method == "full":
        return []
    return ["--enable-lora", "--max-lora-rank", str(cfg.sft.lora_r),
            "--lora-target-modules", *dict.fromkeys(cfg.sft.target_modules),
            "--max-loras-per-batch", str(RL_LORA_SLOTS)]


def rl_served_model(stage: Stage, cfg: Config) -> str:
    """The model folder the rl sidecar serves: for an adapter policy the base model the adapter was trained on
    (sft.base_model, which SFT refuses to change across iterations), for full weights the SFT output the step reads
    (its --sft); `ConfigError` for an adapter over the tiny embedded model (no URI to fetch)."""
    if cfg.sft.method == "full" and isinstance(stage.request, RlRequest):
        return stage.request.sft
    if cfg.sft.base_model is None:
        raise ConfigError(f"step {stage.name}: rl.rollout_engine = 'served' serves the adapter's base model from a "
                          "sidecar, but sft.base_model is unset (the tiny embedded model has no URI to fetch): set "
                          "sft.base_model, or rl.server_url to a server of your own")
    return cfg.sft.base_model


def _sglang_container(name: str, profile: Profile, plan: GpuPlan, model_dir: str, port: int,
                      pairs: list[tuple[str, str]], mounts: list[m.VolumeMount], extra_args: Sequence[str],
                      gpus: int, *, seeded: bool) -> UserContainer:
    """An SGLang sidecar `name` (the image's entrypoint) serving `model_dir` on loopback at `port` with the plan's
    --mem-fraction-static on `gpus` GPUs (tensor parallel above 1), `pairs` and `mounts` added; `seeded`: its requests
    carry sampling seeds, which SGLang reads only in deterministic mode."""
    cluster = profile.cfg.cluster
    env = [("MODEL_DIR", model_dir), ("READY_FILE", f"{model_dir}/{READY_FILE_NAME}"), ("HOST", LOOPBACK),
           ("PORT", str(port)), ("MEM_FRACTION", f"{plan.sglang_fraction:.3f}"),
           ("SGLANG_RETURN_ORIGINAL_LOGPROB", "1"),  # pre-temperature log-probs (also set in the image)
           ("HOME", "/tmp"), *pairs]
    args = [*SAMPLING_DEFAULTS, *extra_args]  # the config refuses another --sampling-defaults there
    if seeded and DETERMINISTIC not in args:
        args.append(DETERMINISTIC)  # SGLang reads sampling_seed only in deterministic mode (sampling_batch_info.py)
    if gpus > 1:
        args += ["--tp-size", str(gpus)]
    return UserContainer(
        name=name,
        image=images(cluster).sglang,
        image_pull_policy=cluster.image_pull_policy,
        command=["burnqed-sglang"],  # the image's entrypoint (images/sglang/Dockerfile): no registry lookup by Argo
        args=args,
        env=[m.EnvVar(name=key, value=value) for key, value in env],
        resources=Resources(
            cpu_request=cluster.sglang_cpu,
            memory_request=cluster.sglang_memory,
            memory_limit=cluster.sglang_memory,
            gpus=gpus,
        ),
        volume_mounts=[
            m.VolumeMount(name="shm", mount_path="/dev/shm"),
            m.VolumeMount(name="models", mount_path=MODELS_DIR, read_only=True),
            m.VolumeMount(name="scratch", mount_path="/tmp"),
            *mounts,
        ],
        security_context=_security(cluster, read_only=False),  # SGLang writes kernel caches next to its code
    )


def _fetch_init(model: str, profile: Profile, *, name: str = "fetch-model", folder: str = POLICY_DIR) -> UserContainer:
    """`burnqed fetch` of the served model into `folder` in the core image, `--model-folder` always: the base model
    (eval-base, the baseline workflow) is written like an export, which it leaves byte for byte."""
    cluster = profile.cfg.cluster
    fetch_requirements(declared()["core"], where="the fetch-model init container")
    env: list[Any] = _env(profile)  # UserContainer's list type is invariant over Hera's env classes
    env_from: list[Any] | None = _env_from(cluster)
    return UserContainer(
        name=name,
        image=images(cluster).core,
        image_pull_policy=cluster.image_pull_policy,
        command=["burnqed"],
        # A model this run produces must be a finished stage output; one from outside the run root (the base
        # model that eval-base serves) carries no completion marker.
        args=["fetch", model, folder, "--model-folder",
              *(["--require-done"] if profile.require_done_model and model.startswith(ROOT) else [])],
        env=env,
        env_from=env_from,
        resources=Resources(cpu_request="1", memory_request="2Gi", memory_limit="4Gi"),
        volume_mounts=[
            m.VolumeMount(name="models", mount_path=MODELS_DIR),
            m.VolumeMount(name="scratch", mount_path="/tmp"),
            *([m.VolumeMount(name="config", mount_path=CONFIG_DIR, read_only=True)] if profile.mount_config else []),
        ],
        security_context=_security(cluster, read_only=True),
    )


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


def sidecar_sets(stage: Stage) -> list[str]:
    """The main container's `--set`s that point burnqed at the sidecar's servers, and say that they are being started
    beside it (policy.wait_for_start: their ports stay closed while they load the model, which is waited for)."""
    sets = ["--set", "policy.wait_for_start=true", "--set", "policy.backend=sglang",
            "--set", f"policy.url=http://{LOOPBACK}:{GENERATE_PORT}"]
    if stage.ebm is not None:
        sets += ["--set", "ebm.encoder_backend=serve", "--set", f"ebm.encoder_url=http://{LOOPBACK}:{ENCODE_PORT}"]
    return sets


def rl_sidecar_sets() -> list[str]:
    """The rl step's `--set`s that point the served engine at its sidecar (rl.server_url) and say that it is being
    started beside it: `burnqed rl` waits for its /health (policy.wait_for_start: through the closed port of a server
    still loading, up to policy.ready_timeout_s) before it loads the policy."""
    return ["--set", f"rl.server_url=http://{LOOPBACK}:{GENERATE_PORT}", "--set", "policy.wait_for_start=true"]


def planner_sets() -> list[str]:
    """The main container's `--set` that points the planner's client at its sidecar (policy.wait_for_start, which
    its client shares, already says that the sidecars are being started)."""
    return ["--set", f"planner.url=http://{LOOPBACK}:{PLANNER_PORT}"]


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


def _gpu_containers(stage: Stage, profile: Profile, *, sidecar: bool, planner: bool, trainer: bool,
                    served_model: str | None) -> tuple[str | None, list[Any], list[Any]]:
    """The pod's GPU plans as its annotation says them (None: no plan), its sidecars and their init containers: the
    policy's SGLang of a search pod (`sidecar`) and the planner's beside it (`planner`), the rl trainer's GPU
    (`trainer`) and, with `served_model`, the rl step's SGLang serving it."""
    cluster = profile.cfg.cluster
    exported = stage.policy_model is not None and stage.policy_model.startswith(ROOT)  # an iteration's own export
    plan = gpu_plan(profile.cfg, encoder=stage.ebm is not None, run_export=exported) if sidecar else None
    planner_plan = planner_gpu_plan(profile.cfg) if planner else None
    rl_plan = rl_gpu_plan(profile.cfg) if trainer else None
    server_plan = rl_server_plan(profile.cfg) if served_model is not None else None
    described = plan.describe() if plan is not None else rl_plan.describe() if rl_plan is not None else None
    if described is not None and planner_plan is not None:
        described += (f"\nthe planner's sidecar, on {profile.cfg.planner.gpus} GPU(s) of its own: "
                      + planner_plan.describe())
    if described is not None and server_plan is not None:
        described += (f"\nthe rl step's SGLang sidecar, on {cluster.gpus_per_step} GPU(s) of its own: "
                      + server_plan.describe())
    sidecars = [_sglang_sidecar(stage, profile, plan)] if plan is not None else []
    inits: list[Any] = [_fetch_init(stage.policy_model, profile)] if sidecar and stage.policy_model else []
    if server_plan is not None and served_model is not None:
        sidecars.append(_rl_sidecar(profile, server_plan))
        inits.append(_fetch_init(served_model, profile))
    if planner_plan is not None and profile.cfg.planner.model:
        sidecars.append(_planner_sidecar(profile, planner_plan))
        inits.append(_fetch_init(profile.cfg.planner.model, profile, name="fetch-planner", folder=PLANNER_DIR))
    return described, sidecars, inits


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
    described, sidecars, inits = _gpu_containers(stage, profile, sidecar=sidecar, planner=planner,
                                                 trainer=gpu and stage.resource is Resource.TRAIN_LEAN,
                                                 served_model=served_model)
    return Container(
        name=stage.name,
        image={"train": image.train, "rl": image.rl}.get(image_kind, image.core),
        image_pull_policy=cluster.image_pull_policy,
        command=["burnqed"],
        args=args,
        inputs=[Parameter(name="shard")] if stage.fanned_out else None,
        env=_env(profile, [*(_lean_env(stage, profile) if lean else []), *pins]),
        env_from=_env_from(cluster),
        resources=resources,
        volumes=volumes,
        volume_mounts=mounts,
        security_context=_judge_security(profile) if judge else _security(cluster, read_only=True, lean=lean),
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

"""The `[cluster]` section: Argo / Kubernetes, the workflow files and the Helm chart (docs/cluster.md)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from burnqed.config.identity import neutral, with_role
from burnqed.config.section import Section

# SGLang options that would give a request's missing sampling fields other values than policy.*'s, each with the
# shortest prefix argparse cannot expand to it alone (SGLang's parser allows abbreviations: --sampling-backend
# shares "--sampling-", the --prefill-* options "--pref").
SAMPLING_OPTIONS = (("--sampling-defaults", "--sampling-"), ("--preferred-sampling-params", "--pref"))


def sampling_option(arg: str) -> str | None:
    """The SGLang sampling option `arg` names (in full, abbreviated, or as --option=value), else None."""
    name = arg.split("=", 1)[0]
    for option, ambiguous in SAMPLING_OPTIONS:
        if len(name) > len(ambiguous) and option.startswith(name):
            return option
    return None

POD = with_role(neutral("how and where the workflow's pods run, not what they compute"), "pod")
# where `submit` and `cluster check` reach the cluster from: nothing a pod runs reads these (the pods' configuration
# digest leaves them out, `config.digest.CLIENT_ONLY`)
CLIENT = with_role(neutral("where `submit` and `cluster check` reach the cluster from, not what the pods compute"),
                   "client")


class ClusterConfig(Section):
    """Argo / Kubernetes settings for `burnqed render | submit`, the workflow files and the Helm chart
    (docs/cluster.md). Names here (ServiceAccount, ConfigMaps, Secret, PriorityClasses) must match the chart's
    values."""

    # Each field's role (`identity.with_role`): read by the pods ("pod"), or only by the submitting side ("client").
    ROLES: ClassVar[tuple[str, ...]] = ("pod", "client")

    namespace: str = Field(default="burnqed", description="Namespace of workflows and their pods.",
                           json_schema_extra=CLIENT)
    image_registry: str = Field(
        default="ghcr.io/burnqed",
        description="Registry prefix of the burnqed images: {image_registry}/burnqed-core, burnqed-train, "
        "burnqed-sglang.",
        json_schema_extra=POD,
    )
    image_tag: str | None = Field(default=None, description="Tag of the burnqed images; unset = the package version.",
                                  json_schema_extra=POD)
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        default="IfNotPresent", description="Pull policy of every container.",
        json_schema_extra=POD,
    )
    image_pull_secrets: list[str] = Field(
        default_factory=list, description="Names of existing docker-registry Secrets the pods pull images with.",
        json_schema_extra=POD,
    )
    sglang_image: str | None = Field(
        default=None,
        description="Image of the SGLang sidecar; unset = {image_registry}/burnqed-sglang:{tag} (images/sglang: the "
        "pinned SGLang base plus the entrypoint that waits for the model folder and sets "
        "SGLANG_RETURN_ORIGINAL_LOGPROB=1). It must provide that entrypoint.",
        json_schema_extra=POD,
    )
    sglang_args: list[str] = Field(
        default_factory=list,
        description="Extra arguments of `sglang.launch_server` in the sidecar, e.g. ['--dtype', 'bfloat16']. The "
        "sidecar always passes --sampling-defaults openai; --sampling-defaults and --preferred-sampling-params "
        "(or an abbreviation of them) are refused here: every sampling field comes from policy.* (docs/search.md).",
        json_schema_extra=POD,
    )
    sglang_cpu: str = Field(default="4", description="CPU request of the SGLang sidecar.", json_schema_extra=POD)
    sglang_memory: str = Field(
        default="32Gi", description="Memory request and limit of the SGLang sidecar (host memory: it loads weights).",
        json_schema_extra=POD,
    )
    model_volume_size: str = Field(
        default="64Gi", description="Size limit of the emptyDir the policy model is downloaded into for the sidecar.",
        json_schema_extra=POD,
    )
    shm_size: str = Field(default="16Gi", description="Size limit of the memory-backed /dev/shm of GPU pods.",
                          json_schema_extra=POD)
    scratch_size: str = Field(
        default="50Gi", description="Size limit of the /tmp emptyDir (caches, staged outputs; root FS is read-only).",
        json_schema_extra=POD,
    )
    service_account: str = Field(
        default="burnqed-workflow",
        description="ServiceAccount the pods and Argo's executor run as (the main containers get no token).",
        json_schema_extra=POD,
    )
    config_map: str = Field(
        default="burnqed-config",
        description="ConfigMap whose key burnqed.toml is mounted into the pods as BURNQED_CONFIG.",
        json_schema_extra=POD,
    )
    s3_secret: str | None = Field(
        default="burnqed-s3",
        description="Name of an existing Secret with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (envFrom); only the "
        "name is rendered, never a value. Unset = workload identity (IRSA, GKE Workload Identity).",
        json_schema_extra=POD,
    )
    argo_server: str | None = Field(
        default=None,
        description="Argo Server URL for `submit`; unset = $ARGO_SERVER, else the Kubernetes API server of the "
        "kubeconfig's current context, proxied to argo_service.",
        json_schema_extra=CLIENT,
    )
    argo_service: str = Field(
        default="argo/http:argo-workflows-server:2746",
        description="NAMESPACE/[SCHEME:]SERVICE:PORT of the Argo Server, reached through the Kubernetes API server's "
        "service proxy when the server comes from the kubeconfig. Default: argo-helm's Service (plain HTTP on 2746) "
        "for a release named argo-workflows in namespace argo; argo-helm names it <release>-argo-workflows-server "
        "(https: when server.secure). This route needs the Argo Server in server auth mode (the API server drops "
        "the Authorization header).",
        json_schema_extra=CLIENT,
    )
    argo_token_env: str = Field(
        default="ARGO_TOKEN", description="Environment variable holding the Argo bearer token (never in config).",
        json_schema_extra=CLIENT,
    )
    insecure_skip_verify: bool = Field(default=False, description="Skip TLS verification of the Argo Server.",
                                       json_schema_extra=CLIENT)
    gpu_node_selector: dict[str, str] = Field(
        default_factory=lambda: {"burnqed.io/pool": "gpu"}, description="Node selector of GPU steps.",
        json_schema_extra=POD,
    )
    cpu_node_selector: dict[str, str] = Field(default_factory=dict, description="Node selector of CPU steps.",
                                              json_schema_extra=POD)
    gpu_tolerations: list[dict[str, str]] = Field(
        default_factory=lambda: [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        description="Tolerations of GPU steps (Kubernetes toleration objects).",
        json_schema_extra=POD,
    )
    cpu_tolerations: list[dict[str, str]] = Field(
        default_factory=list, description="Tolerations of CPU steps (e.g. for a spot CPU pool).",
        json_schema_extra=POD,
    )
    priority_class_gpu: str = Field(default="burnqed-gpu", description="PriorityClass of GPU steps.",
                                    json_schema_extra=POD)
    priority_class_cpu: str = Field(default="burnqed-cpu", description="PriorityClass of CPU steps.",
                                    json_schema_extra=POD)
    search_cpu: str = Field(
        default="16", description="CPU request of the Lean workers' container (search shards, eval, data replay).",
        json_schema_extra=POD,
    )
    search_memory: str = Field(
        default="96Gi",
        description="Memory request and limit of the Lean workers' container. `render` refuses it when it is below "
        "lean.workers × lean.recycle_rss_mb + lean_main_memory (an unset lean.workers resolves to what fits).",
        json_schema_extra=POD,
    )
    lean_main_memory: str = Field(
        default="4Gi",
        description="Memory set aside for burnqed's own process in a Lean container (search tree, batches, the "
        "trajectory writer; the tiny model in the smoke workflow) when render checks the memory plan.",
        json_schema_extra=POD,
    )
    train_cpu: str = Field(default="8", description="CPU request of GPU training steps (SFT, export, EBM).",
                           json_schema_extra=POD)
    train_memory: str = Field(default="64Gi", description="Memory request and limit of GPU training steps.",
                              json_schema_extra=POD)
    step_cpu: str = Field(default="2", description="CPU request of CPU-only steps (merge, report).",
                          json_schema_extra=POD)
    step_memory: str = Field(default="8Gi", description="Memory request and limit of CPU-only steps.",
                             json_schema_extra=POD)
    judge_cpu: str = Field(default="4", description="CPU request of the judge step (lean.judge = 'comparator': "
                           "comparator builds one batch's challenge and solution, exports them and replays them in "
                           "the kernels).", json_schema_extra=POD)
    judge_memory: str = Field(default="16Gi", description="Memory request and limit of the judge step (Lean with the "
                              "headers' imports, Mathlib's several GB, twice over: challenge and solution).",
                              json_schema_extra=POD)
    gpus_per_step: int = Field(default=1, ge=1, description="GPUs per GPU step (SFT, export, EBM, the sidecar).",
                               json_schema_extra=POD)
    gpu_memory_label: str | None = Field(
        default="nvidia.com/gpu.memory",
        description="Node label holding one GPU's memory in MiB (NVIDIA GPU feature discovery writes "
        "nvidia.com/gpu.memory; the example node pools set it). Pods with the SGLang sidecar require it to be at "
        "least serving.gpu_memory_gib (node affinity), so the GPU memory plan holds on the node they land on, and "
        "`cluster check` counts only GPU nodes that carry enough. Empty or unset = neither (the plan trusts "
        "serving.gpu_memory_gib).",
        json_schema_extra=POD,
    )
    retries: int = Field(
        default=3,
        ge=0,
        description="Retries of a step that was interrupted: evicted, preempted, its node shut down or lost, its pod "
        "deleted (the retry expression of burnqed.cluster.retry). A step that exits non-zero by itself is not retried: "
        "that is deterministic. 0 = no retryStrategy.",
        json_schema_extra=POD,
    )
    retry_oom_killed: bool = Field(
        default=False,
        description="Also retry a step whose main container was OOM-killed. Off: render checks that the Lean workers "
        "fit the memory limit, so an OOM means a size is wrong and the same limits would fail again.",
        json_schema_extra=POD,
    )
    storage_retries: int = Field(
        default=2,
        ge=0,
        description="Retries of a step that failed on a storage error a retry can cure (burnqed exits 75: a timeout, "
        "a dropped connection, a 5xx or throttling answer of S3), counted within `retries`. 0 = never.",
        json_schema_extra=POD,
    )
    termination_grace_s: int = Field(
        default=300,
        ge=30,
        description="terminationGracePeriodSeconds of Lean and GPU pods: the time between SIGTERM (eviction, "
        "preemption, drain, spot reclaim) and SIGKILL in which search saves the finished theorems and uploads them. "
        "Kubernetes' default is 30 s. A node's graceful-shutdown budget (kubelet shutdownGracePeriod, the cloud's "
        "reclaim notice: 2 minutes on AWS spot) can cut it shorter.",
        json_schema_extra=POD,
    )
    retry_backoff_s: int = Field(default=60, ge=1, description="First retry delay; doubles per retry.",
                                 json_schema_extra=POD)
    retry_backoff_cap_s: int = Field(default=1800, ge=1, description="Longest retry delay.", json_schema_extra=POD)
    step_deadline_s: int = Field(default=86400, ge=60, description="activeDeadlineSeconds of one step.",
                                 json_schema_extra=POD)
    workflow_deadline_s: int = Field(
        default=7 * 86400, ge=60, description="activeDeadlineSeconds of a whole workflow.",
        json_schema_extra=POD,
    )
    ttl_after_finished_s: int = Field(default=7 * 86400, ge=0, description="Delete finished workflows after this.",
                                      json_schema_extra=POD)
    pod_gc: Literal["OnPodCompletion", "OnPodSuccess", "OnWorkflowCompletion", "OnWorkflowSuccess"] = Field(
        default="OnPodSuccess", description="podGC strategy: by default failed pods stay for inspection until the TTL.",
        json_schema_extra=POD,
    )
    pod_gc_delay: str = Field(default="10m", description="podGC deleteDelayDuration (time to read logs).",
                              json_schema_extra=POD)
    artifact_repository: str = Field(
        default="burnqed-artifact-repository",
        description="ConfigMap naming the artifact repository (key 'default') where step logs are archived.",
        json_schema_extra=POD,
    )
    template_iterations: int = Field(
        default=3,
        ge=1,
        description="WorkflowTemplates burnqed-iteration-0 .. N-1 are rendered for the chart (an iteration's DAG "
        "depends on its index); `submit` builds any iteration from the workflow files.",
        json_schema_extra=POD,
    )
    run_as_user: int = Field(default=1000, ge=1, description="UID of every container (the images' non-root user).",
                             json_schema_extra=POD)
    lean_uid: int | None = Field(
        default=1001,
        ge=1,
        description="UID (and group) the Lean workers of Lean pods run as (pinned as lean.run_as_uid), so generated "
        "code cannot read burnqed's credentials: the main container of those pods then runs as root with only "
        "CAP_SETUID, CAP_SETGID and CAP_KILL (Pod Security 'baseline'), and burnqed starts Lean under this uid with no "
        "supplementary groups. Must differ from run_as_user. Unset = Lean runs as run_as_user in a non-root "
        "container, with a scrubbed environment only (it could read /proc/PID/environ and mounted token files).",
        json_schema_extra=POD,
    )

    @field_validator("sglang_args")
    @classmethod
    def _no_sampling_defaults(cls, args: list[str]) -> list[str]:
        for arg in args:
            option = sampling_option(arg)
            if option is not None:
                raise ValueError(
                    f"{arg!r} sets SGLang's {option}: the sidecar starts SGLang with --sampling-defaults openai and "
                    "every request carries every sampling field from policy.* (temperature, top_p, top_k, min_p, "
                    "the penalties); set those there instead")
        return args

"""The sidecars of a step's pod and their init containers: the policy's SGLang on a search pod's GPU (with burnqed's
encoder beside it), the planner's SGLang in sketch mode, the rl step's SGLang serving the policy, and the
`burnqed fetch` init container that puts each one's model in place; the main container's `--set`s that point burnqed
at them. A helper of the workflow files here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hera.workflows import Resources, UserContainer
from hera.workflows import models as m

from burnqed.cluster.gpu_plan import GpuPlan, gpu_plan, planner_gpu_plan
from burnqed.cluster.images import declared, fetch_requirements
from burnqed.cluster.rl_plan import RL_LORA_SLOTS, rl_gpu_plan, rl_server_plan
from burnqed.config import Config
from burnqed.config.digest import DIGEST_ENV, pod_config_digest
from burnqed.errors import ConfigError
from burnqed.runner.plan import Stage
from burnqed.runner.requests import RlRequest

from ._params import ROOT
from ._pods import CONFIG_DIR, CONFIG_FILE, Profile, env, env_from, images, security

MODELS_DIR = "/models"
POLICY_DIR = f"{MODELS_DIR}/policy"
PLANNER_DIR = f"{MODELS_DIR}/planner"  # the planner's model, beside the policy's in the same emptyDir
READY_FILE_NAME = ".burnqed-ready"  # written last by `burnqed fetch` (burnqed.cluster.fetch.READY_NAME)
LOOPBACK = "127.0.0.1"  # the sidecar listens on loopback only: nothing outside the pod reaches it
GENERATE_PORT = 30000
ENCODE_PORT = 30001
PLANNER_PORT = 30002  # the planner's sidecar (planner.url's default)

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
        security_context=security(cluster, read_only=False),  # SGLang writes kernel caches next to its code
    )


def _fetch_init(model: str, profile: Profile, *, name: str = "fetch-model", folder: str = POLICY_DIR) -> UserContainer:
    """`burnqed fetch` of the served model into `folder` in the core image, `--model-folder` always: the base model
    (eval-base, the baseline workflow) is written like an export, which it leaves byte for byte."""
    cluster = profile.cfg.cluster
    fetch_requirements(declared()["core"], where="the fetch-model init container")
    fetch_env: list[Any] = env(profile)  # UserContainer's list type is invariant over Hera's env classes
    fetch_env_from: list[Any] | None = env_from(cluster)
    return UserContainer(
        name=name,
        image=images(cluster).core,
        image_pull_policy=cluster.image_pull_policy,
        command=["burnqed"],
        # A model this run produces must be a finished stage output; one from outside the run root (the base
        # model that eval-base serves) carries no completion marker.
        args=["fetch", model, folder, "--model-folder",
              *(["--require-done"] if profile.require_done_model and model.startswith(ROOT) else [])],
        env=fetch_env,
        env_from=fetch_env_from,
        resources=Resources(cpu_request="1", memory_request="2Gi", memory_limit="4Gi"),
        volume_mounts=[
            m.VolumeMount(name="models", mount_path=MODELS_DIR),
            m.VolumeMount(name="scratch", mount_path="/tmp"),
            *([m.VolumeMount(name="config", mount_path=CONFIG_DIR, read_only=True)] if profile.mount_config else []),
        ],
        security_context=security(cluster, read_only=True),
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


def gpu_containers(stage: Stage, profile: Profile, *, sidecar: bool, planner: bool, trainer: bool,
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

"""What every container of a burnqed workflow shares: its images, the profile a workflow dresses its pods with, the
security context, the environment and the config mount's place; a helper of the workflow files here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import version

from hera.workflows import models as m

from burnqed.config import ClusterConfig, Config, LeanConfig
from burnqed.config.digest import DIGEST_ENV, pod_config_digest
from burnqed.runner.plan import Stage

CONFIG_DIR = "/etc/burnqed"
CONFIG_FILE = "burnqed.toml"  # the key of the config ConfigMap


@dataclass(frozen=True, slots=True)
class Images:
    core: str
    train: str
    sglang: str
    rl: str


@cache
def package_version() -> str:
    """The installed burnqed's version, read once a process (each read of the package metadata scans sys.path: a
    render asks for it for every pod)."""
    return version("burnqed")


def images(cluster: ClusterConfig) -> Images:
    """Our images, tagged with cluster.image_tag or the package version."""
    tag = cluster.image_tag or package_version()
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


def security(cluster: ClusterConfig, read_only: bool, lean: bool = False) -> m.SecurityContext:
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


def env(profile: Profile, lean: list[tuple[str, str]] | None = None) -> list[m.EnvVar]:
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


def env_from(cluster: ClusterConfig) -> list[m.EnvFromSource] | None:
    if not cluster.s3_secret:
        return None
    return [m.EnvFromSource(secret_ref=m.SecretEnvSource(name=cluster.s3_secret))]

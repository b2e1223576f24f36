"""What comparator's sandbox needs from the judge step's pod (docs/cluster.md, "The judge's sandbox"), and the check
of a rendered or installed workflow against it: one line saying what is missing.

    kind = sandbox_kind(cfg.lean)              # "bubblewrap" (lake comparator), "landrun" (standalone) or "none"
    judge_security(kind)                       # the securityContext the judge container gets (camelCase keys)
    check_judge_pods(doc, kind)                # ConfigError: "step judge-eval: comparator's sandbox (bubblewrap) …"
    answer_slot_refusal(cfg)                   # comparator without definition holes for the answer slots indexed

comparator builds each solution in a sandbox: `lake comparator` (Lean >= v4.35.0-rc2) in bubblewrap, which makes
user namespaces (the container's seccomp and AppArmor profiles must let it: RuntimeDefault refuses `unshare` of a
user namespace without CAP_SYS_ADMIN, and no capability is given here), the standalone comparator in landrun
(Landlock: unprivileged, under no_new_privs, which `allowPrivilegeEscalation: false` sets). Both refuse a privileged
user (comparator's README: "You are not running this under a privileged user"), so the pod is never privileged,
runs as a non-root uid and keeps no capability. `lean.comparator_no_sandbox` (--inadvisably-no-sandbox) needs none of
it, and every result says the sandbox was off.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal

from burnqed.config import Config, LeanConfig
from burnqed.errors import ConfigError
from leankit.version import DEFINITION_HOLES_LEAN, DEFINITION_HOLES_SAID, lacks_definition_holes

SandboxKind = Literal["bubblewrap", "landrun", "none"]
JUDGE_PREFIX = "judge-"  # the judge steps' names (`runner.plan.judge_stage`)
STAGE_LABEL = "burnqed.io/stage"
JUDGE_LABEL = "burnqed.io/judge"  # "true" on every step comparator judges in (`Resource.JUDGE`: the merge's too)


def sandbox_kind(lean: LeanConfig) -> SandboxKind:
    """The sandbox comparator builds solutions in: none with lean.comparator_no_sandbox, bubblewrap for `lake
    comparator`, landrun for the standalone binary (any other lean.comparator_command)."""
    if lean.comparator_no_sandbox:
        return "none"
    return "bubblewrap" if list(lean.comparator_command[:2]) == ["lake", "comparator"] else "landrun"


def judge_security(kind: SandboxKind, run_as_user: int) -> dict[str, Any]:
    """The judge container's securityContext (Kubernetes' camelCase keys): never privileged, uid `run_as_user`, no
    privilege escalation, no capability, a read-only root; for bubblewrap also the seccomp and AppArmor profiles
    that let it make user namespaces (Unconfined: RuntimeDefault refuses them)."""
    security: dict[str, Any] = {
        "privileged": False, "runAsNonRoot": True, "runAsUser": run_as_user, "runAsGroup": run_as_user,
        "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}
    if kind == "bubblewrap":
        security |= {"seccompProfile": {"type": "Unconfined"}, "appArmorProfile": {"type": "Unconfined"}}
    return security


def sandbox_problems(container: Mapping[str, Any], pod: Mapping[str, Any], kind: SandboxKind) -> list[str]:
    """What the container's securityContext (`container`, over the pod's, `pod`) lacks for comparator's sandbox
    `kind`, each in a few words; [] when nothing."""
    def get(key: str) -> Any:
        return container[key] if key in container else pod.get(key)

    problems = []
    if container.get("privileged") is True:
        problems.append("not privileged (privileged: true)")
    uid = get("runAsUser")
    if uid == 0 or (uid is None and get("runAsNonRoot") is not True):
        problems.append("a non-root uid (runAsUser " + ("0" if uid == 0 else "unset, runAsNonRoot not true") + ")")
    if get("allowPrivilegeEscalation") is not False:
        problems.append("allowPrivilegeEscalation: false (no_new_privs" + (", which Landlock needs)"
                                                                           if kind == "landrun" else ")"))
    added = (container.get("capabilities") or {}).get("add") or []
    if added:
        problems.append(f"no added capability (adds {', '.join(map(str, added))})")
    if kind == "bubblewrap":
        seccomp = str((get("seccompProfile") or {}).get("type") or "RuntimeDefault")
        if seccomp not in ("Unconfined", "Localhost"):
            problems.append(f"user namespaces for bubblewrap (seccompProfile {seccomp} refuses them: Unconfined, or "
                            "a Localhost profile that allows unshare)")
        apparmor = str((get("appArmorProfile") or {}).get("type") or "RuntimeDefault")
        if apparmor not in ("Unconfined", "Localhost"):
            problems.append(f"an AppArmor profile that lets bubblewrap mount (appArmorProfile {apparmor})")
    return problems


def judge_templates(doc: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
    """Each judge step of a rendered Workflow or WorkflowTemplate: (its name, its container's securityContext, the
    pod's)."""
    spec = doc.get("spec") or {}
    pod = spec.get("securityContext") or {}
    for template in spec.get("templates") or []:
        name = str(template.get("name") or "")
        labels = (template.get("metadata") or {}).get("labels") or {}
        if (name.startswith(JUDGE_PREFIX) or str(labels.get(STAGE_LABEL, "")).startswith(JUDGE_PREFIX)
                or labels.get(JUDGE_LABEL) == "true"):
            yield name, (template.get("container") or {}).get("securityContext") or {}, \
                {**pod, **(template.get("securityContext") or {})}


def judge_pod_refusal(doc: Mapping[str, Any], kind: SandboxKind) -> str | None:
    """The one line saying what the first judge step of `doc` lacks for comparator's sandbox; None when nothing."""
    if kind == "none":
        return None
    for name, container, pod in judge_templates(doc):
        problems = sandbox_problems(container, pod, kind)
        if problems:
            return (f"step {name}: comparator's sandbox ({kind}) needs {'; '.join(problems)}: render the judge "
                    "step from burnqed's workflows, or set lean.comparator_no_sandbox = true (every result says so)")
    return None


def check_judge_pods(doc: Mapping[str, Any], kind: SandboxKind) -> None:
    """`ConfigError` with `judge_pod_refusal`'s line when a judge step of `doc` cannot sandbox."""
    refusal = judge_pod_refusal(doc, kind)
    if refusal is not None:
        raise ConfigError(refusal)


def answer_slot_refusal(cfg: Config) -> str | None:
    """The one line refusing a workflow whose comparator has no definition holes (Lean before DEFINITION_HOLES_LEAN:
    the standalone builds images.toml pins for the older triples, which ignore `definition_names` and refuse every
    filled answer slot, a false alarm) while the configuration indexes open answer slots (a benchmark source of
    data.sources with answers 'produced' or 'both'); None otherwise. The Lean is lean.toolchain's, else the triple
    of the core image the pods run (a tag ending in `-TRIPLE`, else images.toml's default). The benchmark eval reads
    (pipeline.benchmark) is not read here: its steps refuse the same before they search or judge."""
    from burnqed.cluster.images import declared, lean_triples
    if cfg.lean.judged_by()[0] != "comparator":
        return None
    triples, tag = lean_triples(), cfg.cluster.image_tag or ""
    triple = next((t for t in triples.values() if tag.endswith(f"-{t.name}")), None) or triples.get(
        declared()["core"].lean_triple or "")
    lean = cfg.lean.lean_version() or (triple.lean_toolchain if triple is not None else None)
    slots = [f"{source.path}, answers = {source.answers or 'both'!r}" for source in cfg.data.sources
             if source.kind == "benchmark" and source.answers != "given"]
    if not slots or not lacks_definition_holes(lean):
        return None
    built = (f" (triple {triple.name}, comparator {triple.comparator[:8] or 'none'})"
             if triple is not None and not cfg.lean.lean_version() else "")
    return (f"lean.judge = 'comparator': data.sources index open answer slots ({', '.join(slots)}), and the comparator "
            f"for Lean {lean}{built} {DEFINITION_HOLES_SAID}: it refuses every filled answer slot, a false alarm; set "
            f"lean.judge = 'burnqed' for them (or answers = 'given'), or use a triple on Lean >= "
            f"v{DEFINITION_HOLES_LEAN}")


def check_answer_slots(cfg: Config) -> None:
    """`ConfigError` with `answer_slot_refusal`'s line, when it has one."""
    refusal = answer_slot_refusal(cfg)
    if refusal is not None:
        raise ConfigError(refusal)


__all__ = ["SandboxKind", "answer_slot_refusal", "check_answer_slots", "check_judge_pods", "judge_pod_refusal",
           "judge_security", "judge_templates", "sandbox_kind", "sandbox_problems"]

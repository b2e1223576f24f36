"""`burnqed cluster check`: read the namespace through the Kubernetes API and say whether a submit would run - each
thing a workflow needs, and for each one missing, its fix (docs/cluster.md, "Preflight").

    kube = connect(os.environ)                                    # burnqed.cluster.kube
    report = run_checks(cfg, KubeReader(kube.api_client(), kube.host), namespace="burnqed",
                        argo=probe_argo(target), expected_templates=["burnqed-eval", ...],
                        options=CheckOptions(), source=kube.source)
    report.ready                    # True only when nothing is missing or unknown

What cannot be read (HTTP 403) is `unknown`, what was never asked `not checked`: both keep `ready` false. The reads
go through `cluster.kubereader`, whether a pod fits a node is `cluster.nodefit`; the report and its rows are
`cluster.checkreport`, the Argo Server's rows and `probe_argo` `cluster.argocheck`.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from burnqed.cluster.argocheck import ArgoAnswer, check_argo
from burnqed.cluster.checkreport import Report, Rows, Verdict, cannot_read
from burnqed.cluster.gpu_plan import planner_pod_gpus, required_gpu_mib, rl_sidecar
from burnqed.cluster.judge_pod import SandboxKind, answer_slot_refusal, judge_pod_refusal, sandbox_kind
from burnqed.cluster.kubereader import ClusterReader, Lookup
from burnqed.cluster.nodefit import fits, gpu_mib, largest_pods, tolerated
from burnqed.config import ClusterConfig, Config, load_config
from burnqed.errors import BurnqedError

TOKEN_ANNOTATION = "workflows.argoproj.io/service-account-token.name"  # Argo's util/secrets/secret_name.go
TOKEN_TYPE = "kubernetes.io/service-account-token"
S3_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


@dataclass(frozen=True, slots=True)
class CheckOptions:
    from_template: bool = False  # submit --from-template needs the installed WorkflowTemplates
    scale_from_zero: bool = False  # no matching node now is fine: an autoscaler adds one


def token_secret_name(account: Mapping[str, Any]) -> str:
    """The Secret Argo mounts for an executor ServiceAccount (Argo v4 util/secrets/secret_name.go)."""
    secrets = account.get("secrets") or []
    if secrets and secrets[0].get("name"):
        return str(secrets[0]["name"])
    annotations = (account.get("metadata") or {}).get("annotations") or {}
    if annotations.get(TOKEN_ANNOTATION):
        return str(annotations[TOKEN_ANNOTATION])
    return f"{account['metadata']['name']}.service-account-token"


def _check_identity(rows: Rows, reader: ClusterReader, ns: str, cluster: ClusterConfig) -> None:
    name = cluster.service_account
    account = reader.get("ServiceAccount", name, ns)
    what = f"ServiceAccount {name}"
    if account.unseen:
        cannot_read(rows, what, account, f"get on serviceaccounts in {ns}")
    elif account.found is None:
        rows.add(what, Verdict.MISSING, "not found: the pods and Argo's executor run as it",
                 "kubectl apply -f manifests/20-rbac.yaml, or install the chart with serviceAccount.create")
    else:
        rows.add(what, Verdict.OK, "exists")
    secret_name = token_secret_name(account.found) if account.found else f"{name}.service-account-token"
    what = f"Secret {secret_name}"
    secret = reader.get("Secret", secret_name, ns)
    fix = ("kubectl apply -f manifests/20-rbac.yaml (it holds the token Secret), or install the chart with "
           "serviceAccount.tokenSecret: true")
    if secret.not_read:
        cannot_read(rows, what, secret, "")
        return
    if secret.forbidden:
        # The submitter Role may not read it (whoever reads it acts as the executor), and RBAC has no verb that
        # shows a Secret exists without its data: `list`, field selector or not, returns the data too. So this row
        # is the one the preflight cannot prove; it says so instead of failing everyone who only submits.
        rows.add(what, Verdict.WARN, f"not read (HTTP {secret.status}): reading it would let this user act as Argo's "
                 "executor, so the burnqed-submitter Role does not grant it; without it every pod stays in "
                 "ContainerCreating",
                 f"an admin checks it once: kubectl -n {ns} get secret {secret_name} -o jsonpath='{{.type}}' "
                 f"(expect {TOKEN_TYPE})")
        return
    if secret.found is None:
        rows.add(what, Verdict.MISSING, "not found: Argo mounts it for the executor of every pod, which stays in "
                 "ContainerCreating without it (Kubernetes >= 1.24 never creates it)", fix)
        return
    annotations = (secret.found.get("metadata") or {}).get("annotations") or {}
    if secret.found.get("type") != TOKEN_TYPE or annotations.get("kubernetes.io/service-account.name") != name:
        rows.add(what, Verdict.MISSING, f"is not a token Secret of {name} (type {secret.found.get('type')!r}, "
                 f"kubernetes.io/service-account.name {annotations.get('kubernetes.io/service-account.name')!r})",
                 f"recreate it with type {TOKEN_TYPE} and that annotation: {fix}")
    elif not (secret.found.get("data") or {}).get("token"):
        rows.add(what, Verdict.MISSING, "has no token yet: the token controller fills it in when the "
                 "ServiceAccount exists", f"create the ServiceAccount {name} first, then recreate the Secret")
    else:
        rows.add(what, Verdict.OK, f"executor token of {name}, filled in")


def _check_config_maps(rows: Rows, reader: ClusterReader, ns: str, cluster: ClusterConfig,
                       local: Config | None) -> tuple[set[str], str | None]:
    """Rows for the two ConfigMaps; returns the Secret names the artifact repository refers to and the digest of
    the configuration the pods read (None when it does not load). With `local` (a configuration the user gave), the
    config ConfigMap must hold the same configuration (digest)."""
    from burnqed.cluster.source import load_text
    from burnqed.config.digest import pod_config_digest

    referenced: set[str] = set()
    pods_digest: str | None = None
    for name, key, role in ((cluster.config_map, "burnqed.toml", "burnqed's configuration (BURNQED_CONFIG)"),
                            (cluster.artifact_repository, "default", "where Argo archives step logs")):
        what = f"ConfigMap {name}"
        found = reader.get("ConfigMap", name, ns)
        fix = ("kubectl apply -f manifests/30-config.yaml" if key == "burnqed.toml" else
               "kubectl apply -f manifests/30-artifact-repository.yaml") + ", or install the chart"
        if found.unseen:
            cannot_read(rows, what, found, f"get on configmaps in {ns}")
            continue
        if found.found is None:
            rows.add(what, Verdict.MISSING, f"not found: {role}; pods that mount it never start", fix)
            continue
        text = (found.found.get("data") or {}).get(key)
        if text is None:
            rows.add(what, Verdict.MISSING, f"has no key {key!r}", fix)
            continue
        if key == "burnqed.toml":
            problem = _toml_problem(text)
            if problem:
                rows.add(what, Verdict.MISSING, f"{key} does not load: {problem}", "fix the configuration in it")
                continue
            pods_digest = pod_config_digest(load_text(text, what))
            if local is not None:
                mine, theirs = pod_config_digest(local), pods_digest
                if mine != theirs:
                    rows.add(what, Verdict.MISSING, f"holds another configuration (digest {theirs}) than the local "
                             f"one (digest {mine}): submit would refuse it",
                             "install the local file (helm upgrade … --set-file config.toml=FILE) or drop --config")
                    continue
        if key == "default":
            referenced |= _repository_secrets(text)
        rows.add(what, Verdict.OK, f"has {key}")
    return referenced, pods_digest


def _toml_problem(text: str) -> str:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "burnqed.toml"
        path.write_text(text, encoding="utf-8")
        try:
            load_config(path, (), {})
        except BurnqedError as exc:
            return str(exc)
    return ""


def _repository_secrets(text: str) -> set[str]:
    from burnqed.cluster.yamlio import load_documents

    try:
        docs = load_documents(text, "the artifact repository")
    except BurnqedError:
        return set()
    s3 = (docs[0].get("s3") or {}) if docs else {}
    return {str(s3[k]["name"]) for k in ("accessKeySecret", "secretKeySecret") if isinstance(s3.get(k), dict)}


def _check_secrets(rows: Rows, reader: ClusterReader, ns: str, cluster: ClusterConfig, extra: set[str]) -> None:
    wanted: dict[str, tuple[str, ...]] = {}
    if cluster.s3_secret:
        wanted[cluster.s3_secret] = S3_KEYS
    for name in sorted(extra):
        wanted.setdefault(name, ())
    for name in cluster.image_pull_secrets:
        wanted.setdefault(name, (".dockerconfigjson",))
    for name, keys in wanted.items():
        what = f"Secret {name}"
        found = reader.get("Secret", name, ns)
        if found.unseen:
            cannot_read(rows, what, found, f"get on secrets/{name} in {ns}")
            continue
        if name in cluster.image_pull_secrets:
            fix = f"kubectl -n {ns} create secret docker-registry {name} --docker-server=… --docker-username=… …"
        else:
            fix = (f"kubectl -n {ns} create secret generic {name} --from-literal=AWS_ACCESS_KEY_ID=… "
                   "--from-literal=AWS_SECRET_ACCESS_KEY=… (or workload identity: render with cluster.s3_secret unset "
                   "and install the chart with s3.existingSecret: \"\")")
        if found.found is None:
            rows.add(what, Verdict.MISSING, "not found: pods that refer to it never start", fix)
            continue
        present = set((found.found.get("data") or {}).keys())
        lacking = [key for key in keys if key not in present]
        if lacking:
            rows.add(what, Verdict.MISSING, f"lacks the key(s) {', '.join(lacking)}", fix)
        else:
            rows.add(what, Verdict.OK, f"has {', '.join(keys)}" if keys else "exists")


def _check_priority_classes(rows: Rows, reader: ClusterReader, cluster: ClusterConfig) -> None:
    for name in dict.fromkeys((cluster.priority_class_gpu, cluster.priority_class_cpu)):
        what = f"PriorityClass {name}"
        found = reader.get("PriorityClass", name)
        if found.unseen:
            cannot_read(rows, what, found, "get on priorityclasses")
        elif found.found is None:
            rows.add(what, Verdict.MISSING, "not found: the API server refuses pods that name it",
                     "kubectl apply -f manifests/10-priorityclasses.yaml, or install the chart with "
                     "priorityClasses.create")
        else:
            rows.add(what, Verdict.OK, f"value {found.found.get('value')}")


def _check_templates(rows: Rows, reader: ClusterReader, ns: str, expected: Sequence[str],
                     options: CheckOptions, digest: str | None = None) -> None:
    what = "WorkflowTemplates"
    listed = reader.items("WorkflowTemplate", ns)
    if listed.unseen:
        cannot_read(rows, what, listed, f"list on workflowtemplates.argoproj.io in {ns}")
        return
    if listed.status == 404:
        rows.add(what, Verdict.MISSING, "the API server does not know WorkflowTemplates: Argo Workflows' CRDs are "
                 "not installed", "install Argo Workflows >= 4.0 (argo-helm)")
        return
    items = {str(item["metadata"]["name"]): item for item in (listed.found or {}).get("items") or []}
    installed = set(items)
    missing = [name for name in expected if name not in installed]
    if not missing and digest is not None:
        from burnqed.config.digest import CHART_ROUTE, DIGEST_ANNOTATION

        def rendered_from(name: str) -> str | None:
            return ((items[name].get("metadata") or {}).get("annotations") or {}).get(DIGEST_ANNOTATION)

        other = [f"{n} ({rendered_from(n) or 'no digest'})" for n in expected
                 if rendered_from(n) is not None and rendered_from(n) != digest]
        if other:
            rows.add(what, Verdict.MISSING if options.from_template else Verdict.WARN,
                     f"rendered from another configuration than the pods read (digest {digest}): "
                     f"{', '.join(other)}; their pods refuse to start"
                     + ("" if options.from_template else " (submit without --from-template is not affected)"),
                     CHART_ROUTE)
            return
    if not missing:
        rows.add(what, Verdict.OK, f"all {len(expected)} installed")
        return
    verdict = Verdict.MISSING if options.from_template else Verdict.WARN
    rows.add(what, verdict, f"not installed: {', '.join(missing)}"
             + ("" if options.from_template else " (needed by submit --from-template and argo submit only)"),
             "install the chart (workflowTemplates.enabled), or kubectl apply -f manifests/rendered/")


def _check_nodes(rows: Rows, reader: ClusterReader, cfg: Config, options: CheckOptions) -> None:
    cluster = cfg.cluster
    listed = reader.items("Node")
    if listed.unseen:
        for pool in ("GPU nodes", "CPU nodes") if listed.not_read else ("Nodes",):
            cannot_read(rows, pool, listed, "list on nodes")
        return
    nodes = [n for n in (listed.found or {}).get("items") or [] if not (n.get("spec") or {}).get("unschedulable")]
    sizes = largest_pods(cluster, rl=cfg.rl.enabled, planner_gpus=planner_pod_gpus(cfg), rl_sidecar=rl_sidecar(cfg))
    pools = (("gpu", cluster.gpu_node_selector, cluster.gpu_tolerations, "cluster.gpu_node_selector / gpu_tolerations"),
             ("cpu", cluster.cpu_node_selector, cluster.cpu_tolerations, "cluster.cpu_node_selector / cpu_tolerations"))
    for pool, selector, tolerations, keys in pools:
        what = f"{pool.upper()} nodes"
        labelled = [n for n in nodes
                    if selector.items() <= ((n.get("metadata") or {}).get("labels") or {}).items()]
        admitted = [n for n in labelled if all(
            tolerated(t, tolerations) for t in (n.get("spec") or {}).get("taints") or []
            if t.get("effect") in ("NoSchedule", "NoExecute"))]
        fitting = [n for n in admitted if fits(n, sizes[pool])]
        label, needed = cluster.gpu_memory_label, required_gpu_mib(cfg)
        sized = [n for n in fitting if pool != "gpu" or not label or gpu_mib(n, label) >= needed]
        if fitting and not sized:
            found = sorted({str(((n.get("metadata") or {}).get("labels") or {}).get(label or "", "none"))
                            for n in fitting})
            rows.add(what, Verdict.WARN if options.scale_from_zero else Verdict.MISSING,
                     f"{len(fitting)} node(s) match, but none has the label {label} >= {needed} MiB (found: "
                     f"{', '.join(found)}), the GPU serving.gpu_memory_gib = {cfg.serving.gpu_memory_gib:g} GiB the "
                     "memory plan was made for: the search and eval pods would not be scheduled",
                     f"label the pool's nodes with {label}=<MiB of one GPU> (NVIDIA GPU feature discovery does; "
                     "manifests/node-pools/), or render for that GPU: serving.gpu_memory_gib (the plan must still "
                     "hold serving.min_kv_tokens)")
            continue
        fitting = sized
        wanted = ", ".join(f"{k}={v}" for k, v in selector.items()) or "any labels"
        if fitting:
            rows.add(what, Verdict.OK, f"{len(fitting)} node(s) with {wanted} hold a {sizes[pool].describe()} pod")
            continue
        if not labelled:
            detail = f"no schedulable node has {wanted}"
        elif not admitted:
            detail = f"{len(labelled)} node(s) have {wanted} but taints the tolerations ({keys}) do not cover"
        else:
            detail = (f"{len(admitted)} node(s) match but none has {sizes[pool].describe()} allocatable for the "
                      f"largest {pool} pod")
        fix = (f"add a node pool with {wanted} (manifests/node-pools/), or set {keys} and the pod sizes "
               "(cluster.*_cpu / *_memory) to match yours")
        if options.scale_from_zero:
            rows.add(what, Verdict.WARN, detail + " (--scale-from-zero: an autoscaler must add one)", fix)
        else:
            rows.add(what, Verdict.MISSING, detail, fix + "; if an autoscaler scales the pool from zero, pass "
                     "--scale-from-zero")


LANDLOCK_KERNEL = (5, 13)  # Linux's first release with Landlock, the sandbox comparator builds solutions in


def _kernel(node: Mapping[str, Any]) -> tuple[int, int] | None:
    """The node's Linux version (status.nodeInfo.kernelVersion: `6.1.0-18-cloud-amd64`), None when not given."""
    found = re.match(r"(\d+)\.(\d+)", str(((node.get("status") or {}).get("nodeInfo") or {}).get("kernelVersion", "")))
    return (int(found.group(1)), int(found.group(2))) if found else None


def _installed_judge_refusal(reader: ClusterReader, ns: str, kind: SandboxKind) -> str | None:
    """The one line saying what an installed WorkflowTemplate's judge step lacks for comparator's sandbox
    (`judge_pod.judge_pod_refusal`); None when nothing, or when the templates cannot be read (their row says it)."""
    listed = reader.items("WorkflowTemplate", ns)
    for item in [] if listed.unseen or listed.status == 404 else (listed.found or {}).get("items") or []:
        refusal = judge_pod_refusal(item, kind)
        if refusal is not None:
            return f"WorkflowTemplate {(item.get('metadata') or {}).get('name')}: {refusal}"
    return None


def _check_judge_sandbox(rows: Rows, reader: ClusterReader, cfg: Config, ns: str) -> None:
    """With lean.judge = "comparator" (docs/cluster.md, "The judge's sandbox"): the installed judge steps' pods give
    comparator's sandbox what it needs (`burnqed.cluster.judge_pod`: never privileged, a non-root uid, no privilege
    escalation; user namespaces for bubblewrap), and the nodes' kernel has Landlock for the standalone comparator's
    landrun; `lean.comparator_no_sandbox` is said."""
    if cfg.lean.judged_by()[0] != "comparator":
        return
    what = "Judge sandbox"
    slots = answer_slot_refusal(cfg)
    if slots is not None:
        rows.add(what, Verdict.MISSING, slots, "set lean.judge = 'burnqed', or render for a triple on Lean >= "
                 "v4.30.0-rc2")
        return
    kind = sandbox_kind(cfg.lean)
    if kind == "none":
        rows.add(what, Verdict.WARN, "lean.comparator_no_sandbox: comparator builds the solutions outside its "
                 "sandbox (--inadvisably-no-sandbox; every eval result says so)", "unset lean.comparator_no_sandbox")
        return
    refusal = _installed_judge_refusal(reader, ns, kind)
    if refusal is not None:
        rows.add(what, Verdict.MISSING, refusal, "render and install the templates again (burnqed render, or the "
                 "chart), or set lean.judge = 'burnqed'")
        return
    uid = cfg.cluster.run_as_user
    if kind == "bubblewrap":  # user namespaces: in every kernel the API reports; their sysctls it does not show
        rows.add(what, Verdict.OK, f"lake comparator runs as uid {uid}, unprivileged, in bubblewrap: the nodes must "
                 "allow unprivileged user namespaces (user.max_user_namespaces > 0; on Ubuntu "
                 "kernel.apparmor_restrict_unprivileged_userns = 0), which the API does not show")
        return
    listed = reader.items("Node")
    if listed.unseen:
        return  # the node rows say it
    nodes = [n for n in (listed.found or {}).get("items") or [] if not (n.get("spec") or {}).get("unschedulable")]
    kernels = {str((n.get("metadata") or {}).get("name")): _kernel(n) for n in nodes}
    old = sorted(name for name, found in kernels.items() if found is not None and found < LANDLOCK_KERNEL)
    unknown = sorted(name for name, found in kernels.items() if found is None)
    fix = ("run the judge pods on nodes with Linux >= 5.13 and Landlock in the kernel's LSM list (lsm=…,landlock), "
           "or set lean.judge = 'burnqed'")
    if old and len(old) + len(unknown) == len(kernels):
        rows.add(what, Verdict.MISSING, f"no schedulable node has Linux >= 5.13 for Landlock (older: "
                 f"{', '.join(old)}): comparator cannot sandbox the solutions", fix)
    elif old or unknown:
        said = "; ".join(part for part in (f"older than 5.13: {', '.join(old)}" if old else "",
                                           f"kernel not reported: {', '.join(unknown)}" if unknown else "") if part)
        rows.add(what, Verdict.WARN, f"comparator may be scheduled where it cannot sandbox ({said})", fix)
    else:
        rows.add(what, Verdict.OK, f"comparator runs as uid {uid}, unprivileged, in landrun; every schedulable node "
                 "has Linux >= 5.13 (Landlock must also be in its LSM list, which the API does not show)")


def _check_namespace(rows: Rows, found: Lookup, namespace: str, source: str) -> None:
    """The rows of the Kubernetes API and the namespace, from the namespace's lookup."""
    if found.not_read:
        rows.add("Kubernetes API", Verdict.MISSING, f"not read ({found.not_read}): the checks of the namespace, its "
                 "objects and the nodes did not run, and submit reads the namespace's ConfigMap through it (only "
                 "submit --dry-run does without)",
                 "point KUBECONFIG at a kubeconfig for the cluster (or run inside a pod of it)")
        rows.add(f"Namespace {namespace}", Verdict.NOT_CHECKED, f"not read: {found.not_read}")
        return
    rows.add("Kubernetes API", Verdict.OK, f"reachable through the {source}")
    if found.forbidden:
        rows.add(f"Namespace {namespace}", Verdict.WARN, f"cannot read it (HTTP {found.status}); the checks below "
                 "tell whether it exists")
    elif found.found is None:
        rows.add(f"Namespace {namespace}", Verdict.MISSING, "not found",
                 "kubectl apply -f manifests/00-namespace.yaml (or --namespace / cluster.namespace)")
    else:
        rows.add(f"Namespace {namespace}", Verdict.OK, "exists")


def run_checks(cfg: Config, reader: ClusterReader, *, namespace: str, argo: ArgoAnswer | None,
               expected_templates: Sequence[str], options: CheckOptions, source: str,
               local_config: bool = False) -> Report:
    """Every check, in the order a pod needs them. A transport failure of the first read is a `ClusterError`."""
    cluster = cfg.cluster
    rows = Rows()
    _check_namespace(rows, reader.get("Namespace", namespace), namespace, source)
    _check_identity(rows, reader, namespace, cluster)
    referenced, pods_digest = _check_config_maps(rows, reader, namespace, cluster, cfg if local_config else None)
    _check_secrets(rows, reader, namespace, cluster, referenced)
    _check_priority_classes(rows, reader, cluster)
    _check_templates(rows, reader, namespace, expected_templates, options, pods_digest)
    _check_nodes(rows, reader, cfg, options)
    _check_judge_sandbox(rows, reader, cfg, namespace)
    check_argo(rows, reader, argo)
    return Report(namespace, tuple(rows.rows))



"""Submitting a workflow to the Argo Server: the stage behind `burnqed submit` (docs/cluster.md, "One configuration").

    cfg = pods_configuration(cfg, explicit, namespace)          # the configuration the pods will read, or a refusal
    submission = prepare_submission(cfg, "iteration", namespace=ns, folder=default_workflows_dir(), iteration=2,
                                    parameters=parameter_values(["root=s3://bucket/run"], None, None))
    print(submission.dry_run_text(from_template=False))        # --dry-run: what would be sent
    created = send(submission, target, from_template=False)    # the created Workflow's name

Every parameter must have a value and the run root must be remote before anything is sent; with `from_template` the
installed WorkflowTemplate is submitted, after checking it was rendered from the same configuration.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from burnqed import storage
from burnqed.errors import ConfigError, InputError

if TYPE_CHECKING:
    from burnqed.cluster.argo import ArgoTarget
    from burnqed.config import Config


@dataclass(frozen=True, slots=True)
class Submission:
    """A workflow ready to send: the Workflow rendered for `namespace`, and the installed WorkflowTemplate of the
    same build with the Workflow's arguments as NAME=VALUE pairs (for `from_template`)."""

    namespace: str
    doc: dict[str, Any]
    template: str
    pairs: list[str]

    def dry_run_text(self, from_template: bool) -> str:
        """The YAML `send` would post, with the request line as its header."""
        from burnqed.cluster.yamlio import dump_documents

        ns = self.namespace
        if from_template:
            body = {"namespace": ns, "resourceKind": "WorkflowTemplate", "resourceName": self.template,
                    "submitOptions": {"parameters": self.pairs}}
            return dump_documents([body], header=f"POST /api/v1/workflows/{ns}/submit (dry run)")
        return dump_documents([self.doc], header=f"POST /api/v1/workflows/{ns} (dry run: rendered from the local "
                              "configuration, not compared with the namespace's ConfigMap)")


def parameter_values(params: list[str] | None, root: str | None, model: str | None) -> dict[str, str]:
    """`--param NAME=VALUE` items, then `--root` and `--model` (which win); `InputError` on a malformed item."""
    values: dict[str, str] = {}
    for item in params or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--param {item!r}: expected NAME=VALUE")
        values[key.strip()] = value
    if root is not None:
        values["root"] = root
    if model is not None:
        values["model"] = model
    return values


def _arguments(doc: dict[str, Any]) -> dict[str, str | None]:
    parameters = (doc.get("spec", {}).get("arguments") or {}).get("parameters") or []
    return {str(p["name"]): (None if p.get("value") is None else str(p["value"])) for p in parameters}


def prepare_submission(cfg: Config, name: str, *, namespace: str, folder: Path, iteration: int,
                       parameters: dict[str, str]) -> Submission:
    """Render workflow `name` for `namespace`; `InputError` when a parameter has no value or the run root is a
    local path the pods cannot share."""
    from burnqed.cluster.render import render_workflow

    cfg = cfg.model_copy(update={"cluster": cfg.cluster.model_copy(update={"namespace": namespace})})
    doc = render_workflow(cfg, name, folder, iteration=iteration, parameters=parameters)
    arguments = _arguments(doc)
    missing = sorted(key for key, value in arguments.items() if value is None)
    if "root" in missing and "run" in missing:
        missing.remove("run")  # derived from the root
    if missing:
        raise InputError(
            f"workflow {name} needs a value for {', '.join(missing)}: pass --param NAME=VALUE"
            + (" (or --root; storage.root is a local path)" if "root" in missing else "")
        )
    run_root = arguments.get("root")
    if run_root is not None and not storage.is_remote(run_root):
        raise InputError(f"run root {run_root} is a local path the pods cannot share: use s3://bucket/prefix "
                         "(--root or storage.root)")
    template = str(doc["metadata"]["generateName"]).rstrip("-")  # the WorkflowTemplate of the same build
    return Submission(namespace, doc, template, [f"{key}={value}" for key, value in arguments.items()])


def send(submission: Submission, target: ArgoTarget, *, from_template: bool) -> str:
    """Create the Workflow (or submit the installed template); the created Workflow's name."""
    from burnqed.cluster.argo import ArgoClient, created_name

    with ArgoClient(target) as argo:
        if from_template:  # the installed template's pods check its digest: refuse here, not after they start
            same_digest(argo.template(submission.template), submission.doc, submission.template)
        created = (argo.submit_template(submission.template, submission.pairs) if from_template
                   else argo.create(submission.doc))
    return created_name(created)


def same_digest(installed: dict[str, Any], rendered: dict[str, Any], name: str) -> None:
    """The installed WorkflowTemplate was rendered from the configuration the ConfigMap holds (its digest
    annotation equals the one of the Workflow rendered from the ConfigMap), else `ConfigError` with both."""
    from burnqed.config.digest import CHART_ROUTE, DIGEST_ANNOTATION

    theirs = ((installed.get("metadata") or {}).get("annotations") or {}).get(DIGEST_ANNOTATION)
    mine = ((rendered.get("metadata") or {}).get("annotations") or {}).get(DIGEST_ANNOTATION)
    if theirs != mine:
        raise ConfigError(
            f"the installed WorkflowTemplate {name} was rendered from a configuration with digest {theirs or 'none'}, "
            f"the ConfigMap the pods read holds digest {mine or 'none'}: its pods would refuse to start. From the "
            f"ConfigMap's file, {CHART_ROUTE}; or submit without --from-template"
        )


def pods_configuration(local: Config, explicit: bool, namespace: str) -> Config:
    """The namespace's ConfigMap's configuration (read with the kubeconfig, or in a pod its service account), or
    `local` when it is the same; a refusal with both digests otherwise (burnqed.cluster.source)."""
    from burnqed.cluster.kube import connect
    from burnqed.cluster.kubereader import KubeReader
    from burnqed.cluster.source import one_configuration, read_config_map

    kube = connect(os.environ, prefix="cannot read the namespace's ConfigMap, the configuration the pods read "
                   "(submit renders from it; --dry-run does not): ")
    text = read_config_map(KubeReader(kube.api_client(), kube.host), namespace, local.cluster)
    return one_configuration(local, explicit, text, f"ConfigMap {namespace}/{local.cluster.config_map}")

"""The Argo controller's rules (tests/cluster/argo_rules.py) on everything we ship - the rendered workflows, the
Workflows `submit` creates, the chart's objects for every scenario and `manifests/`:

- every executor ServiceAccount has its token Secret (else every pod stays in ContainerCreating);
- no retryStrategy relies on OnError without an expression, and every GPU template retries preemption (and does not
  retry a deterministic failure);
- every container, sidecar and init container has a `command` (else the controller looks up the image's entrypoint
  in the registry, which fails with private registries).

Each rule is a function returning its violations, and each is shown to catch a broken copy."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

import helm_python as helm
import pytest

from burnqed.cluster.render import render_workflow
from burnqed.cluster.yamlio import load_documents
from burnqed.config import Config
from tests.cluster.argo_rules import containers, requests_gpu, retried, token_secret_name
from tests.cluster.conftest import CHART, MANIFESTS, WORKFLOWS

SCENARIOS = sorted(path.name for path in (CHART / "ci").glob("*-values.yaml"))
PREEMPTED = [("Error", "pod deleted"), ("Failed", "main: Error (exit code 143)"),
             ("Failed", "main: Error (exit code 137)"),
             ("Failed", "Pod was terminated in response to imminent node shutdown.")]
DETERMINISTIC = ("Failed", "main: Error (exit code 1)")


def chart_objects(scenario: str) -> list[dict[str, Any]]:
    docs = load_documents((CHART / "ci" / scenario).read_text())
    with helm.Chart.load(CHART) as chart:
        out = chart.render(docs[0] if docs else {}, name="burnqed", namespace="burnqed", is_install=True)
    return [doc for path, text in out.items() if path.endswith(".yaml") for doc in load_documents(text, path)]


def manifest_objects() -> list[dict[str, Any]]:
    paths = [*sorted(MANIFESTS.glob("*.yaml")), *sorted((MANIFESTS / "rendered").glob("*.yaml"))]
    return [doc for path in paths for doc in load_documents(path.read_text(), str(path))]


def submitted() -> list[dict[str, Any]]:
    params = {"root": "s3://b/r", "model": "s3://m/x"}
    return [render_workflow(Config(), name, WORKFLOWS, iteration=i,
                            parameters={k: v for k, v in params.items() if k == "root" or name in ("eval", "baseline")})
            for name in ("iteration", "smoke", "eval", "baseline") for i in (0, 1)]


def workflows_in(docs: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [doc for doc in docs if doc.get("kind") in ("Workflow", "WorkflowTemplate")]


def token_violations(docs: list[dict[str, Any]]) -> list[str]:
    """Every executor ServiceAccount the workflows name exists among `docs` with its token Secret."""
    accounts = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ServiceAccount"}
    secrets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Secret"}
    problems = []
    for wf in workflows_in(docs):
        spec = wf["spec"]
        executors = [spec.get("executor") or {}, *(t.get("executor") or {} for t in spec["templates"])]
        names = {str(e["serviceAccountName"]) for e in executors if e.get("serviceAccountName")}
        if spec.get("automountServiceAccountToken") is False and not names:
            problems.append(f"{wf['metadata']}: no executor service account with automountServiceAccountToken false")
        for name in sorted(names):
            if name not in accounts:
                problems.append(f"ServiceAccount {name} is missing")
                continue
            secret = secrets.get(token_secret_name(accounts[name]))
            if secret is None:
                problems.append(f"token Secret {token_secret_name(accounts[name])} of {name} is missing")
            elif secret.get("type") != "kubernetes.io/service-account-token" or (
                    (secret["metadata"].get("annotations") or {}).get("kubernetes.io/service-account.name") != name):
                problems.append(f"Secret {secret['metadata']['name']} is not a token Secret of {name}")
    return list(dict.fromkeys(problems))  # once, not once per workflow


def retry_violations(docs: Iterable[Mapping[str, Any]]) -> list[str]:
    problems = []
    for wf in workflows_in(docs):
        for t in wf["spec"]["templates"]:
            where = f"{wf['metadata'].get('name') or wf['metadata'].get('generateName')}/{t['name']}"
            strategy = t.get("retryStrategy")
            if strategy and strategy.get("retryPolicy") == "OnError" and not strategy.get("expression"):
                problems.append(f"{where}: OnError without an expression misses evictions and node shutdown")
            if requests_gpu(t):
                problems += [f"{where}: does not retry {message!r}" for status, message in PREEMPTED
                             if not retried(strategy, status=status, message=message)]
                if retried(strategy, status=DETERMINISTIC[0], message=DETERMINISTIC[1]):
                    problems.append(f"{where}: retries a deterministic failure")
    return problems


def command_violations(docs: Iterable[Mapping[str, Any]]) -> list[str]:
    return [f"{wf['metadata'].get('name') or wf['metadata'].get('generateName')}/{t['name']}: {role} has no command"
            for wf in workflows_in(docs) for t in wf["spec"]["templates"] for role, c in containers(t)
            if not c.get("command")]


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_chart_obeys_the_controller(scenario: str) -> None:
    docs = chart_objects(scenario)
    if scenario == "minimal-values.yaml":  # ServiceAccount and token Secret managed elsewhere: manifests/
        docs += [d for d in manifest_objects() if d["kind"] in ("ServiceAccount", "Secret")]
    assert len(workflows_in(docs)) == 6
    assert token_violations(docs) == []
    assert retry_violations(docs) == []
    assert command_violations(docs) == []


def test_manifests_obey_the_controller() -> None:
    docs = manifest_objects()
    assert len(workflows_in(docs)) == 6
    assert token_violations(docs) == []
    assert retry_violations(docs) == []
    assert command_violations(docs) == []


def test_rendered_and_submitted_workflows_obey_the_controller(rendered) -> None:
    docs = [doc.doc for doc in rendered] + submitted()
    gpu = [t for wf in docs for t in wf["spec"]["templates"] if requests_gpu(t)]
    assert len(gpu) > 10 and any("sidecars" in t for t in gpu)  # training steps and sidecar pods both checked
    assert retry_violations(docs) == []
    assert command_violations(docs) == []
    roles = {role.split()[0] for wf in docs for t in wf["spec"]["templates"] for role, _ in containers(t)}
    assert roles == {"main", "sidecar", "init"}


def test_the_rules_catch_what_they_look_for() -> None:
    docs = manifest_objects()
    no_token = [d for d in docs if d["kind"] != "Secret"]
    assert token_violations(no_token) == ["token Secret burnqed-workflow.service-account-token of burnqed-workflow "
                                          "is missing"]
    listed = copy.deepcopy(docs)  # an account that lists another Secret first: Argo mounts that one
    next(d for d in listed if d["kind"] == "ServiceAccount")["secrets"] = [{"name": "other"}]
    assert token_violations(listed) == ["token Secret other of burnqed-workflow is missing"]

    broken = copy.deepcopy([d for d in docs if d.get("kind") == "WorkflowTemplate"])
    search = next(t for d in broken if d["metadata"]["name"] == "burnqed-iteration-0"
                  for t in d["spec"]["templates"] if t["name"] == "search")
    search["retryStrategy"] = {"limit": 3, "retryPolicy": "OnError"}
    del search["sidecars"][0]["command"]
    assert retry_violations(broken) == [
        "burnqed-iteration-0/search: OnError without an expression misses evictions and node shutdown",
        "burnqed-iteration-0/search: does not retry 'main: Error (exit code 143)'",
        "burnqed-iteration-0/search: does not retry 'main: Error (exit code 137)'",
        "burnqed-iteration-0/search: does not retry 'Pod was terminated in response to imminent node shutdown.'",
    ]
    search["retryStrategy"] = {"limit": 3, "retryPolicy": "Always"}
    assert retry_violations(broken) == ["burnqed-iteration-0/search: retries a deterministic failure"]
    assert command_violations(broken) == ["burnqed-iteration-0/search: sidecar sglang has no command"]

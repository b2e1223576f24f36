"""Offline validation: every rendered Argo document against the Argo schema (kind-specific, strict), every plain
Kubernetes object in manifests/ with kubernetes-validate --strict, and proof that the validators catch typos."""

from __future__ import annotations

import copy
import hashlib
import importlib
from pathlib import Path
from typing import Any

import pytest

from burnqed.cluster.render import render_workflow
from burnqed.cluster.validate import (
    ARGO_SCHEMA,
    argo_problems,
    kubernetes_problems,
    patch_definitions,
    validate_documents,
)
from burnqed.cluster.yamlio import load_documents
from burnqed.config import Config
from tests.cluster.conftest import MANIFESTS, WORKFLOWS, by_name

ARGO_4_1_SCHEMA = Path(__file__).parent / "schema" / "argo-workflows-v4.1.2.schema.json"  # vendored, README there
NODE_POOL_KINDS = {"ContainerNodePool", "ClusterConfig"}  # cloud resources, not Kubernetes API objects


def test_vendored_schema_is_the_published_v4_0_10() -> None:
    digest = hashlib.sha256(ARGO_SCHEMA.read_bytes()).hexdigest()
    assert digest == "929ea7d48bfc494d9e7c869d102fd43a23e3e953407e1890da9d6b902ea39f54"


def test_every_rendered_template_is_valid(rendered) -> None:
    assert validate_documents([doc.doc for doc in rendered]) == []


def test_vendored_test_schema_is_the_published_v4_1_2() -> None:
    digest = hashlib.sha256(ARGO_4_1_SCHEMA.read_bytes()).hexdigest()
    assert digest == "3f84c5722c48a5aa815fe69119a9375fc3635114f8046da20ede55a8596529f5"


def test_every_rendered_template_is_valid_for_argo_4_1(rendered) -> None:
    documents = [doc.doc for doc in rendered]
    assert validate_documents(documents, schema=ARGO_4_1_SCHEMA) == []
    broken = copy.deepcopy(by_name(rendered, "burnqed-eval"))
    broken["spec"]["activeDeadlineSeconds"] = "a week"
    assert validate_documents([broken], schema=ARGO_4_1_SCHEMA) != []  # the 4.1 schema is really applied


def test_submitted_workflows_are_valid() -> None:
    for name, params in (("iteration", {"root": "s3://b/r"}), ("smoke", {"root": "s3://b/r"}),
                         ("eval", {"root": "s3://b/r", "model": "s3://m/x"}),
                         ("baseline", {"root": "s3://b/r", "model": "s3://m/x"})):
        for iteration in (0, 1, 3):
            doc = render_workflow(Config(), name, WORKFLOWS, iteration=iteration, parameters=params)
            assert doc["kind"] == "Workflow"
            assert argo_problems(doc) == [], (name, iteration)


@pytest.mark.slow
def test_a_misspelt_field_is_rejected(rendered) -> None:
    doc = copy.deepcopy(by_name(rendered, "burnqed-iteration-0"))
    search = next(t for t in doc["spec"]["templates"] if t["name"] == "search")
    search["nodeSelecter"] = search.pop("nodeSelector")
    search["sidecars"][0]["resourcs"] = search["sidecars"][0].pop("resources")
    problems = argo_problems(doc)
    assert any("nodeSelecter" in p and p.startswith("spec.templates[") for p in problems), problems
    assert any("resourcs" in p and ".sidecars[0]" in p for p in problems), problems
    assert argo_problems(doc, strict=False) == []  # the published schema alone lets typos through


def test_a_wrong_type_is_rejected(rendered) -> None:
    doc = copy.deepcopy(by_name(rendered, "burnqed-eval"))
    doc["spec"]["activeDeadlineSeconds"] = "a week"
    doc["spec"]["podGC"] = ["OnPodSuccess"]
    problems = argo_problems(doc)
    assert len(problems) == 2, problems
    assert problems[0].startswith("spec.activeDeadlineSeconds:")


def test_integers_are_allowed_for_int_or_string_only_after_the_patch(rendered) -> None:
    jsonschema: Any = importlib.import_module("jsonschema")
    import json

    raw = json.loads(ARGO_SCHEMA.read_text())["definitions"]
    doc = by_name(rendered, "burnqed-iteration-0")
    ref = {"$ref": "#/definitions/io.argoproj.workflow.v1alpha1.WorkflowTemplate"}
    unpatched = jsonschema.Draft202012Validator({**ref, "definitions": raw})
    messages = [e.message for e in unpatched.iter_errors(doc)]
    assert "3 is not of type 'string'" in messages  # retryStrategy.limit
    patched = jsonschema.Draft202012Validator({**ref, "definitions": patch_definitions(raw, strict=False)})
    assert list(patched.iter_errors(doc)) == []


def test_not_an_argo_kind() -> None:
    assert argo_problems({"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflo"}) == [
        "kind 'Workflo' is not an Argo kind in argo-workflows-v4.0.10.schema.json"
    ]


def manifest_documents() -> list[tuple[Path, dict[str, Any]]]:
    found = []
    for path in sorted(MANIFESTS.rglob("*.yaml")):
        found += [(path, doc) for doc in load_documents(path.read_text(), str(path))]
    return found


@pytest.mark.slow
def test_every_manifest_is_valid() -> None:
    docs = manifest_documents()
    kinds = {doc["kind"] for _, doc in docs}
    assert {"Namespace", "ServiceAccount", "Secret", "Role", "RoleBinding", "ClusterRole", "ConfigMap", "PriorityClass",
            "NetworkPolicy", "WorkflowTemplate"} <= kinds
    plain = [doc for _, doc in docs if doc["kind"] not in NODE_POOL_KINDS]
    assert validate_documents(plain) == []


def test_kubernetes_validate_is_strict() -> None:
    rule: dict[str, list[str]] = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceName": ["p"]}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "x"}, "rules": [rule]}
    assert kubernetes_problems(role) == [
        "rules[0]: Additional properties are not allowed ('resourceName' was unexpected)"
    ]
    rule["resourceNames"] = rule.pop("resourceName")
    assert kubernetes_problems(role) == []
    assert validate_documents([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": 3}]) == [
        "ConfigMap/c: data: 3 is not of type 'object', 'null'"
    ]


def test_the_artifact_repository_is_a_valid_argo_artifact_repository() -> None:
    (doc,) = load_documents((MANIFESTS / "30-artifact-repository.yaml").read_text())
    (repository,) = load_documents(doc["data"]["default"])
    assert argo_problems(repository, kind="ArtifactRepository") == []
    repository["s3"]["acessKeySecret"] = repository["s3"].pop("accessKeySecret")
    assert argo_problems(repository, kind="ArtifactRepository") == [
        "s3: Additional properties are not allowed ('acessKeySecret' was unexpected)"
    ]

"""The Argo Server double refuses what argo-workflows v4.1.2's server refuses (tests/doubles/fake_argo.py cites the
source). burnqed's own requests go through it over HTTP in test_submit.py, test_check.py and test_one_config.py."""

from __future__ import annotations

import json
from typing import Any

from tests.doubles.fake_argo import argo_refusal

TEMPLATES = {"burnqed-iteration"}
WORKFLOW: dict[str, Any] = {"metadata": {"generateName": "burnqed-iteration-"},
                            "spec": {"entrypoint": "main", "templates": [{"name": "main", "container": {}}]}}


def post(path: str, body: Any) -> tuple[int, str] | None:
    refused = argo_refusal("POST", path, json.dumps(body).encode(), TEMPLATES)
    return None if refused is None else (refused[0], refused[1]["message"])


def refused(path: str, body: Any) -> tuple[int, str]:
    answer = post(path, body)
    assert answer is not None, body
    return answer


def test_the_routes_burnqed_uses_exist_and_no_others() -> None:
    for method, path in (("GET", "/api/v1/userinfo"), ("GET", "/api/v1/workflow-templates/burnqed"),
                         ("GET", "/api/v1/workflow-templates/burnqed/burnqed-iteration?x=1")):
        assert argo_refusal(method, path, b"", TEMPLATES) is None, path
    assert argo_refusal("GET", "/api/v1/workflows/burnqed/x/y/z", b"", TEMPLATES) == (
        404, {"code": 5, "message": "Not Found"})
    assert argo_refusal("POST", "/api/v2/workflows/burnqed", b"{}", TEMPLATES) is not None
    assert argo_refusal("GET", "/api/v1/workflows/burnqed/submit", b"", TEMPLATES) is not None  # POST only
    refused = argo_refusal("PUT", "/api/v1/workflows/burnqed", b"{}", TEMPLATES)
    assert refused is not None and refused[0] == 405


def test_create_takes_a_valid_workflow_and_refuses_the_rest() -> None:
    path = "/api/v1/workflows/burnqed"
    assert post(path, {"namespace": "burnqed", "workflow": WORKFLOW, "unknownField": 1}) is None  # Go ignores it
    assert post(path, {"namespace": "burnqed"}) == (400, "workflow body not specified")
    assert argo_refusal("POST", path, b"", TEMPLATES) == (400, {"code": 3, "message": "workflow body not specified"})
    assert post(path, WORKFLOW) == (400, "workflow body not specified")  # a bare workflow is not a create request
    assert refused(path, [WORKFLOW])[0] == 400
    assert argo_refusal("POST", path, b"{not json", TEMPLATES) is not None
    assert post(path, {"workflow": WORKFLOW, "serverDryRun": "yes"}) is not None
    nameless = {**WORKFLOW, "metadata": {}}
    assert refused(path, {"workflow": nameless})[1].endswith("name or generateName is required")
    long_name = {**WORKFLOW, "metadata": {"name": "x" * 64}}
    assert "must not be more than 63 characters" in refused(path, {"workflow": long_name})[1]
    elsewhere = {**WORKFLOW, "metadata": {"generateName": "a-", "namespace": "other"}}
    assert "does not match the namespace" in refused(path, {"workflow": elsewhere})[1]
    assert post(path, {"workflow": {**WORKFLOW, "spec": {"templates": []}}}) == (400, "spec.entrypoint is required")
    missing = {**WORKFLOW, "spec": {"entrypoint": "nope", "templates": [{"name": "main"}]}}
    assert post(path, {"workflow": missing}) == (400, "template name 'nope' undefined")
    from_template = {**WORKFLOW, "spec": {"workflowTemplateRef": {"name": "burnqed-iteration"}}}
    assert post(path, {"workflow": from_template}) is None
    unknown = {**WORKFLOW, "spec": {"workflowTemplateRef": {"name": "burnqed-eval"}}}
    assert post(path, {"workflow": unknown}) == (400, 'workflowtemplates.argoproj.io "burnqed-eval" not found')


def test_submit_takes_an_installed_template_with_name_value_parameters() -> None:
    path = "/api/v1/workflows/burnqed/submit"
    good = {"namespace": "burnqed", "resourceKind": "WorkflowTemplate", "resourceName": "burnqed-iteration",
            "submitOptions": {"parameters": ["root=s3://b/r", "iteration=1"], "labels": "a=b"}}
    assert post(path, good) is None
    assert post(path, {**good, "resourceKind": "wftmpl"}) is None
    assert post(path, {**good, "resourceKind": "Workflow"}) == (
        400, "Resource kind 'Workflow' is not supported for submitting")
    assert post(path, {**good, "resourceName": "burnqed-eval"}) == (
        400, 'workflowtemplates.argoproj.io "burnqed-eval" not found')
    assert post(path, {**good, "submitOptions": {"parameters": ["root"]}}) == (
        500, "expected parameter of the form: NAME=VALUE. Received: root")
    assert post(path, {**good, "submitOptions": {"parameters": "root=x"}}) is not None  # a string, not a list
    assert post(path, {**good, "submitOptions": {"parameters": {"root": "x"}}}) is not None

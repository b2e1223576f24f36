"""The Argo Server's REST API as burnqed uses it: which paths exist and which request bodies it refuses, read from
argo-workflows v4.1.2 (the version docs/cluster.md cites): the grpc-gateway routes
(`pkg/apiclient/workflow/workflow.pb.gw.go`, `pkg/apiclient/workflowtemplate/workflow-template.pb.gw.go`), the JSON
marshaler (`util/json/json.go`: Go's `encoding/json`), `server/workflow/workflow_server.go` (`CreateWorkflow`,
`SubmitWorkflow`), `workflow/util/util.go` (`overrideParameters`), `workflow/validate/validate.go` and the gRPC →
HTTP mapping of `server/utils/errors.go`.

    refusal = argo_refusal("POST", "/api/v1/workflows/burnqed", body, templates={"burnqed-iteration"})
    if refusal is not None:
        return refusal                      # (status, {"code": GRPC_CODE, "message": ...}) as the server answers

What it refuses, as the real server does:
- a path that is none of the five routes below (404, gRPC NotFound), a known path with another method (405);
- a body that is not JSON, a request field of the wrong JSON type (400, the gateway's decode error);
- create (`POST /api/v1/workflows/{ns}`): no `workflow` ("workflow body not specified"); a workflow whose
  `metadata.namespace` differs from the path's (Kubernetes refuses it), with neither `name` nor `generateName`,
  with a name over 63 characters; no `spec.entrypoint` without a `workflowTemplateRef`; an entrypoint that names no
  template; a `workflowTemplateRef` to a template that is not installed (all 400);
- submit (`POST /api/v1/workflows/{ns}/submit`): a `resourceKind` Argo cannot submit ("Resource kind '…' is not
  supported for submitting", 400), a template that is not installed (400), a parameter not of the form NAME=VALUE
  (500: `ApplySubmitOpts` fails with codes.Internal).

`FakeArgo` is the recording double the submit tests talk to: it applies these refusals, answers GET of an
installed WorkflowTemplate (404 otherwise), and gives every other request `status`/`reply`, which a test sets to
play an authorisation failure or a conflict.

Where it is MORE LENIENT than the real server, and why:
- the workflow's spec is not decoded into Argo's Go types, so a wrong type deep in a template is not refused here;
  test_validate.py checks every rendered document against Argo's published JSON schema instead;
- validate.go's other rules (parameters, DAG/steps references, metrics, hooks, …) are not run: burnqed submits only
  what `render` produced, which test_validate and test_controller_rules check;
- Kubernetes admission (quotas, webhooks) and the Argo instance ID are not modelled.
The error bodies carry the gRPC code and a message; the real ones have the same two fields (and `error`), with Go's
wording for decode errors, which this double only approximates.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

# gRPC codes as the gateway writes them into error bodies.
INVALID_ARGUMENT, NOT_FOUND, INTERNAL, UNIMPLEMENTED = 3, 5, 13, 12

ROUTES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("GET", re.compile(r"^/api/v1/userinfo$")),
    ("GET", re.compile(r"^/api/v1/workflow-templates/(?P<ns>[^/]+)$")),
    ("GET", re.compile(r"^/api/v1/workflow-templates/(?P<ns>[^/]+)/(?P<name>[^/]+)$")),
    ("POST", re.compile(r"^/api/v1/workflows/(?P<ns>[^/]+)$")),
    ("POST", re.compile(r"^/api/v1/workflows/(?P<ns>[^/]+)/submit$")),
)
# Request fields and their JSON types (WorkflowCreateRequest, WorkflowSubmitRequest in workflow.proto); Go's
# decoder ignores unknown fields and refuses a known one of another type.
CREATE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "namespace": str, "workflow": (dict, type(None)), "instanceID": str, "serverDryRun": bool,
    "createOptions": (dict, type(None)),
}
SUBMIT_FIELDS: dict[str, type | tuple[type, ...]] = {
    "namespace": str, "resourceKind": str, "resourceName": str, "submitOptions": (dict, type(None)),
}
SUBMIT_OPTION_FIELDS: dict[str, type | tuple[type, ...]] = {
    "serviceAccount": str, "name": str, "generateName": str, "entryPoint": str, "parameters": (list, type(None)),
    "labels": str, "annotations": str, "dryRun": bool, "serverDryRun": bool, "podPriorityClassName": str,
    "priority": (int, type(None)), "ownerReference": (dict, type(None)), "artifacts": str,
}
# workflow.WorkflowTemplateKind / Singular / Plural / ShortName, and the same for the cluster and cron kinds.
SUBMITTABLE_KINDS = {"WorkflowTemplate", "workflowtemplate", "workflowtemplates", "wftmpl",
                     "ClusterWorkflowTemplate", "clusterworkflowtemplate", "clusterworkflowtemplates", "cwftmpl",
                     "CronWorkflow", "cronworkflow", "cronworkflows", "cwf", "cronwf"}
MAX_NAME = 63  # validate.go maxCharsInObjectName

Reply = tuple[int, dict[str, Any]]


def error(status: int, code: int, message: str) -> Reply:
    return status, {"code": code, "message": message}


@dataclass(frozen=True)
class Route:
    pattern: str
    params: dict[str, str]


def route(method: str, path: str) -> Route | Reply:
    """The route a request takes (its pattern and path parameters), or the gateway's refusal of an unknown path or
    method."""
    route_path = urlsplit(path).path
    matched = [(m, found) for m, pattern in ROUTES if (found := pattern.match(route_path))]
    for wanted, found in matched:
        if wanted == method:
            return Route(found.re.pattern, found.groupdict())
    if matched:
        return error(405, UNIMPLEMENTED, "Method Not Allowed")
    return error(404, NOT_FOUND, "Not Found")


def wrong_types(obj: Mapping[str, Any], fields: Mapping[str, type | tuple[type, ...]], where: str) -> Reply | None:
    for key, wanted in fields.items():
        if key in obj and not (isinstance(obj[key], wanted) and not (wanted is int and isinstance(obj[key], bool))):
            return error(400, INVALID_ARGUMENT, f"json: cannot unmarshal {type(obj[key]).__name__} into Go struct "
                                                f"field {where}.{key}")
    return None


def decode(body: bytes, fields: Mapping[str, type | tuple[type, ...]], where: str) -> dict[str, Any] | Reply:
    if not body.strip():
        return {}  # io.EOF: the gateway goes on with an empty request
    try:
        obj = json.loads(body)
    except ValueError as exc:
        return error(400, INVALID_ARGUMENT, f"invalid character in the request body: {exc}")
    if not isinstance(obj, dict):
        return error(400, INVALID_ARGUMENT, f"json: cannot unmarshal {type(obj).__name__} into Go value of type "
                                            f"{where}")
    return wrong_types(obj, fields, where) or obj


def create_refusal(namespace: str, request: Mapping[str, Any], templates: Collection[str]) -> Reply | None:
    workflow = request.get("workflow")
    if not workflow:
        return error(400, INVALID_ARGUMENT, "workflow body not specified")
    meta = workflow.get("metadata") or {}
    spec = workflow.get("spec") or {}
    if not isinstance(meta, dict) or not isinstance(spec, dict):
        return error(400, INVALID_ARGUMENT, "json: cannot unmarshal the workflow's metadata or spec")
    name = str(meta.get("name") or "")
    if len(name) > MAX_NAME:
        return error(400, INVALID_ARGUMENT, f"workflow name {name!r} must not be more than {MAX_NAME} characters "
                                            f"long (currently {len(name)})")
    ref = spec.get("workflowTemplateRef")
    if ref is not None:
        if not isinstance(ref, dict) or ref.get("name") not in templates:
            missing = ref.get("name") if isinstance(ref, dict) else ref
            return error(400, INVALID_ARGUMENT, f'workflowtemplates.argoproj.io "{missing}" not found')
    else:
        entrypoint = spec.get("entrypoint")
        if not entrypoint:
            return error(400, INVALID_ARGUMENT, "spec.entrypoint is required")
        defined = {t.get("name") for t in spec.get("templates") or [] if isinstance(t, dict)}
        if entrypoint not in defined:
            return error(400, INVALID_ARGUMENT, f"template name '{entrypoint}' undefined")
    if meta.get("namespace") not in (None, "", namespace):
        return error(400, INVALID_ARGUMENT, "the namespace of the provided object does not match the namespace "
                                            "sent on the request")
    if not name and not meta.get("generateName"):
        return error(400, INVALID_ARGUMENT, 'Workflow.argoproj.io "" is invalid: metadata.name: Required value: '
                                            "name or generateName is required")
    return None


def submit_refusal(request: Mapping[str, Any], templates: Collection[str]) -> Reply | None:
    kind = request.get("resourceKind", "")
    if kind not in SUBMITTABLE_KINDS:
        return error(400, INVALID_ARGUMENT, f"Resource kind '{kind}' is not supported for submitting")
    options = request.get("submitOptions") or {}
    if refused := wrong_types(options, SUBMIT_OPTION_FIELDS, "SubmitOpts"):
        return refused
    for parameter in options.get("parameters") or []:
        if not isinstance(parameter, str) or "=" not in parameter:
            return error(500, INTERNAL, f"expected parameter of the form: NAME=VALUE. Received: {parameter}")
    name = request.get("resourceName", "")
    if kind.lower().startswith(("workflowtemplate", "wftmpl")) and name not in templates:
        return error(400, INVALID_ARGUMENT, f'workflowtemplates.argoproj.io "{name}" not found')
    return None


def argo_refusal(method: str, path: str, body: bytes, templates: Collection[str]) -> Reply | None:
    """The real server's answer to a request it refuses for its path or body; None when it would go on (to
    authorisation and Kubernetes). `templates`: the WorkflowTemplates installed in the namespace."""
    found = route(method, path)
    if not isinstance(found, Route):
        return found
    if found.pattern.endswith("/submit$"):
        request = decode(body, SUBMIT_FIELDS, "workflow.WorkflowSubmitRequest")
        return request if isinstance(request, tuple) else submit_refusal(request, templates)
    if found.pattern.startswith("^/api/v1/workflows/"):
        request = decode(body, CREATE_FIELDS, "workflow.WorkflowCreateRequest")
        return request if isinstance(request, tuple) else create_refusal(found.params["ns"], request, templates)
    return None


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeArgo:
    """A local HTTP server answering like the Argo Server (the route, body and template rules above); records every
    request. `status`/`reply`: the answer to a request those rules let through (a test's stand-in for what the
    server's authorisation or Kubernetes would say)."""

    url: str
    requests: list[Recorded] = field(default_factory=list)
    status: int = 200
    reply: Any = field(default_factory=lambda: {"metadata": {"name": "burnqed-iteration-2-x7k2p",
                                                              "namespace": "burnqed"}})
    templates: dict[str, Any] = field(default_factory=dict)  # installed WorkflowTemplates by name (GET)

    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        try:
            recorded = json.loads(body or b"null")
        except ValueError:
            recorded = body
        self.requests.append(Recorded(method, path, headers, recorded))
        refused = argo_refusal(method, path, body, self.templates)
        if refused is not None:
            return refused
        if method == "GET":  # GET /api/v1/workflow-templates/{ns}/{name}, as the Argo Server answers it
            name = urlsplit(path).path.rsplit("/", 1)[-1]
            if name in self.templates:
                return 200, self.templates[name]
            return 404, {"code": NOT_FOUND, "message": f'workflowtemplates.argoproj.io "{name}" not found'}
        return self.status, self.reply

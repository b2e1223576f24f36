"""The Argo controller's rules, as the tests check them (facts from argo-workflows v4.1.2, workflow/controller/
workflowpod.go, operator.go and util/secrets/secret_name.go; Kubernetes' kubelet for pod messages):

- `token_secret_name`: the Secret the controller mounts for an executor ServiceAccount (its first `secrets` entry,
  else the annotation workflows.argoproj.io/service-account-token.name, else `<name>.service-account-token`).
- `retried`: whether a retryStrategy retries a finished attempt with this phase and message - `retryPolicy` and
  `expression` both must allow it; the expression is evaluated for the subset burnqed writes (`or` of
  `lastRetry.status == "…"` and `lastRetry.message matches "…"`); anything else fails the test instead of guessing.
- `containers`: every container of a template (main, sidecars, init containers), which all need a `command`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

TOKEN_ANNOTATION = "workflows.argoproj.io/service-account-token.name"
STATUS = re.compile(r'^lastRetry\.status == "([^"\\]*)"$')
MESSAGE = re.compile(r'^lastRetry\.message matches "([^"\\]*)"$')


def token_secret_name(service_account: Mapping[str, Any]) -> str:
    secrets = service_account.get("secrets") or []
    if secrets:
        return str(secrets[0]["name"])
    annotations = service_account["metadata"].get("annotations") or {}
    if TOKEN_ANNOTATION in annotations:
        return str(annotations[TOKEN_ANNOTATION])
    return f"{service_account['metadata']['name']}.service-account-token"


def evaluate(expression: str, *, status: str, message: str) -> bool:
    """The expression on one attempt (Go's regexp.MatchString is an unanchored search, like re.search)."""
    result = False
    for term in expression.split(" or "):
        if found := STATUS.match(term.strip()):
            result |= status == found.group(1)
        elif found := MESSAGE.match(term.strip()):
            result |= re.search(found.group(1), message) is not None
        else:
            raise AssertionError(f"retry expression term {term!r} is outside the subset the tests evaluate")
    return result


def retried(strategy: Mapping[str, Any] | None, *, status: str, message: str) -> bool:
    """Whether Argo retries an attempt that ended `status` (Error | Failed) with `message`."""
    if not strategy:
        return False
    # the default policy is Always when an expression is given (Argo >= 3.5), else OnFailure
    policy = strategy.get("retryPolicy") or ("Always" if strategy.get("expression") else "OnFailure")
    allowed = {"Always": {"Error", "Failed"}, "OnError": {"Error"}, "OnFailure": {"Failed"}}[policy]
    if status not in allowed:
        return False
    return "expression" not in strategy or evaluate(strategy["expression"], status=status, message=message)


def containers(template: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(role, container) for every container of a pod template."""
    if "container" in template:
        yield "main", template["container"]
    for sidecar in template.get("sidecars") or []:
        yield f"sidecar {sidecar['name']}", sidecar
    for init in template.get("initContainers") or []:
        yield f"init {init['name']}", init


def requests_gpu(template: Mapping[str, Any]) -> bool:
    return any("nvidia.com/gpu" in ((c.get("resources") or {}).get("limits") or {}) for _, c in containers(template))

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
RETRIES = re.compile(r"^asInt\(retries\) < (\d+)$")


def token_secret_name(service_account: Mapping[str, Any]) -> str:
    secrets = service_account.get("secrets") or []
    if secrets:
        return str(secrets[0]["name"])
    annotations = service_account["metadata"].get("annotations") or {}
    if TOKEN_ANNOTATION in annotations:
        return str(annotations[TOKEN_ANNOTATION])
    return f"{service_account['metadata']['name']}.service-account-token"


def evaluate(expression: str, *, status: str, message: str, retries: int = 0) -> bool:
    """The expression on one attempt: `or` of terms, a term being `lastRetry.status == "…"`, `lastRetry.message
    matches "…"` (Go's regexp.MatchString is an unanchored search, like re.search) or a parenthesised `and` of those
    and `asInt(retries) < N` (`retries`: attempts before the last one, Argo's buildRetryStrategyLocalScope).
    Anything else fails the test instead of guessing."""
    return any(_conjunction(term, status, message, retries) for term in _split(expression, " or "))


def _split(text: str, word: str) -> list[str]:
    """`text` split at `word` outside parentheses and string literals."""
    parts, depth, quoted, start, i = [], 0, False, 0, 0
    while i < len(text):
        char = text[i]
        if char == '"':
            quoted = not quoted
        elif not quoted and char in "()":
            depth += 1 if char == "(" else -1
        elif not quoted and depth == 0 and text.startswith(word, i):
            parts.append(text[start:i])
            start = i = i + len(word)
            continue
        i += 1
    return [*parts, text[start:]]


def _conjunction(term: str, status: str, message: str, retries: int) -> bool:
    term = term.strip()
    if term.startswith("(") and term.endswith(")"):
        return all(_atom(part.strip(), status, message, retries) for part in _split(term[1:-1], " and "))
    return _atom(term, status, message, retries)


def _atom(term: str, status: str, message: str, retries: int) -> bool:
    if found := STATUS.match(term):
        return status == found.group(1)
    if found := MESSAGE.match(term):
        return re.search(found.group(1), message) is not None
    if found := RETRIES.match(term):
        return retries < int(found.group(1))
    raise AssertionError(f"retry expression term {term!r} is outside the subset the tests evaluate")


def retried(strategy: Mapping[str, Any] | None, *, status: str, message: str, retries: int = 0) -> bool:
    """Whether Argo retries an attempt that ended `status` (Error | Failed) with `message`, after `retries`
    earlier attempts (within `limit`, as processNodeRetries checks before the expression)."""
    if not strategy:
        return False
    # the default policy is Always when an expression is given (Argo >= 3.5), else OnFailure
    policy = strategy.get("retryPolicy") or ("Always" if strategy.get("expression") else "OnFailure")
    allowed = {"Always": {"Error", "Failed"}, "OnError": {"Error"}, "OnFailure": {"Failed"}}[policy]
    if status not in allowed:
        return False
    if "limit" in strategy and retries >= int(strategy["limit"]):
        return False
    return "expression" not in strategy or evaluate(strategy["expression"], status=status, message=message,
                                                    retries=retries)


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

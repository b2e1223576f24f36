"""Which failed steps Argo retries: the `retryStrategy.expression` of every burnqed step (docs/cluster.md,
"Failures and retries").

    expression = retry_expression(oom=False, storage_retries=2)
    # 'lastRetry.status == "Error" or lastRetry.message matches "imminent node shutdown|…"
    #  or (lastRetry.message matches "^main: Error [(]exit code 75[)]" and asInt(retries) < 2)'

Retried: an interruption (pod deleted or evicted, node shut down or lost, SIGTERM/SIGKILL from outside, Argo's own
errors) and, at most `storage_retries` times, `STORAGE_EXIT_CODE` (75). Not retried: every other exit code (1, 2),
an OOM kill unless `oom`, the deadline, a failed init container or sidecar. `ARGO_MESSAGES` holds each message the
Argo v4.1.2 controller writes for a pod, with its line in `workflow/controller/operator.go`.
"""

from __future__ import annotations

from dataclasses import dataclass

from burnqed.errors import TRANSIENT_EXIT_CODE

# burnqed's exit code for a storage error a retry can cure (timeouts, 5xx, throttling, a dropped connection)
STORAGE_EXIT_CODE = TRANSIENT_EXIT_CODE
ARGO_VERSION = "v4.1.2"  # the controller source the messages below were read from


@dataclass(frozen=True, slots=True)
class RetriedMessage:
    """One regular expression (Go RE2 syntax, kept to what Python's `re` reads the same way) matched against the
    message of a Failed attempt, with why it is an interruption and a message it matches."""

    pattern: str
    why: str
    example: str


@dataclass(frozen=True, slots=True)
class ArgoMessage:
    """A phase and message Argo's controller writes for a pod, where (operator.go line at `ARGO_VERSION`), and
    whether a retry can cure it (None: it depends on the text Argo copies in, see the examples in the tests)."""

    phase: str
    template: str  # Go format string as written in the source
    line: int
    interruption: bool | None


ARGO_MESSAGES: tuple[ArgoMessage, ...] = (
    ArgoMessage("Error", "pod deleted", 1341, True),
    ArgoMessage("Failed", "%s (pod.Status.Message, the kubelet's)", 1788, None),
    ArgoMessage("Failed", "can't find failed message for pod %s namespace %s", 1833, True),
    ArgoMessage("Error", "Pod failed before %s container starts due to %s: %s", 1848, True),
    ArgoMessage("Error", "init: %s (exit code %d)", 1872, True),
    ArgoMessage("Failed", "main: %s (exit code %d)[: %s]", 1874, None),
    ArgoMessage("Error", "wait: %s (exit code %d)", 1876, True),
    ArgoMessage("Failed", "<sidecar or user init container>: %s (exit code %d) (not 137/143)", 1884, False),
    ArgoMessage("Failed", "pod failed: wait container did not complete successfully", 1900, True),
    ArgoMessage("Failed", "pod failed: main container did not complete successfully", 1903, True),
    ArgoMessage("Failed", "pod failed: neither main nor wait container completed successfully", 1905, True),
    # a pending step when the workflow is stopped or terminated (argo stop/terminate) or past its own deadline
    ArgoMessage("Failed", "Stopped with strategy '%s'", 1409, False),
    ArgoMessage("Failed", "Step exceeded its deadline", 1428, False),
)

RETRIED_MESSAGES: tuple[RetriedMessage, ...] = (
    RetriedMessage("imminent node shutdown", "kubelet graceful node shutdown (spot reclaim, node upgrade)",
                   "Pod was terminated in response to imminent node shutdown."),
    RetriedMessage("The node was low on resource", "kubelet node-pressure eviction",
                   "The node was low on resource: memory. Threshold quantity: 100Mi, available: 42Mi. "),
    RetriedMessage("Pod was rejected", "kubelet admission refused the pod (node condition, resources raced)",
                   "Pod was rejected: The node had condition: [DiskPressure]. "),
    RetriedMessage("pod deleted", "Argo: the pod vanished (also an Error; listed for clarity)", "pod deleted"),
    RetriedMessage("^pod failed: ", "Argo: neither main nor wait (or one of them) exited 0 and no container says why "
                   "(a lost node's pod marked Failed by the pod garbage collector)",
                   "pod failed: neither main nor wait container completed successfully"),
    RetriedMessage("^can't find failed message for pod ", "Argo: the pod failed with no container status",
                   "can't find failed message for pod p namespace n"),
    RetriedMessage("^main: (Error|ContainerStatusUnknown) [(]exit code (137|143)[)]",
                   "SIGTERM/SIGKILL from outside: API eviction, preemption, drain, lost node",
                   "main: Error (exit code 143)"),
)
OOM_MESSAGE = RetriedMessage("^main: OOMKilled ", "the main container ran out of memory",
                             "main: OOMKilled (exit code 137)")
STORAGE_MESSAGE = RetriedMessage(f"^main: Error [(]exit code {STORAGE_EXIT_CODE}[)]",
                                 "a storage error a retry can cure (burnqed exits 75)",
                                 f"main: Error (exit code {STORAGE_EXIT_CODE})")


def _literal(pattern: str) -> str:
    if '"' in pattern or "\\" in pattern:  # the pattern goes into an expr string literal as is
        raise ValueError(f"retry pattern {pattern!r} needs escaping")
    return f'"{pattern}"'


def retry_expression(*, oom: bool, storage_retries: int = 0) -> str:
    """The expression: Argo errors, or a Failed attempt whose message is an interruption (with `oom`, also an
    OOM-killed main container); and a storage error (exit 75) while fewer than `storage_retries` retries were
    made (`retries` counts the attempts before the last one)."""
    messages = [*RETRIED_MESSAGES, *([OOM_MESSAGE] if oom else [])]
    pattern = "|".join(message.pattern for message in messages)
    expression = f"lastRetry.status == \"Error\" or lastRetry.message matches {_literal(pattern)}"
    if storage_retries > 0:
        expression += (f" or (lastRetry.message matches {_literal(STORAGE_MESSAGE.pattern)}"
                       f" and asInt(retries) < {storage_retries})")
    return expression

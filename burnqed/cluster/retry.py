"""Which failed steps Argo retries: the `retryStrategy.expression` of every burnqed step (docs/cluster.md, "Retries").

    expression = retry_expression(oom=False, storage_retries=2)
    # 'lastRetry.status == "Error" or lastRetry.message matches "imminent node shutdown|…"
    #  or (lastRetry.message matches "^main: Error [(]exit code 75[)]" and asInt(retries) < 2)'

Argo (read at v4.1.2, `workflow/controller/operator.go`) gives a finished attempt a phase and a message and, with
`retryPolicy: Always`, lets the expression alone decide; it sees the last attempt's `lastRetry.status`,
`lastRetry.message`, `lastRetry.exitCode` and `retries` (attempts so far minus one; `buildRetryStrategyLocalScope`,
operator.go:2149-2167). What an interrupted pod looks like there (`ARGO_MESSAGES` cites each line):

- *Error* phase: Argo's own errors - the pod vanished ("pod deleted", operator.go:1341), it failed before a
  container started (operator.go:1848), Argo's init or wait container failed (operator.go:1872, 1876). All retried.
- *Failed* phase with the pod's `status.message` when the kubelet set one (operator.go:1788): graceful node
  shutdown (spot reclaim), node-pressure eviction, admission refusal. Retried.
- *Failed* phase with one of Argo's own verdicts when neither main nor wait exited 0 and no container says why
  (operator.go:1900-1905): what a pod on a lost node looks like once the pod garbage collector marks it Failed
  (its containers still "running"), and always when the controller holds pods with a finalizer
  (ARGO_POD_STATUS_CAPTURE_FINALIZER=true) instead of seeing them vanish. Also "can't find failed message"
  (operator.go:1833: no container status at all). Retried: nothing of burnqed's ran to a verdict.
- *Failed* phase, "main: REASON (exit code N)[: message]" otherwise (operator.go:1864-1874). SIGTERM/SIGKILL from
  outside (API eviction, preemption, drain) gives 143 (burnqed saved what finished, `StoppedError`) or 137 (killed
  by the signal), reason "Error" or "ContainerStatusUnknown" (node vanished): retried. `STORAGE_EXIT_CODE` (75,
  a storage error a retry can cure: `burnqed.errors.TransientStorageError`) is retried at most `storage_retries`
  times. Every other exit code (1 infrastructure, 2 bad input) is deterministic and is not retried.
- An OOM-killed main container ("main: OOMKilled (exit code 137)") is not retried unless `oom` is set: render
  checks the Lean workers fit the memory limit (burnqed.cluster.memory), so an OOM means a size is wrong.
- Not retried either: the step's deadline, a user init container's failure ("fetch-model: Error (exit code 2)":
  `burnqed fetch` of an unfinished model), a sidecar that failed by itself ("sglang: Error (exit code 1)").
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

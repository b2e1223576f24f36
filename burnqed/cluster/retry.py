"""Which failed steps Argo retries: the `retryStrategy.expression` of every burnqed step (docs/cluster.md, "Retries").

    expression = retry_expression(oom=False)
    # 'lastRetry.status == "Error" or lastRetry.message matches "imminent node shutdown|…"'

Argo (≥ 3.5, checked against v4.1.2 `workflow/controller/operator.go`) gives a finished attempt a phase and a
message, and evaluates the expression on the last attempt (`lastRetry.status`, `lastRetry.message`) with
`retryPolicy: Always`, so the expression alone decides. What an interrupted pod looks like there:

- *Error* phase: Argo's own errors - the pod vanished ("pod deleted": preempted, drained, node lost, deleted by
  hand), it failed before its main container started, or Argo's wait container failed. All are retried.
- *Failed* phase, message = the pod's `status.message` when the kubelet set one: a graceful node shutdown (spot
  reclaim) "Pod was terminated in response to imminent node shutdown.", a node-pressure eviction "The node was low
  on resource: memory. …", a pod the kubelet rejected at admission "Pod was rejected: …". Retried.
- *Failed* phase, message "main: REASON (exit code N)" otherwise. A pod deleted or evicted through the API
  (scheduler preemption, `kubectl drain`, the cluster autoscaler) gets SIGTERM: burnqed then exits 143 (search
  saves what finished first, see `StoppedError`) or Argo's emissary reports 137 for a process the signal killed;
  the kubelet's reason is "Error", or "ContainerStatusUnknown" when the node vanished. Those two codes are retried;
  every other exit code of burnqed (1 infrastructure, 2 bad input) is deterministic and is not.
- An OOM-killed main container ("main: OOMKilled (exit code 137)") is not retried unless `oom` is set: render
  checks that the Lean workers fit the memory limit (burnqed.cluster.memory), so an OOM means a size is wrong and
  the same pod would die again after hours of GPU time.
- Not retried either: the step's deadline ("Pod was active on the node longer than the specified deadline"), an
  init container's failure (e.g. `burnqed fetch` of an unfinished model: "fetch-model: Error (exit code 2)").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RetriedMessage:
    """One regular expression (Go RE2 syntax, kept to what Python's `re` reads the same way) matched against the
    message of a Failed attempt, with why it is an interruption and a message it matches."""

    pattern: str
    why: str
    example: str


RETRIED_MESSAGES: tuple[RetriedMessage, ...] = (
    RetriedMessage("imminent node shutdown", "kubelet graceful node shutdown (spot reclaim, node upgrade)",
                   "Pod was terminated in response to imminent node shutdown."),
    RetriedMessage("The node was low on resource", "kubelet node-pressure eviction",
                   "The node was low on resource: memory. Threshold quantity: 100Mi, available: 42Mi. "),
    RetriedMessage("Pod was rejected", "kubelet admission refused the pod (node condition, resources raced)",
                   "Pod was rejected: The node had condition: [DiskPressure]. "),
    RetriedMessage("pod deleted", "Argo: the pod vanished (also an Error; listed for clarity)", "pod deleted"),
    RetriedMessage("^main: (Error|ContainerStatusUnknown) [(]exit code (137|143)[)]",
                   "SIGTERM/SIGKILL from outside: API eviction, preemption, drain, lost node",
                   "main: Error (exit code 143)"),
)
OOM_MESSAGE = RetriedMessage("^main: OOMKilled ", "the main container ran out of memory",
                             "main: OOMKilled (exit code 137)")


def retry_expression(*, oom: bool) -> str:
    """The expression: Argo errors, or a Failed attempt whose message is an interruption (with `oom`, also an
    OOM-killed main container)."""
    messages = [*RETRIED_MESSAGES, *([OOM_MESSAGE] if oom else [])]
    pattern = "|".join(message.pattern for message in messages)
    if '"' in pattern or "\\" in pattern:  # the pattern goes into an expr string literal as is
        raise ValueError(f"retry pattern {pattern!r} needs escaping")
    return f'lastRetry.status == "Error" or lastRetry.message matches "{pattern}"'

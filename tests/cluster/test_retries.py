"""The retry rule of every step: Argo retries interruptions (node shutdown, eviction, admission refusal, pod
deletion, a lost node, SIGTERM/SIGKILL from outside) and a storage error a retry can cure (exit 75, bounded), never a
deterministic exit; an OOM kill only when configured. The messages are every one the Argo controller writes for a
pod (v4.1.2 `workflow/controller/operator.go`, lines cited in `burnqed.cluster.retry.ARGO_MESSAGES` and below) and
the kubelet's (eviction, node shutdown, rejectPod); `argo_rules.retried` applies limit, retryPolicy and expression
like Argo's `processNodeRetries` (operator.go:1152-1205)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from burnqed.cluster.render import render_templates
from burnqed.cluster.retry import (
    ARGO_MESSAGES,
    ARGO_VERSION,
    OOM_MESSAGE,
    RETRIED_MESSAGES,
    STORAGE_EXIT_CODE,
    STORAGE_MESSAGE,
    retry_expression,
)
from burnqed.config import Config
from burnqed.errors import TRANSIENT_EXIT_CODE, StoppedError, TransientStorageError
from tests.cluster.argo_rules import evaluate, retried
from tests.cluster.conftest import WORKFLOWS, by_name, template
from tests.processes import cli

INTERRUPTED = [
    ("Failed", "Pod was terminated in response to imminent node shutdown."),
    ("Failed", "The node was low on resource: memory. Threshold quantity: 100Mi, available: 42Mi. Container main "
               "was using 90Gi, request is 96Gi, has larger consumption of memory. "),
    ("Failed", "Pod was rejected: The node had condition: [DiskPressure]. "),
    ("Error", "pod deleted"),
    ("Error", "Pod failed before main container starts due to PodInitializing: "),
    ("Error", "wait: Error (exit code 1)"),
    ("Failed", "main: Error (exit code 143)"),  # burnqed stopped by SIGTERM after saving (search)
    ("Failed", "main: Error (exit code 137)"),  # Argo's emissary: the child was killed by a signal
    ("Failed", "main: ContainerStatusUnknown (exit code 137): The container could not be located when the pod was "
               "terminated"),
]
DETERMINISTIC = [
    ("Failed", "main: Error (exit code 1)"),
    ("Failed", "main: Error (exit code 2)"),
    ("Failed", "main: Error (exit code 130)"),
    ("Failed", "main: Error (exit code 1437)"),
    ("Failed", "fetch-model: Error (exit code 2)"),
    ("Failed", "sglang: Error (exit code 1)"),
    ("Failed", "Pod was active on the node longer than the specified deadline"),
]
OOM = ("Failed", "main: OOMKilled (exit code 137)")

# Every message Argo's controller (v4.1.2) can write for a pod that ended badly, instantiated as it would for
# burnqed's pods: (operator.go line, phase, message, retried by the default strategy after one attempt).
ARGO_TABLE = [
    (1341, "Error", "pod deleted", True),  # the pod vanished before Argo saw it end (preempted, drained, deleted)
    (1788, "Failed", "Pod was terminated in response to imminent node shutdown.", True),  # kubelet text, copied
    (1788, "Failed", "The node was low on resource: ephemeral-storage. ", True),
    (1788, "Failed", "Pod was rejected: Predicate NodeAffinity failed", True),
    (1788, "Failed", "Pod was active on the node longer than the specified deadline", False),  # step deadline
    (1833, "Failed", "can't find failed message for pod burnqed-iteration-1-search-1 namespace burnqed", True),
    (1848, "Error", "Pod failed before main container starts due to ContainerCreating: ", True),
    (1848, "Error", "Pod failed before fetch-model container starts due to PodInitializing: ", True),
    (1872, "Error", "init: Error (exit code 1)", True),  # Argo's own init container
    (1874, "Failed", "main: Error (exit code 143)", True),  # SIGTERM: search saved what finished
    (1874, "Failed", "main: Error (exit code 137)", True),  # killed by the signal
    (1874, "Failed", "main: ContainerStatusUnknown (exit code 137): The container could not be located when the "
                     "pod was terminated", True),  # the node vanished
    (1874, "Failed", f"main: Error (exit code {STORAGE_EXIT_CODE})", True),  # storage error a retry can cure
    (1874, "Failed", "main: Error (exit code 1)", False),  # infrastructure that fails again
    (1874, "Failed", "main: Error (exit code 2)", False),  # bad input or configuration
    (1874, "Failed", "main: Error (exit code 2): error: data source internlm/Lean-Github needs datasets", False),
    (1874, "Failed", "main: OOMKilled (exit code 137)", False),  # a size is wrong (cluster.retry_oom_killed)
    (1876, "Error", "wait: Error (exit code 1)", True),  # Argo's wait container
    (1884, "Failed", "fetch-model: Error (exit code 2)", False),  # burnqed fetch of an unfinished model
    (1884, "Failed", "sglang: Error (exit code 1)", False),  # the sidecar failed by itself
    (1900, "Failed", "pod failed: wait container did not complete successfully", True),
    (1903, "Failed", "pod failed: main container did not complete successfully", True),
    (1905, "Failed", "pod failed: neither main nor wait container completed successfully", True),  # PodGC, node lost
    (1409, "Failed", "Stopped with strategy 'Terminate'", False),  # argo terminate: a person stopped it
    (1428, "Failed", "Step exceeded its deadline", False),  # the workflow's activeDeadlineSeconds
]
ARGO_SOURCE = Path(os.environ.get("ARGO_WORKFLOWS_GIT", "/work/.mirror/argoproj+argo-workflows/repo"))


def strategy_of(cfg: Config) -> dict[str, Any]:
    doc = by_name(render_templates(cfg, ["iteration"], WORKFLOWS), "burnqed-iteration-1")
    strategy: dict[str, Any] = template(doc, "search")["retryStrategy"]
    return strategy


@pytest.mark.parametrize(("status", "message"), INTERRUPTED)
def test_interruptions_are_retried(rendered, status: str, message: str) -> None:
    strategy = template(by_name(rendered, "burnqed-iteration-0"), "search")["retryStrategy"]
    assert retried(strategy, status=status, message=message)


@pytest.mark.parametrize(("status", "message"), [*DETERMINISTIC, OOM])
def test_deterministic_failures_and_oom_are_not(rendered, status: str, message: str) -> None:
    strategy = template(by_name(rendered, "burnqed-iteration-0"), "search")["retryStrategy"]
    assert not retried(strategy, status=status, message=message)


def test_oom_kills_are_retried_when_configured() -> None:
    strategy = strategy_of(Config.model_validate({"cluster": {"retry_oom_killed": True}}))
    assert retried(strategy, status=OOM[0], message=OOM[1])
    assert all(not retried(strategy, status=s, message=m) for s, m in DETERMINISTIC)


def test_the_strategy_has_backoff_with_a_cap_and_another_node(rendered) -> None:
    strategy = template(by_name(rendered, "burnqed-iteration-0"), "sft")["retryStrategy"]
    assert strategy == {
        "limit": 3, "retryPolicy": "Always", "expression": retry_expression(oom=False, storage_retries=2),
        "backoff": {"duration": "60s", "factor": 2, "cap": "1800s"},
        "affinity": {"nodeAntiAffinity": {}},
    }


def test_onerror_alone_would_miss_interruptions() -> None:
    """Why the expression: with retryPolicy OnError, node shutdown and evictions (Failed) are never retried."""
    on_error = {"limit": 3, "retryPolicy": "OnError"}
    assert not retried(on_error, status="Failed", message="Pod was terminated in response to imminent node shutdown.")
    assert retried(on_error, status="Error", message="pod deleted")


def test_every_documented_example_matches_its_own_pattern() -> None:
    for entry in (*RETRIED_MESSAGES, OOM_MESSAGE):
        expression = f'lastRetry.message matches "{entry.pattern}"'
        assert evaluate(expression, status="Failed", message=entry.example), entry
    assert not evaluate(retry_expression(oom=False), status="Failed", message=OOM_MESSAGE.example)
    assert evaluate(retry_expression(oom=True), status="Failed", message=OOM_MESSAGE.example)


def fetch_raising(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                  error: Exception) -> subprocess.CompletedProcess[str]:
    """`burnqed fetch` (a step of every sidecar pod) whose download raises `error`."""
    import burnqed.cluster.fetch

    def fail(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(burnqed.cluster.fetch, "fetch", fail)
    return cli("fetch", "s3://b/r/iter_1/export", str(tmp_path / "policy"))


def test_a_stopped_command_exits_128_plus_the_signal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """burnqed's side of the rule: a command stopped by SIGTERM exits 143, which the expression retries."""
    result = fetch_raising(monkeypatch, tmp_path, StoppedError(signal.SIGTERM, "stopped by SIGTERM"))
    assert (result.returncode, result.stdout, result.stderr) == (143, "", "error: stopped by SIGTERM\n")
    assert retried({"retryPolicy": "Always", "expression": retry_expression(oom=False)}, status="Failed",
                   message=f"main: Error (exit code {result.returncode})")


@pytest.mark.parametrize(("line", "status", "message", "expected"), ARGO_TABLE,
                         ids=[f"operator.go:{row[0]}:{row[2][:40]}" for row in ARGO_TABLE])
def test_every_message_argo_writes_for_a_pod(rendered, line: int, status: str, message: str, expected: bool) -> None:
    for name in ("search", "sft", "merge-trajectories"):
        strategy = template(by_name(rendered, "burnqed-iteration-0"), name)["retryStrategy"]
        assert retried(strategy, status=status, message=message) is expected, (name, line, message)


def test_the_table_covers_every_message_the_retry_module_cites() -> None:
    assert {entry.line for entry in ARGO_MESSAGES} == {row[0] for row in ARGO_TABLE}
    for entry in ARGO_MESSAGES:
        verdicts = {row[3] for row in ARGO_TABLE if row[0] == entry.line}
        assert entry.interruption is None or verdicts == {entry.interruption}, entry


@pytest.mark.skipif(not (ARGO_SOURCE / "HEAD").exists(),
                    reason="no clone of argoproj/argo-workflows at $ARGO_WORKFLOWS_GIT to read the cited lines from")
def test_the_cited_lines_say_so_in_argos_source() -> None:
    source = subprocess.run(["git", f"--git-dir={ARGO_SOURCE}", "show",
                             f"{ARGO_VERSION}:workflow/controller/operator.go"],
                            capture_output=True, text=True, check=True).stdout.splitlines()
    expected = {
        1341: '"pod deleted"', 1788: "return wfv1.NodeFailed, pod.Status.Message",
        1833: "can't find failed message for pod",
        1848: "Pod failed before %s container starts due to %s: %s", 1872: "return wfv1.NodeError, msg",
        1874: "return wfv1.NodeFailed, msg", 1876: "return wfv1.NodeError, msg", 1884: "return wfv1.NodeFailed, msg",
        1900: "pod failed: wait container did not complete successfully",
        1903: "pod failed: main container did not complete successfully",
        1905: "pod failed: neither main nor wait container completed successfully",
        1409: "Stopped with strategy '%s'", 1428: '"Step exceeded its deadline"',
    }
    for line, text in expected.items():
        assert text in source[line - 1], (line, source[line - 1])
    assert 'localScope[varkeys.RetriesLastMessage.Template()] = lastChildNode.Message' in "\n".join(source)


def test_storage_errors_are_retried_a_bounded_number_of_times(rendered) -> None:
    strategy = template(by_name(rendered, "burnqed-iteration-0"), "search")["retryStrategy"]
    storage = f"main: Error (exit code {STORAGE_EXIT_CODE})"
    assert [retried(strategy, status="Failed", message=storage, retries=n) for n in range(4)] == [
        True, True, False, False]  # cluster.storage_retries = 2
    # interruptions keep the whole limit (3)
    assert [retried(strategy, status="Failed", message="pod deleted", retries=n) for n in range(4)] == [
        True, True, True, False]
    assert evaluate(f'lastRetry.message matches "{STORAGE_MESSAGE.pattern}"', status="Failed",
                    message=STORAGE_MESSAGE.example)
    none = strategy_of(Config.model_validate({"cluster": {"storage_retries": 0}}))
    assert not retried(none, status="Failed", message=storage)


def test_a_transient_storage_error_exits_75(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    message = "cannot download s3://b/r/iter_1/export: Read timeout on endpoint URL"
    result = fetch_raising(monkeypatch, tmp_path, TransientStorageError(message))
    assert (result.returncode, result.stderr) == (TRANSIENT_EXIT_CODE, f"error: {message}\n")
    assert TRANSIENT_EXIT_CODE == STORAGE_EXIT_CODE
    assert retried({"retryPolicy": "Always", "limit": 3, "expression": retry_expression(oom=False, storage_retries=1)},
                   status="Failed", message=f"main: Error (exit code {result.returncode})")


def test_lean_and_gpu_pods_get_time_to_flush(rendered) -> None:
    doc = by_name(rendered, "burnqed-iteration-1")
    for name in ("search", "eval", "sft", "train-ebm"):
        assert json.loads(template(doc, name)["podSpecPatch"]) == {"terminationGracePeriodSeconds": 300}, name
    assert "podSpecPatch" not in template(doc, "merge-trajectories")

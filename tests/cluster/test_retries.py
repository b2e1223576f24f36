"""The retry rule of every step: Argo retries interruptions (node shutdown, eviction, admission refusal, pod
deletion, SIGTERM/SIGKILL from outside) and never a deterministic exit; an OOM kill only when configured. The
messages are the ones the Argo controller (v4.1.2 operator.go `inferFailedReason`, "pod deleted") and the kubelet
(eviction, node shutdown, rejectPod) give a pod; `argo_rules.retried` applies retryPolicy and expression like
Argo's `processNodeRetries`."""

from __future__ import annotations

import signal
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from burnqed.clikit import reports_errors
from burnqed.cluster.render import render_templates
from burnqed.cluster.retry import OOM_MESSAGE, RETRIED_MESSAGES, retry_expression
from burnqed.config import Config
from burnqed.errors import StoppedError
from tests.cluster.argo_rules import evaluate, retried
from tests.cluster.conftest import WORKFLOWS, by_name, template

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
        "limit": 3, "retryPolicy": "Always", "expression": retry_expression(oom=False),
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


def test_a_stopped_command_exits_128_plus_the_signal() -> None:
    """burnqed's side of the rule: a search stopped by SIGTERM exits 143, which the expression retries."""
    app = typer.Typer()

    @app.command()
    @reports_errors
    def work() -> None:
        raise StoppedError(signal.SIGTERM, "stopped by SIGTERM; finished theorems were saved (use --resume)")

    result = CliRunner().invoke(app, [])
    assert result.exit_code == 143
    assert result.stderr == "error: stopped by SIGTERM; finished theorems were saved (use --resume)\n"
    assert retried({"retryPolicy": "Always", "expression": retry_expression(oom=False)}, status="Failed",
                   message=f"main: Error (exit code {result.exit_code})")

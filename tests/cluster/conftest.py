"""Fixtures of the cluster tests: the rendered documents (once per session), a clean environment for the commands
they run (tests/processes.py's `cli`), a local HTTP server standing in for the Argo Server, and a fake Kubernetes API
server with a kubeconfig pointing at it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from burnqed.cluster.render import Rendered, render_templates
from burnqed.config import Config
from tests.doubles.fake_argo import FakeArgo
from tests.doubles.fake_kube import FakeKube, serve_kube
from tests.doubles.json_http import serve_json

ROOT = Path(__file__).parents[2]
WORKFLOWS = ROOT / "burnqed" / "workflows"
CHART = ROOT / "helm" / "burnqed"
MANIFESTS = ROOT / "manifests"
UPDATE_GOLDEN = "BURNQED_UPDATE_GOLDEN"  # set to 1 to rewrite manifests/rendered and the chart's copy

CLEARED_ENV = ("ARGO_SERVER", "ARGO_TOKEN", "ARGO_NAMESPACE", "ARGO_SECURE", "ARGO_BASE_HREF",
               "ARGO_INSECURE_SKIP_VERIFY", "KUBECONFIG", "BURNQED_CONFIG", "KUBERNETES_SERVICE_HOST")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No developer settings leak in: no Argo env, no BURNQED_* keys, a kubeconfig that does not exist."""
    import os

    for name in list(os.environ):
        if name in CLEARED_ENV or (name.startswith("BURNQED_") and "__" in name):
            monkeypatch.delenv(name)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))


@pytest.fixture(scope="session")
def rendered() -> list[Rendered]:
    """Every workflow's WorkflowTemplates from the default configuration."""
    return render_templates(Config(), [], WORKFLOWS)


def by_name(docs: list[Rendered], name: str) -> dict[str, Any]:
    return next(doc.doc for doc in docs if doc.name == name)


def template(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in doc["spec"]["templates"] if t["name"] == name)


@pytest.fixture
def fake_kube(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKube]:
    """A fake Kubernetes API server (tests/doubles/fake_kube.py) and $KUBECONFIG pointing at it."""
    with serve_kube(tmp_path) as kube:
        monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig))
        yield kube


@pytest.fixture
def fake_argo() -> Iterator[FakeArgo]:
    """The recording Argo Server double (tests/doubles/fake_argo.py) on a local port."""
    state: FakeArgo

    def answer(method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        return state.answer(method, path, headers, body)

    with serve_json(answer, methods=("GET", "POST")) as url:
        state = FakeArgo(url=url)
        yield state

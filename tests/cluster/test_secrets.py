"""No secret value reaches a rendered file: with a token and S3 keys in the environment (and a token in the config's
token variable), render the workflows, the chart's copy, the chart itself and a dry-run submission, and look for
them in every byte written or printed. Secrets are only ever referenced by name."""

from __future__ import annotations

from pathlib import Path

import helm_python as helm
import pytest

from tests.cluster.conftest import CHART, MANIFESTS
from tests.processes import cli

SECRETS = {
    "ARGO_TOKEN": "argo-token-91b2c3d4e5",
    "CI_TOKEN": "ci-token-0a1b2c3d4e",
    "AWS_ACCESS_KEY_ID": "AKIAFAKEKEY12345",
    "AWS_SECRET_ACCESS_KEY": "fake/secret+key/abcdefghijklmnop",
    "AWS_SESSION_TOKEN": "session-token-zyxwvu",
}


def assert_clean(text: str, where: str) -> None:
    for name, value in SECRETS.items():
        assert value not in text, f"{name}'s value leaked into {where}"


@pytest.mark.slow
def test_no_secret_in_any_rendered_file(tmp_path: Path) -> None:
    env = {**SECRETS, "BURNQED_CLUSTER__ARGO_TOKEN_ENV": "CI_TOKEN", "BURNQED_STORAGE__ROOT": "s3://b/run"}
    outputs = []
    for args in (["render", "--check", "-o", str(tmp_path / "rendered")],
                 ["render", "--helm", "-o", str(tmp_path / "helm")],
                 ["submit", "iteration", "--iter", "1", "--dry-run"],
                 ["submit", "eval", "--model", "s3://m/x", "--dry-run", "--from-template"]):
        result = cli(*args, env=env)
        assert result.returncode == 0, result.stderr
        outputs += [result.stdout, result.stderr]
    written = sorted(tmp_path.rglob("*.yaml"))
    assert len(written) == 12
    for path in written:
        assert_clean(path.read_text(), str(path))
    for text in outputs:
        assert_clean(text, "the command output")
    assert "secretRef" in (tmp_path / "rendered" / "burnqed-iteration-1.yaml").read_text()  # by name: burnqed-s3

    with helm.Chart.load(CHART) as chart:
        out = chart.render({}, name="burnqed", namespace="burnqed", is_install=True)
    for template, text in out.items():
        assert_clean(text, template)
    for manifest in MANIFESTS.rglob("*.yaml"):
        assert_clean(manifest.read_text(), str(manifest))

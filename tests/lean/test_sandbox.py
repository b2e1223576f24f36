"""A sealed Lean process: no cloud credential or token of the search process reaches Lean (or its version
probe), whatever the parent environment holds; `lean.env` cannot name one either."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from burnqed.base.sandbox import ALLOWED, looks_like_credential, sealed_environment
from burnqed.config import LeanConfig, load_config
from burnqed.errors import ConfigError
from burnqed.lean.client import LeanWorker
from burnqed.lean.pool import LeanPool
from tests.conftest import double_argv

# The patterns, written here independently of burnqed.base.sandbox.
CREDENTIAL = re.compile(r"^AWS_|_TOKEN$|TOKEN|_SECRET|SECRET|_KEY|KEY")
PLANTED = {
    "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "s3cr3t", "AWS_SESSION_TOKEN": "tok",
    "GITHUB_TOKEN": "ghp_x", "HF_TOKEN": "hf_x", "ARGO_TOKEN": "Bearer x", "OPENAI_API_KEY": "sk-x",
    "MY_SECRET_THING": "x", "DB_PASSWORD": "x", "GOOGLE_APPLICATION_CREDENTIALS": "/k.json", "KEYRING": "x",
    "RANDOM_SETTING": "dropped too", "BURNQED_STORAGE__ROOT": "s3://bucket/run",
}


def dumped(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow
def test_no_credential_reaches_a_lean_process_or_its_version_probe(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in PLANTED.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LEAN_PATH", "/parent/lean/path")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    dump = tmp_path / "env.jsonl"
    config = LeanConfig(command=double_argv("--env-dump", str(dump)), env={"LEAN_PATH": "/configured",
                                                                           "LAKE_HOME": "/opt/lake"})

    async def run() -> None:
        async with LeanPool.from_config(config, size=2) as pool, pool.lease() as lean:
            assert await lean.start_goal(expr="p") == 0

    asyncio.run(run())
    environments = dumped(dump)
    assert len(environments) == 3  # the version probe and two workers
    for env in environments:
        leaked = sorted(name for name in env if CREDENTIAL.search(name.upper()))
        assert leaked == [], f"credentials reached Lean: {leaked}"
        assert not set(PLANTED) & set(env)
        assert env["LEAN_PATH"] == "/configured" and env["LAKE_HOME"] == "/opt/lake"  # lean.env wins
        assert env["LC_ALL"] == "C.UTF-8" and env["PATH"]
        # Only allowed names (and what python itself sets) are there.
        assert set(env) - ALLOWED - {"LC_ALL", "LC_CTYPE"} <= {"PWD"}, sorted(set(env) - ALLOWED)


def test_the_seal_itself() -> None:
    parent = {**PLANTED, "PATH": "/usr/bin", "HOME": "/home/u", "ELAN_HOME": "/e", "LC_MESSAGES": "C"}
    assert sealed_environment(parent, {"LEAN_PATH": "/l"}) == {
        "PATH": "/usr/bin", "HOME": "/home/u", "ELAN_HOME": "/e", "LC_MESSAGES": "C", "LEAN_PATH": "/l"}
    assert not any(looks_like_credential(name) for name in ALLOWED)
    with pytest.raises(ConfigError, match=r"lean\.env names AWS_SECRET_ACCESS_KEY, GH_TOKEN"):
        sealed_environment(parent, {"GH_TOKEN": "x", "AWS_SECRET_ACCESS_KEY": "y"})
    with pytest.raises(ConfigError, match="looks like a credential"):
        LeanWorker(["repl"], env={"API_KEY": "x"}).process_environment()


@pytest.mark.parametrize("name", ["AWS_ACCESS_KEY_ID", "GITHUB_TOKEN", "MY_SECRET", "SSH_KEY_PATH", "DB_PASSWORD"])
def test_a_credential_in_lean_env_is_refused_at_config_load(name: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(sets=[f'lean.env={{"{name}": "x"}}'])
    message = str(info.value)
    assert "\n" not in message
    assert f"lean.env: Value error, {name} looks like a credential" in message

"""Credentials out of Lean's reach, with real processes: a Lean worker started by `LeanWorker` with
`lean.run_as_uid` (as the cluster's Lean containers run it: burnqed as root with CAP_SETUID/CAP_SETGID/CAP_KILL,
Lean under a uid of its own) cannot read burnqed's `/proc/<pid>/environ` (where S3 keys from a Secret live) nor an
IRSA-style token file (0640, owned by root, group = the pod's fsGroup); the same worker without `run_as_uid` can,
which is what the test would catch. Needs root with those capabilities (a container here, or CI as root); skipped
with the reason otherwise."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from burnqed.base.sandbox import (
    CAP_KILL,
    CAP_SETGID,
    CAP_SETUID,
    LeanIdentity,
    effective_capabilities,
    readable_by,
    spawn_options,
)
from burnqed.errors import ConfigError, LeanStartError
from burnqed.lean.client import LeanWorker

LEAN_UID = 1001  # cluster.lean_uid's default
POD_GID = 1000  # the pod's fsGroup: kubelet gives mounted token files this group
SECRET_NAME, SECRET_VALUE = "AWS_SECRET_ACCESS_KEY", "fake/secret+key/for-the-test"

can_switch = os.geteuid() == 0 and all(effective_capabilities() >> bit & 1 for bit in (CAP_SETUID, CAP_SETGID,
                                                                                       CAP_KILL))
pytestmark = pytest.mark.skipif(not can_switch, reason="needs root with CAP_SETUID, CAP_SETGID and CAP_KILL to start "
                                "a process under another uid (run the suite as root, e.g. in a container)")


@pytest.fixture
def holder() -> Iterator[int]:
    """A root process whose environment holds S3 keys, as burnqed's does with the key Secret in envFrom."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), SECRET_NAME: SECRET_VALUE}
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def token_file() -> Iterator[Path]:
    """An IRSA-style token: a folder others may search (as kubelet mounts projected volumes), the file 0640,
    owned by root, group = the pod's fsGroup."""
    folder = Path(tempfile.mkdtemp(prefix="burnqed-irsa-", dir="/tmp"))
    folder.chmod(0o755)
    token = folder / "token"
    token.write_text("eyJhbGciOi.fake-web-identity-token")
    os.chown(token, 0, POD_GID)
    token.chmod(0o640)
    try:
        yield token
    finally:
        token.unlink()
        folder.rmdir()


def lean_side_reads(paths: list[str], run_as_uid: int | None) -> list[str]:
    """Start a 'Lean worker' through LeanWorker (the code path of every Lean process) whose command tries to read
    `paths` and reports on stderr, then exits without `ready.`; return the stderr lines LeanWorker reports (its uid,
    then READ or DENIED per path)."""
    script = "; ".join(f"if cat {p} >/dev/null 2>&1; then echo READ {p} >&2; else echo DENIED {p} >&2; fi"
                       for p in paths)
    worker = LeanWorker(["/bin/sh", "-c", f"id -u >&2; {script}"], ready_timeout_s=20, version=None,
                        run_as=None if run_as_uid is None else LeanIdentity(run_as_uid, run_as_uid))
    from leankit.version import PantographVersion

    worker.version = PantographVersion.parse("0.3.4")  # no version probe: the command is not a REPL

    async def start() -> str:
        with pytest.raises(LeanStartError) as failed:
            await worker.start()
        await worker.close()
        return str(failed.value)

    message = asyncio.run(start())
    return message.split("stderr: ", 1)[1].splitlines()  # the message also quotes the command: only its output


def test_a_lean_process_cannot_read_burnqeds_environment_nor_the_token(holder: int, token_file: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token_file))
    paths = [f"/proc/{holder}/environ", f"/proc/{os.getpid()}/environ", "/proc/1/environ", str(token_file)]
    separated = lean_side_reads(paths, LEAN_UID)
    assert separated == [str(LEAN_UID), *(f"DENIED {path}" for path in paths)]  # under Lean's uid, nothing read
    # the control: the same worker as burnqed's own user reads all of it (so the test above can fail)
    # (/proc/1 is left out of the control: this machine's pid 1 may not be ours to read; in a pod it is Argo's
    # emissary, which holds the container's environment)
    shared = lean_side_reads([p for p in paths if p != "/proc/1/environ"], None)
    assert shared == [str(os.geteuid()), *(f"READ {path}" for path in paths if path != "/proc/1/environ")]
    # what there was to steal
    assert f"{SECRET_NAME}={SECRET_VALUE}".encode() in Path(f"/proc/{holder}/environ").read_bytes()


def test_a_token_file_others_may_read_is_refused(token_file: Path) -> None:
    identity = LeanIdentity(LEAN_UID, LEAN_UID)
    assert not readable_by(token_file, identity)
    token_file.chmod(0o644)  # a mode that lets 'other' read: the separation would not hold
    assert readable_by(token_file, identity)
    with pytest.raises(ConfigError, match=rf"credential file\(s\) {token_file} would be readable by Lean's uid 1001"):
        spawn_options(identity, {"AWS_WEB_IDENTITY_TOKEN_FILE": str(token_file)})
    token_file.chmod(0o640)
    assert spawn_options(identity, {"AWS_WEB_IDENTITY_TOKEN_FILE": str(token_file)}) == {
        "user": LEAN_UID, "group": LEAN_UID, "extra_groups": []}


def test_lean_as_root_or_as_burnqed_itself_is_refused() -> None:
    for uid in (0, os.geteuid()):
        with pytest.raises(ConfigError, match="must run as a user of its own"):
            spawn_options(LeanIdentity(uid, uid), {})

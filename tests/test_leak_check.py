"""The check every test ends with (tests/conftest.py `no_leaked_processes`): `live_children` lists each process below
the test's, grandchildren included, the same set psutil's walk of /proc finds, and no child that has exited."""

from __future__ import annotations

import subprocess
import time

import psutil

from tests.conftest import live_children


def test_live_children_lists_a_grandchild_as_psutil_does_and_not_an_exited_child() -> None:
    shell = subprocess.Popen(["bash", "-c", "sleep 60 & sleep 60"])
    done = subprocess.Popen(["true"])
    try:
        deadline = time.monotonic() + 10
        while len(psutil.Process(shell.pid).children()) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        while psutil.Process(done.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.02)
        listed = {p.pid for p in live_children()}
        walked = {p.pid for p in psutil.Process().children(recursive=True)} - {done.pid}
        assert len(listed) == 3 and shell.pid in listed  # the shell and its two sleeps
        assert listed == walked
        assert done.pid not in listed  # exited, not yet reaped
    finally:
        for child in psutil.Process(shell.pid).children():
            child.kill()
        shell.kill()
        shell.wait()
        done.wait()
    assert live_children() == []

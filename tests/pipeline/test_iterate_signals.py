"""The run root's lease, with real processes on the embedded defaults (the small world of
tests/pipeline/iteration.py): a second `iterate` on the same root refuses naming the first, and takes its lease over
once the first was SIGKILLed. (SIGTERM and SIGKILL mid-search are tests/pipeline/test_iterate.py's.)"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.pipeline.iteration import NO_ORPHAN_S, alive_after, iterate_env, start_iterate, wait_until
from tests.processes import PRINTED_PROGRAM

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_a_second_iterate_refuses_naming_the_first_and_takes_over_after_a_sigkill(
    iterate_home: Path, tmp_path: Path
) -> None:
    root = tmp_path / "run"
    env = iterate_env(iterate_home)
    first = start_iterate(root, env)
    lease = root / "_LEASE.json"
    try:
        wait_until(lease.exists, first, "the run root's lease", timeout_s=120)
        second = subprocess.run([sys.executable, "-m", "burnqed.cli", "iterate", "--iter", "0", "--root", str(root),
                                 "--only", "prepare-data"], env=env, capture_output=True, text=True, timeout=300,
                                check=False)
        assert second.returncode == 2, second.stderr[-2000:]
        assert second.stderr.count("\n") == 1 and "Traceback" not in second.stderr
        assert f"is in use by pid {first.pid} on " in second.stderr
        named = rf"\(`{PRINTED_PROGRAM} iterate --iter 0 --root {re.escape(str(root))}`, since "
        assert re.search(named, second.stderr), second.stderr
        time.sleep(1.0)
        # the stage it runs: told to stop when its parent dies
        children = psutil.Process(first.pid).children(recursive=True)
        first.kill()
        first.wait()
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
        if first.stderr is not None:
            first.stderr.close()
    assert alive_after(children, NO_ORPHAN_S) == []
    assert lease.exists()  # a SIGKILL releases nothing: the lease is stale now
    again = subprocess.run([sys.executable, "-m", "burnqed.cli", "iterate", "--iter", "0", "--root", str(root),
                            "--only", "prepare-data"], env=env, capture_output=True, text=True, timeout=600,
                           check=False)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"taking over the lease of run root file://{root} from pid {first.pid}" in again.stderr
    assert "is no longer running" in again.stderr
    assert (root / "iter_0" / "data" / "_SUCCESS.json").exists() and not lease.exists()

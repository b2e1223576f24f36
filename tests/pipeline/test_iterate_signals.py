"""`burnqed iterate` stopped from outside, with real processes on the embedded defaults (the small world of
test_iterate): SIGTERM mid-search ends it in one line with 143, leaves no process behind after 10 s and keeps the
committed search parts, and the same command then completes the iteration; a second `iterate` on the same root
refuses naming the first, and takes its lease over once the first was SIGKILLed."""

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

from burnqed.storage import Store
from burnqed.trajectory.reader import read_results
from tests.pipeline.test_iterate import _env, _iterate, home  # noqa: F401  (home: the module-scoped fixture)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

NO_ORPHAN_S = 10.0


def _start(root: Path, env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "burnqed.cli", "iterate", "--iter", "0", "--root", str(root),
                             *extra], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _wait_for(path: Path, proc: subprocess.Popen[str], timeout_s: float = 900) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.exists(), f"{path} never appeared (iterate exited {proc.poll()})"


def _descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def _alive_after(processes: list[psutil.Process], seconds: float) -> list[str]:
    _, alive = psutil.wait_procs(processes, timeout=seconds)
    left = []
    for proc in alive:
        try:
            left.append(" ".join(proc.cmdline()[:6]))
            proc.kill()
        except psutil.NoSuchProcess:
            continue
    return left


def test_sigterm_mid_search_stops_iterate_in_one_line_and_the_same_command_completes(
    home: Path, tmp_path: Path, store: Store  # noqa: F811
) -> None:
    root = tmp_path / "run"
    env = _env(home)
    proc = _start(root, env)
    try:
        _wait_for(root / "iter_0" / "search" / "shard-0" / "part-000000.json", proc)
        children = _descendants(proc.pid)  # the search stage and its Lean workers
        assert any("search" in " ".join(child.cmdline()) for child in children)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=NO_ORPHAN_S)
        took = time.monotonic() - sent
        assert proc.stderr is not None
        stderr = proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert _alive_after(children, max(0.0, NO_ORPHAN_S - took)) == []
    assert code == 128 + signal.SIGTERM
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    # the stage shards running side by side when the signal came (--jobs: one per core), search[0] among them
    assert len(errors) == 1 and re.fullmatch(
        r"error: burnqed iterate \(stages? (\S+, )*search\[0\](, \S+)*\) stopped by SIGTERM; finished stages and "
        rf"committed search parts under file://{re.escape(str(root))} are kept: continue with "
        rf"`burnqed iterate --iter 0 --root {re.escape(str(root))}`", errors[0]), stderr[-3000:]
    assert "Traceback" not in stderr
    shard0 = f"file://{root}/iter_0/search/shard-0"
    kept = {result.name for result in read_results(shard0, store=store)}
    assert kept and not store.is_done(shard0)  # committed parts kept, nothing published as finished
    assert not (root / "_LEASE.json").exists() and not (root / "iter_0/search/shard-0/_LEASE.json").exists()

    done = _iterate(str(root), 0, env)
    assert done.returncode == 0, done.stderr[-3000:]
    results = read_results(shard0, store=store)
    assert kept <= {r.name for r in results} and len({r.name for r in results}) == len(results)
    assert store.is_done(f"file://{root}/iter_0/report")


def test_a_second_iterate_refuses_naming_the_first_and_takes_over_after_a_sigkill(
    home: Path, tmp_path: Path  # noqa: F811
) -> None:
    root = tmp_path / "run"
    env = _env(home)
    first = _start(root, env)
    try:
        _wait_for(root / "_LEASE.json", first, timeout_s=120)
        second = subprocess.run([sys.executable, "-m", "burnqed.cli", "iterate", "--iter", "0", "--root", str(root),
                                 "--only", "prepare-data"], env=env, capture_output=True, text=True, timeout=300,
                                check=False)
        assert second.returncode == 2, second.stderr[-2000:]
        assert second.stderr.count("\n") == 1 and "Traceback" not in second.stderr
        assert f"is in use by pid {first.pid} on " in second.stderr
        assert f"(`burnqed iterate --iter 0 --root {root}`, since " in second.stderr
        time.sleep(1.0)
        children = _descendants(first.pid)  # the stage it runs: told to stop when its parent dies
        first.kill()
        first.wait()
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    assert _alive_after(children, NO_ORPHAN_S) == []
    assert (root / "_LEASE.json").exists()  # a SIGKILL releases nothing: the lease is stale now
    again = subprocess.run([sys.executable, "-m", "burnqed.cli", "iterate", "--iter", "0", "--root", str(root),
                            "--only", "prepare-data"], env=env, capture_output=True, text=True, timeout=600,
                           check=False)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"taking over the lease of run root file://{root} from pid {first.pid}" in again.stderr
    assert "is no longer running" in again.stderr
    assert (root / "iter_0" / "data" / "_SUCCESS.json").exists() and not (root / "_LEASE.json").exists()

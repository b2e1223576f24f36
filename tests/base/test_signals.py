"""burnqed.base.signals with real processes and real signals: a stopped child's group and descendants are gone after
the grace; SIGTERM in synchronous code, in a `run_async` loop and in a loop blocked in synchronous work becomes
one `StoppedError` (143) after the cleanup ran; a stage follows its parent; worker counts that do not fit are
refused with the largest that does; `serve` on a port in use is one line."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from burnqed.base.resources import WORKERS_PER_CORE, check_workers_fit, workers_that_fit
from burnqed.base.signals import (
    PROGRAM_ENV,
    SUPERVISED_ENV,
    command_text,
    program_name,
    same_command,
    stop_process_group,
)
from burnqed.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def _python(code: str, *, process_group: int | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, process_group=process_group)


def _ready(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline().strip()


def test_stop_process_group_kills_a_child_that_ignores_sigterm_and_what_it_started(tmp_path: Path) -> None:
    # The child ignores SIGTERM and starts a grandchild in a session of its own, as a Lean worker is started.
    child = _python("""
        import signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
        print(worker.pid, flush=True)
        time.sleep(600)
    """, process_group=0)
    worker = psutil.Process(int(_ready(child)))
    started = time.monotonic()
    code = stop_process_group(child, grace_s=0.5)
    assert code == -signal.SIGKILL and time.monotonic() - started < 5
    assert not worker.is_running() or worker.status() == psutil.STATUS_ZOMBIE
    assert stop_process_group(child, grace_s=0.5) == -signal.SIGKILL  # idempotent


def test_stop_process_group_lets_a_child_that_stops_on_sigterm_exit_on_its_own() -> None:
    child = _python("""
        import signal, sys, time
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        print("ready", flush=True)
        time.sleep(600)
    """, process_group=0)
    assert _ready(child) == "ready"
    assert stop_process_group(child, grace_s=30) == 143


STOPPED = """
    import asyncio, os, signal, sys, time
    from burnqed.errors import StoppedError
    from burnqed.base.signals import run_async, stop_on_signals

    cleaned = []

    def body():
        {body}

    try:
        with stop_on_signals("the work", kept="what finished is kept", continue_with="burnqed again"):
            body()
    except StoppedError as exc:
        print(exc.signum, cleaned, str(exc), flush=True)
"""


@pytest.mark.parametrize("body", [
    # synchronous code
    "try:\n            print('ready', flush=True)\n            time.sleep(60)\n"
    "        finally:\n            cleaned.append('sync')",
    # a run_async loop: its main task is cancelled, its cleanup awaits
    "async def main():\n"
    "            try:\n                print('ready', flush=True)\n                await asyncio.sleep(60)\n"
    "            finally:\n                await asyncio.sleep(0.01)\n                cleaned.append('async')\n"
    "        run_async(main())",
    # a loop blocked in synchronous work: Terminated is raised in it after ESCALATE_S
    "async def main():\n            try:\n                print('ready', flush=True)\n                time.sleep(60)\n"
    "            finally:\n                cleaned.append('blocked')\n        run_async(main())",
], ids=["sync", "async", "blocked-loop"])
def test_sigterm_inside_stop_on_signals_is_one_stopped_error_after_cleanup(body: str) -> None:
    proc = _python(STOPPED.replace("{body}", body))
    assert _ready(proc) == "ready"
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert time.monotonic() - started < 5
    signum, rest = out.split(" ", 1)
    assert int(signum) == signal.SIGTERM
    assert rest.strip().endswith("the work stopped by SIGTERM; what finished is kept: continue with `burnqed again`")
    assert rest.startswith(("['sync']", "['async']", "['blocked']"))  # the cleanup ran


def test_a_supervised_stage_gets_sigterm_when_its_parent_dies() -> None:
    # parent: starts a burnqed-like child that follows it, prints the child's pid, then is SIGKILLed
    parent = _python(f"""
        import os, subprocess, sys, time
        env = dict(os.environ, {SUPERVISED_ENV}=str(os.getpid()))
        code = ("import signal, sys, time\\n"
                "from burnqed.base.signals import follow_parent\\n"
                "signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))\\n"
                "follow_parent()\\n"
                "print('following', flush=True)\\n"
                "time.sleep(600)\\n")
        child = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "following"
        print(child.pid, flush=True)
        time.sleep(600)
    """)
    child = psutil.Process(int(_ready(parent)))
    parent.kill()
    parent.communicate()
    _, alive = psutil.wait_procs([child], timeout=10)
    assert not alive


def test_same_command_repeats_the_arguments_and_adds_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["cli.py", "search", "--output", "a b", "--resume"])
    assert same_command(("--resume",)) == "burnqed search --output 'a b' --resume"
    monkeypatch.setattr(sys, "argv", ["cli.py", "eval", "--output", "x"])
    assert same_command(("--resume",)) == "burnqed eval --output x --resume"


def test_a_named_command_starts_with_the_program_as_the_user_can_type_it_again(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`.venv/bin/burnqed` when so run (the README's form: a `burnqed` pasted where the venv is not active is `command
    not found`), the bare name when the shell finds that very file on PATH, `python -m burnqed` as typed, and a stage
    of iterate its parent's name."""
    bin_ = tmp_path / "project" / ".venv" / "bin"
    bin_.mkdir(parents=True)
    for name in ("burnqed", "python"):
        (bin_ / name).write_text("#!/bin/sh\n")
        (bin_ / name).chmod(0o755)
    monkeypatch.chdir(tmp_path / "project")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.delenv(PROGRAM_ENV, raising=False)
    monkeypatch.setattr(sys, "argv", [".venv/bin/burnqed", "iterate"])
    assert command_text(["iterate", "--iter", "1"]) == ".venv/bin/burnqed iterate --iter 1"
    monkeypatch.setattr(sys, "argv", [str(bin_ / "burnqed"), "iterate"])  # an absolute path under the folder
    assert program_name() == ".venv/bin/burnqed"
    monkeypatch.chdir(tmp_path)
    assert program_name() == "project/.venv/bin/burnqed"
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert program_name() == str(bin_ / "burnqed")  # not under the working folder: as given
    monkeypatch.setenv("PATH", f"{bin_}:/usr/bin")  # the venv active: `burnqed` is this very file
    assert program_name() == "burnqed"
    monkeypatch.chdir(tmp_path / "project")
    monkeypatch.setattr(sys, "argv", [str(tmp_path / "burnqed" / "__main__.py"), "eval"])
    monkeypatch.setattr(sys, "orig_argv", [".venv/bin/python", "-m", "burnqed", "eval"])
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert program_name() == ".venv/bin/python -m burnqed"
    monkeypatch.setattr(sys, "orig_argv", ["python3", "-X", "utf8", "-m", "burnqed.cli", "eval"])
    assert program_name() == "python3 -m burnqed.cli"
    for no_program in ("-c", "-", ""):  # `python -c …` (pytest-xdist's workers), a script on stdin: the bare name
        monkeypatch.setattr(sys, "argv", [no_program, "eval"])
        assert program_name() == "burnqed"
    monkeypatch.setenv(PROGRAM_ENV, ".venv/bin/burnqed")  # a stage of `iterate`: the name its parent was run by
    assert command_text(["show", "t"]) == ".venv/bin/burnqed show t"


def test_worker_counts_are_checked_against_cores_and_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    gib = 2**30
    assert workers_that_fit(cores=2, memory=64 * gib, per_worker=gib) == 2 * WORKERS_PER_CORE
    assert workers_that_fit(cores=64, memory=20 * gib, per_worker=6 * gib) == 3
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    total = psutil.virtual_memory().total
    fit = min(2 * WORKERS_PER_CORE, total // (100 * 2**20))
    check_workers_fit(fit - 1, 1, 100)  # exactly what fits
    with pytest.raises(ConfigError) as refused:
        check_workers_fit(1000, 1, 100)
    assert str(refused.value) == (
        f"lean.workers=1000 + 1 verifier worker (lean.verifier_workers) does not fit this machine (2 cores × "
        f"{WORKERS_PER_CORE} = {fit} Lean processes): set lean.workers={fit - 1} or fewer (unset, it picks what fits)"
    )
    huge = total // 2**20 + 1  # one worker is more than the machine's memory
    with pytest.raises(ConfigError, match=r"lower lean\.worker_memory_mb"):
        check_workers_fit(1, 0, huge)


@pytest.mark.slow
def test_search_refuses_more_workers_than_fit_before_starting_any(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "burnqed.cli", "search", "--output", str(tmp_path / "out"),
                           "--set", "lean.workers=1000"], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: lean.workers=1000 + 1 verifier worker")
    assert "set lean.workers=" in proc.stderr and not list((tmp_path / "out").glob("part-*"))


@pytest.mark.slow
def test_serve_on_a_port_in_use_is_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "burnqed.cli", "serve", "--port", str(port)],
                              capture_output=True, text=True, timeout=120, check=False,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 2
    assert proc.stderr == (f"error: cannot serve on 127.0.0.1:{port}: the port is in use by another process: "
                           "choose another --port (0 = any free)\n")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigterm_while_many_lean_workers_start_leaves_none_behind(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "burnqed.cli", "search", "--output", str(out),
                             "--set", "lean.workers=7", "--set", "lean.worker_memory_mb=100"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    seen: dict[int, psutil.Process] = {}
    try:
        deadline = time.monotonic() + 240
        while len(seen) < 4 and proc.poll() is None and time.monotonic() < deadline:
            for child in psutil.Process(proc.pid).children(recursive=True):
                seen.setdefault(child.pid, child)
            time.sleep(0.02)
        assert len(seen) >= 4, f"the workers never started (exit {proc.poll()})"
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        while proc.poll() is None and time.monotonic() < sent + 10:
            with contextlib.suppress(psutil.Error):
                for child in psutil.Process(proc.pid).children(recursive=True):
                    seen.setdefault(child.pid, child)
            time.sleep(0.02)
        code = proc.wait(timeout=max(0.1, sent + 10 - time.monotonic()))
        assert proc.stderr is not None
        stderr = proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    _, alive = psutil.wait_procs(list(seen.values()), timeout=max(0.0, sent + 10 - time.monotonic()))
    assert not alive, [p.pid for p in alive]
    assert code == 128 + signal.SIGTERM
    assert stderr.count("\n") == 1 and stderr.startswith(f"error: burnqed search to {out} stopped by SIGTERM; ")
    assert stderr.rstrip().endswith("--set lean.worker_memory_mb=100 --resume`")


def test_ctrl_c_inside_stop_on_signals_is_130_after_cleanup() -> None:
    body = ("try:\n            print('ready', flush=True)\n            time.sleep(60)\n"
            "        finally:\n            cleaned.append('sync')")
    proc = _python(STOPPED.replace("{body}", body))
    assert _ready(proc) == "ready"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out.strip() == ("2 ['sync'] the work stopped by SIGINT; what finished is kept: continue with "
                           "`burnqed again`")

"""Odd environments a real run meets (issue 49, item 2), each through real `python -m burnqed.cli` processes with the
environment, working directory or stdout in question: no HOME (and no home directory for the user id), a C locale
and a Latin-1 stdout with theorem names and statements outside ASCII, the working directory deleted mid-run with
relative paths, and stdout closed by its reader (`| head -1`). The entry point's guards are in `burnqed.commands.kit`
(`guard_output_streams`, `keep_working_directory`); the cache folders' in `burnqed.storage.default_cache_dir` and
`burnqed.policy.tiny.default_model_dir`."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import double_argv

BURNQED = [sys.executable, "-m", "burnqed.cli"]
# HOME unset in a container whose user id has no passwd entry (an arbitrary uid): the process runs burnqed's entry
# point with the password database answering as it does for such a uid.
NO_PASSWD = ("import pwd, sys\n"
             "def unknown(uid): raise KeyError(f'getpwuid(): uid not found: {uid}')\n"
             "pwd.getpwuid = unknown\n"
             "from burnqed.cli import main\n"
             "sys.argv = ['burnqed', *sys.argv[1:]]\n"
             "main()\n")
UNICODE_INDEX = {"name": "unicode", "theorems": [
    {"name": "α_ℕ_le", "statement": "∀ (n : ℕ), n + 0 ≤ n"},
    {"name": "β₁", "statement": "∀ (n : ℕ), 0 + n = n"},
]}


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """This environment with a BURNQED_HOME of the test's own (no write to a shared cache) and `extra`."""
    return {**os.environ, "BURNQED_HOME": str(tmp_path / "home"), **extra}


def _index(tmp_path: Path) -> Path:
    path = tmp_path / "unicode.json"
    path.write_text(json.dumps(UNICODE_INDEX, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.mark.slow
def test_without_home_or_a_home_directory_a_command_that_needs_no_cache_works_and_one_that_does_says_so(
        tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("HOME", "XDG_CACHE_HOME", "BURNQED_HOME")}
    index = _index(tmp_path)
    checked = subprocess.run([sys.executable, "-c", NO_PASSWD, "lean", "check", "--theorems", str(index), "--output",
                              str(tmp_path / "report.json"), "--set", "lean.workers=1"],
                             capture_output=True, text=True, timeout=120, check=False, env=env)
    assert checked.returncode == 0, checked.stderr
    assert json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))["started"] == 2
    # The default tiny model lives under the user's cache: with no home at all, one line before any work.
    evaluated = subprocess.run([sys.executable, "-c", NO_PASSWD, "eval", "--theorems", str(index), "--output",
                                str(tmp_path / "eval.json")],
                               capture_output=True, text=True, timeout=120, check=False, env=env)
    assert (evaluated.returncode, evaluated.stdout) == (2, "")
    assert evaluated.stderr.splitlines() == [
        f"error: no folder for the default tiny model: HOME is not set and user id {os.getuid()} has no home "
        "directory; set BURNQED_HOME (or XDG_CACHE_HOME) to a writable folder, or give policy.model"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "unicode.json"]
    assert not Path("~").exists()  # never a folder named `~` in the working directory


@pytest.mark.slow
def test_non_ascii_theorems_on_a_latin_1_stdout_or_under_a_c_locale_finish_with_exit_0(tmp_path: Path,
                                                                                       tiny_model_dir: Path) -> None:
    # en_US.ISO-8859-1 is not installed here (`locale -a`: C, C.utf8, POSIX): PYTHONIOENCODING gives Python the
    # stdout such a locale would. Before the entry point's guard: UnicodeEncodeError, exit 1, after the result was
    # written.
    output = tmp_path / "eval.json"
    args = [*BURNQED, "eval", "--theorems", str(_index(tmp_path)), "--budgets", "1", "--show-theorems", "--output",
            str(output), "--set", f"policy.model={tiny_model_dir}"]
    latin = subprocess.run(args, capture_output=True, timeout=300, check=False,
                           env=_env(tmp_path, PYTHONIOENCODING="latin-1"))
    assert latin.returncode == 0, latin.stderr.decode("latin-1")
    assert b"Traceback" not in latin.stderr
    assert {t["name"] for t in json.loads(output.read_text(encoding="utf-8"))["per_theorem"]} == {"α_ℕ_le", "β₁"}
    # Latin-1 lacks α, ℕ and ₁: they are written as escapes, never dropped
    shown = latin.stdout.decode("latin-1")
    assert "\\u03b1_\\u2115_le" in shown and "\\u03b2\\u2081" in shown, shown
    # The C locale: Python reads it as UTF-8 (PEP 538/540); the finished eval's table is printed again, as it is.
    c_locale = subprocess.run(args, capture_output=True, timeout=300, check=False,
                              env=_env(tmp_path, LC_ALL="C", LANG="C"))
    assert c_locale.returncode == 0, c_locale.stderr.decode("utf-8", "replace")
    assert "α_ℕ_le" in c_locale.stdout.decode() and "β₁" in c_locale.stdout.decode()
    assert re.fullmatch(rf"reusing {re.escape(str(output))} \(finished [-0-9: ]+ UTC, same inputs\); --force redoes it",
                        c_locale.stdout.decode().splitlines()[0])


def _wait_for(path: Path, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_working_directory_deleted_mid_run_keeps_relative_paths_and_the_work(tmp_path: Path,
                                                                               tiny_model_dir: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    _index(tmp_path)
    proc = subprocess.Popen([*BURNQED, "eval", "--theorems", "../unicode.json", "--budgets", "2", "--output",
                             "../out/eval.json", "--trajectories-out", "../out/t", "--set",
                             f"policy.model={tiny_model_dir}"],
                            cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(tmp_path))
    try:
        # The trajectory lease is taken before the model is loaded: torch (and oneMKL in it) load after this.
        _wait_for(tmp_path / "out" / "t" / "_LEASE.json", proc)
        work.rmdir()
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr.decode()
    # The show it names runs as printed: this interpreter by its whole path (the working folder is gone, so no path
    # relative to it), `-m burnqed.cli` as the test typed it, and a theorem it evaluated.
    shown = shlex.join([*BURNQED, "show", "α_ℕ_le", "--trajectories", "../out/t"])
    assert stdout.decode().splitlines()[-1] == (f"wrote ../out/eval.json (trajectories: ../out/t; `{shown}` draws "
                                                "one theorem's search)")
    assert json.loads((tmp_path / "out" / "eval.json").read_text(encoding="utf-8"))["total"] == 2
    assert (tmp_path / "out" / "t" / "_SUCCESS.json").exists()
    assert {p.name for p in tmp_path.iterdir()} <= {"home", "out", "unicode.json"}  # nothing at a wrong place


@pytest.mark.slow
def test_a_command_started_in_a_deleted_directory_is_one_line_exit_2(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    code = ("import os, subprocess, sys\n"
            f"os.chdir({str(gone)!r}); os.rmdir({str(gone)!r})\n"
            "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
            "print(done.returncode, done.stdout == '', done.stderr, end='')\n")
    done = subprocess.run([sys.executable, "-c", code, *BURNQED, "config", "show"], capture_output=True, text=True,
                          timeout=120, check=True, env=_env(tmp_path))
    assert done.stdout == ("2 True error: the current working directory no longer exists: cd to an existing folder "
                           "and run the command again\n")


@pytest.mark.slow
def test_stdout_closed_by_its_reader_lets_the_command_finish_quietly(tmp_path: Path) -> None:
    # `burnqed lean check … | head -1`: the first line is read, the pipe closed, and the check still runs to its
    # end, writes its report and exits 0, with no BrokenPipeError on stderr (before: exit 1).
    report = tmp_path / "report.json"
    proc = subprocess.Popen([*BURNQED, "lean", "check", "--theorems", str(_index(tmp_path)), "--output", str(report),
                             "--set", f"lean.command={json.dumps(double_argv())}", "--set", "lean.workers=1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(tmp_path))
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 0, stderr
    assert first.startswith(b"Pantograph 0.3.4 (from `")
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr and "Exception ignored" not in stderr
    assert json.loads(report.read_text(encoding="utf-8"))["started"] == 2

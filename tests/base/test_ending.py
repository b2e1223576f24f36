"""burnqed/base/ending.py: the `burnqed` program's process ends once its command raised SystemExit and every exit
handler registered after the command started ran, with logging shut down and stdout and stderr flushed, without
Python's teardown; anything else ends as Python ends it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from burnqed.base.ending import FLUSH_FAILED, exit_status

ROOT = Path(__file__).parents[2]

# A process that registers the ending, then what a command might leave for the end: an object whose finalizer would
# run in Python's teardown, an exit handler registered after the ending, a forgotten temporary directory (removed by
# weakref.finalize's exit handler), a log record buffered in a handler that only logging's shutdown flushes, and a
# tail of stdout in its buffer; then the command's end, SystemExit(CODE) or an exception.
SCRIPT = """
import atexit, logging, logging.handlers, sys, tempfile
from burnqed.base.ending import Ending

class Torn:
    def __del__(self):
        sys.__stderr__.write("torn down\\n")

held = Torn()
ending = Ending.register()
atexit.register(print, "a later exit handler ran")
kept = tempfile.TemporaryDirectory()
print(kept.name)
log = logging.getLogger("ending-test")
log.propagate = False
log.addHandler(logging.handlers.MemoryHandler(100, target=logging.FileHandler(sys.argv[1])))
log.warning("flushed by logging's shutdown")
sys.stdout.write("the unflushed tail\\n")
try:
    END
except SystemExit as stop:
    ending.arm(stop)
    raise
"""


def run(tmp_path: Path, end: str) -> subprocess.CompletedProcess[str]:
    script = SCRIPT.replace("END", end)
    return subprocess.run([sys.executable, "-c", script, str(tmp_path / "log.txt")], capture_output=True, text=True,
                          timeout=120, check=False, cwd=ROOT)


@pytest.mark.parametrize(("code", "status"), [(None, 0), (0, 0), (3, 3), (130, 130), ("a message", 1)])
def test_the_status_is_the_one_python_gives_a_system_exit(code: object, status: int) -> None:
    assert exit_status(SystemExit(code)) == status


def test_an_armed_end_runs_the_later_handlers_flushes_and_skips_the_teardown(tmp_path: Path) -> None:
    done = run(tmp_path, "sys.exit(3)")
    assert done.returncode == 3, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1:] == ["the unflushed tail", "a later exit handler ran"]
    assert not Path(lines[0]).exists()  # the temporary directory's finalizer ran
    assert (tmp_path / "log.txt").read_text() == "flushed by logging's shutdown\n"
    assert "torn down" not in done.stderr  # no teardown: the object was never finalized


def test_a_message_ends_with_1_after_python_printed_it(tmp_path: Path) -> None:
    done = run(tmp_path, "sys.exit('error: a message')")
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == "error: a message"
    assert "torn down" not in done.stderr


def test_an_exception_other_than_system_exit_ends_as_python_ends_it(tmp_path: Path) -> None:
    done = run(tmp_path, "raise RuntimeError('boom')")
    assert done.returncode == 1
    assert "RuntimeError: boom" in done.stderr and "torn down" in done.stderr  # Python's teardown ran
    assert (tmp_path / "log.txt").read_text() == "flushed by logging's shutdown\n"


def test_a_stdout_that_cannot_be_flushed_ends_with_python_s_status() -> None:
    # a buffered stdout whose descriptor is gone by the end: Python's own end gives 120, and so does the ending
    lost = "import os, sys\nfd = os.dup(1)\nsys.stdout = open(fd, 'w')\nsys.stdout.write('x')\nos.close(fd)\n"
    armed = ("from burnqed.base.ending import Ending\nending = Ending.register()\n" + lost
             + "try:\n    sys.exit(0)\nexcept SystemExit as stop:\n    ending.arm(stop)\n    raise\n")
    for script in (lost + "sys.exit(0)\n", armed):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                              check=False, cwd=ROOT)
        assert done.returncode == FLUSH_FAILED, script


def test_importing_the_program_registers_only_logging_s_exit_handler() -> None:
    # Exit handlers run last registered first: one registered before the program's (`burnqed.cli.console`) would be
    # skipped by its os._exit. The ending calls logging's shutdown itself; anything else fails here, named.
    probe = ("import atexit, sys\nregistered = []\nreal = atexit.register\n"
             "def register(function, *args, **kwargs):\n"
             "    registered.append(f'{function.__module__}.{function.__qualname__}')\n"
             "    return real(function, *args, **kwargs)\n"
             "atexit.register = register\nimport burnqed.cli\nprint(registered)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True,
                          cwd=ROOT)
    assert done.stdout.strip() == "['logging.shutdown']"


@pytest.mark.parametrize(("entry", "torn_down"), [("console", False), ("main", True)])
def test_the_program_ends_without_the_teardown_and_the_command_line_alone_with_it(entry: str,
                                                                                   torn_down: bool) -> None:
    # `console` (the console script, `python -m burnqed[.cli]`) arms the ending; `main` alone, for a program that
    # calls it and goes on, leaves the end to Python
    probe = ("import sys\nclass Torn:\n    def __del__(self):\n        sys.__stderr__.write('torn down\\n')\n"
             f"held = Torn()\nsys.argv = ['burnqed', '--version']\nfrom burnqed.cli import {entry}\n{entry}()\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False,
                          cwd=ROOT)
    assert (done.returncode, done.stdout.strip()) == (0, "burnqed 0.1.0")
    assert ("torn down" in done.stderr) is torn_down, done.stderr


def test_the_program_ends_with_its_commands_status_and_output() -> None:
    done = subprocess.run([sys.executable, "-m", "burnqed.cli", "--version"], capture_output=True, text=True,
                          timeout=60, check=False, cwd=ROOT)
    assert (done.returncode, done.stdout.strip()) == (0, "burnqed 0.1.0")
    refused = subprocess.run([sys.executable, "-m", "burnqed", "search", "--no-such-option"], capture_output=True,
                             text=True, timeout=60, check=False, cwd=ROOT)
    assert refused.returncode == 2 and "--no-such-option" in refused.stderr

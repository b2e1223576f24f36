"""How the `burnqed` program's process ends: once its command raised `SystemExit` and every exit handler ran, without
tearing the interpreter down.

    ending = Ending.register()   # burnqed.cli.console, before the command: an exit handler, inert until armed
    try:
        main()
    except SystemExit as stop:
        ending.arm(stop)         # the process ends with the status Python would give `stop`
        raise

After its exit handlers (`atexit`) Python collects and frees every object the process still holds. With torch
loaded that is 0.4-0.7 CPU-s, with transformers' model classes, peft and TRL 1.4-2 CPU-s (measured on 2 cores:
`import torch, transformers, peft` took 6.0 CPU-s with Python's end, 4.5 with this one): at the end of every
command, of every stage `burnqed iterate` starts and of every process torchrun launches. The handler ends the process
with `os._exit` instead, after what that end would still have done for the command: logging's handlers flushed and
closed (`logging.shutdown`, whose own exit handler logging registered when `burnqed.cli` imported it, before this
one; tests/base/test_ending.py checks it is the only one) and stdout and stderr flushed (a flush that fails ends the
process with 120, as Python's end does). Exit handlers run last registered first, so every handler registered once
the command started (torch's, multiprocessing's, `weakref.finalize`'s, which removes a forgotten
`tempfile.TemporaryDirectory`) has run before this one. Threads that are not daemons were joined before any of them.

What is not done: objects still alive are not finalized (a file the command left open unflushed loses what its
buffer held: every burnqed writer closes its files itself), and the C library's exit functions do not run. An
exception other than `SystemExit` (a traceback) and a program that calls `burnqed.cli.main` itself end as Python ends
them.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
from dataclasses import dataclass

FLUSH_FAILED = 120  # Python's exit status when flushing stdout or stderr fails at exit (Py_FinalizeEx)


def exit_status(stop: SystemExit) -> int:
    """The status Python ends a process with when `stop` reaches the top: 0 for None, the number for an int, 1 for
    anything else (Python has printed it to stderr by then)."""
    code = stop.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    return 1


@dataclass
class Ending:
    """The exit handler of one `burnqed` program run (`register`), armed with its status once the command ended."""

    status: int | None = None  # None until armed

    @classmethod
    def register(cls) -> Ending:
        ending = cls()
        atexit.register(ending.end)
        return ending

    def arm(self, stop: SystemExit) -> None:
        self.status = exit_status(stop)

    def end(self) -> None:
        """The exit handler: with a status armed, logging shut down, stdout and stderr flushed, `os._exit`; else
        nothing (Python's own end follows)."""
        if self.status is None:
            return
        status = self.status
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            if stream is None:
                continue
            try:
                stream.flush()
            except (OSError, ValueError):
                if status == 0:
                    status = FLUSH_FAILED
        os._exit(status & 0xFF)

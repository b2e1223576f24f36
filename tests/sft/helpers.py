"""Builders for the SFT tests: a prepared-data folder from the bundled corpus (`burnqed.data.pairs.corpus_pairs`);
and, for the data-parallel tests (SFT's and RL's), a `burnqed` command as a fork of the test's process
(`command_fork`, `forked_command`), the processes it starts under torchrun and the command its stop line names."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import psutil

from burnqed.data.pairs import PAIRS_FILE, TacticPair, corpus_pairs, write_pairs
from tests.processes import ForkedStage, command_lines, descendants, killed_at_end

REPO = Path(__file__).resolve().parents[2]


def write_data_folder(folder: Path, pairs: list[TacticPair] | None = None) -> Path:
    """A prepared-data folder holding just `pairs.parquet` (what `burnqed sft` reads)."""
    write_pairs(folder / PAIRS_FILE, corpus_pairs() if pairs is None else pairs)
    return folder


def launched(pid: int) -> list[psutil.Process]:
    """Every live process below the `burnqed` command `pid`, checked to hold torchrun as its child and torchrun's two
    processes as torchrun's children. A process's own child carries its command line for a moment (forked, not yet
    exec'd: a Lean worker being started), so both are counted by parent, not by command line alone."""
    below = descendants(pid)
    lines = command_lines(below)
    runs = [proc.pid for proc, parent, line in lines if parent == pid and "-m torch.distributed.run " in line]
    assert len(runs) == 1, lines
    workers = [line for _, parent, line in lines if parent == runs[0] and " -m burnqed.cli " in line]
    assert len(workers) == 2, lines
    return below


def continue_command(stderr: str, command: str, signal_name: str, output: Path, processes: int = 2) -> list[str]:
    """The arguments of the command that the stop line of a `processes`-process `burnqed COMMAND` to `output` names
    (the line checked whole: the only `error:` line of `stderr`). The tests start burnqed as `PYTHON -m burnqed.cli`,
    so the line must name that program as typed: this interpreter, `-m burnqed.cli`."""
    what = f"burnqed {command} ({processes} processes)" if processes > 1 else f"burnqed {command}"
    prefix = (f"error: {what} stopped by {signal_name}; the checkpoints under "
              f"{output}-checkpoints are kept: continue with `")
    [line] = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert line.startswith(prefix) and line.endswith("`"), line
    python, module, cli, named, *args = shlex.split(line[len(prefix):-1])
    assert (module, cli, named) == ("-m", "burnqed.cli", command) and os.path.samefile(python, sys.executable), line
    return [command, *args]


@contextmanager
def command_fork(*words: str) -> Iterator[ForkedStage]:
    """`python -m burnqed.cli WORDS` as a fork of this process (tests/processes.py `ForkedStage`: a process of its own
    in a group of its own, set up as a fresh one, its stdout and stderr on pipes of bytes), killed with its group at
    the end: for a command whose process start is not the subject (a launcher of torchrun, whose processes are real
    ones; a one-process run whose stop line is the subject), ~0.9 CPU-s of imports saved for a launcher and ~7 for a
    one-process SFT run (the fork starts with torch, transformers, peft and trl as this process has them). The fork
    is `python -m burnqed.cli` to itself (`sys.argv[0]` that module's file, `sys.orig_argv` its command line: the
    command a stop line names is the one a real process names), WORLD_SIZE unset and this tree first on PYTHONPATH
    (torchrun's processes import it)."""
    import burnqed.cli
    from burnqed.runner.requests import OtherRequest
    from tests import counting

    assert os.environ.get("OMP_NUM_THREADS") == "1", "GNU OpenMP hangs in a fork after its parent used more threads"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("WORLD_SIZE", None)
    counting.count("fork burnqed.cli")
    argv0, orig_argv = sys.argv[0], sys.orig_argv
    sys.argv[0], sys.orig_argv = str(burnqed.cli.__file__), [sys.executable, "-m", "burnqed.cli", *words]
    try:
        proc = ForkedStage.start(OtherRequest(words=words), env, capture=True)
    finally:
        sys.argv[0], sys.orig_argv = argv0, orig_argv
    with killed_at_end(proc):
        yield proc


def forked_command(*words: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`command_fork(WORDS)` run to its end (`timeout` seconds at most): its exit code, stdout and stderr (both
    pipes read while it runs, so that torchrun's processes, which print to them too, never wait on a full pipe)."""
    with command_fork(*words) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        texts: dict[int, bytes] = {}

        def drain(index: int, stream: IO[bytes]) -> None:
            texts[index] = stream.read()

        readers = [threading.Thread(target=drain, args=(i, s), daemon=True)
                   for i, s in enumerate((proc.stdout, proc.stderr))]
        for reader in readers:
            reader.start()
        code = proc.wait(timeout=timeout)
        for reader in readers:
            reader.join(timeout=60)
        out, err = (texts.get(i, b"").decode("utf-8", "replace") for i in (0, 1))
    return subprocess.CompletedProcess(["burnqed", *words], code, out, err)

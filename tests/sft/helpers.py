"""Builders for the SFT tests: a prepared-data folder from the bundled corpus (`burnqed.data.pairs.corpus_pairs`);
and, for the data-parallel stop tests (SFT's and RL's), the processes `burnqed` starts under torchrun and the command
its stop line names."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import psutil

from burnqed.data.pairs import PAIRS_FILE, TacticPair, corpus_pairs, write_pairs
from tests.processes import command_lines, descendants


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

"""An opt-in count of the processes each test file starts, its children's included:

    BURNQED_COUNT_PROCESSES=/tmp/counts.txt .venv/bin/python -m pytest -n 0 tests/test_x.py
    sort /tmp/counts.txt | uniq -c | sort -rn     # processes per test file, and per kind

Every `subprocess.Popen` and `multiprocessing` process start appends one line `FILE<TAB>KIND` to the file (KIND:
`python -m burnqed.cli`, `python run_lean_double.py`, `fork burnqed.cli` for a stage forked by tests/processes.py
`forked_stages`, ...; a line per start, so any number of workers may append). The
test process knows its test file; a child learns it from BURNQED_COUNT_TEST and counts through tests/counting/
sitecustomize.py, which PYTHONPATH puts first while counting. A child started with an environment of its own (not
os.environ's) is counted, what it starts is not. `pytest_sessionfinish` prints this worker's counts. Without the
variable nothing is installed."""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
_recorders: list[Callable[[str], None]] = []  # the installed count's, when there is one


def count(what: str) -> None:
    """Count one process started otherwise than through Popen or multiprocessing (a fork), when counting."""
    for record in _recorders:
        record(what)


def kind(args: Any) -> str:
    """A short name for what a command starts: the program's name and its module or script, if Python."""
    argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
    words = [os.fsdecode(word) for word in argv]
    if not words:
        return "?"
    name = os.path.basename(words[0])
    if name.startswith("python") and len(words) > 1:
        if words[1] == "-m" and len(words) > 2:
            return f"python -m {words[2]}"
        if words[1] != "-c":
            return f"python {os.path.basename(words[1])}"
    return name.split()[0] if isinstance(args, str) else name


def install(test: Callable[[], str]) -> None:
    """Count every process this interpreter starts, under the test file `test()` names."""
    target = os.environ["BURNQED_COUNT_PROCESSES"]
    popen_init = subprocess.Popen.__init__
    process_start = multiprocessing.process.BaseProcess.start

    def record(what: str) -> None:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(f"{test()}\t{what}\n")

    def counted_init(self: subprocess.Popen[Any], args: Any, *rest: Any, **options: Any) -> None:
        record(kind(args))
        popen_init(self, args, *rest, **options)

    def counted_start(self: multiprocessing.process.BaseProcess) -> None:
        record(f"multiprocessing {self.name}")
        process_start(self)

    _recorders.append(record)
    subprocess.Popen.__init__ = counted_init  # type: ignore[method-assign]
    multiprocessing.process.BaseProcess.start = counted_start  # type: ignore[method-assign]


def summary(path: Path) -> list[str]:
    """The counts in `path`: a line per test file, most processes first, with its kinds; then the total."""
    per_file: dict[str, dict[str, int]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            test, _, what = line.partition("\t")
            kinds = per_file.setdefault(test, {})
            kinds[what] = kinds.get(what, 0) + 1
    ordered = sorted(per_file.items(), key=lambda item: (-sum(item[1].values()), item[0]))
    lines = [f"{sum(kinds.values()):5d} {test}: " + ", ".join(f"{n} {what}" for what, n in sorted(
        kinds.items(), key=lambda item: (-item[1], item[0]))) for test, kinds in ordered]
    return [*lines, f"{sum(sum(kinds.values()) for kinds in per_file.values()):5d} in all"]

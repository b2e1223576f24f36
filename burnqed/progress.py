"""Progress for long work: a rich bar with rate and ETA on a terminal, periodic log lines otherwise
(CI logs, Argo pod logs), both on stderr so stdout stays machine-readable.

    with progress_bar("searching", total=len(theorems)) as advance:
        ...
        advance()          # one item done
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

LOG_EVERY_S = 10.0


@contextmanager
def progress_bar(label: str, total: int) -> Iterator[Callable[[int], None]]:
    """Yield `advance(n=1)`; shows `label done/total, rate/s, ETA`."""
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=Console(stderr=True)) as bar:
            task = bar.add_task(label, total=total, rate="")
            began = time.monotonic()

            def advance_bar(n: int = 1) -> None:
                bar.advance(task, n)
                elapsed = time.monotonic() - began
                bar.update(task, rate=f"{bar.tasks[0].completed / elapsed:.1f}/s" if elapsed > 0 else "")

            yield advance_bar
        return

    started = time.monotonic()
    state = {"done": 0, "last": started}

    def report(final: bool = False) -> None:
        elapsed = time.monotonic() - started
        rate = state["done"] / elapsed if elapsed > 0 else 0.0
        eta = (total - state["done"]) / rate if rate > 0 else float("inf")
        eta_text = "done" if final else (f"ETA {eta:.0f}s" if eta != float("inf") else "ETA ?")
        print(f"{label}: {state['done']}/{total} ({rate:.1f}/s, {eta_text})", file=sys.stderr, flush=True)

    def advance_log(n: int = 1) -> None:
        state["done"] += n
        now = time.monotonic()
        if now - state["last"] >= LOG_EVERY_S:
            state["last"] = now
            report()

    yield advance_log
    report(final=True)

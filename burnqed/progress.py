"""Progress for long work: a rich bar with rate and ETA on a terminal, periodic log lines otherwise
(CI logs, Argo pod logs), both on stderr so stdout stays machine-readable.

    with progress_bar("searching", total=len(theorems), status=monitor.status) as advance:
        ...
        advance()          # one item done

`status` (optional) returns one line of live detail (e.g. theorems in flight, batch sizes, Lean workers): the
bar shows it beside the count, and the log form prints it every LOG_EVERY_S seconds even when nothing
finished (a search can run minutes between theorems). It is called from a display thread, so it must only
read (a cached string is best).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

LOG_EVERY_S = 10.0


@contextmanager
def progress_bar(
    label: str, total: int, status: Callable[[], str] | None = None
) -> Iterator[Callable[[int], None]]:
    """Yield `advance(n=1)`; shows `label done/total, rate/s, ETA` (and `status()`, see the module docstring)."""
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            ProgressColumn,
            Task,
            TextColumn,
            TimeRemainingColumn,
        )
        from rich.text import Text

        class StatusColumn(ProgressColumn):
            def render(self, task: Task) -> Text:
                return Text(status() if status is not None else "")

        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(),
            *((StatusColumn(),) if status is not None else ()),
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

    lock = threading.Lock()

    def report(final: bool = False) -> None:
        elapsed = time.monotonic() - started
        rate = state["done"] / elapsed if elapsed > 0 else 0.0
        eta = (total - state["done"]) / rate if rate > 0 else float("inf")
        eta_text = "done" if final else (f"ETA {eta:.0f}s" if eta != float("inf") else "ETA ?")
        detail = f" · {status()}" if status is not None else ""
        with lock:
            print(f"{label}: {state['done']}/{total} ({rate:.1f}/s, {eta_text}){detail}", file=sys.stderr, flush=True)

    def advance_log(n: int = 1) -> None:
        state["done"] += n
        now = time.monotonic()
        if now - state["last"] >= LOG_EVERY_S:
            state["last"] = now
            report()

    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(LOG_EVERY_S / 2):
            if time.monotonic() - state["last"] >= LOG_EVERY_S:
                state["last"] = time.monotonic()
                report()

    ticker = threading.Thread(target=tick, name=f"progress {label}", daemon=True) if status is not None else None
    if ticker is not None:
        ticker.start()
    try:
        yield advance_log
    finally:
        stop.set()
        if ticker is not None:
            ticker.join()
    report(final=True)

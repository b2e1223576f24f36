"""Progress for long work: a rich bar with rate and ETA on a terminal, periodic log lines otherwise
(CI logs, Argo pod logs), both on stderr so stdout stays machine-readable.

    with progress_bar("evaluating", total=len(theorems), status=tally.line, detail=monitor.status) as advance:
        advance()          # one item done
    evaluating: 19/71 (1.9/s, ETA 27s) · solved 3/19 (15.8 %)                        # by default
    evaluating: 19/71 (1.9/s, ETA 27s) · solved 3/19 (15.8 %) · in flight 4/4 · …     # -v

`status` is one line of what the work has found so far, always shown; `detail` one line of the machinery, shown
when `verbose()` (`burnqed … -v`, or `BURNQED_LOG_LEVEL=INFO`). The log form prints them every LOG_EVERY_S seconds
even when nothing finished. Both are called from a display thread, so they must only read (a cached string is best).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

LOG_EVERY_S = 10.0


def verbose() -> bool:
    """Whether progress shows the machinery: burnqed's INFO log lines are enabled (`-v`, or BURNQED_LOG_LEVEL=INFO
    or DEBUG: `burnqed.commands.kit.configure`)."""
    return logging.getLogger("burnqed").isEnabledFor(logging.INFO)


def _joined(*lines: Callable[[], str] | None) -> Callable[[], str] | None:
    """One callable giving the non-empty lines joined by ` · `; None when there is none to call."""
    present = [line for line in lines if line is not None]
    if not present:
        return None
    return lambda: " · ".join(text for text in (line() for line in present) if text)


@contextmanager
def progress_bar(
    label: str,
    total: int,
    status: Callable[[], str] | None = None,
    detail: Callable[[], str] | None = None,
    *,
    show_detail: bool | None = None,
) -> Iterator[Callable[[int], None]]:
    """Yield `advance(n=1)`; shows `label done/total, rate/s, ETA`, then `status()` and, when `show_detail` (default:
    `verbose()`), `detail()` (see the module docstring)."""
    line = _joined(status, detail if (verbose() if show_detail is None else show_detail) else None)
    shown = _rich_bar(label, total, line) if sys.stderr.isatty() else _log_lines(label, total, line)
    with shown as advance:
        yield advance


@contextmanager
def _rich_bar(label: str, total: int, status: Callable[[], str] | None) -> Iterator[Callable[[int], None]]:
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


@contextmanager
def _log_lines(label: str, total: int, status: Callable[[], str] | None) -> Iterator[Callable[[int], None]]:
    started = time.monotonic()
    state = {"done": 0, "last": started}

    lock = threading.Lock()

    def report(final: bool = False) -> None:
        elapsed = time.monotonic() - started
        rate = state["done"] / elapsed if elapsed > 0 else 0.0
        eta = (total - state["done"]) / rate if rate > 0 else float("inf")
        eta_text = "done" if final else (f"ETA {eta:.0f}s" if eta != float("inf") else "ETA ?")
        live = status() if status is not None else ""
        detail = f" · {live}" if live else ""
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

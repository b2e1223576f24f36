"""Python's cyclic garbage collector in a burnqed process, which holds torch, transformers and, when it trains, TRL
and peft: about a million objects once they are imported.

    tune_collector()        # burnqed.cli.start_process, before any heavy import
    with frozen_heap():     # around a trainer's loop: what lives now is left out of every collection
        trainer.train()

CPython collects its youngest generation every 700 net allocations of container objects, and the whole heap each
time enough objects have survived into the oldest generation. Importing that stack crosses the second rule several
times, each a pass over everything loaded so far. `tune_collector` collects the youngest generation every `YOUNG`
allocations instead, so the same imports make fewer passes, and none over the whole heap (`benchmarks/collector.py`
measures both). Garbage held in cycles waits longer to be freed: at most `YOUNG` container objects' worth more.

transformers calls `gc.collect()` itself (its Trainer at the end of training, its continuous batching twice an RL
step), each a pass over the whole process; inside `frozen_heap` such a pass reads only what the block has made.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG = 10_000  # allocations between two collections of the youngest generation (CPython's default: 700)


def tune_collector() -> None:
    """Collect the youngest generation every `YOUNG` allocations, the older generations' thresholds kept; a no-op
    where the collector is off or already collects less often."""
    young, middle, old = gc.get_threshold()
    if gc.isenabled() and 0 < young < YOUNG:
        gc.set_threshold(YOUNG, middle, old)


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Leave every object alive at entry out of the cyclic collector while the block runs (`gc.freeze`), and give
    every frozen object back to it at exit (`gc.unfreeze`: those a caller froze before the block too)."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()

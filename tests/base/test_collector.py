"""burnqed/base/collector.py: the cyclic collector's young threshold raised in every burnqed process, and a heap
frozen out of the collector around a trainer's loop (benchmarks/collector.py measures what each saves)."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator

import pytest

from burnqed.base.collector import YOUNG, frozen_heap, tune_collector


@pytest.fixture
def thresholds() -> Iterator[None]:
    """The collector's thresholds and state as the test found them, restored after it."""
    kept, enabled = gc.get_threshold(), gc.isenabled()
    yield
    gc.set_threshold(*kept)
    if enabled:
        gc.enable()


@pytest.mark.usefixtures("thresholds")
def test_the_young_threshold_rises_to_young_and_never_falls() -> None:
    gc.set_threshold(700, 7, 9)
    tune_collector()
    assert gc.get_threshold() == (YOUNG, 7, 9)
    gc.set_threshold(5 * YOUNG, 7, 9)  # a process that collects less often already
    tune_collector()
    assert gc.get_threshold() == (5 * YOUNG, 7, 9)
    gc.set_threshold(1, 7, 9)  # the most often there is
    tune_collector()
    assert gc.get_threshold() == (YOUNG, 7, 9)
    gc.set_threshold(0, 7, 9)  # a threshold of 0: automatic collection off, left so
    tune_collector()
    assert gc.get_threshold() == (0, 7, 9)
    gc.set_threshold(700, 7, 9)
    gc.disable()  # the collector off: left as it is
    tune_collector()
    assert gc.get_threshold() == (700, 7, 9) and not gc.isenabled()


def test_a_burnqed_process_starts_with_the_young_threshold_raised() -> None:
    probe = "import gc; from burnqed.cli import start_process; start_process(); print(gc.get_threshold()[0])"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == [str(YOUNG)]


def test_the_frozen_heap_holds_what_lived_at_entry_and_gives_it_back_after_a_failure() -> None:
    gc.unfreeze()
    alive: list[list[int]] = [[]]  # a container alive at entry
    with pytest.raises(RuntimeError), frozen_heap():
        assert gc.get_freeze_count() > 0 and not any(o is alive for g in (0, 1, 2) for o in gc.get_objects(g))
        raise RuntimeError("the block fails")
    assert gc.get_freeze_count() == 0
    assert any(o is alive for o in gc.get_objects())

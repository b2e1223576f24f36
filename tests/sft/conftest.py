"""One torch thread for the SFT tests (as `sft.cpu_threads` does for training): the tiny model's matrices are too
small to split, and on a busy 2-core machine a second thread makes every forward several times slower."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from burnqed.base.cpu_kernels import cpu_threads


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    with cpu_threads("cpu", 1):
        yield

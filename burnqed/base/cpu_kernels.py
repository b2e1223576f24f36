"""The same seed, the same figures on another x86-64 machine: pinned CPU kernels and training threads.

    pin_cpu_kernels()                                   # burnqed.cli.main, before torch runs anything
    with cpu_threads(device, cfg.ebm.cpu_threads):      # training on the CPU on a fixed number of torch threads
        ...

On an x86-64 Linux processor with AVX2 and FMA, and only where the environment does not set them, `pin_cpu_kernels`
sets `ATEN_CPU_CAPABILITY=avx2` and `ONEDNN_MAX_CPU_ISA=AVX2`: torch's kernels then add in the order the README's
figures were measured with. Setting ATEN_CPU_CAPABILITY yourself pins nothing. Why, what it covers and what it
does not (MKL, ARM, macOS): docs/search.md, "Reproducible on another machine".
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path

PINNED: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
}
_CPUINFO = Path("/proc/cpuinfo")


def cpu_flags(cpuinfo: str) -> set[str]:
    """The feature flags of the first processor in a /proc/cpuinfo text (empty when it has none)."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            return set(value.split())
    return set()


def has_avx2(machine: str | None = None, cpuinfo: str | None = None) -> bool:
    """Whether this processor runs ATen's AVX2 kernels: x86-64 with the avx2 and fma flags (Linux only: elsewhere
    the flags are not read and the answer is False)."""
    machine = platform.machine() if machine is None else machine
    if machine.lower() not in {"x86_64", "amd64"}:
        return False
    if cpuinfo is None:
        try:
            cpuinfo = _CPUINFO.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
    return {"avx2", "fma"} <= cpu_flags(cpuinfo)


def pin_cpu_kernels(environ: MutableMapping[str, str] | None = None, *, avx2: bool | None = None) -> dict[str, str]:
    """Set `PINNED` in `environ` (default `os.environ`) where it is unset, when the processor has AVX2 (`has_avx2`
    unless `avx2` says); returns what it set. A no-op when the user set ATEN_CPU_CAPABILITY: they chose kernels."""
    env = os.environ if environ is None else environ
    if "ATEN_CPU_CAPABILITY" in env or not (has_avx2() if avx2 is None else avx2):
        return {}
    added = {key: value for key, value in PINNED.items() if key not in env}
    env.update(added)
    return added


@contextmanager
def cpu_threads(device: str, threads: int | None) -> Iterator[None]:
    """torch's intra-op threads set to `threads` while the block runs on the CPU (`device` "cpu"); restored after.
    No-op on a GPU device or with `threads` None."""
    import torch

    before = torch.get_num_threads()
    if device == "cpu" and threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)

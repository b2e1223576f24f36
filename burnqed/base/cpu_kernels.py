"""The same seed, the same figures on another x86-64 machine: pinned CPU kernels and training threads.

torch chooses its CPU kernels by the processor it runs on: ATen's vectorised kernels take the widest instruction
set they find (AVX-512 where there is one, else AVX2), and oneDNN likewise. Kernels that add in another order
differ in the last bits, and training amplifies that: on one AMD EPYC with AVX-512 the tiny base model (`burnqed
model init-tiny`, one thread, 400 steps) ends at loss 0.2271 with ATen's AVX-512 kernels and at 0.2384 with its
AVX2 ones, and iteration 0 of `benchmarks/learning.py` seed 0 then solves 45 against 43 of 71 test theorems at
budget 100. The README's figures had been measured on a machine whose torch ran ATen's AVX2 kernels; with them
that EPYC reproduced the figures (measured 2026-11-25, `benchmarks/learning.py`, seeds 0, 1 and 2, every check).

`pin_cpu_kernels` (called by `burnqed.cli.main` before torch runs anything, so every `burnqed` command and every
stage child of `iterate` has it) sets, on an x86-64 Linux processor with AVX2 and FMA and only where the
environment does not set them already, `ATEN_CPU_CAPABILITY=avx2` (read at ATen's first operation) and
`ONEDNN_MAX_CPU_ISA=AVX2` (oneDNN's widest instruction set; it changed nothing measured here). Setting
ATEN_CPU_CAPABILITY yourself keeps yours and pins nothing (`ATEN_CPU_CAPABILITY=avx512` gives the native kernels
back). The cost on the embedded run was nil (iteration 0 of seed 0: 128 s pinned, 129 s native, same machine).
GPU kernels are not affected. Elsewhere (ARM, macOS, a processor without AVX2) nothing is set and the figures
may differ from the README's.

MKL (torch's BLAS on x86) is left alone: its reproducibility switch `MKL_CBWR=AVX2` selects its AVX2 branch on
Intel processors only and its AUTO branch elsewhere (oneMKL developer guide, "Getting Started with Conditional
Numerical Reproducibility"), and on the EPYC that changed the value model's head against MKL's default, with
which the README's figures were measured. So an Intel processor with AVX-512, where MKL may take its AVX-512
path, is not covered; we had none to measure.

The thread count matters too: the value model's embeddings and head differed between 1 and 4 torch threads
(same machine, same kernels), while the policy's sampling did not. So training on the CPU runs on a fixed number
of threads (`sft.cpu_threads`, `ebm.cpu_threads`, 1 by default) through `cpu_threads`, whatever the machine's
core count or `OMP_NUM_THREADS`.
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

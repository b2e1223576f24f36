"""Pinned CPU kernels and training threads (base.cpu_kernels): what is set, when, and that the commands use it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
import torch

from burnqed.base.cpu_kernels import PINNED, cpu_flags, cpu_threads, has_avx2, pin_cpu_kernels
from burnqed.errors import InputError
from tests.processes import cli

T = TypeVar("T")

ROOT = Path(__file__).parents[2]
CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu sse2 avx avx2 fma avx512f
bugs\t\t: sysret_ss_attrs

processor\t: 1
flags\t\t: fpu sse2
"""


def test_the_first_processors_flags_are_read() -> None:
    assert cpu_flags(CPUINFO) == {"fpu", "sse2", "avx", "avx2", "fma", "avx512f"}
    assert cpu_flags("processor\t: 0\n") == set()


def test_avx2_needs_x86_64_with_avx2_and_fma() -> None:
    assert has_avx2("x86_64", CPUINFO)
    assert has_avx2("AMD64", CPUINFO)
    assert not has_avx2("x86_64", CPUINFO.replace(" fma", ""))
    assert not has_avx2("x86_64", CPUINFO.replace(" avx2", ""))
    assert not has_avx2("aarch64", CPUINFO)
    assert not has_avx2("arm64", "")


def test_pinning_sets_what_is_unset_and_never_overrides_the_user() -> None:
    env: dict[str, str] = {"PATH": "/bin"}
    assert pin_cpu_kernels(env, avx2=True) == PINNED
    assert env == {"PATH": "/bin", **PINNED}
    assert pin_cpu_kernels(env, avx2=True) == {}  # idempotent

    mine = {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}
    assert pin_cpu_kernels(mine, avx2=True) == {"ATEN_CPU_CAPABILITY": "avx2"}
    assert mine["ONEDNN_MAX_CPU_ISA"] == "AVX512_CORE"
    assert "MKL_CBWR" not in env  # MKL is left alone (burnqed.base.cpu_kernels)

    chose = {"ATEN_CPU_CAPABILITY": "avx512"}  # the user chose kernels: nothing else is pinned either
    assert pin_cpu_kernels(chose, avx2=True) == {}
    assert chose == {"ATEN_CPU_CAPABILITY": "avx512"}

    other: dict[str, str] = {}
    assert pin_cpu_kernels(other, avx2=False) == {}  # ARM, no AVX2: the native kernels
    assert other == {}


def test_the_command_pins_before_torch_runs_and_its_children_inherit_it() -> None:
    """`burnqed` (the console script's `main`) on a machine with AVX2: the variables are set in its environment
    (so every stage child of `iterate` has them) and torch, imported after, runs ATen's AVX2 kernels."""
    code = (
        "import os, sys\n"
        "from burnqed import cli\nfrom burnqed.base import cpu_kernels\n"
        "cpu_kernels.has_avx2 = lambda *a, **k: True\n"
        "sys.argv = ['burnqed', '--version']\n"
        "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
        "import torch\n"
        "torch.ones(3).sum()\n"
        "print(os.environ['ATEN_CPU_CAPABILITY'], os.environ['ONEDNN_MAX_CPU_ISA'],"
        " torch.backends.cpu.get_cpu_capability())\n"
    )
    env = {key: value for key, value in os.environ.items() if key not in PINNED}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()[-3:]  # after `burnqed 0.1.0`
    assert out[:2] == ["avx2", "AVX2"]
    if has_avx2():  # elsewhere torch ignores the value or lacks the x86 kernels
        assert out[2] == "AVX2"


def test_cpu_threads_sets_and_restores_on_the_cpu_only() -> None:
    before = torch.get_num_threads()
    with cpu_threads("cpu", 1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with cpu_threads("cuda", 1):
        assert torch.get_num_threads() == before
    with cpu_threads("cpu", None):
        assert torch.get_num_threads() == before


def _threads_at_load_dataset(monkeypatch: pytest.MonkeyPatch, module: object,
                             run: Callable[[], T]) -> tuple[list[int], T]:
    """The torch threads `module.load_dataset` (the first step of a stage) ran on when `run()` started from 3
    threads, and what `run()` returned; the stage stops there (an `InputError`), and the caller's 3 threads must be
    back afterwards."""
    seen: list[int] = []

    def record(*args: object, **kwargs: object) -> None:
        seen.append(torch.get_num_threads())
        raise InputError("recorded")

    monkeypatch.setattr(module, "load_dataset", record)
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        result = run()
        assert torch.get_num_threads() == 3  # restored
    finally:
        torch.set_num_threads(before)
    return seen, result


@pytest.mark.parametrize(("sets", "expected"), [([], 1), (["--set", "ebm.cpu_threads=2"], 2)])
def test_train_ebm_embeds_and_trains_on_ebm_cpu_threads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                         sets: list[str], expected: int) -> None:
    """The value model's embeddings and head differ with the thread count, so train-ebm runs on a fixed one (from
    reading the trajectories on, which is where the stage starts)."""
    import burnqed.stages.train_ebm

    seen, result = _threads_at_load_dataset(monkeypatch, burnqed.stages.train_ebm, lambda: cli(
        "train-ebm", "--trajectories", str(tmp_path / "t"), "--output", str(tmp_path / "ebm"),
        "--set", "ebm.device=cpu", *sets))
    assert (result.returncode, result.stderr) == (2, "error: recorded\n")
    assert seen == [expected]


def test_train_ebm_gives_its_callers_threads_back(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The stage `train-ebm` runs, called in process: the caller's thread count is back afterwards (read here, not
    through tests/processes.py's `cli`, which puts it back itself whatever the command did)."""
    from burnqed.config import load_config
    from burnqed.stages import train_ebm
    from burnqed.storage import Store

    cfg = load_config(sets=["ebm.device=cpu", "ebm.cpu_threads=2"])
    request = train_ebm.TrainRequest(output=str(tmp_path / "ebm"), trajectories=[str(tmp_path / "t")])

    def run() -> None:
        with pytest.raises(InputError, match="recorded"):
            train_ebm.run_train_ebm(cfg, request, store=Store.from_config(cfg.storage),
                                    open_encoder=None, device="cpu")  # type: ignore[arg-type]

    assert _threads_at_load_dataset(monkeypatch, train_ebm, run)[0] == [2]


def test_the_joint_study_embeds_on_ebm_cpu_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The joint study's metrics come from the same embeddings train-ebm makes, so it embeds on the same threads."""
    import asyncio

    import burnqed.ebm.sampling
    from burnqed.config import load_config
    from burnqed.eval.joint_study import measure_study
    from burnqed.storage import Store

    cfg = load_config(sets=["ebm.device=cpu", "ebm.cpu_threads=2"])

    def run() -> None:
        with pytest.raises(InputError, match="recorded"):
            asyncio.run(measure_study(cfg, iteration=1, trajectories=["t"], configurations={}, cache="c",
                                      store=Store.from_config(cfg.storage), echo=print,
                                      open_encoder=None))  # type: ignore[arg-type]

    assert _threads_at_load_dataset(monkeypatch, burnqed.ebm.sampling, run)[0] == [2]

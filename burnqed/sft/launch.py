"""Data-parallel `burnqed sft` (`sft.processes` > 1): the command runs itself under torchrun, and each process finds
its place among the others (docs/training.md, "Data-parallel training").

    if needs_launch(cfg.sft.processes):
        raise typer.Exit(launch(cfg.sft.processes, ["sft", "--data", ..., "--output", ...]))
    world = World.from_env()                     # inside a launched process: rank, size, local rank
    with process_group(world, "cpu"):            # gloo on CPU, NCCL on CUDA; nothing for one process
        ...

Every process runs the same command line; process 0 prints the summary and publishes. torch is imported inside the
functions that need it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from burnqed.errors import ConfigError

if TYPE_CHECKING:
    from burnqed.config import SftConfig

LAUNCHED = "WORLD_SIZE"  # torchrun's environment: set in the processes it starts


def needs_launch(processes: int) -> bool:
    """True when `processes` > 1 and this process is not one torchrun started."""
    return processes > 1 and LAUNCHED not in os.environ


def launch_argv(processes: int, args: Sequence[str]) -> list[str]:
    """The torchrun command line running `burnqed ARGS` in `processes` processes on this machine."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}",
            "-m", "burnqed.cli", *args]


def launch(processes: int, args: Sequence[str]) -> int:
    """Run `burnqed ARGS` under torchrun; its exit code (the first failing process's, as torchrun reports)."""
    return subprocess.run(launch_argv(processes, args), check=False).returncode


def is_main_process() -> bool:
    """Process 0 of a data-parallel run, or the only process."""
    return int(os.environ.get("RANK", "0")) == 0


@dataclass(frozen=True, slots=True)
class World:
    """This process's place among the data-parallel processes (torchrun's environment)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_env(cls) -> World:
        size = int(os.environ.get("WORLD_SIZE", "1"))
        return cls(int(os.environ.get("RANK", "0")), size, int(os.environ.get("LOCAL_RANK", "0")))


@contextmanager
def process_group(world: World, device: str) -> Iterator[None]:
    """torch.distributed for `world` (gloo on CPU, NCCL on CUDA); nothing for one process."""
    if world.size == 1:
        yield
        return
    import torch.distributed as dist

    dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    try:
        yield
    finally:
        dist.destroy_process_group()


def barrier(world: World) -> None:
    """Wait for every process (nothing for one process)."""
    if world.size > 1:
        import torch.distributed as dist

        dist.barrier()


def all_sum(values: list[float], world: World, device: str) -> list[float]:
    """`values` summed over the processes (float64; the values themselves for one process)."""
    if world.size == 1:
        return values
    import torch
    import torch.distributed as dist

    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    return [float(v) for v in tensor.tolist()]


def check_processes(cfg: SftConfig, world: int) -> None:
    """The global batch must split evenly over the processes (ConfigError naming the keys otherwise)."""
    if cfg.batch_size % world or (cfg.joint and cfg.joint_groups % world):
        raise ConfigError(
            f"sft.batch_size={cfg.batch_size}" + (f" and sft.joint_groups={cfg.joint_groups}" if cfg.joint else "")
            + f" must divide by the {world} data-parallel processes (sft.processes): the global batch stays the "
            "same for every process count"
        )

"""Data-parallel launch of `burnqed sft` (`sft.processes` > 1): the command runs itself under torchrun.

    if needs_launch(cfg.sft.processes):
        raise typer.Exit(launch(cfg.sft.processes, ["sft", "--data", ..., "--output", ...]))

torchrun (`python -m torch.distributed.run --standalone --nproc_per_node N`) starts N processes on this machine
(one per GPU: each takes `cuda:LOCAL_RANK`; on CPU they share the cores and talk over gloo). Every process runs
the same command line; process 0 prints the summary and publishes. Within a process, `WORLD_SIZE` tells the
trainers how to split the global batch (`burnqed.sft.joint.World`). Beyond one node see docs/training.md
("Data parallel training").
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

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

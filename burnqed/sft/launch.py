"""Data-parallel `burnqed sft` (`sft.processes` > 1): the command runs itself under torchrun, and each process finds
its place among the others (docs/training.md, "Data-parallel training").

    if needs_launch(cfg.sft.processes):
        raise typer.Exit(launch(cfg.sft.processes, ["sft", "--data", ..., "--output", ...]))
    world = World.from_env()                     # inside a launched process: rank, size, local rank
    with process_group(world, "cpu"):            # gloo on CPU, NCCL on CUDA; nothing for one process
        ...

Every process runs the same command line; process 0 prints the summary and publishes. torch is imported inside the
functions that need it. A stop of the command (Ctrl-C, SIGTERM) stops torchrun and its processes before the command
exits, and they die with it when it is killed outright (`launch`, `follow_launcher`; docs/training.md).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import psutil

from burnqed.errors import ConfigError

if TYPE_CHECKING:
    from burnqed.config import SftConfig

LAUNCHED = "WORLD_SIZE"  # torchrun's environment: set in the processes it starts
LAUNCHER_ENV = "BURNQED_LAUNCHER"  # the pid of the `burnqed` command that started torchrun, in its processes
LOGS_PREFIX = "burnqed-torchrun-"  # torchrun's folders, in the temporary directory while it runs


def needs_launch(processes: int) -> bool:
    """True when `processes` > 1 and this process is not one torchrun started."""
    return processes > 1 and LAUNCHED not in os.environ


def launch_argv(processes: int, args: Sequence[str], log_dir: str) -> list[str]:
    """The torchrun command line running `burnqed ARGS` in `processes` processes on this machine, its folder per
    process (`--log-dir`: empty unless asked to redirect output, which this line does not) under `log_dir`."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}",
            f"--log-dir={log_dir}", "-m", "burnqed.cli", *args]


def launch(processes: int, args: Sequence[str]) -> int:
    """Run `burnqed ARGS` under torchrun; its exit code (the first failing process's, as torchrun reports).

    torchrun runs in a process group of its own and starts each process in a session of its own, out of reach of a
    signal to the command's group. So a stop of this command (SIGINT, SIGTERM: `base.signals.stop_on_signals`) is
    passed on here (`stop_torchrun`: SIGTERM, which torchrun sends on to its processes, a grace, then SIGKILL to all
    of them), then one `StoppedError` line names the command that continues from the newest checkpoint. If this
    command is killed outright, Linux sends torchrun SIGKILL (`dies_with_parent`) and its processes follow it
    (`follow_launcher`).

    torchrun's folders go in a temporary directory of the launch's, removed once torchrun is gone: without
    `--log-dir` torchrun makes one of its own (`torchelastic_*`) that nothing removes."""
    from burnqed.base.signals import dies_with_parent

    output = args[list(args).index("--output") + 1] if "--output" in args else None
    env = {**os.environ, LAUNCHER_ENV: str(os.getpid())}
    with stops_with_continue(args[0], output, processes), tempfile.TemporaryDirectory(prefix=LOGS_PREFIX) as logs:
        # preexec_fn runs prctl alone in the child and takes no lock (what makes one unsafe beside threads)
        proc = subprocess.Popen(launch_argv(processes, args, logs), env=env, process_group=0,
                                preexec_fn=dies_with_parent())  # noqa: PLW1509
        try:
            return proc.wait()
        except BaseException:
            stop_torchrun(proc)
            raise


def stops_with_continue(command: str, output: str | None,
                        processes: int = 1) -> contextlib.AbstractContextManager[object]:
    """The stop of `burnqed COMMAND` to `output` (sft, rl) in `processes` processes, one or the torchrun launcher:
    one `StoppedError` line naming the checkpoints kept and the command that continues from the newest of them
    (this process's command line without --force: `base.signals.stop_on_signals`, `same_command`). Inside a process
    torchrun started it does nothing: the launcher prints the one line."""
    from burnqed.base.signals import same_command, stop_on_signals

    if LAUNCHED in os.environ:
        return contextlib.nullcontext()
    what = f"burnqed {command}" + (f" ({processes} processes)" if processes > 1 else "")
    kept = f"the checkpoints under {output}-checkpoints are kept" if output else "the checkpoints are kept"
    return stop_on_signals(what, kept=kept, continue_with=same_command(drop=("--force",)))


def stop_torchrun(proc: subprocess.Popen[bytes]) -> None:
    """Stop torchrun (`proc`, a group of its own) and every process below it: SIGTERM to torchrun, which sends it on
    to its processes, up to `STOP_GRACE_S` for them to exit, then SIGKILL to torchrun and to whatever is left below
    it (`base.signals.stop_process_group`); returns once all of them are gone (reaped or dead). torchrun is not
    waited for once its processes are gone: its own teardown after a signal takes seconds (measured: 4 s with two
    idle gloo processes, torch 2.13)."""
    from burnqed.base.signals import STOP_GRACE_S, stop_process_group

    try:
        workers = psutil.Process(proc.pid).children()
        below = psutil.Process(proc.pid).children(recursive=True)  # the processes and their Lean workers
        proc.send_signal(signal.SIGTERM)
    except (psutil.Error, ProcessLookupError):
        workers = below = []
    deadline = time.monotonic() + STOP_GRACE_S
    while proc.poll() is None and time.monotonic() < deadline and any(_running(w) for w in workers):
        time.sleep(0.05)
    stop_process_group(proc, grace_s=0)
    for process in below:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(below, timeout=STOP_GRACE_S)


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def follow_launcher() -> None:
    """In a process torchrun started for `launch` (LAUNCHER_ENV in its environment; Linux): ask for SIGKILL when
    torchrun dies (prctl PR_SET_PDEATHSIG), which Linux sends torchrun when the command dies, so no process trains on
    after a kill -9 of the command; if torchrun or the command is gone already, SIGKILL now. A stop of this process
    exits 128 + N without a line (`base.signals.supervised`): the command says what stopped, once. Nothing elsewhere
    (a torchrun a user started, another system)."""
    launcher = os.environ.pop(LAUNCHER_ENV, "")
    if not launcher.isdigit() or not sys.platform.startswith("linux"):
        return
    import ctypes

    from burnqed.base.signals import SUPERVISED_ENV, follow_parent

    torchrun = os.getppid()
    follow_parent({SUPERVISED_ENV: str(torchrun)})  # quiet stops; its SIGTERM on torchrun's death is made SIGKILL:
    # no one is left to escalate, and a process waiting in a collective would not take SIGTERM
    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    try:
        alive = os.getppid() == torchrun and psutil.Process(torchrun).ppid() == int(launcher)
    except psutil.Error:
        alive = False
    if not alive:  # torchrun or the command died before the request: nobody would send the signal
        os.kill(os.getpid(), signal.SIGKILL)


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
    """torch.distributed for `world` (gloo on CPU, NCCL on CUDA), in a process that dies with the command that launched
    it (`follow_launcher`); nothing for one process."""
    if world.size == 1:
        yield
        return
    follow_launcher()  # before the rendezvous, whose store torchrun holds
    import torch.distributed as dist

    dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    try:
        yield
    except KeyboardInterrupt as stop:  # SIGINT, or SIGTERM (`base.signals.Terminated`): torchrun passed a stop on
        # The work is unwound (the Lean pool closed, nothing half-published), but the other processes stopped in the
        # middle of collectives, and the interpreter's exit then hangs in torch's teardown (measured on gloo: both
        # processes still there when SIGKILLed 6 s later). So the process ends here, as the stop says.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(128 + getattr(stop, "signum", signal.SIGINT))
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

"""Running `burnqed` as a user does, in tests: `cli` runs a command to completion, in this process by default (what
the command decides) or in a process of its own (`process=True`: what the process does); `background` starts one to
be signalled or killed, `forked` one to be killed outright without a process start's imports; and the Lean workers a
command started, to check that none outlives it.

    done = cli("eval", "--budgets", "0")                  # exit code, stdout, stderr, as a process gives them
    done = cli("search", ..., process=True)               # python -m burnqed.cli, where the process is the subject
    with background("search", ...) as proc: ...           # killed with its session at the end
    with forked("rl", ...) as proc: ...                    # a fork of this process, killed with its group at the end
    with forked_stages(): cli("iterate", ...)              # iterate in process, each stage a fork calling its command
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any, NoReturn

import psutil

if TYPE_CHECKING:
    from burnqed.runner.requests import StageRequest

BURNQED = [sys.executable, "-m", "burnqed.cli"]
# How a command that `BURNQED` (or a Popen of it) started names itself in the commands it prints: the interpreter as
# it was given, then `-m burnqed.cli` (burnqed/base/signals.py `program_name`), e.g. `.venv/bin/python -m burnqed.cli`.
PRINTED_PROGRAM = r"\S+ -m burnqed\.cli"


def printed_arguments(command: str) -> list[str]:
    """The arguments of a command a `BURNQED` process printed for the user to run (`PRINTED_PROGRAM ARGS`), after
    checking that its program is this interpreter run as the user started it (a path that names it from the
    working folder): what `cli(*ARGS)` runs in this process."""
    import shlex
    from pathlib import Path

    words = shlex.split(command)
    assert words[1:3] == ["-m", "burnqed.cli"], command
    assert Path(words[0]).resolve() == Path(sys.executable).resolve(), command
    return words[3:]


def stage_commands(stderr: str) -> list[list[str]]:
    """The stage commands `iterate` printed (`  $ [BURNQED_SECTION__KEY=VALUE …] burnqed ARGS`, as a shell reads it
    back): each one's ARGS, the settings it is handed through the environment and the program left out."""
    commands: list[list[str]] = []
    for line in stderr.splitlines():
        if line.startswith("  $ "):
            words = shlex.split(line[4:])
            program = next(k for k, word in enumerate(words) if not word.startswith("BURNQED_"))
            assert words[program] == "burnqed", line
            commands.append(words[program + 1:])
    return commands


def request_of(argv: Sequence[str]) -> StageRequest:
    """The request (`burnqed.runner.requests`) a `burnqed ARGV` command line asks for, as the app's own command reads
    it: its options parsed by the typer app's click command (`make_context`, in the context of the groups above it,
    as the app parses it: a command's help option, which click keeps once made, is made from its root's -h and --help),
    each request field from the parameter of its name (`sets` from `set_`). What a stage's rendered argv, or a `  $`
    line a runner printed, asks for."""
    import dataclasses

    from burnqed.runner import requests

    words = list(argv)
    command: Any = _command()
    context = command.make_context("burnqed", [], resilient_parsing=True)
    path: list[str] = []
    while hasattr(command, "commands") and words and words[0] in command.commands:
        path.append(words.pop(0))
        command = command.commands[path[-1]]
        if hasattr(command, "commands"):
            context = command.make_context(path[-1], [], parent=context, resilient_parsing=True)
    kinds = {kind.command: kind for kind in vars(requests).values() if isinstance(kind, type)
             and issubclass(kind, requests.StageRequest) and kind.command}
    kind = kinds[tuple(path)]
    params = command.make_context(path[-1], words, parent=context).params
    fields: dict[str, Any] = {}
    for field in dataclasses.fields(kind):
        value = params["set_" if field.name == "sets" else field.name]
        fields[field.name] = tuple(value or ()) if str(field.type).startswith("tuple") else value
    return kind(**fields)


def cli(*args: str, env: Mapping[str, str | None] | None = None, cwd: str | os.PathLike[str] | None = None,
        process: bool = False, timeout: float = 300,
        terminal_width: int | None = None) -> subprocess.CompletedProcess[str]:
    """`burnqed ARGS` as a user runs it, with the exit code, stdout and stderr a process gives; `env` is laid over
    os.environ (None: the variable unset), `cwd` the working folder.

    By default the command line app runs in this process (typer's CliRunner): for what the commands decide (their
    results, reuse, refusals, one-line errors), without a process start and its imports each time. As in a fresh
    process, the command's logging goes to its own stderr (the root logger's handlers, pytest's among them, are set
    aside meanwhile) and so do the warnings a process shows (Python's default filters); the working folder, the
    environment, the signal handlers and torch's thread count are the test's again afterwards. A bug raises with
    its traceback. `process=True` runs `python -m burnqed.cli` instead (`timeout` seconds at most): for what the
    process itself does (its entry point, signals, stdio at the file level, what it leaves behind) and for commands
    whose children print (`iterate`'s stages write to the inherited stdout, which CliRunner does not capture).
    `terminal_width` is the width help text is laid out for in this process (typer's runner's setting of the same
    name); a process reads `COLUMNS` from `env`."""
    if process:
        assert terminal_width is None, "a process lays its help out for COLUMNS: pass it in env"
        merged = {**os.environ, **(env or {})}
        return subprocess.run([*BURNQED, *args], capture_output=True, text=True, timeout=timeout, check=False,
                              cwd=cwd, env={key: value for key, value in merged.items() if value is not None})
    with _test_state_kept(), _working_folder(cwd):
        return _invoke(list(args), env, terminal_width)


def burnqed(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`burnqed ARGS` in a process of its own (`cli(..., process=True)`)."""
    return cli(*args, env=env, process=True, timeout=timeout)


def burnqed_in_process(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`burnqed ARGS` in this process (`cli`)."""
    return cli(*args, env=env)


def _invoke(args: list[str], env: Mapping[str, str | None] | None,
            terminal_width: int | None) -> subprocess.CompletedProcess[str]:
    import logging
    import warnings

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: object = None,
             line: str | None = None) -> None:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers.clear()
    argv = sys.argv[:]
    sys.argv[:] = ["burnqed", *args]  # what a resume hint quotes
    _forget_filesystems()  # a process starts with none: each reads the environment it is given
    try:
        with warnings.catch_warnings():
            _process_warning_filters()
            warnings.showwarning = show
            code, exception, stdout, stderr = _run_command(args, env, terminal_width)
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)
        sys.argv[:] = argv
        _forget_filesystems()
    if exception is not None:
        raise exception  # a bug keeps its traceback, as in the process
    return subprocess.CompletedProcess(["burnqed", *args], code, stdout, stderr)


@functools.cache
def _command() -> Any:
    """The app's click command, built once per process (typer.main.get_command, ~0.1 CPU-s a build): typer's
    `CliRunner.invoke` builds it again at every call."""
    import typer.main

    from burnqed.cli import app

    return typer.main.get_command(app)


def _run_command(args: list[str], env: Mapping[str, str | None] | None,
                 terminal_width: int | None) -> tuple[int, BaseException | None, str, str]:
    """What typer's `CliRunner().invoke(app, args, env=env, prog_name="burnqed", terminal_width=terminal_width)`
    does, on the cached command, inside the runner's public `isolation` (stdin, stdout, stderr and the environment
    swapped): the exit code, a bug's exception (None for an exit), stdout and stderr."""
    from typer.testing import CliRunner

    code, exception = 0, None
    with CliRunner().isolation(env=dict(env or {})) as (out, err, _):
        try:
            _command().main(args=args, prog_name="burnqed",
                            **({} if terminal_width is None else {"terminal_width": terminal_width}))
        except SystemExit as stop:
            if stop.code is None or isinstance(stop.code, int):
                code = stop.code or 0
            else:  # sys.exit("text"): the text on stdout and 1, as typer's runner gives it
                sys.stdout.write(f"{stop.code}\n")
                code = 1
        except Exception as error:
            code, exception = 1, error
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            stdout, stderr = out.getvalue(), err.getvalue()
    return code, exception, _text(stdout), _text(stderr)


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace").replace("\r\n", "\n")


def _process_warning_filters() -> None:
    """The warning filters a fresh Python process starts with (its defaults: DeprecationWarning shown in __main__
    only, the others of these categories ignored), in place of the test's."""
    import warnings

    warnings.resetwarnings()
    for category in (ResourceWarning, ImportWarning, PendingDeprecationWarning, DeprecationWarning):
        warnings.simplefilter("ignore", category)
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")


def _forget_filesystems() -> None:
    """Drop the S3 filesystems fsspec keeps per process (their endpoint and credentials come from the environment)."""
    s3fs = sys.modules.get("s3fs")
    if s3fs is not None:
        s3fs.S3FileSystem.clear_instance_cache()


@contextmanager
def _working_folder(cwd: str | os.PathLike[str] | None) -> Iterator[None]:
    if cwd is None:
        yield
        return
    before = os.getcwd()
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(before)


@contextmanager
def _test_state_kept() -> Iterator[None]:
    """The environment, the signal handlers and torch's thread count as they were before, whatever a command set
    (`-v` sets BURNQED_LOG_LEVEL for the stages a command starts)."""
    signals = [signum for signum in signal.valid_signals() if signum not in (signal.SIGKILL, signal.SIGSTOP)]
    handlers = {signum: signal.getsignal(signum) for signum in signals}
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    environ = dict(os.environ)
    try:
        yield
    finally:
        if dict(os.environ) != environ:
            os.environ.clear()
            os.environ.update(environ)
        for signum, handler in handlers.items():
            if handler is not None and signal.getsignal(signum) is not handler:
                signal.signal(signum, handler)
        torch = sys.modules.get("torch")
        if torch is not None and threads is not None and torch.get_num_threads() != threads:
            torch.set_num_threads(threads)


@contextmanager
def background(*args: str, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[str]]:
    """A burnqed command in its own session (so its Lean workers can be killed with it)."""
    proc = subprocess.Popen([*BURNQED, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, **(env or {})})
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        _reap(proc)


@contextmanager
def forked(*args: str, capture: bool = False) -> Iterator[ForkedStage]:
    """`background`, as a fork of this process (`ForkedStage`: a process of its own in a group of its own, set up as
    a fresh one, `burnqed.cli.main_call` running its command line through the app): for a test whose subject is
    what a command killed outright leaves behind, not its start (the fork starts with torch and transformers
    imported, ~4.5 CPU-s a process spends on them). What the test patched in this process (`minilean_in_process`)
    holds in the fork too; its output goes to the test's stdout and stderr, or with `capture` to pipes (bytes) the
    test reads. Killed with its group at the end."""
    assert os.environ.get("OMP_NUM_THREADS") == "1", "GNU OpenMP hangs in a fork after its parent used more threads"
    from burnqed.runner.requests import OtherRequest

    with killed_at_end(ForkedStage.start(OtherRequest(output="", words=args), dict(os.environ),
                                         capture=capture)) as proc:
        yield proc


@contextmanager
def killed_at_end(proc: ForkedStage) -> Iterator[ForkedStage]:
    """A started fork, killed with its group and reaped when the block ends (`_reap`), whatever it was doing."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            _kill_group(proc.pid)
            with contextlib.suppress(ProcessLookupError):  # killed before it made its group
                os.kill(proc.pid, signal.SIGKILL)
        _reap(proc)


def _reap(proc: subprocess.Popen[str] | ForkedStage) -> None:
    """Wait for a killed or finished command, kill what is left of its group, close the pipes the test read."""
    proc.wait(timeout=30)
    _kill_group(proc.pid)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def wait_for(predicate: Callable[[], object], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def descendants(pid: int) -> list[psutil.Process]:
    """Every live process below `pid` (Lean workers run in sessions of their own, but are still its children)."""
    try:
        found = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [proc for proc in found if _alive(proc)]


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def command_lines(processes: list[psutil.Process]) -> list[tuple[psutil.Process, int, str]]:
    """(process, its parent's pid, its command line) for each of `processes` still there to read: a short-lived child
    (a version probe, a fork not yet exec'd) may end between the listing and the read."""
    read = []
    for proc in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            read.append((proc, proc.ppid(), " ".join(proc.cmdline())))
    return read


def survivors(processes: list[psutil.Process], grace: float) -> list[list[str]]:
    """The command lines of `processes` still alive after `grace` seconds (each is then killed, so that a failing
    test leaves nothing behind)."""
    deadline = time.monotonic() + grace
    alive = [proc for proc in processes if _alive(proc)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [proc for proc in alive if _alive(proc)]
    lines = []
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            lines.append(proc.cmdline())
            proc.kill()
    return lines


@contextmanager
def forked_stages() -> Iterator[None]:
    """While the block runs, the local runner starts each stage (`burnqed.runner.local.launch_stage`) as a fork of
    this process that calls the command function of the stage's request (`burnqed.cli.main_call`: a stage run in
    process is a call, no command line rendered and parsed), its environment and output as a spawned one gets them:
    for a `cli("iterate", ...)` whose subject is what the stages make, not their processes. A fork
    starts with torch, transformers' model classes and peft imported (`_stage_imports`); it is still a process
    of its own in a group of its own, stopped, reaped and its CPU time counted as a spawned stage is. It forks only
    where the stage gets one torch thread (`OMP_NUM_THREADS=1`, the runner's setting for 2 jobs on 2 cores): GNU
    OpenMP hangs in a fork that uses more threads after its parent used them; elsewhere the stage is spawned."""
    from burnqed.runner import local

    spawn = local.launch_stage

    def launch(python: str, request: StageRequest, env: Mapping[str, str], capture: bool) -> local.StageProcess:
        if env.get("OMP_NUM_THREADS") != "1":
            return spawn(python, request, env, capture)
        if request.argv()[0] not in MODEL_FREE:
            _stage_imports()
        return ForkedStage.start(request, dict(env), capture)

    local.launch_stage = launch
    try:
        yield
    finally:
        local.launch_stage = spawn


# The commands that load no model (tests/pipeline/test_local.py: the stages without a model import no torch), by the
# first word of the command line a request renders (`burnqed data prepare`: "data"): a fork of one of them needs no
# `_stage_imports`.
MODEL_FREE = frozenset({"data", "merge-trajectories", "report", "compare"})


@functools.cache
def _stage_imports() -> None:
    """What the stages that load a model import on first use, imported once in this process so that every fork
    starts with it: transformers' auto model classes (~4 CPU-s) and peft (~1.8) were paid again by each fork that
    loads a model (sft, export, eval, search, the EBM's), measured on 2 cores. Not datasets nor trl (which imports
    it): a test hides such a package from a stage run in its process (tests/pipeline/test_stage_imports.py). Done
    before the first fork of a stage that may load a model, once."""
    import warnings

    logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)  # as burnqed.sft.model.quiet_imports
    with warnings.catch_warnings():  # torch.jit's deprecations, which a stage's own import of them shows nowhere
        warnings.simplefilter("ignore", DeprecationWarning)
        import peft  # noqa: F401
        from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401


class ForkedStage:
    """A stage running in a fork of this process (`forked_stages`), with the part of `subprocess.Popen` the local
    runner uses: pid (its process group's too), returncode, stdout and stderr pipes, poll and wait."""

    def __init__(self, pid: int, stdout: IO[bytes] | None, stderr: IO[bytes] | None) -> None:
        self.pid, self.stdout, self.stderr = pid, stdout, stderr
        self.returncode: int | None = None

    @classmethod
    def start(cls, request: StageRequest, env: dict[str, str], capture: bool) -> ForkedStage:
        from tests import counting

        counting.count("fork burnqed.cli")
        pipes = [os.pipe(), os.pipe()] if capture else []
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        pid = os.fork()
        if pid == 0:
            _run_forked_stage(request, env, [write for _, write in pipes])
        for _, write in pipes:
            os.close(write)
        if not capture:
            return cls(pid, None, None)
        return cls(pid, os.fdopen(pipes[0][0], "rb"), os.fdopen(pipes[1][0], "rb"))

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError as exc:  # reaped by someone who did not set returncode: nothing to wait for
                raise RuntimeError(f"stage process {self.pid} was reaped elsewhere") from exc
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(["burnqed"], timeout or 0.0)
            time.sleep(0.02)
        return code


def _run_forked_stage(request: StageRequest, env: dict[str, str], writers: list[int]) -> NoReturn:
    """In the fork: what a fresh `python -m burnqed.cli ARGV` (ARGV the command line `request` renders) would have
    (a process group of its own, stdin from /dev/null, stdout and stderr on `writers` or inherited, `env` as its
    environment, ARGV as its `sys.argv`, which the commands it suggests quote, default signal handlers, no logging
    handlers, Python's default warning filters, one torch thread), then `burnqed.cli.main_call(request)`, the
    request's command function called with its fields; exits with its code and never returns into the test."""
    import logging
    import traceback

    code = 1
    try:
        os.setpgid(0, 0)
        for signum in signal.valid_signals():
            if signum not in (signal.SIGKILL, signal.SIGSTOP) and callable(signal.getsignal(signum)):
                signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        if writers:
            os.dup2(writers[0], 1)
            os.dup2(writers[1], 2)
            for fd in writers:
                os.close(fd)
        os.environ.clear()
        os.environ.update(env)
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115  (the process's own streams)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="backslashreplace",  # noqa: SIM115
                          closefd=False)
        sys.argv[:] = [sys.argv[0], *request.argv()]
        root = logging.getLogger()
        root.handlers.clear()
        root.setLevel(logging.WARNING)
        _process_warning_filters()
        _forget_filesystems()
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(1)
        from burnqed.base.ending import exit_status
        from burnqed.cli import main_call

        try:
            main_call(request)
        except SystemExit as stop:
            code = exit_status(stop)  # the status Python gives a process `stop` ends
            if stop.code is not None and not isinstance(stop.code, int):
                print(stop.code, file=sys.stderr)  # printed as Python prints it
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)

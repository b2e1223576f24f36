"""Shared pieces of the `burnqed` command modules: the `--config`/`--set` options, configuration loading, the
preamble every stage command starts with, the decorator that turns typed errors into one stderr line and the
documented exit code, and the entry point's guards against odd environments (docs/errors.md, "Odd environments").

    # configuration, store; --output writable, and empty or this stage's own output (never somebody's files)
    cfg, store = setup(config, set_, output=output, folder=True, stage="prepare-data")
    made_from = prepare_inputs(cfg, store)   # what this run would be made from (burnqed.runner.reuse)
    if already_done(store, output, "prepared-data output", made_from=made_from, force=force):
        return                               # reused: same inputs (other inputs: refused, exit 2)
    # a command named to run next carries the --root, --model, --config and --sets this one was given
    typer.echo("next: " + suggestion(["iterate", "--iter", "1"], carried(root=root, config=config, sets=set_)))
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, ParamSpec, TextIO, TypeVar, cast

import typer

from burnqed.base.signals import Terminated, command_text, signal_name, supervised
from burnqed.commands.typerapi import CommandLineError, usage_path
from burnqed.commands.vocabulary import CONFIGURATION, LISTING, Group, deprecation_line
from burnqed.config import Config, load_config
from burnqed.config.data import KindRenamed
from burnqed.config.digest import verify_mounted_config
from burnqed.errors import (
    TRANSIENT_EXIT_CODE,
    BurnqedError,
    ConfigError,
    InputError,
    StoppedError,
    TransientStorageError,
    from_leankit,
)
from burnqed.provenance import StageInputs
from burnqed.storage import Store
from leankit.failures import LeankitFailure

if TYPE_CHECKING:
    from burnqed.cluster.needs import Need

P = ParamSpec("P")
R = TypeVar("R")

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", envvar="BURNQED_CONFIG", metavar="FILE", help="TOML configuration file.",
                 show_default=False, rich_help_panel=CONFIGURATION),
]
SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="KEY=VALUE",
        rich_help_panel=CONFIGURATION,
        help="Override one key: section.key=value (JSON values are parsed: --set lean.workers=4, "
        "--set 'lean.command=[\"repl\",\"Mathlib\"]'). Repeatable; wins over env and file.",
        show_default=False,
    ),
]


HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}  # every command: -h is --help

LOG_LEVEL_ENV = "BURNQED_LOG_LEVEL"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def verbose_callback(value: bool) -> bool:
    """`-v`: burnqed's INFO log lines and the machinery in progress lines (`burnqed.base.progress.verbose`), here and in
    every stage this command starts (`iterate`'s children inherit the environment): BURNQED_LOG_LEVEL=INFO, unless
    it already names INFO or DEBUG (or a level burnqed refuses, which `configure` then names)."""
    quiet = ("WARNING", "WARN", "ERROR", "CRITICAL", "FATAL")
    if value and os.environ.get(LOG_LEVEL_ENV, "WARNING").strip().upper() in quiet:
        os.environ[LOG_LEVEL_ENV] = "INFO"
    return value


VerboseOption = Annotated[
    bool,
    typer.Option("--verbose", "-v", callback=verbose_callback,
                 help="Show the machinery too: Lean workers, policy batches and theorems in flight in the progress "
                 "lines, worker restarts in log lines (same as BURNQED_LOG_LEVEL=INFO)."),
]


class OneLineErrors(Group):
    """The root command group: a usage error (unknown option, a value out of range such as `--pass-n 0`, a
    missing argument) is one line on stderr and exit code 2, like every other bad input, instead of click's
    usage box; a stop (`typer.Abort`: burnqed.base.signals' SIGTERM raises one too) is one line and 128 + N. Both
    through click's documented hooks: the root's own options are read in `parse_args`, everything after them
    (the subcommand, its options, its run) in `invoke`. Help (`-h`, or a group called without a command) prints
    as usual."""

    def list_commands(self, ctx: Any) -> list[str]:  # typer names no public type for its (vendored click's) context
        # typer adds a group's commands before its sub-groups; `burnqed --help` lists them as LISTING orders them
        names = super().list_commands(ctx)
        return sorted(names, key=lambda name: list(LISTING).index(name) if name in LISTING else len(LISTING))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        with one_line_errors():
            return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        with one_line_errors():
            return super().invoke(ctx)


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """Inside: an error of typer's parser (`typerapi.CommandLineError`) becomes `error: COMMAND: MESSAGE (see
    COMMAND -h)` on stderr (without the command for an error outside one) and a `typer.Exit` of its exit code;
    a `typer.Abort` (or an end of input, which typer reads as one) becomes `error: stopped by SIGNAL` and 128 + N."""
    try:
        yield
    except EOFError:  # typer's: a blank line, then an Abort
        typer.echo(err=True)
        raise stopped(signal.SIGINT) from None
    except typer.Abort as exc:  # click's form of a KeyboardInterrupt (burnqed.base.signals: SIGTERM raises one too)
        raise stopped(exc.__cause__.signum if isinstance(exc.__cause__, Terminated) else signal.SIGINT) from None
    except CommandLineError as exc:
        path = usage_path(exc)
        command = f"{path}: " if path is not None else ""
        help_hint = f" (see {path} -h)" if path is not None else ""
        typer.echo(f"error: {command}{' '.join(exc.format_message().split())}{help_hint}", err=True)
        raise typer.Exit(exc.exit_code) from None


def stopped(signum: int) -> typer.Exit:
    typer.echo(f"error: stopped by {signal_name(signum)}", err=True)
    return typer.Exit(128 + signum)


class ClosedPipeGuard:
    """A text stream (stdout, stderr) that keeps the command running when its reader goes away: `burnqed eval … |
    head -1` gets its first line, and eval still finishes and publishes its result, then exits with its own code
    and no `BrokenPipeError` traceback. The first write or flush that finds the pipe closed points the descriptor
    at /dev/null, so later writes, the interpreter's last flush and the children started afterwards write nowhere
    instead of failing."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.closed_pipe = False

    def write(self, text: str) -> int:
        if not self.closed_pipe:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._discard()
        return len(text)

    def flush(self) -> None:
        if not self.closed_pipe:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._discard()

    def _discard(self) -> None:
        self.closed_pipe = True
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_output_streams() -> None:
    """At the entry point (`burnqed.cli.main`): stdout and stderr never end a command. A character the terminal's
    encoding lacks (a Latin-1 or ASCII locale, `PYTHONIOENCODING=latin-1`, and theorem names or goals in Unicode)
    is written as a `\\u2264` escape instead of raising `UnicodeEncodeError` after the work was done, and a reader
    that closed the pipe early is `ClosedPipeGuard`'s."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None:  # started with the descriptor closed: nothing is written, nothing can fail
            continue
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
        setattr(sys, name, cast(TextIO, ClosedPipeGuard(stream)))


def keep_working_directory() -> None:
    """At the entry point: relative paths keep the meaning they had when the command started, even when its
    working directory is deleted while it runs (a temporary checkout removed, a CI workspace wiped), as a shell keeps
    `$PWD`. Once the directory is gone, `os.getcwd()` (which every relative path goes through when it is made
    absolute: burnqed's store, pathlib, fsspec, and libraries that read it when imported, such as torch) answers the
    start directory instead of raising `FileNotFoundError` after the work was done, and the process moves to `/`:
    native code cannot load in a deleted directory (oneMKL, inside torch, aborts the process). That move is made
    when Python's `os.getcwd()` is asked or a module is imported, whichever comes first after the deletion. A
    command started in a directory that is already gone is refused (exit 2)."""
    try:
        started_in = os.getcwd()
    except FileNotFoundError:
        raise fail("the current working directory no longer exists: cd to an existing folder and run the command "
                   "again", 2) from None
    real_getcwd = os.getcwd
    lost: list[bool] = []

    def gone() -> bool:
        if not lost:
            try:
                real_getcwd()
            except FileNotFoundError:
                lost.append(True)
                os.chdir("/")
        return bool(lost)

    def getcwd() -> str:
        return started_in if gone() else real_getcwd()

    def before_import(event: str, args: tuple[object, ...]) -> None:
        if event == "import" and not lost:
            gone()

    os.getcwd = getcwd
    sys.addaudithook(before_import)


def fail(message: str, code: int) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def exit_code(exc: BurnqedError) -> int:
    """The documented exit code of a typed error (see `reports_errors`)."""
    if isinstance(exc, ConfigError | InputError):
        return 2
    if isinstance(exc, StoppedError):
        return 128 + exc.signum
    if isinstance(exc, TransientStorageError):
        return TRANSIENT_EXIT_CODE
    return 1


def reports_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn burnqed's typed errors (and leankit's, read by `errors.from_leankit`) into one stderr line and the
    documented exit code (2 bad input or configuration, 128 + N stopped by signal N, 75 a storage error a retry can
    cure, 1 any other failure)."""

    @wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except (ConfigError, InputError) as exc:
            raise fail(str(exc), 2) from None
        except StoppedError as exc:
            if supervised():  # the parent (iterate) says what stopped, once
                raise typer.Exit(128 + exc.signum) from None
            raise fail(str(exc), 128 + exc.signum) from None
        except TransientStorageError as exc:
            raise fail(str(exc), TRANSIENT_EXIT_CODE) from None
        except BurnqedError as exc:
            raise fail(str(exc), 1) from None
        except LeankitFailure as exc:  # a corpus, version or Lean command leankit refused: burnqed's error for it
            error = from_leankit(exc)
            raise fail(str(error), exit_code(error)) from None
        except KeyboardInterrupt as exc:  # a signal outside a `burnqed.base.signals.stop_on_signals` block
            signum = exc.signum if isinstance(exc, Terminated) else signal.SIGINT
            if supervised():  # as for a StoppedError: the parent says what stopped, once
                raise typer.Exit(128 + signum) from None
            raise fail(f"stopped by {signal_name(signum)}", 128 + signum) from None
        except Exception as exc:
            # a storage fault no layer below translated (a full disk, a refused write, S3 credentials or endpoint):
            # the same one line and exit code in every command; anything else is a bug and keeps its traceback
            from burnqed.storage import storage_fault

            fault = storage_fault(exc)
            if fault is None:
                raise
            raise fail(str(fault), exit_code(fault)) from None

    return wrapper


class LogLines(logging.Formatter):
    """How a command's log records read on stderr: a WARNING as `warning: MESSAGE`, the form of every other warning
    line a command prints (`eval`'s answer-open theorems, `search`'s refused modes), so a user sees one kind of
    warning; INFO and DEBUG (`-v`), ERROR and above with time, level and logger."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        if record.levelno != logging.WARNING:
            return super().format(record)
        text = f"warning: {record.getMessage()}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def configure(config: Path | None, sets: list[str] | None) -> Config:
    """Set up logging and load the configuration (file < `BURNQED_*` env < `--set`); commands build their frozen
    settings (e.g. `Store.from_config(cfg.storage)`) from it."""
    level = os.environ.get(LOG_LEVEL_ENV, "WARNING").strip().upper()
    if level not in logging.getLevelNamesMapping():
        raise ConfigError(f"{LOG_LEVEL_ENV}={os.environ[LOG_LEVEL_ENV]!r} is not a log level: use one of "
                          f"{', '.join(LOG_LEVELS)} (or -v for INFO)")
    handler = logging.StreamHandler()
    handler.setFormatter(LogLines())
    logging.basicConfig(level=level, handlers=[handler])  # a no-op where logging is set up already (a test's)
    # a workflow pod refuses to run a configuration other than the one its workflow was rendered from
    verify_mounted_config(os.environ)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", KindRenamed)
        cfg = load_config(config, sets or (), os.environ)
    renamed = {tuple(found.message.args) for found in caught if isinstance(found.message, KindRenamed)}
    for old, new in sorted(renamed):
        typer.echo(deprecation_line(f"source kind {old}", f"{new}"), err=True)
    for found in caught:
        if not isinstance(found.message, KindRenamed):
            warnings.showwarning(found.message, found.category, found.filename, found.lineno)
    return cfg


class Setup(NamedTuple):
    """What a command builds before anything else: the configuration and the artifact store built from it."""

    cfg: Config
    store: Store


def setup(config: Path | None, sets: list[str] | None, *, output: str | None = None, what: str = "--output",
          folder: bool = False, stage: str | None = None) -> Setup:
    """The preamble of every command that reads or writes artifacts: `configure`, then
    `Store.from_config(cfg.storage)`, then, when `output` is given, `Store.check_writable(output, what=what,
    folder=folder)`, so that an output that cannot be written is one line (exit 2) before any long work; with
    `stage` (a folder published by `Store.staged_output(output, stage)`) also `Store.check_replaceable`: a folder
    holding anything but that stage's own output is refused the same way (docs/errors.md, "Never over somebody's
    files")."""
    cfg = configure(config, sets)
    store = Store.from_config(cfg.storage)
    if output is not None:
        store.check_writable(output, what=what, folder=folder)
        if stage is not None:
            store.check_replaceable(output, stage, what=what)
    return Setup(cfg, store)


def carried(*, root: str | None = None, model: str | None = None, config: Path | None = None,
            sets: Sequence[str] | None = None) -> list[str]:
    """The options a command suggested next repeats so that it acts on the same run as this one: --root, --model,
    --config and each --set, as the user gave them (`suggestion`)."""
    given = [("--root", root), ("--model", model), ("--config", None if config is None else str(config))]
    return [*(part for flag, value in given if value is not None for part in (flag, value)),
            *(part for item in sets or () for part in ("--set", item))]


SHOW_READS = ("storage.", "pipeline.eval_modes")  # the settings `show` reads: where the run is, which evals to look in


def show_sets(sets: Sequence[str] | None) -> list[str]:
    """The --sets a suggested `burnqed show` repeats: those of the settings it reads (`SHOW_READS`); the others
    (a stage's knobs) would change nothing it draws."""
    return [item for item in sets or () if item.partition("=")[0].strip().startswith(SHOW_READS)]


def suggestion(args: Sequence[str], carry: Sequence[str] = ()) -> str:
    """`burnqed ARGS CARRY` as a shell reads it back (`burnqed iterate --iter 1 --root runs-mine --set
    'data.sources=[...]'`): what a command prints when it names the command to run next."""
    return command_text([*args, *carry])


def check_packages(command: str, cfg: Config, *, ebm: bool = False, model_folder: bool = False) -> list[Need]:
    """Exit 2 (ConfigError, one line) when `burnqed COMMAND` with `cfg` would import a package of burnqed's extras
    that is not installed here (`burnqed.cluster.needs.command_needs`, `burnqed.cluster.images.check_installed`);
    else the optional needs that are not, for the command to say what it goes without. Imported here, not at the
    CLI's start: the images' table is read by the command that runs, not by every `burnqed` process."""
    from burnqed.cluster.images import check_installed
    from burnqed.cluster.needs import command_needs

    return check_installed(command, command_needs(command, cfg, ebm=ebm, model_folder=model_folder))


def already_done(store: Store, output: str, what: str, *, made_from: StageInputs, force: bool = False) -> bool:
    """The one place a command decides "finished → skip". True when `output` is a finished `what` (e.g. "sft
    output") made from what `made_from` says the run this command would do is made from, and not `force`d: then the
    first line on stdout says it is reused (`reuse.reuse_line`: "reusing OUTPUT (finished DATE, same inputs); --force
    redoes it"). `InputError` (one line, exit 2) when it is finished but made with other inputs: the first
    difference, and that --force redoes it. False when nothing finished is there, or with `force`."""
    if force:
        return False
    from burnqed.runner.reuse import check_reusable, finished_output, reuse_line

    found = finished_output(store, output)
    if found is None:
        return False
    check_reusable(found, made_from, what)
    typer.echo(reuse_line(found))
    return True

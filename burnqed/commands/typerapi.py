"""The one module that touches typer beyond its documented decorators (`typer.Typer`, `typer.Option`,
`typer.Argument`, `typer.echo`, `typer.Exit`, `typer.Abort`): the classes burnqed's commands are built from, the
errors its parser raises, and the help of a group called without a command.

typer (0.26+) vendors click as a private package (`typer._click`) and names only some of its classes publicly
(fastapi/typer#1867): its `Context` and `BadParameter`, and `TyperException`, which every error of its parser derives
from. The other touch points below use the public API those classes document, and each is pinned by a contract test
in tests/commands/test_typerapi.py that fails when the typer behaviour it relies on changes; pyproject.toml bounds
typer to the range those tests ran on (constraints.txt pins the tested version).

    class Command(BaseCommand):                         # a burnqed command: typer's class, documented hooks only
        def __init__(self, name, **kwargs):
            kwargs["params"] = named_arguments(kwargs.get("params") or [])   # arguments without a type column
    except CommandLineError as exc:                     # any error typer's parser raises (isinstance, not names)
        path = usage_path(exc)                          # `burnqed eval` for a usage error raised in that command
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

# The classes typer builds a command line from (`typer.core`'s): `Typer(cls=…)` and `Typer.command(cls=…)` take
# subclasses of the first two, and a command's parameters are instances of the last two.
BaseCommand = TyperCommand
BaseGroup = TyperGroup
Argument = TyperArgument
Option = TyperOption

# Every error typer's parser raises derives from the public `typer.TyperException` (`format_message()`, `exit_code`).
CommandLineError = typer.TyperException


def _usage_error() -> type[typer.TyperException]:
    """A usage error (an unknown option or command, a missing or invalid value): the direct base of the public
    `typer.BadParameter`, carrying the context (`ctx`) of the command it was raised in, exit code 2."""
    base = typer.BadParameter.__base__
    if base is None or not issubclass(base, typer.TyperException):
        raise ImportError(f"typer {typer.__version__}: typer.BadParameter no longer derives from a usage error class; "
                          "pyproject.toml bounds typer to the tested range")
    return base


UsageError = _usage_error()

USAGE_EXIT_CODE = 2  # the exit code of a usage error, and of a group called without a command


def usage_path(error: BaseException) -> str | None:
    """The command path (`burnqed eval`) of the command a usage error was raised in; None for another error, or a
    usage error raised outside any command's context."""
    if not isinstance(error, UsageError):
        return None
    context: typer.Context | None = getattr(error, "ctx", None)
    return None if context is None else context.command_path


def group_help(ctx: Any) -> typer.Exit:
    """What a group called without a command does (`burnqed`, `burnqed lean`), as typer's own group does with
    `no_args_is_help` when its error is shown: its help on stdout (typer's rich help prints as it renders), the
    rendered remainder (a line) on stderr; the `typer.Exit` to raise, exit code 2."""
    typer.echo(ctx.get_help(), err=True, color=ctx.color)
    return typer.Exit(USAGE_EXIT_CODE)


class NamedArgument(TyperArgument):
    """An argument whose help shows its name (`THEOREM`) and no type (`<str>`): typer's rich help renders an
    argument's type column from `display_type_rich`, which an option's metavar replaces but an argument's does not
    (its metavar is its name)."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None


def named_argument(param: TyperArgument) -> NamedArgument:
    """`param` rebuilt as a `NamedArgument` through typer's documented constructor, from what `param` holds, with
    its name in capitals as its metavar when it names none (`THEOREM`, `INPUTS...`). A shell completion of its own
    is not carried (typer keeps it privately): burnqed's arguments have none, and the contract test compares every
    rebuilt argument of the app with the one typer built."""
    metavar, envvar = param.metavar, param.envvar
    if metavar is None:
        metavar = (param.name or "value").upper() + ("..." if param.nargs != 1 else "")
    return NamedArgument(
        param_decls=list(param.opts), type_descriptor=param.type_descriptor, required=param.required,
        default=param.default, callback=param.callback, nargs=param.nargs, metavar=metavar,
        expose_value=param.expose_value, is_eager=param.is_eager,
        envvar=envvar if envvar is None or isinstance(envvar, str) else list(envvar),
        show_default=param.show_default, show_choices=param.show_choices, show_envvar=param.show_envvar,
        help=param.help, hidden=param.hidden, min=param.min, max=param.max, rich_help_panel=param.rich_help_panel)


def named_arguments(params: Sequence[Any]) -> list[Any]:
    """A command's parameters (its `params=`, as typer builds them) with each argument a `NamedArgument`."""
    return [named_argument(p) if isinstance(p, TyperArgument) and not isinstance(p, NamedArgument) else p
            for p in params]


__all__ = ["USAGE_EXIT_CODE", "Argument", "BaseCommand", "BaseGroup", "CommandLineError", "NamedArgument", "Option",
           "UsageError", "group_help", "named_argument", "named_arguments", "usage_path"]

"""Contract tests of `burnqed.commands.typerapi`, the one adapter between burnqed's command line and typer: one per
typer behaviour the adapter (and the command classes built on it) relies on, each on a small app of typer's own
classes, so that a typer release that changes it fails here, naming it, before any help or error line changes.

They run those apps with typer's own runner (`CliRunner`), not tests/processes.py's `cli`, which runs burnqed's app
only: what they check is typer's behaviour under its runner (the exit code of an error raised in the root's hooks,
130 on an interrupt, the option names its parser normalizes, the help it lays out). tests/test_cli_fixture.py allows
this module, and no other test module, to import it."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Annotated, Any, ClassVar

import pytest
import typer
from typer.testing import CliRunner

from burnqed.commands.typerapi import (
    USAGE_EXIT_CODE,
    Argument,
    BaseCommand,
    BaseGroup,
    CommandLineError,
    NamedArgument,
    Option,
    UsageError,
    group_help,
    named_argument,
    named_arguments,
    usage_path,
)

ENV = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}


def small_app(group: type[Any] = BaseGroup, command: type[Any] = BaseCommand) -> typer.Typer:
    app = typer.Typer(name="tool", no_args_is_help=True, cls=group, add_completion=False,
                      pretty_exceptions_enable=False)
    lean = typer.Typer(no_args_is_help=True, cls=group)

    @app.command("show", cls=command)
    def show(theorem: Annotated[str, typer.Argument(help="A name.")],
             count: Annotated[int, typer.Option("--count", min=1, help="How many.")] = 1) -> None:
        if theorem == "bad":
            raise typer.BadParameter("not a theorem")
        if theorem == "interrupt":
            raise KeyboardInterrupt
        typer.echo(f"{theorem} {count}")

    @lean.command("check", cls=command)
    def check(paths: Annotated[list[Path], typer.Argument(help="Files.", show_default=False)]) -> None:
        typer.echo(" ".join(map(str, paths)))

    app.add_typer(lean, name="lean")

    @app.callback()
    def root(verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False) -> None:
        """A tool."""

    return app


def raised(app: typer.Typer, args: list[str]) -> BaseException:
    """What the command line `args` raises when typer is asked not to handle it (`standalone_mode=False`)."""
    with pytest.raises(Exception) as caught:  # any: the test names what it expects of it
        typer.main.get_command(app).main(args, prog_name="tool", standalone_mode=False)
    return caught.value


# ---------------------------------------------------------------------------------------------- the errors, by type


@pytest.mark.parametrize(("args", "path", "message"), [
    (["--nope"], "tool", "No such option: --nope"),
    (["nope"], "tool", "No such command 'nope'."),
    (["show"], "tool show", "Missing argument 'theorem'."),
    (["show", "x", "--count", "0"], "tool show", "Invalid value for '--count': Input should be greater than or equal "
                                                 "to 1"),
    (["show", "x", "y"], "tool show", "Got unexpected extra argument(s) (y)"),
    (["show", "x", "--count"], None, "Option '--count' requires an argument."),  # raised without its context
    (["show", "bad"], "tool show", "Invalid value: not a theorem"),  # typer.BadParameter, raised by a command
    (["lean", "nope"], "tool lean", "No such command 'nope'."),
])
def test_every_usage_error_is_a_usage_error_with_its_commands_context(args: list[str], path: str | None,
                                                                     message: str) -> None:
    error = raised(small_app(), args)
    assert isinstance(error, UsageError) and isinstance(error, CommandLineError)
    assert error.exit_code == USAGE_EXIT_CODE
    assert usage_path(error) == path
    assert " ".join(error.format_message().split()) == message


def test_the_usage_error_is_typers_public_bad_parameters_base_and_a_typer_exception() -> None:
    assert issubclass(typer.BadParameter, UsageError) and UsageError is not typer.BadParameter
    assert issubclass(UsageError, typer.TyperException) and CommandLineError is typer.TyperException
    assert UsageError is not CommandLineError and UsageError("x").exit_code == USAGE_EXIT_CODE != \
        CommandLineError("x").exit_code
    assert usage_path(UsageError("outside any command")) is None
    assert usage_path(typer.TyperException("not a usage error")) is None
    assert usage_path(ValueError("not typer's")) is None


def test_a_group_without_a_command_raises_a_usage_error_whose_shown_form_is_group_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for args, path in (([], "tool"), (["lean"], "tool lean")):
        error = raised(small_app(), args)  # typer's own group (no_args_is_help): its help, shown as an error
        assert isinstance(error, UsageError) and error.exit_code == USAGE_EXIT_CODE and usage_path(error) == path
        error.show()  # type: ignore[attr-defined]  # what a usage error's `show` prints
        typers = capsys.readouterr()
        exit_ = group_help(error.ctx)  # type: ignore[attr-defined]
        ours = capsys.readouterr()
        assert (ours.out, ours.err, exit_.exit_code) == (typers.out, typers.err, USAGE_EXIT_CODE)
        assert f"Usage: {path} [OPTIONS] COMMAND [ARGS]..." in ours.out


# ------------------------------------------------------------------------------------------------------ the hooks


class Recording(BaseGroup):
    """A group that records which hook each error of the command line passes through."""

    seen: ClassVar[list[tuple[str, str]]] = []

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except CommandLineError as exc:
            self.seen.append(("parse_args", type(exc).__qualname__))
            raise typer.Exit(7) from None

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except CommandLineError as exc:
            self.seen.append(("invoke", str(usage_path(exc))))
            raise typer.Exit(9) from None


@pytest.mark.parametrize(("args", "hook", "code"), [
    (["--nope"], "parse_args", 7),  # the root's own options: its parse_args
    (["nope"], "invoke", 9),  # the subcommand, its options, its run: the root's invoke
    (["show", "--nope"], "invoke", 9),
    (["show", "bad"], "invoke", 9),
    (["lean", "check"], "invoke", 9),
])
def test_the_roots_parse_args_and_invoke_see_every_error_and_an_exit_raised_there_is_the_exit_code(
    args: list[str], hook: str, code: int,
) -> None:
    Recording.seen = []
    result = CliRunner().invoke(small_app(group=Recording), args, env=ENV)
    assert result.exit_code == code and result.stdout == "" and result.stderr == ""
    assert [seen[0] for seen in Recording.seen] == [hook]  # `lean check`: lean's own invoke


def test_typer_exits_130_on_an_interrupt_that_reaches_it() -> None:
    result = CliRunner().invoke(small_app(), ["show", "interrupt"], env=ENV)
    assert result.exit_code == 130 and result.stderr == ""


def test_the_parser_asks_token_normalize_func_for_every_option_token() -> None:
    asked: list[str] = []

    class Normalizing(BaseCommand):
        def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
            def normalize(name: str) -> str:
                asked.append(name)
                return "count" if name == "old" else name

            ctx.token_normalize_func = normalize
            return super().parse_args(ctx, args)

    result = CliRunner().invoke(small_app(command=Normalizing), ["show", "x", "--old", "3"], env=ENV)
    assert (result.exit_code, result.stdout) == (0, "x 3\n")
    assert "old" in asked and "count" in asked


# --------------------------------------------------------------------------------------------------- the help


def test_typer_builds_a_command_of_the_given_class_with_its_parameters_as_keyword() -> None:
    given: dict[str | None, Any] = {}

    class Keeping(BaseCommand):
        def __init__(self, name: str | None, **kwargs: Any) -> None:
            given[name] = kwargs
            super().__init__(name, **kwargs)

    command = typer.main.get_command(small_app(command=Keeping)).commands["show"]  # type: ignore[attr-defined]
    assert isinstance(command, Keeping)
    assert [type(p) for p in given["show"]["params"]] == [Argument, Option] and Argument is not NamedArgument


def help_text(app: typer.Typer, args: list[str]) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env=ENV)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_rich_help_reads_an_arguments_type_column_from_display_type_rich_and_an_options_from_its_metavar() -> None:
    class Plain(BaseCommand):
        def __init__(self, name: str | None, **kwargs: Any) -> None:
            kwargs["params"] = named_arguments(kwargs["params"])
            super().__init__(name, **kwargs)

        def get_params(self, ctx: Any) -> list[Any]:
            params = super().get_params(ctx)
            for param in params:
                if isinstance(param, Option) and param.metavar is None:
                    param.metavar = "N" if param.name == "count" else ""
            return params

    typers = [" ".join(line.split()) for line in help_text(small_app(), ["show"]).splitlines()]
    ours = [" ".join(line.split()) for line in help_text(small_app(command=Plain), ["show"]).splitlines()]
    assert "│ * theorem <str> A name. [required] │" in typers
    assert "│ --count <int range> [x>=1] How many. [default: 1] │" in typers
    assert "│ --help <bool> Show this message and exit. │" in typers
    assert "│ * THEOREM A name. [required] │" in ours
    assert "│ --count N [x>=1] How many. [default: 1] │" in ours
    assert "│ --help Show this message and exit. │" in ours
    assert " ".join(help_text(small_app(command=Plain), ["lean", "check"]).split()).count("PATHS...") == 2


TYPER_ARGUMENT_KEYWORDS = {  # TyperArgument's constructor: `named_argument` passes each but the two completions
    "param_decls", "type_descriptor", "required", "default", "callback", "nargs", "metavar", "expose_value",
    "is_eager", "envvar", "shell_complete", "autocompletion", "show_default", "show_choices", "show_envvar", "help",
    "hidden", "min", "max", "rich_help_panel"}


def test_typers_argument_constructor_takes_the_keywords_named_argument_rebuilds_from() -> None:
    assert set(inspect.signature(Argument.__init__).parameters) - {"self"} == TYPER_ARGUMENT_KEYWORDS


def typer_built_arguments() -> list[Any]:
    """Every argument of burnqed's commands as typer builds it (`TyperCommand`, not burnqed's `Command`), and of a
    set of argument kinds burnqed's do not use yet (an environment variable, a range, hidden, a panel, a callback)."""
    from burnqed.cli import COMMANDS

    plain = typer.Typer()
    callbacks = [info.callback for target in COMMANDS.values() if isinstance(target, typer.Typer)
                 for info in target.registered_commands if info.callback is not None]
    for number, target in enumerate([*(t for t in COMMANDS.values() if not isinstance(t, typer.Typer)), *callbacks]):
        plain.command(f"c{number}", cls=BaseCommand)(target)

    @plain.command("kinds", cls=BaseCommand)
    def kinds(
        one: Annotated[int, typer.Argument(min=0, max=9, envvar="ONE", show_envvar=False)],
        two: Annotated[list[str] | None, typer.Argument(hidden=True, rich_help_panel="P", metavar="TWO",
                                                        callback=lambda value: value)] = None,
    ) -> None:
        pass

    commands = typer.main.get_command(plain).commands  # type: ignore[attr-defined]
    return [p for c in commands.values() for p in c.params if isinstance(p, Argument)]


def test_a_rebuilt_argument_holds_all_that_typer_built_but_its_class_and_metavar() -> None:
    built = typer_built_arguments()
    assert len(built) == 13 and not any(isinstance(p, NamedArgument) for p in built)
    for param in built:
        rebuilt = named_argument(param)
        assert type(rebuilt) is NamedArgument
        assert rebuilt.metavar == param.metavar or (param.metavar is None and rebuilt.metavar == (
            param.name.upper() + ("..." if param.nargs != 1 else "")))
        assert {**vars(rebuilt), "metavar": None} == {**vars(param), "metavar": None}, param.name

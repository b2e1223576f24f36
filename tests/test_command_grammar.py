"""How the local runner reads a stage's command line (`runner.reuse.parse_command_line`): by the app's own command
tree (`CommandGrammar`, from the typer app), so every command, subcommand, flag and option of the app is read as
the app reads it, and one added to the app needs no edit in `runner.reuse`."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
import typer
from typer.core import TyperGroup, TyperOption

from burnqed.cli import app, command_grammar
from burnqed.config import load_config
from burnqed.runner.plan import build_iteration
from burnqed.runner.reuse import CommandGrammar, parse_command_line

GRAMMAR = command_grammar()


def tree(root: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every command of the tree under `root` with its path ("data prepare"), groups included."""
    found = [(path, root)]
    if isinstance(root, TyperGroup):
        for name, sub in root.commands.items():
            found += tree(sub, f"{path} {name}".strip())
    return found


COMMANDS = [(path, command) for path, command in tree(typer.main.get_command(app)) if path]


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[path for path, _ in COMMANDS])
def test_every_command_and_option_of_the_app_is_read_as_the_app_reads_it(path: str, command: Any) -> None:
    if isinstance(command, TyperGroup):
        assert GRAMMAR.groups[path] == frozenset(command.commands) and path not in GRAMMAR.flags
        return
    assert parse_command_line([*path.split(), "ARG"], GRAMMAR).command == path
    for param in command.params:
        if not isinstance(param, TyperOption):
            continue
        for word in (*param.opts, *param.secondary_opts):
            line = parse_command_line([*path.split(), word, "next"], GRAMMAR)
            if param.is_flag or param.count:
                assert (line.flags, line.options, line.arguments) == (frozenset({word}), {}, ("next",)), word
            else:
                assert (line.flags, line.options, line.arguments) == (frozenset(), {word: ["next"]}, ()), word


def test_the_flags_the_pipeline_writes_are_the_apps() -> None:
    assert {"--resume", "--force"} <= GRAMMAR.flags["search"] and "--output" not in GRAMMAR.flags["search"]
    assert {"--ablation", "--show-theorems", "--resume"} <= GRAMMAR.flags["eval"]
    assert "--allow-incomplete" in GRAMMAR.flags["merge-trajectories"]
    assert "--build-deps" in GRAMMAR.flags["data trace"] and GRAMMAR.groups["data"] >= {"prepare", "trace"}
    line = parse_command_line(["data", "prepare", "--output", "x", "--force"], GRAMMAR)
    assert (line.command, line.options, line.flags) == ("data prepare", {"--output": ["x"]}, frozenset({"--force"}))


def test_every_option_in_a_stage_command_line_of_the_plan_is_one_of_its_commands() -> None:
    cfg = load_config()
    words: set[str] = set()
    for i, joint, rl in ((0, False, False), (1, True, False), (1, False, True)):
        for stage in build_iteration(cfg.pipeline, "file:///runs", i, joint=joint, rl=rl).stages:
            line = parse_command_line(stage.argv_for(0), GRAMMAR)
            assert line.command in GRAMMAR.flags, stage.name
            command = dict(COMMANDS)[line.command]
            known = {word for param in command.params for word in getattr(param, "opts", ())}
            assert set(line.options) | line.flags <= known, stage.name
            words |= line.flags
    assert words == {"--resume"}


def test_a_flag_or_subcommand_added_to_an_app_is_read_with_no_edit() -> None:
    grown = typer.Typer()
    group = typer.Typer()

    @grown.command("stage")
    def stage(output: Annotated[str, typer.Option("--output")] = "", fresh: Annotated[bool, typer.Option(
            "--fresh/--stale")] = False) -> None:
        """A stage."""

    @group.command("one")
    def one(deep: Annotated[bool, typer.Option("--deep")] = False) -> None:
        """A subcommand."""

    @group.command("two")
    def two() -> None:
        """Another."""

    grown.add_typer(group, name="pair")
    grammar = CommandGrammar.of(typer.main.get_command(grown))
    assert grammar.flags == {"stage": {"--fresh", "--stale"}, "pair one": {"--deep"}, "pair two": set()}
    assert grammar.options == {"stage": {"--output"}, "pair one": set(), "pair two": set()}
    line = parse_command_line(["stage", "--stale", "a", "--output", "o"], grammar)
    assert (line.command, line.flags, line.options, line.arguments) == (
        "stage", frozenset({"--stale"}), {"--output": ["o"]}, ("a",))
    line = parse_command_line(["pair", "one", "--deep", "b"], grammar)
    assert (line.command, line.flags, line.arguments) == ("pair one", frozenset({"--deep"}), ("b",))

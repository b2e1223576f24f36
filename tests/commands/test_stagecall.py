"""A stage run in process is a call (burnqed/commands/stagecall.py): the command function a request runs gets from the
call the arguments typer gives it for the command line the request renders, for every stage the pipeline builds and
each as `iterate --force` redoes it; so a stage forked by the tests (tests/processes.py `forked_stages`) runs what the
process of its command line runs."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import typer

from burnqed.commands import stagecall, train
from burnqed.runner import requests
from burnqed.runner.requests import OtherRequest, ReportRequest, SftRequest, StageRequest
from tests.processes import cli
from tests.runner.test_stage_requests import DEFAULT, EVERYTHING, JOINT, stages


@functools.cache
def _stand_in(function: Callable[..., None]) -> tuple[Any, dict[str, object]]:
    """An app whose one command is a stand-in with `function`'s parameters, and what its last call was given."""
    seen: dict[str, object] = {}

    def record(**kwargs: object) -> None:
        seen.clear()
        seen.update(kwargs)

    app = typer.Typer()
    app.command()(functools.update_wrapper(record, function))
    return typer.main.get_command(app), seen


def typer_arguments(function: Callable[..., None], argv: Sequence[str]) -> dict[str, object]:
    """The arguments typer calls `function` with for the command line `argv` (after the command's words)."""
    command, seen = _stand_in(function)
    command.main(args=list(argv), prog_name="burnqed", standalone_mode=False)
    return dict(seen)


def called_arguments(request: StageRequest) -> dict[str, object]:
    """The arguments `stagecall.call(request)` calls the request's command function with, defaults filled in."""
    bound = inspect.signature(stagecall.function_of(request)).bind(**stagecall.parameters(request))
    bound.apply_defaults()
    return dict(bound.arguments)


@pytest.mark.parametrize(("sets", "judged"), [(DEFAULT, True), (EVERYTHING, False), (JOINT, False)],
                         ids=["judged", "rl-sketch", "joint-study"])
def test_a_called_stage_gets_the_arguments_its_command_line_gives(sets: list[str], judged: bool) -> None:
    seen: set[type[StageRequest]] = set()
    for stage in stages(sets, judged=judged):
        for shard in range(stage.shards):
            for request in (stage.request_for(shard), stage.request_for(shard).redone()):
                words = request.argv()[len(request.command):]
                assert called_arguments(request) == typer_arguments(stagecall.function_of(request), words), stage.name
                seen.add(type(request))
    assert len(seen) >= 10


def test_a_request_s_lists_and_sets_reach_its_command_as_typer_gives_them() -> None:
    bare = SftRequest(data="d", output="o")  # no --trajectories, no --set: None, as typer gives them
    assert stagecall.parameters(bare) == {"output": "o", "iteration": 0, "data": "d", "trajectories": None,
                                          "init": None, "start": None, "set_": None, "force": False}
    given = SftRequest(data="d", trajectories=("t",), sets=("sft.joint=true",), output="o")
    assert called_arguments(given) == typer_arguments(train.sft, given.argv()[1:])
    assert stagecall.parameters(given)["trajectories"] == ["t"] and stagecall.parameters(given)["set_"] == [
        "sft.joint=true"]


def test_each_request_type_names_the_function_the_app_runs_for_its_command() -> None:
    from burnqed.cli import app

    root: Any = typer.main.get_command(app)
    kinds = {kind for kind in vars(requests).values() if isinstance(kind, type)
             and issubclass(kind, StageRequest) and kind.command}
    assert set(stagecall.FUNCTIONS) == kinds
    for kind, function in stagecall.FUNCTIONS.items():
        command = root
        for word in kind.command:
            command = command.commands[word]
        assert command.callback.__wrapped__ is function, kind.__name__
    with pytest.raises(KeyError):
        stagecall.function_of(OtherRequest(words=("config", "show")))


def test_a_called_command_exits_with_the_code_and_lines_its_command_line_gives(
        tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    root = f"file://{tmp_path}/run"
    refused = ReportRequest(root=root, iteration=0, output=f"{root}/iter_0/report")  # a root holding no run
    done = cli(*refused.argv())
    code = stagecall.exit_code(refused)
    assert (code, capsys.readouterr().err) == (done.returncode, done.stderr)
    assert code == 2 and done.stderr.startswith(f"error: report --iter 0: {root}/iter_0 does not exist")

"""A stage run in this process is a call: the command function its request runs (`runner.requests`: one request type
per command), called with the request's fields as its parameters and every other parameter at its default, as typer
calls it for the command line the request renders, without a command line rendered or parsed.

    call(SftRequest(iteration=0, data="runs/iter_0/data", output="runs/iter_0/sft"))   # burnqed sft --iter 0 …
    code = exit_code(request)   # the exit code a process of its command line ends with

The request types live below the commands (runner/), so a request cannot name its function itself: `FUNCTIONS` does.
An `OtherRequest` is a command line the pipeline does not build: its words are run through the app (`burnqed.cli`).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable

import typer

from burnqed.commands import data, ebm, judge, merge, prove, runs, start, study, train
from burnqed.commands.kit import one_line_errors
from burnqed.runner.requests import (
    EvalRequest,
    ExportRequest,
    JointStudyRequest,
    JudgeRequest,
    MergeRequest,
    PrepareRequest,
    ReportRequest,
    RlRequest,
    SearchRequest,
    SftRequest,
    StageRequest,
    StartRequest,
    TrainEbmRequest,
)

# The command function each request type runs: what the app registers for the request's `command` words.
FUNCTIONS: dict[type[StageRequest], Callable[..., None]] = {
    PrepareRequest: data.prepare, SftRequest: train.sft, RlRequest: train.rl, ExportRequest: train.export,
    TrainEbmRequest: ebm.train_ebm, SearchRequest: prove.search, EvalRequest: prove.evaluate,
    JudgeRequest: judge.judge, MergeRequest: merge.merge_trajectories, StartRequest: start.start,
    JointStudyRequest: study.joint_study, ReportRequest: runs.report,
}


def function_of(request: StageRequest) -> Callable[..., None]:
    """The command function `request` runs (`KeyError` for a request no command function takes: `OtherRequest`)."""
    return FUNCTIONS[type(request)]


def parameters(request: StageRequest) -> dict[str, object]:
    """The arguments typer gives the command function for the command line `request.argv()`: each field as the
    parameter of its name (`sets` as `set_`), a repeated option's values as a list, none given as typer gives it
    (None where the parameter defaults to None, else an empty list). The other parameters are left at their
    defaults, as typer leaves an option the command line does not give."""
    signature = inspect.signature(function_of(request))
    given: dict[str, object] = {}
    for field in dataclasses.fields(request):
        value = getattr(request, field.name)
        parameter = "set_" if field.name == "sets" else field.name
        if isinstance(value, tuple):
            value = list(value) if value or signature.parameters[parameter].default is not None else None
        given[parameter] = value
    return given


def call(request: StageRequest) -> None:
    """Run the command `request` asks for in this process: its command function called with `parameters`. Its
    errors are what the command makes of them (`kit.reports_errors`: one line and a `typer.Exit`)."""
    function_of(request)(**parameters(request))


def exit_code(request: StageRequest) -> int:
    """`call(request)` with the exit code a process of its command line ends with: 0, or the code of the
    `typer.Exit` it raised (a stop as the root group makes it: one line, 128 + N, `kit.one_line_errors`). A bug
    raises, with its traceback."""
    try:
        with one_line_errors():
            call(request)
    except typer.Exit as stop:
        return stop.exit_code
    return 0

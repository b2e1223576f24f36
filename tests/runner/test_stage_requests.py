"""A stage's request (`burnqed.runner.requests`) and the command it runs agree by construction: the command line a
request renders, parsed by the app's own typer command, gives back the request field for field (`request_of`), for
every stage of the iterations the pipeline builds; so an option added to a request or a command cannot drift from
the other."""

from __future__ import annotations

import dataclasses

import pytest

from burnqed.config import load_config
from burnqed.runner.plan import SHARD, Stage, iteration_of, with_judge_steps
from burnqed.runner.requests import (
    IDENTITY,
    EvalRequest,
    MergeRequest,
    OtherRequest,
    SearchRequest,
    SftRequest,
    StageRequest,
    StartRequest,
    TrainEbmRequest,
)
from tests.processes import request_of

DEFAULT: list[str] = []
EVERYTHING = ["rl.enabled=true", "search.mode=sketch", 'pipeline.eval_modes=["whole","hybrid"]',
              "pipeline.noise_temperature=1.2", "pipeline.search_shards=3", "search.unsolved_budget_factor=2",
              "pipeline.start=best", "pipeline.benchmark=s3://b/bench.json"]
JOINT = ["sft.joint=true", "pipeline.start=base", "pipeline.search_value_model=helped"]  # and its study's stages


def stages(sets: list[str], *, judged: bool = False) -> list[Stage]:
    """The stages of iterations 0..2 under `sets`; with `judged` a judge step after each eval (lean.judge =
    comparator)."""
    cfg = load_config(sets=sets)
    return [stage for i in range(3) for stage in (with_judge_steps if judged else lambda it: it)(
        iteration_of(cfg, "s3://bucket/run", i)).stages]


@pytest.mark.parametrize(("sets", "judged", "commands"), [
    (DEFAULT, False, {"data prepare", "start", "sft", "export", "train-ebm", "search", "merge-trajectories", "eval",
                      "report"}),
    (DEFAULT, True, {"data prepare", "start", "sft", "export", "train-ebm", "search", "merge-trajectories", "eval",
                     "judge", "report"}),
    (EVERYTHING, False, {"data prepare", "start", "sft", "rl", "export", "train-ebm", "search", "merge-trajectories",
                         "eval", "report"}),
    (JOINT, False, {"data prepare", "start", "sft", "export", "train-ebm", "search", "merge-trajectories", "eval",
                    "joint-study", "report"}),
], ids=["default", "judged", "rl-sketch", "joint-study"])
def test_every_stage_request_is_what_its_command_line_asks_the_app_for(sets: list[str], judged: bool,
                                                                       commands: set[str]) -> None:
    seen: set[str] = set()
    for stage in stages(sets, judged=judged):
        for shard in range(stage.shards):
            request = stage.request_for(shard)
            assert request_of(request.argv()) == request, stage.name
            redone = request.redone()  # as `iterate --force` runs it again
            assert request_of(redone.argv()) == redone, stage.name
            seen.add(" ".join(request.command))
    assert seen == commands


def test_a_redone_request_is_its_stage_with_its_own_force_and_without_resume() -> None:
    search = SearchRequest(iteration=0, shard="0/2", resume=True, output="o")
    assert search.redone() == dataclasses.replace(search, resume=False, force=True)
    assert search.redone().argv() == ("search", "--iter", "0", "--shard", "0/2", "--output", "o", "--force")
    evaluated = EvalRequest(resume=True, force=True, output="e.json").redone()
    assert evaluated.argv() == ("eval", "--iter", "0", "--pass-n", "1", "--output", "e.json", "--force")
    merged = MergeRequest(inputs=("a", "b"), output="m").redone()
    assert merged.argv() == ("merge-trajectories", "a", "b", "--output", "m", "--force")
    start = StartRequest(root="r", iteration=1, output="s.json")  # no --force: it writes its record at every run
    assert start.redone() == start and start.argv() == ("start", "--root", "r", "--iter", "1", "--output", "s.json")
    other = OtherRequest(words=("compare", "x.json")).redone()
    assert other.argv() == ("compare", "x.json", "--force")


def test_only_the_run_flags_are_outside_a_stage_identity() -> None:
    """`force` and `resume` say how the command runs, not what it makes: marked so, and nothing else is."""
    from burnqed.runner import requests

    kinds = [kind for kind in vars(requests).values() if isinstance(kind, type) and issubclass(kind, StageRequest)
             and kind is not StageRequest]
    outside = {kind.__name__: {f.name for f in dataclasses.fields(kind) if f.metadata.get(IDENTITY) is False}
               for kind in kinds}
    assert outside == {kind.__name__: {"force", "resume"} & {f.name for f in dataclasses.fields(kind)}
                       for kind in kinds}
    assert outside["SearchRequest"] == outside["EvalRequest"] == {"force", "resume"}
    assert outside["StartRequest"] == set()


def test_a_fanned_out_request_names_its_shard_in_every_field() -> None:
    [search] = [stage for stage in stages(EVERYTHING) if stage.name == "search"][-1:]
    assert isinstance(search.request, SearchRequest) and search.request.shard == f"{SHARD}/3"
    second = search.request_for(1)
    assert isinstance(second, SearchRequest)
    assert (second.shard, second.output) == ("1/3", "s3://bucket/run/iter_2/search/shard-1")
    assert search.argv_for(1) == list(second.argv()) and SHARD not in " ".join(second.argv())


def test_a_request_renders_each_field_as_its_option() -> None:
    sft = SftRequest(iteration=2, data="d", trajectories=("t0", "t1"), start="s.json", sets=("sft.joint=false",),
                     output="o")
    assert sft.argv() == ("sft", "--iter", "2", "--data", "d", "--trajectories", "t0", "--trajectories", "t1",
                          "--start", "s.json", "--set", "sft.joint=false", "--output", "o")
    evaluated = EvalRequest(iteration=1, theorems="b.json", split="test", budgets="5,20", pass_n=2, ebm="e",
                            ablation=True, model="m", sets=("search.mode=whole",), output="r.json")
    assert request_of(evaluated.argv()) == evaluated
    assert evaluated.config_sets() == ["search.mode=whole", 'policy.model="m"']
    ebm = TrainEbmRequest(iteration=1, trajectories=("t",), model="m", init="i", output="o")
    assert request_of(ebm.argv()) == ebm and ebm.config_sets() == ['policy.model="m"']
    other = OtherRequest(words=("lean", "selftest"))
    assert other.argv() == ("lean", "selftest") and other.config_sets() == []


def test_every_request_field_is_a_parameter_of_its_command() -> None:
    """Each request type's fields are parameters of its command (a renamed option fails here)."""
    import typer

    from burnqed.cli import app
    from burnqed.runner import requests

    root = typer.main.get_command(app)
    kinds = [kind for kind in vars(requests).values() if isinstance(kind, type)
             and issubclass(kind, StageRequest) and kind.command]
    assert len(kinds) == 12
    for kind in kinds:
        command = root
        for word in kind.command:
            command = command.commands[word]  # type: ignore[attr-defined]
        params = {param.name for param in command.params}
        fields = {"set_" if f.name == "sets" else f.name for f in dataclasses.fields(kind)}
        assert fields <= params, (kind.__name__, fields - params)


def test_the_runner_reads_no_command_line_back() -> None:
    """runner/ builds, renders and judges requests: it imports neither typer nor click (the command line is parsed by
    the commands alone)."""
    import ast
    from pathlib import Path

    import burnqed.runner

    imported: set[str] = set()
    for module in Path(burnqed.runner.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    assert "burnqed" in imported and not imported & {"typer", "click"}

"""One vocabulary for the command line (burnqed/commands/vocabulary.py, docs/commands.md "One vocabulary"): every
command's help walked from the typer app — `--model` is the policy model, `--trajectories` an input, `--iter`
optional, no type noise, the panels of `burnqed --help` — and each renamed option's old spelling working as the new
one with its deprecation line."""

from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer import _click
from typer.core import TyperArgument, TyperOption

from burnqed.cli import app
from burnqed.commands.vocabulary import LISTING, PANELS, RENAMES, Command, Group, deprecation_line, model_set
from burnqed.layout import Layout
from burnqed.storage import Store
from tests.eval.test_report import publish
from tests.processes import cli

TYPE_NOISE = re.compile(r"<(?:bool|str|int|float|path|file|list\[[^\]]*\]|(?:int|float) range|[a-z_]+)>")


def commands(group: typer.core.TyperGroup | None = None,
             path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], _click.Command]]:
    """Every command and group of the `burnqed` app with its path (`("data", "prepare")`), the root first."""
    group = group or typer.main.get_group(app)
    yield path, group
    for name, command in group.commands.items():
        if isinstance(command, typer.core.TyperGroup):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name), command


@functools.cache
def help_of(path: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    """`burnqed PATH -h` rendered 200 columns wide, once for the module (four tests read every command's help)."""
    return cli(*path, "-h", terminal_width=200)


def options(name: str) -> list[tuple[tuple[str, ...], TyperOption]]:
    """Every option declared under the long name `name`, with its command's path."""
    return [(path, param) for path, command in commands() for param in command.params
            if isinstance(param, TyperOption) and name in param.opts]


def test_every_command_and_group_is_built_with_the_vocabulary_classes() -> None:
    built = {path: command for path, command in commands()}
    assert len(built) == 41  # the root, 21 commands, 7 groups and their 12 commands
    for path, command in built.items():
        expected = Group if isinstance(command, typer.core.TyperGroup) else Command
        assert isinstance(command, expected), path


def test_the_top_level_help_lists_every_command_in_its_panel_in_order() -> None:
    root = typer.main.get_group(app)
    assert list(LISTING) == root.list_commands(typer.Context(root))
    assert set(LISTING) == set(root.commands)
    shown = cli("-h", terminal_width=160).stdout
    titles = re.findall(r"╭─ ([A-Z][a-z ]+) ─", shown)
    assert titles == ["Options", *PANELS]
    listed = re.findall(r"^│ ([a-z-]+) {2,}", shown.split("╭─ Getting started", 1)[1], flags=re.MULTILINE)
    assert listed == list(LISTING)


@pytest.mark.slow  # every command's help, rendered
def test_no_help_shows_type_noise_and_every_value_option_names_what_it_takes() -> None:
    for path, command in commands():
        shown = help_of(path)
        assert shown.returncode == 0, (path, shown.stderr)
        assert TYPE_NOISE.search(shown.stdout) is None, (path, TYPE_NOISE.search(shown.stdout))
        assert "Usage: burnqed" in shown.stdout
        context = typer.Context(command)
        for param in command.get_params(context):
            if isinstance(param, TyperOption):
                expected_blank = param.is_flag or param.count
                assert (param.metavar == "") == expected_blank, (path, param.opts, param.metavar)
            if isinstance(param, TyperArgument):
                assert param.metavar and param.metavar.rstrip(".").isupper(), (path, param.name, param.metavar)


def test_model_is_the_policy_model_wherever_a_command_takes_it() -> None:
    found = {path: param for path, param in options("--model")}
    assert sorted(found) == [("ebm", "embed"), ("eval",), ("iterate",), ("plan",), ("run-all",), ("search",),
                             ("serve",), ("submit",), ("train-ebm",)]
    for path, param in found.items():
        assert (param.help or "").startswith("The policy model"), path
        assert "policy.model" in (param.help or "") or "--param model" in (param.help or ""), path
    # The commands that run an iteration: the same words, and SFT's base besides (the iteration trains what it
    # evaluates as its base).
    for path in (("iterate",), ("plan",), ("run-all",)):
        shown = found[path].help or ""
        assert shown.startswith(found[("eval",)].help.split(" Default:")[0] + " Here it is also SFT's base "  # type: ignore[union-attr]
                                "(--set sft.base_model=DIR|URI)"), path


def test_model_is_the_set_of_policy_model_it_equals() -> None:
    assert model_set(None, ["lean.workers=2"]) == ["lean.workers=2"]
    assert model_set("runs/iter_0/export", None) == ['policy.model="runs/iter_0/export"']
    # Last, so it wins over an earlier --set; JSON-quoted, so a folder named 1 stays a path.
    assert model_set("1", ["policy.model=x"]) == ["policy.model=x", 'policy.model="1"']
    from burnqed.config import load_config

    assert load_config(None, model_set("1", ["policy.model=x"]) or [], {}).policy.model == "1"
    # iterate, run-all and plan: SFT's base too, winning over an earlier --set of either.
    assert model_set("m", ["sft.base_model=x"], base=True) == ['sft.base_model=x', 'policy.model="m"',
                                                               'sft.base_model="m"']
    both = load_config(None, model_set("1", ["sft.base_model=x", "policy.model=y"], base=True) or [], {})
    assert (both.policy.model, both.sft.base_model) == ("1", "1")


@pytest.mark.slow  # one command start
def test_iterate_plan_and_run_all_take_the_model_as_the_base_their_sft_fine_tunes_and_their_base_eval_evaluates(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # plan refuses a --model naming no model folder, as iterate does: one is here
    (tmp_path / "my-model").mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (tmp_path / "my-model" / name).write_text("{}")
    done = cli("plan", "--root", str(tmp_path / "runs"), "--model", "my-model")
    assert done.returncode == 0, done.stderr
    (base,) = [line for line in done.stdout.splitlines() if " eval-base " in line]
    assert base.endswith(f"--model my-model --output file://{tmp_path}/runs/iter_0/eval-base/eval.json")
    # the same settings reach every stage run: the configuration iterate's children load (burnqed.runner.local.env_for)
    from burnqed.config import load_config
    from burnqed.runner.local import env_for

    env = env_for(model_set("my-model", None, base=True) or [], None, {})
    cfg = load_config(None, (), env)
    assert (cfg.policy.model, cfg.sft.base_model) == ("my-model", "my-model")


def test_trajectories_is_a_prefix_to_read_wherever_a_command_takes_it() -> None:
    found = {path: param for path, param in options("--trajectories")}
    assert sorted(found) == [("ebm", "embed"), ("joint-study",), ("rl",), ("sft",), ("show",), ("train-ebm",)]
    for path, param in found.items():
        assert (param.help or "").startswith("Trajectory prefix to read"), path
        assert param.metavar == "PREFIX", path
    named = sorted((path, opt) for path, command in commands() for param in command.params
                   if isinstance(param, TyperOption) for opt in param.opts if "trajector" in opt)
    writes = [(path, opt) for path, opt in named if opt != "--trajectories"]
    assert writes == [(("eval",), "--no-trajectories-out"), (("eval",), "--trajectories-out")]


def test_iter_is_optional_everywhere_with_its_default_said() -> None:
    found = {path: param for path, param in options("--iter")}
    assert sorted(found) == [("eval",), ("iterate",), ("joint-study",), ("plan",), ("report",), ("rl",), ("search",),
                             ("sft",), ("show",), ("start",), ("submit",), ("train-ebm",)]
    reads_a_run = {("joint-study",), ("report",), ("show",), ("start",)}
    for path, param in found.items():
        assert not param.required and param.metavar == "I", path
        if path in reads_a_run:
            assert param.default is None and "Default: the last" in (param.help or ""), path
        else:
            assert param.default == 0 and param.show_default, path
    shown = help_of(("iterate",)).stdout
    row = shown.split("│ --iter ", 1)[1].split("│ --", 1)[0]
    assert row.split()[0] == "I" and "[default: 0]" in row


@pytest.mark.parametrize(("command", "old", "new"), [(c, o, n) for c, names in RENAMES.items()
                                                     for o, n in names.items()])
def test_every_rename_is_hidden_from_help_and_its_old_spelling_still_parses(command: str, old: str, new: str) -> None:
    (renamed,) = [c for path, c in commands() if path == (command,)]
    declared = {opt for param in renamed.params if isinstance(param, TyperOption) for opt in (*param.opts,
                                                                                            *param.secondary_opts)}
    assert new in declared and old not in declared
    shown = help_of((command,)).stdout
    assert re.search(rf"{re.escape(old)}\b(?!-)", shown) is None


def _run(*args: str, cwd: Path) -> tuple[int, list[str]]:
    """The command in this process, from `cwd`: its exit code and stderr lines."""
    done = cli(*args, cwd=cwd)
    return done.returncode, done.stderr.splitlines()


@pytest.mark.slow  # five commands, each to its first refusal
def test_an_old_spelling_works_as_the_new_one_after_one_deprecation_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    new = _run("eval", "--output", "r.json", "--trajectories-out", "a-file", cwd=tmp_path)
    refusal = "error: --trajectories-out a-file is a file; give a folder"
    assert new == (2, [refusal])
    for spelling in (["--trajectories", "a-file"], ["--trajectories=a-file"]):
        assert _run("eval", "--output", "r.json", *spelling, cwd=tmp_path) == (2, [
            deprecation_line("--trajectories", "--trajectories-out"), refusal])
    assert _run("eval", "--output", "r.json", "--resume", "--no-trajectories", cwd=tmp_path) == (2, [
        deprecation_line("--no-trajectories", "--no-trajectories-out"),
        "error: --resume continues an eval from its trajectories, which --no-trajectories-out does not keep: drop "
        "--no-trajectories-out"])
    assert _run("export", "--model", "nothere", "--output", "out", cwd=tmp_path) == (2, [
        "warning: --model is now --sft; the old spelling goes in the next release", "error: nothere does not exist"])
    assert _run("export", "--sft", "nothere", "--output", "out", cwd=tmp_path) == (2, ["error: nothere does not exist"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


@pytest.mark.slow  # one command to its first refusal
def test_an_old_spelling_as_an_options_value_is_left_alone(tmp_path: Path) -> None:
    # `--run-id --trajectories` on eval: a value, not an option; only option names are read as old spellings
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    assert _run("eval", "--output", "a-file/r.json", "--split", "--trajectories", cwd=tmp_path) == (2, [
        f"error: --output a-file/r.json: {tmp_path}/a-file is a file, not a folder; choose another path"])


@pytest.mark.slow  # the report's plots
def test_report_without_output_writes_the_last_finished_iteration_into_the_run_layout(tmp_path: Path,
                                                                                        store: Store) -> None:
    at = Layout(f"file://{tmp_path}/runs")
    publish(at.eval_result(0), {"world_0"}, store=store)
    publish(at.eval_result(1), {"world_0", "world_1"}, iteration=1, store=store)
    (tmp_path / "runs" / "iter_2" / "data").mkdir(parents=True)  # iteration 2 runs: no eval yet
    code, lines = _run("report", "--root", "runs", "--iter", "2", cwd=tmp_path)
    assert (code, lines) == (2, [
        f"error: iteration 2's eval is not finished ({at.eval_result(2)} does not exist): `burnqed iterate --iter 2 "
        f"--root runs` writes its report to {at.report(2)} when it is; give --output to write a report of what there "
        "is elsewhere"])
    assert not (tmp_path / "runs" / "iter_2" / "report").exists()
    done = cli("report", "--root", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    assert f"report: {at.report(1)}/report.md" in done.stdout.splitlines()
    assert store.is_done(at.report(1)) and not (tmp_path / "runs" / "iter_0" / "report").exists()
    empty = tmp_path / "empty"
    (empty / "iter_0").mkdir(parents=True)
    assert _run("report", "--root", "empty", cwd=tmp_path) == (2, [
        f"error: file://{empty} holds no iteration with a finished eval (file://{empty}/iter_0/eval/eval.json, …): "
        "run `burnqed iterate --root empty` first, or give --root and --iter"])
    for iteration in ((), ("--iter", "0")):
        assert _run("report", "--root", "nonexistent", *iteration, cwd=tmp_path) == (2, [
            f"error: file://{tmp_path}/nonexistent does not exist, so it holds no run; a new run starts there with "
            "`burnqed iterate --root nonexistent`"])
    for iteration in ((), ("--iter", "1")):  # `start` reads the same root, and says the same of a missing one
        assert _run("start", "--root", "nonexistent", *iteration, cwd=tmp_path) == (2, [
            f"error: file://{tmp_path}/nonexistent does not exist, so it holds no run; a new run starts there with "
            "`burnqed iterate --iter 0 --root nonexistent`"])
    # a mistyped --root beside the run root: named, and a later iteration is refused too, not taken for a new run
    assert _run("report", "--root", "runz", cwd=tmp_path) == (2, [
        f"error: file://{tmp_path}/runz does not exist, so it holds no run; did you mean --root runs? a new run "
        "starts there with `burnqed iterate --root runz`"])
    assert _run("iterate", "--iter", "2", "--root", "runz", cwd=tmp_path) == (2, [
        f"error: file://{tmp_path}/runz does not exist, so it holds no run; did you mean --root runs? a new run "
        "starts there with `burnqed iterate --iter 0 --root runz`"])
    assert not (tmp_path / "runz").exists()
    code, lines = _run("report", "--root", "nonexistent", "--iter", "0", "--output", "elsewhere", cwd=tmp_path)
    assert code == 2 and f"(file://{tmp_path}/nonexistent does not exist)" in lines[0]


@pytest.mark.slow  # command starts
def test_an_empty_model_is_refused_naming_the_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `--model "$MODEL"` with MODEL unset said "storage URI: empty URI" (eval, search) or named three settings
    monkeypatch.chdir(tmp_path)
    said = {"eval": "policy.model", "search": "policy.model", "iterate": "sft.base_model and policy.model",
            "plan": "sft.base_model and policy.model"}
    for command, default in said.items():
        args = ["--output", "out"] if command in ("eval", "search") else ["--root", "runs"]
        refused = cli(command, "--model", "", *args)
        assert (refused.returncode, refused.stdout, refused.stderr) == (
            2, "", "error: --model is empty (an unset variable?): give a model folder (a path or URI), or leave "
            f"--model out for {default} (unset: the tiny embedded model)\n"), command
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # every command's help, rendered
def test_output_and_iter_show_one_placeholder_each() -> None:
    # the new user's count: --output showed FILE|URI, PREFIX, URI, PATH and TEXT (on seven commands), --iter
    # "I [0<=x<=2147483647]" beside "I [x>=0]"
    from burnqed.commands.vocabulary import OUTPUT_METAVAR

    shown: dict[str, set[str]] = {"--output": set(), "--iter": set()}
    for path, command in commands():
        context = typer.Context(command)
        names = {opt for param in command.get_params(context) for opt in getattr(param, "opts", [])}
        if not names & set(shown):
            continue
        text = help_of(path).stdout
        for option, seen in shown.items():
            row = re.search(rf"│ [* ]*{option}(?: +-o)? +([A-Z|]+(?: \[[^\]]*\])?)", text)
            if option in names:
                assert row is not None, (path, option)
                local = option == "--output" and path in (("render",), ("model", "init-tiny"))  # Path options
                assert row.group(1) == ("PATH" if local else OUTPUT_METAVAR) or option == "--iter", (path, row[1])
                seen.add(row.group(1))
    assert shown == {"--output": {"PATH|URI", "PATH"}, "--iter": {"I [x>=0]", "I [x>=1]"}}  # x>=1: start, joint-study

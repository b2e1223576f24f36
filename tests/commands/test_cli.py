"""The `burnqed` command as a user runs it: exit codes, stdout/stderr, files written; in this process
(tests/processes.py `cli`) but for the entry point itself (`--help`, `--version`), run as `python -m burnqed.cli`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import double_argv
from tests.processes import cli

DOUBLE_COMMAND = json.dumps(double_argv())


def write_index(path: Path, theorems: list[dict[str, str]]) -> Path:
    path.write_text(json.dumps({"name": "mini", "theorems": theorems}), encoding="utf-8")
    return path


@pytest.mark.slow
def test_help_and_version():
    result = cli("--help", process=True, timeout=60)
    assert result.returncode == 0
    assert "lean" in result.stdout and "config" in result.stdout
    assert cli("--version", process=True, timeout=60).stdout.strip().startswith("burnqed ")


@pytest.mark.slow
def test_lean_check_reports_start_failures(tmp_path: Path):
    index = write_index(
        tmp_path / "index.json",
        [{"name": "ok1", "statement": "p"}, {"name": "broken", "statement": "bad thing"},
         {"name": "dies", "statement": "crash"}, {"name": "ok2", "statement": "∀ x : 𝔽, x = x"}],
    )
    report_path = tmp_path / "out" / "report.json"
    result = cli("lean", "check", "--theorems", str(index), "--output", str(report_path),
                     "--set", f"lean.command={DOUBLE_COMMAND}", "--set", "lean.workers=2")
    assert result.returncode == 0, result.stderr
    version, summary = result.stdout.splitlines()
    assert version == f"Pantograph 0.3.4 (from `{' '.join(double_argv())} --version`)"
    assert summary.startswith("started 2/4 (")
    assert "not started: broken: elab:" in result.stderr and "unknown identifier 'bad thing'" in result.stderr
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert (report["total"], report["started"], report["pantograph_version"]) == (4, 2, "0.3.4")
    assert [f["name"] for f in report["failures"]] == ["broken", "dies"]
    assert report["failures"][1]["error_kind"] == "crash"
    assert [t["name"] for t in report["theorems"]] == ["ok1", "broken", "dies", "ok2"]
    assert report["theorems"][0]["state"] == "⊢ p"  # the declaration's own goal (a sorry start)
    assert list(report_path.parent.iterdir()) == [report_path]  # no temp files left behind


@pytest.mark.slow
def test_lean_check_runs_on_a_prototype_benchmark_index(tmp_path: Path):
    # The prototype's published indexes: {"theorems": [{"name", "statement"}]}, no top-level name.
    index = tmp_path / "minif2f_test.json"
    index.write_text(json.dumps({"theorems": [
        {"name": "mathd_algebra_10", "statement": "abs ((120 : ℝ) / 100 * 30 - 130 / 100 * 20) = 10"},
        {"name": "amc12a_2019_p21", "statement": "bad statement"}]}, ensure_ascii=False), encoding="utf-8")
    report_path = tmp_path / "report.json"
    result = cli("lean", "check", "--theorems", str(index), "--output", str(report_path),
                     "--set", f"lean.command={DOUBLE_COMMAND}", "--set", "lean.workers=1",
                     "--set", "lean.pantograph_version=0.3.2")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "Pantograph 0.3.2 (from lean.pantograph_version)"
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert (report["index"], report["total"], report["started"]) == ("minif2f_test", 2, 1)
    # The embedded default: minilean says which version it emulates when asked.
    default = cli("lean", "check", "--theorems", str(index), "--set", "lean.workers=1")
    assert default.returncode == 0, default.stderr
    assert default.stdout.splitlines()[0] == (f"Pantograph 0.3.4 (from `{sys.executable} -m minilean "
                                              "--fallback-module minilean.replay --version`)")
    # A statement minilean cannot elaborate (`abs` is outside its fragment, the ill-formed one is no statement) goes
    # to its fallback, the replay server, which starts only what its corpus records: neither starts, each with
    # minilean's own reason.
    assert default.stdout.splitlines()[1].startswith("started 0/2 (")
    assert default.stderr.splitlines()[-2:] == [
        "  not started: mathd_algebra_10: elab: the theorem does not elaborate: unknown identifier 'abs'",
        "  not started: amc12a_2019_p21: elab: the theorem does not elaborate: unknown identifier 'bad'"]


@pytest.mark.slow
def test_a_credential_in_lean_env_is_one_line_exit_2(tmp_path: Path):
    index = write_index(tmp_path / "index.json", [{"name": "a", "statement": "p"}])
    result = cli("lean", "check", "--theorems", str(index), "--set", 'lean.env={"AWS_SECRET_ACCESS_KEY": "x"}')
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "AWS_SECRET_ACCESS_KEY looks like a credential" in result.stderr


@pytest.mark.parametrize(
    ("index_text", "message"),
    [
        ("{not json", "is not valid JSON"),
        ('{"name": "x", "theorems": [{"nam": "a"}]}', "theorems.0.name: Field required"),
        ('{"name": "x", "theorems": []}', "lists no theorems"),
        ('{"name": "x", "theorems": [{"name": "a", "statement": "p"}, {"name": "a", "statement": "q"}]}',
         "duplicate theorem name 'a'"),
        ('{"name": "x", "theorems": [{"name": "a", "statement": 3}]}', "theorems.0.statement"),
    ],
)
@pytest.mark.slow
def test_malformed_index_is_one_line_exit_2_nothing_written(tmp_path: Path, index_text: str, message: str):
    index = tmp_path / "index.json"
    index.write_text(index_text, encoding="utf-8")
    out = tmp_path / "out"
    result = cli("lean", "check", "--theorems", str(index), "--output", str(out / "r.json"))
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: theorem index")
    assert message in lines[0]
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "lean.wrkers=2"], "error: invalid configuration: unknown key lean.wrkers (from --set lean.wrkers)"),
        (["--set", "lean.workers=two"], "lean.workers: Input should be a valid integer"),
        (["--config", "/nonexistent.toml"], "error: config file /nonexistent.toml does not exist"),
    ],
)
@pytest.mark.slow
def test_bad_configuration_is_one_line_exit_2(tmp_path: Path, args: list[str], message: str):
    index = write_index(tmp_path / "index.json", [{"name": "a", "statement": "p"}])
    out = tmp_path / "r.json"
    result = cli("lean", "check", "--theorems", str(index), "--output", str(out), *args)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert message in result.stderr
    assert not out.exists()


@pytest.mark.slow
def test_lean_that_cannot_start_is_exit_1_with_the_reason(tmp_path: Path):
    index = write_index(tmp_path / "index.json", [{"name": "a", "statement": "p"}])
    command = json.dumps(double_argv("--no-ready", "1"))
    result = cli("lean", "check", "--theorems", str(index), "--set", f"lean.command={command}",
                     "--set", "lean.workers=1", "--output", str(tmp_path / "r.json"))
    assert result.returncode == 1
    assert "exited with code 1 before printing `ready.`" in result.stderr
    assert not (tmp_path / "r.json").exists()


@pytest.mark.slow
def test_env_overrides_reach_the_command():
    unset: dict[str, str | None] = {name: None for name in os.environ if name.startswith("BURNQED_")}
    result = cli("config", "show", "--set", "lean.recycle_requests=7", env={**unset, "BURNQED_LEAN__WORKERS": "3"})
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["lean"]["workers"] == 3
    assert shown["lean"]["recycle_requests"] == 7


@pytest.mark.parametrize(("args", "message"), [
    (["--root", "s3://"], "--root 's3://': no bucket name"),
    (["--set", "lean.workers=100000"], "lean.workers=100000 + 1 verifier worker (lean.verifier_workers) does not fit"),
])
def test_iterate_refuses_before_its_first_stage(tmp_path: Path, args: list[str], message: str):
    """A malformed run root or a Lean worker count the machine cannot hold: one line, exit 2, no stage started
    (before, `--root s3://` wrote the iteration into a local folder `s3:` and the worker count failed each stage)."""
    root = ["--root", str(tmp_path / "run")] if args[0] != "--root" else []
    result = cli("iterate", "--iter", "0", *root, *args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and message in result.stderr and "Traceback" not in result.stderr
    assert "stages" not in result.stderr and list(tmp_path.iterdir()) == []


def test_eval_help_and_the_commands_page_name_every_search_mode() -> None:
    """`eval --help` names the sketch mode beside the whole-proof ones, and docs/commands.md's rows of `search` and
    `eval` name every mode `search.mode` takes."""
    import re

    from burnqed.records.enums import SearchMode

    shown = cli("eval", "--help", env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert shown.returncode == 0, shown.stderr
    text = " ".join(re.sub(r"[│╭╰─╮╯]", " ", shown.stdout).split())
    assert ("`--set search.mode=whole|hybrid` evaluates the whole-proof modes, `--set search.mode=sketch` sketch "
            "search (a planner writes `have … := by sorry` sketches") in text
    page = (Path(__file__).resolve().parents[2] / "docs" / "commands.md").read_text(encoding="utf-8")
    for command in ("search", "eval"):
        row = next(line for line in page.splitlines() if line.startswith(f"| `burnqed {command} --output"))
        assert [mode.value for mode in SearchMode if f"`{mode.value}`" not in row] == [], command


@pytest.mark.slow  # processes: the entry point completes as a shell asks it to
def test_shell_completion_through_typers_options() -> None:
    shown = cli("--show-completion", "bash", process=True)
    assert shown.returncode == 0 and "_BURNQED_COMPLETE=complete_bash" in shown.stdout, shown.stderr
    asks = {"_BURNQED_COMPLETE": "complete_bash", "COMP_CWORD": "1"}
    done = cli(process=True, env={**asks, "COMP_WORDS": "burnqed ite"})
    assert (done.returncode, done.stdout.split()) == (0, ["iterate"])
    done = cli(process=True, env={**asks, "COMP_WORDS": "burnqed eval --theo", "COMP_CWORD": "2"})
    assert (done.returncode, done.stdout.split()) == (0, ["--theorems"])
    assert "--install-completion" in cli("--help").stdout


@pytest.mark.slow  # two command starts
def test_iterate_dry_run_prints_the_plan_and_runs_nothing(tmp_path: Path) -> None:
    args = ["--iter", "0", "--root", str(tmp_path / "runs"), "--set", "pipeline.search_shards=1"]
    dry = cli("iterate", "--dry-run", *args)
    planned = cli("plan", *args)
    assert (dry.returncode, dry.stdout, dry.stderr) == (planned.returncode, planned.stdout, planned.stderr)
    assert dry.returncode == 0 and dry.stdout.startswith("todo  prepare-data ")
    assert not (tmp_path / "runs").exists()

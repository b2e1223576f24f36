"""A new user's first mistakes, run as they run them (the command line app, tests/processes.py `cli`): each is one
line on stderr with the documented exit code and the way forward, no traceback, nothing written."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.processes import cli

# What the commands make of Lean's replies is the subject, not the worker's process: minilean answers in this
# process (tests/conftest.py `minilean_in_process`).
pytestmark = pytest.mark.usefixtures("minilean_in_process")


def error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one error line: the last line of stderr, with no traceback before it."""
    assert "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: "), done.stderr
    return last


@pytest.mark.slow  # one command start (it starts the Lean pool before the model)
def test_a_mistyped_model_path_is_bad_input_naming_the_folder_it_likely_meant(tmp_path: Path) -> None:
    (tmp_path / "models" / "tiny").mkdir(parents=True)
    done = cli("eval", "--output", "r.json", "--set", "policy.model=models/tyni", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert error_line(done) == "error: model folder models/tyni does not exist; did you mean models/tiny?"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models"]


@pytest.mark.slow  # one command start
@pytest.mark.parametrize("text", ["", "  \n\n", "import Mathlib\n-- the theorems come later\n"])
def test_a_lean_source_without_a_theorem_is_one_line_naming_it(tmp_path: Path, text: str) -> None:
    (tmp_path / "bench.lean").write_text(text, encoding="utf-8")
    done = cli("data", "prepare", "--output", "data", "--source", "benchmark=bench.lean", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert error_line(done) == (
        "error: no theorems resulted from data.sources: source 0 benchmark: 0 rows, 0 rejected, 0 kept, 0 pairs; "
        "source 0 (benchmark, bench.lean): no rows (no theorem, lemma or example is declared in it)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.lean"]


@pytest.mark.slow  # two command starts
def test_a_lean_file_with_no_theorem_given_as_the_benchmark_names_the_command_that_prepares_it(tmp_path: Path) -> None:
    (tmp_path / "bench.lean").write_text("import Mathlib\n-- the theorems come later\n", encoding="utf-8")
    done = cli("eval", "--theorems", "bench.lean", "--output", "r.json", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert error_line(done) == (
        "error: --theorems bench.lean: no theorem could be read from it (source 0 benchmark: 0 rows, 0 rejected, "
        "0 kept, 0 pairs; source 0 (benchmark, bench.lean): no rows (no theorem, lemma or example is declared in it)); "
        "a theorem index is a theorems.json: prepare one with `burnqed data prepare --source benchmark=bench.lean "
        "--output DIR` (a benchmark; other kinds of source in docs/data.md), which reports what it read, and pass "
        "--theorems DIR")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.lean"]
    # The way it names says the same, and writes nothing either.
    prepared = cli("data", "prepare", "--source", "benchmark=bench.lean", "--output", "DIR", cwd=tmp_path)
    assert prepared.returncode == 2, prepared.stderr
    assert error_line(prepared).startswith("error: no theorems resulted from data.sources: source 0 benchmark: 0 rows")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.lean"]


@pytest.mark.slow  # one command start
def test_an_empty_theorems_option_never_evaluates_the_embedded_benchmark_instead(tmp_path: Path) -> None:
    done = cli("eval", "--theorems", "", "--output", "r.json", cwd=tmp_path)  # `--theorems "$BENCH"`, BENCH unset
    assert done.returncode == 2, done.stderr
    assert error_line(done) == ("error: --theorems is empty: give a theorem index file, or leave --theorems out to use "
                                "the embedded benchmark")
    assert list(tmp_path.iterdir()) == []


def test_a_mistyped_sft_base_model_is_refused_like_any_model_path(tmp_path: Path) -> None:
    from burnqed.errors import ModelInputError
    from burnqed.sft.model import resolve_base_model
    from burnqed.storage import Store

    (tmp_path / "models" / "base").mkdir(parents=True)
    with pytest.raises(ModelInputError) as caught:
        resolve_base_model(str(tmp_path / "models" / "bsae"), store=Store(cache_dir=tmp_path / "cache"))
    assert str(caught.value) == (f"model folder {tmp_path}/models/bsae does not exist; did you mean "
                                 f"{tmp_path}/models/base?")


@pytest.mark.slow  # one eval of four theorems on the tiny model
def test_a_model_folder_is_evaluated_on_a_lean_file_in_one_command(tmp_path: Path, tiny_model_dir: Path) -> None:
    """The README's "your model on your benchmark": `eval --model DIR --theorems FILE.lean`, the file read as `data
    prepare --source benchmark=FILE.lean` reads it, at the budgets `iterate` evaluates at."""
    from burnqed.config import Config
    from burnqed.runner.plan import build_iteration

    bench = Path(__file__).resolve().parents[1] / "fixtures" / "benchmark" / "MyBench.lean"
    done = cli("eval", "--model", str(tiny_model_dir), "--theorems", str(bench), "--output", "mine/eval.json",
               "--show-theorems", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "mine" / "eval.json").read_text(encoding="utf-8"))
    assert (result["benchmark"], result["model"], result["total"]) == ("MyBench", str(tiny_model_dir), 4)
    budgets = [b["budget"] for b in result["budgets"]]
    iterate_eval = build_iteration(Config().pipeline, "runs", 0).stage("eval").argv
    assert budgets == Config().pipeline.eval_budgets == [10, 50]
    assert iterate_eval[iterate_eval.index("--budgets") + 1] == "10,50"
    assert sorted(t["name"] for t in result["per_theorem"]) == ["my_2023_div_7", "my_demorgan_not_or", "my_gcd_12_18",
                                                                "my_two_x_le_sq_plus_one"]
    assert all(t["failure_reason"] != "start_error" for t in result["per_theorem"])  # every theorem started
    assert "MyBench: per theorem at budget 50 expansions (pass@1)" in done.stdout
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["eval.json", "eval.trajectories"]


def test_the_folders_the_readme_writes_into_are_ignored_by_git() -> None:
    """Every local `--root`/`--output`/`--trajectories` folder the README's commands use (`runs` by default,
    `runs-mine`, `mine/…`, `build/…`) is one `git status` leaves out, so a user's runs never show as changes."""
    import re
    import shutil

    root = Path(__file__).resolve().parents[2]
    if shutil.which("git") is None or not (root / ".git").exists():
        pytest.skip("no git checkout")
    readme = (root / "README.md").read_text(encoding="utf-8")
    given = re.findall(r"--(?:root|output|trajectories)[ =]([^\s`'\"]+)", readme)
    folders = {"runs"} | {value.split("/")[0] for value in given if "://" not in value}
    assert {"runs", "runs-mine", "mine", "build"} <= folders
    for folder in sorted(folders):
        done = subprocess.run(["git", "check-ignore", "-q", "--no-index", f"{folder}/x"], cwd=root, check=False)
        assert done.returncode == 0, f"{folder}/ is not ignored by .gitignore"

"""The commands `iterate`, `run-all`, `report` and `eval` name for the user to run next carry the --root, --model,
--config and --sets the user gave (`clikit.carried`, `clikit.suggestion`): typed as printed, they act on the same
run, where the bare command would act on storage.root under the embedded defaults."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from burnqed import storage
from burnqed.commands.kit import carried, show_sets, suggestion
from burnqed.storage import Store
from tests.pipeline.test_gates import finished_iteration
from tests.processes import cli


def test_a_suggestion_repeats_what_was_given_as_a_shell_reads_it_back() -> None:
    carry = carried(root="runs mine", model="m", config=Path("c.toml"), sets=["a.b=1", 'c.d=["x", "y"]'])
    assert carry == ["--root", "runs mine", "--model", "m", "--config", "c.toml", "--set", "a.b=1", "--set",
                     'c.d=["x", "y"]']
    line = suggestion(["iterate", "--iter", "1"], carry)
    assert line == ("burnqed iterate --iter 1 --root 'runs mine' --model m --config c.toml --set a.b=1 --set "
                    "'c.d=[\"x\", \"y\"]'")
    assert shlex.split(line)[1:] == ["iterate", "--iter", "1", *carry]
    assert suggestion(["show", "THEOREM"], carried()) == "burnqed show THEOREM"


def test_a_suggested_show_repeats_only_the_sets_it_reads() -> None:
    sets = ["policy.ready_timeout_s=100", "storage.cache_dir=c", " storage.root = r", 'pipeline.eval_modes=["whole"]',
            "pipeline.eval_budgets=[5]", "lean.workers=1", "storagex.y=1"]
    assert show_sets(sets) == ["storage.cache_dir=c", " storage.root = r", 'pipeline.eval_modes=["whole"]']
    assert show_sets(None) == []


@pytest.mark.slow  # one in-process iterate, refused before any stage
def test_iterate_names_the_unfinished_iteration_with_the_options_it_was_given(tmp_path: Path, tiny_model_dir: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my-model").symlink_to(tiny_model_dir)  # a model folder: --model is checked before the iterations
    (tmp_path / "mine.toml").write_text("[search]\ntimeout_s = 30\n", encoding="utf-8")
    done = cli("iterate", "--iter", "1", "--root", "runs-mine", "--model", "my-model",
               "--config", "mine.toml", "--set", "lean.workers=1")
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [  # a root that does not exist: said so (commands.vocabulary.require_run_root)
        f"error: file://{tmp_path}/runs-mine does not exist, so it holds no run; a new run starts there with "
        "`burnqed iterate --iter 0 --root runs-mine --model my-model --config mine.toml --set lean.workers=1`"]


@pytest.mark.slow  # one in-process iterate over a finished iteration
def test_a_finished_iteration_names_the_next_one_and_show_with_the_options_it_was_given(
        tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    finished_iteration(storage.normalize(str(tmp_path / "runs-mine")), go=True, store=store)
    done = cli("iterate", "--root", "runs-mine", "--set", "policy.ready_timeout_s=100",
               "--set", "storage.cache_dir=cache")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == (
        "next: `burnqed iterate --iter 1 --root runs-mine --set policy.ready_timeout_s=100 --set "
        "storage.cache_dir=cache` runs iteration 1; "
        "`burnqed show THEOREM --iter 0 --root runs-mine --set storage.cache_dir=cache` draws one theorem's search")


@pytest.mark.slow  # in-process iterates over a finished iteration whose gate said STOP
def test_after_a_stop_next_says_what_the_gate_measured_and_how_to_go_on(tmp_path: Path, store: Store,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A baseline the base hardly reaches on a user's own benchmark is a STOP, not the end: `next:` says what the gate
    measured and names the `iterate --iter 1` that goes on with the gate lowered; a gate that could not be measured
    leaves no iteration to propose."""
    monkeypatch.chdir(tmp_path)
    finished_iteration(storage.normalize(str(tmp_path / "runs-mine")), go=False, store=store)
    done = cli("iterate", "--root", "runs-mine")
    assert done.returncode == 0, done.stderr  # iterate does not stop at a gate: it says so
    assert done.stdout.splitlines()[-1] == (
        "next: iteration 0's decision: no-go by the baseline gate: base solves 1.0%; to go on anyway, `burnqed "
        "iterate --iter 1 --root runs-mine --set pipeline.gate_min_rate=0` runs iteration 1 with the gate lowered "
        "(run-all: --no-gates); see its report.md; `burnqed show THEOREM --iter 0 --root runs-mine` draws one "
        "theorem's search")
    finished_iteration(storage.normalize(str(tmp_path / "runs-unmeasured")), go=False, measured=False, store=store)
    done = cli("iterate", "--root", "runs-unmeasured")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == (
        "next: no iteration 1 (iteration 0's decision: none: the baseline gate could not be measured (`run-all` stops "
        "here)); see its report.md; `burnqed show THEOREM --iter 0 --root runs-unmeasured` draws one theorem's search")

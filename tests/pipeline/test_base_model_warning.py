"""`iterate`, `run-all` and `plan` say before any work when iteration 0's eval-base would evaluate another model as
"the untrained base" than the one SFT starts from (`policy.model` set, `sft.base_model` not): read from the plan's
eval-base command line and the settings (`local.base_model_warning`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from burnqed.config import load_config
from burnqed.errors import ConfigError
from burnqed.runner.checks import base_model_warning
from burnqed.runner.iterate import run_iterations
from burnqed.runner.local import LocalRunner
from burnqed.runner.plan import build_iteration
from burnqed.storage import Store
from tests.processes import cli

ROOT = "file:///runs"  # a plan only: nothing is read or written there
WARNING = ("warning: eval-base evaluates /models/prover (policy.model) as the untrained base, but SFT starts from the "
           "tiny embedded model (sft.base_model is unset): the report's base → iteration 0 would compare two different "
           "models; to train from /models/prover, set sft.base_model=/models/prover")


def warning_for(*sets: str, iteration: int = 0) -> str | None:
    cfg = load_config(sets=list(sets))
    plan = build_iteration(cfg.pipeline, ROOT, iteration, base_model=cfg.sft.base_model)
    return base_model_warning(plan, cfg)


def test_the_warning_names_both_models_only_when_they_differ() -> None:
    assert warning_for("policy.model=/models/prover") == WARNING
    assert warning_for("policy.model=/models/prover", "sft.base_model=/models/prover") is None  # eval-base: --model
    assert warning_for("sft.base_model=/models/prover") is None
    assert warning_for() is None  # both the tiny embedded model
    assert warning_for("policy.model=/models/prover", iteration=1) is None  # no eval-base after iteration 0
    assert warning_for("policy.model=/models/prover", "pipeline.eval_base=false") is None


@pytest.mark.slow  # imports the local runner's stage machinery
def test_iterate_warns_before_any_stage_runs(tmp_path: Path, store: Store) -> None:
    """The warning comes first: here the run then stops at an unknown --only stage, before anything ran."""
    cfg = load_config(sets=["policy.model=/models/prover"])
    root = f"file://{tmp_path}/runs"
    said: list[tuple[str, bool]] = []

    def echo(message: str, *, err: bool = False) -> Any:
        said.append((message, err))

    with pytest.raises(ConfigError, match="unknown stage"):
        run_iterations([0], root, ["no-such-stage"], LocalRunner(store=store), cfg, store,
                                                                 gates=False, echo=echo)
    assert said == [(WARNING, True), (f"iteration 0 under {root}: 9 stages", True)]
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow  # the whole command line in this process
def test_plan_prints_the_warning_before_the_stages(tmp_path: Path) -> None:

    root, model = str(tmp_path / "runs"), tmp_path / "prover"  # a model folder: plan refuses one not there
    model.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (model / name).write_text("{}")
    done = cli("plan", "--root", root, "--set", f"policy.model={model}")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [WARNING.replace("/models/prover", str(model))]
    assert done.stdout.splitlines()[1].startswith("todo  eval-base")
    plain = cli("plan", "--root", root)
    assert plain.returncode == 0 and plain.stderr == ""

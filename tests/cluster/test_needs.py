"""The early check of what a command imports beyond burnqed's dependencies (burnqed/cluster/needs.py): the table
per command and settings, and the one-line refusal (exit 2) before any work. That the table names everything a
command imports: tests/cluster/test_rehearsal.py (`assert_imports_checked`, every rehearsed container's imports)."""

from __future__ import annotations

import importlib.util
from importlib import metadata
from pathlib import Path

import pytest

from burnqed.cluster import needs
from burnqed.cluster.images import declared
from burnqed.cluster.needs import command_needs, extra_distributions
from burnqed.config import Config
from tests.processes import cli

TRAIN = ("peft", "trl", "datasets", "bitsandbytes", "torch", "transformers", "tokenizers", "safetensors",
         "accelerate")


def table(command: str, cfg: Config | None = None, **options: bool) -> list[tuple[str, str]]:
    return [(need.distribution, need.extra) for need in command_needs(command, cfg or Config(), **options)]


def test_each_command_needs_the_extras_of_what_it_does() -> None:
    assert extra_distributions("train") == TRAIN  # pyproject.toml's train extra with its burnqed[model]
    assert extra_distributions("value") == ("torch", "safetensors")
    for command in ("sft", "rl", "export"):
        assert table(command) == [(name, "train") for name in TRAIN], command
    served = Config.model_validate({"rl": {"enabled": True, "rollout_engine": "served"}})
    assert table("rl", served) == table("rl")
    joint = Config.model_validate({"sft": {"joint": True}})
    assert table("sft", joint) == table("sft")  # the value model's torch and safetensors: in the train extra already
    served = Config.model_validate({"policy": {"backend": "sglang", "model": "s3://b/base"},
                                    "ebm": {"encoder_backend": "serve"}})
    for command in ("eval", "search"):
        assert table(command) == table(command, Config.model_validate({"policy": {"backend": "sglang"}})) == []
        assert table(command, ebm=True) == [("torch", "value"), ("safetensors", "value"),
                                            ("tokenizers", "modelfolder")]  # the default encoder: local
        assert table(command, served) == [("tokenizers", "modelfolder")]  # the probe of the served model's tokenizer
        assert table(command, served, ebm=True) == [("torch", "value"), ("safetensors", "value"),
                                                    ("tokenizers", "modelfolder")]
    assert table("train-ebm", served) == [("torch", "value"), ("safetensors", "value")]
    assert table("train-ebm") == [("torch", "value"), ("safetensors", "value"), ("tokenizers", "modelfolder")]
    hub = Config.model_validate({"data": {"sources": [{"kind": "lean-github", "path": "internlm/Lean-Github"}]}})
    local = Config.model_validate({"data": {"sources": [{"kind": "lean-github", "path": "s3://b/lean.jsonl"}]}})
    assert table("data prepare", hub) == [("datasets", "hub")] and table("data prepare", local) == []
    assert table("fetch") == [] and table("fetch", model_folder=True) == [("tokenizers", "modelfolder")]
    assert table("report") == [("matplotlib", "report")]
    assert table("merge-trajectories") == table("start") == []
    constrained = Config.model_validate({"search": {"mode": "sketch"}, "planner": {"constrained": True}})
    grammar = [(name, "grammar") for name in ("xgrammar", *TRAIN[4:])]  # xgrammar, then burnqed[model]
    assert table("search", constrained) == table("eval", constrained) == grammar  # the policy plans, in this process
    assert table("sft", constrained) == table("sft")
    served = Config.model_validate({"search": {"mode": "sketch"},
                                    "planner": {"constrained": True, "backend": "sglang"}})
    assert table("search", served) == []  # the planner's server samples under the grammar
    assert table("search", Config.model_validate({"search": {"mode": "sketch"}})) == []


def test_each_distribution_a_need_names_installs_the_module_it_checks() -> None:
    installs = metadata.packages_distributions()
    for extra in ("model", "grammar", "train", "value", "hub", "modelfolder", "report"):
        for need in needs.extra_needs(extra, "x"):
            assert need.distribution in [name.lower() for name in installs.get(need.module, [])], need


def test_a_command_without_a_package_it_needs_refuses_before_any_work(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *rest: None if name in ("safetensors", "trl", "peft") else found(name, *rest))
    result = cli("eval", "--ebm", str(tmp_path / "no-ebm"), "--output", str(tmp_path / "eval.json"))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == ("error: burnqed eval: the value model (--ebm) needs the safetensors package, which is not "
                             "installed here: pip install 'burnqed[value]' (the core, train, rl images install it)\n")
    result = cli("rl", "--sft", str(tmp_path / "no-sft"), "--output", str(tmp_path / "rl"))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == ("error: burnqed rl: training with TRL and peft needs the peft package, which is not "
                             "installed here (also missing: trl, safetensors): pip install 'burnqed[train]' (the "
                             "train, rl images install it)\n")
    assert sorted(path.name for path in tmp_path.iterdir()) == []  # nothing read, nothing written
    assert {"safetensors", "trl", "peft"} <= needs.CHECKED
    assert [name for name, image in declared().items() if "trl" in image.distributions()] == ["train", "rl"]


def test_the_report_without_matplotlib_goes_on_without_its_plots(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *rest: None if name == "matplotlib" else found(name, *rest))
    assert [(n.distribution, n.optional) for n in command_needs("report", Config())] == [("matplotlib", True)]
    (tmp_path / "run").mkdir()
    result = cli("report", "--root", str(tmp_path / "run"), "--iter", "0")  # past the check, to the missing eval
    first, second = result.stderr.splitlines()
    assert first == ("warning: drawing the report's plots needs the matplotlib package, which is not installed here: "
                     "the report is written without them (pip install 'burnqed[report]')")
    assert second.startswith("error: iteration 0's eval is not finished") and result.returncode == 2

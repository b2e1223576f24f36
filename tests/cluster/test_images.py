"""Stages run where they are placed: the images' one declaration (burnqed/cluster/images.toml, read by the
Dockerfiles) holds what each step's command needs - hub data for `data prepare`, torch and safetensors for the
value model - and render (so submit and `cluster check`) refuses a step that would fail in its pod, or a value-model
device its container does not have; the device is pinned per container."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from burnqed.cluster.images import (
    DEVICE_ENV,
    Image,
    declared,
    fetch_requirements,
    step_requirements,
)
from burnqed.cluster.needs import hub_sources
from burnqed.cluster.render import render_templates
from burnqed.config import Config, load_config
from burnqed.errors import ConfigError
from burnqed.runner.plan import build_iteration
from tests.cluster.conftest import ROOT, WORKFLOWS, by_name, template
from tests.cluster.test_check import add_config, install
from tests.processes import cli

REAL = ROOT / "configs" / "deepseek-prover-v2-7b.toml"


def distribution_packages() -> list[str]:
    """The top-level packages pyproject.toml's `packages.find` ships (burnqed, leankit, minilean)."""
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    found = sorted(path.name for pattern in include for path in ROOT.glob(pattern.rstrip("*"))
                   if (path / "__init__.py").is_file())
    assert {"burnqed", "leankit", "minilean"} <= set(found), found
    return found


def test_the_sidecar_image_installs_burnqed_with_what_it_imports() -> None:
    """The sglang image installs burnqed alone (no embedded Lean), and so leankit, which burnqed imports."""
    dockerfile = (ROOT / "images" / "sglang" / "Dockerfile").read_text()
    ignore = (ROOT / "images" / "sglang" / "Dockerfile.dockerignore").read_text().splitlines()
    for package in ("burnqed", "leankit"):
        assert f"COPY {package} /src/{package}\n" in dockerfile and f"!{package}/" in ignore, package


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env") or []}


def test_the_dockerfiles_install_what_images_toml_declares() -> None:
    for name in ("core", "train", "rl"):
        dockerfile = (ROOT / "images" / name / "Dockerfile").read_text()
        assert f'images.toml", "rb"))["{name}"]' in dockerfile
        assert '"/src[$(python -c "$DECLARED" extras)]"' in dockerfile
        assert '--index-url "$(python -c "$DECLARED" torch_index)"' in dockerfile
        assert "/src[k8s" not in dockerfile and "/src[train" not in dockerfile  # no second list of extras
        # every package the distribution ships (pyproject.toml's packages.find) is copied into the image and let
        # through the build context
        ignore = (ROOT / "images" / name / "Dockerfile.dockerignore").read_text().splitlines()
        for package in distribution_packages():
            assert f"COPY {package} /src/{package}\n" in dockerfile, (name, package)
            assert f"!{package}/" in ignore, (name, package)
    core, train = declared()["core"], declared()["train"]
    assert {"datasets", "safetensors", "torch", "s3fs", "tokenizers"} <= core.distributions()
    assert "transformers" not in core.distributions()  # burnqed.policy.modelfolder writes a tokenizer without it
    assert {"datasets", "safetensors", "torch", "peft", "transformers"} <= train.distributions()
    assert not core.cuda and train.cuda
    # the rl image: the train image's packages, and the Lean of the core image of its triple, copied from it
    rl, dockerfile = declared()["rl"], (ROOT / "images" / "rl" / "Dockerfile").read_text()
    assert rl.extras == train.extras and rl.torch_index == train.torch_index and rl.cuda
    assert f"ARG LEAN_TRIPLE={rl.lean_triple}\n" in dockerfile and rl.lean_triple == core.lean_triple
    assert "FROM ${CORE_IMAGE} AS lean\n" in dockerfile
    for folder in ("/home/burnqed/.elan", "/opt/pantograph", "/opt/mathlib-project"):
        assert f"COPY --from=lean --chown=burnqed:burnqed {folder} {folder}\n" in dockerfile


def test_the_real_configuration_renders_and_pins_the_value_model_device() -> None:
    cfg = load_config(REAL, (), {})
    assert hub_sources(cfg) == ["internlm/Lean-Github", "internlm/Lean-Workbook", "Goedel-LM/Lean-workbook-proofs"]
    docs = render_templates(cfg, ["iteration"], WORKFLOWS)
    one = by_name(docs, "burnqed-iteration-1")
    assert env_of(template(one, "train-ebm")["container"])[DEVICE_ENV] == "cuda"  # its own GPU, CUDA torch
    for name in ("search", "eval"):
        assert env_of(template(one, name)["container"])[DEVICE_ENV] == "cpu"  # the sidecar holds the GPU
        assert template(one, name)["container"]["image"].endswith(f"/burnqed-core:{cfg.cluster.image_tag or '0.1.0'}")
    zero = by_name(docs, "burnqed-iteration-0")
    assert template(zero, "prepare-data")["container"]["image"].split("/")[-1].startswith("burnqed-core:")
    assert DEVICE_ENV not in env_of(template(zero, "search")["container"])  # no value model in iteration 0


def test_a_device_the_container_does_not_have_is_refused_at_render() -> None:
    cfg = load_config(REAL, ["ebm.device=cuda"], {})
    with pytest.raises(ConfigError, match=r"step search: ebm.device = 'cuda', but its main container has no GPU "
                                          r"\(the pod's GPU belongs to its SGLang sidecar"):
        render_templates(cfg, ["iteration"], WORKFLOWS)
    cpu = load_config(REAL, ["ebm.device=cpu"], {})
    one = by_name(render_templates(cpu, ["iteration"], WORKFLOWS), "burnqed-iteration-1")
    assert env_of(template(one, "train-ebm")["container"])[DEVICE_ENV] == "cpu"


def test_an_image_without_what_a_step_imports_is_refused() -> None:
    cfg = load_config(REAL, (), {})
    bare = Image("core", ("k8s", "report"), "https://download.pytorch.org/whl/cpu", False,
                 frozenset({"torch", "s3fs"}))
    stages = {s.name: s for s in build_iteration(cfg.pipeline, root="s3://b/r", iteration=1,
                                                 base_model=cfg.sft.base_model).stages}
    zero = {s.name: s for s in build_iteration(cfg.pipeline, root="s3://b/r", iteration=0).stages}
    with pytest.raises(ConfigError, match=r"step prepare-data: data.sources internlm/Lean-Github, .* are Hugging Face "
                                          r"hub names, read with the `datasets` package, which the core image"):
        step_requirements(zero["prepare-data"], cfg, bare, gpu=False, where="step prepare-data")
    with pytest.raises(ConfigError, match=r"step search loads the value model, which needs safetensors, not in the "
                                          r"core image"):
        step_requirements(stages["search"], cfg, bare, gpu=False, where="step search")
    with pytest.raises(ConfigError, match=r"fetch-model writes the served model's tokenizer \(`burnqed fetch "
                                          r"--model-folder`\) with the `tokenizers` package, which the core image"):
        fetch_requirements(bare, where="fetch-model")
    fetch_requirements(declared()["core"], where="fetch-model")
    with pytest.raises(ConfigError, match=r"^step report: drawing the report's plots needs matplotlib, not in the core "
                                          r"image \(extras k8s, report in burnqed/cluster/images.toml\): add the "
                                          r"`report` extra there and rebuild$"):
        step_requirements(stages["report"], cfg, bare, gpu=False, where="step report")  # burnqed.cluster.needs
    local = Config.model_validate({"data": {"sources": [{"kind": "lean-github", "path": "s3://b/lean-github.jsonl"}]}})
    assert step_requirements(zero["prepare-data"], local, bare, gpu=False, where="x") == []  # no hub name


@pytest.mark.slow
def test_cluster_check_refuses_what_the_pods_cannot_use(fake_kube, tmp_path: Path) -> None:
    install(fake_kube)
    add_config(fake_kube, '[ebm]\ndevice = "cuda"', rerender=False)  # render would refuse it
    result = cli("cluster", "check", env={"COLUMNS": "200"})
    assert result.returncode == 2
    assert "step search: ebm.device = 'cuda', but its main container has no GPU" in result.stderr

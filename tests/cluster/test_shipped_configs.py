"""Every configuration in configs/ rendered as a user renders it (`burnqed render iteration eval --config FILE`, from a
folder holding the benchmarks it names, as the files' comments clone them): a local path a pod would read is refused
in one line naming the upload and the `--set`s that fix it, and, once those are applied, every pod reads what its
stage reads: no path of this machine in any argument, a sidecar wherever `sglang` is the policy's backend, a GPU
wherever the pod is on the GPU pool, our images, and no setting without effect (burnqed/cluster/podinputs.py)."""

from __future__ import annotations

import itertools
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from burnqed.cluster.podinputs import pod_input_refusal, without_effect
from burnqed.cluster.render import render_templates
from burnqed.cluster.yamlio import load_documents
from burnqed.config import load_config
from burnqed.policy.sglang import is_loopback
from tests.cluster.argo_rules import containers
from tests.cluster.conftest import ROOT, WORKFLOWS
from tests.processes import cli

CONFIGS = sorted((ROOT / "configs").glob("*.toml"))
BASE_MODEL = "s3://my-bucket/models/DeepSeek-Prover-V2-7B"  # what eval-base's refusal asks for: the base model's URI
IN_POD = ("/models/", "/etc/burnqed/", "/tmp/", "/opt/")  # the pods' own folders (volumes, the image's Mathlib)
CLONE = re.compile(r"git clone (\S+)")
SET = re.compile(r"--set ('[^']*'|\S+)")


def clone_benchmarks(folder: Path, cfg_path: Path) -> None:
    """The local benchmark folders `cfg_path` names under the repositories its comments `git clone`, as the user
    has them (one .lean file each)."""
    cfg = load_config(cfg_path, (), {})
    cloned = [url.rstrip("/").rsplit("/", 1)[-1] for url in CLONE.findall(cfg_path.read_text())]
    for path in {cfg.pipeline.benchmark, *(source.path for source in cfg.data.sources)}:
        if path is not None and path.split("/")[0] in cloned:
            (folder / path).mkdir(parents=True, exist_ok=True)
            (folder / path / "A.lean").write_text("theorem a : 1 = 1 := by\n  sorry\n")


def render(path: Path, out: Path, sets: list[str]) -> subprocess.CompletedProcess[str]:
    args = ["render", "iteration", "eval", "--config", str(path), "--output", str(out)]
    return cli(*args, *(part for item in sets for part in ("--set", item)))


def fixes(refusal: str) -> list[str]:
    """The `--set KEY=VALUE`s a refusal names, as a shell would read them."""
    return [shlex.split(found)[0] for found in SET.findall(refusal)]


def effective(args: list[str], key: str, default: str) -> str:
    """The last `--set KEY=VALUE` of a step's arguments, else `default` (the configuration's)."""
    value = default
    for flag, item in itertools.pairwise(args):
        if flag == "--set" and item.startswith(f"{key}="):
            value = item.partition("=")[2]
    return value


def local_paths(args: list[str]) -> list[str]:
    """The arguments (and `--set` values) that name a path of the rendering machine: anything with a slash that is
    no URI, no workflow parameter and none of the pod's own folders."""
    found = []
    for arg in args:
        value = arg.partition("=")[2] if "=" in arg and not arg.startswith("-") else arg
        if arg.startswith("-") or "/" not in value or "://" in value or "{{" in value or value.startswith(IN_POD):
            continue
        found.append(arg)
    return found


def check_pod(workflow: str, step: dict[str, Any], cfg: Any) -> None:
    main = step["container"]
    args = [str(a) for a in main["args"]]
    sidecars = {s["name"]: s for s in step.get("sidecars") or []}
    where = f"{workflow}/{step['name']}"
    assert local_paths(args) == [], where
    for _, container in containers(step):
        image = container["image"].rsplit("/", 1)[-1].split(":")[0]
        assert image in {"burnqed-core", "burnqed-train", "burnqed-rl", "burnqed-sglang"}, where
    if args[0] in ("eval", "search"):
        backend = effective(args, "policy.backend", cfg.policy.backend)
        url = effective(args, "policy.url", cfg.policy.url)
        if backend == "sglang" and is_loopback(url):  # served on the pod's loopback: by its sidecar
            assert "sglang" in sidecars, f"{where}: policy.backend sglang at {url} without a sidecar"
            assert sidecars["sglang"]["image"].rsplit("/", 1)[-1].startswith("burnqed-sglang:"), where
            assert main["image"].rsplit("/", 1)[-1].startswith("burnqed-core:"), where
    gpus = [c for _, c in containers(step) if "nvidia.com/gpu" in ((c.get("resources") or {}).get("limits") or {})]
    on_gpu_pool = step["metadata"]["labels"]["burnqed.io/node-pool"] == "gpu"
    assert on_gpu_pool == bool(gpus), f"{where}: on the {'GPU' if on_gpu_pool else 'CPU'} pool with {len(gpus)} GPUs"


@pytest.mark.slow
@pytest.mark.parametrize("path", CONFIGS, ids=[path.stem for path in CONFIGS])
def test_every_shipped_configuration_renders_pods_that_run(path: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    clone_benchmarks(tmp_path, path)
    cfg = load_config(path, (), {})
    sets: list[str] = []
    refusal = pod_input_refusal(cfg)
    if refusal is not None:  # local inputs: refused in one line, before anything is written
        refused = render(path, tmp_path / "out", sets)
        assert refused.returncode == 2 and refused.stderr == f"error: {refusal}\n"
        assert not (tmp_path / "out").exists()
        sets = fixes(refusal)
        assert sets, refusal
    done = render(path, tmp_path / "out", sets)
    if done.returncode != 0 and "sft.base_model" in done.stderr:  # eval-base of an sglang policy with nothing to serve
        assert done.stderr.startswith("error: workflow iteration: step eval-base evaluates the untrained base model "
                                      "with policy.backend = 'sglang' at http://127.0.0.1:30000"), done.stderr
        assert done.stderr.count("\n") == 1
        sets.append(f"sft.base_model={BASE_MODEL}")
        done = render(path, tmp_path / "out", sets)
    assert done.returncode == 0, done.stderr
    final = load_config(path, sets, {})
    assert pod_input_refusal(final) is None and without_effect(final) == []
    checked = 0
    for file in sorted((tmp_path / "out").glob("*.yaml")):
        (doc,) = load_documents(file.read_text())
        for step in doc["spec"]["templates"]:
            if "container" in step:
                check_pod(file.stem, step, final)
                checked += 1
    assert checked >= 10  # iterations 0 and 1 and the eval


def test_the_shipped_files_are_refused_where_a_pod_would_read_a_local_path(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    refused = {}
    for path in CONFIGS:
        clone_benchmarks(tmp_path, path)
        refusal = pod_input_refusal(load_config(path, (), {}))
        refused[path.stem] = None if refusal is None else re.findall(r"(\S+) = '([^']*)' \(([^)]*)\)", refusal)
    assert refused == {
        "deepseek-prover-v2-7b": None,  # every input at an s3:// URI or on the hub
        "minif2f": [("pipeline.benchmark", "miniF2F-lean4/MiniF2F", "a folder on this machine"),
                    ("data.sources[0].path", "miniF2F-lean4/MiniF2F", "a folder on this machine")],
        "proverbench": [("pipeline.benchmark", "deepseek-ai/DeepSeek-ProverBench",
                         "a Hugging Face hub name, which `eval --theorems` does not read")],
        "putnambench": [("pipeline.benchmark", "PutnamBench/lean4/src", "a folder on this machine"),
                        ("data.sources[0].path", "PutnamBench/lean4/src", "a folder on this machine")],
    }


def test_putnambench_refusal_names_the_upload_and_the_sets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = ROOT / "configs" / "putnambench.toml"
    clone_benchmarks(tmp_path, path)
    refusal = pod_input_refusal(load_config(path, (), {}), root="s3://lab/runs/putnam")
    assert refusal is not None and "\n" not in refusal
    assert "`aws s3 cp --recursive PutnamBench/lean4/src s3://lab/burnqed-inputs/src`" in refusal
    assert fixes(refusal) == ["pipeline.benchmark=s3://lab/burnqed-inputs/src",
                              'data.sources=[{"kind": "benchmark", "path": "s3://lab/burnqed-inputs/src", '
                              '"answers": "both"}]']


def test_a_setting_without_effect_is_refused_naming_it_and_what_it_is_for(tmp_path: Path) -> None:
    # putnambench.toml as shipped before: whole-proof budgets for eval_modes stages, with no eval_modes
    sets = ["pipeline.eval_proof_budgets=[32]", "search.mode=whole"]
    assert without_effect(load_config(sets=sets)) == ["eval_proof_budgets"]
    assert without_effect(load_config(sets=[*sets, 'pipeline.eval_modes=["hybrid"]'])) == []
    # search_splits beside search_theorems, which replaces the prepared data's splits
    cfg = load_config(sets=['pipeline.search_splits=["train"]', "pipeline.search_theorems=s3://b/t.json"])
    assert without_effect(cfg) == ["search_splits"]
    with pytest.raises(Exception, match=r"^1 setting\(s\) would have no effect under the others \(every stage of an "
                                        r"iteration runs the same command with or without it\): "
                                        r"pipeline.eval_proof_budgets = \[32\] \(Budgets \(proofs sampled\) of the "
                                        r"eval_modes stages in whole or hybrid mode"):
        render_templates(load_config(sets=sets), ["eval"], WORKFLOWS)
    out = tmp_path / "out"
    refused = cli("render", "eval", "--output", str(out), *(part for item in sets for part in ("--set", item)))
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and not out.exists()


def test_the_embedded_defaults_put_no_pod_on_the_gpu_pool_without_a_gpu(rendered) -> None:
    # eval-base of the tiny embedded model runs it in-process: a Lean pod on the CPU pool (it was on the GPU pool,
    # holding no GPU)
    from burnqed.config import Config

    for doc in rendered:
        for step in doc.doc["spec"]["templates"]:
            if "container" in step:
                check_pod(doc.name, step, Config())
    (iteration_0,) = [doc.doc for doc in rendered if doc.name == "burnqed-iteration-0"]
    (base,) = [step for step in iteration_0["spec"]["templates"] if step["name"] == "eval-base"]
    assert (base["metadata"]["labels"]["burnqed.io/node-pool"], base["priorityClassName"]) == ("cpu", "burnqed-cpu")


def test_submit_dry_run_and_cluster_check_refuse_a_local_benchmark_before_any_work(tmp_path: Path,
                                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                                   fake_argo) -> None:
    monkeypatch.chdir(tmp_path)
    path = ROOT / "configs" / "putnambench.toml"
    clone_benchmarks(tmp_path, path)
    expected = pod_input_refusal(load_config(path, (), {}), root="s3://lab/runs/putnam")
    for args in (["submit", "eval", "--dry-run", "--root", "s3://lab/runs/putnam", "--model", BASE_MODEL],
                 ["submit", "iteration", "--root", "s3://lab/runs/putnam", "--server", fake_argo.url]):
        refused = cli(*args, "--config", str(path))
        assert (refused.returncode, refused.stdout, refused.stderr) == (2, "", f"error: {expected}\n")
    assert fake_argo.requests == []
    # no kubeconfig here (tests/cluster/conftest.py): the refusal comes before the cluster is read
    checked = cli("cluster", "check", "--config", str(path))
    assert (checked.returncode, checked.stderr) == (2, f"error: {pod_input_refusal(load_config(path, (), {}))}\n")


def test_each_input_a_pod_opens_is_checked_where_a_pod_opens_it(tmp_path: Path) -> None:
    mine = tmp_path / "my-model"
    mine.mkdir()
    local = [f"policy.model={mine}", "policy.backend=local"]
    refusal = pod_input_refusal(load_config(sets=local))  # eval-base runs the local policy in-process
    assert refusal is not None and f"policy.model = '{mine}' (a folder on this machine)" in refusal
    assert pod_input_refusal(load_config(sets=[*local, "pipeline.eval_base=false"])) is None  # no pod reads it
    # a hub model is downloaded by no `burnqed fetch`: refused where eval-base's sidecar would serve it
    hub = pod_input_refusal(load_config(sets=["sft.base_model=deepseek-ai/DeepSeek-Prover-V2-7B"]))
    assert hub is not None and "(a Hugging Face hub name, which `burnqed fetch` does not download)" in hub
    assert "`huggingface-cli download deepseek-ai/DeepSeek-Prover-V2-7B --local-dir DeepSeek-Prover-V2-7B && aws s3 " \
           "cp --recursive DeepSeek-Prover-V2-7B s3://BUCKET/burnqed-inputs/DeepSeek-Prover-V2-7B`" in hub
    assert pod_input_refusal(load_config(sets=["sft.base_model=deepseek-ai/DeepSeek-Prover-V2-7B",
                                               "pipeline.eval_base=false"])) is None  # SFT reads the hub itself
    cache = pod_input_refusal(load_config(sets=[f"ebm.cache_uri={tmp_path / 'cache'}"]))
    assert cache is not None and cache.endswith(": leave ebm.cache_uri unset (beside train-ebm's output) or name an "
                                                "s3:// URI")

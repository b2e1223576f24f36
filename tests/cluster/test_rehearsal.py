"""The rehearsal tier (`pytest -m rehearsal`, part of the default run): iterations 0 and 1 of the real-model
workflow (`configs/deepseek-prover-v2-7b.toml` with tests/cluster/rehearsal.py's OVERRIDES) rendered and run step by
step, each container in a venv holding only its image's distributions (tests/cluster/image_venv.py), artifacts on
moto's S3, the sidecar from its own rendered command. Removing a package an image's step imports fails the
rehearsal naming the step and the module. docs/cluster.md, "Rehearsal"."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from burnqed.cluster.needs import extra_distributions
from burnqed.data.index import bundled_index_path
from burnqed.storage import Store
from burnqed.trajectory.reader import read_results
from tests.cluster.image_venv import SERVING, ImageVenv, build_image_venv, venv_env
from tests.cluster.rehearsal import (
    BUCKET,
    MODEL_URI,
    OVERRIDES,
    RL,
    Rehearsal,
    StepFailed,
    StepRun,
    configmap_content,
    rehearsal_config_text,
)

pytestmark = [pytest.mark.rehearsal, pytest.mark.slow, pytest.mark.timeout(3600)]
BENCHMARK_THEOREMS = 3  # of the embedded test split, uploaded to pipeline.benchmark's URI
# The extras whose packages a command's early check covers (burnqed.cluster.needs): all but k8s (S3's and the
# cluster's clients, in every image) and trace (in none), by the module each distribution installs
OPTIONAL = {name.replace("-", "_"): name
            for extra in ("model", "grammar", "train", "value", "hub", "modelfolder", "report")
            for name in extra_distributions(extra)}


def assert_imports_checked(rehearsal: Rehearsal) -> None:
    """Every package of burnqed's extras that a rehearsed container's command imported is one that command's needs
    name (what it checks at its start, burnqed.cluster.needs): a new lazy import of one fails here."""
    assert rehearsal.imports
    for run in rehearsal.imports:
        imported = {OPTIONAL[module] for module in run.modules if module in OPTIONAL}
        unchecked = sorted(imported - run.checked)
        assert not unchecked, f"{run.where}: {' '.join(run.argv[1:3])} imports {unchecked} and checks no need for it"


@dataclass
class Rehearsed:
    rehearsal: Rehearsal
    store: Store
    root: str
    iterations: dict[int, list[StepRun]]
    seconds: float


@pytest.fixture(scope="module")
def rehearsed(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rehearsed]:
    """Iterations 0 and 1 rehearsed once (the tests below read what they left in S3); the AWS variables pointing at
    its moto server are undone when this module's tests end."""
    from tests.doubles.s3 import moto_s3

    mp = pytest.MonkeyPatch()
    work = tmp_path_factory.mktemp("rehearsal")
    started = time.monotonic()
    with moto_s3(BUCKET) as endpoint:
        for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                            "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint,
                            "AWS_EC2_METADATA_DISABLED": "true"}.items():
            mp.setenv(name, value)
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()
        try:
            venvs = {image: build_image_venv(image, work / f"venv-{image}") for image in ("core", "train", SERVING)}
            rehearsal = Rehearsal(venvs, work, endpoint, configmap_content(rehearsal_config_text()))
            cfg = rehearsal.config()
            store = Store(cache_dir=work / "cache", endpoint_url=endpoint, region="us-east-1")
            with store.staged_output(MODEL_URI, "model") as folder:  # the model, published like an export
                shutil.copytree(tiny_model_dir, folder, dirs_exist_ok=True)
            index = json.loads(bundled_index_path("test").read_text())
            index["theorems"] = index["theorems"][:BENCHMARK_THEOREMS]
            assert cfg.pipeline.benchmark and cfg.pipeline.benchmark.startswith(f"s3://{BUCKET}/")
            store.write_bytes(cfg.pipeline.benchmark, json.dumps(index).encode())
            iterations = {i: rehearsal.run(rehearsal.workflow(i)) for i in (0, 1)}
            assert cfg.storage.root
            yield Rehearsed(rehearsal, store, cfg.storage.root, iterations, time.monotonic() - started)
        finally:
            s3fs.S3FileSystem.clear_instance_cache()
            mp.undo()


def test_an_image_venv_holds_only_its_images_distributions(tmp_path: Path) -> None:
    core = build_image_venv("core", tmp_path / "core")
    assert {"datasets", "safetensors", "torch", "s3fs", "hera"} <= core.distributions  # hub, value, k8s extras
    assert not {"transformers", "peft", "trl", "bitsandbytes", "pytest"} & core.distributions

    def imports(venv: ImageVenv, module: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(venv.python), "-c", f"import {module}"], capture_output=True, text=True,
                              env=venv_env(venv), timeout=120, check=False)

    assert imports(core, "datasets, safetensors.torch, s3fs, burnqed.cli").returncode == 0
    denied = imports(core, "transformers")  # installed here, not in the core image
    assert "No module named 'transformers'" in denied.stderr
    no_hub = build_image_venv("core", tmp_path / "no-hub", drop={"datasets"})
    assert "No module named 'datasets'" in imports(no_hub, "datasets").stderr
    assert imports(no_hub, "safetensors.torch").returncode == 0


def test_the_override_set_swaps_only_the_model_the_data_the_lean_server_and_the_budget() -> None:
    assert set(OVERRIDES) == {"model", "data", "lean", "cpu", "budget"}
    name, toml = configmap_content(rehearsal_config_text())
    assert name == "burnqed-config"
    assert "[serving]" in toml and "s3://my-bucket/burnqed/runs" in toml  # the real file's other sections


def test_iterations_0_and_1_run_end_to_end_each_step_in_its_image(rehearsed: Rehearsed) -> None:
    ran = {i: {(run.task, run.image) for run in runs} for i, runs in rehearsed.iterations.items()}
    assert ran[0] == {("prepare-data", "core"), ("eval-base", "core"), ("sft", "train"), ("export", "train"),
                      ("search", "core"), ("search-noise", "core"), ("merge-trajectories", "core"),
                      ("eval", "core"), ("eval-whole", "core"), ("eval-hybrid", "core"), ("report", "core")}
    assert ran[1] == {("start", "core"), ("sft", "train"), ("export", "train"), ("train-ebm", "train"),
                      ("search", "core"), ("merge-trajectories", "core"), ("eval", "core"), ("eval-noebm", "core"),
                      ("eval-whole", "core"), ("eval-hybrid", "core"), ("report", "core")}
    shards = [run.item for run in rehearsed.iterations[1] if run.task == "search"]
    assert shards == ["0"]  # pipeline.search_shards = 1: the fan-out of one
    store, root = rehearsed.store, rehearsed.root
    for stage in ("data", "sft", "export", "trajectories", "report"):
        assert store.is_done(f"{root}/iter_0/{stage}"), stage
    for stage in ("sft", "export", "ebm", "trajectories", "report"):
        assert store.is_done(f"{root}/iter_1/{stage}"), stage
    evaluated = json.loads(store.read_bytes(f"{root}/iter_1/eval/eval.json"))
    assert evaluated  # the value model's eval (search with --ebm against the sidecar's encoder)
    # the core image's commands each ran in its venv (what tests/cluster/test_image_imports.py ran them for): the
    # value model's search and eval against the sidecar's policy and encoder, the init containers' fetch
    core = [argv for _, image, argv in rehearsed.rehearsal.commands if image == "core"]
    assert {argv[1] for argv in core} == {"data", "eval", "fetch", "search", "merge-trajectories", "report", "start"}
    assert ["data", "prepare"] in [list(argv[1:3]) for argv in core]
    assert any("--require-done" in argv for argv in core if argv[1] == "fetch")
    for command in ("search", "eval"):
        assert any("--ebm" in argv and "ebm.encoder_backend=serve" in argv and "policy.backend=sglang" in argv
                   for argv in core if argv[1] == command), command
    assert_imports_checked(rehearsed.rehearsal)
    theorems = json.loads(store.read_bytes(f"{root}/iter_0/data/theorems.json"))["theorems"]
    searched = read_results(f"{root}/iter_1/search/shard-0", store=store)
    assert len(searched) == sum(t["split"] in ("train", "pool") for t in theorems) > 0  # every theorem recorded
    wall = {i: round(sum(run.seconds for run in runs)) for i, runs in rehearsed.iterations.items()}
    cpu = {i: round(sum(run.cpu_seconds for run in runs)) for i, runs in rehearsed.iterations.items()}
    print(f"\nrehearsal: {rehearsed.seconds:.0f} s in all with the venvs and uploads; iteration 0 {wall[0]} s "
          f"({cpu[0]} CPU s), iteration 1 {wall[1]} s ({cpu[1]} CPU s)")
    for i, runs in rehearsed.iterations.items():
        print(f"  iteration {i}: " + ", ".join(f"{r.task}{'-' + r.item if r.item else ''} {r.seconds:.0f}/"
                                               f"{r.cpu_seconds:.0f}" for r in runs))


def _without(rehearsed: Rehearsed, image: str, package: str) -> Rehearsal:
    work = rehearsed.rehearsal.work / f"without-{package}"
    venvs = {**rehearsed.rehearsal.venvs, image: build_image_venv(image, work / "venv", drop={package})}
    return Rehearsal(venvs, work, rehearsed.rehearsal.endpoint, rehearsed.rehearsal.configmap)


def _forget(rehearsed: Rehearsed, path: str) -> None:
    """Delete a finished output of the rehearsed run (the tests after the end-to-end one may rerun its step)."""
    fs, key = rehearsed.store.resolve(f"{rehearsed.root}/{path}")
    assert fs.exists(key), path
    fs.rm(key, recursive=True)


@contextmanager
def _set_aside(rehearsed: Rehearsed, path: str) -> Iterator[None]:
    """Move a finished output of the rehearsed run away while a test reruns its step (a finished output is not
    redone), and back after it: the tests after it read it (the rl step reads iteration 0's SFT)."""
    fs, key = rehearsed.store.resolve(f"{rehearsed.root}/{path}")
    files = [name[len(key) + 1:] for name in fs.find(key)]
    assert files, path
    with tempfile.TemporaryDirectory() as aside:
        for name in files:
            (Path(aside) / name).parent.mkdir(parents=True, exist_ok=True)
            fs.get_file(f"{key}/{name}", str(Path(aside) / name))
        fs.rm(key, recursive=True)
        try:
            yield
        finally:
            if fs.exists(key):
                fs.rm(key, recursive=True)
            for name in files:
                fs.put_file(str(Path(aside) / name), f"{key}/{name}")


def _refused(line: str) -> str:
    """The whole StepFailed message of a pod whose main container refused at its start (burnqed.cluster.needs)."""
    return "^" + re.escape(f"rehearsal: {line}") + "$"


def test_the_train_image_without_datasets_fails_sft(rehearsed: Rehearsed) -> None:
    rehearsal = _without(rehearsed, "train", "datasets")
    with _set_aside(rehearsed, "iter_0/sft"), pytest.raises(StepFailed, match=_refused(
            "step sft failed in the train image: cannot import 'datasets' (exit 2): error: burnqed sft: training "
            "with TRL and peft needs the datasets package, which is not installed here: pip install "
            "'burnqed[train]' (the core, train, rl images install it)")):
        rehearsal.run(rehearsal.workflow(0), only=["sft"])
    assert rehearsed.store.is_done(f"{rehearsed.root}/iter_0/sft")


def test_the_core_image_without_safetensors_fails_the_value_models_eval(rehearsed: Rehearsed) -> None:
    rehearsal = _without(rehearsed, "core", "safetensors")
    _forget(rehearsed, "iter_1/eval/eval.json")
    with pytest.raises(StepFailed, match=_refused(
            "step eval failed in the core image: cannot import 'safetensors' (exit 2): error: burnqed eval: the "
            "value model (--ebm) needs the safetensors package, which is not installed here: pip install "
            "'burnqed[value]' (the core, train, rl images install it)")):
        rehearsal.run(rehearsal.workflow(1), only=["eval"])


def _rl_rehearsal(rehearsed: Rehearsed, drop: set[str] | None = None, *, served: bool = False) -> Rehearsal:
    """The rehearsed run's venvs and S3 with the rl image's venv, and a ConfigMap of the same file with rl.enabled
    (with `served`: rl.rollout_engine = 'served', the rl step's SGLang sidecar)."""
    name = "rl-served" if served else "rl" if not drop else f"rl-without-{'-'.join(sorted(drop))}"
    work = rehearsed.rehearsal.work / name
    venvs = {**rehearsed.rehearsal.venvs, "rl": build_image_venv("rl", work / "venv", drop=drop or ())}
    if served:  # `burnqed serve` stands in for SGLang, and merges the pushed adapters with peft (SGLang's own loader)
        venvs[SERVING] = build_image_venv(SERVING, work / "venv-sglang", add={"peft"})
    also = {"rl": {**RL["rl"], "rollout_engine": "served"}} if served else RL
    return Rehearsal(venvs, work, rehearsed.rehearsal.endpoint, configmap_content(rehearsal_config_text(also)))


def test_the_rl_step_runs_in_the_rl_image_on_iteration_0s_sft(rehearsed: Rehearsed) -> None:
    """The rl step (rl.enabled) as its pod runs it: the rl image's packages, one container with the trainer and the
    Lean workers render pinned, its output published where export reads it."""
    rehearsal = _rl_rehearsal(rehearsed)
    (run,) = rehearsal.run(rehearsal.workflow(0), only=["rl"])
    assert (run.task, run.image) == ("rl", "rl")
    store, root = rehearsed.store, rehearsed.root
    assert store.is_done(f"{root}/iter_0/rl")
    record = json.loads(store.read_bytes(f"{root}/iter_0/rl/rl.json"))
    assert record["sft"] == f"{root}/iter_0/sft" and record["steps"] == 2 and record["method"] == "lora"
    assert_imports_checked(rehearsal)
    assert store.read_bytes(f"{root}/iter_0/rl/sft.json") == store.read_bytes(f"{root}/iter_0/sft/sft.json")
    print(f"\nrehearsal: the rl step {run.seconds:.0f} s ({run.cpu_seconds:.0f} CPU s)")


def test_the_served_rl_step_runs_against_its_sidecar_in_the_rl_and_serving_images(rehearsed: Rehearsed) -> None:
    """rl.rollout_engine = 'served': the pod's sidecar from its rendered command (the base model fetched, LoRA on),
    the trainer in the rl image pointed at it on loopback, each step's adapter pushed to it by path."""
    rehearsal = _rl_rehearsal(rehearsed, served=True)
    if rehearsed.store.is_done(f"{rehearsed.root}/iter_0/rl"):  # the trainer engine's output: this step's is another
        _forget(rehearsed, "iter_0/rl")
    template = next(t for t in rehearsal.workflow(0)["spec"]["templates"] if t["name"] == "rl")
    (sidecar,) = template["sidecars"]
    assert sidecar["name"] == "sglang" and "--enable-lora" in sidecar["args"]
    (run,) = rehearsal.run(rehearsal.workflow(0), only=["rl"])
    assert (run.task, run.image) == ("rl", "rl")
    store, root = rehearsed.store, rehearsed.root
    record = json.loads(store.read_bytes(f"{root}/iter_0/rl/rl.json"))
    assert (record["rollout_engine"], record["method"], record["steps"]) == ("served", "lora", 2)
    assert_imports_checked(rehearsal)
    rollouts = [json.loads(line) for line in store.read_bytes(f"{root}/iter_0/rl/rollouts.jsonl").splitlines()]
    assert [(r["step"], r["weights_version"]) for r in rollouts] == [(1, 0)] * 4 + [(2, 1)] * 4
    print(f"\nrehearsal: the served rl step {run.seconds:.0f} s ({run.cpu_seconds:.0f} CPU s)")


def test_the_rl_image_without_trl_fails_the_rl_step(rehearsed: Rehearsed) -> None:
    rehearsal = _rl_rehearsal(rehearsed, drop={"trl"})
    if rehearsed.store.is_done(f"{rehearsed.root}/iter_0/rl"):  # a finished output is not redone (nor imported for)
        _forget(rehearsed, "iter_0/rl")
    with pytest.raises(StepFailed, match=_refused(
            "step rl failed in the rl image: cannot import 'trl' (exit 2): error: burnqed rl: training with TRL and "
            "peft needs the trl package, which is not installed here: pip install 'burnqed[train]' (the train, rl "
            "images install it)")):
        rehearsal.run(rehearsal.workflow(0), only=["rl"])

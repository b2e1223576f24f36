"""The planner on the cluster (burnqed/workflows/_sidecars.py, burnqed/cluster/gpu_plan.py): a second served planner on
loopback gets its own SGLang sidecar on GPUs of its own in every sketch-mode search pod, with its model fetched
beside the policy's and its own GPU memory plan (refused when it does not fit); a deployment URL gets no sidecar; the
default render has none (the golden files stay as they are)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from burnqed.cluster.gpu_plan import gpu_plan, model_shape, planner_gpu_plan, planner_sidecar
from burnqed.cluster.nodefit import largest_pods
from burnqed.cluster.render import render_templates
from burnqed.cluster.validate import validate_documents
from burnqed.config import Config, load_config
from burnqed.errors import ConfigError
from tests.cluster.argo_rules import containers
from tests.cluster.conftest import WORKFLOWS, by_name, template
from tests.cluster.test_gpu_plan import expected_sglang

PLANNER = ["planner.backend=sglang", "planner.model=s3://bucket/models/planner"]
SKETCH = ["search.mode=sketch", *PLANNER]


def render(sets: list[str], workflow: str = "burnqed-iteration-1") -> dict[str, Any]:
    docs = render_templates(load_config(sets=sets), [], WORKFLOWS)
    assert validate_documents([doc.doc for doc in docs]) == []  # the Argo schema, typos caught
    return by_name(docs, workflow)


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"]}


@pytest.mark.slow  # renders every workflow
def test_a_sketch_mode_search_pod_gets_the_planners_sidecar_on_a_gpu_of_its_own() -> None:
    doc = render(SKETCH)
    search = template(doc, "search")
    policy, planner = search["sidecars"]
    assert (policy["name"], planner["name"]) == ("sglang", "sglang-planner")
    assert policy["resources"]["limits"]["nvidia.com/gpu"] == planner["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert planner["command"] == ["burnqed-sglang"] and planner["image"] == policy["image"]
    env = env_of(planner)
    plan = planner_gpu_plan(load_config(sets=SKETCH))
    assert (env["MODEL_DIR"], env["READY_FILE"], env["HOST"], env["PORT"], env["MEM_FRACTION"]) == (
        "/models/planner", "/models/planner/.burnqed-ready", "127.0.0.1", "30002", f"{plan.sglang_fraction:.3f}")
    assert "EMBED_PORT" not in env  # the value model's encoder stays beside the policy
    assert "EMBED_PORT" in env_of(policy)
    # SGLang alone on its own 80 GB card, the 7B shape (no planner.model_config_json): the policy's alone-figures
    _, fraction, kv_tokens = expected_sglang(79.6, 0.0, 1.0)
    assert (plan.sglang_fraction, plan.kv_tokens) == (fraction, kv_tokens) and env["MEM_FRACTION"] == "0.833"
    assert planner["args"] == ["--sampling-defaults", "openai", "--enable-deterministic-inference"]  # policy.seed 0
    assert {"name": "models", "mountPath": "/models", "readOnly": True} in planner["volumeMounts"]
    fetch, fetch_planner = search["initContainers"]
    assert fetch["name"] == "fetch-model" and fetch_planner["name"] == "fetch-planner"
    assert fetch_planner["args"] == ["fetch", "s3://bucket/models/planner", "/models/planner", "--model-folder"]
    args = search["container"]["args"]
    assert args[-2:] == ["--set", "planner.url=http://127.0.0.1:30002"]
    assert "policy.wait_for_start=true" in args  # the planner's client shares it: its sidecar is waited for too
    annotation = search["metadata"]["annotations"]["burnqed.io/gpu-plan"]
    assert "\nthe planner's sidecar, on 1 GPU(s) of its own: GPU 79.6 GiB" in annotation
    assert all("command" in container for _, container in containers(search))
    # every sketch-mode pod has it; the train steps and the CPU steps do not
    for name in ("eval", "eval-noebm"):
        assert [s["name"] for s in template(doc, name)["sidecars"]] == ["sglang", "sglang-planner"], name
    assert "sidecars" not in template(doc, "sft")


@pytest.mark.slow  # renders every workflow
def test_only_the_sketch_mode_stages_get_it_and_a_deployment_gets_none() -> None:
    doc = render([*PLANNER, "pipeline.eval_modes=[\"sketch\", \"hybrid\"]", "pipeline.eval_proof_budgets=[4]"])
    assert [s["name"] for s in template(doc, "eval-sketch")["sidecars"]] == ["sglang", "sglang-planner"]
    for name in ("search", "eval", "eval-hybrid"):  # step and hybrid mode write no sketch
        assert [s["name"] for s in template(doc, name)["sidecars"]] == ["sglang"], name
        assert not any("planner.url" in arg for arg in template(doc, name)["container"]["args"])
    deployed = render(["search.mode=sketch", "planner.backend=sglang", "planner.url=http://planner.burnqed:30000"])
    search = template(deployed, "search")
    assert [s["name"] for s in search["sidecars"]] == ["sglang"]
    assert [c["name"] for c in search["initContainers"]] == ["fetch-model"]
    assert not any("planner.url" in arg for arg in search["container"]["args"])  # the ConfigMap's URL holds


@pytest.mark.slow  # renders every workflow
def test_the_planners_own_gpus_shape_and_arguments_reach_its_sidecar(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 4,
                                  "num_hidden_layers": 24, "intermediate_size": 5632, "vocab_size": 32000,
                                  "torch_dtype": "bfloat16"}), encoding="utf-8")
    sets = [*SKETCH, "planner.gpus=2", f"planner.model_config_json={config}",
            'planner.sglang_args=["--dtype", "bfloat16"]', "policy.seed=null"]
    planner = template(render(sets), "search")["sidecars"][1]
    assert planner["resources"]["requests"]["nvidia.com/gpu"] == "2"
    assert planner["args"] == ["--sampling-defaults", "openai", "--dtype", "bfloat16", "--tp-size", "2"]
    plan = planner_gpu_plan(load_config(sets=sets))
    assert plan.tp == 2 and plan.shape.hidden == 2048 and plan.shape.kv_heads == 4
    assert env_of(planner)["MEM_FRACTION"] == f"{plan.sglang_fraction:.3f}"


def test_the_planners_plan_is_refused_when_it_does_not_fit_and_the_policys_is_unchanged(tmp_path: Path) -> None:
    big = tmp_path / "big.json"  # a 70B Llama shape: 140 GB of bf16 weights
    big.write_text(json.dumps({"hidden_size": 8192, "num_attention_heads": 64, "num_key_value_heads": 8,
                               "num_hidden_layers": 80, "intermediate_size": 28672, "vocab_size": 128256}),
                   encoding="utf-8")
    cfg = load_config(sets=[*SKETCH, f"planner.model_config_json={big}"])
    assert gpu_plan(cfg, encoder=False) == gpu_plan(Config(), encoder=False)
    with pytest.raises(ConfigError) as refused:
        planner_gpu_plan(cfg)
    message = str(refused.value)
    assert message.startswith("GPU memory plan: the planner's SGLang does not fit a 79.6 GiB GPU: SGLang sees 78.6 GiB "
                              "free") and "\n" not in message
    assert message.endswith("fewer than serving.min_kv_tokens 32768; raise planner.gpus, use a larger GPU, or lower "
                            "serving.min_kv_tokens")
    fitted = planner_gpu_plan(load_config(sets=[*SKETCH, f"planner.model_config_json={big}", "planner.gpus=4"]))
    assert fitted.tp == 4 and fitted.kv_tokens >= 32768
    assert model_shape(cfg.serving, cfg.planner.model_config_json).layers == 80
    with pytest.raises(ConfigError, match=r"^planner.model_config_json .*nothing.json: cannot read the model's sizes"):
        planner_gpu_plan(load_config(sets=[*SKETCH, f"planner.model_config_json={tmp_path / 'nothing.json'}"]))


@pytest.mark.slow  # renders every workflow, thrice
def test_render_refuses_a_planner_the_pods_cannot_run() -> None:
    with pytest.raises(ConfigError, match=r"planner\.backend = 'local' would load the planner in the search pod's main "
                                          "container, which has no GPU"):
        render_templates(load_config(sets=["search.mode=sketch", "planner.backend=local"]), [], WORKFLOWS)
    with pytest.raises(ConfigError, match=r"planner\.model is unset: the planner's sidecar serves the model folder it "
                                          "names"):
        render_templates(load_config(sets=["search.mode=sketch", "planner.backend=sglang"]), [], WORKFLOWS)
    # outside sketch mode the planner is not used, so nothing is refused
    render_templates(load_config(sets=["planner.backend=local"]), [], WORKFLOWS)


def test_the_sidecar_is_for_a_served_planner_on_loopback() -> None:
    assert not planner_sidecar(Config())
    assert planner_sidecar(load_config(sets=PLANNER))
    assert planner_sidecar(load_config(sets=[*PLANNER, "planner.url=http://localhost:31000"]))
    assert not planner_sidecar(load_config(sets=[*PLANNER, "planner.url=http://planner.burnqed.svc:30000"]))
    assert not planner_sidecar(load_config(sets=["planner.backend=local"]))


def test_the_gpu_pools_largest_pod_counts_the_planners_gpus() -> None:
    cluster = Config().cluster
    alone = largest_pods(cluster)["gpu"]
    with_planner = largest_pods(cluster, planner_gpus=2)["gpu"]
    assert (alone.gpus, with_planner.gpus) == (1, 3)
    assert with_planner.cpu - alone.cpu == 4 and with_planner.memory - alone.memory == 32 * 2**30  # its sglang_*

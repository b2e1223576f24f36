"""The ready configurations in configs/: the DeepSeek-Prover-V2-7B TOML loads through load_config with the
prototype's settings, its workflows render (memory rule included) and validate against the Argo schema, and the
cluster values install it through the chart: the ConfigMap holds the very file, every object is valid, and the
names agree with the TOML's [cluster] section."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest

from burnqed.cluster.render import render_templates
from burnqed.cluster.validate import validate_documents
from burnqed.cluster.yamlio import load_documents
from burnqed.config import load_config
from tests.cluster.conftest import CHART, ROOT, WORKFLOWS, by_name, template

CONFIGS = ROOT / "configs"
DEEPSEEK = CONFIGS / "deepseek-prover-v2-7b.toml"
VALUES = CONFIGS / "cluster-values.yaml"


def test_the_7b_configuration_loads_with_the_prototypes_settings() -> None:
    cfg = load_config(DEEPSEEK, (), {})
    sft = cfg.sft
    assert (sft.method, sft.lora_r, sft.lora_alpha, sft.lora_dropout) == ("qlora", 16, 32, 0.05)
    assert (sft.learning_rate, sft.scheduler, sft.warmup_steps) == (2e-4, "cosine", 100)
    assert (sft.batch_size, sft.grad_accum, sft.max_length, sft.packing) == (8, 4, 1024, False)
    assert (sft.max_steps, sft.warm_steps, sft.bf16, sft.gradient_checkpointing) == (1500, 800, True, True)
    assert cfg.lean.command == ["pantograph-repl", "--maxHeartbeats=400000", "Mathlib"]
    assert cfg.lean.cwd == "/opt/mathlib-project"
    assert (cfg.policy.backend, cfg.policy.prompt_format, cfg.policy.model) == (
        "sglang", "deepseek-tactic", "DeepSeek-Prover-V2-7B")
    assert cfg.ebm.hidden_dims == [2048, 1024, 512] and cfg.ebm.learning_rate == 3e-5
    assert cfg.search.mode == "step" and cfg.search.max_nodes == 600
    search = cfg.search  # the prototype's shipped hybrid settings, for the whole and hybrid evals
    schedule = (search.num_proofs, search.min_proofs, search.proof_max_tokens, search.proof_min_tokens)
    assert schedule == (32, 4, 1024, 256)
    assert (search.decay_depth, search.max_rounds, search.exploration, search.max_proofs) == (8, 30, 1.41, 256)
    assert cfg.pipeline.eval_modes == ["whole", "hybrid"] and cfg.pipeline.eval_proof_budgets == [32, 128, 256]
    assert cfg.storage.root.startswith("s3://")
    text = DEEPSEEK.read_text()
    assert "batch 8 x 4" in text and "packing = true a row is up to max_length" in text  # what a batch counts


def test_its_workflows_render_fit_and_validate() -> None:
    cfg = load_config(DEEPSEEK, (), {})
    docs = render_templates(cfg, [], WORKFLOWS)
    assert validate_documents([doc.doc for doc in docs]) == []
    search = template(by_name(docs, "burnqed-iteration-1"), "search")
    env = {e["name"]: e["value"] for e in search["container"]["env"]}
    assert (env["BURNQED_LEAN__WORKERS"], env["BURNQED_LEAN__RECYCLE_RSS_MB"]) == ("11", "7500")  # + 1 verifier
    args = template(by_name(docs, "burnqed-iteration-0"), "search")["container"]["args"]
    assert args[args.index("--shard") + 1] == "{{inputs.parameters.shard}}/8"
    params = {p["name"]: p.get("value") for p in by_name(docs, "burnqed-baseline")["spec"]["arguments"]["parameters"]}
    assert params["model"] == "s3://my-bucket/models/DeepSeek-Prover-V2-7B"


def chart(values: dict[str, Any]) -> list[dict[str, Any]]:
    with helm.Chart.load(CHART) as loaded:
        out = loaded.render(values, name="burnqed", namespace="burnqed", is_install=True)
    return [doc for path, text in out.items() if path.endswith(".yaml") for doc in load_documents(text, path)]


@pytest.mark.slow
def test_the_cluster_values_install_the_configuration(tmp_path: Path) -> None:
    values = load_documents(VALUES.read_text())[0]
    values["config"]["toml"] = DEEPSEEK.read_text()  # what --set-file config.toml=… does
    report = helm.lint(CHART, values, strict=True, namespace="burnqed")
    assert report["errors"] == [] and [m for m in report["messages"] if m["severity"] >= 2] == []
    docs = chart(values)
    assert validate_documents(docs) == []
    (config_map,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "burnqed-config"]
    assert config_map["data"]["burnqed.toml"] == DEEPSEEK.read_text()
    mounted = tmp_path / "burnqed.toml"
    mounted.write_text(config_map["data"]["burnqed.toml"])
    assert load_config(mounted, (), {}) == load_config(DEEPSEEK, (), {})


def test_the_cluster_values_name_what_the_templates_refer_to() -> None:
    cluster = load_config(DEEPSEEK, (), {}).cluster
    values = load_documents(VALUES.read_text())[0]
    assert values["serviceAccount"]["name"] == cluster.service_account
    assert values["config"]["name"] == cluster.config_map
    assert values["s3"]["existingSecret"] == cluster.s3_secret
    assert values["artifactRepository"]["name"] == cluster.artifact_repository
    assert values["priorityClasses"]["gpu"]["name"] == cluster.priority_class_gpu
    assert values["priorityClasses"]["cpu"]["name"] == cluster.priority_class_cpu
    bucket = tomllib.loads(DEEPSEEK.read_text())["storage"]["root"].removeprefix("s3://").split("/")[0]
    assert values["artifactRepository"]["s3"]["bucket"] == bucket
    installed = chart({**values, "config": {**values["config"], "toml": DEEPSEEK.read_text()}})
    kinds = {(d["kind"], d["metadata"]["name"]) for d in installed}
    assert ("Secret", f"{cluster.service_account}.service-account-token") in kinds


@pytest.mark.parametrize(("name", "triple", "kind"), [("putnambench", "lean-4.27", "benchmark"),
                                                       ("minif2f", "lean-4.29", "benchmark"),
                                                       ("proverbench", "lean-4.9", "benchmark")])
def test_each_benchmark_configuration_loads_and_names_its_lean(name: str, triple: str, kind: str) -> None:
    from burnqed.cluster.images import lean_triples

    cfg = load_config(CONFIGS / f"{name}.toml", (), {})
    assert [source.kind for source in cfg.data.sources] == [kind]
    assert cfg.pipeline.benchmark == cfg.data.sources[0].path  # the benchmark prepared is the one evaluated
    assert cfg.lean.pantograph_version == lean_triples()[triple].pantograph  # the image triple that builds its Lean
    assert f"lean-{'.'.join(lean_triples()[triple].lean.split('.')[:2])}" == triple

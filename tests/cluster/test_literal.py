"""Configuration values reaching a rendered workflow stay the literals they are: names Kubernetes would refuse and
values Argo would read as a template are refused at render (one line, exit 2, nothing written); newlines, quotes
and YAML syntax keep the documents' structure (burnqed/cluster/literal.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from burnqed.cluster.literal import check_cluster_names
from burnqed.cluster.render import render_templates, render_workflow, to_yaml
from burnqed.cluster.yamlio import load_documents
from burnqed.config import ClusterConfig, Config
from burnqed.errors import InputError
from tests import processes
from tests.cluster.conftest import WORKFLOWS, template


def cluster(**fields: Any) -> ClusterConfig:
    return Config.model_validate({"cluster": fields}).cluster


# ------------------------------------------------------------------------------------------ names


@pytest.mark.parametrize(("fields", "message"), [
    ({"namespace": "Burnqed"}, "cluster.namespace = 'Burnqed' is not a DNS-1123 label"),
    ({"namespace": "a" * 64}, "is not a DNS-1123 label"),
    ({"namespace": "team.a"}, "cluster.namespace = 'team.a' is not a DNS-1123 label"),
    ({"service_account": "burnqed workflow"}, "cluster.service_account = 'burnqed workflow' is not a DNS-1123 "
                                              "subdomain"),
    ({"config_map": "burnqed-config\n"}, "cluster.config_map = 'burnqed-config\\n' is not a DNS-1123 subdomain"),
    ({"s3_secret": "S3"}, "cluster.s3_secret = 'S3' is not a DNS-1123 subdomain"),
    ({"priority_class_gpu": "-gpu"}, "cluster.priority_class_gpu = '-gpu' is not"),
    ({"artifact_repository": "repo_1"}, "cluster.artifact_repository = 'repo_1' is not"),
    ({"image_pull_secrets": ["ok", "Not OK"]}, "cluster.image_pull_secrets[1] = 'Not OK' is not"),
    ({"gpu_node_selector": {"pool name": "gpu"}}, "cluster.gpu_node_selector key = 'pool name' is not a label key"),
    ({"gpu_node_selector": {"Example.com/pool": "gpu"}}, "is not a label key: its prefix before '/' must be"),
    ({"cpu_node_selector": {"pool": "a b"}}, "cluster.cpu_node_selector['pool'] = 'a b' is not a label value"),
    ({"gpu_memory_label": "nvidia.com/gpu memory"}, "cluster.gpu_memory_label = 'nvidia.com/gpu memory' is not"),
    ({"gpu_tolerations": [{"key": "gpu", "operator": "In"}]}, "cluster.gpu_tolerations[0].operator = 'In' is not a "
                                                              "toleration operator (Exists or Equal)"),
    ({"gpu_tolerations": [{"key": "gpu", "operator": "Exists", "value": "x"}]},
     "cluster.gpu_tolerations[0].value = 'x' is not set with operator Exists"),
    ({"cpu_tolerations": [{"key": "spot", "value": "true", "effect": "NoScheduling"}]},
     "cluster.cpu_tolerations[0].effect = 'NoScheduling' is not a taint effect"),
    ({"cpu_tolerations": [{"value": "true"}]}, "cluster.cpu_tolerations[0].key = '' is not empty here"),
    ({"image_registry": "ghcr.io/Burnqed"}, "cluster.image_registry / cluster.image_tag = "
                                            "'ghcr.io/Burnqed/burnqed-core:"),
    ({"image_tag": "v1 beta"}, "is not an image reference"),
    ({"sglang_image": "lmsysorg/sglang:v0.5.23 --privileged"}, "cluster.sglang_image = "),
])
def test_invalid_kubernetes_names_are_refused_at_render_naming_the_key(fields: dict[str, Any], message: str) -> None:
    cfg = Config.model_validate({"cluster": fields})
    with pytest.raises(InputError) as raised:
        render_templates(cfg, ["iteration"], WORKFLOWS)
    assert message in str(raised.value)
    assert "Kubernetes would refuse the workflow only when it is submitted" in str(raised.value)
    with pytest.raises(InputError, match="is not"):  # submit renders the Workflow: refused the same way
        render_workflow(cfg, "iteration", WORKFLOWS, iteration=0, parameters={"root": "s3://b/run"})


def test_valid_names_pass() -> None:
    check_cluster_names(cluster(
        namespace="team-a", service_account="sa.burnqed", s3_secret=None, image_pull_secrets=["regcred"],
        gpu_node_selector={"cloud.google.com/gke-accelerator": "nvidia-h100-80gb", "pool": ""},
        gpu_tolerations=[{"operator": "Exists"}, {"key": "spot", "operator": "Equal", "value": "true",
                                                  "effect": "NoExecute"}],
        gpu_memory_label="nvidia.com/gpu.memory", image_registry="registry.example.com:5000/ml/",
        image_tag="0.1.0_rc-1",
        sglang_image="lmsysorg/sglang@sha256:" + "0" * 64))
    check_cluster_names(ClusterConfig())


# ------------------------------------------------------------------------------------------ templates


@pytest.mark.parametrize(("section", "key", "value", "where"), [
    ("pipeline", "benchmark", "s3://b/minif2f-{{workflow.name}}.json", "pipeline.benchmark"),
    ("cluster", "sglang_args", ["--served-model-name", "{{=sprig.env('HOME')}}"], "cluster.sglang_args[1]"),
    ("cluster", "sglang_args", ["--chat-template", "a }} b"], "cluster.sglang_args[1]"),
    ("storage", "root", "s3://bucket/runs/{{ workflow.name }}/", "storage.root"),
])
def test_values_argo_would_read_as_templates_are_refused(section: str, key: str, value: Any, where: str) -> None:
    """Argo substitutes {{…}} (spaces trimmed) and evaluates {{=…}} in every string and has no escape."""
    cfg = Config.model_validate({section: {key: value}})
    with pytest.raises(InputError) as raised:
        render_templates(cfg, ["iteration"], WORKFLOWS)
    message = str(raised.value)
    assert message.startswith(f"{where} = ")
    assert "holds Argo template syntax ({{ or }}) and reaches WorkflowTemplate burnqed-" in message
    assert "Argo would substitute or evaluate it when the workflow runs, and it has no escape" in message


def test_a_workflow_parameter_with_template_syntax_is_refused() -> None:
    with pytest.raises(InputError, match=r"parameter root = 's3://b/\{\{workflow.name\}\}' holds Argo template"):
        render_workflow(Config(), "iteration", WORKFLOWS, iteration=0, parameters={"root": "s3://b/{{workflow.name}}"})


def test_template_syntax_that_never_reaches_a_workflow_is_left_alone() -> None:
    """A value only the pods read, from the ConfigMap (not an Argo object), may hold braces: a Lean probe tactic."""
    cfg = Config.model_validate({"search": {"probe_tactics": ["exact ({{1}} : Set (Set ℕ))"]}})
    assert render_templates(cfg, ["iteration"], WORKFLOWS)


def test_newlines_quotes_and_yaml_syntax_keep_the_structure() -> None:
    """A value with newlines, quotes, YAML indicators and backslashes is one string after dumping and loading."""
    odd = "line 1\nline 2: \"quoted\" 'single' # not a comment\n- not an item\n{a: b} [c] &anchor *alias \\n\t|"
    cfg = Config.model_validate({"cluster": {"sglang_args": ["--chat-template", odd]},
                                 "pipeline": {"benchmark": "s3://b/bench: \"x\"\n- y.json"},
                                 "storage": {"region": "eu-west-1\nAWS_SECRET: x"}})
    docs = render_templates(cfg, ["iteration"], WORKFLOWS)
    loaded = load_documents(to_yaml(docs))
    assert loaded == [doc.doc for doc in docs]
    search = template(loaded[0], "search")
    assert search["sidecars"][0]["args"][2:4] == ["--chat-template", odd]
    assert "s3://b/bench: \"x\"\n- y.json" in template(loaded[0], "eval")["container"]["args"]
    env = {e["name"]: e["value"] for e in search["container"]["env"]}
    assert env["AWS_DEFAULT_REGION"] == "eu-west-1\nAWS_SECRET: x" and "AWS_SECRET" not in env


@pytest.mark.slow
def test_render_refuses_in_one_line_with_exit_2_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for sets in (["cluster.namespace=Prod"], ["pipeline.benchmark=s3://b/{{workflow.uid}}.json"]):
        args = [arg for value in sets for arg in ("--set", value)]
        proc = processes.cli("render", "iteration", "-o", str(out), *args)
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("error: ")
        assert not out.exists() or not any(out.iterdir())

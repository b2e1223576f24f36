"""The workflow files rendered from the default configuration: golden files, and the properties the cluster relies
on (fan-out, retries, GPU resources, the sidecar and its model download, the mutex, podGC/TTL, no tokens in main
containers, secrets by reference). Regenerate the golden files with BURNQED_UPDATE_GOLDEN=1 (or `burnqed render`
and `burnqed render --helm`)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from burnqed.cluster.fetch import READY_NAME
from burnqed.cluster.render import HELM_FILES, RENDERED, load, render_templates, render_workflow, write_documents
from burnqed.cluster.retry import retry_expression
from burnqed.config import Config
from burnqed.errors import ConfigError, InputError
from burnqed.runner.plan import build_iteration
from tests.cluster.conftest import ROOT, UPDATE_GOLDEN, WORKFLOWS, by_name, template
from tests.processes import cli

NAMES = ["burnqed-baseline", "burnqed-eval", "burnqed-iteration-0", "burnqed-iteration-1", "burnqed-iteration-2",
         "burnqed-smoke"]


def compare_or_update(fresh: Path, golden: Path) -> None:
    """Compare the golden folder with a fresh render; with BURNQED_UPDATE_GOLDEN set, rewrite it first and still
    compare (the rewrite must reproduce the render exactly). CI never rewrites: there a stale file is a failure."""
    if os.environ.get(UPDATE_GOLDEN):
        if os.environ.get("CI"):
            pytest.fail(f"{UPDATE_GOLDEN} is set under CI: golden files are regenerated on a developer's machine "
                        "and committed, never in CI")
        shutil.rmtree(golden, ignore_errors=True)
        shutil.copytree(fresh, golden)
    fresh_files = sorted(p.name for p in fresh.glob("*.yaml"))
    assert fresh_files == sorted(p.name for p in golden.glob("*.yaml")), f"{golden} is stale: run burnqed render"
    for name in fresh_files:
        assert (golden / name).read_text() == (fresh / name).read_text(), f"{golden / name} is stale"


def test_golden_manifests_match_a_fresh_render(tmp_path: Path) -> None:
    docs = render_templates(Config(), [], WORKFLOWS)
    write_documents(docs, tmp_path, prune=True)
    compare_or_update(tmp_path, ROOT / RENDERED)


@pytest.mark.slow
def test_the_charts_copy_matches_a_fresh_render(tmp_path: Path) -> None:
    docs = render_templates(Config(), [], WORKFLOWS, helm=True)
    write_documents(docs, tmp_path, prune=True)
    compare_or_update(tmp_path, ROOT / HELM_FILES)
    assert all("namespace" not in doc.doc["metadata"] for doc in docs)


def test_every_workflow_renders_its_templates(rendered) -> None:
    assert sorted(doc.name for doc in rendered) == NAMES
    assert {doc.kind for doc in rendered} == {"WorkflowTemplate"}
    assert all(doc.doc["metadata"]["namespace"] == "burnqed" for doc in rendered)


def test_dag_follows_the_pipeline(rendered) -> None:
    for i in range(3):
        doc = by_name(rendered, f"burnqed-iteration-{i}")
        stages = build_iteration(Config().pipeline, root="{{workflow.parameters.root}}", iteration=i).stages
        dag = template(doc, "main")["dag"]["tasks"]
        assert [task["name"] for task in dag] == [stage.name for stage in stages]
        for task, stage in zip(dag, stages, strict=True):
            assert task.get("depends") == (" && ".join(stage.after) or None)
            assert template(doc, stage.name)["container"]["command"] == ["burnqed"]
            argv = [part.replace("{shard}", "{{inputs.parameters.shard}}") for part in stage.argv]
            assert template(doc, stage.name)["container"]["args"][: len(argv)] == argv


def test_search_fans_out_over_shards(rendered) -> None:
    doc = by_name(rendered, "burnqed-iteration-0")
    tasks = {task["name"]: task for task in template(doc, "main")["dag"]["tasks"]}
    for name in ("search", "search-noise"):
        assert tasks[name]["withSequence"] == {"count": "2"}
        assert tasks[name]["arguments"] == {"parameters": [{"name": "shard", "value": "{{item}}"}]}
        search = template(doc, name)
        assert search["inputs"] == {"parameters": [{"name": "shard"}]}
        args = search["container"]["args"]
        assert args[args.index("--shard") + 1] == "{{inputs.parameters.shard}}/2"
        assert args[args.index("--output") + 1].endswith("/shard-{{inputs.parameters.shard}}")
    assert tasks["merge-trajectories"]["depends"] == "search && search-noise"
    assert "withSequence" not in tasks["sft"]


def test_search_pod_has_lean_workers_and_an_sglang_sidecar_on_one_gpu(rendered) -> None:
    search = template(by_name(rendered, "burnqed-iteration-0"), "search")
    main = search["container"]
    assert main["image"] == "ghcr.io/burnqed/burnqed-core:0.1.0"
    assert main["resources"] == {"requests": {"cpu": "16", "memory": "96Gi"}, "limits": {"memory": "96Gi"}}
    assert main["args"][-6:] == ["--set", "policy.wait_for_start=true", "--set", "policy.backend=sglang",
                                 "--set", "policy.url=http://127.0.0.1:30000"]  # started beside it: waited for
    (sidecar,) = search["sidecars"]
    assert sidecar["image"] == "ghcr.io/burnqed/burnqed-sglang:0.1.0"
    assert sidecar["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert sidecar["resources"]["requests"]["nvidia.com/gpu"] == "1"
    env = {e["name"]: e["value"] for e in sidecar["env"]}
    assert env["SGLANG_RETURN_ORIGINAL_LOGPROB"] == "1"
    assert env["READY_FILE"] == f"/models/policy/{READY_NAME}"
    # The GPU memory plan of SGLang alone on the default 80 GB card (burnqed/cluster/gpu_plan.py).
    assert env["HOST"] == "127.0.0.1" and env["PORT"] == "30000" and env["MEM_FRACTION"] == "0.833"
    assert "EMBED_PORT" not in env  # iteration 0 has no value model
    assert {"name": "shm", "mountPath": "/dev/shm"} in sidecar["volumeMounts"]
    assert {"name": "models", "mountPath": "/models", "readOnly": True} in sidecar["volumeMounts"]
    shm = next(v for v in search["volumes"] if v["name"] == "shm")
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "16Gi"}
    (fetch,) = search["initContainers"]
    assert fetch["args"] == ["fetch", "{{workflow.parameters.root}}/iter_0/export", "/models/policy", "--model-folder",
                             "--require-done"]
    assert search["nodeSelector"] == {"burnqed.io/pool": "gpu"}
    assert search["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert search["priorityClassName"] == "burnqed-gpu"
    assert search["metadata"]["labels"]["burnqed.io/lean"] == "true"


def test_value_model_stages_get_burnqeds_encoder_in_the_same_sidecar(rendered) -> None:
    doc = by_name(rendered, "burnqed-iteration-1")
    for name, with_ebm in (("search", True), ("eval", True), ("eval-noebm", False)):
        stage = template(doc, name)
        (sidecar,) = stage["sidecars"]
        env = {e["name"]: e["value"] for e in sidecar["env"]}
        args = stage["container"]["args"]
        plan = stage["metadata"]["annotations"]["burnqed.io/gpu-plan"]
        if with_ebm:
            # the embedded defaults' exports are the tiny model's (sft.base_model unset): a small encoder beside SGLang
            assert (env["EMBED_PORT"], env["ENCODER_MEMORY_GIB"], env["ENCODER_BATCH_TOKENS"]) == ("30001", "0.96",
                                                                                                  "16384")
            assert env["MEM_FRACTION"] == "0.828" and "--mem-fraction-static = 1 − 13.12/76.64 → 0.828" in plan
            assert "EMBED_MEM_FRACTION" not in env  # no second SGLang: the encoder is burnqed's
            # The encoder reads the same ebm.* settings as train-ebm: the config is mounted into the sidecar.
            assert env["BURNQED_CONFIG"] == "/etc/burnqed/burnqed.toml"
            assert {"name": "config", "mountPath": "/etc/burnqed", "readOnly": True} in sidecar["volumeMounts"]
            assert args[-4:] == ["--set", "ebm.encoder_backend=serve", "--set", "ebm.encoder_url=http://127.0.0.1:30001"]
        else:
            assert "EMBED_PORT" not in env and env["MEM_FRACTION"] == "0.833" and "encoder" not in plan
            assert "ebm.encoder_backend=serve" not in args


def test_train_ebm_and_the_scoring_steps_use_one_encoder(rendered) -> None:
    """train-ebm embeds in-process with the config's ebm.* settings; search and eval score through `burnqed serve
    --encode-only` (the same `LocalModel.encode`) started from the same config in the sidecar, never SGLang's
    --is-embedding."""
    doc = by_name(rendered, "burnqed-iteration-1")
    train = template(doc, "train-ebm")
    args = train["container"]["args"]
    assert args[0] == "train-ebm" and "encoder_backend" not in " ".join(args)  # in-process: ebm.encoder_backend=local
    assert {"name": "BURNQED_CONFIG", "value": "/etc/burnqed/burnqed.toml"} in train["container"]["env"]
    assert "--is-embedding" not in str(doc)
    for name in ("search", "eval"):
        stage = template(doc, name)
        (sidecar,) = stage["sidecars"]
        env = {e["name"]: e["value"] for e in sidecar["env"]}
        assert env["BURNQED_CONFIG"] == "/etc/burnqed/burnqed.toml"  # the same ConfigMap as train-ebm's
        assert "ebm.encoder_backend=serve" in stage["container"]["args"]


def test_gpu_training_steps(rendered) -> None:
    sft = template(by_name(rendered, "burnqed-iteration-1"), "sft")
    assert sft["container"]["image"] == "ghcr.io/burnqed/burnqed-train:0.1.0"
    assert sft["container"]["resources"]["limits"] == {"memory": "64Gi", "nvidia.com/gpu": "1"}
    assert {"name": "shm", "mountPath": "/dev/shm"} in sft["container"]["volumeMounts"]
    assert "sidecars" not in sft and "initContainers" not in sft
    assert "burnqed.io/lean" not in sft["metadata"]["labels"]


def test_cpu_steps(rendered) -> None:
    merge = template(by_name(rendered, "burnqed-iteration-0"), "merge-trajectories")
    assert merge["container"]["resources"]["requests"] == {"cpu": "2", "memory": "8Gi"}
    assert merge["priorityClassName"] == "burnqed-cpu"
    assert "nodeSelector" not in merge and "tolerations" not in merge
    assert "nvidia.com/gpu" not in str(merge)


def test_every_step_retries_interruptions_and_has_a_deadline(rendered) -> None:
    for doc in rendered:
        for t in doc.doc["spec"]["templates"]:
            if "container" not in t:
                continue
            assert t["retryStrategy"] == {
                "limit": 3, "retryPolicy": "Always", "expression": retry_expression(oom=False, storage_retries=2),
                "backoff": {"duration": "60s", "factor": 2, "cap": "1800s"},
                "affinity": {"nodeAntiAffinity": {}},
            }
            assert t["activeDeadlineSeconds"] == 86400
        spec = doc.doc["spec"]
        assert spec["activeDeadlineSeconds"] == 7 * 86400


def test_mutex_per_run_podgc_ttl_and_archived_logs(rendered) -> None:
    for doc in rendered:
        spec = doc.doc["spec"]
        assert spec["podGC"] == {"strategy": "OnPodSuccess", "deleteDelayDuration": "10m"}
        assert spec["ttlStrategy"] == {"secondsAfterCompletion": 7 * 86400}
        assert spec["archiveLogs"] is True
        assert spec["artifactRepositoryRef"] == {"configMap": "burnqed-artifact-repository", "key": "default"}
        is_iteration = doc.source in ("iteration", "smoke")
        if is_iteration:
            assert spec["synchronization"] == {"mutexes": [{"name": "burnqed-run-{{workflow.parameters.run}}"}]}
        else:
            assert "synchronization" not in spec


def test_main_containers_get_no_token_and_run_locked_down(rendered) -> None:
    for doc in rendered:
        spec = doc.doc["spec"]
        assert spec["automountServiceAccountToken"] is False
        assert spec["executor"] == {"serviceAccountName": "burnqed-workflow"}
        assert spec["serviceAccountName"] == "burnqed-workflow"
        assert spec["securityContext"]["runAsNonRoot"] is True
        for t in spec["templates"]:
            if "container" in t:
                security = t["container"]["securityContext"]
                assert security["readOnlyRootFilesystem"] is True
                assert security["allowPrivilegeEscalation"] is False
                env = {e["name"]: e["value"] for e in t["container"]["env"]}
                if t["metadata"]["labels"].get("burnqed.io/lean") == "true":
                    # root only to start Lean under a uid of its own (burnqed.base.sandbox), with three capabilities
                    assert security["runAsUser"] == 0 and security["runAsNonRoot"] is False
                    assert security["capabilities"] == {"drop": ["ALL"], "add": ["SETUID", "SETGID", "KILL"]}
                    assert env["BURNQED_LEAN__RUN_AS_UID"] == "1001"
                else:
                    assert security["runAsUser"] == 1000 and security["runAsNonRoot"] is True
                    assert security["capabilities"] == {"drop": ["ALL"]}
                    assert "BURNQED_LEAN__RUN_AS_UID" not in env


def test_config_from_a_configmap_and_s3_credentials_by_reference(rendered) -> None:
    search = template(by_name(rendered, "burnqed-iteration-0"), "search")
    container = search["container"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["BURNQED_CONFIG"] == "/etc/burnqed/burnqed.toml"
    assert {"name": "config", "configMap": {"name": "burnqed-config"}} in search["volumes"]
    assert container["envFrom"] == [{"secretRef": {"name": "burnqed-s3"}}]
    assert search["initContainers"][0]["envFrom"] == [{"secretRef": {"name": "burnqed-s3"}}]
    assert "envFrom" not in search["sidecars"][0]  # the sidecar never sees credentials


def test_no_secret_store_means_no_envfrom() -> None:
    cfg = Config.model_validate({"cluster": {"s3_secret": None}})
    docs = render_templates(cfg, ["iteration"], WORKFLOWS)
    assert "envFrom" not in str(docs[0].doc) and "secretRef" not in str(docs[0].doc)


def test_parameters_root_run_iteration(rendered) -> None:
    params = by_name(rendered, "burnqed-iteration-2")["spec"]["arguments"]["parameters"]
    assert [p["name"] for p in params] == ["root", "run", "iteration"]
    assert "value" not in params[0] and "value" not in params[1]  # storage.root is local: required at submission
    assert params[2]["value"] == "2" and params[2]["enum"] == ["2"]
    cfg = Config.model_validate({"storage": {"root": "s3://bucket/runs/Exp_1"}})
    doc = render_templates(cfg, ["iteration"], WORKFLOWS)[0].doc
    values = {p["name"]: p.get("value") for p in doc["spec"]["arguments"]["parameters"]}
    assert values == {"root": "s3://bucket/runs/Exp_1", "run": "bucket-runs-exp-1", "iteration": "0"}
    args = template(doc, "sft")["container"]["args"]
    assert args[-1] == "{{workflow.parameters.root}}/iter_0/sft"


def test_workflow_for_submit_has_generate_name_and_values() -> None:
    wf = render_workflow(Config(), "iteration", WORKFLOWS, iteration=5, parameters={"root": "s3://b/r/"})
    assert wf["kind"] == "Workflow"
    assert wf["metadata"]["generateName"] == "burnqed-iteration-5-"
    values = {p["name"]: p["value"] for p in wf["spec"]["arguments"]["parameters"]}
    assert values == {"root": "s3://b/r", "run": "b-r", "iteration": "5"}  # no trailing slash: no …//iter_0
    sft = template(wf, "sft")["container"]["args"]
    assert sft.count("--trajectories") == 5


def test_unknown_or_fixed_parameters_are_input_errors() -> None:
    with pytest.raises(InputError, match="unknown parameter"):
        render_workflow(Config(), "iteration", WORKFLOWS, iteration=0, parameters={"rooot": "s3://b"})
    with pytest.raises(InputError, match="fixed to 0"):
        render_workflow(Config(), "iteration", WORKFLOWS, iteration=0, parameters={"iteration": "3"})


def test_eval_and_baseline_serve_the_given_model() -> None:
    cfg = Config.model_validate({"sft": {"base_model": "s3://models/base"}, "pipeline": {"eval_budgets": [100, 300]}})
    base = render_templates(cfg, ["baseline"], WORKFLOWS)[0].doc
    values = {p["name"]: p.get("value") for p in base["spec"]["arguments"]["parameters"]}
    assert values == {"root": None, "model": "s3://models/base"}
    stage = template(base, "eval")
    args = stage["container"]["args"]
    assert args[args.index("--model") + 1] == "{{workflow.parameters.model}}"
    assert args[args.index("--budgets") + 1] == "100,300"
    assert args[args.index("--output") + 1] == "{{workflow.parameters.root}}/baseline/eval.json"
    # The base model is served as a model folder burnqed wrote (`burnqed fetch --model-folder`, in the core image
    # that declares `tokenizers`): SGLang's transformers misreads a DeepSeek-shaped tokenizer as downloaded.
    (fetch,) = stage["initContainers"]
    assert fetch["args"] == ["fetch", "{{workflow.parameters.model}}", "/models/policy", "--model-folder"]
    assert fetch["image"] == "ghcr.io/burnqed/burnqed-core:0.1.0"
    zero = by_name(render_templates(cfg, ["iteration"], WORKFLOWS), "burnqed-iteration-0")
    (fetch,) = template(zero, "eval-base")["initContainers"]
    assert fetch["args"] == ["fetch", "s3://models/base", "/models/policy", "--model-folder"]
    ev = template(render_templates(cfg, ["eval"], WORKFLOWS)[0].doc, "eval")
    eval_args = ev["container"]["args"]
    assert eval_args[eval_args.index("--output") + 1] == ("{{workflow.parameters.root}}/evals/{{workflow.name}}/"
                                                          "eval.json")


def test_smoke_runs_on_cpu_with_embedded_defaults() -> None:
    cfg = Config.model_validate({"storage": {"root": "s3://b/smoke", "endpoint_url": "http://minio:9000"},
                                 "pipeline": {"search_shards": 8}})
    doc = render_templates(cfg, ["smoke"], WORKFLOWS)[0].doc
    tasks = {task["name"]: task for task in template(doc, "main")["dag"]["tasks"]}
    assert "search-noise" not in tasks and tasks["search"]["withSequence"] == {"count": "1"}
    text = str(doc)
    assert "nvidia.com/gpu" not in text and "sidecars" not in text and "BURNQED_CONFIG" not in text
    for t in doc["spec"]["templates"]:
        if "container" in t:
            # the selftest checks the core image's own Lean; every other step runs the embedded defaults in train
            image = "burnqed-core" if t["name"] == "lean-selftest" else "burnqed-train"
            assert t["container"]["image"] == f"ghcr.io/burnqed/{image}:0.1.0"
            env = {e["name"]: e["value"] for e in t["container"]["env"]}
            assert env["BURNQED_STORAGE__ENDPOINT_URL"] == env["AWS_ENDPOINT_URL"] == "http://minio:9000"


def test_the_smoke_selftest_runs_against_the_core_images_lean_and_names_its_triple() -> None:
    doc = render_templates(Config(), ["smoke"], WORKFLOWS)[0].doc
    tasks = template(doc, "main")["dag"]["tasks"]
    assert tasks[0]["name"] == "lean-selftest" and "depends" not in tasks[0]
    assert tasks[1]["depends"] == "lean-selftest"  # every other stage comes after the iteration's first
    selftest = template(doc, "lean-selftest")
    container = selftest["container"]
    assert [*container["command"], *container["args"]] == [
        "burnqed", "lean", "selftest", "--set", 'lean.command=["pantograph-repl","Mathlib"]',
        "--set", "lean.cwd=/opt/mathlib-project", "--set", "lean.verifier_workers=0"]
    assert container["image"] == "ghcr.io/burnqed/burnqed-core:0.1.0"
    env = {e["name"]: e["value"] for e in container["env"]}
    # one Mathlib REPL, checked against the CPU steps' memory: 4096 MiB + lean_main_memory 4Gi = step_memory 8Gi
    assert (env["BURNQED_LEAN__WORKERS"], env["BURNQED_LEAN__RECYCLE_RSS_MB"], env["BURNQED_LEAN__RUN_AS_UID"]) == (
        "1", "4096", "1001")
    assert container["resources"] == {"limits": {"memory": "8Gi"}, "requests": {"cpu": "2", "memory": "8Gi"}}
    assert selftest["metadata"]["labels"]["burnqed.io/lean"] == "true"  # the Lean pods' egress rules
    assert "BURNQED_LEAN_TRIPLE" not in env  # the image declares its triple (images/core/Dockerfile), not the pod
    with pytest.raises(ConfigError, match=r"step lean-selftest: the Lean container's memory limit "
                                          r"cluster.step_memory=6Gi \(6144 MiB\) is below"):
        render_templates(Config.model_validate({"cluster": {"step_memory": "6Gi"}}), ["smoke"], WORKFLOWS)


def test_image_tag_and_registry_follow_the_config() -> None:
    cfg = Config.model_validate({"cluster": {"image_registry": "registry.example/ml/", "image_tag": "abc123",
                                             "sglang_image": "registry.example/sglang:pinned"}})
    search = template(render_templates(cfg, ["iteration"], WORKFLOWS)[0].doc, "search")
    assert search["container"]["image"] == "registry.example/ml/burnqed-core:abc123"
    assert search["sidecars"][0]["image"] == "registry.example/sglang:pinned"


def test_gpu_pools_from_config() -> None:
    cfg = Config.model_validate({"cluster": {
        "gpu_node_selector": {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
        "gpu_tolerations": [{"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
        "priority_class_gpu": "high", "gpus_per_step": 2, "retries": 0,
    }})
    doc = render_templates(cfg, ["iteration"], WORKFLOWS)[0].doc
    search = template(doc, "search")
    assert search["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    assert search["tolerations"] == [{"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
    assert search["priorityClassName"] == "high"
    assert search["sidecars"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert search["sidecars"][0]["args"] == ["--sampling-defaults", "openai", "--enable-deterministic-inference",
                                             "--tp-size", "2"]
    assert "retryStrategy" not in search


def test_seeded_runs_start_sglang_deterministic() -> None:
    """SGLang 0.5.23 reads a request's sampling_seed only under --enable-deterministic-inference
    (srt/sampling/sampling_batch_info.py, from_schedule_batch): a seeded run starts its sidecar with it, an
    unseeded one without."""
    def sidecar_args(seed: int | None) -> list[str]:
        cfg = Config.model_validate({"policy": {"seed": seed}})
        search = template(render_templates(cfg, ["iteration"], WORKFLOWS)[0].doc, "search")
        return list(search["sidecars"][0].get("args") or [])

    assert sidecar_args(7) == ["--sampling-defaults", "openai", "--enable-deterministic-inference"]
    assert sidecar_args(None) == ["--sampling-defaults", "openai"]


def test_no_sampling_field_comes_from_the_model_folder() -> None:
    """Every sidecar starts SGLang with --sampling-defaults openai (its default, model, fills missing fields from
    generation_config.json), and the configuration cannot undo it through cluster.sglang_args, spelled in full,
    with =, or abbreviated as SGLang's argparse allows; options that merely share a prefix pass."""
    cfg = Config.model_validate({"cluster": {"sglang_args": ["--dtype", "bfloat16", "--sampling-backend", "pytorch",
                                                            "--prefill-attention-backend", "fa3"]}})
    for doc in render_templates(cfg, [], WORKFLOWS):
        for step in doc.doc["spec"]["templates"]:
            for sidecar in step.get("sidecars") or []:
                assert sidecar["args"][:2] == ["--sampling-defaults", "openai"], (doc.name, step["name"])
                assert sidecar["args"][2:6] == ["--dtype", "bfloat16", "--sampling-backend", "pytorch"]
    for arg in ("--sampling-defaults", "--sampling-defaults=model", "--sampling-d", "--preferred-sampling-params",
                "--preferred-sampling-params={\"top_k\": 20}", "--prefe"):
        with pytest.raises(ValidationError, match="every sampling field from policy") as raised:
            Config.model_validate({"cluster": {"sglang_args": [arg, "model"]}})
        assert f"{arg!r} sets SGLang's --" in str(raised.value)


def test_loading_errors_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no workflow 'nope'"):
        load("nope", WORKFLOWS)
    (tmp_path / "broken.py").write_text("import does_not_exist\n")
    with pytest.raises(ConfigError, match=r"broken\.py failed to load: ModuleNotFoundError"):
        load("broken", tmp_path)
    (tmp_path / "partial.py").write_text("def templates(cfg):\n    return []\n")
    with pytest.raises(ConfigError, match="defines no workflow"):
        load("partial", tmp_path)


def test_a_workflow_folder_is_loaded_by_path(tmp_path: Path) -> None:
    folder = tmp_path / "dags"
    shutil.copytree(WORKFLOWS, folder, ignore=shutil.ignore_patterns("__pycache__", "baseline.py", "smoke.py"))
    docs = render_templates(Config(), [], folder)
    assert sorted({doc.source for doc in docs}) == ["eval", "iteration"]


@pytest.mark.slow
def test_burnqed_render_through_the_real_cli(tmp_path: Path) -> None:
    seven_b = ["--set", "sft.base_model=s3://b/models/DeepSeek-Prover-V2-7B"]  # [serving]'s default sizes are its
    result = cli("render", "iteration", "--check", "-o", str(tmp_path), *seven_b)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:4] == [
        *(f"wrote {tmp_path}/burnqed-iteration-{i}.yaml" for i in range(3)),
        "3 documents valid against the Argo schema",
    ]
    # Then the GPU memory plan of each kind of sidecar, with its arithmetic (burnqed/cluster/gpu_plan.py).
    assert lines[4] == ("GPU memory plan of burnqed-iteration-0/eval-base, burnqed-iteration-0/search, "
                        "burnqed-iteration-0/search-noise, burnqed-iteration-0/eval and 2 more:")
    assert lines[5].startswith("GPU 79.6 GiB; model 6.91B parameters in bfloat16 = 12.87 GiB of weights")
    encoder = lines.index("GPU memory plan of burnqed-iteration-1/search, burnqed-iteration-1/eval, "
                          "burnqed-iteration-2/search, burnqed-iteration-2/eval:")
    assert "--mem-fraction-static = 1 − 13.12/61.28 → 0.785" in lines[encoder + 3]
    small = cli("render", "iteration", "-o", str(tmp_path / "small"), *seven_b, "--set", "serving.gpu_memory_gib=39.4")
    assert small.returncode == 2 and not (tmp_path / "small").exists()
    assert small.stderr.startswith("error: GPU memory plan: SGLang and burnqed's encoder do not fit a 39.4 GiB GPU: ")
    assert len(small.stderr.strip().splitlines()) == 1 and "3280 KV tokens" in small.stderr
    result = cli("render", "nope")
    assert result.returncode == 2
    assert result.stderr.startswith("error: no workflow 'nope' in ")


@pytest.mark.slow  # two renders of every workflow
def test_a_configuration_of_your_own_never_overwrites_the_checkouts_golden_renders(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the default folders are relative: a checkout's root here
    config = ROOT / "configs" / "deepseek-prover-v2-7b.toml"
    refused = cli("render", "--helm", "--config", str(config))
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        "error: helm/burnqed/files/workflowtemplates/ holds the renders of the embedded defaults, golden files the "
        "checkout tracks (CONTRIBUTING.md), and a configuration of your own (--config, --set or BURNQED_SECTION__KEY) "
        "never overwrites them: render into a copy of the chart: `mkdir -p build && cp -r helm/burnqed build/ && "
        f"burnqed render --helm --output build/burnqed/files/workflowtemplates --config {config}`, then `helm install "
        "burnqed build/burnqed … --set-file config.toml=FILE` from the same file"]
    refused = cli("render", "iteration", "--set", "lean.workers=2")
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        "error: manifests/rendered/ holds the renders of the embedded defaults, golden files the checkout tracks "
        "(CONTRIBUTING.md), and a configuration of your own (--config, --set or BURNQED_SECTION__KEY) never "
        "overwrites them: give --output DIR: `burnqed render --output my-templates --set lean.workers=2`"]
    monkeypatch.setenv("BURNQED_LEAN__WORKERS", "2")
    assert cli("render", "iteration").returncode == 2
    monkeypatch.delenv("BURNQED_LEAN__WORKERS")
    assert list(tmp_path.iterdir()) == []  # nothing written
    # The route the README gives, and a developer's regeneration of the golden files (no configuration).
    chart = tmp_path / "build" / "burnqed"
    shutil.copytree(ROOT / "helm" / "burnqed", chart)
    mine = cli("render", "--helm", "--config", str(config), "--output", "build/burnqed/files/workflowtemplates")
    assert mine.returncode == 0, mine.stderr
    assert (chart / "files" / "workflowtemplates" / "burnqed-eval.yaml").read_text() != (
        ROOT / "helm" / "burnqed" / "files" / "workflowtemplates" / "burnqed-eval.yaml").read_text()
    golden = cli("render", "--helm")
    assert golden.returncode == 0, golden.stderr
    assert (tmp_path / "helm" / "burnqed" / "files" / "workflowtemplates" / "burnqed-eval.yaml").read_text() == (
        ROOT / "helm" / "burnqed" / "files" / "workflowtemplates" / "burnqed-eval.yaml").read_text()


@pytest.mark.slow
def test_rendering_everything_prunes_stale_renders_only(tmp_path: Path) -> None:
    docs = render_templates(Config(), [], WORKFLOWS)
    write_documents(docs, tmp_path, prune=True)
    stale = tmp_path / "burnqed-iteration-7.yaml"
    shutil.copy(tmp_path / "burnqed-iteration-2.yaml", stale)
    mine = tmp_path / "my-notes.yaml"
    mine.write_text("keep: me\n")
    write_documents([doc for doc in docs if doc.source == "eval"], tmp_path, prune=False)
    assert stale.exists()
    write_documents(docs, tmp_path, prune=True)
    assert not stale.exists() and mine.read_text() == "keep: me\n"
    assert sorted(p.name for p in tmp_path.glob("burnqed-*.yaml")) == [f"{name}.yaml" for name in NAMES]


@pytest.mark.slow
def test_one_yaml_stream_round_trips(rendered) -> None:
    from burnqed.cluster.render import to_yaml
    from burnqed.cluster.yamlio import load_documents

    text = to_yaml(rendered)
    assert text.startswith("# Generated by `burnqed render` from burnqed/workflows/baseline, eval, iteration, smoke.py")
    assert load_documents(text) == [doc.doc for doc in rendered]


def test_eval_modes_render_as_pods_whose_command_names_the_mode() -> None:
    cfg = Config.model_validate({"pipeline": {"eval_modes": ["whole", "hybrid"], "eval_proof_budgets": [32, 128]}})
    doc = render_templates(cfg, ["iteration"], WORKFLOWS)[1].doc  # burnqed-iteration-1: with a value model
    assert doc["metadata"]["name"] == "burnqed-iteration-1"
    tasks = {task["name"]: task for task in template(doc, "main")["dag"]["tasks"]}
    assert {"eval-whole", "eval-hybrid"} <= set(tasks) and "eval-hybrid" in tasks["report"]["depends"]
    for mode in ("whole", "hybrid"):
        args = template(doc, f"eval-{mode}")["container"]["args"]
        assert f"search.mode={mode}" in args and args[args.index("--budgets") + 1] == "32,128"
        assert "policy.backend=sglang" in args  # served by the pod's sidecar, like the main eval
    assert "ebm.encoder_backend=serve" in template(doc, "eval-hybrid")["container"]["args"]
    assert "--ebm" not in template(doc, "eval-whole")["container"]["args"]

"""The rl step of the iteration workflow (docs/cluster.md, "The rl step"): with rl.enabled it is placed as the local
plan places it (between sft and export; export and the next iteration's sft read its output), in the rl image (the
train image's packages and the core image's Lean), one GPU and the reward's Lean workers in one container (a
training pod's and a search pod's requests), the Lean memory rule and a GPU memory plan of its own checked at render;
the controller's rules and Argo's schema hold. With rl.rollout_engine = 'served' (no rl.server_url) the pod also
carries the policy's SGLang sidecar on a GPU of its own, its model fetched first, LoRA on for an adapter policy, the
trainer pointed at it on loopback and waiting for it, and a plan of its own refused when one step's rollouts do not fit
its KV cache. With rl off nothing moves (the golden files of test_render.py)."""

from __future__ import annotations

from typing import Any

import pytest

from burnqed.cluster.gpu_plan import PLAN_ANNOTATION, rl_sidecar
from burnqed.cluster.images import Image, declared, rl_requirements
from burnqed.cluster.render import render_templates, render_workflow
from burnqed.cluster.rl_plan import rl_gpu_plan, rl_server_plan
from burnqed.cluster.validate import validate_documents
from burnqed.config import Config, load_config
from burnqed.config.digest import DIGEST_ENV
from burnqed.errors import ConfigError
from burnqed.runner.plan import build_iteration
from tests.cluster.argo_rules import requests_gpu
from tests.cluster.conftest import ROOT, WORKFLOWS, by_name, template
from tests.cluster.test_controller_rules import command_violations, retry_violations
from tests.cluster.test_images import env_of

REAL = ROOT / "configs" / "deepseek-prover-v2-7b.toml"
PARAM_ROOT = "{{workflow.parameters.root}}"


def real(*sets: str) -> Config:
    return load_config(REAL, ["rl.enabled=true", *sets], {})


@pytest.fixture(scope="module")
def docs() -> list[Any]:
    return render_templates(real(), ["iteration"], WORKFLOWS)


def test_the_dag_is_the_local_plans_with_rl_between_sft_and_export(docs: list[Any]) -> None:
    cfg = real()
    for i in range(cfg.cluster.template_iterations):
        doc = by_name(docs, f"burnqed-iteration-{i}")
        stages = build_iteration(cfg.pipeline, root=PARAM_ROOT, iteration=i, base_model=cfg.sft.base_model,
                                 max_proofs=cfg.search.max_proofs, rl=True).stages
        tasks = template(doc, "main")["dag"]["tasks"]
        assert [t["name"] for t in tasks] == [s.name for s in stages]
        names = [t["name"] for t in tasks]
        assert names[names.index("sft") + 1:names.index("export") + 1] == ["rl", "export"]
        for task, stage in zip(tasks, stages, strict=True):
            assert task.get("depends") == (" && ".join(stage.after) or None)
            argv = [part.replace("{shard}", "{{inputs.parameters.shard}}") for part in stage.argv]
            assert template(doc, stage.name)["container"]["args"][:len(argv)] == argv
        rl = template(doc, "rl")["container"]["args"]
        assert rl == list(next(s for s in stages if s.name == "rl").argv)  # no sidecar --sets: it generates itself
        assert rl[rl.index("--sft") + 1] == f"{PARAM_ROOT}/iter_{i}/sft"
        assert rl[rl.index("--output") + 1] == f"{PARAM_ROOT}/iter_{i}/rl"
        export = template(doc, "export")["container"]["args"]
        assert export[export.index("--sft") + 1] == f"{PARAM_ROOT}/iter_{i}/rl"
        sft = template(doc, "sft")["container"]["args"]
        if i:  # the next iteration warm-starts from the best policy so far, among the rl outputs of those before
            assert sft[sft.index("--start") + 1] == f"{PARAM_ROOT}/iter_{i}/start.json"
            assert f"{PARAM_ROOT}/iter_{i - 1}/rl" in next(s for s in stages if s.name == "sft").inputs
            assert rl[rl.index("--trajectories") + 1] == f"{PARAM_ROOT}/iter_0/trajectories"


def test_the_rl_pod_holds_one_gpu_and_the_lean_workers_in_the_rl_image(docs: list[Any]) -> None:
    step = template(by_name(docs, "burnqed-iteration-1"), "rl")
    main = step["container"]
    assert main["image"] == "ghcr.io/burnqed/burnqed-rl:0.1.0" and main["command"] == ["burnqed"]
    # a training pod's (8 CPUs, 64Gi) and a search pod's (16 CPUs, 96Gi) requests; one GPU, the main container's
    assert main["resources"] == {"requests": {"cpu": "24", "memory": "160Gi", "nvidia.com/gpu": "1"},
                                 "limits": {"memory": "160Gi", "nvidia.com/gpu": "1"}}
    assert "sidecars" not in step and "initContainers" not in step
    env = env_of(main)
    assert (env["BURNQED_LEAN__WORKERS"], env["BURNQED_LEAN__RECYCLE_RSS_MB"]) == ("11", "7500")  # checked, pinned
    assert env["BURNQED_LEAN__RUN_AS_UID"] == "1001"
    assert main["securityContext"]["capabilities"] == {"add": ["SETUID", "SETGID", "KILL"], "drop": ["ALL"]}
    assert {"name": "shm", "mountPath": "/dev/shm"} in main["volumeMounts"]
    labels = step["metadata"]["labels"]
    assert labels["burnqed.io/lean"] == "true" and labels["burnqed.io/node-pool"] == "gpu"  # egress-restricted
    assert step["nodeSelector"] == {"burnqed.io/pool": "gpu"} and step["priorityClassName"] == "burnqed-gpu"
    (term,) = step["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["81509"]}]
    assert step["metadata"]["annotations"][PLAN_ANNOTATION] == rl_gpu_plan(real()).describe()
    assert step["podSpecPatch"] == '{"terminationGracePeriodSeconds": 300}'
    assert requests_gpu(step)
    several = render_templates(real("cluster.gpus_per_step=2"), ["iteration"], WORKFLOWS)
    rl = template(by_name(several, "burnqed-iteration-0"), "rl")["container"]["resources"]
    assert rl["limits"]["nvidia.com/gpu"] == "1"  # burnqed rl is one process: TRL refuses several GPUs for one


def test_the_rl_workflow_obeys_the_controller_and_argos_schema(docs: list[Any]) -> None:
    documents = [doc.doc for doc in docs]
    submitted = [render_workflow(real(), "iteration", WORKFLOWS, iteration=i, parameters={"root": "s3://b/r"})
                 for i in (0, 3)]
    assert retry_violations([*documents, *submitted]) == []
    assert command_violations([*documents, *submitted]) == []
    assert validate_documents([*documents, *submitted]) == []


def test_the_real_configurations_rl_plan() -> None:
    # At the 7B configuration's lengths for DeepSeek-Prover-V2's chain of thought: 1024 prompt + 4096 completion tokens
    assert rl_gpu_plan(real()).describe() == "\n".join([
        "GPU 79.6 GiB; rl trains the policy (qlora): 6.91B parameters, 37.5M trainable; generation and update with "
        "hidden states and KV cache in float32",
        "  static: CUDA context 1 + weights 6.04 + adapter 0.14 + gradients and AdamW 0.42 + reference 0.00 = 7.60 GiB",
        "  generation: KV cache 8 sequences × 5120 tokens × 0.938 MiB = 37.50 + prefill 2.39 = 39.89 GiB",
        "  update (gradient checkpointing): 52.03 GiB",
        "  peak 7.60 + max(39.89, 52.03) + slack 0.5 = 60.13 GiB of 79.6",
    ])
    # Continuous batching's cache holds whole pages of 256 tokens: 1024 + 1000 tokens take 2048
    paged = rl_gpu_plan(real("rl.rollout_engine=continuous", "rl.max_completion_tokens=1000"))
    assert paged.sequence_tokens == 2048 and rl_gpu_plan(real("rl.max_completion_tokens=1000")).sequence_tokens == 2024
    with_kl = rl_gpu_plan(real("rl.beta=0.04"))  # the reference: a frozen copy of the adapter
    assert with_kl.reference_gib == pytest.approx(with_kl.adapter_gib) and with_kl.reference_gib > 0
    lora = rl_gpu_plan(real("sft.method=lora"))  # bf16 base, bf16 KV cache: half of QLoRA's float32 per token
    assert lora.act_bytes == 2 and lora.kv_gib == pytest.approx(rl_gpu_plan(real()).kv_gib / 2)


@pytest.mark.parametrize(("sets", "message"), [
    (["rl.prompts_per_step=8", "rl.num_generations=8", "rl.max_completion_tokens=1024", "rl.max_prompt_tokens=512"],
     r"^GPU memory plan of the rl step: 133.0 GiB does not fit a 79.6 GiB GPU \(serving.gpu_memory_gib\): the policy "
     r"\(qlora\) holds 7.6 GiB .* generation 99.6 GiB \(KV cache of 64 sequences × 1536 tokens\), the update 124.9 GiB;"
     r" .*train with sft.method = \"lora\" and sft.bf16"),
    (["sft.method=full"], r"^GPU memory plan of the rl step: 156.5 GiB .* the policy \(full\) holds 104.0 GiB"),
])
def test_an_rl_step_that_does_not_fit_its_gpu_is_refused_at_render(sets: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        render_templates(real(*sets), ["iteration"], WORKFLOWS)


def test_the_same_rl_step_fits_a_larger_gpu_or_bf16_lora() -> None:
    big = ["rl.prompts_per_step=8", "rl.num_generations=8", "rl.max_completion_tokens=1024", "rl.max_prompt_tokens=512"]
    assert rl_gpu_plan(real("serving.gpu_memory_gib=139.8", *big)).peak_gib == pytest.approx(132.98, abs=0.01)
    assert rl_gpu_plan(real("sft.method=lora", *big)).peak_gib == pytest.approx(77.37, abs=0.01)


def test_the_lean_workers_must_fit_beside_the_trainer() -> None:
    """The rl container's memory limit holds the trainer (a training pod's memory) and the workers (a search pod's):
    checked by the Lean memory rule, burnqed's own allowance being the trainer's (search's rule, whose allowance comes
    out of search_memory, refuses first on the same keys: this is the rl step's own check)."""
    from burnqed.workflows._shared import Profile, stage_template

    cfg = real("lean.workers=15")
    stage = build_iteration(cfg.pipeline, root="s3://b/r", iteration=0, rl=True).stage("rl")
    with pytest.raises(ConfigError, match=r"^step rl: the Lean container's memory limit cluster.train_memory \+ "
                                          r"cluster.search_memory=160Gi \(163840 MiB\) is below \(lean.workers=15 \+ "
                                          r"lean.verifier_workers=1\) × lean.recycle_rss_mb=7500 MiB \+ "
                                          r"cluster.train_memory=64Gi \(65536 MiB\) for burnqed itself = 185536 MiB"):
        stage_template(stage, Profile(cfg))
    stage_template(stage, Profile(real("lean.workers=12")))  # (12 + 1) × 7500 + 65536 = 163036 MiB fits


def test_a_step_its_image_cannot_run_is_refused() -> None:
    cfg = real()
    stage = build_iteration(cfg.pipeline, root="s3://b/r", iteration=0, rl=True).stage("rl")
    rl, train, core = declared()["rl"], declared()["train"], declared()["core"]
    assert rl.distributions() == train.distributions() and rl.cuda and rl.holds_lean
    assert rl.lean_triple == core.lean_triple and rl.lean_command == core.lean_command  # the core image's Lean
    rl_requirements(cfg, rl, gpu=True, where="step rl")
    with pytest.raises(ConfigError, match=r"^step rl runs its reward's Lean workers in its own container, and the "
                                          r"train image holds no Lean"):
        rl_requirements(cfg, train, gpu=True, where="step rl")
    with pytest.raises(ConfigError, match=r"^step rl trains with TRL's GRPOTrainer, which needs peft, trl, "
                                          r"bitsandbytes, transformers, accelerate, not in the core image"):
        rl_requirements(cfg, core, gpu=False, where="step rl")
    with pytest.raises(ConfigError, match=r"^step rl: sft.device = 'cuda', but its container has no CUDA GPU"):
        rl_requirements(cfg, Image("rl", rl.extras, rl.torch_index, False, rl.distributions(), rl.lean_triple,
                                   rl.lean_command, rl.lean_cwd), gpu=True, where="step rl")
    assert stage.argv[:1] == ("rl",)


SERVED = "rl.rollout_engine=served"


def rl_step(cfg: Config) -> Any:
    """The rl step's container template, rendered alone."""
    from burnqed.workflows._shared import Profile, stage_template

    return stage_template(build_iteration(cfg.pipeline, root="s3://b/r", iteration=0, rl=True).stage("rl"),
                          Profile(cfg))


def without_digest(node: Any) -> Any:
    """A rendered template without the configuration digest its containers carry in their environment."""
    if isinstance(node, dict):
        return {key: without_digest(value) for key, value in node.items()}
    if isinstance(node, list):
        return [without_digest(item) for item in node
                if not (isinstance(item, dict) and item.get("name") == DIGEST_ENV)]
    return node


def test_the_served_engine_gets_the_policys_sglang_sidecar_on_a_gpu_of_its_own() -> None:
    docs = render_templates(real(SERVED), ["iteration"], WORKFLOWS)
    step = template(by_name(docs, "burnqed-iteration-1"), "rl")
    main = step["container"]
    # the trainer on loopback, waiting for the sidecar (policy.wait_for_start, up to policy.ready_timeout_s)
    assert main["args"][-4:] == ["--set", "rl.server_url=http://127.0.0.1:30000", "--set",
                                 "policy.wait_for_start=true"]
    assert main["resources"]["limits"] == {"memory": "160Gi", "nvidia.com/gpu": "1"}  # the trainer's GPU, as before
    (sidecar,) = step["sidecars"]
    assert sidecar["name"] == "sglang" and sidecar["image"] == "ghcr.io/burnqed/burnqed-sglang:0.1.0"
    assert sidecar["command"] == ["burnqed-sglang"]
    # QLoRA: the adapter's base served in its dtype with LoRA on, no adapter at start (the trainer pushes rl-v0)
    assert sidecar["args"] == ["--sampling-defaults", "openai", "--enable-lora", "--max-lora-rank", "16",
                               "--lora-target-modules", "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                               "up_proj", "down_proj", "--max-loras-per-batch", "2",
                               "--enable-deterministic-inference"]
    env = env_of(sidecar)
    assert (env["MODEL_DIR"], env["READY_FILE"], env["HOST"], env["PORT"], env["MEM_FRACTION"]) == (
        "/models/policy", "/models/policy/.burnqed-ready", "127.0.0.1", "30000", "0.833")
    assert sidecar["resources"] == {"requests": {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "1"},
                                    "limits": {"memory": "32Gi", "nvidia.com/gpu": "1"}}
    # the pushed versions are read by path from the trainer's /tmp: the same scratch volume in both containers
    assert {"name": "scratch", "mountPath": "/tmp"} in sidecar["volumeMounts"]
    assert {"name": "scratch", "mountPath": "/tmp"} in main["volumeMounts"]
    (fetch,) = step["initContainers"]  # the sidecar's entrypoint waits for the ready file it writes last
    assert fetch["name"] == "fetch-model" and fetch["image"] == "ghcr.io/burnqed/burnqed-core:0.1.0"
    assert fetch["args"] == ["fetch", "s3://my-bucket/models/DeepSeek-Prover-V2-7B", "/models/policy",
                             "--model-folder"]
    assert {"name": "models", "emptyDir": {"sizeLimit": "64Gi"}} in step["volumes"]
    annotation = step["metadata"]["annotations"][PLAN_ANNOTATION]
    assert annotation == (rl_gpu_plan(real(SERVED)).describe() + "\nthe rl step's SGLang sidecar, on 1 GPU(s) of its "
                          "own: " + rl_server_plan(real(SERVED)).describe())
    trainer_only = by_name(render_templates(real(), ["iteration"], WORKFLOWS), "burnqed-iteration-1")
    for other in ("sft", "export", "search"):  # only the rl step changes (and the configuration's digest)
        assert without_digest(template(by_name(docs, "burnqed-iteration-1"), other)) == without_digest(
            template(trainer_only, other))
    documents = [doc.doc for doc in docs]
    assert retry_violations(documents) == [] and command_violations(documents) == []
    assert validate_documents(documents) == []


def test_the_served_plans_the_trainers_gpu_and_the_servers() -> None:
    cfg = real(SERVED)
    assert rl_sidecar(cfg) and not rl_sidecar(real()) and not rl_sidecar(real(SERVED, "rl.server_url=http://s:1"))
    # the trainer scores one completion at a time instead of generating: its peak is the update's, as before
    assert rl_gpu_plan(cfg).describe() == "\n".join([
        "GPU 79.6 GiB; rl trains the policy (qlora): 6.91B parameters, 37.5M trainable; generation and update with "
        "hidden states and KV cache in float32",
        "  static: CUDA context 1 + weights 6.04 + adapter 0.14 + gradients and AdamW 0.42 + reference 0.00 = 7.60 GiB",
        "  generation on the server; the trainer's log-probs of one completion at a time: KV cache 5120 tokens × "
        "0.938 MiB = 4.69 + forward and logits 9.11 = 13.80 GiB",
        "  update (gradient checkpointing): 52.03 GiB",
        "  peak 7.60 + max(13.80, 52.03) + slack 0.5 = 60.13 GiB of 79.6",
    ])
    # SGLang alone on its GPU: bf16 weights, two adapter buffers of rank 16 (2 × 37.5M × 2 bytes), and the KV cache,
    # which must hold one step's 2 × 4 sequences of 1024 + 4096 tokens at once
    assert rl_server_plan(cfg).describe() == "\n".join([
        "GPU 79.6 GiB; model 6.91B parameters in bfloat16 = 12.87 GiB of weights, KV 0.469 MiB per token",
        "  1. SGLang sees F = 79.6 − its CUDA context 1 = 78.60 GiB free; it needs 13.12 GiB outside its static "
        "pool, so --mem-fraction-static = 1 − 13.12/78.60 → 0.833",
        "     static pool 0.833 × 78.60 = 65.47 GiB = weights 12.87 + LoRA buffers 0.14 (2 adapters) + KV cache "
        "52.46 GiB = 114606 tokens (at least 40960)",
    ])
    full = rl_server_plan(real(SERVED, "sft.method=full"))  # full weights: no LoRA buffers, pushed from disk
    assert (full.lora_slots, full.lora_gib, full.kv_tokens) == (0, 0.0, 114911)


def test_a_served_step_whose_rollouts_do_not_fit_the_servers_kv_cache_is_refused() -> None:
    # SGLang told to keep 50 GiB outside its static pool (serving.sglang_reserve_gib) has 33905 KV tokens left, fewer
    # than one step's 2 × 4 sequences of 1024 + 4096 tokens; keeping 45 GiB it has 44894
    with pytest.raises(ConfigError, match=(
            r"^GPU memory plan: the rl step's SGLang does not fit a 79.6 GiB GPU: SGLang sees 78.6 GiB free, keeps "
            r"50.0 outside its static pool \(--mem-fraction-static 0.363\), and its 28.5 GiB static pool minus 12.9 "
            r"GiB of weights and 0.1 of LoRA buffers leaves 15.5 GiB = 33905 KV tokens, fewer than one step's "
            r"rollouts \(rl.prompts_per_step × num_generations × \(max_prompt_tokens \+ max_completion_tokens\)\) "
            r"40960; lower rl.prompts_per_step, rl.num_generations, rl.max_prompt_tokens or "
            r"rl.max_completion_tokens, use a larger GPU, or more GPUs per step$")):
        rl_step(real(SERVED, "serving.sglang_reserve_gib=50"))  # (search's sidecars would refuse it too)
    fits = real(SERVED, "serving.sglang_reserve_gib=45")
    (sidecar,) = rl_step(fits).sidecars or []
    assert [e.value for e in sidecar.env or [] if e.name == "MEM_FRACTION"] == ["0.427"]
    assert rl_server_plan(fits).kv_tokens == 44894
    # the trainer's own plan still refuses what does not fit its GPU, served or not
    with pytest.raises(ConfigError, match=r"^GPU memory plan of the rl step: 156.5 GiB does not fit a 79.6 GiB GPU"):
        render_templates(real(SERVED, "sft.method=full"), ["iteration"], WORKFLOWS)


def test_the_served_sidecar_serves_the_sft_output_for_full_weights_and_needs_a_base_for_an_adapter() -> None:
    from burnqed.workflows._shared import rl_lora_args, rl_served_model

    cfg = real(SERVED, "sft.method=full")
    stage = build_iteration(cfg.pipeline, root=PARAM_ROOT, iteration=2, rl=True).stage("rl")
    assert rl_served_model(stage, cfg) == f"{PARAM_ROOT}/iter_2/sft" and rl_lora_args(cfg) == []
    assert rl_served_model(stage, real(SERVED)) == "s3://my-bucket/models/DeepSeek-Prover-V2-7B"
    tiny = load_config(None, ["rl.enabled=true", SERVED, "sft.method=lora"], {})
    with pytest.raises(ConfigError, match=r"^step rl: rl.rollout_engine = 'served' serves the adapter's base model "
                                          r"from a sidecar, but sft.base_model is unset"):
        rl_served_model(stage, tiny)

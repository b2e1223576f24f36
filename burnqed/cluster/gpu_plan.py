"""The GPU memory plans of the pods that hold a GPU for a model burnqed does not train in a training step: a
search/eval pod's sidecar (SGLang and burnqed's encoder on one GPU, sized the way SGLang sizes itself) and, with
`cluster.rl_plan`, the rl step's trainer and its SGLang sidecar (docs/cluster.md, "GPU memory plan"). `burnqed
render` prints them; the workflows write them into the pod; a plan that cannot fit is a `ConfigError` (exit 2) before
anything is submitted.

    plan = gpu_plan(cfg, encoder=True)      # the sidecar of a stage that scores with the value model
    plan.sglang_fraction                    # --mem-fraction-static for SGLang (MEM_FRACTION)
    plan.encoder_gib                        # `burnqed serve --encode-only --memory-gib` (ENCODER_MEMORY_GIB)
    print(plan.describe())                  # the arithmetic, one line per step

The model's sizes come from `[serving]` or a local `config.json` (`serving.model_config_json`); no weights are read.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from burnqed.config import Config, ServingConfig
from burnqed.errors import ConfigError

PLAN_ANNOTATION = "burnqed.io/gpu-plan"  # pod annotation: the plan of that pod's sidecar, as `describe()` says it


GIB = float(1 << 30)


MIB = float(1 << 20)


DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


WORKSPACE_SAFETY = 1.5  # activations measured in the allocator come in blocks; leave room


ALLOCATOR_SLACK_GIB = 0.5  # cuBLAS workspaces and the allocator's rounding


@dataclass(frozen=True, slots=True)
class ModelShape:
    """The sizes of a Llama-shaped decoder that decide its GPU memory."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied_embeddings: bool
    dtype: str

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def params(self) -> int:
        """Parameters: embeddings (+ LM head unless tied), per layer q/k/v/o, the gated MLP and two norms."""
        attention = self.hidden * self.heads * self.head_dim * 2 + self.hidden * self.kv_heads * self.head_dim * 2
        per_layer = attention + 3 * self.hidden * self.intermediate + 2 * self.hidden
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return embeddings + self.layers * per_layer + self.hidden

    @property
    def weights_gib(self) -> float:
        return self.params * self.dtype_bytes / GIB

    @property
    def kv_bytes_per_token(self) -> int:
        """SGLang's `cell_size`: K and V of every layer, kv_heads × head_dim each, in the KV dtype (the model's)."""
        return self.kv_heads * self.head_dim * self.layers * 2 * self.dtype_bytes


def model_shape(serving: ServingConfig, config_json: str | None = None,
                key: str = "serving.model_config_json") -> ModelShape:
    """The shape from `config_json` (a config.json; default `serving.model_config_json`, the policy's) when set, else
    from the `serving.model_*` keys; `key` is the setting that names the file, for errors."""
    config_json = config_json if config_json is not None else serving.model_config_json
    if config_json is None:
        heads = serving.model_heads
        return ModelShape(
            layers=serving.model_layers, hidden=serving.model_hidden, intermediate=serving.model_intermediate,
            heads=heads, kv_heads=serving.model_kv_heads,
            head_dim=serving.model_head_dim or serving.model_hidden // heads, vocab=serving.model_vocab,
            tied_embeddings=serving.model_tied_embeddings, dtype=serving.model_dtype,
        )
    path = Path(config_json).expanduser()
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        hidden, heads = int(raw["hidden_size"]), int(raw["num_attention_heads"])
        dtype = str(raw.get("torch_dtype") or raw.get("dtype") or serving.model_dtype)
        return ModelShape(
            layers=int(raw["num_hidden_layers"]), hidden=hidden, intermediate=int(raw["intermediate_size"]),
            heads=heads, kv_heads=int(raw.get("num_key_value_heads") or heads),
            head_dim=int(raw.get("head_dim") or hidden // heads), vocab=int(raw["vocab_size"]),
            tied_embeddings=bool(raw.get("tie_word_embeddings", False)),
            dtype=dtype if dtype in DTYPE_BYTES else serving.model_dtype,
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{key} {path}: cannot read the model's sizes from it ({exc})") from None


def parameters(count: int) -> str:
    """A parameter count as a plan prints it: 6.91B, 0.15M."""
    return f"{count / 1e9:.2f}B" if count >= 10**8 else f"{count / 1e6:.2f}M"


def tiny_shape() -> ModelShape:
    """The tiny embedded model's sizes (`burnqed.policy.tiny`; its vocabulary at its cap), exported in float32."""
    from burnqed.policy import tiny

    return ModelShape(layers=tiny.LAYERS, hidden=tiny.HIDDEN, intermediate=tiny.INTERMEDIATE, heads=tiny.HEADS,
                      kv_heads=tiny.KV_HEADS, head_dim=tiny.HIDDEN // tiny.HEADS, vocab=tiny.VOCAB_SIZE,
                      tied_embeddings=True, dtype="float32")


def served_shape(cfg: Config, *, run_export: bool = False) -> ModelShape:
    """The sizes of the policy a search or eval sidecar serves: `model_shape(cfg.serving)`, except for an export of
    the run (`run_export`: an iteration's stages) with sft.base_model unset: the iteration trains and exports the tiny
    embedded model, so unless `[serving]` names a model's sizes itself (model_config_json or a model_* key set) the
    plan is the tiny model's, not that of the DeepSeek-Prover-V2-7B the `[serving]` defaults describe."""
    named = cfg.serving.model_config_json is not None or any(key.startswith("model_")
                                                             for key in cfg.serving.model_fields_set)
    if run_export and cfg.sft.base_model is None and not named:
        return tiny_shape()
    return model_shape(cfg.serving)


def sglang_reserve_gib(gpu_gib: float, tp: int) -> float:
    """SGLang 0.5.6's own estimate of the memory it needs outside the static pool on a card of `gpu_gib`
    (`ServerArgs._handle_gpu_memory_settings`, CUDA cards, default chunked prefill and CUDA graph batch)."""
    gpu_mb = gpu_gib * 1024
    tiers = ((20, 2048, 8), (35, 2048, 24 if tp < 4 else 80), (60, 4096, 32 if tp < 4 else 160),
             (90, 8192, 256 if tp < 4 else 512), (160, 8192, 256 if tp < 4 else 512))
    prefill, graph_bs = next(((p, b) for limit_gb, p, b in tiers if gpu_mb < limit_gb * 1024), (16384, 512))
    reserved = 512 + max(prefill, 2048) * 1.5 + graph_bs * 2 + tp / 8 * 1024
    if gpu_mb > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return reserved / 1024


def encoder_workspace_gib(shape: ModelShape, batch_tokens: int, max_tokens: int) -> float:
    """The encoder's largest forward pass (`batch_tokens` tokens, no KV cache, no LM head): the widest live
    activations of a decoder layer (q/k/v/out/residual/norm, or the gated MLP's four intermediates and the
    residual), the float32 copy of the last hidden states it pools, and the padding mask (rows × width²)."""
    per_token = max(6 * shape.hidden, 4 * shape.intermediate + 2 * shape.hidden) * shape.dtype_bytes
    per_token += 4 * shape.hidden + max_tokens * shape.dtype_bytes
    return batch_tokens * per_token * WORKSPACE_SAFETY / GIB + ALLOCATOR_SLACK_GIB


@dataclass(frozen=True, slots=True)
class GpuPlan:
    """The memory of one GPU of the sidecar (GPU 0 when SGLang runs tensor-parallel), in GiB."""

    gpu_gib: float
    shape: ModelShape
    tp: int
    context_gib: float  # one process's CUDA context
    encoder: bool
    encoder_gib: float  # weights + workspace the encoder's allocator is capped at (0 without an encoder)
    encoder_batch_tokens: int
    free_at_sglang_start: float  # F
    reserve_gib: float  # what SGLang needs outside its static pool
    sglang_fraction: float  # --mem-fraction-static
    sglang_weights_gib: float
    kv_gib: float
    kv_tokens: int
    min_kv_tokens: int
    lora_gib: float = 0.0  # the rl sidecar's LoRA buffers in the static pool (0 without --enable-lora)
    lora_slots: int = 0  # --max-loras-per-batch: adapters its buffers hold at once

    def describe(self) -> str:
        """The plan and its arithmetic, a few lines."""
        shape = self.shape
        lines = [
            f"GPU {self.gpu_gib:g} GiB; model {parameters(shape.params)} parameters in {shape.dtype} = "
            f"{shape.weights_gib:.2f} GiB of weights, KV {shape.kv_bytes_per_token / MIB:.3f} MiB per token"
            + (f", tensor parallel {self.tp}" if self.tp > 1 else ""),
        ]
        if self.encoder:
            lines.append(
                f"  1. encoder (burnqed serve --encode-only, started first): CUDA context {self.context_gib:g} + "
                f"capped at {self.encoder_gib:.2f} GiB = weights {shape.weights_gib:.2f} + workspace "
                f"{self.encoder_gib - shape.weights_gib:.2f} for {self.encoder_batch_tokens} tokens per batch"
            )
        step = "2" if self.encoder else "1"
        held = f" − encoder ({self.context_gib:g} + {self.encoder_gib:.2f})" if self.encoder else ""
        lines += [
            f"  {step}. SGLang sees F = {self.gpu_gib:g}{held} − its CUDA context {self.context_gib:g} = "
            f"{self.free_at_sglang_start:.2f} GiB free; it needs {self.reserve_gib:.2f} GiB outside its static pool, "
            f"so --mem-fraction-static = 1 − {self.reserve_gib:.2f}/{self.free_at_sglang_start:.2f} → "
            f"{self.sglang_fraction:.3f}",
            f"     static pool {self.sglang_fraction:.3f} × {self.free_at_sglang_start:.2f} = "
            f"{self.sglang_fraction * self.free_at_sglang_start:.2f} GiB = weights {self.sglang_weights_gib:.2f} + "
            + (f"LoRA buffers {self.lora_gib:.2f} ({self.lora_slots} adapters) + " if self.lora_slots else "")
            + f"KV cache {self.kv_gib:.2f} GiB = {self.kv_tokens} tokens (at least {self.min_kv_tokens})",
        ]
        return "\n".join(lines)


def required_gpu_mib(cfg: Config) -> int:
    """The GPU memory (MiB, as nvidia.com/gpu.memory reports it) a node's GPU must have for the plan: the card
    size the plan was made for, serving.gpu_memory_gib."""
    return math.floor(cfg.serving.gpu_memory_gib * 1024)


def sidecar_context(cfg: Config) -> int | None:
    """The context length the sidecar serves, as far as the configuration says: `--context-length N` in
    cluster.sglang_args (SGLang's override), else policy.context_length, else what SGLang derives from
    serving.model_config_json (`modelfolder.context_length`); None when none says (the search pod asks the server)."""
    from types import SimpleNamespace

    from burnqed.policy.modelfolder import context_length

    args = cfg.cluster.sglang_args
    for index, arg in enumerate(args):
        value = arg.split("=", 1)[1] if arg.startswith("--context-length=") else (
            args[index + 1] if arg == "--context-length" and index + 1 < len(args) else None)
        if value is not None and value.isdigit():
            return int(value)
    if cfg.policy.context_length is not None:
        return cfg.policy.context_length
    if cfg.serving.model_config_json is not None:
        path = Path(cfg.serving.model_config_json).expanduser()
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"serving.model_config_json {path}: cannot read it ({exc})") from None
        return context_length(SimpleNamespace(**raw)) if isinstance(raw, dict) else None
    return None


def check_repair_context(cfg: Config) -> None:
    """`ConfigError` when search.repair_rounds asks for repair prompts the sidecar's context cannot hold
    (`burnqed.search.repair.repair_context_problem`, the check `burnqed search` repeats with the server's own
    figure); nothing when repair is off, no stage searches in whole or hybrid mode (search.mode, pipeline.eval_modes)
    or the context is not known here."""
    from burnqed.search.repair import repair_context_problem, sends_repair_prompts

    if not sends_repair_prompts(cfg.search, cfg.pipeline.eval_modes):
        return
    problem = repair_context_problem(cfg.search, cfg.policy, sidecar_context(cfg))
    if problem is not None:
        raise ConfigError(f"{problem} (the sidecar's context: cluster.sglang_args --context-length, "
                          "policy.context_length or serving.model_config_json)")


def gpu_plan(cfg: Config, *, encoder: bool, run_export: bool = False) -> GpuPlan:
    """The plan for a sidecar with (`encoder`) or without burnqed's encoder beside SGLang, serving an export of the
    run (`run_export`, `served_shape`) or a model given to the workflow; `ConfigError` (one
    line, with the numbers) when the model does not fit the card that way, or when the repair prompts the
    configuration asks for do not fit the context it serves (`check_repair_context`)."""
    check_repair_context(cfg)
    return _sglang_plan(cfg, served_shape(cfg, run_export=run_export), cfg.cluster.gpus_per_step, encoder=encoder,
                        forced=cfg.serving.sglang_mem_fraction,
                        who="SGLang and burnqed's encoder do" if encoder else "SGLang does",
                        advice="use a larger GPU, more GPUs per step, or lower serving.min_kv_tokens / "
                        "ebm.encode_batch_tokens")


def planner_gpu_plan(cfg: Config) -> GpuPlan:
    """The plan of the planner's sidecar (`planner_sidecar`): SGLang alone on its own `planner.gpus` GPUs of the
    card `serving.gpu_memory_gib`, for the planner's shape (`planner.model_config_json`, else the policy's sizes in
    `[serving]`), held to the same `serving.min_kv_tokens`; `ConfigError` (one line, with the numbers) when it does
    not fit."""
    shape = model_shape(cfg.serving, cfg.planner.model_config_json, "planner.model_config_json")
    return _sglang_plan(cfg, shape, cfg.planner.gpus, encoder=False, forced=None,
                        who="the planner's SGLang does",
                        advice="raise planner.gpus, use a larger GPU, or lower serving.min_kv_tokens")


def _sglang_plan(cfg: Config, shape: ModelShape, tp: int, *, encoder: bool, forced: float | None, who: str,
                 advice: str, min_kv: tuple[int, str] | None = None, lora: tuple[float, int] = (0.0, 0)) -> GpuPlan:
    """SGLang's sizing on GPU 0 of `tp` cards (after the encoder, with `encoder`); `forced`: a set
    --mem-fraction-static, checked instead of computed; `min_kv`: the KV tokens it must hold and what asks for them
    (default serving.min_kv_tokens); `lora`: the GiB and count of LoRA buffers in its static pool (--enable-lora)."""
    serving = cfg.serving
    gpu = serving.gpu_memory_gib
    context = serving.cuda_context_gib
    max_tokens = cfg.ebm.encoder_max_tokens
    batch_tokens = max(cfg.ebm.encode_batch_tokens, max_tokens)  # one text of max_tokens always fits a batch
    encoder_gib = shape.weights_gib + encoder_workspace_gib(shape, batch_tokens, max_tokens) if encoder else 0.0
    free = gpu - context - ((context + encoder_gib) if encoder else 0.0)
    reserve = serving.sglang_reserve_gib if serving.sglang_reserve_gib is not None else sglang_reserve_gib(gpu, tp)
    weights = shape.weights_gib / tp
    if free <= 0:
        raise ConfigError(f"GPU memory plan: {who} not fit a {gpu:g} GiB GPU: the encoder alone holds "
                          f"{context + encoder_gib:.1f} GiB ({shape.weights_gib:.1f} of weights); use a larger GPU "
                          "(serving.gpu_memory_gib) or lower ebm.encode_batch_tokens")
    if forced is not None:
        fraction = forced
        if (1 - fraction) * free < reserve:
            raise ConfigError(
                f"GPU memory plan: serving.sglang_mem_fraction {fraction:g} of the {free:.1f} GiB SGLang sees leaves "
                f"{(1 - fraction) * free:.1f} GiB outside its static pool, less than the {reserve:.1f} GiB it needs "
                f"(serving.sglang_reserve_gib): at most {math.floor((1 - reserve / free) * 1000) / 1000:.3f}"
            )
    else:
        fraction = math.floor((1 - reserve / free) * 1000) / 1000  # SGLang rounds its own choice to 3 digits
    lora_gib, lora_slots = lora[0] / tp, lora[1]
    kv_gib = fraction * free - weights - lora_gib
    kv_tokens = max(0, int(kv_gib * GIB // (shape.kv_bytes_per_token / tp)))
    least, asked_by = min_kv if min_kv is not None else (serving.min_kv_tokens, "serving.min_kv_tokens")
    plan = GpuPlan(gpu_gib=gpu, shape=shape, tp=tp, context_gib=context, encoder=encoder, encoder_gib=encoder_gib,
                   encoder_batch_tokens=batch_tokens, free_at_sglang_start=free, reserve_gib=reserve,
                   sglang_fraction=fraction, sglang_weights_gib=weights, kv_gib=kv_gib, kv_tokens=kv_tokens,
                   min_kv_tokens=least, lora_gib=lora_gib, lora_slots=lora_slots)
    if fraction <= 0 or kv_tokens < least:
        held = f"{weights:.1f} GiB of weights" + (f" and {lora_gib:.1f} of LoRA buffers" if lora_slots else "")
        raise ConfigError(
            f"GPU memory plan: {who} not fit a {gpu:g} GiB GPU: SGLang sees {free:.1f} GiB free, keeps "
            f"{reserve:.1f} outside its static pool (--mem-fraction-static {fraction:.3f}), and its "
            f"{fraction * free:.1f} GiB static pool minus {held} leaves {max(kv_gib, 0):.1f} GiB "
            f"= {kv_tokens} KV tokens, fewer than {asked_by} {least}; {advice}"
        )
    return plan


def planner_sidecar(cfg: Config) -> bool:
    """Whether the sketch-mode search pods carry the planner's own sidecar: a second served model
    (planner.backend = "sglang") at a loopback planner.url. Any other URL is a deployment the pods reach."""
    from burnqed.policy.sglang import is_loopback

    return cfg.planner.backend == "sglang" and is_loopback(cfg.planner.url)


def planner_pod_gpus(cfg: Config) -> int:
    """The GPUs the planner's sidecar adds to a search pod: planner.gpus when a stage searches in sketch mode
    (search.mode, pipeline.eval_modes) with the planner's own sidecar (`planner_sidecar`), else 0."""
    from burnqed.records.enums import SearchMode

    sketches = cfg.search.mode is SearchMode.SKETCH or SearchMode.SKETCH in cfg.pipeline.eval_modes
    return cfg.planner.gpus if sketches and planner_sidecar(cfg) else 0


def check_cluster_planner(cfg: Config) -> None:
    """`ConfigError` for a planner the cluster's sketch-mode pods cannot run: a local one (the search pod's main
    container has no GPU: the GPU belongs to the sidecars), or a sidecar with no model to fetch."""
    if cfg.planner.backend == "local":
        raise ConfigError("planner.backend = 'local' would load the planner in the search pod's main container, which "
                          "has no GPU (the sidecars hold the GPUs): set planner.backend = 'sglang', for a sidecar "
                          "(a loopback planner.url) or a deployment (any other planner.url)")
    if planner_sidecar(cfg) and not cfg.planner.model:
        raise ConfigError("planner.model is unset: the planner's sidecar serves the model folder it names (an "
                          "s3:// URI, fetched into the pod); set it, or point planner.url at a deployment")


def rl_sidecar(cfg: Config) -> bool:
    """Whether the rl step's pod carries an SGLang sidecar of its own: rl.rollout_engine = 'served' without
    rl.server_url (on one machine `burnqed rl` starts `burnqed serve` itself; a set rl.server_url is a server of its
    own, reached there)."""
    return cfg.rl.rollout_engine == "served" and cfg.rl.server_url is None


def rendered_plans(docs: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """The distinct GPU plans written into rendered workflow documents → the templates (workflow/step) using them."""
    plans: dict[str, list[str]] = {}
    for doc in docs:
        name = str(doc.get("metadata", {}).get("name") or doc.get("metadata", {}).get("generateName", "?"))
        for template in doc.get("spec", {}).get("templates", []):
            plan = ((template.get("metadata") or {}).get("annotations") or {}).get(PLAN_ANNOTATION)
            if plan:
                plans.setdefault(plan, []).append(f"{name.rstrip('-')}/{template['name']}")
    return plans

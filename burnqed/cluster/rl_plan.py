"""The GPU memory plans of the rl step (docs/cluster.md, "GPU memory plan"): its trainer's GPU (the policy, its
optimizer state, the reference, and TRL's own generation: a static part and the larger of generation and update)
and, under the served rollout engine, its SGLang sidecar on a GPU of its own (`rl_server_plan`, a
`cluster.gpu_plan.GpuPlan`). A plan that cannot fit is a `ConfigError` (exit 2) before anything is submitted.

    print(rl_gpu_plan(cfg).describe())      # the rl step's GPU
    rl_server_plan(cfg).sglang_fraction     # rl.rollout_engine = 'served': its sidecar's --mem-fraction-static
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from burnqed.cluster.gpu_plan import (
    ALLOCATOR_SLACK_GIB,
    GIB,
    MIB,
    WORKSPACE_SAFETY,
    GpuPlan,
    ModelShape,
    _sglang_plan,
    model_shape,
)
from burnqed.config import Config
from burnqed.config.rl import CONTINUOUS_PAGE_TOKENS
from burnqed.errors import ConfigError

# bitsandbytes NF4 with double quantisation: 4 bits, an 8-bit absmax per 64, a float32 constant per 256 blocks
NF4_BYTES = 0.5 + 1 / 64 + 4 / (64 * 256)


ADAM_BYTES = 8  # AdamW (the trainer's adamw_torch_fused): two float32 moments per trainable parameter


GRAD_BYTES = 4  # float32 gradients (full: float32 master weights; LoRA: peft keeps adapters in float32)


ADAPTER_BYTES = 4


# The rl sidecar's --max-loras-per-batch: the pushed version, and the base-only requests SGLang counts as one more
# (its /health generates without an adapter)
RL_LORA_SLOTS = 2


ADVICE = {"full": 'train with sft.method = "lora" or "qlora"',
          "qlora": 'train with sft.method = "lora" and sft.bf16 (its KV cache and activations are bf16, QLoRA\'s '
                   'float32)',
          "lora": "set sft.bf16 (bf16 weights, KV cache and activations)"}


def linear_dims(shape: ModelShape) -> dict[str, tuple[int, int]]:
    """(in, out) features of each projection of a Llama-shaped layer, by peft's module name."""
    q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    return {"q_proj": (shape.hidden, q), "k_proj": (shape.hidden, kv), "v_proj": (shape.hidden, kv),
            "o_proj": (q, shape.hidden), "gate_proj": (shape.hidden, shape.intermediate),
            "up_proj": (shape.hidden, shape.intermediate), "down_proj": (shape.intermediate, shape.hidden)}


def adapter_params(shape: ModelShape, rank: int, modules: Sequence[str]) -> int:
    """Parameters of a LoRA adapter of `rank` on `modules` (peft's names) of every layer: r × (in + out) each."""
    dims = linear_dims(shape)
    return rank * shape.layers * sum(sum(dims[name]) for name in dict.fromkeys(modules))


def layer_workspace_bytes(shape: ModelShape, tokens: int, act_bytes: int) -> float:
    """The widest live activations of one decoder layer over `tokens` tokens (as `encoder_workspace_gib`)."""
    return tokens * max(6 * shape.hidden, 4 * shape.intermediate + 2 * shape.hidden) * act_bytes


@dataclass(frozen=True, slots=True)
class RlGpuPlan:
    """The memory of the rl step's GPU (GiB): what stays for the whole run, and the larger of the two phases of a
    step that take turns (TRL's generation, then the update)."""

    gpu_gib: float
    shape: ModelShape
    method: str
    context_gib: float
    weights_gib: float
    trainable: int  # parameters the optimizer updates
    adapter_gib: float
    states_gib: float  # gradients + AdamW moments of the trainable parameters
    reference_gib: float  # rl.beta > 0: a frozen copy of the adapter, or of the full weights
    act_bytes: int  # dtype of the hidden states and the KV cache
    sequences: int  # prompts_per_step × num_generations
    sequence_tokens: int  # max_prompt_tokens + max_completion_tokens, in the KV cache (whole pages when continuous)
    kv_gib: float
    prefill_gib: float
    update_gib: float
    slack_gib: float
    served: bool = False  # rl.rollout_engine = 'served': the server generates; the trainer scores one completion

    @property
    def static_gib(self) -> float:
        return self.context_gib + self.weights_gib + self.adapter_gib + self.states_gib + self.reference_gib

    @property
    def generation_gib(self) -> float:
        return self.kv_gib + self.prefill_gib

    @property
    def peak_gib(self) -> float:
        return self.static_gib + max(self.generation_gib, self.update_gib) + self.slack_gib

    def describe(self) -> str:
        """The plan and its arithmetic, a few lines."""
        shape, act = self.shape, "bf16" if self.act_bytes == 2 else "float32"
        kv_token = shape.kv_heads * shape.head_dim * shape.layers * 2 * self.act_bytes
        return "\n".join([
            f"GPU {self.gpu_gib:g} GiB; rl trains the policy ({self.method}): {shape.params / 1e9:.2f}B parameters, "
            f"{self.trainable / 1e6:.1f}M trainable; generation and update with hidden states and KV cache in {act}",
            f"  static: CUDA context {self.context_gib:g} + weights {self.weights_gib:.2f}"
            + (f" + adapter {self.adapter_gib:.2f}" if self.adapter_gib else "")
            + f" + gradients and AdamW {self.states_gib:.2f} + reference {self.reference_gib:.2f} = "
            f"{self.static_gib:.2f} GiB",
            f"  generation: KV cache {self.sequences} sequences × {self.sequence_tokens} tokens × "
            f"{kv_token / MIB:.3f} MiB = {self.kv_gib:.2f} + prefill {self.prefill_gib:.2f} = "
            f"{self.generation_gib:.2f} GiB" if not self.served else
            f"  generation on the server; the trainer's log-probs of one completion at a time: KV cache "
            f"{self.sequence_tokens} tokens × {kv_token / MIB:.3f} MiB = {self.kv_gib:.2f} + forward and logits "
            f"{self.prefill_gib:.2f} = {self.generation_gib:.2f} GiB",
            f"  update (gradient checkpointing): {self.update_gib:.2f} GiB",
            f"  peak {self.static_gib:.2f} + max({self.generation_gib:.2f}, {self.update_gib:.2f}) + slack "
            f"{self.slack_gib:g} = {self.peak_gib:.2f} GiB of {self.gpu_gib:g}",
        ])


def rl_gpu_plan(cfg: Config) -> RlGpuPlan:
    """The plan of the rl step's one GPU (`burnqed rl`: TRL's GRPOTrainer with its own generation, one process), for
    the served model's shape (`[serving]`: the policy RL trains is the model search serves) on the card
    `serving.gpu_memory_gib`; `ConfigError` (one line, with the numbers) when it does not fit.

    The policy as `sft.model.load_for_training` loads it: full = float32 master weights; lora = the base in bf16
    (`sft.bf16`) or float32; qlora = NF4 linear layers with the embeddings, LM head and norms in float32 (peft's
    prepare_model_for_kbit_training casts them, so the hidden states and the KV cache are float32 too). The adapter
    (rank `sft.lora_r` on `sft.target_modules`) in float32; gradients and AdamW's two moments for what is trained; with
    `rl.beta` > 0 the reference (TRL copies the adapter, or loads the full model again). A step generates first
    (a KV cache of prompts_per_step × num_generations sequences of max_prompt_tokens + max_completion_tokens, rounded
    up to whole pages under rl.rollout_engine = 'continuous', and one layer's prefill activations) and updates after
    (TRL's gradient checkpointing: every layer's input kept, one layer recomputed with its gradients; the log-probs
    come from TRL's chunked LM head); the peak holds the larger of the two, the workspaces × WORKSPACE_SAFETY. Under
    rl.rollout_engine = 'served' the server generates (on the rl step's sidecar, `rl_server_plan`, or at
    rl.server_url) and the trainer's generation phase is `rl.served.trainer_logprobs`: one sequence at a time."""
    sft, rl, serving = cfg.sft, cfg.rl, cfg.serving
    shape = model_shape(serving)
    dims = linear_dims(shape)
    unknown = [name for name in sft.target_modules if name not in dims]
    if sft.method != "full" and unknown:
        raise ConfigError(f"GPU memory plan of the rl step: sft.target_modules {', '.join(unknown)} are not "
                          f"projections of a Llama-shaped layer ({', '.join(dims)}): the adapter cannot be sized")
    params = shape.params
    bf16 = sft.bf16
    linear = shape.layers * sum(i * o for i, o in dims.values())
    if sft.method == "full":
        weights = params * 4.0
    elif sft.method == "lora":
        weights = params * (2.0 if bf16 else 4.0)
    else:
        weights = linear * NF4_BYTES + (params - linear) * 4.0
    adapter = 0 if sft.method == "full" else adapter_params(shape, sft.lora_r, sft.target_modules)
    trainable = params if sft.method == "full" else adapter
    reference = (params * 4.0 if sft.method == "full" else adapter * ADAPTER_BYTES) if rl.beta > 0 else 0.0
    act = 2 if sft.method == "lora" and bf16 else 4
    sequences = rl.prompts_per_step * rl.num_generations
    tokens = rl.max_prompt_tokens + rl.max_completion_tokens
    # the KV cache's tokens per sequence: continuous batching's are whole pages (rl.grpo_trainer.engine_args)
    cached = tokens
    if rl.rollout_engine == "continuous":
        cached = -(-tokens // CONTINUOUS_PAGE_TOKENS) * CONTINUOUS_PAGE_TOKENS
    served = rl.rollout_engine == "served"
    kv_token = shape.kv_heads * shape.head_dim * shape.layers * 2 * act
    kv = (1 if served else sequences) * cached * kv_token
    if served:  # rl.served.trainer_logprobs: one sequence's forward, its logits, their float32 log-softmax
        prefill = (layer_workspace_bytes(shape, tokens, act) + tokens * shape.vocab * act
                   + 2 * rl.max_completion_tokens * shape.vocab * 4) * WORKSPACE_SAFETY
    else:
        prefill = layer_workspace_bytes(shape, sequences * rl.max_prompt_tokens, act) * WORKSPACE_SAFETY
    update = (shape.layers * sequences * tokens * shape.hidden * act
              + 2 * layer_workspace_bytes(shape, sequences * tokens, act)) * WORKSPACE_SAFETY
    plan = RlGpuPlan(
        gpu_gib=serving.gpu_memory_gib, shape=shape, method=sft.method, context_gib=serving.cuda_context_gib,
        weights_gib=weights / GIB, trainable=trainable, adapter_gib=adapter * ADAPTER_BYTES / GIB,
        states_gib=trainable * (GRAD_BYTES + ADAM_BYTES) / GIB, reference_gib=reference / GIB, act_bytes=act,
        sequences=sequences, sequence_tokens=cached, kv_gib=kv / GIB, prefill_gib=prefill / GIB,
        update_gib=update / GIB, slack_gib=ALLOCATOR_SLACK_GIB, served=served,
    )
    if plan.peak_gib > plan.gpu_gib:
        raise ConfigError(
            f"GPU memory plan of the rl step: {plan.peak_gib:.1f} GiB does not fit a {plan.gpu_gib:g} GiB GPU "
            f"(serving.gpu_memory_gib): the policy ({sft.method}) holds {plan.static_gib:.1f} GiB with its optimizer "
            f"state and reference, generation {plan.generation_gib:.1f} GiB (KV cache of {1 if served else sequences} "
            f"sequences × {cached} tokens), the update {plan.update_gib:.1f} GiB; lower rl.prompts_per_step, "
            f"rl.num_generations, "
            f"rl.max_prompt_tokens or rl.max_completion_tokens, "
            f"{'' if act == 2 and sft.method == 'lora' else ADVICE[sft.method] + ', '}or use a larger GPU"
        )
    return plan


def rl_server_plan(cfg: Config) -> GpuPlan:
    """The plan of the rl step's SGLang sidecar (`rl_sidecar`): SGLang alone on `cluster.gpus_per_step` GPUs of its
    own (Kubernetes gives each container its own GPUs: the trainer's is planned by `rl_gpu_plan`) of the card
    `serving.gpu_memory_gib`, serving the policy's shape in its dtype; for an adapter policy (sft.method lora or
    qlora) with --enable-lora and RL_LORA_SLOTS adapter buffers of rank sft.lora_r on sft.target_modules in its static
    pool; its KV cache must hold one step's rollouts at once, prompts_per_step × num_generations sequences of
    max_prompt_tokens + max_completion_tokens (they are sent as one /generate). `ConfigError` (one line, with the
    numbers) when it does not fit."""
    rl, sft = cfg.rl, cfg.sft
    shape = model_shape(cfg.serving)
    tokens = rl.prompts_per_step * rl.num_generations * (rl.max_prompt_tokens + rl.max_completion_tokens)
    lora = (0.0, 0)
    if sft.method != "full":
        unknown = [name for name in sft.target_modules if name not in linear_dims(shape)]
        if unknown:
            raise ConfigError(f"GPU memory plan of the rl step's SGLang: sft.target_modules {', '.join(unknown)} are "
                              "not projections of a Llama-shaped layer: its LoRA buffers cannot be sized")
        per_adapter = adapter_params(shape, sft.lora_r, sft.target_modules) * shape.dtype_bytes / GIB
        lora = (RL_LORA_SLOTS * per_adapter, RL_LORA_SLOTS)
    return _sglang_plan(cfg, shape, cfg.cluster.gpus_per_step, encoder=False, forced=None,
                        who="the rl step's SGLang does",
                        advice="lower rl.prompts_per_step, rl.num_generations, rl.max_prompt_tokens or "
                        "rl.max_completion_tokens, use a larger GPU, or more GPUs per step",
                        min_kv=(tokens, "one step's rollouts (rl.prompts_per_step × num_generations × "
                                "(max_prompt_tokens + max_completion_tokens))"), lora=lora)

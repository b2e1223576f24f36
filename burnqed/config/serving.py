"""The `[serving]` section: the GPU memory plan of a search pod's sidecar (docs/cluster.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from burnqed.config.identity import neutral
from burnqed.config.section import Section

PLAN = neutral("the GPU sidecar's memory plan: what fits, not what it computes")


class ServingConfig(Section):
    """The GPU sidecar of search and eval pods: SGLang serving the policy, and burnqed's encoder beside it when the
    stage scores with the value model. `burnqed render` computes their GPU memory plan from these sizes
    (burnqed/cluster/gpu_plan.py, docs/cluster.md) and refuses a plan that cannot fit. Defaults: one 80 GB GPU
    serving DeepSeek-Prover-V2-7B (Llama-shaped) in bf16."""

    gpu_memory_gib: float = Field(
        default=79.6, gt=0,
        description="Memory of one GPU of the GPU pool as CUDA reports it (nvidia-smi's total MiB / 1024): 79.6 for "
        "an 80 GB A100/H100, 39.4 for a 40 GB A100, 139.8 for an H200.",
        json_schema_extra=PLAN,
    )
    model_config_json: str | None = Field(
        default=None,
        description="A local config.json of the served model; when set, the model_* sizes below are read from it "
        "(hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim, "
        "vocab_size, tie_word_embeddings, torch_dtype).",
        json_schema_extra=PLAN,
    )
    model_dtype: Literal["bfloat16", "float16", "float32"] = Field(
        default="bfloat16", description="dtype of the served weights (and of SGLang's KV cache).",
        json_schema_extra=PLAN,
    )
    model_layers: int = Field(default=30, ge=1, description="num_hidden_layers of the served model.",
                              json_schema_extra=PLAN)
    model_hidden: int = Field(default=4096, ge=1, description="hidden_size of the served model.",
                              json_schema_extra=PLAN)
    model_intermediate: int = Field(default=11008, ge=1, description="intermediate_size (MLP) of the served model.",
                                    json_schema_extra=PLAN)
    model_heads: int = Field(default=32, ge=1, description="num_attention_heads of the served model.",
                             json_schema_extra=PLAN)
    model_kv_heads: int = Field(default=32, ge=1, description="num_key_value_heads (GQA) of the served model.",
                                json_schema_extra=PLAN)
    model_head_dim: int | None = Field(
        default=None, ge=1, description="head_dim of the served model; unset = hidden / heads.",
        json_schema_extra=PLAN,
    )
    model_vocab: int = Field(default=102400, ge=1, description="vocab_size of the served model.",
                             json_schema_extra=PLAN)
    model_tied_embeddings: bool = Field(
        default=False, description="tie_word_embeddings: the LM head shares the input embeddings.",
        json_schema_extra=PLAN,
    )
    cuda_context_gib: float = Field(
        default=1.0, ge=0, description="GPU memory of one process's CUDA context and library handles.",
        json_schema_extra=PLAN,
    )
    sglang_reserve_gib: float | None = Field(
        default=None, gt=0,
        description="GPU memory SGLang needs outside its static pool (chunked-prefill activations, CUDA graphs); "
        "unset = SGLang 0.5.6's own estimate for the card (13.1 GiB on an 80 GB card).",
        json_schema_extra=PLAN,
    )
    sglang_mem_fraction: float | None = Field(
        default=None, gt=0, lt=1,
        description="Force SGLang's --mem-fraction-static (a share of the memory free when it starts, not of the "
        "card); unset = computed by the plan. A forced value is still checked against the plan.",
        json_schema_extra=PLAN,
    )
    min_kv_tokens: int = Field(
        default=32768, ge=1, description="Smallest KV cache (tokens) the plan accepts for SGLang.",
        json_schema_extra=PLAN,
    )

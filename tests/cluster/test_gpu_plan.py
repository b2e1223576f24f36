"""The GPU memory plan of the sidecar (burnqed/cluster/gpu_plan.py): SGLang's real sizing (a share of the memory
free when it starts), the encoder started first with a cap, refusals with the numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from burnqed.cluster.gpu_plan import gpu_plan, model_shape, sglang_reserve_gib
from burnqed.config import Config, load_config
from burnqed.errors import ConfigError

# DeepSeek-Prover-V2-7B's published config.json (a Llama shape): the sizes the expected figures below start from.
LAYERS, HIDDEN, INTERMEDIATE, HEADS, KV_HEADS, VOCAB, BF16 = 30, 4096, 11008, 32, 32, 102400, 2
# A run that fine-tunes it: [serving]'s default sizes are its, and the sidecars serve its exports (with sft.base_model
# unset they serve the tiny embedded model's: test_the_tiny_models_exports_are_planned_as_what_they_are).
SEVEN_B = "sft.base_model=s3://b/models/DeepSeek-Prover-V2-7B"


def expected_sglang(card_gib: float, held_gib: float, context_gib: float) -> tuple[float, float, int]:
    """(F, --mem-fraction-static, KV tokens) worked out here from SGLang 0.5.6's own rules, not from gpu_plan:
    F = the card minus what earlier processes hold minus SGLang's CUDA context; the reserve for an 80 GB card
    (`server_args._handle_gpu_memory_settings`: chunked prefill 8192, CUDA graph batch 256, tp 1, at least 10 GB);
    fraction = 1 − reserve / F rounded down to 3 digits; KV = fraction × F − weights, in cells of K and V of every
    layer (`cell_size`)."""
    head_dim = HIDDEN // HEADS
    attention = HIDDEN * HEADS * head_dim * 2 + HIDDEN * KV_HEADS * head_dim * 2  # q, o and k, v
    params = VOCAB * HIDDEN * 2 + LAYERS * (attention + 3 * HIDDEN * INTERMEDIATE + 2 * HIDDEN) + HIDDEN
    weights_gib = params * BF16 / 2**30
    reserve_gib = max(512 + 8192 * 1.5 + 256 * 2 + 1 / 8 * 1024, 10 * 1024) / 1024
    free = card_gib - held_gib - context_gib
    fraction = int((1 - reserve_gib / free) * 1000) / 1000
    cell = 2 * LAYERS * KV_HEADS * head_dim * BF16
    return free, fraction, int((fraction * free - weights_gib) * 2**30 // cell)


def test_the_7b_model_on_an_80_gb_card() -> None:
    cfg = load_config(sets=[SEVEN_B])
    assert (cfg.serving.gpu_memory_gib, cfg.serving.cuda_context_gib, cfg.cluster.gpus_per_step) == (79.6, 1.0, 1)
    shape = model_shape(cfg.serving)
    assert shape.params == 6_910_365_696  # the published parameter count of DeepSeek-Prover-V2-7B
    assert shape.kv_bytes_per_token == 2 * LAYERS * KV_HEADS * (HIDDEN // HEADS) * BF16
    alone = gpu_plan(cfg, encoder=False)
    free, fraction, kv_tokens = expected_sglang(79.6, 0.0, 1.0)
    assert alone.free_at_sglang_start == pytest.approx(free) and alone.sglang_fraction == fraction
    assert alone.kv_tokens == kv_tokens and (fraction, kv_tokens // 1000) == (0.833, 114)
    both = gpu_plan(cfg, encoder=True)
    assert both.encoder_batch_tokens == max(cfg.ebm.encode_batch_tokens, cfg.ebm.encoder_max_tokens)
    # The encoder holds its weights plus at least the gated MLP's activations of its largest batch.
    mlp = both.encoder_batch_tokens * 4 * INTERMEDIATE * BF16 / 2**30
    assert both.encoder_gib > shape.weights_gib + mlp
    # SGLang measures F after the encoder holds its context and its cap.
    free, fraction, kv_tokens = expected_sglang(79.6, 1.0 + both.encoder_gib, 1.0)
    assert both.free_at_sglang_start == pytest.approx(free) and both.sglang_fraction == fraction
    assert both.kv_tokens == kv_tokens >= cfg.serving.min_kv_tokens
    for plan in (alone, both):
        # What SGLang keeps outside its static pool covers the reserve it asks for.
        assert (1 - plan.sglang_fraction) * plan.free_at_sglang_start >= plan.reserve_gib


def test_sglang_reserve_follows_its_own_heuristic() -> None:
    # 512 MB + 1.5 × chunked prefill + 2 × CUDA graph batch + tp/8 GB, at least 10 GB above 60 GB (server_args.py).
    assert sglang_reserve_gib(79.6, 1) == (512 + 8192 * 1.5 + 256 * 2 + 128) / 1024
    assert sglang_reserve_gib(39.4, 1) == (512 + 4096 * 1.5 + 32 * 2 + 128) / 1024
    assert sglang_reserve_gib(139.8, 1) == sglang_reserve_gib(79.6, 1)
    assert sglang_reserve_gib(180.0, 8) == (512 + 16384 * 1.5 + 512 * 2 + 1024) / 1024


def test_the_old_fractions_could_not_fit_and_are_refused_with_the_numbers() -> None:
    # 0.3 of what SGLang sees is less than the weights plus the smallest useful KV cache.
    with pytest.raises(ConfigError, match=r"static pool minus 12.9 GiB of weights leaves .* fewer than "
                                          r"serving.min_kv_tokens 32768") as refused:
        gpu_plan(load_config(sets=[SEVEN_B, "serving.sglang_mem_fraction=0.3"]), encoder=True)
    assert "\n" not in str(refused.value)
    with pytest.raises(ConfigError, match=r"leaves 6.1 GiB outside its static pool, less than the 13.1 GiB it needs"
                                          r" \(serving.sglang_reserve_gib\): at most 0.785"):
        gpu_plan(load_config(sets=[SEVEN_B, "serving.sglang_mem_fraction=0.9"]), encoder=True)
    forced = gpu_plan(load_config(sets=[SEVEN_B, "serving.sglang_mem_fraction=0.7"]), encoder=True)
    assert forced.sglang_fraction == 0.7 and forced.kv_tokens >= 32768


def test_a_small_card_is_refused_and_the_plan_can_be_relaxed() -> None:
    small = [SEVEN_B, "serving.gpu_memory_gib=39.4"]
    assert gpu_plan(load_config(sets=small), encoder=False).kv_tokens > 32768  # SGLang alone fits a 40 GB card
    with pytest.raises(ConfigError, match=r"SGLang and burnqed's encoder do not fit a 39.4 GiB GPU: SGLang sees "
                                          r"21.1 GiB free"):
        gpu_plan(load_config(sets=small), encoder=True)
    relaxed = gpu_plan(load_config(sets=[*small, "serving.min_kv_tokens=2048", "ebm.encode_batch_tokens=8192"]),
                       encoder=True)
    assert relaxed.kv_tokens >= 2048 and relaxed.encoder_gib < 16.32
    with pytest.raises(ConfigError, match="the encoder alone holds"):
        gpu_plan(load_config(sets=[SEVEN_B, "serving.gpu_memory_gib=12"]), encoder=True)


def test_sizes_can_come_from_the_models_config_json(tmp_path: Path) -> None:
    config = {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 30, "num_attention_heads": 32,
              "num_key_value_heads": 32, "vocab_size": 102400, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    from_file = load_config(sets=[f"serving.model_config_json={path}"])
    assert model_shape(from_file.serving) == model_shape(Config().serving)
    # A GQA model (8 KV heads) needs a quarter of the KV cache per token.
    path.write_text(json.dumps({**config, "num_key_value_heads": 8}))
    assert model_shape(from_file.serving).kv_bytes_per_token == 491_520 // 4
    path.write_text("{}")
    with pytest.raises(ConfigError, match=r"serving.model_config_json .*config.json: cannot read the model's sizes"):
        gpu_plan(from_file, encoder=False)


def test_the_tiny_models_exports_are_planned_as_what_they_are() -> None:
    # sft.base_model unset: the iteration trains the tiny embedded model, whose exports the sidecars serve; the
    # [serving] defaults describe DeepSeek-Prover-V2-7B, which the default render used to plan (6.91B, 12.87 GiB)
    tiny = gpu_plan(Config(), encoder=False, run_export=True)
    # a model given to the eval or baseline workflow is planned with [serving]'s sizes
    assert gpu_plan(Config(), encoder=False).shape == model_shape(Config().serving)
    assert (tiny.shape.layers, tiny.shape.hidden, tiny.shape.dtype, tiny.shape.params) == (2, 64, "float32", 164_160)
    assert tiny.describe().splitlines()[0].startswith("GPU 79.6 GiB; model 0.16M parameters in float32 = 0.00 GiB")
    # a model's sizes named in [serving] are planned whatever SFT starts from
    named = gpu_plan(load_config(sets=["serving.model_layers=30"]), encoder=False, run_export=True)
    assert named.shape == model_shape(Config().serving) and named.shape.params == 6_910_365_696
    assert gpu_plan(load_config(sets=[SEVEN_B]), encoder=False, run_export=True).shape == model_shape(Config().serving)

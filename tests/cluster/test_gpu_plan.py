"""The GPU memory plan of the sidecar (burnqed/cluster/gpu_plan.py): SGLang's real sizing (a share of the memory
free when it starts), the encoder started first with a cap, refusals with the numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from burnqed.cluster.gpu_plan import GIB, gpu_plan, model_shape, sglang_reserve_gib
from burnqed.config import Config, load_config
from burnqed.errors import ConfigError


def test_the_7b_model_on_an_80_gb_card() -> None:
    cfg = Config()
    shape = model_shape(cfg.serving)
    assert shape.params == 6_910_365_696  # DeepSeek-Prover-V2-7B's Llama shape
    assert round(shape.weights_gib, 2) == 12.87 and shape.kv_bytes_per_token == 491_520
    alone = gpu_plan(cfg, encoder=False)
    assert (alone.free_at_sglang_start, alone.sglang_fraction, alone.kv_tokens) == (78.6, 0.833, 114_911)
    both = gpu_plan(cfg, encoder=True)
    assert round(both.encoder_gib, 2) == 16.32 and both.encoder_batch_tokens == 16384
    # SGLang measures F after the encoder holds its cap and both CUDA contexts exist.
    assert both.free_at_sglang_start == pytest.approx(79.6 - 1.0 - both.encoder_gib - 1.0)
    assert both.sglang_fraction == 0.785 and both.kv_tokens == 76_960
    for plan in (alone, both):
        # SGLang's formula: KV = fraction × F − weights, slack (1 − fraction) × F ≥ its reserve.
        assert plan.kv_gib == pytest.approx(plan.sglang_fraction * plan.free_at_sglang_start - shape.weights_gib)
        assert (1 - plan.sglang_fraction) * plan.free_at_sglang_start >= plan.reserve_gib
        assert plan.kv_tokens == int(plan.kv_gib * GIB // shape.kv_bytes_per_token)
        assert plan.kv_tokens >= cfg.serving.min_kv_tokens


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
        gpu_plan(load_config(sets=["serving.sglang_mem_fraction=0.3"]), encoder=True)
    assert "\n" not in str(refused.value)
    with pytest.raises(ConfigError, match=r"leaves 6.1 GiB outside its static pool, less than the 13.1 GiB it needs"
                                          r" \(serving.sglang_reserve_gib\): at most 0.785"):
        gpu_plan(load_config(sets=["serving.sglang_mem_fraction=0.9"]), encoder=True)
    forced = gpu_plan(load_config(sets=["serving.sglang_mem_fraction=0.7"]), encoder=True)
    assert forced.sglang_fraction == 0.7 and forced.kv_tokens >= 32768


def test_a_small_card_is_refused_and_the_plan_can_be_relaxed() -> None:
    small = ["serving.gpu_memory_gib=39.4"]
    assert gpu_plan(load_config(sets=small), encoder=False).kv_tokens > 32768  # SGLang alone fits a 40 GB card
    with pytest.raises(ConfigError, match=r"SGLang and burnqed's encoder do not fit a 39.4 GiB GPU: SGLang sees "
                                          r"21.1 GiB free"):
        gpu_plan(load_config(sets=small), encoder=True)
    relaxed = gpu_plan(load_config(sets=[*small, "serving.min_kv_tokens=2048", "ebm.encode_batch_tokens=8192"]),
                       encoder=True)
    assert relaxed.kv_tokens >= 2048 and relaxed.encoder_gib < 16.32
    with pytest.raises(ConfigError, match="the encoder alone holds"):
        gpu_plan(load_config(sets=["serving.gpu_memory_gib=12"]), encoder=True)


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

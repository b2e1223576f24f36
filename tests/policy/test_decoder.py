"""burnqed's Llama forward pass (burnqed/policy/decoder.py) against transformers' own on the tiny model: the same
logits to float rounding through a padded prefill and cached steps, the same greedy and seeded samples."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from burnqed.policy.base import Sampling
from burnqed.policy.decoder import LlamaDecoder, TorchLlama
from burnqed.policy.localmodel import LocalModel
from burnqed.policy.tiny import training_pairs
from burnqed.text.prompt import PromptFormat, stop_strings
from leankit.corpus import load_corpus

STOP = stop_strings(PromptFormat.PLAIN_TACTIC)


@pytest.fixture(scope="module")
def torch_llama(tiny_model_dir: Path) -> Iterator[LocalModel]:
    """The tiny model as `LocalModel.load` reads it on the CPU: no transformers model class (`load_torch_llama`)."""
    loaded = LocalModel.load(tiny_model_dir, device="cpu", seed=0)
    yield loaded
    loaded.close()


@pytest.fixture(scope="module")
def converted(reference: LocalModel) -> LocalModel:
    """transformers' model decoding through burnqed's pass built from its parameters (`LlamaDecoder.for_model`)."""
    return LocalModel(reference.model, reference.tokenizer, reference.path, seed=0)


@pytest.fixture(scope="module")
def prompts() -> list[str]:
    pairs = training_pairs(load_corpus())
    return [pairs[0][0], pairs[40][0], pairs[120][0]]  # three lengths: the shorter ones are left-padded


def test_the_tiny_model_decodes_through_burnqeds_pass_and_other_models_do_not(
        torch_llama: LocalModel, reference: LocalModel, converted: LocalModel) -> None:
    assert isinstance(torch_llama.model, TorchLlama) and torch_llama._forward is torch_llama.model.decoder
    assert isinstance(converted._forward, LlamaDecoder)
    assert reference._forward is reference.model
    other = SimpleNamespace(device=torch_llama.model.device, config=SimpleNamespace(model_type="qwen2"), lm_head=None)
    assert LlamaDecoder.for_model(other) is None
    meta = SimpleNamespace(type="meta")
    assert LlamaDecoder.for_model(SimpleNamespace(device=meta, config=reference.model.config, lm_head=None)) is None


@pytest.mark.parametrize("built", ["from the folder", "from transformers' model"])
def test_logits_agree_with_transformers_through_a_padded_prefill_and_cached_steps(
        torch_llama: LocalModel, converted: LocalModel, reference: LocalModel, prompts: list[str], built: str) -> None:
    import torch

    decoder = (torch_llama if built == "from the folder" else converted)._forward
    assert isinstance(decoder, LlamaDecoder)
    with torch.inference_mode():
        tokenizer = torch_llama.tokenizer
        enc = tokenizer.pad({"input_ids": [tokenizer(p)["input_ids"] for p in prompts]}, padding=True,
                            padding_side="left")
        ids, mask = torch.tensor(enc["input_ids"]), torch.tensor(enc["attention_mask"])
        assert bool((mask == 0).any())  # some row is padded
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        mine = decoder(input_ids=ids, attention_mask=mask, position_ids=positions)
        theirs = reference.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True)
        cache, their_cache = mine.past_key_values, theirs.past_key_values
        their_logits = theirs.logits[:, -1:]
        next_pos = positions[:, -1:] + 1
        for _ in range(6):
            assert torch.allclose(mine.logits, their_logits, atol=1e-4, rtol=1e-4)
            chosen = their_logits[:, -1].argmax(-1, keepdim=True)
            mask = torch.cat([mask, mask.new_ones((len(prompts), 1))], dim=1)
            mine = decoder(input_ids=chosen, attention_mask=mask, position_ids=next_pos, past_key_values=cache)
            theirs = reference.model(input_ids=chosen, attention_mask=mask, position_ids=next_pos,
                                past_key_values=their_cache, use_cache=True)
            cache, their_cache, their_logits = mine.past_key_values, theirs.past_key_values, theirs.logits
            next_pos = next_pos + 1
        assert torch.allclose(mine.logits, their_logits, atol=1e-4, rtol=1e-4)
        with pytest.raises(ValueError, match="one new token"):
            decoder(input_ids=ids[:, :2], attention_mask=mask, position_ids=positions[:, :2], past_key_values=cache)


def test_greedy_and_seeded_samples_are_those_of_transformers_pass(torch_llama: LocalModel, reference: LocalModel,
                                                                  prompts: list[str]) -> None:
    greedy = Sampling(n=2, temperature=0.0, max_new_tokens=32, stop=STOP)
    assert ([[g.token_ids for g in group] for group in torch_llama.generate_detailed(prompts, greedy)]
            == [[g.token_ids for g in group] for group in reference.generate_detailed(prompts, greedy)])
    # batched rows that finish at different steps leave the cache (batch_select_indices) mid-decoding
    sampled = Sampling(n=4, temperature=1.0, top_p=0.95, max_new_tokens=32, stop=STOP)
    seeds = [[10 * i + j for j in range(4)] for i in range(len(prompts))]
    mine = torch_llama.generate_detailed(prompts, sampled, seeds)
    theirs = reference.generate_detailed(prompts, sampled, seeds)
    assert [[g.token_ids for g in group] for group in mine] == [[g.token_ids for g in group] for group in theirs]
    for group, their_group in zip(mine, theirs, strict=True):
        for gen, their_gen in zip(group, their_group, strict=True):
            assert list(gen.token_logprobs) == pytest.approx(list(their_gen.token_logprobs), abs=1e-4)
    assert len({g.token_ids for group in mine for g in group}) > 3  # the samples differ: the test can tell

"""The in-process backend on the tiny model: true log-probs, stop strings, grouping, seeds, embeddings."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from burnqed.config import PolicyConfig
from burnqed.errors import ModelError, ModelInputError, PolicyError
from burnqed.policy.base import Encoder, EncoderSpec, Policy, Sampling, prompt_error
from burnqed.policy.decoder import TorchLlama
from burnqed.policy.localmodel import Generation, LocalModel, token_batches
from burnqed.policy.localpolicy import LocalEncoder, LocalPolicy
from burnqed.policy.modelfolder import PROBE_TEXT
from burnqed.policy.tiny import training_pairs
from burnqed.storage import Store
from burnqed.text.prompt import PromptFormat, stop_strings
from leankit.corpus import load_corpus

if TYPE_CHECKING:
    import torch

STOP = stop_strings(PromptFormat.PLAIN_TACTIC)


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path) -> Iterator[LocalModel]:
    loaded = LocalModel.load(tiny_model_dir, device="cpu", seed=0)
    yield loaded
    loaded.close()


@pytest.fixture(scope="module")
def prompts() -> list[str]:
    pairs = training_pairs(load_corpus())
    return [pairs[0][0], pairs[40][0], pairs[120][0]]  # three different lengths


def forward_logprobs(model: LocalModel, prompt: str, tokens: tuple[int, ...]) -> list[float]:
    """Per-token log_softmax of a plain, unpadded forward pass over prompt + tokens (`model`: transformers')."""
    import torch

    prompt_ids = model.tokenizer(prompt)["input_ids"]
    with torch.no_grad():
        logits = model.model(input_ids=torch.tensor([prompt_ids + list(tokens)])).logits[0]
    logp = logits.float().log_softmax(-1)
    return [float(logp[len(prompt_ids) - 1 + i, t]) for i, t in enumerate(tokens)]


@pytest.mark.slow
def test_logprobs_are_the_true_pre_temperature_logprobs(model: LocalModel, reference: LocalModel, prompts: list[str]):
    import torch

    sampling = Sampling(n=3, temperature=1.3, top_p=0.9, max_new_tokens=24, stop=STOP)
    groups = model.generate_detailed(prompts, sampling)
    tempered_differs = False
    for prompt, group in zip(prompts, groups, strict=True):
        for gen in group:
            expected = forward_logprobs(reference, prompt, gen.token_ids)
            assert gen.logprob == pytest.approx(sum(expected), abs=1e-4)
            assert list(gen.token_logprobs) == pytest.approx(expected, abs=1e-4)
            completion = gen.completion()
            assert (completion.text, completion.n_tokens) == (gen.text, len(gen.token_ids))
            assert completion.logprob == gen.logprob
            # What a post-temperature score would have been: a test that could catch the mix-up.
            prompt_ids = model.tokenizer(prompt)["input_ids"]
            with torch.no_grad():
                logits = reference.model(input_ids=torch.tensor([prompt_ids + list(gen.token_ids)])).logits[0]
            scaled = (logits / 1.3).log_softmax(-1)
            tempered = sum(float(scaled[len(prompt_ids) - 1 + i, t]) for i, t in enumerate(gen.token_ids))
            tempered_differs |= abs(tempered - gen.logprob) > 1e-2
    assert tempered_differs


@pytest.mark.slow
def test_stop_string_is_trimmed_and_its_token_counted(model: LocalModel, prompts: list[str]):
    groups = model.generate_detailed(prompts, Sampling(n=4, temperature=1.0, max_new_tokens=40, stop=STOP))
    stopped = [gen for group in groups for gen in group if gen.finish_reason == "stop"]
    assert stopped
    for gen in stopped:
        decoded = model.tokenizer.decode(list(gen.token_ids), skip_special_tokens=True)
        assert "```" not in gen.text
        assert gen.matched == "```"
        assert decoded.startswith(gen.text) and decoded[len(gen.text) :].startswith("```")
        # Generation ended on the token that completed the stop string.
        assert "```" not in model.tokenizer.decode(list(gen.token_ids[:-1]), skip_special_tokens=True)


@pytest.mark.slow
def test_eos_stops_without_stop_strings_and_length_limits(model: LocalModel, prompts: list[str]):
    [[gen]] = model.generate_detailed(prompts[:1], Sampling(n=1, temperature=0.0, max_new_tokens=60))
    assert (gen.finish_reason, gen.matched) == ("stop", model.tokenizer.eos_token_id)
    assert gen.token_ids[-1] == model.tokenizer.eos_token_id
    assert gen.text.endswith("\n```")  # the trained completion shape: tactic, fence, EOS
    [[short]] = model.generate_detailed(prompts[:1], Sampling(n=1, temperature=0.0, max_new_tokens=2, stop=STOP))
    assert (short.finish_reason, short.matched, len(short.token_ids)) == ("length", None, 2)
    assert short.token_ids == gen.token_ids[:2]


@pytest.mark.slow
def test_length_is_checked_before_the_stop_string_like_sglang_056(model: LocalModel, prompts: list[str]):
    # Greedy decoding ends on the token that completes the fence; allowing exactly that many tokens makes the
    # stop string and the length limit coincide: SGLang 0.5.6 reports "length" and keeps the stop in the text.
    [[free]] = model.generate_detailed(prompts[:1], Sampling(n=1, temperature=0.0, max_new_tokens=60, stop=STOP))
    assert (free.finish_reason, free.matched) == ("stop", "```")
    [[capped]] = model.generate_detailed(
        prompts[:1], Sampling(n=1, temperature=0.0, max_new_tokens=len(free.token_ids), stop=STOP))
    assert (capped.finish_reason, capped.matched) == ("length", None)
    assert capped.token_ids == free.token_ids
    assert capped.text.startswith(free.text) and "```" in capped.text[len(free.text):]
    # Two stop strings completed by the same token: SGLang takes them in the order given (not the earlier
    # position) and cuts the text at that one's first occurrence.
    word = next(w for w in (model.tokenizer.decode([t]).strip() for t in free.token_ids) if len(w) >= 3)
    stops = (word[1:3], word[0:2])
    [[ordered]] = model.generate_detailed(prompts[:1], Sampling(n=1, temperature=0.0, max_new_tokens=60, stop=stops))
    decoded = model.tokenizer.decode(list(ordered.token_ids), skip_special_tokens=True)
    assert decoded.find(stops[1]) < decoded.find(stops[0])  # the earlier position would pick the other one
    assert ordered.matched == stops[0] and ordered.text == decoded[: decoded.find(stops[0])]


@pytest.mark.slow
def test_a_prompt_too_long_for_the_context_is_aborted_alone(model: LocalModel, prompts: list[str]):
    long = "⊢ " + " + ".join(f"a{i}" for i in range(900))
    sampling = Sampling(n=2, temperature=0.0, max_new_tokens=20, stop=STOP)
    groups = model.generate_detailed([prompts[0], long, prompts[1]], sampling)
    alone = model.generate_detailed([prompts[0], prompts[1]], sampling)
    assert [groups[0], groups[2]] == alone  # the others are generated as if it were not there
    count = model.count_tokens([long])[0]
    shapes = [(g.finish_reason, g.text, g.token_ids, g.prompt_tokens) for g in groups[1]]
    assert shapes == [("abort", "", (), count)] * 2
    assert groups[1][0].error == f"The input ({count} tokens) is longer than the model's context length (2048 tokens)."
    completions = model.generate([long], sampling)[0]
    assert prompt_error(completions) == groups[1][0].error
    assert prompt_error(model.generate(prompts[:1], sampling)[0]) is None


@pytest.mark.slow
def test_samples_come_back_grouped_per_prompt(model: LocalModel, prompts: list[str]):
    singles = [model.generate_detailed([p], Sampling(n=1, temperature=0.0, max_new_tokens=30, stop=STOP))[0][0]
               for p in prompts]
    assert len({g.text for g in singles}) > 1 or len({g.prompt_tokens for g in singles}) == 3
    groups = model.generate_detailed(prompts, Sampling(n=4, temperature=0.0, max_new_tokens=30, stop=STOP))
    assert [len(group) for group in groups] == [4, 4, 4]
    for single, group in zip(singles, groups, strict=True):
        for gen in group:
            # Left padding in a batch computes what the prompt computes alone.
            assert (gen.text, gen.token_ids, gen.prompt_tokens) == (single.text, single.token_ids, single.prompt_tokens)
            assert gen.logprob == pytest.approx(single.logprob, abs=1e-4)
    assert len({group[0].prompt_tokens for group in groups}) == 3


@pytest.mark.slow
def test_sampling_is_seedable(tiny_model_dir: Path, prompts: list[str]):
    sampling = Sampling(n=6, temperature=1.5, top_p=1.0, max_new_tokens=12, stop=STOP)
    a = LocalModel.load(tiny_model_dir, device="cpu", seed=11)
    b = LocalModel.load(tiny_model_dir, device="cpu", seed=11)
    first = a.generate(prompts, sampling)
    assert first == b.generate(prompts, sampling)
    assert a.generate(prompts, sampling) != first  # the stream moves on
    a.reseed(11)
    assert a.generate(prompts, sampling) == first
    a.reseed(12)
    assert a.generate(prompts, sampling) != first
    a.close()
    b.close()


def test_encode_is_the_masked_mean_of_last_hidden_states(model: LocalModel, reference: LocalModel,
                                                         prompts: list[str]):
    import torch

    texts = [prompts[0], "⊢ x ≤ y", prompts[2]]
    vectors = model.encode(texts)
    assert [len(v) for v in vectors] == [64, 64, 64]
    decoder = reference.model.get_decoder()  # transformers' LlamaModel
    ids = [model.tokenizer(t)["input_ids"] for t in texts]
    width = max(len(i) for i in ids)
    with torch.no_grad():
        for text_ids, vector in zip(ids, vectors, strict=True):
            alone = decoder(input_ids=torch.tensor([text_ids])).last_hidden_state[0].mean(0)
            assert torch.tensor(vector) == pytest.approx(alone, abs=1e-5)
            # Left padding with explicit positions agrees with the right-padded batch.
            pad = width - len(text_ids)
            left = torch.tensor([[model.tokenizer.pad_token_id] * pad + text_ids])
            mask = torch.tensor([[0] * pad + [1] * len(text_ids)])
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            hidden = decoder(input_ids=left, attention_mask=mask, position_ids=positions).last_hidden_state[0]
            assert torch.tensor(vector) == pytest.approx(hidden[pad:].mean(0), abs=1e-5)
    assert model.encode([]) == []


def test_encode_pooling_normalisation_truncation_and_batches(model: LocalModel, reference: LocalModel,
                                                             prompts: list[str]):
    import torch

    texts = [prompts[0], "⊢ x ≤ y", prompts[2]]
    decoder = reference.model.get_decoder()  # transformers' LlamaModel
    ids = [model.tokenizer(t)["input_ids"] for t in texts]
    with torch.no_grad():
        alone = [decoder(input_ids=torch.tensor([i])).last_hidden_state[0] for i in ids]
    last = model.encode(texts, pooling="last")
    for hidden, vector in zip(alone, last, strict=True):  # the last real token's state, not the padding's
        assert torch.tensor(vector) == pytest.approx(hidden[-1], abs=1e-5)
    unit = model.encode(texts, normalize=True)
    for hidden, vector in zip(alone, unit, strict=True):
        mean = hidden.mean(0)
        assert torch.tensor(vector) == pytest.approx(mean / mean.norm(), abs=1e-5)
    assert [round(float(torch.tensor(v).norm()), 5) for v in unit] == [1.0, 1.0, 1.0]
    cut = model.encode(texts, max_tokens=5)  # the first 5 tokens (BOS included) of each text
    with torch.no_grad():
        for text_ids, vector in zip(ids, cut, strict=True):
            first = decoder(input_ids=torch.tensor([text_ids[:5]])).last_hidden_state[0].mean(0)
            assert torch.tensor(vector) == pytest.approx(first, abs=1e-5)
    one_by_one = model.encode(texts, batch_tokens=1)  # a batch per text: the same vectors
    assert [torch.tensor(v) for v in one_by_one] == [pytest.approx(torch.tensor(v), abs=1e-5)
                                                      for v in model.encode(texts)]
    assert token_batches([[1] * 3, [1] * 5, [1] * 2, [1] * 9], budget=10) == [[[1] * 3, [1] * 5], [[1] * 2],
                                                                              [[1] * 9]]
    probe = tuple(model.tokenizer(PROBE_TEXT)["input_ids"])
    assert probe[0] == model.tokenizer.bos_token_id  # the tiny model's rule: BOS first
    assert model.encoder_spec() == EncoderSpec(pooling="mean", normalize=False, layer=-1, max_tokens=2048,
                                               dtype="float32", probe=probe)
    assert model.encoder_spec("last", True, 100).max_tokens == 100 and model.encode_limit(10**6) == 2048
    with pytest.raises(ValueError, match="pooling must be one of mean, last"):
        model.encode(["x"], pooling="max")  # type: ignore[arg-type]
    before = model.encode(texts)
    model.reserve_encode_workspace(batch_tokens=64, max_tokens=16)  # the sidecar's warm-up batch: 4 × 16 tokens
    assert model.encode(texts) == before  # and changes nothing


def test_policy_and_encoder_protocols(tiny_model_dir: Path, prompts: list[str], store: Store):
    async def run() -> None:
        policy: Policy = LocalPolicy.from_config(PolicyConfig(model=str(tiny_model_dir), device="cpu", seed=3),
                                                 store=store)
        assert policy.name == str(tiny_model_dir)
        assert isinstance(policy, LocalPolicy)
        encoder: Encoder = LocalEncoder(policy.model)
        sampling = Sampling(n=2, temperature=0.0, max_new_tokens=20, stop=STOP)
        results, vectors = await asyncio.gather(policy.generate(prompts, sampling), encoder.encode(["a", "b"]))
        assert [len(group) for group in results] == [2, 2, 2]
        assert results[0][0] == results[0][1] and results[0][0].finish_reason == "stop"
        assert len(vectors) == 2
        await encoder.close()  # does not unload the shared model
        assert len(await policy.generate(prompts[:1], sampling)) == 1
        await policy.close()
        with pytest.raises(PolicyError, match="is closed"):
            await policy.generate(prompts, sampling)
        with pytest.raises(PolicyError, match="is closed"):
            await encoder.encode(["a"])
        owned = LocalEncoder.from_config(PolicyConfig(model=str(tiny_model_dir), device="cpu"), store=store)
        assert len((await owned.encode(["x"]))[0]) == 64
        await owned.close()
        assert owned.model.model is None

    asyncio.run(run())


def test_bad_sampling_is_a_policy_error(model: LocalModel):
    async def run() -> None:
        policy = LocalPolicy(model)
        with pytest.raises(PolicyError, match="invalid sampling parameters"):
            await policy.generate(["x"], Sampling(n=0))

    asyncio.run(run())
    assert model.generate([], Sampling()) == []


def test_load_errors_say_what_is_wrong(tmp_path: Path, tiny_model_dir: Path, store: Store):
    with pytest.raises(ModelInputError, match=f"^model folder {tmp_path / 'nowhere'}: no such folder$"):
        LocalModel.load(tmp_path / "nowhere")
    with pytest.raises(ModelInputError, match=r"is missing config\.json, .*; it is not a model folder"):
        LocalPolicy.from_config(PolicyConfig(model=str(tmp_path)), store=store)
    broken = tmp_path / "broken"
    shutil.copytree(tiny_model_dir, broken)
    (broken / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(ModelError, match="cannot load the model in"):
        LocalModel.load(broken, device="cpu")


def test_generation_record_sums_its_tokens():
    gen = Generation("  simp\n", (5, 6, 7), (-0.5, -0.25, -0.125), "stop", "```", 9)
    assert gen.logprob == -0.875
    assert gen.completion().n_tokens == 3


def test_an_encoder_only_model_has_no_lm_head_and_the_same_vectors(tiny_model_dir: Path) -> None:
    full = LocalModel.load(tiny_model_dir, device="cpu")
    encoder = LocalModel.load(tiny_model_dir, device="cpu", encoder_only=True)
    hf_encoder = LocalModel.load(tiny_model_dir, device="cpu", encoder_only=True, avoid_transformers=False)  # AutoModel
    try:
        assert full.can_generate and not encoder.can_generate and not hf_encoder.can_generate
        assert isinstance(encoder.model, TorchLlama) and encoder.model.decoder.lm_head is None
        assert not any("lm_head" in name for name, _ in hf_encoder.model.named_parameters())
        texts = ["⊢ True", "x : ℕ\n⊢ x + 0 = x"]
        assert encoder.encode(texts) == full.encode(texts)
        assert encoder.encoder_spec() == full.encoder_spec() == hf_encoder.encoder_spec()
        assert [pytest.approx(v, abs=1e-5) for v in hf_encoder.encode(texts)] == encoder.encode(texts)
        for model in (encoder, hf_encoder):
            with pytest.raises(RuntimeError, match="without its LM head"):
                model.generate(["⊢ True"], Sampling(max_new_tokens=2))
    finally:
        full.close()
        encoder.close()
        hf_encoder.close()


def _nucleus_by_sort(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """The nucleus as the whole vocabulary sorted gives it (the reference `nucleus` must equal)."""
    import torch

    ranked, order = probs.sort(dim=-1, descending=True)
    outside = ranked.cumsum(dim=-1) - ranked > top_p
    return torch.zeros_like(probs).scatter(-1, order, ranked.masked_fill(outside, 0.0))


def test_the_nucleus_from_the_top_k_is_the_nucleus_from_a_full_sort() -> None:
    import torch

    from burnqed.policy.sampler import NUCLEUS_CANDIDATES, nucleus

    generator = torch.Generator().manual_seed(7)
    paths = set()
    for spread in (0.2, 1.0, 3.0, 6.0):
        for top_p in (0.5, 0.9, 0.95, 0.999):
            probs = torch.softmax(torch.randn(8, 859, generator=generator) * spread, dim=-1)
            # how many of the most likely tokens the widest row's nucleus holds: within the top k or not
            widest = int(((probs.sort(dim=-1, descending=True)[0].cumsum(-1) <= top_p).sum(-1) + 1).max())
            paths.add(widest <= NUCLEUS_CANDIDATES)
            kept = nucleus(probs, top_p)
            assert torch.equal(kept, _nucleus_by_sort(probs, top_p)), (spread, top_p)
            assert bool((kept > 0).any(dim=-1).all())
    assert paths == {True, False}  # both the top-k and the full sort decided some of them

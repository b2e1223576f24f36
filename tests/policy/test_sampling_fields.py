"""Every sampling field is explicit: the SGLang request bodies carry each one, `burnqed serve` and the in-process
backend apply them as SGLang's sampler does (penalties, then top-k / top-p / min-p), and a value SGLang cannot
honour is refused (docs/search.md, "Every sampling field sent")."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from burnqed.config import Config, PolicyConfig
from burnqed.policy.base import Sampling, Seeds, sampling_problem
from burnqed.policy.localmodel import LocalModel
from burnqed.policy.sampler import apply_penalties, sampling_filter
from burnqed.policy.sglang import SGLangClient
from burnqed.policy.wire import RequestError, parse_generate
from burnqed.records.enums import SearchMode
from burnqed.search.mode import sampling_from_config
from burnqed.stages.search import settings_from_config
from burnqed.text.prompt import PromptFormat
from tests.doubles.fault_server import FaultServer

STOP = ["```"]  # plain-tactic's stop strings (burnqed.text.prompt.stop_strings)
EVERY_FIELD = {"top_k": 40, "min_p": 0.0, "repetition_penalty": 1.1, "frequency_penalty": 0.2,
               "presence_penalty": -0.1, "temperature": 0.7, "top_p": 0.9, "num_candidates": 3, "max_new_tokens": 64}


def sent_bodies(sampling: Sampling, samples_as: str = "n", seeds: Seeds | None = None) -> list[Any]:
    """The /generate bodies the SGLang client sends for prompts "a" and "b" (checked by the strict double)."""
    async def ask(url: str) -> None:
        async with SGLangClient(url, retries=0, samples_as=samples_as) as client:
            await client.generate(["a", "b"], sampling, seeds)

    with FaultServer() as server:
        asyncio.run(ask(server.url))
        return [request.body for request in server.received("/generate")]


# ------------------------------------------------------------------------------- the request bodies


def test_every_sampling_field_is_in_every_sglang_request_body() -> None:
    """The three shapes of a /generate body (n samples, n copies, one seeded copy per sample) each carry every
    sampling field, at policy.*'s values: none is left to the server (which SGLang may fill from its
    --preferred-sampling-params or, on its OpenAI routes, from the model's generation_config.json)."""
    sampling = sampling_from_config(PolicyConfig(**EVERY_FIELD), PromptFormat.PLAIN_TACTIC)
    fields = {"temperature": 0.7, "top_p": 0.9, "max_new_tokens": 64, "stop": STOP, "top_k": 40, "min_p": 0.0,
              "repetition_penalty": 1.1, "frequency_penalty": 0.2, "presence_penalty": -0.1}
    assert sent_bodies(sampling) == [
        {"text": ["a", "b"], "sampling_params": {"n": 3, **fields}, "return_logprob": True}]
    assert sent_bodies(sampling, samples_as="copies") == [
        {"text": ["a", "a", "a", "b", "b", "b"], "sampling_params": {"n": 1, **fields}, "return_logprob": True}]
    assert sent_bodies(sampling, seeds=[[11, 12, 13], [21, 22, 23]]) == [
        {"text": ["a", "a", "a", "b", "b", "b"],
         "sampling_params": [{"n": 1, **fields, "sampling_seed": seed} for seed in (11, 12, 13, 21, 22, 23)],
         "return_logprob": True}]


def test_the_defaults_are_plain_sampling_and_reach_every_search_mode() -> None:
    plain = {"top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}
    (body,) = sent_bodies(sampling_from_config(PolicyConfig(), PromptFormat.PLAIN_TACTIC))
    assert body["sampling_params"] == {"n": 8, "temperature": 0.8, "top_p": 0.95, "max_new_tokens": 128,
                                       "stop": STOP, **plain}
    for mode in SearchMode:  # whole and hybrid build their sampling from policy.* too
        cfg = Config.model_validate({"policy": {**EVERY_FIELD, "min_p": 0.05, "seed": None},
                                     "search": {"mode": str(mode)}})
        sampling = settings_from_config(cfg.search, cfg.policy).sampling
        assert (sampling.top_k, sampling.min_p, sampling.repetition_penalty, sampling.frequency_penalty,
                sampling.presence_penalty, sampling.temperature, sampling.top_p) == (
                    40, 0.05, 1.1, 0.2, -0.1, 0.7, 0.9), mode


@pytest.mark.parametrize(("fields", "message"), [
    ({"top_k": 0}, "top_k must be -1 (the whole vocabulary) or at least 1, got 0"),
    ({"top_k": -2}, "greater than or equal to -1"),
    ({"min_p": 0.1}, "min_p=0.1 cannot be combined with seed=0: SGLang samples seeded requests only under "
                     "--enable-deterministic-inference"),
    ({"repetition_penalty": 0.0}, "greater than 0"),
    ({"frequency_penalty": 2.5}, "less than or equal to 2"),
    ({"presence_penalty": -2.5}, "greater than or equal to -2"),
])
def test_values_sglang_cannot_honour_are_refused_in_the_config(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match="policy") as raised:
        Config.model_validate({"policy": fields})
    assert message in str(raised.value)
    assert PolicyConfig(min_p=0.1, seed=None).min_p == 0.1  # unseeded, SGLang samples min_p


def test_sampling_problem_is_sglangs_verify_and_the_seeded_min_p_refusal() -> None:
    assert sampling_problem(Sampling()) is None
    assert sampling_problem(Sampling(top_k=0)) == "top_k must be -1 (disable) or at least 1, got 0"
    assert sampling_problem(Sampling(repetition_penalty=0.0)) == (
        "repetition_penalty must be in (0, 2] (1.0 = no penalty), got 0.0")
    assert sampling_problem(Sampling(temperature=float("inf"))) == (
        "temperature must be a non-negative finite number, got inf")
    assert sampling_problem(Sampling(min_p=0.2)) is None
    assert (sampling_problem(Sampling(min_p=0.2), seeded=True) or "").startswith(
        "min_p=0.2 cannot be combined with a sampling seed")


# ------------------------------------------------------------------------------- burnqed serve's parsing


def test_serve_reads_every_field_and_sglangs_defaults_for_the_rest() -> None:
    """What the client sends is what `burnqed serve` samples with; a field left out is SGLang's SamplingParams
    default (never a value from the model folder)."""
    sampling = Sampling(n=2, temperature=0.7, top_p=0.9, max_new_tokens=64, stop=("```",), top_k=40, min_p=0.05,
                        repetition_penalty=1.1, frequency_penalty=0.2, presence_penalty=-0.1)
    (body,) = sent_bodies(sampling)
    assert parse_generate(body).sampling == sampling
    assert parse_generate({"text": "a"}).sampling == Sampling(
        n=1, temperature=1.0, top_p=1.0, max_new_tokens=128, stop=(), top_k=-1, min_p=0.0, repetition_penalty=1.0,
        frequency_penalty=0.0, presence_penalty=0.0)
    nulls = {"top_k": None, "min_p": None, "repetition_penalty": None, "frequency_penalty": None,
             "presence_penalty": None}
    assert parse_generate({"text": "a", "sampling_params": nulls}).sampling == parse_generate({"text": "a"}).sampling
    with pytest.raises(RequestError, match=r"sampling_params\.min_p=0\.05 cannot be combined with a sampling seed"):
        parse_generate({"text": "a", "sampling_params": {"min_p": 0.05, "sampling_seed": 7}})


# ------------------------------------------------------------------------------- SGLang's sampler semantics


def test_penalties_are_sglangs_additive_then_scaling() -> None:
    """Frequency (per count) and presence (once) subtracted, then the repetition penalty divides a positive logit
    and multiplies a negative one, of generated tokens only."""
    import torch

    logits = torch.tensor([[2.0, -1.0, 0.5, 3.0]])
    counts = torch.tensor([[2.0, 1.0, 0.0, 0.0]])
    sampling = Sampling(repetition_penalty=2.0, frequency_penalty=0.5, presence_penalty=0.25)
    assert apply_penalties(logits, counts, sampling).tolist() == [[0.375, -3.5, 0.5, 3.0]]
    assert apply_penalties(logits, counts, Sampling(repetition_penalty=2.0)).tolist() == [[1.0, -2.0, 0.5, 3.0]]


@pytest.mark.parametrize(("fields", "kept"), [
    ({"top_k": 2, "top_p": 1.0}, [0.0, 0.4, 0.0, 0.3]),
    ({"top_k": -1, "top_p": 0.6}, [0.0, 0.4, 0.0, 0.3]),
    ({"top_k": 3, "top_p": 0.75}, [0.0, 0.4, 0.2, 0.3]),  # joint: top-p on the full distribution's mass
    ({"top_k": 3, "top_p": 0.75, "min_p": 0.01}, [0.0, 0.4, 0.0, 0.3]),  # min_p: top-p after top-k's renormalising
    ({"top_k": -1, "top_p": 1.0, "min_p": 0.6}, [0.0, 0.4, 0.0, 0.3]),  # below 0.6 × 0.4 = 0.24 dropped
    ({"top_k": 5, "top_p": 1.0}, [0.1, 0.4, 0.2, 0.3]),  # k beyond the vocabulary: everything
])
def test_top_k_top_p_and_min_p_keep_what_sglangs_sampler_keeps(fields: dict[str, Any], kept: list[float]) -> None:
    import torch

    probs = torch.tensor([[0.1, 0.4, 0.2, 0.3]], dtype=torch.float64)
    filtered = sampling_filter(probs, Sampling(**fields))[0]
    expected = torch.tensor(kept, dtype=torch.float64)
    assert torch.equal(filtered > 0, expected > 0)
    assert torch.allclose(filtered / filtered.sum(), expected / expected.sum())


# ------------------------------------------------------------------------------- the model applies them


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path) -> Iterator[LocalModel]:
    loaded = LocalModel.load(tiny_model_dir, device="cpu", seed=0)
    yield loaded
    loaded.close()


PROMPT = ("Complete the following Lean 4 code with the next tactic:\n```lean4\ntheorem t (x : ℝ) : 2 * x + 3 = 11 → "
          "x = 4 := by\n  /- tactic state:\n    x : ℝ\n    ⊢ 2 * x + 3 = 11 → x = 4\n  -/\n")


def teacher_forced(model: LocalModel, tokens: tuple[int, ...], sampling: Sampling) -> tuple[list[int], list[float]]:
    """Per generated position: the penalized logits' argmax and the chosen token's log-prob (penalized, before
    temperature), from one plain forward pass over prompt + tokens (`model`: transformers')."""
    import torch

    prompt_ids = model.tokenizer(PROMPT)["input_ids"]
    with torch.no_grad():
        logits = model.model(input_ids=torch.tensor([prompt_ids + list(tokens)])).logits[0].float()
    counts = torch.zeros(1, logits.shape[-1])
    best, logps = [], []
    for i, token in enumerate(tokens):
        step = apply_penalties(logits[len(prompt_ids) - 1 + i][None], counts, sampling)
        best.append(int(step.argmax()))
        logps.append(float(step.log_softmax(-1)[0, token]))
        counts[0, token] += 1
    return best, logps


@pytest.mark.slow
def test_greedy_decoding_follows_the_penalized_logits(model: LocalModel, reference: LocalModel) -> None:
    plain = Sampling(n=1, temperature=0.0, max_new_tokens=24)
    # Penalties below 1 and 0 reward repeating: the tiny model's confident greedy path then changes
    penalized = Sampling(n=1, temperature=0.0, max_new_tokens=24, repetition_penalty=0.5, frequency_penalty=-1.5,
                         presence_penalty=-0.5)
    [[free]] = model.generate_detailed([PROMPT], plain)
    [[gen]] = model.generate_detailed([PROMPT], penalized)
    assert gen.token_ids != free.token_ids  # the penalties changed the greedy path (a test that can fail)
    assert len(set(gen.token_ids)) < len(gen.token_ids)  # generated tokens came again: the penalties applied
    best, logps = teacher_forced(reference, gen.token_ids, penalized)
    assert list(gen.token_ids) == best
    assert list(gen.token_logprobs) == pytest.approx(logps, abs=1e-4)
    # top_k 1 is greedy at any temperature, as in SGLang
    [[top1]] = model.generate_detailed([PROMPT], Sampling(n=1, temperature=1.7, max_new_tokens=24, top_k=1))
    assert top1.token_ids == free.token_ids


@pytest.mark.slow
def test_sampled_tokens_stay_within_top_k_and_min_p(model: LocalModel, reference: LocalModel) -> None:
    import torch

    prompt_ids = model.tokenizer(PROMPT)["input_ids"]
    for fields, seeds in (({"top_k": 3}, [[5, 6, 7, 8]]), ({"min_p": 0.3}, None)):
        sampling = Sampling(n=4, temperature=2.5, top_p=1.0, max_new_tokens=12, **fields)
        [group] = model.generate_detailed([PROMPT], sampling, seeds)
        for gen in group:
            with torch.no_grad():
                logits = reference.model(input_ids=torch.tensor([prompt_ids + list(gen.token_ids)])).logits[0].float()
            for i, token in enumerate(gen.token_ids):
                probs = torch.softmax(logits[len(prompt_ids) - 1 + i] / 2.5, dim=-1)
                if "top_k" in fields:
                    assert int((probs > probs[token]).sum()) < 3
                else:
                    assert float(probs[token]) >= 0.3 * float(probs.max()) - 1e-6
    with pytest.raises(ValueError, match=r"min_p=0\.3 cannot be combined with a sampling seed"):
        model.generate_detailed([PROMPT], Sampling(min_p=0.3), [[1]])


@pytest.mark.slow
def test_serve_samples_every_field_as_the_model_does(model: LocalModel) -> None:
    """A seeded request with every field, through `burnqed serve`, gives the in-process model's sample."""
    from tests.policy.test_server import running

    sampling = Sampling(n=1, temperature=1.3, top_p=0.9, max_new_tokens=16, top_k=8, repetition_penalty=1.4,
                        frequency_penalty=0.3, presence_penalty=0.2)
    [[expected]] = model.generate_detailed([PROMPT], sampling, [[99]])
    params = {"n": 1, "temperature": 1.3, "top_p": 0.9, "max_new_tokens": 16, "top_k": 8, "min_p": 0.0,
              "repetition_penalty": 1.4, "frequency_penalty": 0.3, "presence_penalty": 0.2, "sampling_seed": 99}
    with running(lambda: model) as (_, client):
        reply = client.post("/generate", json={"text": PROMPT, "sampling_params": params, "return_logprob": True})
        refused = client.post("/generate", json={"text": PROMPT, "sampling_params": {**params, "top_k": 0}})
    assert reply.status_code == 200, reply.text
    assert reply.json()["output_ids"] == list(expected.token_ids)
    assert (refused.status_code, refused.json()) == (
        400, {"error": {"message": "sampling_params.top_k must be -1 (disable) or at least 1, got 0"}})

"""Per-request sampling seeds (`policy.base.sample_seed`): the local model, `burnqed serve`'s
`sampling_params.sampling_seed`, the SGLang client's copies, and the batcher."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from burnqed.policy.base import (
    AsyncClosing,
    Completion,
    Sampling,
    Seeds,
    check_seeds,
    expansion_seeds,
    sample_seed,
)
from burnqed.policy.batching import BatchingPolicy
from burnqed.policy.localmodel import LocalModel
from burnqed.policy.server import ModelServer
from burnqed.policy.sglang import SGLangClient
from burnqed.policy.tiny import training_pairs
from burnqed.policy.wire import RequestError, parse_generate
from leankit.corpus import load_corpus
from tests.doubles.fault_server import FaultServer

HOT = Sampling(n=4, temperature=1.5, top_p=1.0, max_new_tokens=12, stop=("```",))


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path) -> LocalModel:
    return LocalModel.load(tiny_model_dir, device="cpu", seed=0)


@pytest.fixture(scope="module")
def prompts() -> list[str]:
    pairs = training_pairs(load_corpus())
    return [pairs[0][0], pairs[60][0], pairs[120][0]]


def texts(groups: list[list[Completion]]) -> list[list[str]]:
    return [[c.text for c in group] for group in groups]


# ------------------------------------------------------------------------------------------ the seed


def test_sample_seed_is_a_pure_function_of_its_four_keys() -> None:
    seed = sample_seed(0, "thm", 3, 1)
    assert seed == sample_seed(0, "thm", 3, 1)
    assert 0 <= seed < 2**63
    others = {sample_seed(1, "thm", 3, 1), sample_seed(0, "thm2", 3, 1), sample_seed(0, "thm", 4, 1),
              sample_seed(0, "thm", 3, 2), sample_seed(0, "th", 3, 1), sample_seed(0, "thm", 3, 1, attempt=1)}
    assert seed not in others and len(others) == 6
    assert sample_seed(0, "thm", 3, 1, attempt=0) == seed
    # A fixed value: the same in every process and Python version (a hash, not Python's salted hash()).
    assert sample_seed(0, "thm", 0, 0) == int.from_bytes(
        hashlib.blake2b(b"0\x1fthm\x1f0\x1f0\x1f0", digest_size=8).digest(), "big") >> 1
    assert expansion_seeds(None, "thm", [0, 1], 2) is None
    assert expansion_seeds(7, "thm", [5], 1, attempt=2) == [[sample_seed(7, "thm", 5, 0, 2)]]
    assert expansion_seeds(7, "thm", [5, 9], 2, first_sample=3) == [
        [sample_seed(7, "thm", 5, 3), sample_seed(7, "thm", 5, 4)],
        [sample_seed(7, "thm", 9, 3), sample_seed(7, "thm", 9, 4)]]


@pytest.mark.parametrize(("seeds", "message"), [
    ([[1, 2]], "seeds for 1 prompts, expected 2"),
    ([[1], [2, 3]], "1 seeds for a prompt sampled 2 times"),
    ([[1, True], [2, 3]], "must be an integer"),
    ([[1, 2**63], [2, 3]], "must be an integer in"),
])
def test_seeds_must_match_the_prompts_and_samples(seeds: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        check_seeds(["a", "b"], 2, seeds)


# ---------------------------------------------------------------------------------------- local model


@pytest.mark.slow
def test_a_seeded_prompt_samples_the_same_alone_or_in_any_batch(model: LocalModel, prompts: list[str]) -> None:
    seeds = [[sample_seed(0, f"t{i}", 0, j) for j in range(HOT.n)] for i in range(len(prompts))]
    alone = [model.generate([p], HOT, [s])[0] for p, s in zip(prompts, seeds, strict=True)]
    model.reseed(99)  # the model's own stream does not matter to seeded prompts
    batched = model.generate(prompts, HOT, seeds)
    reversed_batch = model.generate(prompts[::-1], HOT, seeds[::-1])[::-1]
    assert batched == alone and reversed_batch == alone
    assert texts(model.generate(prompts, HOT, [[s + 1 for s in row] for row in seeds])) != texts(alone)
    # n different seeds give different samples (at a high temperature, four identical ones would be a bug).
    assert any(len(set(row)) > 1 for row in texts(alone))


@pytest.mark.slow
def test_unseeded_samples_follow_the_models_stream(model: LocalModel, prompts: list[str]) -> None:
    model.reseed(5)
    first = texts(model.generate(prompts, HOT))
    model.reseed(5)
    assert texts(model.generate(prompts, HOT)) == first


# ------------------------------------------------------------------------------------------- the server


def test_parse_generate_reads_sampling_seed_as_sglang_does() -> None:
    one = parse_generate({"text": ["a", "b"], "sampling_params": {"n": 2, "sampling_seed": -5}})
    assert one.seeds == [[-5, -5], [-5, -5]]  # one seed for all n samples, as SGLang's parallel sampling copies it
    listed = parse_generate({"text": ["a", "b"], "sampling_params": [{"sampling_seed": 1}, {"sampling_seed": 2}]})
    assert listed.seeds == [[1], [2]] and listed.sampling.n == 1
    assert parse_generate({"text": ["a"], "sampling_params": [{"n": 1}]}).seeds is None


@pytest.mark.parametrize(("body", "message"), [
    ({"text": "a", "sampling_params": {"sampling_seed": 1.5}}, "sampling_seed must be an integer"),
    ({"text": "a", "sampling_params": {"sampling_seed": True}}, "sampling_seed must be an integer"),
    ({"text": "a", "sampling_params": {"sampling_seed": 2**63}}, "must be in [-2**63, 2**63 - 1]"),
    ({"text": ["a", "b"], "sampling_params": [{"sampling_seed": 1}]}, "list of 1 objects for 2 texts"),
    ({"text": ["a", "b"], "sampling_params": [{"sampling_seed": 1}, {}]}, "in every sampling_params"),
    ({"text": ["a", "b"], "sampling_params": [{"top_p": 0.5}, {}]}, "may differ only in sampling_seed"),
    ({"text": ["a"], "sampling_params": []}, "non-empty list"),
])
def test_bad_seeds_are_refused(body: dict[str, Any], message: str) -> None:
    with pytest.raises(RequestError) as caught:
        parse_generate(body)
    assert message in str(caught.value)


@contextmanager
def serving(model: LocalModel) -> Iterator[str]:
    server = ModelServer(lambda: model, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    server.start_loading(stop_on_failure=False)
    try:
        assert server.ready.wait(30)
        yield server.url
    finally:
        server.shutdown()
        thread.join(5)
        server.model = None  # the module's model is shared
        server.server_close()


@pytest.mark.slow
def test_serve_honours_sampling_seed_whatever_else_the_request_holds(model: LocalModel, prompts: list[str]) -> None:
    seeds = [[sample_seed(3, f"t{i}", 1, j) for j in range(HOT.n)] for i in range(len(prompts))]
    one = dataclasses.replace(HOT, n=1)
    # The client sends each seeded sample as its own text with n = 1: the server decodes each alone.
    expected = [[model.generate([p], one, [[seed]])[0][0] for seed in row] for p, row in zip(prompts, seeds,
                                                                                               strict=True)]

    async def through_client(url: str) -> list[list[Completion]]:
        async with SGLangClient(url, retries=0) as client:
            return await client.generate(prompts, HOT, seeds)

    def post(url: str, body: dict[str, Any]) -> Any:
        reply = httpx.post(url + "/generate", json=body, timeout=60)
        assert reply.status_code == 200, reply.text
        return reply.json()

    params = {"temperature": 1.5, "top_p": 1.0, "max_new_tokens": 12, "stop": ["```"]}
    with serving(model) as url:
        assert asyncio.run(through_client(url)) == expected
        # The same text and seed in another company: the same sample.
        listed = [{**params, "sampling_seed": 77}, {**params, "sampling_seed": seeds[0][1]}]
        other = post(url, {"text": [prompts[2], prompts[0]], "return_logprob": True, "sampling_params": listed})
        assert other[1]["text"] == expected[0][1].text
        assert sum(lp for lp, _, _ in other[1]["meta_info"]["output_token_logprobs"]) == expected[0][1].logprob
        # One seed with n > 1 seeds every sample alike: SGLang's deterministic sampler gives identical samples.
        alike = post(url, {"text": prompts[0], "sampling_params": {**params, "n": 3, "sampling_seed": seeds[0][2]}})
        assert [item["text"] for item in alike] == [expected[0][2].text] * 3


def test_the_client_sends_seeded_samples_as_copies_with_their_own_sampling_seed() -> None:
    async def ask(url: str) -> list[list[Completion]]:
        async with SGLangClient(url, retries=0) as client:
            return await client.generate(["a", "b"], Sampling(n=2), [[1, 2], [3, 4]])

    with FaultServer() as server:
        grouped = asyncio.run(ask(server.url))
        (request,) = server.received("/generate")
    assert request.body["text"] == ["a", "a", "b", "b"]
    assert [p["sampling_seed"] for p in request.body["sampling_params"]] == [1, 2, 3, 4]
    assert {p["n"] for p in request.body["sampling_params"]} == {1}
    assert [len(group) for group in grouped] == [2, 2]


# ------------------------------------------------------------------------------------------- the batcher


class Recording(AsyncClosing):
    name = "recording"

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], Seeds | None]] = []

    async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
        check_seeds(prompts, sampling.n, seeds)
        await asyncio.sleep(0.01)
        self.calls.append((list(prompts), seeds))
        return [[Completion(f"{p}:{s}", 0.0, 1) for s in (row if seeds else [None] * sampling.n)]
                for p, row in zip(prompts, seeds or [[]] * len(prompts), strict=True)]

    async def close(self) -> None:
        return None


def test_the_batcher_keeps_seeds_with_their_prompts_and_apart_from_unseeded_asks() -> None:
    inner = Recording()
    one = Sampling(n=1)

    async def main() -> list[list[list[Completion]]]:
        policy = BatchingPolicy(inner, max_batch_prompts=8)
        return list(await asyncio.gather(policy.generate(["x"], one), policy.generate(["a"], one, [[1]]),
                                    policy.generate(["b", "c"], one, [[2], [3]]), policy.generate(["y"], one)))

    x, a, bc, y = asyncio.run(main())
    assert [c.text for c in a[0]] == ["a:1"] and [[c.text for c in g] for g in bc] == [["b:2"], ["c:3"]]
    assert [c.text for c in x[0]] == ["x:None"] and [c.text for c in y[0]] == ["y:None"]
    # The first ask goes alone; then the seeded asks share a request, and the unseeded ones another.
    assert inner.calls[1:] == [(["a", "b", "c"], [[1], [2], [3]]), (["y"], None)] or inner.calls[1:] == [
        (["y"], None), (["a", "b", "c"], [[1], [2], [3]])]

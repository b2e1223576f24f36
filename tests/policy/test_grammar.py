"""Grammar-constrained sampling (burnqed/policy/grammar.py): the local decoder, `burnqed serve` and the SGLang client
honour `Sampling.ebnf` (SGLang's `ebnf` sampling parameter) as SGLang does: every completion follows the grammar, a
grammar that does not compile fails the request with SGLang's words, and only a request with a grammar carries one."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from burnqed.policy.base import Sampling
from burnqed.policy.grammar import GrammarError
from burnqed.policy.localmodel import LocalModel
from burnqed.policy.sglang import SGLangClient
from burnqed.policy.wire import RequestError, parse_generate
from burnqed.text.prompt import PromptFormat, build_sketch_prompt
from burnqed.text.sketch import Sketch, read_sketch
from burnqed.text.sketch_grammar import sketch_grammar
from tests.doubles.fault_server import FaultServer
from tests.policy.test_server import running

pytest.importorskip("xgrammar")

# A small grammar: one hole, a skeleton line before and after it, eight atoms a line (a completion fits 200 tokens).
SMALL = sketch_grammar(max_holes=1, max_lines=1, max_atoms=8)
PROMPTS = [build_sketch_prompt(PromptFormat.PLAIN_SKETCH, "theorem t (x : ℝ) (h₀ : 4 + 4 * x = 16) : x = 3"),
           build_sketch_prompt(PromptFormat.PLAIN_SKETCH, "theorem u (a b : ℕ) (h : a = b) : b = a")]


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path) -> Iterator[LocalModel]:
    loaded = LocalModel.load(tiny_model_dir, device="cpu", seed=0)
    yield loaded
    loaded.close()


def sketches(texts: list[str]) -> list[Sketch | str]:
    return [read_sketch(text) for text in texts]


def test_the_local_decoder_samples_only_what_the_grammar_derives(model: LocalModel) -> None:
    sampling = Sampling(n=4, temperature=1.0, top_p=1.0, max_new_tokens=200, stop=("```",), ebnf=SMALL.ebnf)
    groups = model.generate_detailed(PROMPTS, sampling)
    generations = [g for group in groups for g in group]
    assert [g.finish_reason for g in generations] == ["stop"] * 8 and {g.matched for g in generations} == {"```"}
    read = sketches([g.text for g in generations])
    assert all(isinstance(r, Sketch) and len(r.holes) == 1 for r in read), read
    # the same prompts unconstrained: the tiny model, never trained on sketches, writes none
    free = model.generate(PROMPTS, Sampling(n=4, temperature=1.0, top_p=1.0, max_new_tokens=200, stop=("```",)))
    assert not any(isinstance(r, Sketch) for r in sketches([c.text for group in free for c in group]))


def test_seeded_rows_follow_the_grammar_and_repeat(model: LocalModel) -> None:
    sampling = Sampling(n=2, temperature=1.0, top_p=1.0, max_new_tokens=200, stop=("```",), ebnf=SMALL.ebnf)
    first = model.generate_detailed(PROMPTS[:1], sampling, seeds=[[11, 12]])
    again = model.generate_detailed(PROMPTS[:1], sampling, seeds=[[11, 12]])
    assert [g.token_ids for g in first[0]] == [g.token_ids for g in again[0]]
    assert all(isinstance(r, Sketch) for r in sketches([g.text for g in first[0]]))


def test_a_grammar_that_does_not_compile_fails_the_request_in_sglangs_words(model: LocalModel) -> None:
    with pytest.raises(GrammarError, match=r'^Failed to compile ebnf grammar: .*Rule "foo" is not defined'):
        model.generate(PROMPTS, Sampling(ebnf="root ::= foo"))
    with pytest.raises(GrammarError, match=r"^Failed to compile ebnf grammar: the grammar contains a NUL byte"):
        model.generate(PROMPTS, Sampling(ebnf='root ::= "a\0"'))


def test_the_wire_reads_ebnf_as_sglang() -> None:
    assert parse_generate({"text": "a", "sampling_params": {"ebnf": 'root ::= "x"'}}).sampling.ebnf == 'root ::= "x"'
    assert parse_generate({"text": "a", "sampling_params": {"ebnf": ""}}).sampling.ebnf is None  # "" is no grammar
    assert parse_generate({"text": "a", "sampling_params": {"ebnf": None}}).sampling.ebnf is None
    with pytest.raises(RequestError, match=r"sampling_params\.ebnf must be a string"):
        parse_generate({"text": "a", "sampling_params": {"ebnf": 5}})
    with pytest.raises(RequestError, match=r"sampling_params\.regex=.* is not supported"):
        parse_generate({"text": "a", "sampling_params": {"regex": "a+"}})


def test_burnqed_serve_honours_ebnf_and_answers_a_bad_grammar_400(model: LocalModel) -> None:
    with running(lambda: model) as (_, client):
        body = {"text": PROMPTS, "sampling_params": {"n": 3, "max_new_tokens": 200, "stop": ["```"],
                                                     "ebnf": SMALL.ebnf}}
        reply = client.post("/generate", json=body)
        assert reply.status_code == 200, reply.text
        assert all(isinstance(r, Sketch) for r in sketches([item["text"] for item in reply.json()]))
        refused = client.post("/generate", json={"text": "a", "sampling_params": {"ebnf": "root ::= ("}})
        assert refused.status_code == 400
        assert refused.json()["error"]["message"].startswith("Failed to compile ebnf grammar: ")


def test_the_client_sends_ebnf_only_with_a_grammar() -> None:
    async def ask(client: SGLangClient) -> None:
        await client.generate(["a"], Sampling(n=1, ebnf=SMALL.ebnf))
        await client.generate(["b"], Sampling(n=1))

    with FaultServer() as server:
        async def main() -> None:
            async with SGLangClient(server.url, request_timeout_s=2.0, retries=0) as client:
                await ask(client)

        asyncio.run(main())
        constrained, plain = server.received("/generate")
    assert constrained.body["sampling_params"]["ebnf"] == SMALL.ebnf
    assert "ebnf" not in plain.body["sampling_params"]

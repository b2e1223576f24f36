"""The SGLang double honours the sampling parameters its docstring says it does (tests/doubles/fault_server.py)."""

from __future__ import annotations

from typing import Any

import httpx

from tests.doubles.fault_server import FaultServer


def generate(server: FaultServer, **params: Any) -> tuple[int, Any]:
    reply = httpx.post(f"{server.url}/generate", json={"text": ["p0", "p1"], "sampling_params": params}, timeout=5)
    return reply.status_code, reply.json()


def summary(results: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], int]]:
    return [(r["text"], r["meta_info"]["finish_reason"], r["meta_info"]["completion_tokens"]) for r in results]


def test_max_new_tokens_stop_strings_and_greedy_sampling() -> None:
    with FaultServer() as server:
        code, plain = generate(server, n=2, temperature=0.8)
        assert code == 200 and summary(plain) == [
            ("tactic 0.0", {"type": "stop", "matched": 2}, 4), ("tactic 0.1", {"type": "length", "length": 4}, 4),
            ("tactic 1.0", {"type": "stop", "matched": 2}, 4), ("tactic 1.1", {"type": "length", "length": 4}, 4)]
        _, short = generate(server, n=1, max_new_tokens=2, stop=["."])
        assert summary(short) == [("tactic ", {"type": "length", "length": 2}, 2)] * 2
        _, stopped = generate(server, n=1, stop=["."])
        assert summary(stopped) == [("tactic 0", {"type": "stop", "matched": "."}, 4),
                                    ("tactic 1", {"type": "stop", "matched": "."}, 4)]
        # Length comes first: a stop string in the last allowed token is kept, the finish is "length".
        _, last = generate(server, n=1, max_new_tokens=4, stop=[".0"])
        assert summary(last)[0] == ("tactic 0.0", {"type": "length", "length": 4}, 4)
        _, none = generate(server, n=1, max_new_tokens=0)
        assert summary(none)[0] == ("", {"type": "length", "length": 0}, 0)
        _, unmatched = generate(server, n=1, stop="\n")
        assert unmatched[0]["meta_info"]["finish_reason"] == {"type": "stop", "matched": "\n"}
        _, greedy = generate(server, n=3, temperature=0.0)
        assert [r["text"] for r in greedy] == ["tactic 0.0"] * 3 + ["tactic 1.0"] * 3
        assert len(plain[0]["meta_info"]["output_token_logprobs"]) == 4
        assert len(short[0]["meta_info"]["output_token_logprobs"]) == 2


def test_parameters_sglang_refuses_are_refused() -> None:
    """SGLang 0.5.23's SamplingParams.verify, in its words, after __post_init__ (temperature 0 is top_k 1)."""
    with FaultServer() as server:
        for params, message in (
            ({"temperature": -0.1}, "temperature must be a non-negative finite number, got -0.1."),
            ({"top_p": 0.0}, "top_p must be in (0, 1], got 0.0."),
            ({"max_new_tokens": -1}, "max_new_tokens must be at least 0, got -1."),
            ({"top_k": 0}, "top_k must be -1 (disable) or at least 1, got 0."),
            ({"top_k": -2}, "top_k must be -1 (disable) or at least 1, got -2."),
            ({"min_p": 1.5}, "min_p must be in [0, 1], got 1.5."),
            ({"repetition_penalty": 0}, "repetition_penalty must be in (0, 2] (1.0 = no penalty), got 0.0."),
            ({"repetition_penalty": 2.5}, "repetition_penalty must be in (0, 2] (1.0 = no penalty), got 2.5."),
            ({"frequency_penalty": -2.5}, "frequency_penalty must be in [-2, 2], got -2.5."),
            ({"presence_penalty": 3}, "presence_penalty must be in [-2, 2], got 3.0."),
            ({"min_new_tokens": 5, "max_new_tokens": 4}, "min_new_tokens must be in [0, max_new_tokens(4)], got 5."),
        ):
            code, body = generate(server, **params)
            assert (code, body) == (400, {"error": {"message": message}}), params
        # null means the default; temperature 0 turns top_k into 1 before verify, so top_k 0 passes then
        assert generate(server, top_k=None, min_p=None, repetition_penalty=None)[0] == 200
        assert generate(server, temperature=0.0, top_k=0)[0] == 200


def test_the_api_contract_refuses_unknown_fields_and_wrong_types() -> None:
    """SGLang 0.5.23's contract gate (sglang/api/v1/api_types.py): serde's text as a string `error`."""
    with FaultServer() as server:
        code, body = generate(server, top_kk=5)
        assert code == 400 and body["error"].startswith("unknown field `top_kk`, expected one of `max_new_tokens`, ")
        for params, message in (({"top_k": 2.0}, "invalid type: floating point `2.0`, expected i64"),
                                ({"n": True}, "invalid type: boolean `true`, expected i64"),
                                ({"min_p": "0.1"}, 'invalid type: string "0.1", expected f64'),
                                ({"ignore_eos": 0}, "invalid type: integer `0`, expected a boolean"),
                                ({"ebnf": 5}, "invalid type: integer `5`, expected a string"),
                                ({"stop": [1]}, "invalid type: sequence, expected a string or a sequence of strings")):
            assert generate(server, **params) == (400, {"error": message}), params
        listed = httpx.post(f"{server.url}/generate", json={"text": ["a", "b"], "sampling_params": [{"n": 1}, 3]},
                            timeout=5)
        assert (listed.status_code, listed.json()) == (
            400, {"error": "invalid type: integer `3`, expected struct SamplingParams"})
        assert generate(server, repetition_penalty=1, frequency_penalty=0)[0] == 200  # integers are numbers


def test_min_p_takes_a_deterministic_server_down() -> None:
    """Under --enable-deterministic-inference SGLang samples with the pytorch backend and a seed for every request
    (42 when none is given); its seeded path asserts that min_p is off, and the scheduler's exception stops
    the server: no answer to that request or any later one."""
    with FaultServer(deterministic=True) as server:
        assert generate(server, min_p=0.0, sampling_seed=1)[0] == 200
        for params in ({"min_p": 0.05}, {"n": 1}):
            try:
                httpx.post(f"{server.url}/generate", json={"text": "a", "sampling_params": params}, timeout=5)
            except httpx.HTTPError:
                continue
            raise AssertionError(f"answered {params} after the crash")
        assert server.crashed
    with FaultServer() as server:  # without deterministic inference min_p is sampled (flashinfer)
        assert generate(server, min_p=0.05)[0] == 200

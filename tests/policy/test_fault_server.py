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
    with FaultServer() as server:
        for params, message in (({"temperature": -0.1}, "temperature must be non-negative, got -0.1."),
                                ({"top_p": 0.0}, "top_p must be in (0, 1], got 0.0."),
                                ({"max_new_tokens": -1}, "max_new_tokens must be at least 0, got -1.")):
            code, body = generate(server, **params)
            assert (code, body) == (400, {"error": {"message": message}})

"""The SGLang client against a real HTTP server in a thread that injects faults (tests/doubles/fault_server.py)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from burnqed.config import PolicyConfig
from burnqed.errors import ConfigError, PolicyError, PolicyUnavailableError
from burnqed.policy.base import Completion, Encoder, Policy, Sampling, context_problem, prompt_error
from burnqed.policy.breaker import BreakerState, CircuitBreaker
from burnqed.policy.sglang import ClientStats, SGLangClient
from burnqed.policy.sglang_replies import parse_encode_reply, parse_generate_reply
from tests.doubles.fault_server import (
    FaultServer,
    delay,
    drop,
    fake_embedding,
    fake_ids,
    fake_logprobs,
    fake_tokens,
    malformed,
    status,
    truncated,
    wrong_count,
)

FAST = {"request_timeout_s": 0.3, "ready_timeout_s": 1.0, "retries": 2, "backoff_s": 0.01, "ready_poll_s": 0.01}
TWO = Sampling(n=2, stop=("\n",))


def client(url: str, **overrides: Any) -> SGLangClient:
    return SGLangClient(url, **{**FAST, **overrides})


def run(server: FaultServer, body: Callable[[SGLangClient], Awaitable[Any]], **overrides: Any) -> Any:
    async def main() -> Any:
        async with client(server.url, **overrides) as policy:
            return await body(policy)

    return asyncio.run(main())


async def generate_with_stats(policy: SGLangClient, prompts: list[str]) -> tuple[ClientStats, Any]:
    return await generate_with_stats_for(policy, prompts, TWO)


async def generate_with_stats_for(policy: SGLangClient, prompts: list[str], sampling: Sampling) -> tuple[
        ClientStats, Any]:
    grouped = await policy.generate(prompts, sampling)
    return policy.stats, grouped


def expected_logprob(i: int, j: int) -> float:
    return sum(lp for lp in fake_logprobs(i, j) if lp is not None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# ---------------------------------------------------------------------------------------------- parsing


def item(text: str, logprobs: list[Any], finish: Any = None) -> dict[str, Any]:
    meta = {"finish_reason": finish, "output_token_logprobs": logprobs, "completion_tokens": len(logprobs)}
    return {"text": text, "meta_info": meta}


def test_parse_groups_the_flat_list_prompt_major():
    flat = [item(f"{i}.{j}", [[-1.0 * (j + 1), 5, None]], {"type": "stop"}) for i in range(3) for j in range(2)]
    grouped = parse_generate_reply(flat, n_prompts=3, n=2)
    assert [[c.text for c in row] for row in grouped] == [["0.0", "0.1"], ["1.0", "1.1"], ["2.0", "2.1"]]
    assert grouped[2][1] == Completion("2.1", -2.0, 1, "stop")


def test_parse_accepts_a_bare_object_and_tolerates_finish_reason_variants():
    logprobs = [[-0.5, 1, "a"], [None, 2, None], [-0.25, 3, "b"]]
    (only,) = parse_generate_reply(item("x", logprobs, {"type": "length", "length": 3}), n_prompts=1, n=1)
    assert only == [Completion("x", -0.75, 3, "length")]
    for finish, expected in [
        (None, "stop"),
        ("FINISH_LENGTH: 128", "length"),
        ("abort", "abort"),
        ({"type": "abort", "message": "x"}, "abort"),
        ({"type": "stop", "matched": 2}, "stop"),
    ]:
        assert parse_generate_reply([item("x", [], finish)], 1, 1)[0][0].finish_reason == expected


@pytest.mark.parametrize(
    "reply",
    [
        [item("a", [])],  # one result where two are due
        {"error": "nope"},  # an object that is no completion
        "text",
        [item("a", []), {"text": "b"}],  # no meta_info
        [item("a", []), {"text": "b", "meta_info": {"finish_reason": None}}],  # no logprobs
        [item("a", []), item("b", [["x", 1, None]])],  # a log-prob that is no number
    ],
)
def test_parse_rejects_wrong_shapes(reply: Any):
    with pytest.raises(ValueError):
        parse_generate_reply(reply, n_prompts=1, n=2)


def test_parse_encode_reply_shapes():
    assert parse_encode_reply({"embedding": [1, 2], "meta_info": {}}, 1) == [[1.0, 2.0]]
    assert parse_encode_reply([{"embedding": [1]}, {"embedding": [2]}], 2) == [[1.0], [2.0]]
    with pytest.raises(ValueError):
        parse_encode_reply([{"embedding": [1]}], 2)


# ---------------------------------------------------------------------------------------------- breaker


def test_breaker_states_with_a_fake_clock():
    clock = Clock()
    breaker = CircuitBreaker(failures=2, reset_s=10.0, clock=clock)
    assert breaker.admit() is False
    assert breaker.failure(trial=False) is False
    breaker.success(trial=False)  # a success resets the consecutive count
    assert breaker.failure(trial=False) is False
    assert breaker.failure(trial=False) is True
    assert breaker.state() is BreakerState.OPEN
    assert breaker.admit() is None
    assert breaker.retry_in_s() == pytest.approx(10.0)
    clock.now += 10.0
    assert breaker.state() is BreakerState.HALF_OPEN
    assert breaker.admit() is True  # the one trial
    assert breaker.admit() is None  # others wait for its verdict
    assert breaker.failure(trial=True) is True  # re-opened for another reset_s
    assert breaker.state() is BreakerState.OPEN
    clock.now += 10.0
    assert breaker.admit() is True
    breaker.abandon(trial=True)  # a cancelled trial hands the trial on
    assert breaker.admit() is True
    breaker.success(trial=True)
    assert breaker.state() is BreakerState.CLOSED
    assert breaker.admit() is False


# ---------------------------------------------------------------------------------------------- generate


def test_one_request_for_all_prompts_and_n_samples_each():
    with FaultServer() as server:
        stats, grouped = run(server, lambda p: generate_with_stats(p, ["a", "b", "c"]))
        (request,) = server.received("/generate")
    assert request.body == {
        "text": ["a", "b", "c"],
        "sampling_params": {"n": 2, "temperature": 0.8, "top_p": 0.95, "max_new_tokens": 128, "stop": ["\n"],
                            "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0, "frequency_penalty": 0.0,
                            "presence_penalty": 0.0},
        "return_logprob": True,
    }
    assert [[c.text for c in row] for row in grouped] == [[f"tactic {i}.{j}" for j in range(2)] for i in range(3)]
    for i, row in enumerate(grouped):
        for j, completion in enumerate(row):
            assert completion.logprob == pytest.approx(expected_logprob(i, j))
            assert completion.n_tokens == len(fake_logprobs(i, j))
            assert completion.finish_reason == ("stop" if j == 0 else "length")
    assert (stats.requests, stats.attempts, stats.retries, stats.prompts, stats.completions) == (1, 1, 0, 3, 6)


def test_single_object_reply_for_one_prompt_and_n_1():
    with FaultServer(single_object=True) as server:
        grouped = run(server, lambda p: p.generate(["only"], Sampling(n=1)))
    assert grouped == [[Completion("tactic 0.0", expected_logprob(0, 0), 4, "stop")]]


def test_no_prompts_sends_nothing():
    with FaultServer() as server:
        assert run(server, lambda p: p.generate([], TWO)) == []
        assert run(server, lambda p: p.encode([])) == []
        assert server.requests == []


def test_client_fits_the_protocols():
    policy: Policy = SGLangClient("http://127.0.0.1:1", name="m")
    encoder: Encoder = SGLangClient.from_config(PolicyConfig(url="http://h:1/", model="deepseek", retries=7))
    assert policy.name == "m"
    assert isinstance(encoder, SGLangClient)
    assert (encoder.url, encoder.name, encoder.retries) == ("http://h:1", "deepseek", 7)
    asyncio.run(policy.close())
    asyncio.run(encoder.close())


# ----------------------------------------------------------------------------------- prompts too long

SHORT = Sampling(n=2, max_new_tokens=10)  # with a context of 100: prompts of up to 89 tokens fit


def texts(request: Any) -> list[str]:
    return list(request.body["text"])


def test_a_prompt_too_long_is_counted_not_sent_and_fails_alone():
    # Bytes + 8 ≤ 89 fits for sure; longer ones are counted with /tokenize; 88 chars = 89 tokens is the last fit.
    prompts = ["a", "x" * 200, "y" * 80, "z" * 88, "w" * 89]
    with FaultServer(context_length=100) as server:
        stats, grouped = run(server, lambda p: generate_with_stats_for(p, prompts, SHORT))
        (models,) = server.received("/v1/models")
        (counted,) = server.received("/tokenize")
        (sent,) = server.received("/generate")
    assert models.method == "GET" and counted.body == {"prompt": ["x" * 200, "z" * 88, "w" * 89]}
    assert texts(sent) == ["a", "y" * 80, "z" * 88]  # the server never sees what it would refuse
    for prompt, row in zip(prompts, grouped, strict=True):
        refusal = context_problem(fake_tokens(prompt), SHORT.max_new_tokens, 100)  # what SGLang would say
        assert (prompt_error(row) is None) == (refusal is None), prompt
        assert len(row) == 2
    assert prompt_error(grouped[1]) == ("prompt not sent: its 201 tokens plus max_new_tokens 10 reach the model's "
                                        "context length of 100 tokens")
    assert grouped[1] == [Completion("", 0.0, 0, "abort", prompt_error(grouped[1]))] * 2
    assert [c.text for c in grouped[3]] == ["tactic 2.0", "tactic 2.1"]
    assert (stats.requests, stats.refused_prompts, stats.split_batches, stats.prompts) == (2, 2, 0, 5)


def test_a_configured_context_length_is_not_asked_and_max_new_tokens_must_leave_room():
    with FaultServer(context_length=100) as server:
        grouped = run(server, lambda p: p.generate(["a", "b" * 150], SHORT), context_length=100)
        assert server.received("/v1/models") == []
        assert prompt_error(grouped[0]) is None and prompt_error(grouped[1]) is not None

        async def too_many(policy: SGLangClient) -> None:
            with pytest.raises(ConfigError, match=r"policy.max_new_tokens \(99\) leaves no room for a prompt"):
                await policy.generate(["a"], Sampling(max_new_tokens=99))

        run(server, too_many)


def test_a_400_for_a_batch_is_retried_prompt_by_prompt_and_only_the_long_prompt_fails():
    # A server that enforces its context but does not tell it: the client cannot cap, the 400 is the net.
    prompts = ["a", "x" * 200, "b"]
    with FaultServer(context_length=100, report_context=False) as server:
        stats, grouped = run(server, lambda p: generate_with_stats_for(p, prompts, SHORT))
        requests = [texts(r) for r in server.received("/generate")]
    assert requests[0] == prompts and sorted(requests[1:]) == sorted([[p] for p in prompts])
    assert [c.text for c in grouped[0]] == [c.text for c in grouped[2]] == ["tactic 0.0", "tactic 0.1"]
    assert prompt_error(grouped[1]) == "The input (201 tokens) is longer than the model's context length (100 tokens)."
    # Two requests were refused (the batch, then the long prompt alone); neither reached the caller as an error.
    assert (stats.split_batches, stats.refused_prompts, stats.failures, stats.requests) == (1, 1, 2, 4)


def test_without_a_tokenize_endpoint_the_400_is_still_the_net():
    with FaultServer(context_length=100) as server:
        server.script("/tokenize", status(404))

        async def twice(policy: SGLangClient) -> tuple[Any, Any]:
            return await policy.generate(["a", "x" * 200, "b"], SHORT), await policy.generate(["x" * 150], SHORT)

        first, second = run(server, twice)
        assert len(server.received("/tokenize")) == 1  # not asked again by this client
        assert len(server.received("/generate")) == 5  # the batch, its 3 prompts alone, the long prompt alone
    assert [prompt_error(row) is None for row in first] == [True, False, True]
    assert prompt_error(second[0]) == "The input (151 tokens) is longer than the model's context length (100 tokens)."


def test_the_schedulers_input_length_400_is_a_prompt_error():
    # SGLang's scheduler checks prompts against max_req_input_len (the KV pool can make it shorter than the context).
    message = ("Input length (120 tokens) exceeds the maximum allowed length (99 tokens). Use a shorter input or "
               "enable --allow-auto-truncate.")
    with FaultServer() as server:
        server.script("/generate", status(400, message))
        grouped = run(server, lambda p: p.generate(["a"], TWO))
    assert [prompt_error(row) for row in grouped] == [message]


@pytest.mark.slow
def test_a_400_the_prompts_get_for_another_reason_is_a_request_error():
    with FaultServer() as server:
        server.script("/generate", status(400), status(400), status(400))

        async def body(policy: SGLangClient) -> None:
            with pytest.raises(PolicyError, match=r"HTTP 400: injected 400"):
                await policy.generate(["a", "b"], TWO)

        run(server, body)
        assert len(server.received("/generate")) == 3
        # One prompt refused alone while its neighbour passes: only that one fails, with the server's message.
        server.script("/generate", status(400), status(400))
        grouped = run(server, lambda p: p.generate(["a", "b"], TWO))
    assert sum(prompt_error(row) == "injected 400" for row in grouped) == 1
    assert sum(prompt_error(row) is None for row in grouped) == 1


# ---------------------------------------------------------------------------------------------- retries


@pytest.mark.parametrize(
    "faults",
    [
        [status(500), status(503)],
        [status(429)],
        [delay(2.0)],  # stalls past the 0.3 s timeout
        [drop()],
        [truncated()],
        [malformed()],
    ],
    ids=["5xx", "429", "stall", "drop", "truncated", "malformed"],
)
@pytest.mark.slow
def test_transient_faults_are_retried(faults: list[Any]):
    with FaultServer() as server:
        server.script("/generate", *faults)
        stats, grouped = run(server, lambda p: generate_with_stats(p, ["a", "b"]))
        assert len(server.received("/generate")) == len(faults) + 1
    assert grouped[1][0].text == "tactic 1.0"
    assert (stats.attempts, stats.retries, stats.failures) == (len(faults) + 1, len(faults), 0)


def test_4xx_is_not_retried_and_carries_the_server_message():
    with FaultServer() as server:
        server.script("/generate", status(400))

        async def body(policy: SGLangClient) -> None:
            with pytest.raises(PolicyError, match=r"HTTP 400: injected 400") as info:
                await policy.generate(["a"], TWO)
            assert not isinstance(info.value, PolicyUnavailableError)
            assert policy.breaker.failures == 0  # the server answered: not a breaker failure

        run(server, body, breaker_failures=1)
        assert len(server.received("/generate")) == 1


@pytest.mark.slow
def test_gives_up_after_retries_with_a_clear_error_then_recovers():
    with FaultServer() as server:
        server.script("/generate", status(500), status(502), status(503))

        async def body(policy: SGLangClient) -> None:
            with pytest.raises(PolicyError) as info:
                await policy.generate(["a"], TWO)
            message = str(info.value)
            for part in (server.url, "POST /generate", "after 3 attempts", "HTTP 503: injected 503"):
                assert part in message
            assert len(await policy.generate(["a", "b"], TWO)) == 2  # the server recovered: so does the client
            assert (policy.stats.failures, policy.stats.requests, policy.stats.attempts) == (1, 2, 4)

        run(server, body)


def test_wrong_reply_length_is_a_protocol_error_not_retried():
    with FaultServer() as server:
        server.script("/generate", wrong_count())

        async def body(policy: SGLangClient) -> None:
            with pytest.raises(PolicyError, match=r"protocol error.*expected 4 completions, got 3"):
                await policy.generate(["a", "b"], TWO)

        run(server, body)
        assert len(server.received("/generate")) == 1


def test_connection_refused_is_retried_then_reported():
    async def main() -> None:
        async with client(f"http://127.0.0.1:{free_port()}", retries=1) as policy:
            with pytest.raises(PolicyError, match=r"after 2 attempts; last error: ConnectError"):
                await policy.generate(["a"], TWO)

    asyncio.run(main())


# ---------------------------------------------------------------------------------------------- breaker


@pytest.mark.slow
def test_breaker_opens_fails_fast_then_half_open_trial_closes_it():
    clock = Clock()
    with FaultServer() as server:
        server.script("/generate", *[status(500)] * 4)

        async def body(policy: SGLangClient) -> None:
            for _ in range(2):  # two failed requests of two attempts each
                with pytest.raises(PolicyError, match="after 2 attempts"):
                    await policy.generate(["a"], TWO)
            assert policy.breaker.state() is BreakerState.OPEN
            with pytest.raises(PolicyUnavailableError, match=r"circuit breaker open.*refused without sending"):
                await policy.generate(["a"], TWO)
            assert len(server.received("/generate")) == 4  # the fail-fast call never reached the server
            clock.now += 5.0
            server.script("/generate", status(500))
            with pytest.raises(PolicyError, match="after 1 attempt;"):  # the half-open trial: one attempt
                await policy.generate(["a"], TWO)
            assert policy.breaker.state() is BreakerState.OPEN
            with pytest.raises(PolicyUnavailableError):
                await policy.encode(["x"])
            clock.now += 5.0
            assert len(await policy.generate(["a"], TWO)) == 1  # trial succeeds: closed again
            assert policy.breaker.state() is BreakerState.CLOSED
            assert policy.stats.rejected == 2

        run(server, body, retries=1, breaker_failures=2, breaker_reset_s=5.0, clock=clock)
        assert len(server.received("/generate")) == 6
        assert server.received("/encode") == []


# ---------------------------------------------------------------------------------------------- readiness


def test_wait_ready_polls_health_through_503s():
    with FaultServer() as server:
        server.unhealthy(3)
        run(server, lambda p: p.wait_ready())
        assert [r.method for r in server.received("/health")] == ["GET"] * 4
        # Readiness is /health alone; the context length is asked once the server is ready, never before.
        assert [r.path for r in server.requests] == ["/health"] * 4 + ["/v1/models"]


def test_wait_ready_deadline_names_url_and_last_status():
    with FaultServer() as server:
        server.unhealthy(1000)

        async def body(policy: SGLangClient) -> None:
            started = time.monotonic()
            with pytest.raises(
                PolicyUnavailableError, match=r"not ready after 0.2 s \(last /health: HTTP 503\)"
            ) as info:
                await policy.wait_ready()
            assert server.url in str(info.value)
            assert time.monotonic() - started < 1.0

        run(server, body, ready_timeout_s=0.2)


@pytest.mark.slow
def test_wait_ready_while_the_server_starts():
    port = free_port()
    holder: list[FaultServer] = []

    def start_late() -> None:
        time.sleep(0.2)  # connection refused meanwhile
        server = FaultServer(port=port)
        server.unhealthy(2)
        holder.append(server.__enter__())

    async def main() -> None:  # a server being started beside us (the workflows' sidecar): refused while it loads
        async with client(f"http://127.0.0.1:{port}", ready_timeout_s=3.0, wait_for_start=True) as policy:
            await policy.wait_ready()

    starter = threading.Thread(target=start_late)
    starter.start()
    try:
        asyncio.run(main())
    finally:
        starter.join()
        for server in holder:
            server.__exit__(None, None, None)
    assert len(holder[0].received("/health")) == 3


def test_wait_ready_refused_reports_the_connect_error():
    async def main() -> None:
        async with client(f"http://127.0.0.1:{free_port()}", ready_timeout_s=0.1, wait_for_start=True) as policy:
            with pytest.raises(PolicyUnavailableError, match=r"last /health: ConnectError"):
                await policy.wait_ready()

    asyncio.run(main())


@pytest.mark.slow  # three clients, one waits 0.1 s
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]"])
def test_nothing_listening_on_a_loopback_url_fails_at_once_unless_a_server_is_being_started(host: str):
    port = free_port()  # bound and closed again: nothing listens there
    url = f"http://{host}:{port}"

    async def main() -> None:
        async with client(url, ready_timeout_s=600.0) as policy:  # the default: ten minutes of waiting for nothing
            started = time.monotonic()
            with pytest.raises(PolicyUnavailableError) as info:
                await policy.wait_ready()
            assert time.monotonic() - started < 2.0
        assert str(info.value) == (
            f"nothing listens on {url} (ConnectError: All connection attempts failed): start the server there "
            "(SGLang, or `burnqed serve`) or set policy.url; policy.wait_for_start=true waits up to "
            "policy.ready_timeout_s for a server that is being started")
        async with client(url, ready_timeout_s=0.1, wait_for_start=True, url_setting="ebm.encoder_url") as policy:
            with pytest.raises(PolicyUnavailableError) as info:
                await policy.wait_ready()  # waited for: a server being started is refused while it loads
        assert str(info.value).startswith(f"policy server {url} not ready after 0.1 s (last /health: ConnectError")
        assert str(info.value).endswith("check that it is running and that ebm.encoder_url points at it, or raise "
                                        "policy.ready_timeout_s")

    asyncio.run(main())


def test_only_a_loopback_url_is_judged_by_a_refusal():
    from burnqed.policy.sglang import is_loopback

    for url in ("http://127.0.0.1:30000", "http://127.0.0.2:1", "http://localhost:30000/", "http://[::1]:30000",
                "https://LOCALHOST:443"):
        assert is_loopback(url), url
    for url in ("http://10.0.0.1:30000", "http://sglang.burnqed.svc:30000", "http://[2001:db8::1]:1",
                "http://localhost.example.com:1"):
        assert not is_loopback(url), url


# ---------------------------------------------------------------------------------------------- encode


def test_encode_one_request_and_single_object_reply():
    with FaultServer() as server:
        vectors = run(server, lambda p: p.encode(["a", "bb"]))
        assert server.received("/encode")[0].body == {"text": ["a", "bb"]}
    assert vectors == [fake_embedding("a"), fake_embedding("bb")]
    with FaultServer(single_object=True) as server:
        assert run(server, lambda p: p.encode(["z"])) == [fake_embedding("z")]


def test_encode_on_a_server_without_it_hints_at_burnqed_serve():
    with FaultServer() as server:
        server.script("/encode", status(404))
        with pytest.raises(PolicyError, match=r"HTTP 404: injected 404 \(is it `burnqed serve`\?\)"):
            run(server, lambda p: p.encode(["a"]))


# ---------------------------------------------------------------------------------------------- concurrency


def test_cancel_mid_request_leaves_the_client_usable():
    with FaultServer() as server:
        server.script("/generate", delay(5.0))

        async def body(policy: SGLangClient) -> None:
            task = asyncio.create_task(policy.generate(["a"], TWO))
            for _ in range(1000):  # the request on the server, within 10 s (a fixed 0.1 s was too short under load)
                if server.received("/generate"):
                    break
                await asyncio.sleep(0.01)
            assert len(server.received("/generate")) == 1
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            grouped = await asyncio.wait_for(policy.generate(["a"], TWO), timeout=2.0)
            assert grouped[0][1].text == "tactic 0.1"
            assert policy.breaker.state() is BreakerState.CLOSED
            assert policy.stats.failures == 0

        run(server, body, request_timeout_s=10.0, max_inflight=1)


@pytest.mark.slow
def test_inflight_requests_are_bounded():
    with FaultServer() as server:
        server.script("/generate", *[delay(0.1)] * 6)

        async def body(policy: SGLangClient) -> None:
            await asyncio.gather(*(policy.generate([str(k)], TWO) for k in range(6)))

        run(server, body, max_inflight=2)
        assert server.max_concurrent == 2
        assert len(server.received("/generate")) == 6


@pytest.mark.slow
def test_wait_ready_says_what_it_waits_for_every_few_seconds(monkeypatch: pytest.MonkeyPatch):
    from burnqed.policy import sglang

    monkeypatch.setattr(sglang, "WAIT_NOTICE_EVERY_S", 0.1)
    notices: list[str] = []
    with FaultServer() as server:
        server.unhealthy(1000)

        async def body(policy: SGLangClient) -> None:
            with pytest.raises(PolicyUnavailableError):
                await policy.wait_ready(notice=notices.append)

        run(server, body, ready_timeout_s=0.5)
    assert len(notices) >= 2
    assert all(f"waiting for the policy server {server.url}/health: HTTP 503 (" in line for line in notices)
    assert notices[-1].endswith("of policy.ready_timeout_s=0.5)")


@pytest.mark.slow
def test_wait_ready_notices_go_to_stderr_by_default(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]):
    from burnqed.policy import sglang

    monkeypatch.setattr(sglang, "WAIT_NOTICE_EVERY_S", 0.1)
    port = free_port()

    async def main() -> None:
        async with client(f"http://127.0.0.1:{port}", ready_timeout_s=0.4, wait_for_start=True) as policy:
            with pytest.raises(PolicyUnavailableError):
                await policy.wait_ready()

    asyncio.run(main())
    err = capsys.readouterr().err
    assert f"waiting for the policy server http://127.0.0.1:{port}/health: ConnectError" in err


def test_a_server_that_tokenizes_the_probe_otherwise_is_refused_with_both_id_lists():
    from burnqed.policy.modelfolder import PROBE_TEXT

    trained = fake_ids(PROBE_TEXT)  # the double's tokenizer: BOS (1), then one id per character
    with FaultServer(context_length=4096) as server:
        grouped = run(server, lambda p: p.generate(["a"], TWO), tokenizer_probe=trained)
        assert [len(row) for row in grouped] == [2]
        assert [r.body for r in server.received("/tokenize")] == [{"prompt": [PROBE_TEXT]}]  # asked once

        async def refused_at_start(policy: SGLangClient) -> None:
            with pytest.raises(ConfigError) as refusal:
                await policy.wait_ready()
            assert f"as the model was trained: {trained[1:]}; as the server reads it: {trained}" in str(refusal.value)
            with pytest.raises(ConfigError, match="reads the probe prompt differently"):
                await policy.generate(["a"], TWO)  # and before any generation: nothing is sent
            assert server.received("/generate") == []

        server.requests.clear()
        run(server, refused_at_start, tokenizer_probe=trained[1:])  # trained without BOS, served with it


def test_a_server_without_tokenize_cannot_be_checked_and_still_generates(caplog: pytest.LogCaptureFixture):
    with FaultServer(context_length=100, report_context=False) as server:
        grouped = run(server, lambda p: p.generate(["a"], TWO), tokenizer_probe=[1, 2, 3])
    assert [len(row) for row in grouped] == [2]
    assert "the tokenizer probe is not compared" in caplog.text


def test_samples_as_copies_sends_each_prompt_n_times_with_n_1_and_regroups_them():
    with FaultServer() as server:
        by_n = run(server, lambda p: p.generate(["a", "b"], TWO))
        asked_n = [r.body for r in server.received("/generate")]
        server.requests.clear()
        copies = run(server, lambda p: p.generate(["a", "b"], TWO), samples_as="copies")
        asked_copies = [r.body for r in server.received("/generate")]
    assert [b["text"] for b in asked_n] == [["a", "b"]] and asked_n[0]["sampling_params"]["n"] == 2
    assert [b["text"] for b in asked_copies] == [["a", "a", "b", "b"]]
    assert asked_copies[0]["sampling_params"]["n"] == 1
    # The double's completion j of prompt i is "tactic i.j": copies are 4 prompts with one sample each.
    assert [[c.text for c in row] for row in by_n] == [["tactic 0.0", "tactic 0.1"], ["tactic 1.0", "tactic 1.1"]]
    assert [[c.text for c in row] for row in copies] == [["tactic 0.0", "tactic 1.0"], ["tactic 2.0", "tactic 3.0"]]

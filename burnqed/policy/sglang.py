"""The SGLang HTTP client: `Policy` and `Encoder` over SGLang's native API (and `burnqed serve`).

    async with SGLangClient.from_config(cfg.policy) as policy:
        await policy.wait_ready()                      # polls GET /health until 200 (503 while warming up)
        per_prompt = await policy.generate(prompts, Sampling(n=8, stop=("\\n",)))
        vectors = await policy.encode(texts)           # `burnqed serve --encode-only` (docs/ebm.md)

One `generate` call is ONE `POST /generate` for all prompts, regrouped into `n` completions per prompt. Prompts too
long for the context fail alone, never the batch (docs/search.md, "Prompts too long for the model"); the server's
tokenization is checked against the model's tokenizer probe (docs/training.md, "One model folder"); seeded samples
go as one copy per sample. Failures are retried and counted by a circuit breaker (`SGLangClient`); what escapes is
a `PolicyError` naming the URL, endpoint and last error.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
from pydantic import ValidationError

from burnqed.config import PolicyConfig
from burnqed.errors import ConfigError, PolicyError, PolicyUnavailableError
from burnqed.policy.base import AsyncClosing, Completion, Sampling, Seeds, check_seeds, context_problem, refused
from burnqed.policy.breaker import BreakerState, CircuitBreaker
from burnqed.policy.modelfolder import PROBE_TEXT, probe_mismatch
from burnqed.policy.sglang_replies import (
    clip,
    parse_encode_reply,
    parse_generate_reply,
    parse_models_reply,
    parse_tokenize_ids,
    parse_tokenize_reply,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

RETRY_STATUSES = frozenset({408, 429})  # plus every 5xx
MAX_BACKOFF_S = 30.0
HEALTH_POLL_TIMEOUT_S = 10.0  # SGLang's /health runs a one-token generation: allow it a few seconds
WAIT_NOTICE_EVERY_S = 5.0  # while waiting for /health, say on stderr what is awaited this often
SPECIAL_TOKEN_ALLOWANCE = 8  # tokens a tokenizer adds beyond the text (BOS, a template's markers)
# SGLang's 400 messages for a prompt that does not fit: the tokenizer manager's against the context length
# (TokenizerManager._validate_one_request), and the scheduler's against its max_req_input_len, which the KV pool can
# make shorter than the context (managers/utils.validate_input_length; the same in 0.5.6 and 0.5.23).
PROMPT_ERRORS = ("longer than the model's context length", "exceeds the model's maximum context length",
                 "exceeds the maximum allowed length")


def _stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass(slots=True)
class ClientStats:
    """Counters for logs and benchmarks. `seconds` is wall time inside requests (attempts + backoff)."""

    requests: int = 0  # logical calls that reached the server (generate/encode)
    attempts: int = 0  # HTTP requests sent
    retries: int = 0
    failures: int = 0  # logical calls that raised PolicyError
    rejected: int = 0  # calls refused by the open breaker
    prompts: int = 0
    completions: int = 0
    encoded: int = 0
    refused_prompts: int = 0  # prompts not answered: too long for the context, or refused by the server alone
    split_batches: int = 0  # batches answered 400 and retried prompt by prompt
    seconds: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


class _Retryable(Exception):
    """An attempt failed in a way another attempt may fix."""


class _ClientError(PolicyError):
    """A 4xx answer: our request is wrong; the server is up (not counted by the breaker)."""

    def __init__(self, message: str, status: int, detail: str) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail  # the server's own message


class SGLangClient(AsyncClosing):
    """`Policy` + `Encoder` over SGLang's native HTTP API, with retries and a circuit breaker.

    Retries: 5xx, 408, 429, connect errors, timeouts (connect/read/write/pool), dropped connections and
    unparseable JSON (a truncated body) are retried up to `retries` times after `backoff_s × 2^k` (+ up to
    50 % jitter, at most 30 s). Other 4xx raise `PolicyError` at once with the server's message. A reply
    that parses but has the wrong shape or length is a protocol error (a version mismatch or a server
    bug, which another attempt would only repeat): `PolicyError` at once, no retry. A request that timed
    out is safe to resend: SGLang aborts requests whose client disconnected.

    Circuit breaker, counting logical requests (each after its retries):
      closed    — requests go; `breaker_failures` consecutive failures (transport/5xx/protocol; a 4xx
                  answer proves the server is up and counts as success) open it;
      open      — every call fails fast with `PolicyUnavailableError`, nothing is sent, for
                  `breaker_reset_s`;
      half-open — then exactly one call goes through as a trial, with a single attempt (no retries);
                  success closes the breaker, failure re-opens it for another `breaker_reset_s`. A
                  cancelled trial hands the trial to the next call.

    At most `max_inflight` requests are on the wire at once (a semaphore; the pool has one connection
    more for health polls). Cancelling a call mid-request drops that connection and leaves the client
    usable. `wait_ready` bypasses the breaker.
    """

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        request_timeout_s: float = 300.0,
        ready_timeout_s: float = 600.0,
        retries: int = 4,
        backoff_s: float = 0.5,
        breaker_failures: int = 5,
        breaker_reset_s: float = 30.0,
        max_inflight: int = 4,
        ready_poll_s: float = 0.5,
        context_length: int | None = None,
        tokenizer_probe: Sequence[int] | None = None,
        samples_as: str = "n",
        wait_for_start: bool = False,
        url_setting: str = "policy.url",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url.rstrip("/")
        # policy.wait_for_start: a server is being started beside us, so a refused connection is one still loading;
        # else a refused loopback connection means nothing will answer (`wait_ready`). `url_setting` names the key.
        self.wait_for_start = wait_for_start
        self.url_setting = url_setting
        if samples_as not in ("n", "copies"):
            raise ValueError(f"samples_as must be 'n' or 'copies', got {samples_as!r}")
        self.samples_as = samples_as  # policy.samples_as: sampling_params.n, or n copies of each prompt with n = 1
        # The ids of PROBE_TEXT the model was trained with (its export.json); None: nothing to compare with.
        self.tokenizer_probe = list(tokenizer_probe) if tokenizer_probe is not None else None
        self._probe_checked = tokenizer_probe is None
        self._probe_refusal: str | None = None  # once refused, every later call is refused the same way
        self.context_length = context_length  # None: asked from the server (/v1/models) before the first generate
        self._context_asked = context_length is not None
        self._context_lock = asyncio.Lock()  # one /v1/models question, however many calls start at once
        self._can_tokenize = True
        self._name = name or self.url
        self.request_timeout_s = request_timeout_s
        self.ready_timeout_s = ready_timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.ready_poll_s = ready_poll_s
        self.breaker = CircuitBreaker(breaker_failures, breaker_reset_s, clock)
        self.stats = ClientStats()
        self._inflight = asyncio.Semaphore(max_inflight)
        self._random = random.Random()
        # trust_env=False: the server is a sidecar or in-cluster service; HTTP(S)_PROXY must not reroute it.
        self._http = httpx.AsyncClient(
            base_url=self.url,
            timeout=httpx.Timeout(request_timeout_s),
            limits=httpx.Limits(max_connections=max_inflight + 1, max_keepalive_connections=max_inflight + 1),
            trust_env=False,
        )

    @classmethod
    def from_config(cls, cfg: PolicyConfig, tokenizer_probe: Sequence[int] | None = None, *,
                    url_setting: str = "policy.url") -> SGLangClient:
        """The client of the server at `cfg.url`; `url_setting` is the key errors name for that URL (the planner's
        client: planner.url)."""
        return cls(
            cfg.url,
            name=cfg.model,
            request_timeout_s=cfg.request_timeout_s,
            ready_timeout_s=cfg.ready_timeout_s,
            retries=cfg.retries,
            backoff_s=cfg.backoff_s,
            breaker_failures=cfg.breaker_failures,
            breaker_reset_s=cfg.breaker_reset_s,
            max_inflight=cfg.max_inflight_requests,
            context_length=cfg.context_length,
            tokenizer_probe=tokenizer_probe,
            samples_as=cfg.samples_as,
            wait_for_start=cfg.wait_for_start,
            url_setting=url_setting,
        )

    @property
    def name(self) -> str:
        return self._name

    async def close(self) -> None:
        await self._http.aclose()

    async def wait_ready(self, notice: Callable[[str], None] | None = None) -> None:
        """Poll `GET /health` until it answers 200 (503 while warming up; refused while starting, when
        `wait_for_start` says a server is being started). A refused connection to a loopback URL with nothing being
        started is `PolicyUnavailableError` at once: nothing listens there, and waiting would only delay the same
        answer by policy.ready_timeout_s. Every `WAIT_NOTICE_EVERY_S` seconds of waiting, `notice` (default: a line
        on stderr) is told the URL, the last answer and the time waited against policy.ready_timeout_s."""
        say = notice if notice is not None else _stderr_line
        started = time.monotonic()
        deadline = started + self.ready_timeout_s
        next_notice = started + WAIT_NOTICE_EVERY_S
        last = "no answer yet"
        while True:
            now = time.monotonic()
            if now >= next_notice:
                next_notice = now + WAIT_NOTICE_EVERY_S
                say(f"waiting for the policy server {self.url}/health: {last} ({now - started:.0f} s of "
                    f"policy.ready_timeout_s={self.ready_timeout_s:g})")
            remaining = deadline - now
            if remaining <= 0:
                raise PolicyUnavailableError(
                    f"policy server {self.url} not ready after {self.ready_timeout_s:g} s (last /health: {last}); "
                    f"check that it is running and that {self.url_setting} points at it, or raise "
                    "policy.ready_timeout_s"
                )
            poll_timeout = min(remaining, HEALTH_POLL_TIMEOUT_S)
            try:
                reply = await self._http.get("/health", timeout=poll_timeout)
                if reply.status_code == 200:
                    await self._ask_context()
                    await self._check_tokenizer()
                    return
                last = f"HTTP {reply.status_code}"
            except httpx.TimeoutException as exc:
                if poll_timeout == HEALTH_POLL_TIMEOUT_S or last == "no answer yet":  # else: cut short by the deadline
                    last = _describe(exc)
            except httpx.HTTPError as exc:
                if isinstance(exc, httpx.ConnectError) and not self.wait_for_start and is_loopback(self.url):
                    raise PolicyUnavailableError(
                        f"nothing listens on {self.url} ({_describe(exc)}): start the server there (SGLang, or "
                        f"`burnqed serve`) or set {self.url_setting}; policy.wait_for_start=true waits up to "
                        "policy.ready_timeout_s for a server that is being started") from None
                last = _describe(exc)
            await asyncio.sleep(min(self.ready_poll_s, max(0.0, deadline - time.monotonic())))

    async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
        """`sampling.n` completions per prompt (prompt order), from one `POST /generate`; a prompt that does not
        fit the context fails alone; `seeds`: one `sampling_seed` per sample (module docstring)."""
        if sampling.n < 1:
            raise ValueError(f"sampling.n must be >= 1, got {sampling.n}")
        check_seeds(prompts, sampling.n, seeds)
        if not prompts:
            return []
        await self._ask_context()
        await self._check_tokenizer()
        results: list[list[Completion] | None] = [None] * len(prompts)
        for index, reason in (await self._too_long(prompts, sampling.max_new_tokens)).items():
            results[index] = refused(reason, sampling.n)
        todo = [i for i, result in enumerate(results) if result is None]
        if todo:
            answered = await self._generate_batch([prompts[i] for i in todo], sampling,
                                                  None if seeds is None else [seeds[i] for i in todo])
            for index, result in zip(todo, answered, strict=True):
                results[index] = result
        final = [result for result in results if result is not None]
        self.stats.prompts += len(prompts)
        self.stats.completions += len(prompts) * sampling.n
        self.stats.refused_prompts += sum(1 for result in final if result and result[0].error)
        return final

    async def _generate_batch(self, prompts: list[str], sampling: Sampling,
                              seeds: Seeds | None) -> list[list[Completion]]:
        """One request for `prompts`; a 400 for several of them is retried prompt by prompt."""
        try:
            return await self._generate_request(prompts, sampling, seeds)
        except _ClientError as exc:
            if exc.status != 400:
                raise
            if len(prompts) == 1:
                if _prompt_specific(exc.detail):
                    return [refused(exc.detail, sampling.n)]
                raise
            self.stats.split_batches += 1
            log.warning("policy server %s refused a batch of %d prompts (HTTP 400: %s); retrying them one by one",
                        self.url, len(prompts), clip(exc.detail, 200))
        singles = await asyncio.gather(*(self._generate_one(p, sampling, None if seeds is None else seeds[i])
                                         for i, p in enumerate(prompts)))
        answered = any(not isinstance(single, _ClientError) for single in singles)
        results: list[list[Completion]] = []
        for single in singles:
            if not isinstance(single, _ClientError):
                results.append(single)
            elif answered or _prompt_specific(single.detail):
                results.append(refused(single.detail, sampling.n))
            else:  # every prompt refused alone, not for its length: the request itself is wrong
                raise single
        return results

    async def _generate_one(self, prompt: str, sampling: Sampling,
                            seeds: Sequence[int] | None) -> list[Completion] | _ClientError:
        try:
            return (await self._generate_request([prompt], sampling, None if seeds is None else [seeds]))[0]
        except _ClientError as exc:
            if exc.status != 400:
                raise
            return exc

    async def _generate_request(self, prompts: list[str], sampling: Sampling,
                                seeds: Seeds | None) -> list[list[Completion]]:
        # `Sampling` maps one to one onto SGLang's sampling_params (see base.py); a grammar only when there is one.
        params = {**asdict(sampling), "stop": list(sampling.stop)}
        if not sampling.ebnf:
            del params["ebnf"]
        n = sampling.n
        if seeds is not None:
            # One copy per sample, each with n = 1 and its own sampling_seed (module docstring): prompt-major.
            texts = [prompt for prompt in prompts for _ in range(n)]
            per_copy = [{**params, "n": 1, "sampling_seed": seed} for row in seeds for seed in row]
            body = {"text": texts, "sampling_params": per_copy, "return_logprob": True}
            flat = await self._call("/generate", body, lambda data: parse_generate_reply(data, len(texts), 1))
            return [[group[0] for group in flat[i * n:(i + 1) * n]] for i in range(len(prompts))]
        if self.samples_as == "copies" and n > 1:
            # Each prompt n times with n = 1: the reply is prompt-major too, so copy j of prompt i is item i*n + j.
            texts = [prompt for prompt in prompts for _ in range(n)]
            body = {"text": texts, "sampling_params": {**params, "n": 1}, "return_logprob": True}
            flat = await self._call("/generate", body, lambda data: parse_generate_reply(data, len(texts), 1))
            return [[group[0] for group in flat[i * n:(i + 1) * n]] for i in range(len(prompts))]
        body = {"text": list(prompts), "sampling_params": params, "return_logprob": True}
        return await self._call("/generate", body, lambda data: parse_generate_reply(data, len(prompts), n))

    async def context_limit(self) -> int | None:
        """The served model's context length in tokens (policy.context_length, else the server's `/v1/models`,
        asked once); None when neither says."""
        await self._ask_context()
        return self.context_length

    async def _ask_context(self) -> None:
        """Learn the context length from `GET /v1/models` once (an answer without it leaves the cap off)."""
        if self._context_asked:
            return
        async with self._context_lock:
            if self._context_asked:
                return
            try:
                reply = await self._http.get("/v1/models", timeout=HEALTH_POLL_TIMEOUT_S)
            except httpx.HTTPError as exc:  # try again before the next request
                log.debug("GET %s/v1/models failed: %s", self.url, _describe(exc))
                return
            self._context_asked = True
            with contextlib.suppress(ValueError):
                self.context_length = parse_models_reply(reply.json()) if reply.status_code == 200 else None
        if self.context_length is None:
            log.warning("policy server %s does not report its context length (GET /v1/models: HTTP %d): prompts "
                        "are not capped before sending (a batch refused for one long prompt is still retried "
                        "prompt by prompt); set policy.context_length", self.url, reply.status_code)

    async def _check_tokenizer(self) -> None:
        """Once: the server must tokenize PROBE_TEXT into the ids the model was trained on (`tokenizer_probe`), BOS
        included; `ConfigError` with both id lists when not (an SGLang image whose transformers reads the folder
        otherwise). A server without /tokenize cannot be checked: a warning, and generation goes on."""
        if self._probe_refusal is not None:
            raise ConfigError(self._probe_refusal)
        if self._probe_checked or self.tokenizer_probe is None:
            return
        async with self._context_lock:
            if self._probe_checked:
                if self._probe_refusal is not None:
                    raise ConfigError(self._probe_refusal)
                return
            try:
                [ids] = await self._call("/tokenize", {"prompt": [PROBE_TEXT]},
                                         lambda data: parse_tokenize_ids(data, 1))
            except _ClientError as exc:
                log.warning("policy server %s cannot show its tokenization (POST /tokenize: HTTP %d, %s): the "
                            "tokenizer probe is not compared", self.url, exc.status, clip(exc.detail, 200))
                ids = None
            self._probe_checked = True
            self._probe_refusal = None if ids is None else probe_mismatch(
                f"policy server {self.url}", self.tokenizer_probe, ids, "as the model was trained",
                "as the server reads it")
        if self._probe_refusal is not None:
            raise ConfigError(self._probe_refusal)

    async def _too_long(self, prompts: Sequence[str], max_new_tokens: int) -> dict[int, str]:
        """Index → reason of the prompts that do not fit the context with `max_new_tokens` (module docstring)."""
        context = self.context_length
        if context is None:
            return {}
        limit = context - 1 - max_new_tokens  # SGLang refuses prompt + max_new_tokens >= context
        if limit < 1:
            raise ConfigError(f"policy.max_new_tokens ({max_new_tokens}) leaves no room for a prompt in the model's "
                              f"context of {context} tokens; lower it")
        unsure = [i for i, p in enumerate(prompts) if len(p.encode("utf-8")) + SPECIAL_TOKEN_ALLOWANCE > limit]
        if not unsure or not self._can_tokenize:
            return {}
        texts = [prompts[i] for i in unsure]
        try:
            counts = await self._call("/tokenize", {"prompt": texts},
                                      lambda data: parse_tokenize_reply(data, len(texts)))
        except _ClientError as exc:  # no /tokenize (404), or one that refuses us: count no more, keep the net
            self._can_tokenize = False
            log.warning("policy server %s cannot count tokens (POST /tokenize: HTTP %d, %s): long prompts are sent "
                        "uncounted (a 400 for one of them is retried prompt by prompt)", self.url, exc.status,
                        clip(exc.detail, 200))
            return {}
        return {
            index: (f"prompt not sent: its {count} tokens plus max_new_tokens {max_new_tokens} reach the model's "
                    f"context length of {context} tokens")
            for index, count in zip(unsure, counts, strict=True) if context_problem(count, max_new_tokens, context)
        }

    async def encode(self, texts: Sequence[str]) -> list[list[float]]:
        """One embedding per text, from one `POST /encode` (`burnqed serve`: the value model's encoder)."""
        if not texts:
            return []
        result = await self._call("/encode", {"text": list(texts)}, lambda data: parse_encode_reply(data, len(texts)))
        self.stats.encoded += len(texts)
        return result

    async def describe_encoder(self) -> Any:
        """`GET /encoder_info` of `burnqed serve` (its model, fingerprint and encode settings), as JSON.
        `ConfigError` when the server has no such endpoint (it is not burnqed's encoder)."""
        try:
            reply = await self._http.get("/encoder_info", timeout=self.request_timeout_s)
        except httpx.HTTPError as exc:
            raise PolicyError(f"encoder server {self.url}: GET /encoder_info: {_describe(exc)}") from exc
        if reply.status_code == 404:
            raise ConfigError(
                f"the server at {self.url} is not burnqed's encoder (GET /encoder_info: HTTP 404); an SGLang "
                "--is-embedding server pools the last token and L2-normalises, not what the value model is trained "
                "on: serve the policy model there with `burnqed serve --encode-only`"
            )
        if reply.status_code != 200:
            raise PolicyError(f"encoder server {self.url}: GET /encoder_info answered HTTP {reply.status_code}: "
                              f"{_server_message(reply)}")
        try:
            return reply.json()
        except ValueError as exc:
            raise PolicyError(f"encoder server {self.url}: GET /encoder_info is not JSON: {exc}") from exc

    def _unavailable(self, endpoint: str) -> PolicyUnavailableError:
        self.stats.rejected += 1
        return PolicyUnavailableError(
            f"policy server {self.url}: circuit breaker open after {self.breaker.threshold} consecutive failed "
            f"requests; POST {endpoint} refused without sending (next trial in {self.breaker.retry_in_s():.1f} s)"
        )

    async def _call(self, endpoint: str, body: dict[str, Any], parse: Callable[[Any], T]) -> T:
        if self.breaker.state() is BreakerState.OPEN:  # fail fast even while queued behind in-flight requests
            raise self._unavailable(endpoint)
        async with self._inflight:
            trial = self.breaker.admit()
            if trial is None:
                raise self._unavailable(endpoint)
            self.stats.requests += 1
            started = time.monotonic()
            verdict: bool | None = None  # True = server healthy, False = failed, None = cancelled
            try:
                result = await self._attempts(endpoint, body, parse, 1 if trial else self.retries + 1)
                verdict = True
                return result
            except _ClientError:
                verdict = True
                self.stats.failures += 1
                raise
            except PolicyError:
                verdict = False
                self.stats.failures += 1
                raise
            finally:
                self.stats.seconds += time.monotonic() - started
                if verdict is None:
                    self.breaker.abandon(trial)
                elif verdict:
                    self.breaker.success(trial)
                elif self.breaker.failure(trial):
                    log.error("policy server %s: circuit breaker open for %g s", self.url, self.breaker.reset_s)

    async def _attempts(self, endpoint: str, body: dict[str, Any], parse: Callable[[Any], T], attempts: int) -> T:
        last = ""
        for attempt in range(attempts):
            if attempt:
                delay = min(MAX_BACKOFF_S, self.backoff_s * 2 ** (attempt - 1))
                delay *= 1 + 0.5 * self._random.random()  # jitter: concurrent clients do not retry in lockstep
                log.warning(
                    "POST %s failed (%s); retry %d/%d in %.2fs", self.url + endpoint, last, attempt, attempts - 1, delay
                )
                self.stats.retries += 1
                await asyncio.sleep(delay)
            self.stats.attempts += 1
            try:
                data = await self._post(endpoint, body)
            except _Retryable as exc:
                last = str(exc)
                continue
            try:
                return parse(data)
            except (ValidationError, ValueError) as exc:
                raise PolicyError(
                    f"policy server {self.url}: POST {endpoint} answered an unexpected reply (protocol error, "
                    f"not retried): {clip(str(exc))}"
                ) from exc
        raise PolicyError(
            f"policy server {self.url}: POST {endpoint} failed after {attempts} attempt"
            f"{'s' if attempts != 1 else ''}; last error: {last}"
        )

    async def _post(self, endpoint: str, body: dict[str, Any]) -> Any:
        """One attempt: the decoded JSON of a 2xx reply, `_Retryable`, or `_ClientError` (a 4xx)."""
        try:
            reply = await self._http.post(endpoint, json=body)
        except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError) as exc:
            raise _Retryable(_describe(exc)) from exc
        except httpx.HTTPError as exc:  # bad URL scheme, proxy trouble, ...: another attempt will not help
            raise PolicyError(f"policy server {self.url}: POST {endpoint}: {_describe(exc)}") from exc
        status = reply.status_code
        if status >= 500 or status in RETRY_STATUSES:
            raise _Retryable(f"HTTP {status}: {_server_message(reply)}")
        if status >= 400:
            hint = " (is it `burnqed serve`?)" if endpoint == "/encode" and status == 404 else ""
            detail = _server_message(reply)
            raise _ClientError(
                f"policy server {self.url}: POST {endpoint} rejected with HTTP {status}: {detail}{hint}", status, detail
            )
        try:
            return reply.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # a body cut short: treat like a dropped line
            raise _Retryable(f"HTTP {status} with a body that is not JSON: {exc}") from exc


def _prompt_specific(message: str) -> bool:
    """Whether a 400's message is SGLang's refusal of one prompt for its length."""
    return any(fragment in message for fragment in PROMPT_ERRORS)


def is_loopback(url: str) -> bool:
    """True for a URL of this machine's loopback interface (localhost, 127.0.0.0/8, ::1)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _server_message(reply: httpx.Response) -> str:
    """SGLang's error body is `{"error": {"message": ...}}`; FastAPI's is `{"detail": ...}`."""
    with contextlib.suppress(ValueError):
        data = reply.json()
        if isinstance(data, dict):
            for key in ("error", "detail", "message"):
                value = data.get(key)
                if isinstance(value, dict) and "message" in value:
                    value = value["message"]
                if value:
                    return clip(str(value))
    return clip(reply.text.strip()) or reply.reason_phrase

"""The SGLang HTTP client: `Policy` and `Encoder` over SGLang's native API (and `burnqed serve`).

    async with SGLangClient.from_config(cfg.policy) as policy:
        await policy.wait_ready()                      # polls GET /health until 200 (503 while warming up)
        per_prompt = await policy.generate(prompts, Sampling(n=8, stop=("\\n",)))
        vectors = await policy.encode(texts)           # a server started with --is-embedding

One `generate` call is ONE `POST /generate` for all prompts (many states × n candidates per request); the
reply is regrouped into a list of `n` completions per prompt, in prompt order. Replies are validated at the
edge (pydantic); version variants are tolerated (a bare object instead of a one-element list, a string or
null `finish_reason`). Failures are retried with backoff and counted by a circuit breaker (see
`SGLangClient`); what finally escapes is a `PolicyError` naming the URL, endpoint and last error.

Log-probs: search needs the model's true token log-probs. Recent SGLang reports them AFTER temperature
scaling unless the server runs with `SGLANG_RETURN_ORIGINAL_LOGPROB=1` (its `origin_logprobs` path), so
the serving image must set that variable; `burnqed serve` always returns the true ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any, Self, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

from burnqed.config import PolicyConfig
from burnqed.errors import PolicyError, PolicyUnavailableError
from burnqed.policy.base import Completion, Sampling

log = logging.getLogger(__name__)
T = TypeVar("T")

RETRY_STATUSES = frozenset({408, 429})  # plus every 5xx
MAX_BACKOFF_S = 30.0
HEALTH_POLL_TIMEOUT_S = 10.0  # SGLang's /health runs a one-token generation: allow it a few seconds


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _FinishReason(_Reply):
    type: str


class _MetaInfo(_Reply):
    finish_reason: _FinishReason | str | None = None
    output_token_logprobs: list[list[Any]] | None = None  # [logprob, token_id, text|null] per output token
    completion_tokens: int | None = None


class _GenerateItem(_Reply):
    text: str
    meta_info: _MetaInfo


class _EncodeItem(_Reply):
    embedding: list[float]


def _items(data: Any, expected: int, what: str) -> list[Any]:
    # SGLang answers a bare object when the request is not a batch; accept it wherever one result is due.
    items = [data] if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ValueError(f"expected a JSON list of {what}, got {type(data).__name__}")
    if len(items) != expected:
        raise ValueError(f"expected {expected} {what}, got {len(items)}")
    return items


def _finish(reason: _FinishReason | str | None) -> str:
    raw = (reason.type if isinstance(reason, _FinishReason) else reason or "stop").lower()
    # Old builds sent strings such as "FINISH_LENGTH: 128"; null means finished without a recorded reason.
    for known in ("length", "abort"):
        if known in raw:
            return known
    return "stop"


def parse_generate_reply(data: Any, n_prompts: int, n: int) -> list[list[Completion]]:
    """A `/generate` reply → `n` completions per prompt. Raises `ValueError` on a wrong shape or length.

    The flat list is prompt-major: prompt i's samples are items[i*n : (i+1)*n]. Source: SGLang's
    `TokenizerManager._handle_batch_request` (sgl-project/sglang, python/sglang/srt/managers/
    tokenizer_manager.py) expands a batch with `for i in range(batch_size): for _ in
    range(parallel_sample_num): ...` and returns `asyncio.gather` over the generators in that order.
    """
    items = [_GenerateItem.model_validate(item) for item in _items(data, n_prompts * n, "completions")]
    completions = []
    for item in items:
        meta = item.meta_info
        if meta.output_token_logprobs is None:
            raise ValueError("a completion has no meta_info.output_token_logprobs (was return_logprob ignored?)")
        logprob = 0.0
        for entry in meta.output_token_logprobs:
            value = entry[0] if entry else None
            if value is None:  # SGLang leaves None where no log-prob was computed
                continue
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise ValueError(f"a token log-prob is not a number: {value!r}")
            logprob += float(value)
        completions.append(Completion(item.text, logprob, len(meta.output_token_logprobs), _finish(meta.finish_reason)))
    return [completions[i * n : (i + 1) * n] for i in range(n_prompts)]


def parse_encode_reply(data: Any, n_texts: int) -> list[list[float]]:
    """An `/encode` reply (`[{"embedding": [...], "meta_info": {...}}, ...]`, or one bare object) → vectors."""
    return [_EncodeItem.model_validate(item).embedding for item in _items(data, n_texts, "embeddings")]


class BreakerState(Enum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"


class CircuitBreaker:
    """Counts consecutive failed requests; see `SGLangClient` for the states. `clock` is injectable for tests."""

    def __init__(self, failures: int, reset_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.threshold = failures
        self.reset_s = reset_s
        self.clock = clock
        self.failures = 0
        self.opened_at: float | None = None
        self.trial_in_flight = False

    def state(self) -> BreakerState:
        if self.opened_at is None:
            return BreakerState.CLOSED
        if self.clock() - self.opened_at < self.reset_s:
            return BreakerState.OPEN
        return BreakerState.HALF_OPEN

    def retry_in_s(self) -> float:
        """Seconds until the open breaker lets a trial through (0 when not open)."""
        return 0.0 if self.opened_at is None else max(0.0, self.opened_at + self.reset_s - self.clock())

    def admit(self) -> bool | None:
        """May a request go? None = no (fail fast); False = yes; True = yes, as the half-open trial."""
        state = self.state()
        if state is BreakerState.CLOSED:
            return False
        if state is BreakerState.HALF_OPEN and not self.trial_in_flight:
            self.trial_in_flight = True
            return True
        return None

    def success(self, trial: bool) -> None:
        # Any answer proves the server is back, even one from a request sent before the breaker opened.
        self.failures, self.opened_at, self.trial_in_flight = 0, None, False

    def failure(self, trial: bool) -> bool:
        """Record a failed request; True when this opened (or re-opened) the breaker."""
        if trial:
            self.opened_at, self.trial_in_flight = self.clock(), False
            return True
        self.failures += 1
        if self.opened_at is None and self.failures >= self.threshold:
            self.opened_at = self.clock()
            return True
        return False

    def abandon(self, trial: bool) -> None:
        """The request ended without a verdict (cancelled): let the next call be the trial."""
        if trial:
            self.trial_in_flight = False


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
    seconds: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


class _Retryable(Exception):
    """An attempt failed in a way another attempt may fix."""


class _ClientError(PolicyError):
    """A 4xx answer: our request is wrong; the server is up (not counted by the breaker)."""


class SGLangClient:
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
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url.rstrip("/")
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
    def from_config(cls, cfg: PolicyConfig) -> SGLangClient:
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
        )

    @property
    def name(self) -> str:
        return self._name

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def wait_ready(self) -> None:
        """Poll `GET /health` until it answers 200 (503 while warming up, refused while starting)."""
        deadline = time.monotonic() + self.ready_timeout_s
        last = "no answer yet"
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PolicyUnavailableError(
                    f"policy server {self.url} not ready after {self.ready_timeout_s:g} s (last /health: {last}); "
                    "check that it is running and that policy.url points at it, or raise policy.ready_timeout_s"
                )
            poll_timeout = min(remaining, HEALTH_POLL_TIMEOUT_S)
            try:
                reply = await self._http.get("/health", timeout=poll_timeout)
                if reply.status_code == 200:
                    return
                last = f"HTTP {reply.status_code}"
            except httpx.TimeoutException as exc:
                if poll_timeout == HEALTH_POLL_TIMEOUT_S or last == "no answer yet":  # else: cut short by the deadline
                    last = _describe(exc)
            except httpx.HTTPError as exc:
                last = _describe(exc)
            await asyncio.sleep(min(self.ready_poll_s, max(0.0, deadline - time.monotonic())))

    async def generate(self, prompts: Sequence[str], sampling: Sampling) -> list[list[Completion]]:
        """`sampling.n` completions per prompt (prompt order), from one `POST /generate`."""
        if sampling.n < 1:
            raise ValueError(f"sampling.n must be >= 1, got {sampling.n}")
        if not prompts:
            return []
        # `Sampling` maps one to one onto SGLang's sampling_params (see base.py).
        params = {**asdict(sampling), "stop": list(sampling.stop)}
        body = {"text": list(prompts), "sampling_params": params, "return_logprob": True}
        result = await self._call("/generate", body, lambda data: parse_generate_reply(data, len(prompts), sampling.n))
        self.stats.prompts += len(prompts)
        self.stats.completions += len(prompts) * sampling.n
        return result

    async def encode(self, texts: Sequence[str]) -> list[list[float]]:
        """One embedding per text, from one `POST /encode` (server started with `--is-embedding`)."""
        if not texts:
            return []
        result = await self._call("/encode", {"text": list(texts)}, lambda data: parse_encode_reply(data, len(texts)))
        self.stats.encoded += len(texts)
        return result

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
                    f"not retried): {_clip(str(exc))}"
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
            hint = " (is the server started with --is-embedding?)" if endpoint == "/encode" and status == 404 else ""
            raise _ClientError(
                f"policy server {self.url}: POST {endpoint} rejected with HTTP {status}: {_server_message(reply)}{hint}"
            )
        try:
            return reply.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # a body cut short: treat like a dropped line
            raise _Retryable(f"HTTP {status} with a body that is not JSON: {exc}") from exc


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _clip(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


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
                    return _clip(str(value))
    return _clip(reply.text.strip()) or reply.reason_phrase

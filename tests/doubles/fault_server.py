"""A fault-injecting fake of SGLang's native HTTP API, served from a thread (stdlib `ThreadingHTTPServer`).

    with FaultServer() as server:
        server.script("/generate", status(503), delay(1.0), drop())   # the next three requests misbehave
        ... SGLangClient(server.url) ...
        assert len(server.received("/generate")) == 4

Endpoints: `GET /health` (200, empty body), `POST /generate` and `POST /encode`; with `context_length` also
`POST /tokenize` and `GET /v1/models`, and /generate then refuses, like SGLang 0.5.6, the WHOLE batch with a
400 naming the first prompt whose tokens (plus max_new_tokens, when set) reach the context length; a text's
tokens are `fake_tokens(text)` (one per character plus BOS). Replies are deterministic:
completion j of prompt i is `tactic {i}.{j}` in four tokens (`fake_pieces`) with `fake_logprobs(i, j)` as their
log-probs, and the flat reply list is prompt-major like SGLang's. Every request is recorded before its fault is
applied. Each path has a queue of scripted faults, consumed one per request; an empty queue means a normal answer.

Sampling parameters are checked as SGLang 0.5.23 checks them, with its wording (`sampling_problem`): its API
contract first (`sglang/api/v1/api_types.py`: an unknown field of `sampling_params` or a value of the wrong JSON
type is a 400 whose `error` is serde's text, e.g. "unknown field `top_kk`, expected one of `max_new_tokens`, …"),
then `SamplingParams.__post_init__` (null is the default; temperature 0 becomes top_k 1) and `verify` (a 400
`{"error": {"message": …}}`: temperature, top_p, min_p, top_k, the three penalties, min/max_new_tokens, the
seed's range). With `deterministic=True` it plays a server started with `--enable-deterministic-inference`:
there a request with min_p > 0 fails the seeded sampler's assertion and takes the server down, so that request
and every later one is dropped without an answer. Sampling parameters are honoured where it is cheap: temperature 0
(or top_k 1) is greedy (every sample is sample 0); `max_new_tokens` cuts a completion and reports `{"type":
"length", "length": N}`, checked before stop strings; a stop string inside a completion ends it there, cut before
the string, and is reported as `matched`. An even sample ends by itself after four tokens (`matched`: the
request's first stop string, else the EOS id).

More lenient than SGLang, and why: an odd sample ends "by length" after its four tokens whatever max_new_tokens
is (a real one runs on to max_new_tokens; fixed short texts keep the client tests readable); valid top_k, min_p,
penalties and seeds change nothing in the fixed completions (the client's request bodies are what the tests
check, `server.received`); `/encode` is answered even though a generation server refuses it (the encoder tests
need one server for both); the log-probs do not depend on the temperature.
With `completions` (a function of the prompt text) every sample of a prompt is that text, one token (log-prob -0.5),
cut by max_new_tokens and stop strings as above: a command run end to end gets the completions its test writes.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, Self

FaultKind = Literal["ok", "status", "delay", "drop", "malformed", "truncated", "wrong_count"]


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    status: int = 500
    seconds: float = 0.0
    message: str | None = None  # a status fault's error message (default "injected <code>")


def ok() -> Fault:
    return Fault("ok")


def status(code: int, message: str | None = None) -> Fault:
    """Answer HTTP `code` with SGLang's error body `{"error": {"message": ...}}`: `message`, else "injected <code>"."""
    return Fault("status", status=code, message=message)


def delay(seconds: float) -> Fault:
    """Stall `seconds` (longer than the client timeout to provoke one), then answer normally."""
    return Fault("delay", seconds=seconds)


def drop() -> Fault:
    """Read the request, then close the connection without any response."""
    return Fault("drop")


def malformed() -> Fault:
    """A complete 200 response whose body is not JSON."""
    return Fault("malformed")


def truncated() -> Fault:
    """A 200 response announcing the full Content-Length but cut off half-way (then the socket closes)."""
    return Fault("truncated")


def wrong_count() -> Fault:
    """A well-formed reply with one result too few."""
    return Fault("wrong_count")


EOS_ID = 2  # the token id a completion that stops without a stop string reports as `matched`


def fake_pieces(prompt: int, sample: int) -> list[str]:
    """The tokens of completion `sample` of prompt `prompt`: `tactic {prompt}.{sample}` in four pieces."""
    return ["tactic", " ", str(prompt), f".{sample}"]


def fake_logprobs(prompt: int, sample: int) -> list[float | None]:
    """Token log-probs of completion `sample` of prompt `prompt` (None: a position without a log-prob)."""
    return [-0.5, None, -0.25 * (sample + 1), -0.125 * (prompt + 1)]


def fake_tokens(text: str) -> int:
    """The fake tokenizer's count: one token per character, plus BOS (never more than the UTF-8 bytes + 1)."""
    return len(text) + 1


def fake_ids(text: str) -> list[int]:
    """The fake tokenizer's ids: BOS (1), then one id per character (its code point); `fake_tokens` of them."""
    return [1, *map(ord, text)]


def fake_embedding(text: str) -> list[float]:
    return [float(len(text)), float(sum(map(ord, text)) % 97), 1.0, -1.0]


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    body: Any


class FaultServer:
    """The fake server. `single_object=True` answers a bare object (not a list) whenever one result is due."""

    def __init__(self, *, port: int = 0, single_object: bool = False, context_length: int | None = None,
                 report_context: bool = True, deterministic: bool = False,
                 completions: Callable[[str], str] | None = None) -> None:
        self.single_object = single_object
        self.completions = completions  # prompt → the text every sample of it is (one token), instead of `tactic i.j`
        self.deterministic = deterministic  # --enable-deterministic-inference: min_p > 0 takes the server down
        self.crashed = False  # set once a request took the server down: every request is dropped from then on
        self.context_length = context_length
        self.report_context = report_context  # False: enforce the context but offer no /v1/models or /tokenize
        self.requests: list[Received] = []
        self.max_concurrent = 0
        self._concurrent = 0
        self._faults: dict[str, deque[Fault]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd = _Server(("127.0.0.1", port), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.02,), name="fault-server", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, path: str, *faults: Fault) -> None:
        """Queue faults for the next requests to `path` (in order, after those already queued)."""
        with self._lock:
            self._faults.setdefault(path, deque()).extend(faults)

    def unhealthy(self, polls: int) -> None:
        """`/health` answers 503 to the next `polls` polls (SGLang while warming up)."""
        self.script("/health", *[status(503)] * polls)

    def received(self, path: str) -> list[Received]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()  # wakes stalled handlers
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    # -- called from handler threads

    def _next_fault(self, path: str) -> Fault:
        with self._lock:
            queue = self._faults.get(path)
            return queue.popleft() if queue else ok()

    def _record(self, received: Received) -> None:
        with self._lock:
            self.requests.append(received)
            self._concurrent += 1
            self.max_concurrent = max(self.max_concurrent, self._concurrent)

    def _done(self) -> None:
        with self._lock:
            self._concurrent -= 1

    def _context_problem(self, path: str, body: Any) -> str | None:
        if self.context_length is None or path != "/generate":
            return None
        from burnqed.policy.base import context_problem  # SGLang's own wording

        texts = body["text"] if isinstance(body["text"], list) else [body["text"]]
        max_new = _params(body).get("max_new_tokens")
        for text in texts:
            problem = context_problem(fake_tokens(text), max_new, self.context_length)
            if problem is not None:
                return problem
        return None

    def _results(self, path: str, body: Any) -> list[dict[str, Any]]:
        texts = body["text"] if isinstance(body["text"], list) else [body["text"]]
        if path == "/encode":
            return [{"embedding": fake_embedding(t), "meta_info": {"prompt_tokens": len(t)}} for t in texts]
        params = _params(body)
        n = int(params.get("n") or 1)
        greedy = params.get("temperature") == 0 or params.get("top_k") == 1
        max_new = params.get("max_new_tokens")
        stops = params.get("stop") or []
        stops = [stops] if isinstance(stops, str) else list(stops)
        results = []
        for i in range(len(texts)):  # prompt-major, as SGLang's TokenizerManager._handle_batch_request
            for j in range(n):
                sample = 0 if greedy else j  # temperature 0 is greedy: every sample is the first
                pieces, logprobs = (([self.completions(texts[i])], [-0.5]) if self.completions is not None
                                    else (fake_pieces(i, sample), fake_logprobs(i, sample)))
                finish: dict[str, Any] = (
                    {"type": "stop", "matched": stops[0] if stops else EOS_ID} if sample % 2 == 0
                    else {"type": "length", "length": len(pieces)}
                )
                text, tokens = "".join(pieces), len(pieces)
                if max_new == 0:
                    text, tokens, finish = "", 0, {"type": "length", "length": 0}
                for k in range(len(pieces) if max_new != 0 else 0):
                    seen = "".join(pieces[: k + 1])
                    if k + 1 == max_new:  # length is checked before stop strings (and EOS): the stop string stays
                        text, tokens, finish = seen, k + 1, {"type": "length", "length": max_new}
                        break
                    if hit := next((stop for stop in stops if stop in seen), None):
                        text, tokens, finish = seen[: seen.index(hit)], k + 1, {"type": "stop", "matched": hit}
                        break
                results.append(
                    {
                        "text": text,
                        "meta_info": {
                            "finish_reason": finish,
                            "completion_tokens": tokens,
                            "output_token_logprobs": [[lp, 100 + k, None] for k, lp in enumerate(logprobs[:tokens])],
                        },
                    }
                )
        return results


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stalled handler must not block server_close
    owner: FaultServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that time out or cancel leave broken pipes behind: expected here


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like uvicorn: exercises the client's connection pool
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve(None)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        self._serve(body)

    def _serve(self, body: Any) -> None:
        owner = self.server.owner
        path = self.path
        owner._record(Received(self.command, path, body))
        try:
            self._answer(owner, path, body)
        finally:
            owner._done()

    def _answer(self, owner: FaultServer, path: str, body: Any) -> None:
        endpoints = {("GET", "/health"), ("POST", "/generate"), ("POST", "/encode")}
        if owner.context_length is not None and owner.report_context:
            endpoints |= {("POST", "/tokenize"), ("GET", "/v1/models")}
        if (self.command, path) not in endpoints:
            self._send(404, {"detail": "Not Found"})
            return
        if owner.crashed:
            self.close_connection = True
            return
        fault = owner._next_fault(path)
        if fault.kind == "status":
            self._send(fault.status, {"error": {"message": fault.message or f"injected {fault.status}"}})
            return
        if fault.kind == "drop":
            self.close_connection = True
            return
        if fault.kind == "delay" and owner._stop.wait(fault.seconds):
            return  # shutting down
        if path in ("/health", "/v1/models", "/tokenize"):
            self._answer_info(owner, path, body)
            return
        self._answer_model(owner, path, body, fault)

    def _answer_info(self, owner: FaultServer, path: str, body: Any) -> None:
        """The endpoints that do not run the model: health, the model list, tokenization."""
        if path == "/health":
            self._send(200, None)
        elif path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": "fake", "max_model_len": owner.context_length}]})
        else:  # /tokenize
            prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
            ids = [fake_ids(p) for p in prompts]
            single = not isinstance(body["prompt"], list)  # SGLang: a string's reply holds flat lists
            counts = [len(one) for one in ids]
            self._send(200, {"tokens": ids[0] if single else ids, "count": counts[0] if single else counts,
                             "max_model_len": -1})

    def _answer_model(self, owner: FaultServer, path: str, body: Any, fault: Fault) -> None:
        """/generate and /encode: the body checked, then the results, damaged as `fault` says."""
        if not isinstance(body, dict) or "text" not in body:
            self._send(400, {"error": {"message": "body must be a JSON object with 'text'"}})
            return
        if path == "/generate":
            contract = sampling_contract_problem(body.get("sampling_params"))
            if contract is not None:  # the contract gate's body: the error is a string
                self._send(400, {"error": contract})
                return
            if owner.deterministic and any((p.get("min_p") or 0) > 0 for p in _all_params(body)):
                owner.crashed = True  # the scheduler's AssertionError: SGLang's processes exit, no answer comes
                self.close_connection = True
                return
        problem = sampling_problem(body) if path == "/generate" else None
        problem = problem or owner._context_problem(path, body)
        if problem is not None:
            self._send(400, {"error": {"message": problem}})
            return
        results = owner._results(path, body)
        if fault.kind == "wrong_count":
            results = results[:-1]
        reply: Any = results[0] if owner.single_object and len(results) == 1 else results
        if fault.kind == "malformed":
            self._send(200, None, raw=b'{"text": "tactic 0.0", "meta_info": ')
        elif fault.kind == "truncated":
            data = json.dumps(reply).encode()
            self._send(200, None, raw=data[: len(data) // 2], length=len(data))
            self.close_connection = True
        else:
            self._send(200, reply)

    def _send(self, code: int, obj: Any, *, raw: bytes | None = None, length: int | None = None) -> None:
        data = raw if raw is not None else (b"" if obj is None else json.dumps(obj).encode())
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data) if length is None else length))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def wait_until(predicate: Any, timeout: float = 2.0) -> bool:
    """Poll `predicate()` until true (for assertions on what the server thread saw)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return bool(predicate())


def _params(body: Any) -> dict[str, Any]:
    """The request's sampling parameters: the object, or the first of a per-text list (SGLang requires one `n` for
    the whole list, `GenerateReqInput._handle_parallel_sampling`; refused here when they differ, or when the
    list's length is not the number of texts)."""
    params = body.get("sampling_params") or {}
    if isinstance(params, dict):
        return params
    texts = body["text"] if isinstance(body["text"], list) else [body["text"]]
    if len(params) != len(texts) or len({p.get("n", 1) for p in params}) != 1:
        raise ValueError("sampling_params: one object per text, all with the same n")
    first: dict[str, Any] = params[0]
    return first


def _all_params(body: Any) -> list[dict[str, Any]]:
    """Every `sampling_params` object of a request (a list holds one per text)."""
    params = body.get("sampling_params") or {}
    return [params] if isinstance(params, dict) else [p for p in params if isinstance(p, dict)]


# SGLang 0.5.23's API contract for sampling_params (sglang/api/v1/api_types.py, decode_SamplingParams): the fields
# in its order, by JSON type.
INT_FIELDS = ("max_new_tokens", "top_k", "min_new_tokens", "n", "stream_interval", "sampling_seed", "beam_width")
FLOAT_FIELDS = ("temperature", "top_p", "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty")
BOOL_FIELDS = ("ignore_eos", "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim")
STRING_FIELDS = ("json_schema", "regex", "ebnf", "structural_tag")  # the grammars: _expect_str
CONTRACT_FIELDS = ("max_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p", "top_k", "min_p",
                   "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens", "n", "json_schema",
                   "regex", "ebnf", "structural_tag", "ignore_eos", "skip_special_tokens",
                   "spaces_between_special_tokens", "no_stop_trim", "stream_interval", "logit_bias", "sampling_seed",
                   "custom_params", "beam_width", "watermark", "choice")


def _unexpected(value: Any) -> str:
    """serde's display of a JSON value in a type error (api_types._unexpected)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{'true' if value else 'false'}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value}`"
    if isinstance(value, str):
        return f'string "{value}"'
    return "sequence" if isinstance(value, list) else "map"


def sampling_contract_problem(params: Any) -> str | None:
    """SGLang 0.5.23's contract gate on `sampling_params` (null, an object or a list of objects): serde's text for
    the first unknown field or value of the wrong type, else None."""
    if params is None:
        return None
    objects = params if isinstance(params, list) else [params]
    for obj in objects:
        if not isinstance(obj, dict):
            return f"invalid type: {_unexpected(obj)}, expected struct SamplingParams"
        for key, value in obj.items():
            if key not in CONTRACT_FIELDS:
                listed = ", ".join(f"`{field}`" for field in CONTRACT_FIELDS)
                return f"unknown field `{key}`, expected one of {listed}"
            if value is None:
                continue
            if key in INT_FIELDS and (isinstance(value, bool) or not isinstance(value, int)):
                return f"invalid type: {_unexpected(value)}, expected i64"
            if key in FLOAT_FIELDS and (isinstance(value, bool) or not isinstance(value, (int, float))):
                return f"invalid type: {_unexpected(value)}, expected f64"
            if key in BOOL_FIELDS and not isinstance(value, bool):
                return f"invalid type: {_unexpected(value)}, expected a boolean"
            if key in STRING_FIELDS and not isinstance(value, str):
                return f"invalid type: {_unexpected(value)}, expected a string"
            if key == "stop" and not (isinstance(value, str) or (
                    isinstance(value, list) and all(isinstance(item, str) for item in value))):
                return f"invalid type: {_unexpected(value)}, expected a string or a sequence of strings"
    return None


def sampling_problem(body: Any) -> str | None:
    """SGLang 0.5.23's `SamplingParams.__post_init__` and `verify` on each sampling_params object of a request
    (after the contract), in its wording (a 400 `{"error": {"message": …}}` there too), else None."""
    for params in _all_params(body):
        def get(key: str, default: Any, params: dict[str, Any] = params) -> Any:
            value = params.get(key)
            return default if value is None else value

        temperature, top_k = float(get("temperature", 1.0)), int(get("top_k", -1))
        if 0 <= temperature < 1e-6:  # greedy: SGLang samples it as top_k 1
            temperature, top_k = 1.0, 1
        top_p, min_p = float(get("top_p", 1.0)), float(get("min_p", 0.0))
        frequency, presence = float(get("frequency_penalty", 0.0)), float(get("presence_penalty", 0.0))
        repetition = float(get("repetition_penalty", 1.0))
        min_new, max_new = int(get("min_new_tokens", 0)), params.get("max_new_tokens", 128)
        seed = params.get("sampling_seed")
        checks = [
            (math.isfinite(temperature) and temperature >= 0,
             f"temperature must be a non-negative finite number, got {temperature}."),
            (0.0 < top_p <= 1.0, f"top_p must be in (0, 1], got {top_p}."),
            (0.0 <= min_p <= 1.0, f"min_p must be in [0, 1], got {min_p}."),
            (top_k == -1 or top_k >= 1, f"top_k must be -1 (disable) or at least 1, got {top_k}."),
            (-2.0 <= frequency <= 2.0, f"frequency_penalty must be in [-2, 2], got {frequency}."),
            (-2.0 <= presence <= 2.0, f"presence_penalty must be in [-2, 2], got {presence}."),
            (0.0 < repetition <= 2.0, f"repetition_penalty must be in (0, 2] (1.0 = no penalty), got {repetition}."),
            (min_new >= 0, f"min_new_tokens must be in [0, max_new_tokens], got {min_new}."),
            (max_new is None or max_new >= 0, f"max_new_tokens must be at least 0, got {max_new}."),
            (max_new is None or min_new <= max_new,
             f"min_new_tokens must be in [0, max_new_tokens({max_new})], got {min_new}."),
            (seed is None or -(2**63) <= seed <= 2**63 - 1,
             f"sampling_seed must be in [-2**63, 2**63 - 1], got {seed}."),
        ]
        problem = next((message for ok, message in checks if not ok), None)
        if problem is not None:
            return problem
    return None

"""`burnqed serve`: SGLang's native HTTP API on an in-process model, so a client cannot tell the two apart.

    burnqed serve [--model DIR] [--host 127.0.0.1] [--port 30000]     # --port 0 picks a free port
    burnqed serve --encode-only --model /models/policy --port 30001 --memory-gib 17   # the value model's encoder

Prints `serving MODEL on http://HOST:PORT` on stderr once the port is bound, then loads the model in a
background thread (`/health` answers 503 until it is loaded). SIGTERM/SIGINT stop it cleanly (exit 0).
Standard library HTTP (ThreadingHTTPServer); model calls are serialized by `LocalModel`'s lock.

Endpoints and reply shapes, checked against SGLang's source (sgl-project/sglang):
- `POST /generate` {"text": str | [str], "sampling_params": {n, temperature, top_p, max_new_tokens, stop,
  sampling_seed} | [one such object per text], "return_logprob": bool}.
  `io_struct.GenerateReqInput._handle_parallel_sampling` turns a single text
  with n > 1 into a batch, so the reply is one object only for one text with n = 1; otherwise
  `tokenizer_manager._handle_batch_request` sends `for i in range(batch_size): for _ in
  range(parallel_sample_num)`, i.e. a flat list, prompt-major: [p0s0, p0s1, …, p1s0, …]. Each item is
  {"text", "meta_info": {"id", "finish_reason", "prompt_tokens", "completion_tokens", …}}; finish_reason
  is `{"type": "stop", "matched": str | token id}` or `{"type": "length", "length": max_new_tokens}`
  (`schedule_batch.FINISH_*.to_json`); with return_logprob, `output_token_logprobs` holds
  `[logprob, token_id, None]` (text only with `return_text_in_logprobs`). Stop strings are trimmed.
  Difference: SGLang's logprobs are post-temperature unless SGLANG_RETURN_ORIGINAL_LOGPROB=1; ours are
  always the true (pre-temperature) ones, which is what the search scores with. Finish rules are SGLang
  0.5.6's (`Req.check_finished`): the length limit before EOS before stop strings (local.py); 0.5.23, the
  serving image's, checks stop strings and EOS first, so it never leaves an untrimmed stop string: stricter here.
  Stricter than SGLang: a top-level field it does not implement (`top_logprobs_num`, `logprob_start_len`,
  `lora_path`, ...) set to anything but its "off" value, and a field SGLang does not know, are a 400 instead
  of being ignored.
  Seeds: `sampling_params.sampling_seed` (an integer in [-2**63, 2**63), SGLang 0.5.23's
  `SamplingParams.verify`) seeds the request's sampling: a seeded prompt's samples depend on the prompt, the seed
  and the other sampling parameters only, never on the batch (`LocalModel`, seeded sampling). SGLang honours
  the field only when its server runs with `--enable-deterministic-inference` (`SamplingBatchInfo`; without
  it the seed is ignored); this server always honours it. As in SGLang, a seed given with n > 1 seeds every
  one of the n samples alike (`GenerateReqInput._normalize_sampling_params` copies the parameters to each
  sample and the seeded sampler keys its noise on seed and position only), so they come out identical: a
  client wanting n different seeded samples sends n copies of the prompt with n = 1 and a list of
  `sampling_params`, one per copy. A list must have one object per text; its objects may differ only in
  `sampling_seed`, which is set in all of them or in none (SGLang allows more: stricter here).
  Context: like SGLang (`TokenizerManager._validate_one_request`), a prompt of at least the context length,
  or one whose tokens plus `max_new_tokens` (when the request sets it) reach it, fails the WHOLE batch with a
  400 naming the first such prompt's counts; the context length is SGLang's (`local.context_length`).
- `POST /tokenize` {"prompt": str | [str], "add_special_tokens": true} → {"tokens", "count", "max_model_len"}
  (SGLang's OpenAI-style tokenizer endpoint; `max_model_len` there is the tokenizer's `model_max_length`).
- `GET /v1/models` → {"object": "list", "data": [{"id", …, "max_model_len": context length}]}.
- `POST /encode` {"text": str | [str]} → {"embedding": [float], "meta_info": {...}} per text, a single
  object for a string (`tokenizer_manager`, BatchEmbeddingOut branch). The vectors are burnqed's encoder's
  (`LocalModel.encode` with the `ebm` section's pooling, normalisation and token limits), NOT SGLang's
  --is-embedding ones (last token, L2-normalised): this is the value model's encoder. By default this server
  serves both /generate and /encode; `--encode-only` serves /encode alone (the cluster's GPU sidecar).
- `GET /encoder_info` (burnqed only) → {"backend": "burnqed", "model", "digest" (the loaded folder's
  fingerprint), "spec": {pooling, normalize, layer, max_tokens, dtype}}: the encoder identity's source.
- `GET /model_info` (and the deprecated `/get_model_info`) → {"model_path", "tokenizer_path", "is_generation",
  "preferred_sampling_params", "weight_version", "has_image_understanding", "has_audio_understanding"}.
- `GET /health` (503 until loaded), `GET /health_generate` (one greedy token). Errors:
  {"error": {"message": ...}} with 400 for a bad request (`_create_error_response`), 500 for a model failure.
"""

from __future__ import annotations

import errno
import json
import logging
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any

from burnqed.errors import BurnqedError, InputError
from burnqed.policy.base import Pooling, Sampling
from burnqed.policy.local import DEFAULT_BATCH_TOKENS, Generation, LocalModel, context_problem, resolve_device

logger = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 30000
MAX_BODY_BYTES = 64 * 1024 * 1024
MAX_N = 256

# SGLang sampling parameters this server does not implement, with the value that means "off": a client
# may send them at that value (SGLang's defaults), anything else is refused rather than ignored.
NEUTRAL_PARAMS: dict[str, Any] = {
    "top_k": -1,
    "min_p": 0.0,
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "repetition_penalty": 1.0,
    "min_new_tokens": 0,
    "ignore_eos": False,
    "skip_special_tokens": True,
    "spaces_between_special_tokens": True,
    "no_stop_trim": False,
    "stop_token_ids": None,
}
SUPPORTED_PARAMS = ("n", "temperature", "top_p", "max_new_tokens", "stop", "sampling_seed")
SEED_RANGE = (-(2**63), 2**63 - 1)  # SGLang 0.5.23's SamplingParams.verify

# The other top-level fields of SGLang 0.5.6's `GenerateReqInput` / `EmbeddingReqInput` (managers/io_struct.py)
# that this server does not implement, with the values that mean "off". SGLang ignores fields it does not know;
# this server refuses them (a typo must not pass silently) and refuses an unimplemented field set to anything
# but "off" (top_logprobs_num=5 must not come back without top log-probs).
NEUTRAL_FIELDS: dict[str, tuple[Any, ...]] = {
    "input_embeds": (None,),
    "image_data": (None,),
    "video_data": (None,),
    "audio_data": (None,),
    "logprob_start_len": (None, -1),
    "top_logprobs_num": (None, 0),
    "token_ids_logprob": (None,),
    "return_hidden_states": (False,),
    "modalities": (None,),
    "session_params": (None,),
    "lora_path": (None,),
    "lora_id": (None,),
    "custom_logit_processor": (None,),
    "bootstrap_host": (None,),
    "bootstrap_port": (None,),
    "bootstrap_room": (None,),
    "bootstrap_pair_key": (None,),
    "data_parallel_rank": (None,),
    "background": (False,),
    "return_bytes": (False,),
    "return_entropy": (False,),
    "dimensions": (None,),
    "is_cross_encoder_request": (False,),
}
# Fields that change nothing in the reply (bookkeeping and scheduling hints): accepted and ignored.
NO_EFFECT_FIELDS = frozenset({"rid", "log_metrics", "no_logs", "custom_labels", "validation_time", "priority",
                              "conversation_id", "extra_key", "trace_context"})
GENERATE_FIELDS = frozenset({"text", "input_ids", "sampling_params", "return_logprob", "return_text_in_logprobs",
                             "stream"})
ENCODE_FIELDS = frozenset({"text", "input_ids", "sampling_params"})


@dataclass(frozen=True, slots=True)
class EncodeSettings:
    """How /encode embeds (`LocalModel.encode`'s settings; from the `ebm` config section in `burnqed serve`)."""

    pooling: Pooling = "mean"
    normalize: bool = False
    max_tokens: int | None = None
    batch_tokens: int = DEFAULT_BATCH_TOKENS


class RequestError(ValueError):
    """A request this server cannot accept: answered 400 with the message."""


@dataclass(frozen=True, slots=True)
class GenerateRequest:
    texts: list[str]
    single: bool  # one text with n = 1: the reply is one object, not a list
    sampling: Sampling
    return_logprob: bool
    return_text_in_logprobs: bool
    max_new_tokens_given: bool  # SGLang checks prompt + max_new_tokens against the context only when it is set
    seeds: list[list[int]] | None = None  # per text, one seed per sample (sampling_seed); None: unseeded


# ------------------------------------------------------------------------------- request parsing


def _texts(body: Any, endpoint: str, implemented: frozenset[str]) -> tuple[list[str], bool]:
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    for key, value in body.items():
        if key in implemented or key in NO_EFFECT_FIELDS:
            continue
        if key in NEUTRAL_FIELDS:
            if value in NEUTRAL_FIELDS[key]:
                continue
            raise RequestError(
                f"{key}={value!r} is not supported by burnqed serve (it does not implement {key}); leave it out "
                f"or send {' or '.join(json.dumps(v) for v in NEUTRAL_FIELDS[key])}"
            )
        raise RequestError(f"unknown field {key!r}: not part of SGLang's {endpoint} request")
    if body.get("input_ids") is not None:
        raise RequestError("input_ids is not supported by burnqed serve; send text")
    text = body.get("text")
    if isinstance(text, str):
        return [text], True
    if isinstance(text, list) and text and all(isinstance(t, str) for t in text):
        return list(text), False
    raise RequestError("text must be a string or a non-empty list of strings")


def _number(params: dict[str, Any], key: str, default: float, low: float, high: float, *, integer: bool,
            low_open: bool = False) -> Any:
    value = params.get(key, default)
    if value is None:
        value = default
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise RequestError(f"sampling_params.{key} must be {'an integer' if integer else 'a number'}, got {value!r}")
    if value < low or value > high or (low_open and value == low):
        bound = f"({low}, {high}]" if low_open else f"[{low}, {high}]"
        raise RequestError(f"sampling_params.{key} must be in {bound}, got {value!r}")
    return value


def parse_generate(body: Any) -> GenerateRequest:
    """Validate a /generate body. Raises `RequestError` naming the bad field."""
    texts, single = _texts(body, "/generate", GENERATE_FIELDS)
    if body.get("stream"):
        raise RequestError("stream is not supported by burnqed serve")
    raw = body.get("sampling_params")
    raw = {} if raw is None else raw
    if isinstance(raw, dict):
        sampling, given, seed = _sampling(raw)
        seeds = None if seed is None else [[seed] * sampling.n for _ in texts]
    elif isinstance(raw, list) and raw and all(isinstance(p, dict) for p in raw):
        if single or len(raw) != len(texts):
            raise RequestError(f"sampling_params is a list of {len(raw)} objects for "
                               f"{'one text' if single else f'{len(texts)} texts'}: send one object per text")
        parsed = [_sampling(params) for params in raw]
        sampling, given, seed = parsed[0]
        if any((other, other_given) != (sampling, given) for other, other_given, _ in parsed[1:]):
            raise RequestError("the sampling_params of a list may differ only in sampling_seed (burnqed serve)")
        if any((other_seed is None) != (seed is None) for _, _, other_seed in parsed):
            raise RequestError("sampling_seed must be set in every sampling_params of a list or in none")
        seeds = None if seed is None else [[s] * sampling.n for _, _, s in parsed if s is not None]
    else:
        raise RequestError("sampling_params must be an object or a non-empty list of objects (one per text)")
    flags = {}
    for key in ("return_logprob", "return_text_in_logprobs"):
        value = body.get(key, False)
        if not isinstance(value, bool):
            raise RequestError(f"{key} must be true or false, got {value!r}")
        flags[key] = value
    return GenerateRequest(texts, single and sampling.n == 1, sampling, flags["return_logprob"],
                           flags["return_text_in_logprobs"], given, seeds)


def _sampling(params: dict[str, Any]) -> tuple[Sampling, bool, int | None]:
    """One `sampling_params` object: (the sampling, whether max_new_tokens was given, sampling_seed or None)."""
    for key, value in params.items():
        if key in SUPPORTED_PARAMS:
            continue
        if key in NEUTRAL_PARAMS and value in (NEUTRAL_PARAMS[key], None, []):
            continue
        raise RequestError(
            f"sampling_params.{key}={value!r} is not supported by burnqed serve "
            f"(supported: {', '.join(SUPPORTED_PARAMS)})"
        )
    stop = params.get("stop")
    if stop is None:
        stops: tuple[str, ...] = ()
    elif isinstance(stop, str):
        stops = (stop,)
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        stops = tuple(stop)
    else:
        raise RequestError(f"sampling_params.stop must be a string or a list of strings, got {stop!r}")
    n = _number(params, "n", 1, 1, MAX_N, integer=True)
    sampling = Sampling(
        n=n,
        temperature=float(_number(params, "temperature", 1.0, 0.0, 100.0, integer=False)),
        top_p=float(_number(params, "top_p", 1.0, 0.0, 1.0, integer=False, low_open=True)),
        max_new_tokens=_number(params, "max_new_tokens", 128, 1, 1_000_000, integer=True),
        stop=stops,
    )
    seed = params.get("sampling_seed")
    if seed is not None:
        # SGLang takes any int (bools included, being ints in Python) in range; a bool is refused here.
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise RequestError(f"sampling_params.sampling_seed must be an integer, got {seed!r}")
        if not SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
            raise RequestError(f"sampling_params.sampling_seed must be in [-2**63, 2**63 - 1], got {seed}")
    return sampling, params.get("max_new_tokens") is not None, seed


def parse_tokenize(body: Any) -> tuple[list[str], bool, bool]:
    """Validate a /tokenize body (SGLang's `TokenizeRequest`): (prompts, single, add_special_tokens)."""
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    unknown = sorted(set(body) - {"prompt", "add_special_tokens", "model"})
    if unknown:
        raise RequestError(f"unknown field {unknown[0]!r}: not part of SGLang's /tokenize request")
    special = body.get("add_special_tokens", True)
    if not isinstance(special, bool):
        raise RequestError(f"add_special_tokens must be true or false, got {special!r}")
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return [prompt], True, special
    if isinstance(prompt, list) and all(isinstance(p, str) for p in prompt):
        return list(prompt), False, special
    raise RequestError("prompt must be a string or a list of strings")


def check_context(model: LocalModel, request: GenerateRequest) -> None:
    """SGLang's context check of a /generate batch: the first prompt that does not fit fails the WHOLE request
    with a 400 (`TokenizerManager` validates each prompt while tokenizing the batch and raises on the first)."""
    max_new = request.sampling.max_new_tokens if request.max_new_tokens_given else None
    for count in model.count_tokens(request.texts):
        problem = context_problem(count, max_new, model.context_length)
        if problem is not None:
            raise RequestError(problem)


def parse_encode(body: Any) -> tuple[list[str], bool]:
    """Validate an /encode body: (texts, single). Sampling parameters mean nothing to an encoder; SGLang
    accepts and ignores them, so do we."""
    return _texts(body, "/encode", ENCODE_FIELDS)


# --------------------------------------------------------------------------------------- replies


def generation_item(gen: Generation, request: GenerateRequest, latency: float,
                    decode: Callable[[int], str] | None = None) -> dict[str, Any]:
    """One /generate reply object, shaped like SGLang's."""
    if gen.finish_reason == "stop":
        finish: dict[str, Any] = {"type": "stop", "matched": gen.matched}
    else:
        finish = {"type": "length", "length": request.sampling.max_new_tokens}
    meta: dict[str, Any] = {
        "id": uuid.uuid4().hex,
        "finish_reason": finish,
        "prompt_tokens": gen.prompt_tokens,
        "completion_tokens": len(gen.token_ids),
        "cached_tokens": 0,
        "e2e_latency": latency,
    }
    if request.return_logprob:
        meta["input_token_logprobs"] = []
        meta["output_token_logprobs"] = [
            [logprob, token, decode(token) if decode is not None and request.return_text_in_logprobs else None]
            for logprob, token in zip(gen.token_logprobs, gen.token_ids, strict=True)
        ]
    return {"text": gen.text, "output_ids": list(gen.token_ids), "meta_info": meta}


def generate_reply(request: GenerateRequest, groups: list[list[Generation]], latency: float,
                   decode: Callable[[int], str] | None = None) -> Any:
    """The whole /generate reply: prompt-major flat list, or one object (see the module docstring)."""
    items = [generation_item(gen, request, latency, decode) for group in groups for gen in group]
    return items[0] if request.single else items


def encode_reply(vectors: list[list[float]], prompt_tokens: list[int], single: bool) -> Any:
    items = [
        {"embedding": vector, "meta_info": {"id": uuid.uuid4().hex, "prompt_tokens": count}}
        for vector, count in zip(vectors, prompt_tokens, strict=True)
    ]
    return items[0] if single else items


# ---------------------------------------------------------------------------------------- server


class ModelServer(ThreadingHTTPServer):
    """The HTTP server. Binds in the constructor; `start_loading()` loads the model in the background."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, load: Callable[[], LocalModel], host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                 name: str = "model", *, encode: EncodeSettings | None = None, encode_only: bool = False) -> None:
        if ":" in host:  # an IPv6 literal such as "::"
            self.address_family = socket.AF_INET6
        self.model: LocalModel | None = None  # before binding: a failed bind calls server_close()
        try:
            super().__init__((host, port), _Handler)
        except OSError as exc:
            raise InputError(_bind_error(host, port, exc)) from None
        self.load = load
        self.name = name
        self.encode = encode or EncodeSettings()
        self.encode_only = encode_only
        self.digest: str | None = None  # the loaded folder's fingerprint (GET /encoder_info)
        self.load_error: BaseException | None = None
        self.ready = threading.Event()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        shown = f"[{host!s}]" if self.address_family == socket.AF_INET6 else str(host)
        return f"http://{shown}:{port}"

    def start_loading(self, *, stop_on_failure: bool = True) -> threading.Thread:
        thread = threading.Thread(target=self._load, args=(stop_on_failure,), name="model-loader", daemon=True)
        thread.start()
        return thread

    def _load(self, stop_on_failure: bool) -> None:
        from burnqed.ebm.identity import folder_fingerprint

        try:
            model = self.load()
            self.digest = folder_fingerprint(str(model.path))  # what this server really serves, by content
            self.model = model
        except BaseException as exc:  # reported by the main thread; a server without its model is useless
            self.load_error = exc
            if stop_on_failure:
                self.shutdown()
            return
        finally:
            self.ready.set()

    def server_close(self) -> None:
        super().server_close()
        if self.model is not None:
            self.model.close()
            self.model = None


def _bind_error(host: str, port: int, exc: OSError) -> str:
    """One line for a failed bind: the address, what went wrong and the fix."""
    where = f"{host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return f"cannot serve on {where}: the port is in use by another process: choose another --port (0 = any free)"
    if exc.errno == errno.EACCES:
        return (f"cannot serve on {where}: permission denied (ports below 1024 need privileges): choose --port 1024 "
                "or above")
    if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) or isinstance(exc, socket.gaierror):
        return f"cannot serve on {where}: --host {host} is not an address of this machine ({exc.strerror or exc})"
    return f"cannot serve on {where}: {exc.strerror or exc}"


class _Handler(BaseHTTPRequestHandler):
    server: ModelServer
    protocol_version = "HTTP/1.1"  # keep-alive, so clients can pool connections

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s " + format, self.address_string(), *args)

    def _send(self, status: int, payload: Any) -> None:
        data = b"" if payload is None else json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send(status, {"error": {"message": message}})

    def _model(self) -> LocalModel | None:
        if self.server.model is None:
            self._error(HTTPStatus.SERVICE_UNAVAILABLE, "the model is still loading; poll /health")
        return self.server.model

    def _health_generate(self) -> None:
        """200 when the model answers one tiny request (an encode on an encode-only server, as SGLang's embedding
        servers do), else 503."""
        model = self.server.model
        if model is None:
            self._send(HTTPStatus.SERVICE_UNAVAILABLE, None)
            return
        try:
            if self.server.encode_only:  # SGLang's embedding servers run an encode here
                model.encode(["s"], **asdict(self.server.encode))
            else:
                model.generate_detailed(["s"], Sampling(n=1, temperature=0.0, max_new_tokens=1))
        except (RuntimeError, ValueError) as exc:
            logger.warning("health_generate failed: %s", exc)
            self._send(HTTPStatus.SERVICE_UNAVAILABLE, None)
            return
        self._send(HTTPStatus.OK, None)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/health":
            status = HTTPStatus.OK if self.server.model is not None else HTTPStatus.SERVICE_UNAVAILABLE
            self._send(status, None)
        elif path == "/health_generate":
            self._health_generate()
        elif path == "/encoder_info":
            model = self._model()
            if model is not None and self.server.digest is not None:
                from burnqed.ebm.identity import encoder_info

                encode = self.server.encode
                spec = model.encoder_spec(encode.pooling, encode.normalize, encode.max_tokens)
                self._send(HTTPStatus.OK, encoder_info(model.name, self.server.digest, spec))
        elif path in ("/get_model_info", "/model_info"):
            model = self._model()
            if model is not None:
                self._send(HTTPStatus.OK, {
                    "model_path": model.name, "tokenizer_path": model.name,
                    "is_generation": not self.server.encode_only,
                    "preferred_sampling_params": None, "weight_version": "default",
                    "has_image_understanding": False, "has_audio_understanding": False,
                })
        elif path == "/v1/models":
            model = self._model()
            if model is not None:  # SGLang's ModelList: max_model_len is the context length the 400s enforce
                self._send(HTTPStatus.OK, {"object": "list", "data": [{
                    "id": model.name, "object": "model", "created": int(time.time()), "owned_by": "sglang",
                    "root": model.name, "parent": None, "max_model_len": model.context_length,
                }]})
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no such endpoint: GET {path}")

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        if path not in ("/generate", "/encode", "/tokenize", "/v1/tokenize"):
            self._discard_body()
            self._error(HTTPStatus.NOT_FOUND, f"no such endpoint: POST {path}")
            return
        try:
            body = self._read_json()
            if path == "/generate":
                request: Any = parse_generate(body)
            elif path == "/encode":
                request = parse_encode(body)
            else:
                request = parse_tokenize(body)
        except RequestError as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc))
            return
        model = self._model()
        if model is None:
            return
        started = time.monotonic()
        try:
            if isinstance(request, GenerateRequest):
                if self.server.encode_only:
                    raise RequestError("this server runs `burnqed serve --encode-only`: it serves /encode, not "
                                       "/generate")
                check_context(model, request)
                groups = model.generate_detailed(request.texts, request.sampling, request.seeds)
                reply = generate_reply(request, groups, time.monotonic() - started,
                                       lambda token: model.tokenizer.decode([token]))
            elif path == "/encode":
                texts, single = request
                vectors = model.encode(texts, **asdict(self.server.encode))
                counts = model.count_tokens(texts)
                reply = encode_reply(vectors, counts, single)
            else:
                prompts, single, special = request
                ids = [model.tokenizer.encode(p, add_special_tokens=special) for p in prompts]
                max_model_len = getattr(model.tokenizer, "model_max_length", -1)
                reply = ({"tokens": ids[0], "count": len(ids[0]), "max_model_len": max_model_len} if single else
                         {"tokens": ids, "count": [len(i) for i in ids], "max_model_len": max_model_len})
        except RequestError as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc))
            return
        except (RuntimeError, ValueError, BurnqedError) as exc:
            logger.exception("model call failed")
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
            return
        self._send(HTTPStatus.OK, reply)

    def _read_json(self) -> Any:
        length_header = self.headers.get("Content-Length")
        if length_header is None or not length_header.isdigit():
            self.close_connection = True  # the body (if any) cannot be skipped without its length
            raise RequestError("a Content-Length header is required")
        length = int(length_header)
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            raise RequestError(f"request body too large ({length} bytes; limit {MAX_BODY_BYTES})")
        raw = self.rfile.read(length)
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RequestError(f"the request body is not valid JSON: {exc}") from None

    def _discard_body(self) -> None:
        length = self.headers.get("Content-Length", "0")
        if length.isdigit() and int(length) <= MAX_BODY_BYTES:
            self.rfile.read(int(length))
        else:
            self.close_connection = True


# ------------------------------------------------------------------------------------------ main


def serve(model_path: Path, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *, device: str = "auto",
          seed: int | None = None, prepare: Callable[[], Path] | None = None, encode: EncodeSettings | None = None,
          encode_only: bool = False, memory_gib: float | None = None) -> None:
    """Bind, announce on stderr, load the model in the background, serve until SIGTERM/SIGINT.

    `prepare` (if given) runs in the loader thread before loading and returns the folder to load: it
    builds the default tiny model on first use without delaying the bind. A model that fails to load
    stops the server and is raised here. `encode_only` serves /encode but not /generate (the value model's
    encoder in the GPU sidecar); on a CUDA device `memory_gib` caps this process's allocations (weights
    included) and, in encode-only mode, the largest encode batch runs once before /health turns 200, so the
    workspace is held from the start (the GPU memory plan, burnqed/cluster/gpu_plan.py, counts on both).
    """
    settings = encode or EncodeSettings()

    def load() -> LocalModel:
        folder = prepare() if prepare is not None else model_path
        where = resolve_device(device)
        if where.startswith("cuda") and memory_gib is not None:
            _cap_gpu_memory(where, memory_gib)
        model = LocalModel.load(folder, device=where, seed=seed, encoder_only=encode_only)
        if encode_only and where.startswith("cuda"):
            model.reserve_encode_workspace(settings.batch_tokens, settings.max_tokens)
        return model

    server = ModelServer(load, host, port, name=str(model_path), encode=settings, encode_only=encode_only)
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        del frame
        if not stopping.is_set():
            stopping.set()
            logger.info("signal %d: shutting down", signum)
            # shutdown() waits for serve_forever, which runs in this (the main) thread: call it from another.
            threading.Thread(target=server.shutdown, name="shutdown", daemon=True).start()

    # Python delivers signals to the main thread only; elsewhere (an embedding test) the caller stops us.
    in_main = threading.current_thread() is threading.main_thread()
    signals = (signal.SIGTERM, signal.SIGINT) if in_main else ()
    previous = {sig: signal.signal(sig, on_signal) for sig in signals}
    try:
        print(f"serving {model_path} on {server.url}", file=sys.stderr, flush=True)
        server.start_loading()
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if server.load_error is not None and not stopping.is_set():
        error = server.load_error
        if isinstance(error, BurnqedError):
            raise error
        raise BurnqedError(f"cannot load {model_path}: {type(error).__name__}: {error}") from error


def _cap_gpu_memory(device: str, gib: float) -> None:
    """Limit this process's CUDA caching allocator to `gib` GiB of the card (an allocation beyond is an OOM
    here, never memory taken from the SGLang server sharing the GPU)."""
    import torch

    index = torch.device(device).index or 0
    total = torch.cuda.get_device_properties(index).total_memory
    fraction = gib * (1 << 30) / total
    if not 0 < fraction <= 1:
        raise BurnqedError(f"--memory-gib {gib:g} does not fit the GPU's {total / (1 << 30):.1f} GiB")
    torch.cuda.set_per_process_memory_fraction(fraction, index)

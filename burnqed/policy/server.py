"""`burnqed serve`: SGLang's native HTTP API on an in-process model, so a client cannot tell the two apart.

    burnqed serve [--model DIR] [--host 127.0.0.1] [--port 30000]     # --port 0 picks a free port
    burnqed serve --encode-only --model /models/policy --port 30001 --memory-gib 17   # the value model's encoder

Prints `serving MODEL on http://HOST:PORT` once the port is bound, then loads the model in a background thread
(`/health` answers 503 until then); SIGTERM/SIGINT stop it cleanly. This module is the HTTP side (binding, routing,
loading, stopping); bodies are parsed and replies built in `policy/wire.py`, weights and adapters kept in
`policy/adapters.py`. The endpoints, their reply shapes as SGLang's source has them, and where this server is
stricter than SGLang: docs/serve.md.
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
from collections.abc import Callable
from dataclasses import asdict
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any

from burnqed.errors import BurnqedError, InputError
from burnqed.policy.adapters import Weights
from burnqed.policy.base import Sampling, encoder_info
from burnqed.policy.grammar import GrammarError
from burnqed.policy.localmodel import LocalModel, resolve_device
from burnqed.policy.wire import (
    EncodeSettings,
    GenerateRequest,
    LoadLora,
    RequestError,
    UpdateWeights,
    check_context,
    encode_reply,
    generate_reply,
    parse_encode,
    parse_generate,
    parse_load_lora,
    parse_tokenize,
    parse_unload_lora,
    parse_update_weights,
)

logger = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 30000
MAX_BODY_BYTES = 64 * 1024 * 1024
# ---------------------------------------------------------------------------------------- server


class ModelServer(ThreadingHTTPServer):
    """The HTTP server. Binds in the constructor; `start_loading()` loads the model in the background."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, load: Callable[[], LocalModel], host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                 name: str = "model", *, encode: EncodeSettings | None = None, encode_only: bool = False,
                 enable_lora: bool = False, seed: int | None = None) -> None:
        if ":" in host:  # an IPv6 literal such as "::"
            self.address_family = socket.AF_INET6
        self.model: LocalModel | None = None  # before binding: a failed bind calls server_close()
        self.weights = Weights(enable_lora, seed)
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
        from burnqed.policy.fingerprint import folder_fingerprint

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
        self.weights.close()


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
                encode = self.server.encode
                spec = model.encoder_spec(encode.pooling, encode.normalize, encode.max_tokens)
                self._send(HTTPStatus.OK, encoder_info(model.name, self.server.digest, spec))
        elif path in ("/get_model_info", "/model_info"):
            model = self._model()
            if model is not None:
                self._send(HTTPStatus.OK, {
                    "model_path": model.name, "tokenizer_path": model.name,
                    "is_generation": not self.server.encode_only,
                    "preferred_sampling_params": None, "weight_version": self.server.weights.version,
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
        if path in WEIGHT_ENDPOINTS:
            self._weights(path)
        else:
            self._serve(path)

    def _serve(self, path: str) -> None:
        """/generate, /encode and /tokenize."""
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
                check_tokens(model, request)
                check_context(model, request)
                runs = self.server.weights.model_for(model, request.lora_path)
                groups = runs.generate_detailed(request.texts, request.sampling, request.seeds)
                reply = generate_reply(request, groups, time.monotonic() - started,
                                       lambda token: model.tokenizer.decode([token]), self.server.weights.version)
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
        except (RequestError, GrammarError) as exc:  # a grammar that does not compile: SGLang's 400, its words
            self._error(HTTPStatus.BAD_REQUEST, str(exc))
            return
        except (RuntimeError, ValueError, BurnqedError) as exc:
            logger.exception("model call failed")
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
            return
        self._send(HTTPStatus.OK, reply)

    def _weights(self, path: str) -> None:
        """/load_lora_adapter, /unload_lora_adapter (SGLang's LoRAUpdateOutput: 200 on success, else 400) and
        /update_weights_from_disk (200 or 400 with success, message, num_paused_requests)."""
        try:
            body = self._read_json()
            request: Any = WEIGHT_ENDPOINTS[path](body)
        except RequestError as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc))
            return
        model = self._model()
        if model is None:
            return
        weights = self.server.weights
        if isinstance(request, UpdateWeights):
            ok, message = self._update_from_disk(request)
            reply: dict[str, Any] = {"success": ok, "message": message, "num_paused_requests": 0}
        else:
            ok, message = (weights.load_adapter(model, request) if isinstance(request, LoadLora) else
                           weights.unload_adapter(request))
            # SGLang: a refusal before the backend (LoRA off, an unknown name to unload) carries no adapter list
            early = not ok and (not weights.enable_lora or path == "/unload_lora_adapter")
            reply = {"success": ok, "error_message": message, "loaded_adapters": None if early else weights.loaded()}
        self._send(HTTPStatus.OK if ok else HTTPStatus.BAD_REQUEST, reply)

    def _update_from_disk(self, request: UpdateWeights) -> tuple[bool, str]:
        """The model reloaded from `model_path` (a model folder) in place of the one served; the weight version set
        when given. A folder that fails to load leaves the served model as it was (SGLang rolls back)."""
        server = self.server
        current = server.model
        assert current is not None
        try:
            fresh = LocalModel.load(request.model_path, device=str(current.device), seed=server.weights.seed)
        except (BurnqedError, OSError) as exc:
            return False, f"Failed to get weights iterator: {exc}."
        server.model = fresh
        current.close()
        message = "Succeeded to update model weights."
        if request.weight_version is not None:
            server.weights.version = request.weight_version
            message += f" Weight version updated to {request.weight_version}."
        return True, message

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


WEIGHT_ENDPOINTS: dict[str, Callable[[Any], Any]] = {
    "/load_lora_adapter": parse_load_lora, "/unload_lora_adapter": parse_unload_lora,
    "/update_weights_from_disk": parse_update_weights,
}


def check_tokens(model: LocalModel, request: GenerateRequest) -> None:
    """`RequestError` for an `input_ids` prompt holding a token id outside the vocabulary (SGLang's scheduler aborts
    such a request with an error naming the vocabulary size)."""
    size = int(model.model.config.vocab_size) if model.model is not None else 0
    for prompt in request.texts:
        if not isinstance(prompt, str) and max(prompt) >= size:
            raise RequestError(f"The input_ids {max(prompt)} exceeds the vocabulary size {size}.")


# ------------------------------------------------------------------------------------------ main


def serve(model_path: Path, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *, device: str = "auto",
          seed: int | None = None, prepare: Callable[[], Path] | None = None, encode: EncodeSettings | None = None,
          encode_only: bool = False, memory_gib: float | None = None, enable_lora: bool = False) -> None:
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

    server = ModelServer(load, host, port, name=str(model_path), encode=settings, encode_only=encode_only,
                         enable_lora=enable_lora, seed=seed)
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

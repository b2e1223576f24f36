"""The wire format of `burnqed serve` (SGLang's native HTTP API, `policy/server.py`'s docstring says which and
where it is stricter): parsing the bodies of /generate, /encode and /tokenize into checked requests
(`RequestError`, answered 400) and building the replies. No sockets and no model calls here.

    request = parse_generate({"text": "theorem …", "sampling_params": {"n": 4, "temperature": 0.8}})
    reply = generate_reply(request, groups, latency=0.2)
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from burnqed.policy.base import Pooling, Sampling, context_problem, sampling_problem
from burnqed.policy.localmodel import DEFAULT_BATCH_TOKENS, Generation, LocalModel

MAX_N = 256

# SGLang sampling parameters this server does not implement, with the value that means "off": a client
# may send them at that value (SGLang's defaults), anything else is refused rather than ignored.
NEUTRAL_PARAMS: dict[str, Any] = {
    "min_new_tokens": 0,
    "ignore_eos": False,
    "skip_special_tokens": True,
    "spaces_between_special_tokens": True,
    "no_stop_trim": False,
    "stop_token_ids": None,
}
SUPPORTED_PARAMS = ("n", "temperature", "top_p", "max_new_tokens", "stop", "sampling_seed", "top_k", "min_p",
                    "repetition_penalty", "frequency_penalty", "presence_penalty", "ebnf")
SEED_RANGE = (-(2**63), 2**63 - 1)  # SGLang 0.5.23's SamplingParams.verify
INT64 = 2**63 - 1  # SGLang's API contract reads top_k as an i64

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
                             "stream", "lora_path"})
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
    texts: list[str | list[int]]  # texts, or token ids (`input_ids`)
    single: bool  # one text with n = 1: the reply is one object, not a list
    sampling: Sampling
    return_logprob: bool
    return_text_in_logprobs: bool
    max_new_tokens_given: bool  # SGLang checks prompt + max_new_tokens against the context only when it is set
    seeds: list[list[int]] | None = None  # per text, one seed per sample (sampling_seed); None: unseeded
    lora_path: str | None = None  # the LoRA adapter's name (one for the whole request); None: the base model


# ------------------------------------------------------------------------------- request parsing


def _texts(body: Any, endpoint: str, implemented: frozenset[str],
           ids: bool = False) -> tuple[list[str | list[int]], bool]:
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
        if not ids:
            raise RequestError(f"input_ids is not supported by burnqed serve's {endpoint}; send text")
        if body.get("text") is not None:  # SGLang takes the text and ignores the ids
            raise RequestError("send text or input_ids, not both")
        return _input_ids(body["input_ids"])
    text = body.get("text")
    if isinstance(text, str):
        return [text], True
    if isinstance(text, list) and text and all(isinstance(t, str) for t in text):
        return list(text), False
    raise RequestError("text must be a string or a non-empty list of strings")


def _input_ids(value: Any) -> tuple[list[str | list[int]], bool]:
    """SGLang's `input_ids`: one prompt's token ids (a list of ints), or a list of them (`GenerateReqInput`)."""
    def tokens(item: Any) -> list[int]:
        if not isinstance(item, list) or not item or not all(isinstance(t, int) and not isinstance(t, bool)
                                                               and t >= 0 for t in item):
            raise RequestError("input_ids must be a non-empty list of token ids or a non-empty list of them")
        return list(item)

    if isinstance(value, list) and value and isinstance(value[0], int):
        return [tokens(value)], True
    if isinstance(value, list) and value:
        return [tokens(item) for item in value], False
    raise RequestError("input_ids cannot be empty.")


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
    texts, single = _texts(body, "/generate", GENERATE_FIELDS, ids=True)
    lora = body.get("lora_path")
    if lora is not None and not isinstance(lora, str):  # SGLang takes a list too (one per text); burnqed serve one
        raise RequestError(f"lora_path must be one adapter name (a string) for the whole request, got {lora!r}")
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
                           flags["return_text_in_logprobs"], given, seeds, lora)


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
    ebnf = params.get("ebnf")
    if ebnf is not None and not isinstance(ebnf, str):  # SGLang's contract: Option<String>
        raise RequestError(f"sampling_params.ebnf must be a string (a grammar in xgrammar's EBNF), got {ebnf!r}")
    n = _number(params, "n", 1, 1, MAX_N, integer=True)
    # SGLang's defaults for what a request leaves out (SamplingParams; never the model folder's generation_config)
    sampling = Sampling(
        n=n,
        temperature=float(_number(params, "temperature", 1.0, 0.0, 100.0, integer=False)),
        top_p=float(_number(params, "top_p", 1.0, 0.0, 1.0, integer=False, low_open=True)),
        max_new_tokens=_number(params, "max_new_tokens", 128, 1, 1_000_000, integer=True),
        stop=stops,
        top_k=_number(params, "top_k", -1, -INT64 - 1, INT64, integer=True),  # -1 or >= 1: sampling_problem
        min_p=float(_number(params, "min_p", 0.0, 0.0, 1.0, integer=False)),
        repetition_penalty=float(_number(params, "repetition_penalty", 1.0, 0.0, 2.0, integer=False, low_open=True)),
        frequency_penalty=float(_number(params, "frequency_penalty", 0.0, -2.0, 2.0, integer=False)),
        presence_penalty=float(_number(params, "presence_penalty", 0.0, -2.0, 2.0, integer=False)),
        ebnf=ebnf or None,  # SGLang reads "" as no grammar
    )
    seed = params.get("sampling_seed")
    if seed is not None:
        # SGLang takes any int (bools included, being ints in Python) in range; a bool is refused here.
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise RequestError(f"sampling_params.sampling_seed must be an integer, got {seed!r}")
        if not SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
            raise RequestError(f"sampling_params.sampling_seed must be in [-2**63, 2**63 - 1], got {seed}")
    # What the bounds above do not say: top_k 0, and min_p with a seed (SGLang's seeded sampler fails on it)
    problem = sampling_problem(sampling, seeded=seed is not None)
    if problem is not None:
        raise RequestError(f"sampling_params.{problem}")
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
    texts, single = _texts(body, "/encode", ENCODE_FIELDS)
    return [t for t in texts if isinstance(t, str)], single  # no input_ids here: texts alone


# --------------------------------------------------------------------------------------- replies


def generation_item(gen: Generation, request: GenerateRequest, latency: float,
                    decode: Callable[[int], str] | None = None, weight_version: str = "default") -> dict[str, Any]:
    """One /generate reply object, shaped like SGLang's."""
    if gen.finish_reason == "stop":
        finish: dict[str, Any] = {"type": "stop", "matched": gen.matched}
    else:
        finish = {"type": "length", "length": request.sampling.max_new_tokens}
    meta: dict[str, Any] = {
        "id": uuid.uuid4().hex,
        "finish_reason": finish,
        "prompt_tokens": gen.prompt_tokens,
        "weight_version": weight_version,
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
                   decode: Callable[[int], str] | None = None, weight_version: str = "default") -> Any:
    """The whole /generate reply: prompt-major flat list, or one object (see the module docstring)."""
    items = [generation_item(gen, request, latency, decode, weight_version) for group in groups for gen in group]
    return items[0] if request.single else items


def encode_reply(vectors: list[list[float]], prompt_tokens: list[int], single: bool) -> Any:
    items = [
        {"embedding": vector, "meta_info": {"id": uuid.uuid4().hex, "prompt_tokens": count}}
        for vector, count in zip(vectors, prompt_tokens, strict=True)
    ]
    return items[0] if single else items


# ------------------------------------------------------------------------------- weights and adapters


@dataclass(frozen=True, slots=True)
class LoadLora:
    """A /load_lora_adapter body (SGLang's `LoadLoRAAdapterReqInput`)."""

    name: str
    path: str
    pinned: bool = False


@dataclass(frozen=True, slots=True)
class UpdateWeights:
    """An /update_weights_from_disk body (SGLang's `UpdateWeightFromDiskReqInput`): the fields this server implements;
    the others are accepted at their defaults only."""

    model_path: str
    weight_version: str | None = None


# UpdateWeightFromDiskReqInput's other fields (SGLang 0.5.23, managers/io_struct.py) and their defaults: they tune how
# SGLang's scheduler pauses, flushes and reloads, which an in-process model that serves one call at a time has no
# use for; a value other than the default is refused, not ignored.
UPDATE_WEIGHTS_DEFAULTS: dict[str, tuple[Any, ...]] = {
    "load_format": (None,), "abort_all_requests": (False, True), "is_async": (False,),
    "torch_empty_cache": (False, True), "keep_pause": (False,), "recapture_cuda_graph": (False, True),
    "token_step": (0,), "flush_cache": (True,),
    "manifest": (None,),
}


def _object(body: Any, endpoint: str, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    unknown = sorted(set(body) - allowed - NO_EFFECT_FIELDS)
    if unknown:
        raise RequestError(f"unknown field {unknown[0]!r}: not part of SGLang's {endpoint} request")
    return body


def _string(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise RequestError(f"{key} must be a non-empty string, got {value!r}")
    return value


def parse_load_lora(body: Any) -> LoadLora:
    """Validate a /load_lora_adapter body: `lora_name`, `lora_path` (required), `pinned`."""
    fields = _object(body, "/load_lora_adapter", {"lora_name", "lora_path", "pinned", "lora_id"})
    if fields.get("lora_id") is not None:  # SGLang's tokenizer manager sets it; a client does not
        raise RequestError("lora_id is set by the server, not by a client")
    pinned = fields.get("pinned", False)
    if not isinstance(pinned, bool):
        raise RequestError(f"pinned must be true or false, got {pinned!r}")
    return LoadLora(_string(fields, "lora_name"), _string(fields, "lora_path"), pinned)


def parse_unload_lora(body: Any) -> str:
    """Validate an /unload_lora_adapter body: its `lora_name`."""
    fields = _object(body, "/unload_lora_adapter", {"lora_name", "lora_id"})
    if fields.get("lora_id") is not None:
        raise RequestError("lora_id is set by the server, not by a client")
    return _string(fields, "lora_name")


def parse_update_weights(body: Any) -> UpdateWeights:
    """Validate an /update_weights_from_disk body: `model_path`, `weight_version`, the others at their defaults."""
    fields = _object(body, "/update_weights_from_disk",
                     {"model_path", "weight_version", *UPDATE_WEIGHTS_DEFAULTS})
    for key, allowed in UPDATE_WEIGHTS_DEFAULTS.items():
        if key in fields and fields[key] not in allowed:
            raise RequestError(f"{key}={fields[key]!r} is not supported by burnqed serve; leave it out or send "
                               f"{' or '.join(json.dumps(v) for v in allowed)}")
    version = fields.get("weight_version")
    if version is not None and not isinstance(version, str):
        raise RequestError(f"weight_version must be a string, got {version!r}")
    return UpdateWeights(_string(fields, "model_path"), version)

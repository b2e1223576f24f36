"""SGLang's native HTTP replies, validated at the edge: `/generate`, `/encode`, `/tokenize`, `/v1/models`.

    per_prompt = parse_generate_reply(reply.json(), n_prompts=3, n=8)   # 8 completions for each of 3 prompts

Each parser raises `ValueError` on a wrong shape or length (the client turns it into a `PolicyError`, not
retried); version variants are tolerated: a bare object instead of a one-element list, a string or null
`finish_reason`. Used by `burnqed.policy.sglang.SGLangClient`.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from burnqed.policy.base import Completion


def clip(text: str, limit: int = 500) -> str:
    """`text` cut to `limit` characters (with an ellipsis): server bodies in one-line errors."""
    return text if len(text) <= limit else text[:limit] + "…"


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


def parse_tokenize_reply(data: Any, n_texts: int) -> list[int]:
    """A `/tokenize` reply for a list of prompts (`{"tokens": [[...]], "count": [...], ...}`) → the counts."""
    if not isinstance(data, dict) or not isinstance(data.get("count"), list):
        raise ValueError(f"expected {{'count': [...]}} from /tokenize, got {clip(json.dumps(data))}")
    counts = data["count"]
    if len(counts) != n_texts or not all(isinstance(c, int) and not isinstance(c, bool) for c in counts):
        raise ValueError(f"expected {n_texts} integer counts from /tokenize, got {clip(json.dumps(counts))}")
    return list(counts)


def parse_tokenize_ids(data: Any, n_texts: int) -> list[list[int]]:
    """A `/tokenize` reply for a list of prompts → the token ids of each (SGLang: `tokens`, one list per prompt)."""
    tokens = data.get("tokens") if isinstance(data, dict) else None
    if (not isinstance(tokens, list) or len(tokens) != n_texts
            or not all(isinstance(ids, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in ids)
                       for ids in tokens)):
        raise ValueError(f"expected {n_texts} lists of token ids from /tokenize, got {clip(json.dumps(data))}")
    return [list(ids) for ids in tokens]


def parse_models_reply(data: Any) -> int | None:
    """The context length in a `/v1/models` reply (SGLang's `ModelList`: data[0].max_model_len), if any."""
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries or not isinstance(entries[0], dict):
        return None
    value = entries[0].get("max_model_len")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def parse_encode_reply(data: Any, n_texts: int) -> list[list[float]]:
    """An `/encode` reply (`[{"embedding": [...], "meta_info": {...}}, ...]`, or one bare object) → vectors."""
    return [_EncodeItem.model_validate(item).embedding for item in _items(data, n_texts, "embeddings")]

"""A model folder's tokenizer read with `tokenizers` alone, without transformers (`policy.modelfolder.load_tokenizer`
reads it so where it can: `avoid_transformers`): what such a reading refuses (a tokenizer transformers would read
another way) and the tokenizer it gives (`TokenizersOnlyTokenizer`).

Only the standard library at import; tokenizers is imported inside functions, and nothing here imports torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TOKENIZER_CLASS = "PreTrainedTokenizerFast"


# Keys of tokenizer_config.json that name a 5.x-only backend or a rule now stated in tokenizer.json.
DROPPED_TOKENIZER_KEYS = ("backend", "add_bos_token", "add_eos_token")


def written_by_burnqed(folder: Path) -> bool:
    """Whether `folder`'s tokenizer is as `write_tokenizer` writes it: the class both majors load, and no flag or
    5.x backend key beside the post-processor that states its rule."""
    path = folder / "tokenizer_config.json"
    if not path.is_file() or not (folder / "tokenizer.json").is_file():
        return False
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return False
    return (isinstance(config, dict) and config.get("tokenizer_class") == TOKENIZER_CLASS
            and not any(key in config for key in DROPPED_TOKENIZER_KEYS))


# What transformers (4.57 and 5.x alike) makes of a tokenizer_config.json key that `TokenizersOnlyTokenizer` reads:
# each is read here the same way; a folder with any other key is read by transformers itself.
TOKENIZERS_ONLY_KEYS = frozenset({"tokenizer_class", "bos_token", "eos_token", "pad_token", "unk_token",
                                 "model_max_length", "padding_side", "truncation_side", "clean_up_tokenization_spaces",
                                 "split_special_tokens"})


SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "pad_token", "unk_token")


UNBOUNDED_LENGTH = int(1e30)  # transformers' model_max_length when the config sets none (VERY_LARGE_INTEGER)


PATCHED_VOCAB = 100_000  # past this many tokens transformers 5.x may rewrite the pre-tokenizer (`_patch_mistral_regex`)


def tokenizers_only_refusal(folder: Path) -> str | None:
    """Why `TokenizersOnlyTokenizer` does not read `folder` (None: it does, as transformers' PreTrainedTokenizerFast
    would). It reads only what transformers takes from tokenizer.json unchanged: a folder burnqed wrote
    (`written_by_burnqed`) with no special_tokens_map.json, config keys of TOKENIZERS_ONLY_KEYS with their plain
    meanings (no clean-up of spaces, no split special tokens, each special token a string), and a tokenizer.json with a
    post-processor, no truncation or padding of its own, at most PATCHED_VOCAB tokens, and each named special token
    already among its added tokens as transformers would add it (special, not normalized, not stripped, not
    single-word), so transformers adds and rewrites nothing."""
    reading = _tokenizers_only_reading(folder)
    return reading if isinstance(reading, str) else None


def _tokenizers_only_reading(folder: Path) -> str | tuple[str, dict[str, Any]]:
    """`folder`'s tokenizer.json text and tokenizer config, each read once, when `TokenizersOnlyTokenizer` reads them as
    transformers would; else why not (`tokenizers_only_refusal`)."""
    if not written_by_burnqed(folder):
        return "the folder's tokenizer was not written by burnqed"
    if (folder / "special_tokens_map.json").exists():
        return "special_tokens_map.json may name more special tokens"
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    text = (folder / "tokenizer.json").read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except ValueError:
        return "tokenizer.json is not JSON"
    refusal = _config_refusal(config) or _tokenizer_json_refusal(data if isinstance(data, dict) else {}, config)
    return refusal if refusal is not None else (text, config)


def _config_refusal(config: dict[str, Any]) -> str | None:
    unread = sorted(set(config) - TOKENIZERS_ONLY_KEYS)
    if unread:
        return f"tokenizer_config.json sets {unread}"
    if config.get("clean_up_tokenization_spaces", False) is not False or config.get("split_special_tokens",
                                                                                       False) is not False:
        return "tokenizer_config.json asks for a clean-up of spaces or split special tokens"
    if config.get("padding_side", "right") not in ("left", "right") or config.get("truncation_side",
                                                                                  "right") not in ("left", "right"):
        return "tokenizer_config.json names an unknown padding or truncation side"
    length = config.get("model_max_length")
    if length is not None and (not isinstance(length, int) or isinstance(length, bool)):
        return "model_max_length is not an integer"
    return None


def _tokenizer_json_refusal(data: dict[str, Any], config: dict[str, Any]) -> str | None:
    if data.get("post_processor") is None:
        return "tokenizer.json has no post-processor (transformers would build one)"
    if data.get("truncation") is not None or data.get("padding") is not None:
        return "tokenizer.json sets a truncation or padding of its own"
    added = {entry.get("content"): entry for entry in data.get("added_tokens") or [] if isinstance(entry, dict)}
    for key in SPECIAL_TOKEN_KEYS:
        token = config.get(key)
        if token is None:
            continue
        entry = added.get(token) if isinstance(token, str) else None
        if entry is None or entry.get("special") is not True or any(
                entry.get(flag) is not False for flag in ("normalized", "lstrip", "rstrip", "single_word")):
            return f"{key} {token!r} is not a plain special token of tokenizer.json (transformers would add it)"
    model = data.get("model")
    vocab = model.get("vocab") if isinstance(model, dict) else None
    if not isinstance(vocab, dict) or len(vocab) + len(added) > PATCHED_VOCAB:
        return f"not a vocabulary of at most {PATCHED_VOCAB} tokens"
    return None


class TokenizersOnlyTokenizer:
    """A model folder's tokenizer read with `tokenizers` alone: for a folder `tokenizers_only_refusal` accepts, the
    ids, texts, special tokens and padding transformers' PreTrainedTokenizerFast gives, for the calls burnqed makes
    (`encode_texts`, `encode`, `decode`, `pad`; tests/policy/test_tokenizers_only.py compares the two). Thread-safe:
    the backend is never reconfigured (a truncating call uses its own copy per length)."""

    def __init__(self, tokenizer_json: str, config: dict[str, Any]) -> None:
        from tokenizers import Tokenizer

        self._json = tokenizer_json
        self._backend = Tokenizer.from_str(tokenizer_json)
        self._truncating: dict[int, Any] = {}
        self.bos_token: str | None = config.get("bos_token")
        self.eos_token: str | None = config.get("eos_token")
        self.unk_token: str | None = config.get("unk_token")
        self._pad_token: str | None = config.get("pad_token")
        length = config.get("model_max_length")
        self.model_max_length: int = UNBOUNDED_LENGTH if length is None else int(length)
        self.padding_side: str = config.get("padding_side", "right")
        self.truncation_side: str = config.get("truncation_side", "right")

    @classmethod
    def from_folder(cls, folder: Path) -> TokenizersOnlyTokenizer | None:
        """`folder`'s tokenizer read this way, or None when `tokenizers_only_refusal` refuses it."""
        reading = _tokenizers_only_reading(folder)
        return None if isinstance(reading, str) else cls(*reading)

    def _id(self, token: str | None) -> int | None:
        return None if token is None else self._backend.token_to_id(token)

    @property
    def bos_token_id(self) -> int | None:
        return self._id(self.bos_token)

    @property
    def eos_token_id(self) -> int | None:
        return self._id(self.eos_token)

    @property
    def unk_token_id(self) -> int | None:
        return self._id(self.unk_token)

    @property
    def pad_token(self) -> str | None:
        return self._pad_token

    @pad_token.setter
    def pad_token(self, token: str | None) -> None:
        self._pad_token = token

    @property
    def pad_token_id(self) -> int | None:
        return self._id(self._pad_token)

    def _cutting(self, max_length: int) -> Any:
        """A copy of the backend that truncates as transformers asks it to (longest first, no stride)."""
        backend = self._truncating.get(max_length)
        if backend is None:
            from tokenizers import Tokenizer

            backend = Tokenizer.from_str(self._json)
            backend.enable_truncation(max_length, stride=0, strategy="longest_first", direction=self.truncation_side)
            self._truncating[max_length] = backend
        return backend

    def __call__(self, texts: str | list[str], add_special_tokens: bool = True, truncation: bool = False,
                 max_length: int | None = None) -> dict[str, Any]:
        """{"input_ids": the ids of each text} (of the one text, for a string), as transformers' call gives them."""
        backend = self._cutting(max_length if max_length is not None else self.model_max_length) if truncation \
            else self._backend
        encodings = backend.encode_batch([texts] if isinstance(texts, str) else list(texts),
                                         add_special_tokens=add_special_tokens)
        ids = [list(encoding.ids) for encoding in encodings]
        return {"input_ids": ids[0] if isinstance(texts, str) else ids}

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return list(self._backend.encode(text, add_special_tokens=add_special_tokens).ids)

    def decode(self, ids: Any, skip_special_tokens: bool = False) -> str:
        text: str = self._backend.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)
        return text

    def pad(self, encoded: dict[str, list[list[int]]], padding: bool = True, padding_side: str | None = None,
            return_tensors: str | None = None) -> dict[str, list[list[int]]]:
        """`input_ids` padded to the longest row with the pad token, on `padding_side`, and the attention mask, as
        lists (transformers' `pad` with `return_tensors=None`, the one form burnqed asks for: the caller makes the
        tensors)."""
        if not padding or return_tensors is not None:
            raise ValueError("TokenizersOnlyTokenizer.pad pads to the longest row into lists only")
        pad = self.pad_token_id
        if pad is None:
            raise ValueError("the tokenizer has no pad token")
        rows = encoded["input_ids"]
        width = max((len(row) for row in rows), default=0)
        left = (padding_side or self.padding_side) == "left"
        ids, mask = [], []
        for row in rows:
            fill = width - len(row)
            ids.append([pad] * fill + list(row) if left else list(row) + [pad] * fill)
            mask.append([0] * fill + [1] * len(row) if left else [1] * len(row) + [0] * fill)
        return {"input_ids": ids, "attention_mask": mask}

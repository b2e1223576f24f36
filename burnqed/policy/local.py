"""The in-process transformers backend: sampling with true log-probs, and mean-pooled embeddings.

    model = LocalModel.load("~/.cache/burnqed/models/tiny-v2", device="auto", seed=0)
    model.generate(prompts, Sampling(n=8, temperature=0.8, stop=("```",)))  # [[Completion × 8] per prompt]
    model.encode(texts)                                                     # [[float × hidden] per text]

    policy = LocalPolicy.from_config(cfg.policy)    # the `Policy` protocol (async, a worker thread)
    encoder = LocalEncoder(policy.model)            # the `Encoder` protocol on the same weights

Decoding is a plain loop over the KV cache rather than `model.generate`, because the policy needs three
things `generate` does not give directly: the log-prob of each chosen token under the TRUE distribution
(log_softmax of the raw logits, before temperature and top-p reshape it), SGLang's stop-string semantics
(the text cut at the first stop string, generation ended by the token that completes it, that token
counted), and one prefill per prompt shared by its `n` samples. Prompts are left-padded with explicit
position ids, so a padded row computes what it would alone (up to float rounding).

Every model call holds one lock: the server and the async wrappers may call from several threads.
torch/transformers are imported inside functions; importing this module is cheap.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from burnqed.errors import ModelError, PolicyError
from burnqed.policy.base import Completion, Sampling
from burnqed.policy.tiny import HFModel, HFTokenizer, ensure_model, missing_model_files, quiet_transformers

if TYPE_CHECKING:
    import torch

    from burnqed.config import PolicyConfig

ENCODE_BATCH = 32
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Generation:
    """One sampled completion with everything the HTTP server reports.

    `token_ids`/`token_logprobs` cover the generated tokens up to and including the one that completed
    the stop string (or EOS); `text` is cut before the stop string. `matched` is the stop string or the
    EOS token id when `finish_reason` is "stop", None for "length".
    """

    text: str
    token_ids: tuple[int, ...]
    token_logprobs: tuple[float, ...]
    finish_reason: str
    matched: str | int | None
    prompt_tokens: int

    @property
    def logprob(self) -> float:
        return float(sum(self.token_logprobs))

    def completion(self) -> Completion:
        return Completion(self.text, self.logprob, len(self.token_ids), self.finish_reason)


def resolve_device(device: str) -> str:
    """`auto` → `cuda` when CUDA is available, else `cpu`; anything else as given."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class LocalModel:
    """A causal LM and its tokenizer, loaded once; thread-safe (one call at a time)."""

    def __init__(self, model: HFModel, tokenizer: HFTokenizer, path: Path,
                 seed: int | None = None) -> None:
        import torch

        self.model = model
        self.tokenizer = tokenizer
        self.path = path
        self.device = model.device
        self._lock = threading.Lock()
        self._generator = torch.Generator(device=self.device)
        self.reseed(seed)

    @classmethod
    def load(cls, path: str | Path, device: str = "auto", seed: int | None = None) -> LocalModel:
        """Load a model folder (weights, config, tokenizer). Raises `ModelError` with what is wrong."""
        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise ModelError(f"model folder {folder} does not exist")
        missing = missing_model_files(folder)
        if missing:
            raise ModelError(f"model folder {folder} is missing {', '.join(missing)}")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        where = resolve_device(device)
        quiet_transformers()
        try:
            tokenizer: HFTokenizer = AutoTokenizer.from_pretrained(folder)
            # float32 on CPU (half precision is slow there and skews log-probs); the saved dtype on GPU.
            dtype = torch.float32 if where == "cpu" else "auto"
            model: HFModel = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
            model = model.to(where)
        except Exception as exc:  # corrupt files surface as many types (SafetensorError, JSON, OSError, ...)
            raise ModelError(f"cannot load the model in {folder}: {type(exc).__name__}: {exc}") from None
        model.eval()
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        return cls(model, tokenizer, folder, seed)

    @property
    def name(self) -> str:
        return str(self.path)

    def reseed(self, seed: int | None) -> None:
        """Restart the sampling stream: the same seed and calls give the same samples."""
        self._generator.manual_seed(seed if seed is not None else int.from_bytes(os.urandom(8), "little") >> 1)

    # --------------------------------------------------------------------------------- generation

    def generate(self, prompts: Sequence[str], sampling: Sampling) -> list[list[Completion]]:
        """`sampling.n` completions per prompt, grouped per prompt, in prompt order."""
        return [[g.completion() for g in group] for group in self.generate_detailed(prompts, sampling)]

    def generate_detailed(self, prompts: Sequence[str], sampling: Sampling) -> list[list[Generation]]:
        """Like `generate`, with token ids, per-token log-probs and the matched stop."""
        if sampling.n < 1 or sampling.max_new_tokens < 1 or sampling.temperature < 0 or not 0 < sampling.top_p <= 1:
            raise ValueError(f"invalid sampling parameters {sampling}")
        if not prompts:
            return []
        import torch

        with self._lock, torch.inference_mode():
            self._check_open()
            flat = self._sample(list(prompts), sampling)
        n = sampling.n
        return [flat[i * n : (i + 1) * n] for i in range(len(prompts))]

    def _sample(self, prompts: list[str], sampling: Sampling) -> list[Generation]:
        import torch

        enc = self.tokenizer(prompts, padding=True, padding_side="left", return_tensors="pt")
        input_ids = enc["input_ids"].to(self.device)
        mask = enc["attention_mask"].to(self.device)
        prompt_tokens = mask.sum(dim=1).tolist()
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        out = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True,
                         logits_to_keep=1)
        n = sampling.n
        cache = out.past_key_values
        if n > 1:  # one prefill per prompt, shared by its n samples
            cache.batch_repeat_interleave(n)
        logits = out.logits[:, -1, :].float().repeat_interleave(n, dim=0)
        mask = mask.repeat_interleave(n, dim=0)
        next_pos = positions[:, -1].repeat_interleave(n, dim=0) + 1
        rows = len(prompts) * n
        eos = self.tokenizer.eos_token_id
        stops = tuple(s for s in sampling.stop if s)
        ids: list[list[int]] = [[] for _ in range(rows)]
        logps: list[list[float]] = [[] for _ in range(rows)]
        done: list[Generation | None] = [None] * rows
        live = list(range(rows))  # row of the batch tensors → index into ids/done
        for step in range(sampling.max_new_tokens):
            true_logp = torch.log_softmax(logits, dim=-1)
            chosen = self._pick(logits, sampling)
            chosen_logp = true_logp.gather(1, chosen[:, None]).squeeze(1)
            keep: list[int] = []
            for row, (token, logp) in enumerate(zip(chosen.tolist(), chosen_logp.tolist(), strict=True)):
                index = live[row]
                ids[index].append(token)
                logps[index].append(logp)
                finished = self._finished(ids[index], token, eos, stops, step + 1 == sampling.max_new_tokens)
                if finished is None:
                    keep.append(row)
                    continue
                text, reason, matched = finished
                done[index] = Generation(text, tuple(ids[index]), tuple(logps[index]), reason, matched,
                                         prompt_tokens[index // n])
            if not keep:
                break
            if len(keep) < len(live):  # drop finished rows from the batch and the cache
                select = torch.tensor(keep, device=self.device)
                cache.batch_select_indices(select)
                chosen, mask, next_pos = chosen[select], mask[select], next_pos[select]
                live = [live[row] for row in keep]
            mask = torch.cat([mask, mask.new_ones((len(live), 1))], dim=1)
            out = self.model(input_ids=chosen[:, None], attention_mask=mask, position_ids=next_pos[:, None],
                             past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            logits = out.logits[:, -1, :].float()
            next_pos = next_pos + 1
        finished_rows = [g for g in done if g is not None]
        if len(finished_rows) != rows:  # every row ends by max_new_tokens; a gap would misalign the groups
            raise RuntimeError(f"{rows - len(finished_rows)} rows did not finish")
        return finished_rows

    def _pick(self, logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
        import torch

        if sampling.temperature == 0:
            return logits.argmax(dim=-1)
        probs = torch.softmax(logits / sampling.temperature, dim=-1)
        if sampling.top_p < 1:
            # Nucleus: keep the most likely tokens until their mass reaches top_p (at least one).
            sorted_probs, order = probs.sort(dim=-1, descending=True)
            outside = sorted_probs.cumsum(dim=-1) - sorted_probs > sampling.top_p
            sorted_probs = sorted_probs.masked_fill(outside, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
        return torch.multinomial(probs, 1, generator=self._generator).squeeze(1)

    def _finished(self, ids: list[int], token: int, eos: int | None, stops: tuple[str, ...],
                  last: bool) -> tuple[str, str, str | int | None] | None:
        """(text, finish_reason, matched) once this row is done, else None. Stop strings win over EOS
        and length; the text is cut at the earliest stop string, like SGLang."""
        text: str = self.tokenizer.decode(ids, skip_special_tokens=True)
        if stops:
            hits = [(text.find(s), s) for s in stops if s in text]
            if hits:
                at, matched = min(hits)
                return text[:at], "stop", matched
        if eos is not None and token == eos:
            return text, "stop", token
        if last:
            return text, "length", None
        return None

    # ----------------------------------------------------------------------------------- encoding

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        """Mean-pooled last hidden states (masked mean over real tokens, BOS included), one list per text."""
        import torch

        vectors: list[list[float]] = []
        with self._lock, torch.inference_mode():
            self._check_open()
            decoder = self.model.get_decoder()
            for start in range(0, len(texts), ENCODE_BATCH):
                chunk = list(texts[start : start + ENCODE_BATCH])
                enc = self.tokenizer(chunk, padding=True, padding_side="right", return_tensors="pt")
                mask = enc["attention_mask"].to(self.device)
                hidden = decoder(input_ids=enc["input_ids"].to(self.device), attention_mask=mask).last_hidden_state
                weights = mask.unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)
                vectors.extend(pooled.float().cpu().tolist())
        return vectors

    def _check_open(self) -> None:
        if self.model is None:
            raise RuntimeError(f"the model {self.name} is closed")

    def close(self) -> None:
        """Drop the weights (and CUDA's cached blocks)."""
        with self._lock:
            self.model = None
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()


# --------------------------------------------------------------------------------- async protocols


class LocalPolicy:
    """The `Policy` protocol on a `LocalModel`: calls run in a worker thread, one at a time."""

    def __init__(self, model: LocalModel) -> None:
        self.model = model
        self._lock = asyncio.Lock()
        self._closed = False

    @classmethod
    def from_config(cls, cfg: PolicyConfig) -> LocalPolicy:
        """`policy.model` (or the default tiny model, built on first use), `policy.device`, `policy.seed`."""
        return cls(LocalModel.load(ensure_model(cfg.model), device=cfg.device, seed=cfg.seed))

    @property
    def name(self) -> str:
        return self.model.name

    async def generate(self, prompts: Sequence[str], sampling: Sampling) -> list[list[Completion]]:
        return await _call(self, self.model.generate, list(prompts), sampling)

    async def close(self) -> None:
        async with self._lock:
            if not self._closed:
                self._closed = True
                await asyncio.to_thread(self.model.close)


class LocalEncoder:
    """The `Encoder` protocol on a `LocalModel` (shareable with a `LocalPolicy`; closing it does not
    unload a shared model, the policy's close does)."""

    def __init__(self, model: LocalModel, *, owns_model: bool = False) -> None:
        self.model = model
        self._owns = owns_model
        self._lock = asyncio.Lock()
        self._closed = False

    @classmethod
    def from_config(cls, cfg: PolicyConfig) -> LocalEncoder:
        return cls(LocalModel.load(ensure_model(cfg.model), device=cfg.device, seed=cfg.seed), owns_model=True)

    async def encode(self, texts: Sequence[str]) -> list[list[float]]:
        return await _call(self, self.model.encode, list(texts))

    async def close(self) -> None:
        async with self._lock:
            if not self._closed:
                self._closed = True
                if self._owns:
                    await asyncio.to_thread(self.model.close)


async def _call(owner: LocalPolicy | LocalEncoder, func: Callable[..., T], *args: Any) -> T:
    async with owner._lock:
        if owner._closed:
            raise PolicyError(f"local model {owner.model.name} is closed")
        try:
            return await asyncio.to_thread(func, *args)
        except (RuntimeError, ValueError) as exc:  # torch reports OOM and shape errors as RuntimeError
            raise PolicyError(f"local model {owner.model.name} failed: {type(exc).__name__}: {exc}") from exc

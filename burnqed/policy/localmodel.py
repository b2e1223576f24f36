"""The in-process transformers backend: sampling with true log-probs, and burnqed's encoder (embeddings).

    model = LocalModel.load("~/.cache/burnqed/models/tiny-v3", device="auto", seed=0)
    model.generate(prompts, Sampling(n=8, temperature=0.8, stop=("```",)))  # [[Completion × 8] per prompt]
    model.encode(texts)                                                     # [[float × hidden] per text]

The async protocols on it, `LocalPolicy` and `LocalEncoder`, are in `policy/localpolicy.py`.

Decoding is burnqed's own loop over the KV cache, sampling as SGLang does (docs/search.md, "The local backend");
`encode` is THE embedding of the value model, wherever it runs (docs/ebm.md). On the CPU a plain Llama is read
without transformers (`decoder.load_torch_llama`, `modelfolder.TokenizersOnlyTokenizer`). Every model call holds
one lock; torch and transformers are imported inside functions, so importing this module is cheap.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from burnqed.errors import ModelError, ModelInputError
from burnqed.policy.base import (
    POOLINGS,
    Completion,
    EncoderSpec,
    Pooling,
    Sampling,
    Seeds,
    check_seeds,
    context_problem,
    sampling_problem,
)
from burnqed.policy.grammar import GrammarRows, Grammars
from burnqed.policy.modelfolder import context_length, encode_texts, load_tokenizer, tokenizer_probe
from burnqed.policy.modelpath import missing_model_files, no_model_folder, not_a_model_folder
from burnqed.policy.sampler import Penalties, sampling_filter
from burnqed.policy.tiny import HFModel, HFTokenizer, quiet_transformers

if TYPE_CHECKING:
    import torch

DEFAULT_BATCH_TOKENS = 16384  # tokens per encoder forward pass (texts × longest text): bounds its workspace


@dataclass(frozen=True, slots=True)
class Generation:
    """One sampled completion with everything the HTTP server reports.

    `token_ids`/`token_logprobs` cover the generated tokens up to and including the one that completed
    the stop string (or EOS); `text` is cut before the stop string. `matched` is the stop string or the
    EOS token id when `finish_reason` is "stop", None for "length" and "abort". An "abort" was never
    generated: its prompt does not fit the context (`error` says why, in SGLang's words).
    """

    text: str
    token_ids: tuple[int, ...]
    token_logprobs: tuple[float, ...]
    finish_reason: str
    matched: str | int | None
    prompt_tokens: int
    error: str | None = None

    @property
    def logprob(self) -> float:
        return float(sum(self.token_logprobs))

    def completion(self) -> Completion:
        return Completion(self.text, self.logprob, len(self.token_ids), self.finish_reason, self.error)


def resolve_device(device: str) -> str:
    """`auto` → `cuda` when CUDA is available, else `cpu`; anything else as given."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class LocalModel:
    """A causal LM and its tokenizer, loaded once; thread-safe (one call at a time)."""

    def __init__(self, model: HFModel, tokenizer: HFTokenizer, path: Path,
                 seed: int | None = None, *, llama_decoder: bool = True) -> None:
        import torch

        from burnqed.policy.decoder import LlamaDecoder, TorchLlama

        self.model = model
        # The decoding loop's forward pass: burnqed's `LlamaDecoder` for a plain Llama (burnqed/policy/decoder.py: a
        # `TorchLlama` is nothing else), else the transformers model's own. `llama_decoder=False` forces the latter for
        # a transformers model (the tests compare the two).
        if isinstance(model, TorchLlama):
            self._forward: Any = model.decoder
        else:
            self._forward = (LlamaDecoder.for_model(model) if llama_decoder else None) or model
        self.tokenizer = tokenizer
        self.path = path
        self.device = model.device
        self.context_length = context_length(model.config)
        self._lock = threading.Lock()
        self._generator = torch.Generator(device=self.device)
        self._grammars: Grammars | None = None  # built on the first request with a grammar (`_grammar_rows`)
        self.reseed(seed)

    @classmethod
    def load(cls, path: str | Path, device: str = "auto", seed: int | None = None,
             encoder_only: bool = False, *, avoid_transformers: bool = True) -> LocalModel:
        """Load a model folder (weights, config, tokenizer). Raises `ModelError` with what is wrong.
        `encoder_only` loads the decoder stack without the LM head (`AutoModel`): `encode` never uses the head,
        which is vocabulary × hidden weights (0.8 GB in bf16 for a 7B model with an untied head); such a model
        cannot generate. On the CPU a plain Llama in safetensors is read without transformers' model classes
        (`burnqed.policy.decoder.load_torch_llama`: the same weights and arithmetic, a start ~1.4 s shorter);
        `avoid_transformers=False` reads it through transformers anyway (the tests compare the two)."""
        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise ModelInputError(no_model_folder(folder))
        missing = missing_model_files(folder)
        if missing:
            raise ModelInputError(not_a_model_folder(folder, missing))
        import torch

        from burnqed.policy.decoder import load_torch_llama

        where = resolve_device(device)
        avoid_transformers = avoid_transformers and where == "cpu"
        try:
            # a base model's as policy.modelfolder writes it; on the CPU with `tokenizers` alone where that reads
            # it as transformers would (modelfolder.TokenizersOnlyTokenizer)
            tokenizer: HFTokenizer = load_tokenizer(folder, avoid_transformers=avoid_transformers)
            model: HFModel = load_torch_llama(folder, head=not encoder_only) if avoid_transformers else None
            if model is None:
                from transformers import AutoModel, AutoModelForCausalLM

                quiet_transformers()
                # float32 on CPU (half precision is slow there and skews log-probs); the saved dtype on GPU.
                dtype = torch.float32 if where == "cpu" else "auto"
                loader: Any = AutoModel if encoder_only else AutoModelForCausalLM
                model = loader.from_pretrained(folder, dtype=dtype).to(where)
                model.eval()
        except Exception as exc:  # corrupt files surface as many types (SafetensorError, JSON, OSError, ...)
            raise ModelError(f"cannot load the model in {folder}: {type(exc).__name__}: {exc}") from None
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

    def generate(self, prompts: Sequence[str], sampling: Sampling,
                 seeds: Seeds | None = None) -> list[list[Completion]]:
        """`sampling.n` completions per prompt, grouped per prompt, in prompt order (`seeds`: `generate_detailed`)."""
        return [[g.completion() for g in group] for group in self.generate_detailed(prompts, sampling, seeds)]

    def generate_detailed(self, prompts: Sequence[str | list[int]], sampling: Sampling,
                          seeds: Seeds | None = None) -> list[list[Generation]]:
        """Like `generate`, with token ids, per-token log-probs and the matched stop; a prompt is a text or its token
        ids (SGLang's `input_ids`: generated from exactly those, no BOS added). A prompt that does not
        fit the context with `max_new_tokens` is not generated: its `n` entries are "abort"s with the reason,
        and the other prompts are generated as usual. `seeds[i][j]` seeds sample j of prompt i, which is
        then decoded alone (docs/search.md, "The local backend"); None: the model's own stream."""
        problem = sampling_problem(sampling, seeded=seeds is not None)
        if problem is not None:
            raise ValueError(f"invalid sampling parameters: {problem}")
        check_seeds(prompts, sampling.n, seeds)
        if not prompts:
            return []
        import torch

        n = sampling.n
        with self._lock, torch.inference_mode():
            self._check_open()
            if not self.can_generate:
                raise RuntimeError(f"the model {self.name} was loaded without its LM head (encoder only)")
            if sampling.ebnf:
                self._grammar_set().compiled(sampling.ebnf)  # GrammarError for the whole request, as SGLang
            counts = self._count(prompts)
            problems = [context_problem(count, sampling.max_new_tokens, self.context_length) for count in counts]
            fitting = [i for i, problem in enumerate(problems) if problem is None]
            if seeds is None:
                flat = self._sample([prompts[i] for i in fitting], sampling) if fitting else []
            else:  # each seeded prompt alone: its samples must not depend on the batch around it
                flat = [g for i in fitting for g in self._sample([prompts[i]], sampling, list(seeds[i]))]
        groups: list[list[Generation]] = []
        for count, problem in zip(counts, problems, strict=True):
            if problem is not None:
                groups.append([Generation("", (), (), "abort", None, count, problem)] * n)
            else:
                groups.append(flat[:n])
                flat = flat[n:]
        return groups

    def count_tokens(self, texts: Sequence[str | list[int]]) -> list[int]:
        """Tokens of each text as SGLang counts a prompt: the tokenizer's ids, special tokens (BOS) included."""
        with self._lock:
            self._check_open()
            return self._count(texts)

    def _count(self, texts: Sequence[str | list[int]]) -> list[int]:
        return [len(ids) for ids in self._ids(texts)]

    def _ids(self, prompts: Sequence[str | list[int]]) -> list[list[int]]:
        """Each prompt's token ids: a text's as `encode_texts` gives them (BOS included), token ids as they are."""
        texts = [p for p in prompts if isinstance(p, str)]
        encoded = iter(encode_texts(self.tokenizer, texts) if texts else [])
        return [next(encoded) if isinstance(p, str) else list(p) for p in prompts]

    def _grammar_set(self) -> Grammars:
        """The compiled grammars of this model's vocabulary (config.json's vocab_size: its LM head's rows)."""
        if self._grammars is None:
            self._grammars = Grammars(self.tokenizer, self.path, int(self.model.config.vocab_size))
        return self._grammars

    def _sample(self, prompts: list[str | list[int]], sampling: Sampling,
                seeds: list[int] | None = None) -> list[Generation]:
        """Decode every prompt's n samples in one batch; `seeds` (one per row, prompt-major): a generator per row."""
        import torch

        # Seeded rows: each row's uniforms for every step, drawn up front from its own generator (rows leave with
        # their row of the batch).
        uniforms = None if seeds is None else torch.stack([
            torch.rand(sampling.max_new_tokens, generator=torch.Generator(device=self.device).manual_seed(seed),
                       device=self.device, dtype=torch.float64) for seed in seeds])
        out, mask, positions = self._prefill(prompts)
        prompt_tokens = mask.sum(dim=1).tolist()
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
        penalties = Penalties(sampling, logits)
        grammar = self._grammar_set().rows(sampling.ebnf, rows) if sampling.ebnf else None
        for step in range(sampling.max_new_tokens):
            chosen, chosen_logp = self._step(logits, sampling, penalties,
                                             None if uniforms is None else uniforms[:, step], (grammar, live))
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
                if uniforms is not None:
                    uniforms = uniforms[select]
                penalties.select(select)
                live = [live[row] for row in keep]
            mask = torch.cat([mask, mask.new_ones((len(live), 1))], dim=1)
            out = self._forward(input_ids=chosen[:, None], attention_mask=mask, position_ids=next_pos[:, None],
                                past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            logits = out.logits[:, -1, :].float()
            next_pos = next_pos + 1
        finished_rows = [g for g in done if g is not None]
        if len(finished_rows) != rows:  # every row ends by max_new_tokens; a gap would misalign the groups
            raise RuntimeError(f"{rows - len(finished_rows)} rows did not finish")
        return finished_rows

    def _prefill(self, prompts: list[str | list[int]]) -> tuple[Any, torch.Tensor, torch.Tensor]:
        """One forward pass over the left-padded prompts: the model's output (the last position's logits and the
        cache), the attention mask and the position ids."""
        import torch

        enc = self.tokenizer.pad({"input_ids": self._ids(prompts)}, padding=True,
                                 padding_side="left")
        input_ids = torch.tensor(enc["input_ids"], dtype=torch.long, device=self.device)
        mask = torch.tensor(enc["attention_mask"], dtype=torch.long, device=self.device)
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        out = self._forward(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True,
                            logits_to_keep=1)
        return out, mask, positions

    def _step(self, logits: torch.Tensor, sampling: Sampling, penalties: Penalties, uniforms: torch.Tensor | None,
              grammar: tuple[GrammarRows | None, list[int]] = (None, [])) -> tuple[torch.Tensor, torch.Tensor]:
        """One token per row (`_pick`) after the grammar's mask (`grammar`: the rows' matchers and each batch row's
        index among them; None: unconstrained) and the penalties, with its log-prob as SGLang reports it under
        SGLANG_RETURN_ORIGINAL_LOGPROB: after the mask and the penalties, before the temperature; the penalties count
        it and the grammar takes it."""
        import torch

        matchers, live = grammar
        if matchers is not None:
            matchers.mask(logits, live)
        logits = penalties.apply(logits)
        chosen = self._pick(logits, sampling, uniforms)
        penalties.count(chosen)
        if matchers is not None:
            for row, token in enumerate(chosen.tolist()):
                matchers.accept(live[row], token)
        return chosen, torch.log_softmax(logits, dim=-1).gather(1, chosen[:, None]).squeeze(1)

    def _pick(self, logits: torch.Tensor, sampling: Sampling,
              uniforms: torch.Tensor | None = None) -> torch.Tensor:
        """One token per row: greedy at temperature 0 (and at top_k 1), else from what `sampling_filter` keeps, with
        the model's stream or, given `uniforms` (one per row, from the row's seed), each row by inverse transform
        sampling with its own."""
        import torch

        if sampling.temperature == 0 or sampling.top_k == 1:  # SGLang turns temperature 0 into top_k = 1
            return logits.argmax(dim=-1)
        probs = sampling_filter(torch.softmax(logits / sampling.temperature, dim=-1), sampling)
        if uniforms is None:
            return torch.multinomial(probs, 1, generator=self._generator).squeeze(1)
        # The first token whose cumulative mass exceeds u × total (a row-wise computation: no other row matters).
        cdf = probs.double().cumsum(dim=-1)
        chosen = (cdf <= uniforms[:, None] * cdf[:, -1:]).sum(dim=-1)
        return chosen.clamp(max=probs.shape[-1] - 1)

    def _finished(self, ids: list[int], token: int, eos: int | None, stops: tuple[str, ...],
                  last: bool) -> tuple[str, str, str | int | None] | None:
        """(text, finish_reason, matched) once this row is done, else None.

        SGLang 0.5.6's order (`schedule_batch.Req.check_finished`): the length limit first, then EOS, then the
        stop strings in the order given. So a stop string completed by the last allowed token is a "length"
        finish and stays in the text; a stop string is trimmed at its first occurrence
        (`detokenizer_manager.trim_matched_stop`). SGLang 0.5.23, the serving image's now, checks stop strings
        and EOS before the length (`Req.update_finish_state`), so it reports that case as a trimmed "stop"; we
        keep 0.5.6's order on purpose: it is the harder case for a client (an untrimmed stop string), and an
        older serving image still produces it.
        """
        text: str = self.tokenizer.decode(ids, skip_special_tokens=True)
        if last:
            return text, "length", None
        if eos is not None and token == eos:
            return text, "stop", token
        for stop in stops:
            if stop in text:
                return text[: text.find(stop)], "stop", stop
        return None

    # ----------------------------------------------------------------------------------- encoding

    def encode_limit(self, max_tokens: int | None) -> int:
        """Tokens a text keeps when embedded: `max_tokens`, at most the context length (None: the context)."""
        return self.context_length if max_tokens is None else max(1, min(max_tokens, self.context_length))

    def encoder_spec(self, pooling: Pooling = "mean", normalize: bool = False,
                     max_tokens: int | None = None) -> EncoderSpec:
        """What `encode` with these settings computes (the encoder identity's spec)."""
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
        dtype = str(self.model.dtype).removeprefix("torch.") if self.model is not None else "unknown"
        return EncoderSpec(pooling=pooling, normalize=normalize, layer=-1, max_tokens=self.encode_limit(max_tokens),
                           dtype=dtype, probe=tuple(tokenizer_probe(self.tokenizer)))

    def encode(self, texts: Sequence[str], *, pooling: Pooling = "mean", normalize: bool = False,
               max_tokens: int | None = None, batch_tokens: int = DEFAULT_BATCH_TOKENS) -> list[list[float]]:
        """One vector per text (docs/ebm.md): `pooling` "mean" (masked mean over the real tokens, BOS
        included) or "last", of the last hidden states, optionally L2-normalised; texts cut to `max_tokens`."""
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
        if not texts:
            return []
        import torch

        limit = self.encode_limit(max_tokens)
        vectors: list[list[float]] = []
        with self._lock, torch.inference_mode():
            self._check_open()
            ids = encode_texts(self.tokenizer, list(texts), max_tokens=limit)
            decoder = self._decoder()
            for batch in token_batches(ids, batch_tokens):
                vectors.extend(self._pool(decoder, batch, pooling, normalize))
        return vectors

    def _pool(self, decoder: Any, batch: list[list[int]], pooling: str, normalize: bool) -> list[list[float]]:
        result: list[list[float]] = pool_hidden_states(decoder, batch, int(self.tokenizer.pad_token_id), pooling,
                                                       normalize, self.device).cpu().tolist()
        return result

    def reserve_encode_workspace(self, batch_tokens: int, max_tokens: int | None) -> None:
        """Run one forward pass of the largest batch `encode` can build, so that CUDA's caching allocator
        holds that workspace from now on (and a budget too small fails at start, not mid-search)."""
        import torch

        limit = self.encode_limit(max_tokens)
        rows = max(1, batch_tokens // limit)
        token = self.tokenizer.pad_token_id or 0
        with self._lock, torch.inference_mode():
            self._check_open()
            self._pool(self._decoder(), [[token] * limit] * rows, "mean", False)

    def _decoder(self) -> Any:
        """The decoder stack whose last hidden states `encode` pools: the model itself when loaded without its head
        (a `TorchLlama`: its decoder's `hidden`)."""
        from burnqed.policy.decoder import TorchLlama

        if isinstance(self.model, TorchLlama):
            return self.model.decoder.hidden
        return self.model.get_decoder() if self.can_generate else self.model

    @property
    def can_generate(self) -> bool:
        """False for a model loaded `encoder_only` (no LM head)."""
        return self.model is not None and hasattr(self.model, "lm_head")

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


def pool_hidden_states(decoder: Any, batch: list[list[int]], pad_token_id: int, pooling: str, normalize: bool,
                       device: Any) -> torch.Tensor:
    """The encoder's vectors of token-id lists (B, d), float32: the one pooling of burnqed's embeddings, used by
    `LocalModel.encode` (under inference mode) and by joint training (with gradients, `burnqed.sft.joint`).
    Right padding: under the causal mask the real tokens never see the padding after them (lesson 4); `mean` is
    the masked mean over the real tokens (BOS included), `last` the last real token's state."""
    import torch

    width = max(len(ids) for ids in batch)
    input_ids = torch.tensor([ids + [pad_token_id] * (width - len(ids)) for ids in batch], device=device)
    mask = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids in batch], device=device)
    hidden: torch.Tensor = decoder(input_ids=input_ids, attention_mask=mask, use_cache=False).last_hidden_state.float()
    if pooling == "mean":
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)
    elif pooling == "last":
        pooled = hidden[torch.arange(len(batch), device=device), mask.sum(dim=1) - 1]
    else:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
    if normalize:
        pooled = torch.nn.functional.normalize(pooled, p=2, dim=-1)
    return pooled


def token_batches(ids: list[list[int]], budget: int) -> list[list[list[int]]]:
    """Consecutive groups of `ids` whose size × longest member stays within `budget` tokens (one text at least)."""
    batches: list[list[list[int]]] = []
    current: list[list[int]] = []
    longest = 0
    for item in ids:
        wider = max(longest, len(item))
        if current and (len(current) + 1) * wider > budget:
            batches.append(current)
            current, wider = [], len(item)
        current.append(item)
        longest = wider
    if current:
        batches.append(current)
    return batches

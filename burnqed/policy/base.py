"""The `Policy` and `Encoder` seams and the records they exchange.

Search and the EBM type their model argument with these Protocols and never import a concrete backend:
the SGLang HTTP client, the in-process transformers backend and test doubles all fit.
"""

from __future__ import annotations

import hashlib
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from types import TracebackType
from typing import Any, Literal, Protocol, Self

Pooling = Literal["mean", "last"]
POOLINGS: tuple[Pooling, ...] = ("mean", "last")


@dataclass(frozen=True, slots=True)
class Sampling:
    """How to sample: `n` completions per prompt. Maps one to one onto SGLang's `sampling_params`, and every field
    is sent in every request (a field left out would be the server's default, which a server may take from the model
    folder: docs/search.md, "Every sampling field sent"). The defaults after `max_new_tokens` are plain sampling:
    no top-k (-1 = the whole vocabulary), no min-p, no penalties, no grammar. `ebnf`: a grammar in xgrammar's EBNF
    that every completion follows (SGLang's `ebnf`, sent only when set; the planner's `text.sketch_grammar`)."""

    n: int = 1
    temperature: float = 0.8
    top_p: float = 0.95
    max_new_tokens: int = 128
    stop: tuple[str, ...] = ()
    top_k: int = -1
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    ebnf: str | None = None


def sampling_problem(sampling: Sampling, *, seeded: bool = False) -> str | None:
    """Why SGLang 0.5.23 refuses `sampling` (`SamplingParams.verify`, its bounds; None: it is valid), plus one
    refusal of its own: min_p with a seed, which SGLang's seeded sampler (`--enable-deterministic-inference`,
    `top_k_top_p_min_p_sampling_from_probs_torch`) does not refuse but fails an assertion on, taking the server
    down. Also: n and max_new_tokens at least 1 (burnqed asks for something)."""
    if sampling.n < 1 or sampling.max_new_tokens < 1:
        return f"n and max_new_tokens must be at least 1, got n={sampling.n}, max_new_tokens={sampling.max_new_tokens}"
    checks = [
        (math.isfinite(sampling.temperature) and sampling.temperature >= 0, "temperature must be a non-negative "
         f"finite number, got {sampling.temperature}"),
        (0 < sampling.top_p <= 1, f"top_p must be in (0, 1], got {sampling.top_p}"),
        (sampling.top_k == -1 or sampling.top_k >= 1,
         f"top_k must be -1 (disable) or at least 1, got {sampling.top_k}"),
        (0 <= sampling.min_p <= 1, f"min_p must be in [0, 1], got {sampling.min_p}"),
        (0 < sampling.repetition_penalty <= 2, "repetition_penalty must be in (0, 2] (1.0 = no penalty), got "
         f"{sampling.repetition_penalty}"),
        (-2 <= sampling.frequency_penalty <= 2, f"frequency_penalty must be in [-2, 2], got "
         f"{sampling.frequency_penalty}"),
        (-2 <= sampling.presence_penalty <= 2, f"presence_penalty must be in [-2, 2], got {sampling.presence_penalty}"),
        (not (seeded and sampling.min_p > 0), f"min_p={sampling.min_p} cannot be combined with a sampling seed: "
         "SGLang's seeded sampler asserts on min_p (and stops the server); set min_p to 0 or sample unseeded"),
    ]
    return next((message for ok, message in checks if not ok), None)


@dataclass(frozen=True, slots=True)
class Completion:
    """One sampled completion of one prompt.

    `text` has the stop string trimmed. `logprob` is the sum of the true (pre-temperature) token
    log-probs of the generated tokens and `n_tokens` their count, so callers can length-normalise.
    `finish_reason` is "stop" (a stop string or EOS), "length" (hit max_new_tokens) or "abort". An abort
    with an `error` is a prompt the model could not be asked at all (too long for its context, or refused
    by the server): every completion of that prompt is such an abort, with no text; the other prompts of
    the call are answered as usual (see `prompt_error`).
    """

    text: str
    logprob: float
    n_tokens: int
    finish_reason: str = "stop"
    error: str | None = None


# Per prompt, one seed per sample (`Sampling.n` of them): `Policy.generate`'s `seeds`. A seeded sample depends on
# its prompt, its seed and the sampling settings only, never on what else is in the batch or in flight.
Seeds = Sequence[Sequence[int]]
SEED_BITS = 63  # SGLang's sampling_seed is a signed 64-bit integer (SamplingParams.verify); sample_seed's are >= 0


def sample_seed(run_seed: int, theorem: str, expansion: int, sample: int, attempt: int = 0) -> int:
    """THE per-request sampling seed: sample `sample` of expansion `expansion` of `theorem` in its search number
    `attempt` (eval's pass k of pass@n; 0 otherwise) of a run seeded with `run_seed` (policy.seed). Each theorem
    draws from its own streams, so a run's samples (and so its figures) do not depend on how many theorems search
    at once, in which order, or on how many shards. A hash (BLAKE2b), not a generator: the keys give the same seed
    in every process and Python version."""
    key = f"{run_seed}\x1f{theorem}\x1f{attempt}\x1f{expansion}\x1f{sample}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") >> (64 - SEED_BITS)


def expansion_seeds(run_seed: int | None, theorem: str, expansions: Sequence[int], n: int,
                    first_sample: int = 0, attempt: int = 0) -> list[list[int]] | None:
    """`Policy.generate`'s seeds for one prompt per expansion key in `expansions`, `n` samples each numbered from
    `first_sample`, in search number `attempt`; None when the run is not seeded (`run_seed` None: the policy's own
    stream)."""
    if run_seed is None:
        return None
    return [[sample_seed(run_seed, theorem, expansion, first_sample + j, attempt) for j in range(n)]
            for expansion in expansions]


async def ask(policy: Policy, prompts: Sequence[str], sampling: Sampling,
              seeds: Seeds | None) -> list[list[Completion]]:
    """`policy.generate`, passing `seeds` only when there are some (a policy written before seeds existed still
    answers an unseeded run)."""
    if seeds is None:
        return await policy.generate(prompts, sampling)
    return await policy.generate(prompts, sampling, seeds)


def check_seeds(prompts: Sequence[object], n: int, seeds: Seeds | None) -> None:
    """`ValueError` unless `seeds` is None or holds `n` integer seeds in SGLang's range, [-2**63, 2**63), for
    each prompt."""
    if seeds is None:
        return
    if len(seeds) != len(prompts):
        raise ValueError(f"seeds for {len(seeds)} prompts, expected {len(prompts)}")
    for row in seeds:
        if len(row) != n:
            raise ValueError(f"{len(row)} seeds for a prompt sampled {n} times")
        for seed in row:
            if isinstance(seed, bool) or not isinstance(seed, int) or not -(1 << SEED_BITS) <= seed < 1 << SEED_BITS:
                raise ValueError(f"a sampling seed must be an integer in [-2**{SEED_BITS}, 2**{SEED_BITS}), "
                                 f"got {seed!r}")


def context_problem(prompt_tokens: int, max_new_tokens: int | None, context: int) -> str | None:
    """Why SGLang refuses a prompt of `prompt_tokens` tokens (None: it fits), in SGLang's own words
    (`TokenizerManager._validate_one_request`, 0.5.6): the prompt alone must be shorter than the context, and
    prompt + max_new_tokens too (checked only when the request sets max_new_tokens)."""
    if prompt_tokens >= context:
        return f"The input ({prompt_tokens} tokens) is longer than the model's context length ({context} tokens)."
    if max_new_tokens is not None and prompt_tokens + max_new_tokens >= context:
        return (
            f"Requested token count exceeds the model's maximum context length of {context} tokens. You requested "
            f"a total of {prompt_tokens + max_new_tokens} tokens: {prompt_tokens} tokens from the input messages and "
            f"{max_new_tokens} tokens for the completion. Please reduce the number of tokens in the input messages "
            "or the completion to fit within the limit."
        )
    return None


def prompt_error(completions: Sequence[Completion]) -> str | None:
    """Why the policy could not answer a prompt (its completions are all aborts with an error), else None."""
    if completions and all(c.finish_reason == "abort" and c.error for c in completions):
        return completions[0].error
    return None


def refused(error: str, n: int) -> list[Completion]:
    """The `n` completions of a prompt the policy could not answer, each carrying `error`."""
    return [Completion("", 0.0, 0, "abort", error)] * n


@dataclass(frozen=True, slots=True)
class EncoderSpec:
    """What an encoder computes from a text: with the model's digest, enough to tell whether two encoders give
    the same vectors (the value model's encoder identity records it; docs/ebm.md)."""

    pooling: Pooling  # "mean": masked mean over the text's tokens (BOS included); "last": the last token's state
    normalize: bool  # L2-normalised vectors
    layer: int  # which hidden states: -1 = the model's last hidden state (after its final norm)
    max_tokens: int  # texts are cut to their first max_tokens tokens
    dtype: str  # the weights' dtype ("float32" on CPU, the saved one, e.g. "bfloat16", on GPU)
    # The ids of burnqed.policy.modelfolder.PROBE_TEXT as this encoder tokenizes it (BOS rule included); () = unknown.
    probe: tuple[int, ...] = ()


def encoder_info(model: str, digest: str, spec: EncoderSpec) -> dict[str, Any]:
    """What `burnqed serve` answers on `GET /encoder_info`: its model, the folder's fingerprint, its spec (read back
    by `burnqed.ebm.encoder_identity.served_identity`)."""
    return {"backend": "burnqed", "model": model, "digest": digest, "spec": asdict(spec)}


class AsyncClosing(ABC):
    """The async context manager every policy, encoder and scorer shares: `async with x:` closes `x` on the way
    out, whatever happened. Implementations make `close()` idempotent."""

    @abstractmethod
    async def close(self) -> None:
        """Release what the object holds (a model, connections, an encoder)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


class AsyncResource(Protocol):
    """What every policy, encoder and scorer is: closable, and an async context manager that closes it
    (`AsyncClosing` implements the pair)."""

    async def close(self) -> None: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


class Policy(AsyncResource, Protocol):
    """Samples completions for many prompts in one call (`async with policy:` closes it)."""

    @property
    def name(self) -> str:
        """The model's name or path, as reported in results."""
        ...

    async def generate(self, prompts: Sequence[str], sampling: Sampling,
                       seeds: Seeds | None = None) -> list[list[Completion]]:
        """`sampling.n` completions for each prompt, in prompt order (a list per prompt). A prompt the model
        cannot be asked (too long for its context) is a value, not an exception: its completions are aborts
        carrying the reason (`prompt_error`), and only that prompt fails. `seeds` (per prompt, one per sample;
        `check_seeds`): completion j of prompt i is drawn with seed `seeds[i][j]` alone, the same whatever else
        is asked at the same time; None: from the policy's own stream."""
        ...


class Encoder(AsyncResource, Protocol):
    """Embeds texts: burnqed's encoder (`LocalModel.encode`: by default the mean-pooled last hidden states of the
    policy model), in this process or behind `burnqed serve` (`async with encoder:` closes it)."""

    async def encode(self, texts: Sequence[str]) -> list[list[float]]: ...

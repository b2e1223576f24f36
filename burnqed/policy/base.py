"""The `Policy` and `Encoder` seams and the records they exchange.

Search and the EBM type their model argument with these Protocols and never import a concrete backend:
the SGLang HTTP client, the in-process transformers backend and test doubles all fit.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Literal, Protocol, Self

Pooling = Literal["mean", "last"]
POOLINGS: tuple[Pooling, ...] = ("mean", "last")


@dataclass(frozen=True, slots=True)
class Sampling:
    """How to sample: `n` completions per prompt. Maps one to one onto SGLang's `sampling_params`."""

    n: int = 1
    temperature: float = 0.8
    top_p: float = 0.95
    max_new_tokens: int = 128
    stop: tuple[str, ...] = ()


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
    # The ids of burnqed.modelfolder.PROBE_TEXT as this encoder tokenizes it (BOS rule included); () = unknown.
    probe: tuple[int, ...] = ()


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

    async def generate(self, prompts: Sequence[str], sampling: Sampling) -> list[list[Completion]]:
        """`sampling.n` completions for each prompt, in prompt order (a list per prompt). A prompt the model
        cannot be asked (too long for its context) is a value, not an exception: its completions are aborts
        carrying the reason (`prompt_error`), and only that prompt fails."""
        ...


class Encoder(AsyncResource, Protocol):
    """Embeds texts: burnqed's encoder (`LocalModel.encode`: by default the mean-pooled last hidden states of the
    policy model), in this process or behind `burnqed serve` (`async with encoder:` closes it)."""

    async def encode(self, texts: Sequence[str]) -> list[list[float]]: ...

"""SGLang's sampler on raw logits, as the local backend decodes (docs/search.md, "Every sampling field sent"): its
penalties (`apply_penalties`, kept per decoding batch by `Penalties`) and its filters (`sampling_filter`, `nucleus`).

    probs = sampling_filter(torch.softmax(logits / sampling.temperature, dim=-1), sampling)

torch is imported inside functions, so importing this module is cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from burnqed.policy.base import Sampling

if TYPE_CHECKING:
    import torch


def penalized(sampling: Sampling) -> bool:
    """Whether `sampling` penalizes tokens already generated (SGLang's penalizers' `_is_required`)."""
    return sampling.repetition_penalty != 1 or sampling.frequency_penalty != 0 or sampling.presence_penalty != 0


def apply_penalties(logits: torch.Tensor, counts: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """SGLang's penalties (srt/sampling/penaltylib) on raw logits, given `counts`, how often each row generated each
    token so far (the prompt's tokens do not count): the frequency penalty times the count and the presence
    penalty once per generated token are subtracted, then a generated token's logit is divided by the repetition
    penalty when positive and multiplied by it when negative. Additive first, scaling second: the order of SGLang's
    default overlap scheduler (`SamplingBatchInfo.update_penalties`)."""
    import torch

    seen = counts > 0
    if sampling.frequency_penalty != 0 or sampling.presence_penalty != 0:
        logits = logits - sampling.frequency_penalty * counts - sampling.presence_penalty * seen.to(logits.dtype)
    if sampling.repetition_penalty != 1:
        scaled = torch.where(logits < 0, logits * sampling.repetition_penalty, logits / sampling.repetition_penalty)
        logits = torch.where(seen, scaled, logits)
    return logits


class Penalties:
    """How often each row of a decoding batch generated each token so far, kept only when `sampling` penalizes
    (as SGLang's penalizers are prepared only when required), and the penalties that follow from it."""

    def __init__(self, sampling: Sampling, logits: torch.Tensor) -> None:
        self.sampling = sampling
        self.counts = logits.new_zeros(logits.shape) if penalized(sampling) else None

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        return logits if self.counts is None else apply_penalties(logits, self.counts, self.sampling)

    def count(self, chosen: torch.Tensor) -> None:
        """Each row generated its `chosen` token."""
        import torch

        if self.counts is not None:
            self.counts[torch.arange(len(chosen), device=chosen.device), chosen] += 1

    def select(self, rows: torch.Tensor) -> None:
        """Keep these rows (the others finished)."""
        if self.counts is not None:
            self.counts = self.counts[rows]


def sampling_filter(probs: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """`probs` (after temperature) with every token SGLang's sampler would not draw set to zero (not renormalised).

    Without min_p, top-k and top-p apply jointly to the same sorted probabilities: a token stays when fewer than
    top_k tokens rank above it and the mass of those before it is at most top_p (SGLang's pytorch sampler,
    `top_k_top_p_min_p_sampling_from_probs_torch`, which its deterministic mode runs, and flashinfer's "joint"
    filter otherwise). With min_p > 0 (never seeded: `sampling_problem`), SGLang's default flashinfer sampler keeps
    the top_k, renormalises, applies top_p to that, renormalises, and drops what is below min_p × the most likely
    token's probability; that order is followed here."""
    import torch

    top_k = sampling.top_k if 1 <= sampling.top_k < probs.shape[-1] else None
    if top_k is None and sampling.min_p == 0:
        return probs if sampling.top_p >= 1 else nucleus(probs, sampling.top_p)
    ranked, order = probs.sort(dim=-1, descending=True)
    if sampling.min_p == 0:
        mass = ranked.cumsum(dim=-1)
        ranked = ranked.masked_fill(mass - ranked > sampling.top_p, 0.0)
        if top_k is not None:
            ranked[:, top_k:] = 0.0
    else:
        if top_k is not None:
            ranked[:, top_k:] = 0.0
            ranked = ranked / ranked.sum(dim=-1, keepdim=True)
        if sampling.top_p < 1:
            mass = ranked.cumsum(dim=-1)
            ranked = ranked.masked_fill(mass - ranked > sampling.top_p, 0.0)
        ranked = ranked.masked_fill(ranked < ranked[:, :1] * sampling.min_p, 0.0)
    return torch.zeros_like(probs).scatter(-1, order, ranked)


NUCLEUS_CANDIDATES = 64  # the most likely tokens `nucleus` looks at first


def nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Top-p filtering: `probs` with every token outside the nucleus set to zero, where a token stays while the
    mass of the more likely tokens before it is at most `top_p` (so at least one stays), that mass summed in order
    from the most likely. Every token past the k most likely has at least their mass before it, so when that mass
    exceeds top_p in every row (by a margin of a few float32 roundings), the k most likely (a top-k) decide the
    nucleus, with the same sums as a sort of the whole vocabulary; otherwise the vocabulary is sorted (on CPU that
    sort costs several top-k's, and a tactic's next token rarely spreads its mass that thin)."""
    import torch

    k = min(NUCLEUS_CANDIDATES, probs.shape[-1])
    ranked, order = probs.topk(k, dim=-1)
    mass = ranked.cumsum(dim=-1)
    if k < probs.shape[-1] and not bool((mass[:, -1] > top_p + 1e-6).all()):
        ranked, order = probs.sort(dim=-1, descending=True)
        mass = ranked.cumsum(dim=-1)
    return torch.zeros_like(probs).scatter(-1, order, ranked.masked_fill(mass - ranked > top_p, 0.0))

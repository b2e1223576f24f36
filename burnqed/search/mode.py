"""What a search mode is built from: the policy's sampling as the `[policy]` section says.

    sampling = policy_sampling(policy, n=search.num_proofs, max_new_tokens=search.proof_max_tokens, stop=stop)
    sampling = sampling_from_config(policy, fmt)    # one step-mode expansion
"""

from __future__ import annotations

from burnqed.config import PolicyConfig
from burnqed.policy.base import Sampling
from burnqed.text.prompt import PromptFormat, stop_strings


def policy_sampling(policy: PolicyConfig, *, n: int, max_new_tokens: int, stop: tuple[str, ...]) -> Sampling:
    """`n` samples of at most `max_new_tokens` tokens, ending at `stop`, drawn as the `policy` section says (every
    sampling field of it: none is left to the server's defaults)."""
    return Sampling(
        n=n,
        temperature=policy.temperature,
        top_p=policy.top_p,
        max_new_tokens=max_new_tokens,
        stop=stop,
        top_k=policy.top_k,
        min_p=policy.min_p,
        repetition_penalty=policy.repetition_penalty,
        frequency_penalty=policy.frequency_penalty,
        presence_penalty=policy.presence_penalty,
    )


def sampling_from_config(policy: PolicyConfig, fmt: PromptFormat | None = None) -> Sampling:
    """The sampling parameters of one step-mode expansion, with the format's stop strings."""
    return policy_sampling(policy, n=policy.num_candidates, max_new_tokens=policy.max_new_tokens,
                           stop=stop_strings(fmt or policy.prompt_format))

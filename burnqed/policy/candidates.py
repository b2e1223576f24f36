"""Raw completions → tactic candidates: extract, drop empties, deduplicate. Pure; every backend's output
goes through it, so the search never sees the same tactic twice from one expansion.

    candidates = to_candidates(PromptFormat.PLAIN_TACTIC, completions_of_one_prompt)

Two samples are the same candidate when their `normalize_tactic` keys are equal (comments, blank lines
and runs of spaces do not count). The kept sample is the most likely one; `count` says how many
samples agreed, which is a useful signal when the model is confident.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from burnqed.policy.base import Completion
from burnqed.text.completion import extract_completion, normalize_tactic
from burnqed.text.prompt import PromptFormat


@dataclass(frozen=True, slots=True)
class Candidate:
    """One distinct tactic (or proof body) to try at a node."""

    tactic: str
    logprob: float  # the sum of token log-probs of the kept sample
    n_tokens: int
    count: int = 1  # samples that normalised to this tactic
    probe: bool = False  # a configured probe tactic rather than a policy sample


def to_candidates(fmt: PromptFormat, completions: Iterable[Completion]) -> list[Candidate]:
    """Distinct non-empty candidates of one prompt, most likely first (ties keep sampling order)."""
    best: dict[str, Candidate] = {}
    for completion in completions:
        tactic = extract_completion(fmt, completion.text)
        key = normalize_tactic(tactic)
        if not key:
            continue
        seen = best.get(key)
        if seen is None:
            best[key] = Candidate(tactic, completion.logprob, completion.n_tokens)
        elif completion.logprob > seen.logprob:
            best[key] = Candidate(tactic, completion.logprob, completion.n_tokens, seen.count + 1)
        else:
            best[key] = Candidate(seen.tactic, seen.logprob, seen.n_tokens, seen.count + 1)
    return sorted(best.values(), key=lambda c: -c.logprob)


def with_probes(candidates: Sequence[Candidate], probes: Sequence[str], probe_logprob: float) -> list[Candidate]:
    """`candidates` plus the probe tactics the policy did not propose itself (tried last)."""
    seen = {normalize_tactic(c.tactic) for c in candidates}
    extra = []
    for probe in probes:
        key = normalize_tactic(probe)
        if key and key not in seen:
            seen.add(key)
            extra.append(Candidate(probe.strip(), probe_logprob, 0, count=0, probe=True))
    return [*candidates, *extra]

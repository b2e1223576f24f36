"""Hybrid mode's plain settings (docs/search.md, "Hybrid search", "Repair", "Answers"): the prompt format and the
declaration's form, the sampling and its depth schedule, the budgets and limits, the priority, the round journal, the
seeds, the repair settings and the answer prompt's format.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from burnqed.policy.base import Sampling
from burnqed.records.enums import DeclarationForm, SearchMode
from burnqed.search.journal import RoundJournal
from burnqed.search.repair import RepairSettings
from burnqed.search.trie import Priority, schedule
from burnqed.text.prompt import PromptFormat, format_for

__all__ = ["HybridSettings"]


@dataclass(frozen=True, slots=True)
class HybridSettings:
    """Plain settings of hybrid mode (built from `SearchConfig` + `PolicyConfig` by `burnqed.stages.search`).
    `sampling` gives temperature, top_p and stop strings; n and max_new_tokens follow the depth schedule."""

    fmt: PromptFormat = PromptFormat.PLAIN_PROOF
    form: DeclarationForm = DeclarationForm.BINDER  # how the prompts show the theorem's declaration
    sampling: Sampling = field(default_factory=lambda: Sampling(stop=("```",)))
    num_proofs: int = 8
    min_proofs: int = 4
    max_tokens: int = 512
    min_tokens: int = 256
    decay_depth: int = 8
    max_proofs: int = 64
    max_rounds: int = 30
    max_depth: int = 50
    timeout_s: float = 300.0
    priority: Priority = field(default_factory=Priority)
    verify: bool = True
    stop_at_first: bool = True
    marks: tuple[int, ...] = ()  # budgets (proofs sampled) at which to record what was spent
    journal: RoundJournal | None = None  # where rounds are checkpointed; None = not at all (eval)
    seed: int | None = None  # policy.seed: a round samples with `expansion_seeds` keyed on its node's id; None: not
    attempt: int = 0  # which search of each theorem this is (eval's pass k): part of the seeds
    repair: RepairSettings = field(default_factory=RepairSettings)  # search.repair_*: revisions of failed attempts
    answer_fmt: PromptFormat | None = None  # the answer prompt's whole format (an open answer); None: fmt's family's

    @property
    def whole_fmt(self) -> PromptFormat:
        """The format the open root of a theorem whose answer is open is asked in (docs/search.md, "Answers")."""
        return self.answer_fmt or format_for(self.fmt, SearchMode.WHOLE)

    def round_sampling(self, depth: int, left: int) -> Sampling:
        """The request of a round at `depth` with `left` proofs of budget left."""
        n = min(schedule(depth, self.num_proofs, self.min_proofs, self.decay_depth), left)
        tokens = schedule(depth, self.max_tokens, self.min_tokens, self.decay_depth)
        return dataclasses.replace(self.sampling, n=n, max_new_tokens=tokens)

"""Sketch mode's plain settings (docs/search.md, "Sketch search"): the planner's format and sampling, the subgoal
engine's settings, the theorem's budget, rounds and share; a subgoal's engine settings at its units of budget; and
whether a Lean environment elaborates sketches.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TypeGuard

from burnqed.lean.env import LeanEnv, SketchEnv
from burnqed.policy.base import Sampling
from burnqed.records.enums import DeclarationForm
from burnqed.search.goal_keys import LemmaSource
from burnqed.search.hybrid_settings import HybridSettings
from burnqed.search.repair import RepairSettings
from burnqed.search.step import StepSettings
from burnqed.search.subgoal_cache import REPLAYS, SubgoalCache
from burnqed.text.prompt import PromptFormat

__all__ = ["UNBOUNDED_PROOFS", "SketchSettings", "elaborates_sketches", "subgoal_budget"]

# A hybrid subgoal search is bounded by its rounds (its share); its proofs sampled are not a budget of their own.
UNBOUNDED_PROOFS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class SketchSettings:
    """Plain settings of sketch mode (built from `SearchConfig` + `PolicyConfig` by `burnqed.stages.search`): the
    planner's format and sampling (`sampling.n` sketches per request), the subgoal engine's settings (step or hybrid;
    its budget and time are set per subgoal), and the theorem's budget, time, rounds and share."""

    fmt: PromptFormat = PromptFormat.PLAIN_SKETCH  # the planner's format (`text.prompt.sketch_format`)
    form: DeclarationForm = DeclarationForm.BINDER  # how the prompts show the theorem's declaration
    sampling: Sampling = field(default_factory=lambda: Sampling(n=4, max_new_tokens=512, stop=("```",)))
    subgoal: StepSettings | HybridSettings = field(default_factory=StepSettings)  # search.sketch_subgoal_mode
    max_nodes: int = 32  # the theorem's budget: planner requests + subgoal expansions (step) or rounds (hybrid)
    sketch_rounds: int = 2  # re-plans after the first request
    sketch_subgoal_share: float = 0.25  # the share of max_nodes one subgoal's search may spend
    timeout_s: float = 300.0
    stop_at_first: bool = True  # off: every sketch of the request that verified one is still checked
    marks: tuple[int, ...] = ()  # budgets (units) at which to record what was spent (eval's rungs)
    seed: int | None = None  # policy.seed: sketch k of a theorem samples with `sample_seed(seed, name, 0, k, attempt)`
    attempt: int = 0  # which search of each theorem this is (eval's pass k): part of the seeds
    subgoal_cache_replays: int = REPLAYS  # search.subgoal_cache_replays: a lookup's cached proofs replayed at most
    sketch_depth: int = 1  # search.sketch_depth: levels of decomposition (1: the holes are searched, never planned)
    share_goals: bool = True  # off: nothing shared inside a theorem or from the cache (the tree ablation, benchmarks)
    cache: SubgoalCache | None = field(default=None, compare=False, repr=False)  # attached per job (stages.search)
    lemmas: LemmaSource | None = field(default=None, compare=False, repr=False)  # attached: a lemma library

    @property
    def share(self) -> int:
        """The units one subgoal's search may spend: `sketch_subgoal_share` of `max_nodes`, at least one."""
        return max(1, int(self.sketch_subgoal_share * self.max_nodes))


def subgoal_budget(subgoal: StepSettings | HybridSettings, units: int) -> StepSettings | HybridSettings:
    """A sketch subgoal's engine settings at `units` of budget, the one place it is decided (the stage's settings at
    the share, each subgoal's search at what is left of it): step's expansions, or hybrid's rounds (its proofs
    sampled no budget of their own); and no repair or repair feedback, since a subgoal's failed attempts are no failed
    proofs of the theorem (docs/search.md, "Sketch search")."""
    if isinstance(subgoal, HybridSettings):
        return dataclasses.replace(subgoal, max_rounds=units, max_proofs=UNBOUNDED_PROOFS, repair=RepairSettings())
    return dataclasses.replace(subgoal, max_nodes=units, feedback_tokens=None)


def elaborates_sketches(lean: LeanEnv) -> TypeGuard[SketchEnv]:
    """Whether `lean` elaborates sketches (`SketchEnv`: a lease, a worker, the in-process replay)."""
    return callable(getattr(lean, "draft_sketch", None)) and callable(getattr(lean, "file_sketch", None))
